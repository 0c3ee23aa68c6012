// What `run` and `replay` tell people and scripts, built from typed outcomes: the per-kernel
// report, the JSON report of SPEC.md section 6, the summary table, failure text with the command
// that reproduces it, and the PNG error map of a failing output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/judge/case_check.h"
#include "harness/draw/schedule.h"
#include "harness/draw/shard.h"

namespace nvfp4 {

enum class KernelVerdict : uint8_t { pass, fail, skipped };
const char* to_string(KernelVerdict v);  // "pass", "fail", "skipped" (SPEC section 6)

// How to name a kernel on nvfp4check's command line so that `replay` reaches it again: the
// arguments after `nvfp4check replay CASE` (`--kernel NAME`, with `--plugin PATH` for a plugin's,
// or `--python FILE:FN --format F` and the declarations for a Python function).
using KernelArgs = std::vector<std::string>;
// "nvfp4check replay CASE ARGS...", each word quoted for a POSIX shell where it needs to be.
std::string reproduce_command(const std::string& case_file, const KernelArgs& kernel_args);
std::string shell_quote(const std::string& word);
// The words of a line that reproduce_command wrote (plain words and '...' quoting, with '\''
// for a quote), or nullopt for a line it could not have written.
std::optional<std::vector<std::string>> shell_words(const std::string& line);

// The first failure of a kernel, as reported.
struct FailureRecord {
  Check check = Check::oracle;
  std::string message, hint, case_file, error_map, text, reproduce;
  std::string case_file_error;  // why the case could not be saved (in full); "" when it was
  // What listeners found out about the failure after it was decided (a second run of the case),
  // in the order they added it; the text shows each on a line of its own, the message stays the check's.
  std::vector<std::string> notes;
  CaseCall call = CaseCall::none;
  int64_t case_index = -1;   // in the schedule (run), or the input's position (replay)
  bool has_element = false;  // an output element is to blame (oracle-like checks)
  int64_t g = -1, b = -1, i = -1, j = -1;  // g: the group, for a grouped problem
  uint32_t expected = 0, actual = 0;       // words of the output type
  int word_digits = 4;                     // hex digits of a word: 4, or 8 for FP32
  double error_ulps = 0, error_over_bound = 0, bound = 0;
};

// Everything one kernel's cases added up to.
struct KernelReport {
  std::string name, origin;
  std::string origin_identity;    // the plugin file's, when it was loaded (run_identity.h); empty for built-ins
  KernelVerdict verdict = KernelVerdict::pass;
  std::string skip_reason;
  uint32_t flags = 0;             // the kernel's declared flags
  std::string policy;             // the policy its outputs were judged with
  int64_t cases = 0;              // cases checked (supported and unsupported)
  int64_t unsupported_cases = 0;  // of those, shapes the kernel correctly refused
  int64_t skipped_cases = 0;      // cases that did not apply (e.g. scale semantics)
  std::string first_skip;         // why the first of those did not apply
  int64_t failed_cases = 0;
  int64_t elements = 0, exact_elements = 0;
  int64_t unjudged_elements = 0;  // passed where SPEC rule 6 has no bound (G or U at FP32's overflow)
  double max_error_ulps = 0, max_error_over_bound = 0;
  double seconds = 0;
  int64_t workers = 0;            // kernel processes started (a crash or timeout costs one)
  double warmup_seconds = 0;      // the first process's warm-up call (harness/process/warmup.h), not in `seconds`
  std::string stream;             // a Python kernel's stream: "current" or "legacy"
  // A CUDA kernel's lanes: "mps" (one GPU context, shared_context.h) or "own" (a context each),
  // with why not "mps" where it was asked for by default and could not start.
  std::string context, context_note;
  int64_t context_reruns = 0;     // cases run again alone after the shared context was lost
  // A CUDA kernel's calls that timed out and passed when their case ran again in a fresh process
  // (suite.cc: one such stall of the GPU is not held against the kernel), and what they were.
  int64_t stalls = 0;
  std::string stall_note;
  // Time by step, summed over cases and lanes, in the order the steps first occurred; in the JSON
  // report under kStageSecondsKey. A run's steps add up to its lanes' time: "draw" (waiting for
  // the case drawn ahead: its shape and data), "generate" (data expanded from a seed, the stale
  // variant where a check looks at it), "reference", "save", the buffers in the kernel's process ("buffers: lay-out",
  // "buffers: upload", "buffers: read-back"), each call's kernel time ("run 1", "run 2", "stale",
  // "unsupported"), "channel", "judge" (CaseTimes), "listeners" (progress, reports, error maps)
  // and "other" (whatever none of these holds).
  std::vector<std::pair<std::string, double>> step_seconds;
  ScheduleStats drawn;            // what the schedule drew (run)
  std::optional<FailureRecord> failure;  // the first one
  bool interrupted = false;       // a signal cut its cases short (a verdict of skipped, unless one failed)
  void add_time(const std::string& step, double seconds);
};

// The JSON report's field (per kernel) holding KernelReport::step_seconds.
inline constexpr const char* kStageSecondsKey = "stage_seconds";

// Adds one case's outcome to a kernel's totals (the first failure is kept, with `text` and
// `error_map` as rendered for it).
void add_outcome(KernelReport& report, const CaseOutcome& outcome, int64_t case_index, const std::string& text,
                 const std::string& error_map, const std::string& reproduce = "");
// A kernel with no case checked and no failure is "skipped", never "pass".
void finish_report(KernelReport& report);

// "reference 1.2 s, kernel 0.3 s, ..." for a report's step_seconds.
std::string step_text(const KernelReport& report);

// A failure as people read it: kernel, seed, check, first bad (b, i, j) with expected and actual
// (value and hex), error in ulps and against the bound, a likely cause, the listeners' notes, saved
// case, error map, and `reproduce` (the command that replays it) when there is one.
std::string failure_text(const std::string& kernel, std::optional<uint64_t> seed, const CaseOutcome& r,
                         const std::string& error_map, const std::string& reproduce,
                         const std::vector<std::string>& notes = {});

// The JSON report: {"seed": S, "kernels": [{"name", "verdict", "cases", "failure": {...}}, ...]},
// with "shard": {"index": I, "count": N} for a run of `--shard I/N` (N > 1). What identifies the
// work (harness/engine/run_identity.h), for `merge` to check: "build", the program's identity; per kernel
// "origin_identity" (a plugin's) and, with a seed, "schedule_digest" of the cases walked.
nlohmann::json report_json(std::optional<uint64_t> seed, const std::vector<KernelReport>& kernels,
                           const std::string& command, const Shard& shard = {});
// Checks at the start of a run that the report can be written there (throws std::runtime_error).
void check_report_writable(const std::string& path);
void write_report_file(const std::string& path, const nlohmann::json& report);  // throws std::runtime_error

// The table `run` and `replay` end with: cases, verdict, failing check, max ulp error, max
// error / bound, share of exact-regime outputs.
std::string summary_table(const std::vector<KernelReport>& kernels);

// Error map of an output: one panel per batch (rows i down, columns j across), each element
// coloured by error / bound: dark grey the right RN16 bits, green other bits within the bound
// (brighter = closer to it),
// orange to red beyond it (by log10 of the excess), magenta NaN where a number was due (an
// unwritten element shows as poison NaN), cyan a number where NaN was due. Panels are separated
// by a white column. Throws std::runtime_error when the file cannot be written.
void write_error_map_png(const std::string& path, const Problem& p, const ExactResult& ref,
                         const std::vector<uint32_t>& c, const Policy& policy);
// "gemm m=3 n=5 k=64 l=1, alpha=1", "dual_gemm ..., alpha2=2", "grouped_gemm 3 groups, 1 empty:
// g0=40x64x128 g2=8x64x128 g1=0x64x128" (non-empty groups first, at most 8).
std::string shape_text(const Problem& p);

// Path of the error map that belongs with a case file: same stem, ".png".
std::string error_map_path_for(const std::string& case_file, const std::string& dir);

}  // namespace nvfp4
