// The suite core's top: lanes over the schedule, run, replay and list (see suite.h).
#include "harness/suite.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "gpu_reference/exact_gemm_gpu.h"
#include "harness/case_input.h"
#include "reference/case_file.h"

namespace nvfp4 {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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
      const std::string plan = budget_s > 0 ? fmt::format(" (about {:.0f} s)", budget_s)
                               : planned > 0 ? fmt::format(" ({} cases)", planned)
                                             : "";
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
      fmt::print(stderr, "[{}/{}] {}: {}, {} cases in {:.1f} s{}\n", index_ + 1, kernels_, r.name, r.verdict, r.cases,
                 r.seconds, r.verdict == "skipped" ? " (" + r.skip_reason + ")" : "");
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

  bool bar_;
  size_t kernels_, index_ = 0;
  std::string name_;
  double budget_s_ = 0;
  int64_t planned_ = 0, cases_ = 0, failed_ = 0;
  Clock::time_point started_, last_draw_;
};

// A failing output drawn as an error map beside its case file (when there is one to draw).
std::string error_map_for(const CaseOutcome& r, const std::string& dir) {
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

// A case whose kernel process could not even start counts as that kernel's crash.
CaseOutcome start_failure(const Problem& p, const std::string& why) {
  CaseOutcome r;
  r.problem = p;
  r.verdict = CaseOutcome::Verdict::fail;
  r.finding = Finding{Check::crash, why};
  r.stage = "start";
  r.context_lost = true;
  return r;
}

void write_report(const std::string& path, const nlohmann::json& j, int* exit_code) {
  if (path.empty()) return;
  try {
    write_report_file(path, j);
  } catch (const std::exception& e) {
    fmt::print(stderr, "nvfp4check: {}\n", e.what());
    if (*exit_code == 0) *exit_code = 2;  // a failure's exit code 1 stays: it is the more important news
  }
}

}  // namespace

KernelReport kernel_report(const KernelDesc& kernel) {
  KernelReport report;
  report.name = kernel.name;
  report.origin = kernel.origin;
  report.flags = kernel.info.flags;
  return report;
}

KernelReport skipped_report(const KernelDesc& kernel, const std::string& why) {
  KernelReport report = kernel_report(kernel);
  report.verdict = "skipped";
  report.skip_reason = why;
  return report;
}

std::optional<Schedule> kernel_schedule(const KernelDesc& kernel, const ScheduleOptions& options,
                                        std::string* why_not) {
  if (!kernel.runnable) {
    *why_not = kernel.why_not;
    return std::nullopt;
  }
  try {
    return Schedule(kernel.info, kernel.name, options);
  } catch (const std::invalid_argument&) {
    *why_not = options.op ? fmt::format("does not support {}", to_string(*options.op)) : "declares no op";
    return std::nullopt;
  }
}

std::vector<SuiteKernel> find_kernels(const std::vector<std::string>& plugins, const std::vector<std::string>& names,
                                      double timeout_s) {
  std::vector<KernelDesc> all;
  if (plugins.empty()) {
    // The built-ins are this program's own code: no child needed to list them.
    const Registry builtins = Registry::with_builtins();
    for (const Kernel& k : builtins.kernels()) all.push_back(describe_kernel(k));
  } else {
    all = list_kernels(plugins, timeout_s);
  }
  std::vector<SuiteKernel> out;
  auto add = [&](const KernelDesc& d) {
    SuiteKernel k;
    k.desc = d;
    k.command = kernel_worker_command(d.name, plugins, timeout_s);
    out.push_back(std::move(k));
  };
  if (names.empty()) {
    for (const KernelDesc& d : all) add(d);
    return out;
  }
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) continue;  // named twice: checked once
    auto it = std::find_if(all.begin(), all.end(), [&](const KernelDesc& d) { return d.name == name; });
    if (it == all.end()) {
      std::string known;
      for (const KernelDesc& d : all) known += " " + d.name;
      throw std::invalid_argument("no kernel named \"" + name + "\"; known:" + known);
    }
    add(*it);
  }
  return out;
}

