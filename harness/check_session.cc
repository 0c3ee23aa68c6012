// The parent's loop over kernels: workers, progress, failures, table, report.
#include "harness/check_session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

namespace nvfp4 {
namespace {

using Clock = std::chrono::steady_clock;

// Progress on stderr: a bar redrawn in place on a terminal, otherwise one line per kernel.
class Progress {
 public:
  Progress(bool bar, size_t kernels) : bar_(bar), kernels_(kernels) {}

  void start_kernel(size_t index, const std::string& name, double budget_s, int64_t planned) {
    index_ = index;
    name_ = name;
    budget_s_ = budget_s;
    planned_ = planned;
    cases_ = failed_ = 0;
    started_ = Clock::now();
    if (!bar_) {
      std::string plan = budget_s > 0 ? fmt::format(" (about {:.0f} s)", budget_s)
                                      : planned > 0 ? fmt::format(" ({} inputs)", planned) : "";
      fmt::print(stderr, "[{}/{}] {}{}\n", index + 1, kernels_, name, plan);
    }
    draw();
  }

  void case_done(bool failed) {
    ++cases_;
    failed_ += failed;
    // Fast kernels finish hundreds of cases a second: redraw at most ten times a second.
    if (failed || Clock::now() - last_draw_ > std::chrono::milliseconds(100)) draw();
  }

  void end_kernel(const KernelReport& r) {
    if (bar_) {
      clear();
    } else {
      fmt::print(stderr, "[{}/{}] {}: {}, {} cases in {:.1f} s{}\n", index_ + 1, kernels_, r.name, r.verdict,
                 r.cases, r.seconds, r.verdict == "skipped" ? " (" + r.skip_reason + ")" : "");
    }
  }

  // Before other output: the bar's line is cleared, and redrawn by the next update.
  void clear() {
    if (bar_) {
      fmt::print(stderr, "\r\033[K");
      std::fflush(stderr);
    }
  }

 private:
  void draw() {
    if (!bar_) return;
    last_draw_ = Clock::now();
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
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

  bool bar_;
  size_t kernels_, index_ = 0;
  std::string name_;
  double budget_s_ = 0;
  int64_t planned_ = 0, cases_ = 0, failed_ = 0;
  Clock::time_point started_, last_draw_;
};

}  // namespace

int run_session(std::vector<SessionKernel> kernels, const SessionOptions& options) {
  if (options.seed) fmt::print("seed: {}\n", *options.seed);
  std::fflush(stdout);
  Progress progress(options.progress_bar, kernels.size());
  std::vector<KernelReport> reports;
  const auto session_start = Clock::now();
  for (size_t x = 0; x < kernels.size(); ++x) {
    SessionKernel& sk = kernels[x];
    double budget = 0;
    if (options.total_seconds > 0) {
      const double used = std::chrono::duration<double>(Clock::now() - session_start).count();
      budget = std::max(0.5, (options.total_seconds - used) / double(kernels.size() - x));
    }
    progress.start_kernel(x, sk.job.kernel, budget, sk.planned_inputs);
    KernelReport report;
    if (!sk.skip_reason.empty()) {
      report.name = sk.job.kernel;
      report.origin = sk.job.origin;
      report.verdict = "skipped";
      report.skip_reason = sk.skip_reason;
    } else {
      if (budget > 0) {
        sk.job.argv.push_back("--seconds");
        sk.job.argv.push_back(fmt::format("{:.3f}", budget));
      }
      report = supervise_worker(sk.job, [&](const nlohmann::json& ev) {
        if (ev.value("event", "") == "result") {
          const nlohmann::json& r = ev.at("result");
          const bool failed = r.value("verdict", "") == "fail";
          if (failed && r.contains("failure")) {
            progress.clear();
            fmt::print("{}\n", r["failure"].value("text", ""));
            std::fflush(stdout);
          }
          progress.case_done(failed);
        } else if (ev.value("event", "") == "garbage") {
          progress.clear();
          fmt::print(stderr, "worker: {}\n", ev.value("text", ""));
        }
      });
    }
    progress.end_kernel(report);
    reports.push_back(report);
  }
  fmt::print("\n{}", summary_table(reports));
  if (options.print_stages) {
    for (const KernelReport& r : reports)
      if (!r.stage_seconds.empty()) fmt::print("time by step, {}: {}\n", r.name, stage_text(r));
  }
  std::fflush(stdout);
  if (!options.report_path.empty()) write_report_file(options.report_path, report_json(options.seed, reports, options.command_line));
  const bool any_failed = std::any_of(reports.begin(), reports.end(), [](const KernelReport& r) { return r.verdict == "fail"; });
  return any_failed ? 1 : 0;
}

}  // namespace nvfp4
