// The console, error-map and JSON listeners of the suite engine (see listeners.h).
#include "harness/engine/listeners.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "harness/engine/junit.h"

namespace nvfp4 {
namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> g_signal{0};  // the first stop signal received
static_assert(std::atomic<int>::is_always_lock_free, "used in a signal handler");

void on_stop_signal(int sig) {
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, sig)) {
    // The second: end now, as the signal does by default.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  static const char note[] =
      "\nnvfp4check: interrupted: the cases in flight finish, then the table and the report (again to stop at once)\n";
  const ssize_t ignored = ::write(2, note, sizeof note - 1);
  (void)ignored;
}

}  // namespace

void ConsoleListener::kernel_started(size_t index, size_t kernels, const KernelDesc& kernel, double budget_s,
                                     int64_t planned) {
  kernels_ = kernels;
  index_ = index;
  name_ = kernel.name;
  budget_s_ = budget_s;
  planned_ = planned;
  cases_ = failed_ = 0;
  started_ = Clock::now();
  if (!bar_) {
    const std::string plan = budget_s > 0 ? fmt::format(" (about {:.{}f} s)", budget_s, budget_s < 10 ? 1 : 0)
                             : planned > 0 ? fmt::format(" ({} case{})", planned, planned == 1 ? "" : "s")
                                           : "";
    fmt::print(stderr, "[{}/{}] {}{}\n", index + 1, kernels_, name_, plan);
  }
  draw();
}

void ConsoleListener::case_done(const KernelDesc&, int64_t, const CaseOutcome& outcome) {
  ++cases_;
  const bool failed = outcome.verdict == CaseOutcome::Verdict::fail;
  failed_ += failed;
  if (!outcome.case_file_error.empty() && !warned_unsaved_) {
    // Saving cases is best effort: the run goes on, each failure says whether its case was kept.
    warned_unsaved_ = true;
    clear();
    fmt::print(stderr, "warning: a case could not be saved ({}); checking goes on, failures are still reported\n",
               outcome.case_file_error);
  }
  // Fast kernels finish hundreds of cases a second: redraw at most ten times a second.
  if (failed || Clock::now() - last_draw_ > std::chrono::milliseconds(100)) draw();
}

void ConsoleListener::failed(const KernelDesc&, const FailureRecord& failure) {
  clear();
  fmt::print("{}\n", failure.text);
  std::fflush(stdout);
}

void ConsoleListener::kernel_finished(const KernelReport& r) {
  const std::string warning =
      r.stall_note.empty() ? "" : fmt::format("[{}/{}] {}: warning: {}\n", index_ + 1, kernels_, r.name, r.stall_note);
  if (bar_) {
    clear();
    fmt::print(stderr, "{}", warning);
    return;
  }
  std::string why;
  if (r.verdict == KernelVerdict::skipped) {
    // A reason already given for an earlier kernel is named by that kernel, not repeated.
    const auto [said, first] = skip_said_.emplace(r.skip_reason, r.name);
    why = first ? " (" + r.skip_reason + ")" : " (as " + said->second + ")";
  }
  fmt::print(stderr, "[{}/{}] {}: {}, {} case{} in {:.1f} s{}{}\n", index_ + 1, kernels_, r.name, to_string(r.verdict),
             r.cases, r.cases == 1 ? "" : "s", r.seconds, r.warmup_seconds > 0 ? fmt::format(" after a {:.1f} s warm-up", r.warmup_seconds) : "",
             why);
  fmt::print(stderr, "{}", warning);
}

// The kernel's first call compiling: the line says so instead of a count.
void ConsoleListener::warming_up(const KernelDesc&, double seconds) {
  if (bar_) {
    fmt::print(stderr, "\r\033[K{} {}/{} {}: compiling/warming up: {:.0f} s", std::string(26, ' '), index_ + 1,
               kernels_, name_, seconds);
    std::fflush(stderr);
  } else if (static_cast<int64_t>(seconds) % 15 == 0) {
    fmt::print(stderr, "[{}/{}] {}: compiling/warming up: {:.0f} s\n", index_ + 1, kernels_, name_, seconds);
  }
}

void ConsoleListener::summary(const SuiteResult& result) {
  fmt::print("\n{}", summary_table(result.kernels));
  for (const KernelReport& r : result.kernels)
    if (r.drawn.cases > 0) fmt::print("drawn, {}: {}\n", r.name, r.drawn.text());
  if (step_times_)
    for (const KernelReport& r : result.kernels)
      if (!r.step_seconds.empty()) fmt::print("time by step, {}: {}\n", r.name, step_text(r));
  std::fflush(stdout);
}