KernelReport check_kernel(const std::vector<Executor*>& lanes, const KernelDesc& kernel, const Schedule& schedule,
                          const LaneSettings& settings, const OnCase& on_case) {
  KernelReport report = kernel_report(kernel);
  report.policy = (settings.case_options.policy ? *settings.case_options.policy : kernel_policy(kernel)).name();
  std::mutex mutex;
  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  const auto start = Clock::now();
  std::exception_ptr error;

  // A lane draws its next case on another thread while this one is checked (drawing data is a
  // good part of a small case's time); a case drawn but not reached is simply not counted.
  struct Drawn {
    int64_t index = -1;
    ScheduledCase c;
    double seconds = 0;
  };
  auto draw = [&]() -> std::optional<Drawn> {
    const int64_t index = next.fetch_add(1);
    if (settings.cases > 0 && index >= settings.cases) return std::nullopt;
    const auto t = Clock::now();
    Drawn d;
    d.index = index;
    d.c = schedule.at(index);
    d.seconds = since(t);
    return d;
  };
  auto lane = [&](Executor* executor) {
    std::future<std::optional<Drawn>> ahead = std::async(std::launch::deferred, draw);
    for (;;) {
      if (stop) return;
      std::optional<Drawn> drawn = ahead.get();
      if (!drawn) return;
      const int64_t index = drawn->index;
      if (settings.seconds > 0 && index > 0 && since(start) >= settings.seconds) return;
      ahead = std::async(std::launch::async, draw);
      const ScheduledCase& sc = drawn->c;
      const double generate = drawn->seconds;
      auto t = Clock::now();
      CaseOptions options = settings.case_options;
      options.stale_seed = sc.stale_seed;
      CaseOutcome out;
      try {
        out = check_case(*executor, sc.problem, options);
      } catch (const WorkerStartError& e) {
        out = start_failure(sc.problem, e.what());
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        stop = true;
        return;
      }
      if (settings.should_stop && settings.should_stop()) {
        stop = true;
        return;
      }
      t = Clock::now();
      std::string text, map;
      if (out.verdict == CaseOutcome::Verdict::fail) {
        map = error_map_for(out, "");
        text = failure_text(kernel.name, settings.seed, out, map);
      }
      const double rendering = since(t);
      std::lock_guard<std::mutex> lock(mutex);
      report.add_time("generate", generate);
      report.drawn.add(sc);
      // The first failure found is the reproducer; later ones (other lanes) are only counted.
      add_outcome(report, out, index, report.failure ? "" : text, map);
      report.add_time("report", rendering);
      if (on_case) on_case(sc, out, report.failure && report.failure->case_index == index ? text : "");
      if (out.verdict == CaseOutcome::Verdict::fail) stop = true;
    }
  };
  if (lanes.size() == 1) {
    lane(lanes.front());
  } else {
    std::vector<std::thread> threads;
    for (Executor* e : lanes) threads.emplace_back(lane, e);
    for (std::thread& t : threads) t.join();
  }
  if (error) std::rethrow_exception(error);
  report.seconds = since(start);
  finish_report(report);
  return report;
}

int run_suite(const std::vector<SuiteKernel>& kernels, const RunSettings& settings) {
  uint64_t seed = 0;
  if (settings.seed) {
    seed = *settings.seed;
  } else {
    seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    fmt::print(stderr, "seed from the clock: {} (repeat this run with --seed {})\n", seed, seed);
  }
  if (!settings.report.empty()) check_report_writable(settings.report);
  fmt::print("seed: {}\n", seed);
  std::fflush(stdout);
  // With neither a case count nor a time, `run` is the main job: about a minute in all.
  const double total_seconds = settings.seconds > 0 ? settings.seconds : (settings.cases > 0 ? 0 : 60);
  const int gpus = std::max<int>(1, static_cast<int>(settings.gpus.size()));
  Progress progress(settings.progress_bar, kernels.size());
  std::vector<KernelReport> reports;
  const auto session_start = Clock::now();
  // Schedules first: a kernel that is skipped (no device, an op it lacks) leaves its share of the
  // time to the kernels that run, so `--seconds` is the length of the run.
  ScheduleOptions so;
  so.seed = seed;
  so.op = settings.op;
  so.shape = settings.shape;
  std::vector<std::optional<Schedule>> schedules;
  std::vector<std::string> skips(kernels.size());
  for (size_t x = 0; x < kernels.size(); ++x) schedules.push_back(kernel_schedule(kernels[x].desc, so, &skips[x]));
  for (size_t x = 0; x < kernels.size(); ++x) {
    const SuiteKernel& sk = kernels[x];
    const std::optional<Schedule>& schedule = schedules[x];
    double budget = 0;
    if (total_seconds > 0 && schedule) {
      const auto to_run = std::count_if(schedules.begin() + static_cast<std::ptrdiff_t>(x), schedules.end(),
                                        [](const std::optional<Schedule>& s) { return s.has_value(); });
      budget = std::max(0.5, (total_seconds - since(session_start)) / double(to_run));
    }
    progress.start_kernel(x, sk.desc.name, budget, settings.cases);
    KernelReport report;
    if (!schedule) {
      report = skipped_report(sk.desc, skips[x]);
    } else {
      // Lanes: `jobs` kernel processes per GPU for CUDA kernels, `jobs` in all for host ones.
      const int lanes = sk.desc.is_cuda() ? settings.jobs * gpus : settings.jobs;
      std::vector<std::unique_ptr<WorkerExecutor>> executors;
      std::vector<Executor*> raw;
      for (int w = 0; w < lanes; ++w) {
        WorkerCommand command = sk.command;
        if (sk.desc.is_cuda() && !settings.gpus.empty())
          command.env.emplace_back("CUDA_VISIBLE_DEVICES", settings.gpus[static_cast<size_t>(w) % settings.gpus.size()]);
        executors.push_back(std::make_unique<WorkerExecutor>(std::move(command), settings.timeout_s));
        raw.push_back(executors.back().get());
      }
      LaneSettings ls;
      ls.cases = settings.cases;
      ls.seconds = budget;
      ls.seed = seed;
      ls.case_options.case_dir = settings.case_dir;
      ls.case_options.policy = settings.policy;
      report = check_kernel(raw, sk.desc, *schedule, ls, [&](const ScheduledCase&, const CaseOutcome& out,
                                                             const std::string& text) {
        const bool failed = out.verdict == CaseOutcome::Verdict::fail;
        if (failed && !text.empty()) {
          progress.clear();
          fmt::print("{}\n", text);
          std::fflush(stdout);
        }
        progress.case_done(failed);
      });
      for (const auto& e : executors) report.workers += e->starts();
    }
    progress.end_kernel(report);
    reports.push_back(report);
  }
  fmt::print("\n{}", summary_table(reports));
  for (const KernelReport& r : reports)
    if (r.drawn.cases > 0) fmt::print("drawn, {}: {}\n", r.name, r.drawn.text());
  if (settings.shape) {
    for (const KernelReport& r : reports)
      if (!r.stage_seconds.empty()) fmt::print("time by step, {}: {}\n", r.name, stage_text(r));
  }
  std::fflush(stdout);
  const bool any_failed =
      std::any_of(reports.begin(), reports.end(), [](const KernelReport& r) { return r.verdict == "fail"; });
  int exit_code = any_failed ? 1 : 0;
  write_report(settings.report, report_json(seed, reports, settings.command_line), &exit_code);
  return exit_code;
}

