// What `run` and `replay` tell people and scripts: per-case results as JSON lines (the worker
// protocol), the per-kernel summary, the JSON report of SPEC.md section 6, failure text and the
// PNG error map of a failing output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/runner.h"

namespace nvfp4 {

// The first failure of a kernel, as reported.
struct FailureRecord {
  std::string check, message, case_file, error_map, text;
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
  int64_t cases = 0;              // cases checked (supported and unsupported)
  int64_t unsupported_cases = 0;  // of those, shapes the kernel correctly refused
  int64_t skipped_cases = 0;      // cases that did not apply (e.g. scale semantics)
  std::string first_skip;         // why the first of those did not apply
  int64_t failed_cases = 0;
  int64_t elements = 0, exact_elements = 0;
  double max_error_ulps = 0, max_error_over_bound = 0;
  double seconds = 0;
  // Wall time by step, summed over cases, in the order the steps first occurred: "start" (the
  // worker's start-up, CUDA's included), "generate" (drawing or loading a case), "prepare", then
  // each stage the runner announces ("reference", "run 1", "run 2", "stale reference", ...).
  std::vector<std::pair<std::string, double>> stage_seconds;
  std::optional<FailureRecord> failure;  // the first one
};

// "reference 1.2 s, run 1 0.3 s, ..." for a report's stage_seconds.
std::string stage_text(const KernelReport& report);

// One case's result as a JSON object (a line of the worker protocol). failure_text and error_map
// go with a failing result.
nlohmann::json case_result_json(const CheckResult& r, const std::string& failure_text, const std::string& error_map);
// Adds a case_result_json object to a kernel's totals (the first failure is kept).
void accumulate(KernelReport& report, const nlohmann::json& case_result);

// A failure as people read it: kernel, seed, check, first bad (b, i, j) with expected and actual
// (value and hex), error in ulps and against the bound, saved case, error map, replay command.
std::string failure_text(const std::string& kernel, std::optional<uint64_t> seed, const CheckResult& r,
                         const std::string& error_map);

// The JSON report: {"seed": S, "kernels": [{"name", "verdict", "cases", "failure": {...}}, ...]}.
nlohmann::json report_json(std::optional<uint64_t> seed, const std::vector<KernelReport>& kernels,
                           const std::string& command);
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
