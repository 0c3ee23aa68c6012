/* The C API of the nvfp4check Python package (SPEC.md section 7), reached through ctypes so that
 * nothing is built per interpreter. A kernel is an nvfp4_kernel_info plus a run callback with a
 * user pointer (the Python trampoline); the suite behind it is the C++ one: the same case
 * schedule, checks, oracle, case files, error maps and failure text as `nvfp4check run`.
 * Options and reports are JSON strings, so the surface stays a handful of functions. Every
 * returned string or array is freed with nvfp4check_free. */
#ifndef NVFP4CHECK_CAPI_H
#define NVFP4CHECK_CAPI_H

#include <stdint.h>

#include "kernels/nvfp4_kernel_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NVFP4CHECK_CAPI_VERSION 1

/* A kernel call: returns NVFP4_OK, NVFP4_UNSUPPORTED or NVFP4_ERROR like nvfp4_kernel_run, or
 * NVFP4CHECK_STOP to end the whole check at once (an interrupt): the case it was in is dropped
 * and the report says "stopped": true. */
typedef int (*nvfp4check_run_fn)(void *user, const nvfp4_problem *problem);
#define NVFP4CHECK_STOP (-1000)

int nvfp4check_capi_version(void);

/* {"capi_version", "abi_version", "version", "sizeof_kernel_info", "sizeof_problem",
 *  "offsetof_problem_stream", "sizeof_group", and offsetof_<struct>_<field> for the version-2
 *  fields (info out_types; problem out_type, alpha2, group; group c, alpha) and some of version 3's
 *  (sizeof_group_out; info a_formats, recipes; problem a_format, x, global_scale, seed,
 *  group_out_device; group_out global_scale): what the ctypes
 *  mirror of the ABI is held to; "cuda_build": bool, "cuda_device": bool,
 *  "cuda_why": text when there is no usable device; "default_seconds" (the run's length
 *  when neither cases nor seconds are given), "default_case_dir"} */
char *nvfp4check_build_info(void);

/* The note for a failure of `check` on stream `mine` ("current" or "legacy") of a CUDA kernel
 * whose case passed when run again with the other stream, `rerun` naming that run as the reader
 * asks for it ("stream='legacy'"); "" when a failure of that check is none work on two unordered
 * streams explains (then no second run is worth making). */
char *nvfp4check_stream_note(const char *check, const char *mine, const char *rerun);
/* A seed from the clock, the one `nvfp4check run` takes when given none (for a caller that needs
 * the seed before its first check, e.g. one seed for a whole pytest session). */
uint64_t nvfp4check_clock_seed(void);
/* Checks a kernel on seeded generated cases: the suite core's schedule for one kernel (the cases
 * `nvfp4check run --seed S` gives a kernel of this name and info), stopping at the first failure.
 * The kernel is called in this process. options_json (all optional):
 *   {"op": "gemv"|"gemm"|"grouped_gemm"|"dual_gemm"|"quantize", "cases": N, "seconds": S, "seed": S, "case_dir": DIR,
 *    "policy": "fp32"|"matrix-unit"|"exact"|..., "timeout_s": S, "keep_passing_cases": bool,
 *    "shape": {"m","n","k","l"} (every case of this shape), "command": TEXT (for the report)}
 * Neither cases nor seconds: build_info's default_seconds; no seed: one from the clock, printed.
 * Returns the report: {"seed", "command", "kernel": {the kernel's entry of `run --report`},
 * "failure_text": TEXT when it failed, "stopped": bool} or {"error": TEXT} for bad options or
 * a bad kernel info (nothing ran). */
char *nvfp4check_check(const nvfp4_kernel_info *info, nvfp4check_run_fn run, void *user, const char *options_json);

/* Like nvfp4check_check for a kernel of an ABI plugin (what `nvfp4check run --plugin` loads),
 * in this process: the baseline of the Python overhead benchmark. */
char *nvfp4check_check_plugin(const char *plugin_path, const char *kernel_name, const char *options_json);

/* Runs one saved case file through every check, like `nvfp4check replay`. options_json:
 * {"case_dir", "policy", "timeout_s"}. Same report as nvfp4check_check ("seed": null). */
char *nvfp4check_replay(const char *path, const nvfp4_kernel_info *info, nvfp4check_run_fn run, void *user,
                        const char *options_json);

/* The exact output of a case file, like `nvfp4check reference`: *out receives the little-endian
 * bytes of its output words in C order (a grouped case's groups one after another) as 16-bit
 * units, two per FP32 word (free it with nvfp4check_free), and *count their number. Returns
 * {"op", "m", "n", "k", "l", "out_type", "groups": [[m_g, n_g], ...] (grouped),
 * "expect_mismatches": N (when the case has an expect line)} or {"error": TEXT} (then *out is NULL).
 * A quantize case: Q's bytes, then SFQ's in linear order (a zero byte after an odd count), and
 * {"op", "m", "k", "l", "kb", "in_type", "format", "recipe", "q_bytes", "sfq_bytes", ...}. */
char *nvfp4check_reference(const char *path, uint16_t **out, int64_t *count);

/* Why problem lies outside what info declares, by the suite's own rule (op, scale layout, the
 * m/n/k multiples, UNIT_ALPHA; n_multiple constrains GEMMs only): a text, empty when the problem
 * is inside. For adapters that refuse on a kernel's behalf (GPU MODE's format cannot refuse). */
char *nvfp4check_unsupported_reason(const nvfp4_kernel_info *info, const nvfp4_problem *problem);

/* Called by a run callback, during the call, to say why it fails: check "exception" (a Python
 * exception, message = the traceback). The callback then returns, and the case fails with the
 * check "exception" and this text instead of "kernel-error". */
void nvfp4check_kernel_failed(const char *check, const char *message);

/* Serves the kernel as a worker process of `nvfp4check run --python` (harness/process/worker.h): sends
 * its info on fd, then makes the calls the parent asks for and sends back what it observed, until
 * the parent ends. The verdicts are decided by the parent. Returns the process's exit code. */
int nvfp4check_serve(const nvfp4_kernel_info *info, nvfp4check_run_fn run, void *user, int fd, double timeout_s);

/* Tells the parent on fd that the kernel process could not start and why (the function's file
 * could not be imported: a compile error, a missing module), in place of serving. Returns 0, or -1
 * when the message could not be sent. */
int nvfp4check_serve_refused(int fd, const char *why);

void nvfp4check_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* NVFP4CHECK_CAPI_H */