ReplayInput read_replay_input(const std::string& path, bool fuzz_input) {
  ReplayInput in;
  in.path = std::filesystem::absolute(path).string();
  if (fuzz_input) {
    in.problem = load_case_input(path, nullptr, /*binary=*/true);
  } else {
    in.problem = read_case_file(path);
  }
  try {
    if (!in.problem.has_data()) expand_seeded_case(in.problem);
  } catch (const std::invalid_argument& e) {
    throw CaseError(path + ": " + e.what());
  }
  if (in.problem.expect) {
    const std::string mismatch = expect_mismatch(in.problem, exact_gemm_auto(in.problem).c);
    if (!mismatch.empty()) throw CaseError(path + ": " + mismatch + " (the case file or the reference is wrong)");
    in.problem.expect.reset();  // checked once here
  }
  return in;
}

ReplayedCase replay_case(Executor& executor, const KernelDesc& kernel, const ReplayInput& input,
                         const CaseOptions& base) {
  CaseOptions options = base;
  options.existing_file = input.path;
  // The stale-state data depends on the case, not on the path it was given by.
  options.stale_seed = fnv1a(write_case(input.problem));
  ReplayedCase r;
  try {
    r.outcome = check_case(executor, input.problem, options);
  } catch (const WorkerStartError& e) {
    r.outcome = start_failure(input.problem, e.what());
  }
  if (r.outcome.verdict == CaseOutcome::Verdict::fail) {
    r.error_map = error_map_for(r.outcome, base.case_dir);
    r.failure_text = failure_text(kernel.name, std::nullopt, r.outcome, r.error_map);
  }
  return r;
}

