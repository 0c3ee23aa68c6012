// The listeners of the suite engine (suite.h): what a run or a replay shows a person (progress on
// stderr, failures and the summary on stdout), the PNG error map beside a failing case, and the
// JSON report of SPEC.md section 6.
#pragma once

#include <signal.h>

#include <chrono>
#include <map>
#include <string>

#include "harness/engine/suite.h"

namespace nvfp4 {

// Progress on stderr (a bar redrawn in place on a terminal, otherwise one line per kernel), each
// kernel's first failure on stdout as it is decided, and at the end the summary table, what each
// kernel's schedule drew and, when asked, the time by step.
class ConsoleListener final : public SuiteListener {
 public:
  explicit ConsoleListener(bool bar, bool step_times = false) : bar_(bar), step_times_(step_times) {}
  void kernel_started(size_t index, size_t kernels, const KernelDesc& kernel, double budget_s,
                      int64_t planned) override;
  void case_done(const KernelDesc& kernel, int64_t index, const CaseOutcome& outcome) override;
  void failed(const KernelDesc& kernel, const FailureRecord& failure) override;
  void kernel_finished(const KernelReport& report) override;
  void warming_up(const KernelDesc& kernel, double seconds) override;
  // The summary table (and the schedule's distribution, and the steps' times when asked).
  void summary(const SuiteResult& result);

 private:
  using Clock = std::chrono::steady_clock;
  void draw();
  void clear();
  bool bar_, step_times_;
  size_t kernels_ = 0, index_ = 0;
  std::string name_;
  double budget_s_ = 0;
  int64_t planned_ = 0, cases_ = 0, failed_ = 0;
  bool warned_unsaved_ = false;  // a case file could not be saved: said once
  std::map<std::string, std::string> skip_said_;  // skip reasons given so far, each with its first kernel
  Clock::time_point started_, last_draw_;
};

// SIGINT, SIGTERM and SIGHUP while it lives: the first asks the engine to stop (no case starts;
// those in flight finish, within the watchdog) so that the table and the report still say what
// was done, marked interrupted; a second ends the program at once, as the signal would.
class InterruptListener final : public SuiteListener {
 public:
  InterruptListener();            // installs the handlers
  ~InterruptListener() override;  // puts the earlier ones back
  bool should_stop() override;
  // After the table and the report: ends the process as the first signal would have (a shell
  // sees 128 + the signal); returns when no signal came.
  void end_if_interrupted() const;

 private:
  struct sigaction old_[3];
};

// Draws the error map of a kernel's first failure beside its case file (or into dir).
class ErrorMapListener final : public SuiteListener {
 public:
  explicit ErrorMapListener(std::string dir = "") : dir_(std::move(dir)) {}
  void annotate_failure(const KernelDesc& kernel, const CaseOutcome& outcome, FailureRecord& failure) override;

 private:
  std::string dir_;
};

// The error map of a failing outcome, written beside its case file (or into dir); its path, or ""
// when there is nothing to draw or it could not be written (a warning on stderr).
std::string write_error_map_for(const CaseOutcome& outcome, const std::string& dir);

// Writes the JSON report of a result to path (nothing when path is empty). Returns false, with a
// message on stderr, when it could not be written.
bool write_json_report(const std::string& path, const SuiteResult& result);

// Writes the JUnit XML of a result to path, one test case per kernel (nothing when path is
// empty). Returns false, with a message on stderr, when it could not be written.
bool write_junit_report(const std::string& path, const std::string& suite_name, const SuiteResult& result);

// The exit code of `run` and `replay` (SPEC section 6): 1 a kernel failed; else 2 the report
// could not be written, or (replay) nothing was checked at all; else 0.
int suite_exit_code(const SuiteResult& result, bool report_written, bool nothing_checked_is_an_error);

}  // namespace nvfp4