// Before other output: the bar's line is cleared, and redrawn by the next update.
void ConsoleListener::clear() {
  if (!bar_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
}

void ConsoleListener::draw() {
  if (!bar_) return;
  last_draw_ = Clock::now();
  const double elapsed = since(started_);
  double within = 0;
  if (budget_s_ > 0) within = std::min(1.0, elapsed / budget_s_);
  else if (planned_ > 0) within = std::min(1.0, double(cases_) / double(planned_));
  const double whole = (double(index_) + within) / double(std::max<size_t>(1, kernels_));
  const int width = 24, filled = static_cast<int>(whole * width);
  fmt::print(stderr, "\r\033[K[{}{}] {}/{} {}: {} cases{} {:.0f}s", std::string(filled, '#'),
             std::string(width - filled, '.'), index_ + 1, kernels_, name_, cases_,
             failed_ ? fmt::format(", {} failed", failed_) : "", elapsed);
  std::fflush(stderr);
}

InterruptListener::InterruptListener() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the engine's reads and waits go on; it polls should_stop()
  for (int x = 0; x < 3; ++x) sigaction(kStopSignals[x], &sa, &old_[x]);
}

InterruptListener::~InterruptListener() {
  for (int x = 0; x < 3; ++x) sigaction(kStopSignals[x], &old_[x], nullptr);
}

bool InterruptListener::should_stop() { return g_signal != 0; }

void InterruptListener::end_if_interrupted() const {
  const int sig = g_signal;
  if (sig == 0) return;
  fmt::print(stderr, "nvfp4check: stopped by {}; the table and the report cover the cases finished before it\n",
             strsignal(sig));
  std::fflush(stdout);
  std::fflush(stderr);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  std::_Exit(128 + sig);  // were the signal blocked
}

std::string write_error_map_for(const CaseOutcome& r, const std::string& dir) {
  const Problem& p = r.problem;
  if (r.verdict != CaseOutcome::Verdict::fail || r.case_file.empty() || p.c_elems() == 0 ||
      static_cast<int64_t>(r.c.size()) != p.c_elems() || static_cast<int64_t>(r.reference.elems.size()) != p.c_elems())
    return "";
  const std::string path = error_map_path_for(r.case_file, dir);
  try {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    write_error_map_png(path, p, r.reference, r.c.words(), r.policy);
    return path;
  } catch (const std::exception& e) {
    fmt::print(stderr, "warning: no error map: {}\n", e.what());
    return "";
  }
}

void ErrorMapListener::annotate_failure(const KernelDesc&, const CaseOutcome& outcome, FailureRecord& failure) {
  failure.error_map = write_error_map_for(outcome, dir_);
}

bool write_json_report(const std::string& path, const SuiteResult& result) {
  if (path.empty()) return true;
  try {
    nlohmann::json report = report_json(result.seed, result.kernels, result.command, result.shard);
    if (result.interrupted) {
      // What was known when a signal stopped the run; the kernels it cut short say so too.
      report["interrupted"] = true;
      for (size_t x = 0; x < result.kernels.size(); ++x)
        if (result.kernels[x].interrupted) report["kernels"][x]["interrupted"] = true;
    }
    write_report_file(path, report);
    return true;
  } catch (const std::exception& e) {
    fmt::print(stderr, "nvfp4check: {}\n", e.what());
    return false;
  }
}

bool write_junit_report(const std::string& path, const std::string& suite_name, const SuiteResult& result) {
  if (path.empty()) return true;
  std::vector<JUnitCase> cases;
  for (const KernelReport& k : result.kernels) cases.push_back(junit_case(k));
  try {
    write_junit_file(path, suite_name, cases);
    return true;
  } catch (const std::exception& e) {
    fmt::print(stderr, "nvfp4check: {}\n", e.what());
    return false;
  }
}

int suite_exit_code(const SuiteResult& result, bool report_written, bool nothing_checked_is_an_error) {
  // A failure's exit code 1 stays whatever else went wrong: it is the more important news.
  if (result.any_failed()) return 1;
  if (!report_written) return 2;
  if (nothing_checked_is_an_error && result.checked == 0) return 2;
  return 0;
}

}  // namespace nvfp4