int replay_suite(const std::vector<SuiteKernel>& kernels, const std::vector<ReplayInput>& inputs,
                 const ReplaySettings& settings) {
  if (!settings.report.empty()) check_report_writable(settings.report);
  Progress progress(settings.progress_bar, kernels.size());
  std::vector<KernelReport> reports;
  int64_t checked = 0;
  for (size_t x = 0; x < kernels.size(); ++x) {
    const SuiteKernel& sk = kernels[x];
    // A named kernel gets every input (one outside its constraints checks its UNSUPPORTED path);
    // by default a kernel gets the inputs of an op and layout it declares.
    std::vector<const ReplayInput*> mine;
    for (const ReplayInput& in : inputs)
      if (settings.named || (sk.desc.supports_op(static_cast<uint32_t>(in.problem.op)) &&
                             sk.desc.supports_layout(static_cast<uint32_t>(in.problem.sf_layout))))
        mine.push_back(&in);
    if (mine.empty()) continue;
    progress.start_kernel(x, sk.desc.name, 0, static_cast<int64_t>(mine.size()));
    KernelReport report;
    if (!sk.desc.runnable) {
      report = skipped_report(sk.desc, sk.desc.why_not);
    } else {
      report = kernel_report(sk.desc);
      WorkerExecutor executor(sk.command, settings.timeout_s);
      CaseOptions base;
      base.case_dir = settings.case_dir;
      base.policy = settings.policy;
      const auto start = Clock::now();
      for (size_t y = 0; y < mine.size(); ++y) {
        const ReplayedCase r = replay_case(executor, sk.desc, *mine[y], base);
        const bool failed = r.outcome.verdict == CaseOutcome::Verdict::fail;
        if (failed) {
          progress.clear();
          fmt::print("{}\n", r.failure_text);
          std::fflush(stdout);
        }
        add_outcome(report, r.outcome, static_cast<int64_t>(y), r.failure_text, r.error_map);
        progress.case_done(failed);
      }
      report.seconds = since(start);
      report.workers = executor.starts();
      finish_report(report);
    }
    checked += report.cases;
    progress.end_kernel(report);
    reports.push_back(report);
  }
  fmt::print("\n{}", summary_table(reports));
  std::fflush(stdout);
  const bool any_failed =
      std::any_of(reports.begin(), reports.end(), [](const KernelReport& r) { return r.verdict == "fail"; });
  int exit_code = any_failed ? 1 : 0;
  if (!any_failed && checked == 0) {
    fmt::print(stderr, "nvfp4check replay: nothing was checked: {}\n",
               reports.empty() ? "no kernel declares the op and scale layout of these inputs"
                               : "every kernel skipped every input (see the table)");
    exit_code = 2;
  }
  write_report(settings.report, report_json(std::nullopt, reports, settings.command_line), &exit_code);
  return exit_code;
}

std::string kernel_table(const std::vector<SuiteKernel>& kernels) {
  auto bit_names = [](uint32_t bits, std::initializer_list<std::pair<uint32_t, const char*>> names) {
    std::string s;
    for (const auto& [bit, name] : names)
      if (bits & bit) s += (s.empty() ? "" : ",") + std::string(name);
    return s.empty() ? std::string("-") : s;
  };
  size_t w = 6;
  for (const SuiteKernel& k : kernels) w = std::max(w, k.desc.name.size());
  std::string t = fmt::format("{:<{}}  {:<6}  {:<9}  {:<15}  {:>6}  {:<11}  {:<11}  {:<18}  {}\n", "kernel", w, "memory",
                              "ops", "sf layouts", "min_sm", "m/n/k mult", "accumulates", "flags", "runnable here");
  for (const SuiteKernel& k : kernels) {
    const nvfp4_kernel_info& info = k.desc.info;
    const std::string flags =
        bit_names(info.flags, {{NVFP4_FLAG_SIGNED_SCALES, "signed-scales"},
                               {NVFP4_FLAG_NONDETERMINISTIC, "nondeterministic"},
                               {NVFP4_FLAG_FP16_ACCUMULATE, "fp16-accumulate"},
                               {NVFP4_FLAG_SATURATES, "saturates"},
                               {NVFP4_FLAG_EXACT, "exact"},
                               {NVFP4_FLAG_UNIT_ALPHA, "unit-alpha"},
                               {NVFP4_FLAG_MMA_ACCUMULATE, "mma-accumulate"}});
    const std::string accumulates = (info.flags & NVFP4_FLAG_EXACT)         ? "exactly"
                                    : (info.flags & NVFP4_FLAG_MMA_ACCUMULATE) ? "matrix-unit"
                                                                              : "ieee-fp32";
    t += fmt::format("{:<{}}  {:<6}  {:<9}  {:<15}  {:>6}  {:<11}  {:<11}  {:<18}  {}\n", k.desc.name, w,
                     info.memory == NVFP4_MEMORY_CUDA ? "cuda" : "host",
                     bit_names(info.ops, {{1u << NVFP4_OP_GEMV, "gemv"}, {1u << NVFP4_OP_GEMM, "gemm"}}),
                     bit_names(info.sf_layouts, {{1u << NVFP4_SF_LINEAR, "linear"}, {1u << NVFP4_SF_PERMUTED, "permuted"}}),
                     info.min_sm, fmt::format("{}/{}/{}", info.m_multiple, info.n_multiple, info.k_multiple),
                     accumulates, flags, k.desc.runnable ? "yes" : "no: " + k.desc.why_not);
    if (k.desc.origin != "builtin") t += fmt::format("{:<{}}  from {}\n", "", w, k.desc.origin);
  }
  return t;
}

}  // namespace nvfp4
