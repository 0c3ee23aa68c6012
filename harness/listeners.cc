// The console, error-map and JSON listeners of the suite engine (see listeners.h).
#include "harness/listeners.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

namespace nvfp4 {
namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
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
    const std::string plan = budget_s > 0 ? fmt::format(" (about {:.0f} s)", budget_s)
                             : planned > 0 ? fmt::format(" ({} cases)", planned)
                                           : "";
    fmt::print(stderr, "[{}/{}] {}{}\n", index + 1, kernels_, name_, plan);
  }
  draw();
}

void ConsoleListener::case_done(const KernelDesc&, int64_t, const CaseOutcome& outcome) {
  ++cases_;
  const bool failed = outcome.verdict == CaseOutcome::Verdict::fail;
  failed_ += failed;
  // Fast kernels finish hundreds of cases a second: redraw at most ten times a second.
  if (failed || Clock::now() - last_draw_ > std::chrono::milliseconds(100)) draw();
}

void ConsoleListener::failed(const KernelDesc&, const FailureRecord& failure) {
  clear();
  fmt::print("{}\n", failure.text);
  std::fflush(stdout);
}

void ConsoleListener::kernel_finished(const KernelReport& r) {
  if (bar_) {
    clear();
  } else {
    fmt::print(stderr, "[{}/{}] {}: {}, {} cases in {:.1f} s{}{}\n", index_ + 1, kernels_, r.name, to_string(r.verdict),
               r.cases, r.seconds,
               r.warmup_seconds > 0 ? fmt::format(" after a {:.1f} s warm-up", r.warmup_seconds) : "",
               r.verdict == KernelVerdict::skipped ? " (" + r.skip_reason + ")" : "");
  }
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

std::string write_error_map_for(const CaseOutcome& r, const std::string& dir) {
  const Problem& p = r.problem;
  if (r.verdict != CaseOutcome::Verdict::fail || r.case_file.empty() || p.c_elems() == 0 ||
      static_cast<int64_t>(r.c.size()) != p.c_elems() || static_cast<int64_t>(r.reference.elems.size()) != p.c_elems())
    return "";
  const std::string path = error_map_path_for(r.case_file, dir);
  try {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    write_error_map_png(path, p, r.reference, r.c, r.policy);
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
    write_report_file(path, report_json(result.seed, result.kernels, result.command, result.shard));
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
