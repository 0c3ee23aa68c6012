// The checks one case goes through against one kernel: guarded and poisoned buffers, NaN in
// padding, two runs, unchanged inputs, stale state, streams, CUDA errors, the oracle.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "reference/oracle.h"
#include "reference/problem.h"

namespace nvfp4 {

struct RunOptions {
  std::string case_dir = "nvfp4check-cases";  // where a case is saved before it runs
  bool save_case = true;
  bool check_determinism = true;  // second run with a different poison must match bit for bit
  bool check_stale = true;        // change inputs in place, run again, judge again
  double timeout_s = 30;          // watchdog per kernel call
  bool use_policy_override = false;
  Policy policy_override;         // instead of Policy::for_flags(info.flags)
  // A passing case's file is removed again unless this is set (failures always keep theirs).
  bool keep_passing_cases = false;
  // The stale-state check refills the inputs with fresh data of the same distribution: the
  // generator spec the case came from (DataSpec::name(), "" = shuffle the case's own bytes) and
  // the seed of that refill.
  std::string data_spec;
  uint64_t stale_seed = 0;
  // Called before each stage of a check ("reference", "run 1", "run 2", "stale", ...), e.g. as a
  // heartbeat for a watchdog in another process. May be empty.
  std::function<void(const std::string& stage)> on_stage;
  // Called with the path of each case file once it is on disk, before the kernel runs on it.
  std::function<void(const std::string& path)> on_case_saved;
};

// The named checks, as they appear in reports.
//   "oracle", "nan-padding", "unwritten-output", "guard", "inputs-modified", "determinism",
//   "stale-state", "unsupported-touched-output", "refused-supported", "kernel-error",
//   "cuda-error", "timeout", and also "ignored-unsupported" (computed a shape it declares
//   unsupported), "stream" (C changed after the runner's stream was done: work on another stream),
//   "crash" (the worker process died; set by the process runner, never by check_case).
struct CheckResult {
  enum class Verdict { pass, fail, unsupported, skipped } verdict = Verdict::pass;
  std::string check;        // the failing check, empty when passing
  std::string message;      // one paragraph a person can act on
  std::string case_file;    // path of the saved case, when saved
  OracleSummary summary;    // of the failing (or last) run
  std::vector<uint16_t> c;  // the kernel's output of the failing (or last) run
  ExactResult reference;    // the exact result the output was judged against
  Problem problem;          // the data that output was judged against (the stale run's, if it failed)
  Policy policy;            // the policy it was judged with
  bool context_lost = false;  // a CUDA error or timeout: the process should not run more cases
  int64_t runs = 0;           // kernel calls made
};

// An FP16 output as the runner's and the report's messages write it: "1.5 (0x3e00)" (the value
// to 6 significant digits, then the bits).
std::string fp16_text(uint16_t h);

// Why p lies outside what info declares (op, layout, multiples, UNIT_ALPHA); "" when inside.
std::string unsupported_reason(const nvfp4_kernel_info& info, const Problem& p);

// Runs every check of one case. A shape outside the kernel's declared constraints is instead
// checked to come back NVFP4_UNSUPPORTED with C untouched (verdict unsupported or fail).
CheckResult check_case(const Kernel& kernel, const Problem& p, const RunOptions& options);

// Runs the kernel once on p, as the runner does (fresh buffers, layout conversion), returning its
// output or throwing std::runtime_error naming the error. For properties that compare outputs.
std::vector<uint16_t> run_kernel_once(const Kernel& kernel, const Problem& p, double timeout_s = 30);

}  // namespace nvfp4
