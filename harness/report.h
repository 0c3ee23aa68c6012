// What `run` and `replay` tell people and scripts: per-case results as JSON lines (the worker
// protocol), the per-kernel summary, the JSON report of SPEC.md section 6, failure text and the
// PNG error map of a failing output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case_check.h"
#include "harness/schedule.h"

namespace nvfp4 {

// The first failure of a kernel, as reported.
struct FailureRecord {
  Check check = Check::oracle;
  std::string message, case_file, error_map, text, stage;
  int64_t case_index = -1;   // in the schedule (run), or the input's position (replay)
  bool has_element = false;  // an output element is to blame (oracle-like checks)
  int64_t b = -1, i = -1, j = -1;
  uint16_t expected = 0, actual = 0;
  double error_ulps = 0, error_over_bound = 0, bound = 0;
};

// Everything one kernel's cases added up to.
struct KernelReport {
  std::string name, origin;
  std::string verdict = "pass";  // "pass" | "fail" | "skipped"
  std::string skip_reason;
  uint32_t flags = 0;             // the kernel's declared flags
  std::string policy;             // the policy its outputs were judged with
  int64_t cases = 0;              // cases checked (supported and unsupported)
  int64_t unsupported_cases = 0;  // of those, shapes the kernel correctly refused
  int64_t skipped_cases = 0;      // cases that did not apply (e.g. scale semantics)
  std::string first_skip;         // why the first of those did not apply
  int64_t failed_cases = 0;
  int64_t elements = 0, exact_elements = 0;
  double max_error_ulps = 0, max_error_over_bound = 0;
  double seconds = 0;
  int64_t workers = 0;            // kernel processes started (a crash or timeout costs one)
  // Time by step, summed over cases and lanes: "reference", "save", "kernel", "judge",
  // "generate", "report" (the parent's side), in the order they first occurred.
  std::vector<std::pair<std::string, double>> stage_seconds;
  ScheduleStats drawn;            // what the schedule drew (run)
  std::optional<FailureRecord> failure;  // the first one
  void add_time(const std::string& step, double seconds);
};

// Adds one case's outcome to a kernel's totals (the first failure is kept, with `text` and
// `error_map` as rendered for it).
void add_outcome(KernelReport& report, const CaseOutcome& outcome, int64_t case_index, const std::string& text,
                 const std::string& error_map);
// A kernel with no case checked and no failure is "skipped", never "pass".
void finish_report(KernelReport& report);

// "reference 1.2 s, run 1 0.3 s, ..." for a report's stage_seconds.
std::string stage_text(const KernelReport& report);

// A failure as people read it: kernel, seed, check, first bad (b, i, j) with expected and actual
// (value and hex), error in ulps and against the bound, saved case, error map, replay command.
std::string failure_text(const std::string& kernel, std::optional<uint64_t> seed, const CaseOutcome& r,
                         const std::string& error_map);

// The JSON report: {"seed": S, "kernels": [{"name", "verdict", "cases", "failure": {...}}, ...]}.
nlohmann::json report_json(std::optional<uint64_t> seed, const std::vector<KernelReport>& kernels,
                           const std::string& command);
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
                         const std::vector<uint16_t>& c, const Policy& policy);

// Path of the error map that belongs with a case file: same stem, ".png".
std::string error_map_path_for(const std::string& case_file, const std::string& dir);

}  // namespace nvfp4
