// The suite core's top: lanes over the schedule, run, replay and list (see suite.h).
#include "harness/ops/op_module.h"
#include "harness/engine/suite.h"

#include <fnmatch.h>
#include <unistd.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu_reference/exact_gemm_gpu.h"
#include "harness/engine/run_identity.h"
#include "harness/process/warmup.h"
#include "reference/case_file.h"

namespace nvfp4 {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A case whose kernel process could not even start counts as that kernel's crash.
CaseOutcome start_failure(const Problem& p, const std::string& why) {
  CaseOutcome r;
  r.problem = p;
  r.verdict = CaseOutcome::Verdict::fail;
  r.finding = Finding{Check::crash, why, "", ""};
  r.call = CaseCall::start;
  r.context_lost = true;
  return r;
}

// f on each tensor of p's (its own and its groups').
template <class F>
void each_tensor(Problem& p, F&& f) {
  for (std::vector<uint8_t>* v : {&p.a, &p.b, &p.sfa, &p.sfb, &p.b2, &p.sfb2, &p.x}) f(*v);
  for (Group& g : p.groups)
    for (std::vector<uint8_t>* v : {&g.a, &g.b, &g.sfa, &g.sfb}) f(*v);
}

// A problem without its tensors, their memory given back (kept until the first failure is
// decided, a case needs only its shape and counts).
void drop_data(Problem& p) {
  each_tensor(p, [](std::vector<uint8_t>& v) { std::vector<uint8_t>().swap(v); });
}

// p's copy without its tensors (its shape, alphas, seed and note): each is moved aside for the
// copy and back, so none is copied.
Problem without_tensors(Problem& p) {
  std::vector<std::vector<uint8_t>> aside;
  std::vector<NamedTensor> named = std::move(p.tensors);
  p.tensors.clear();
  each_tensor(p, [&aside](std::vector<uint8_t>& v) {
    aside.push_back(std::move(v));
    v.clear();
  });
  Problem shape = p;
  size_t x = 0;
  each_tensor(p, [&aside, &x](std::vector<uint8_t>& v) { v = std::move(aside[x++]); });
  p.tensors = std::move(named);
  return shape;
}

// A case's outcome without its data, kept until the kernel's first failure is decided.
CaseOutcome without_data(CaseOutcome out) {
  drop_data(out.problem);
  out.reference = ExactResult{};
  out.c = OutputWords();
  return out;
}

// The first failure, annotated by the listeners and rendered.
void report_failure(KernelReport& report, const KernelDesc& kernel, const CaseOutcome& out, int64_t index,
                    std::optional<uint64_t> seed, const KernelArgs& replay_args, SuiteListener& listener,
                    const std::string& note = "") {
  const std::string reproduce =
      replay_args.empty() || out.case_file.empty() ? "" : reproduce_command(out.case_file, replay_args);
  add_outcome(report, out, index, "", "", reproduce);
  FailureRecord& f = *report.failure;
  if (!note.empty()) f.notes.push_back(note);
  listener.annotate_failure(kernel, out, f);
  f.text = failure_text(kernel.name, seed, out, f.error_map, f.reproduce, f.notes);
  listener.failed(kernel, f);
}

// When the listener asks to stop (an interrupt), marks the report: a kernel cut short is never a
// pass (skipped, with how far it got), and one not started says so.
void mark_interrupted(SuiteListener& listener, KernelReport& report, SuiteResult& result, bool started) {
  if (!listener.should_stop()) return;
  result.interrupted = report.interrupted = true;
  if (report.verdict != KernelVerdict::fail) {
    report.verdict = KernelVerdict::skipped;
    report.skip_reason =
        started ? fmt::format("interrupted after {} cases", report.cases) : "interrupted before it started";
  }
}

}  // namespace

void Listeners::kernel_started(size_t index, size_t kernels, const KernelDesc& kernel, double budget_s,
                               int64_t planned) {
  for (SuiteListener* l : all_) l->kernel_started(index, kernels, kernel, budget_s, planned);
}
void Listeners::case_done(const KernelDesc& kernel, int64_t index, const CaseOutcome& outcome) {
  for (SuiteListener* l : all_) l->case_done(kernel, index, outcome);
}
void Listeners::warming_up(const KernelDesc& kernel, double seconds) {
  for (SuiteListener* l : all_) l->warming_up(kernel, seconds);
}

void Listeners::annotate_failure(const KernelDesc& kernel, const CaseOutcome& outcome, FailureRecord& failure) {
  for (SuiteListener* l : all_) l->annotate_failure(kernel, outcome, failure);
}
void Listeners::failed(const KernelDesc& kernel, const FailureRecord& failure) {
  for (SuiteListener* l : all_) l->failed(kernel, failure);
}
void Listeners::kernel_finished(const KernelReport& report) {
  for (SuiteListener* l : all_) l->kernel_finished(report);
}
bool Listeners::should_stop() {
  bool stop = false;
  for (SuiteListener* l : all_) stop |= l->should_stop();
  return stop;
}

bool SuiteResult::any_failed() const {
  return std::any_of(kernels.begin(), kernels.end(),
                     [](const KernelReport& r) { return r.verdict == KernelVerdict::fail; });
}

KernelReport kernel_report(const KernelDesc& kernel) {
  KernelReport report;
  report.name = kernel.name;
  report.origin = kernel.origin;
  report.origin_identity = origin_identity(kernel.origin);
  report.flags = kernel.info.flags;
  return report;
}

KernelReport skipped_report(const KernelDesc& kernel, const std::string& why) {
  KernelReport report = kernel_report(kernel);
  report.verdict = KernelVerdict::skipped;
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
    // The huge tier takes what the kernel's own process saw free on the device.
    ScheduleOptions own = options;
    own.device_free_bytes = kernel.is_cuda() ? kernel.device_free_bytes : 0;
    // A CUDA kernel's large MX cases, where this process's GPU reference judges them.
    own.gpu_reference = kernel.is_cuda() && gpu_reference_available(nullptr);
    return Schedule(kernel.info, kernel.name, own);
  } catch (const std::invalid_argument&) {
    *why_not = options.op ? fmt::format("does not support {}", to_string(*options.op)) : "declares no op";
    return std::nullopt;
  }
}

bool name_matches(const std::vector<std::string>& patterns, const std::string& name) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return ::fnmatch(p.c_str(), name.c_str(), 0) == 0; });
}

namespace {

bool is_pattern(const std::string& name) { return name.find_first_of("*?[") != std::string::npos; }


// Whether a kernel passes the selection's memory and op (a pattern's matches and the default set).
bool selected(const KernelSelection& sel, const KernelDesc& d) {
  if (sel.memory && d.info.memory != *sel.memory) return false;
  return !sel.op || d.supports_op(static_cast<uint32_t>(*sel.op));
}

// The names and patterns of a selection, in the order given, each kernel once.
std::vector<KernelDesc> pick(const std::vector<KernelDesc>& all, const KernelSelection& sel) {
  std::vector<KernelDesc> out;
  std::set<std::string> seen;
  auto take = [&](const KernelDesc& d) {
    if (!name_matches(sel.exclude, d.name) && seen.insert(d.name).second) out.push_back(d);
  };
  if (sel.names.empty())
    for (const KernelDesc& d : all)
      if (selected(sel, d)) take(d);
  for (const std::string& name : sel.names) {
    if (is_pattern(name)) {
      // A pattern is a selection: what it matches passes --memory and --op like the default set.
      bool any = false;
      for (const KernelDesc& d : all) {
        if (!name_matches({name}, d.name)) continue;
        any = true;
        if (selected(sel, d)) take(d);
      }
      if (!any) throw std::invalid_argument("no kernel matches \"" + name + "\"");
      continue;
    }
    auto it = std::find_if(all.begin(), all.end(), [&](const KernelDesc& d) { return d.name == name; });
    if (it == all.end()) {
      std::string known;
      for (const KernelDesc& d : all) known += " " + d.name;
      throw std::invalid_argument("no kernel named \"" + name + "\"; known:" + known);
    }
    // Named and excluded by --memory: the two ask for different things.
    if (sel.memory && it->info.memory != *sel.memory)
      throw std::invalid_argument("kernel \"" + name + "\" runs in " + (it->is_cuda() ? "cuda" : "host") +
                                  " memory, which --memory leaves out");
    take(*it);
  }
  return out;
}

}  // namespace

std::vector<SuiteKernel> find_kernels(const std::vector<std::string>& plugins, const std::vector<std::string>& names,
                                      double timeout_s) {
  KernelSelection sel;
  sel.names = names;
  return select_kernels(plugins, sel, timeout_s);
}

std::vector<SuiteKernel> select_kernels(const std::vector<std::string>& plugins, const KernelSelection& selection,
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
  for (const KernelDesc& d : pick(all, selection)) {
    SuiteKernel k;
    k.desc = d;
    k.command = kernel_worker_command(d.name, plugins, timeout_s);
    // The kernel, then where it comes from: the order a campaign's replay lines have too.
    k.replay_args = {"--kernel", d.name};
    if (d.origin != "builtin") k.replay_args.insert(k.replay_args.end(), {"--plugin", std::filesystem::absolute(d.origin).string()});
    out.push_back(std::move(k));
  }
  return out;
}

namespace {

// What a CUDA process meets when its device cannot be set up, rather than when a kernel faults
// (cudaGetErrorName's words; "Mps" covers cudaErrorMpsConnectionFailed, ...ServerNotReady,
// ...MaxClientsReached, ...ClientTerminated, ...RpcFailure).
constexpr const char* kSetupErrors[] = {"Mps", "cudaGetDeviceCount", "DevicesUnavailable", "InitializationError",
                                        "NoDevice", "InsufficientDriver", "SystemNotReady", "SystemDriverMismatch",
                                        "MemoryAllocation"};

// One kernel's schedule over lanes (check_kernel): each lane draws its next case on another
// thread while this one is checked (drawing data is a good part of a small case's time); a case
// drawn but not reached is simply not counted. The lowest failing index found so far bounds
// every lane: no lane starts a case past it, the lower ones in flight finish, so the first
// failure and the count do not depend on the number of lanes.
class KernelLanes {
 public:
  KernelLanes(const KernelDesc& kernel, const Schedule& schedule, const LaneSettings& settings, SuiteListener& listener)
      : kernel_(kernel), schedule_(schedule), settings_(settings), listener_(listener) {}

  KernelReport run(const std::vector<Executor*>& lanes) {
    KernelReport report = kernel_report(kernel_);
    report.policy = (settings_.case_options.policy ? *settings_.case_options.policy : kernel_policy(kernel_)).name();
    if (lanes.size() == 1) {
      lane(lanes.front(), 0);
    } else {
      // Each lane's reference and judging run OpenMP teams of their own: with every lane's team as
      // large as the machine, eight lanes ran eight times as many threads as cores.
      team_ = lane_team(static_cast<int>(lanes.size()), omp_get_num_procs());
      std::vector<std::thread> threads;
      for (size_t x = 0; x < lanes.size(); ++x) threads.emplace_back([this, &lanes, x] { lane(lanes[x], x); });
      for (std::thread& t : threads) t.join();
    }
    if (error_) std::rethrow_exception(error_);
    settle_stalls(report);
    settle_unreproduced();
    report.context_reruns = reruns_;
    fold_into(report);
    report.seconds = since(start_);
    finish_report(report);
    return report;
  }

 private:
  struct Drawn {
    int64_t index = -1;
    ScheduledCase c;
    bool handed = false;  // c.problem's tensors went to the check (c.problem is its shape alone)
  };
  struct Done {
    ScheduledCase c;  // without data
    CaseOutcome outcome;
    // The lane's seconds: waiting for the case drawn ahead, telling the listener, all of its turn.
    double draw = 0, listeners = 0, lane = 0;
  };

  std::optional<Drawn> draw() {
    const int64_t index = settings_.shard.case_index(next_.fetch_add(1));
    if (settings_.cases > 0 && index >= settings_.cases) return std::nullopt;
    if (index > first_failure_) return std::nullopt;
    Drawn d;
    d.index = index;
    d.c = schedule_.at(index);
    return d;
  }

  // Ends the run with the suite's own error (a draw or a check that throws), never a dead thread.
  void give_up() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
    stop_ = true;
  }
  // The same for a check that throws on a drawn case: the error names the case and where it is
  // saved, so that the suite's own bug is reproduced from its case file, not from a rerun of the
  // whole schedule. The exception's type (the exit status it maps to) stays.
  void give_up(const Drawn& drawn, const std::exception& e) {
    std::string saved;
    try {
      saved = "saved as " + save_case(kernel_.name, whole(drawn), nullptr, settings_.case_options.case_dir, "-suite-error", true);
    } catch (const std::exception& not_saved) {
      saved = std::string("not saved: ") + not_saved.what();
    }
    const std::string what = fmt::format("{} (the suite's own error on case {} of {}: {}; {})", e.what(), drawn.index,
                                         kernel_.name, drawn.c.problem.note, saved);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) {
      error_ = dynamic_cast<const std::invalid_argument*>(&e) ? std::make_exception_ptr(std::invalid_argument(what))
                                                             : std::make_exception_ptr(std::runtime_error(what));
    }
    stop_ = true;
  }

  // One case on one executor; a worker that cannot start fails the case as a crash would.
  static CaseOutcome checked(Executor& executor, const Problem& problem, const CaseOptions& options) {
    try {
      return check_case(executor, problem, options);
    } catch (const WorkerStartError& e) {
      return start_failure(problem, e.what());
    }
  }

  // The drawn case, its tensors handed to the check rather than copied (a medium case's
  // megabytes each case); drawn keeps the shape, and whole() draws the tensors again where a rerun
  // or a saved case needs them.
  CaseOutcome checked(Executor& executor, Drawn& drawn, const CaseOptions& options) {
    Problem shape = without_tensors(drawn.c.problem);
    CaseOutcome out;
    try {
      out = check_case(executor, std::move(drawn.c.problem), options);
    } catch (const WorkerStartError& e) {
      out = start_failure(schedule_.at(drawn.index).problem, e.what());
    } catch (...) {
      drawn.c.problem = schedule_.at(drawn.index).problem;
      throw;
    }
    drawn.c.problem = std::move(shape);
    drawn.handed = true;
    return out;
  }

  // The drawn case with its tensors.
  Problem whole(const Drawn& drawn) const { return drawn.handed ? schedule_.at(drawn.index).problem : drawn.c.problem; }

  // A case that lost the lanes' shared GPU context, run again alone in a process with a context
  // of its own (shared_context.h: a fault of any lane reaches all of them there). Its outcome is
  // the case's. A fault that does not come back alone is kept (unreproduced_): unless a case
  // fails on its own, the kernel fails with it at the end, since some case of this kernel did
  // fault. From here on every lane runs in its own context, where each fault is its case's.
  CaseOutcome rerun_alone(const Drawn& drawn, const CaseOptions& options, CaseOutcome shared,
                          std::shared_ptr<Executor>& own, size_t lane, Clock::time_point turn) {
    shared_lost_ = true;
    ++reruns_;
    if (!own) own = settings_.own_context(lane);
    CaseOptions alone = options;
    alone.keep_passing = true;  // the case file stays until the kernel's verdict says whose it is
    CaseOutcome again = checked(*own, whole(drawn), alone);
    const std::string shared_error = shared.finding ? shared.finding->message : "";
    if (again.verdict == CaseOutcome::Verdict::fail) {
      std::lock_guard<std::mutex> lock(mutex_);
      notes_[drawn.index] =
          stalled(shared)
              ? fmt::format("this case's call timed out while the lanes shared one GPU context (MPS), where one "
                            "lane's hung kernel holds back every lane ({}), and it failed again alone, in a process "
                            "with a context of its own: the failure is this case's",
                            shared_error)
              : fmt::format("this case lost the GPU context the lanes shared (MPS: {}) and failed again alone, in "
                            "a process with a context of its own: the failure is this case's",
                            shared_error);
      return again;
    }
    if (stalled(shared)) return forgive_stall(drawn, std::move(shared), std::move(again), turn);
    drop_rerun_file(again, shared);
    // A worker the shared server would not take, the server's own errors (cudaErrorMps...) and a
    // device that could not be set up say nothing about the kernel: the case passed where it
    // could run.
    const bool servers_fault =
        shared.call == CaseCall::start ||
        std::any_of(std::begin(kSetupErrors), std::end(kSetupErrors),
                    [&](const char* e) { return shared_error.find(e) != std::string::npos; });
    std::lock_guard<std::mutex> lock(mutex_);
    if (servers_fault) {
      stray_files_.push_back(shared.case_file);
    } else {
      unreproduced_.emplace(drawn.index, std::move(shared));
    }
    return again;
  }

  // A CUDA kernel's call that timed out. The GPU's work stalling says less than a fault: under
  // MPS one lane's hung kernel holds back every lane, and a GPU that other processes share can
  // stall a small case's work for longer than the watchdog waits (seen on a loaded H200, where
  // the same honest kernel passed every other run and the case passed on replay). A warm-up
  // call (a compile) that did not finish is no stall: a fresh process would compile again.
  bool stalled(const CaseOutcome& o) const {
    return kernel_.is_cuda() && o.verdict == CaseOutcome::Verdict::fail && o.finding &&
           o.finding->check == Check::timeout && o.finding->message.find(kWarmupCallWords) == std::string::npos;
  }

  // A stall in a context of the lane's own: the case runs once more, in a fresh process (the one
  // that timed out was ended). A hang that comes back is the case's failure; one that does not is
  // a stall, settled with the others at the end.
  CaseOutcome rerun_stall(const Drawn& drawn, const CaseOptions& options, CaseOutcome first, Executor& executor,
                          Clock::time_point turn) {
    CaseOptions alone = options;
    alone.keep_passing = true;  // the case file stays until the kernel's verdict says whose it is
    CaseOutcome again = checked(executor, whole(drawn), alone);
    if (again.verdict == CaseOutcome::Verdict::fail) {
      std::lock_guard<std::mutex> lock(mutex_);
      notes_[drawn.index] = fmt::format(
          "this case's call timed out and failed again when the case ran a second time, in a fresh process: "
          "the failure is this case's (the first time: {})",
          first.finding->message);
      return again;
    }
    return forgive_stall(drawn, std::move(first), std::move(again), turn);
  }

  // A rerun that passed: its own record goes now; the first run's stays until the verdict says
  // whose it is.
  static void drop_rerun_file(CaseOutcome& again, const CaseOutcome& first) {
    std::error_code ec;
    if (!again.case_file.empty() && again.case_file != first.case_file) std::filesystem::remove(again.case_file, ec);
    again.case_file.clear();
  }

  // A stall that did not come back: the case passed in its rerun.
  CaseOutcome forgive_stall(const Drawn& drawn, CaseOutcome first, CaseOutcome again, Clock::time_point turn) {
    drop_rerun_file(again, first);
    std::lock_guard<std::mutex> lock(mutex_);
    stalls_.emplace(drawn.index, Stall{std::move(first), turn, Clock::now()});
    return again;
  }

  // Stalls whose cases were under way at the same time are one stall of the GPU (every lane
  // waits through it). One such stall is reported, not held against the kernel: its cases passed
  // when run again. Two or more apart are the kernel's: a race that hangs now and then.
  int stall_events() const {
    std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
    for (const auto& [index, s] : stalls_) spans.emplace_back(s.from, s.to);
    std::sort(spans.begin(), spans.end());
    int events = 0;
    Clock::time_point reach{};
    for (const auto& [from, to] : spans) {
      if (events == 0 || from > reach) {
        ++events;
        reach = to;
      } else {
        reach = std::max(reach, to);
      }
    }
    return events;
  }

  void settle_stalls(KernelReport& report) {
    if (stalls_.empty()) return;
    const int64_t none = std::numeric_limits<int64_t>::max();
    const std::string first_error = stalls_.begin()->second.outcome.finding->message;
    const int events = stall_events();
    if (first_failure_ == none && events >= 2) {
      auto first = stalls_.begin();
      first_failure_ = first->first;
      std::vector<int64_t> others;
      for (auto s = std::next(first); s != stalls_.end(); ++s) others.push_back(s->first);
      notes_[first->first] = fmt::format(
          "this case's call timed out, then passed when run again in a fresh process (so may its replay); so "
          "did case(s) {}, in {} stalls at different times. One stall of a shared GPU is not held against a "
          "kernel; stalls that recur and do not come back are the kernel's (a race that hangs now and then)",
          fmt::join(others, ", "), events);
      failures_[first->first] = std::move(first->second.outcome);
      stalls_.erase(first);
    } else {
      // Told, not settled: every stall where the kernel passed, else those before its failure.
      std::vector<int64_t> told;
      for (const auto& [index, s] : stalls_)
        if (index < first_failure_) told.push_back(index);
      report.stalls = static_cast<int64_t>(told.size());
      if (first_failure_ == none) {
        report.stall_note = fmt::format(
            "case(s) {} timed out and passed when run again in a fresh process: one stall of the GPU, not held "
            "against the kernel. A second stall at another time would fail it. The first: {}",
            fmt::join(told, ", "), first_error);
      } else if (!told.empty()) {
        report.stall_note = fmt::format(
            "case(s) {} timed out before the failing case and passed when run again in a fresh process. The "
            "first: {}",
            fmt::join(told, ", "), first_error);
      }
    }
    for (const auto& [index, s] : stalls_) stray_files_.push_back(s.outcome.case_file);
  }

  // The lowest unreproduced fault becomes the kernel's failure when no case failed on its own;
  // the case files of the others are removed (their cases passed alone).
  void settle_unreproduced() {
    const int64_t none = std::numeric_limits<int64_t>::max();
    if (first_failure_ == none && !unreproduced_.empty()) {
      auto first = unreproduced_.begin();
      first_failure_ = first->first;
      notes_[first->first] = fmt::format(
          "the kernel's process lost the GPU context the lanes shared (MPS) during this case, while {} "
          "case(s) ran in all when it happened; alone, in a process with a context of its own, this case "
          "passed (so may its replay). A fault of any lane reaches every lane under MPS: one of this "
          "kernel's cases faulted without reproducing alone (a race, memory read before it is written, "
          "state kept between calls). `run --shared-context off` gives every fault its own case",
          unreproduced_.size());
      failures_[first->first] = std::move(first->second);
      unreproduced_.erase(first);
    }
    for (const auto& [index, out] : unreproduced_) stray_files_.push_back(out.case_file);
    for (const std::string& file : stray_files_) {
      std::error_code ec;
      if (!file.empty()) std::filesystem::remove(file, ec);
    }
  }

  void lane(Executor* executor, size_t lane_index) {
    if (team_ > 0) omp_set_num_threads(team_);
    std::optional<RecordSlot> slot;  // the lane's write-ahead record file
    if (!settings_.case_options.case_dir.empty() && settings_.case_options.existing_file.empty())
      slot.emplace(settings_.case_options.case_dir,
                     fmt::format("{}-in-flight-{}-{}", kernel_.name, getpid(), lane_index));
    std::shared_ptr<Executor> own;  // this lane's own context, once the shared one was lost
    std::future<std::optional<Drawn>> ahead = std::async(std::launch::deferred, [this] { return draw(); });
    for (;;) {
      if (stop_) return;
      const auto turn = Clock::now();
      std::optional<Drawn> drawn;
      try {
        drawn = ahead.get();
      } catch (...) {
        return give_up();
      }
      const double draw_wait = since(turn);
      if (!drawn || drawn->index > first_failure_) return;
      if (settings_.seconds > 0 && drawn->index > settings_.shard.index && since(start_) >= settings_.seconds) return;
      ahead = std::async(std::launch::async, [this] {
        if (team_ > 0) omp_set_num_threads(team_);
        return draw();
      });
      CaseOptions options = settings_.case_options;
      options.stale_seed = drawn->c.stale_seed;
      if (slot) options.record_slot = &*slot;
      // The shared context until it is lost (rerun_alone makes `own`); then this lane's own.
      const bool shared = settings_.own_context && !shared_lost_;
      if (settings_.own_context && !shared && !own) own = settings_.own_context(lane_index);
      CaseOutcome out;
      try {
        Executor& runs = shared || !own ? *executor : *own;
        out = checked(runs, *drawn, options);
        if (shared && out.verdict == CaseOutcome::Verdict::fail && out.context_lost) {
          out = rerun_alone(*drawn, options, std::move(out), own, lane_index, turn);
        } else if (stalled(out)) {
          out = rerun_stall(*drawn, options, std::move(out), runs, turn);
        }
      } catch (const std::exception& e) {
        return give_up(*drawn, e);
      } catch (...) {
        return give_up();
      }
      if (listener_.should_stop()) {
        stop_ = true;
        return;
      }
      record(std::move(*drawn), std::move(out), draw_wait, turn);
    }
  }

  void record(Drawn drawn, CaseOutcome out, double draw_wait, Clock::time_point turn) {
    const bool failed = out.verdict == CaseOutcome::Verdict::fail;
    const int64_t index = drawn.index;
    std::lock_guard<std::mutex> lock(mutex_);
    const auto told = Clock::now();
    listener_.case_done(kernel_, index, out);
    const double report_s = since(told);
    drop_data(drawn.c.problem);
    Done d{std::move(drawn.c), CaseOutcome{}, draw_wait, report_s, 0.0};
    if (failed) {
      int64_t lowest = first_failure_;
      while (index < lowest && !first_failure_.compare_exchange_weak(lowest, index)) {
      }
      d.outcome = without_data(out);
      failures_.emplace(index, std::move(out));
    } else {
      d.outcome = without_data(std::move(out));
    }
    d.lane = since(turn);
    done_.emplace(index, std::move(d));
  }

  // What one lane would have found: every case up to the first failure, in order.
  void fold_into(KernelReport& report) {
    for (auto& [index, d] : done_) {
      if (index > first_failure_) break;
      report.add_time("draw", d.draw);
      report.drawn.add(d.c);
      const auto t = Clock::now();
      if (index == first_failure_) {
        const auto note = notes_.find(index);
        report_failure(report, kernel_, failures_.at(index), index, settings_.seed, settings_.replay_args, listener_,
                       note == notes_.end() ? "" : note->second);
      } else {
        add_outcome(report, d.outcome, index, "", "");
      }
      report.add_time("listeners", d.listeners + (index == first_failure_ ? since(t) : 0.0));
      // What no step holds, so that the steps add up to the lanes' time.
      report.add_time("other", std::max(0.0, d.lane - d.draw - d.outcome.times.total() - d.listeners));
    }
  }

  const KernelDesc& kernel_;
  const Schedule& schedule_;
  const LaneSettings& settings_;
  SuiteListener& listener_;
  std::mutex mutex_;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> first_failure_{std::numeric_limits<int64_t>::max()};
  std::atomic<bool> stop_{false};
  const Clock::time_point start_ = Clock::now();
  std::exception_ptr error_;
  int team_ = 0;  // OpenMP threads per lane when several run side by side (0: the default)
  std::map<int64_t, Done> done_;
  std::map<int64_t, CaseOutcome> failures_;  // with their data, to be rendered
  // The shared GPU context (settings_.own_context): lost once, then every lane uses its own.
  std::atomic<bool> shared_lost_{false};
  std::atomic<int64_t> reruns_{0};
  std::map<int64_t, CaseOutcome> unreproduced_;  // faults in the shared context that passed alone
  struct Stall {
    CaseOutcome outcome;             // the call that timed out
    Clock::time_point from, to;      // the case's turn, until the timeout was seen
  };
  std::map<int64_t, Stall> stalls_;  // timeouts of a CUDA kernel whose case passed when run again
  std::map<int64_t, std::string> notes_;         // what the failure text says of a rerun
  std::vector<std::string> stray_files_;         // case files of cases that passed alone
};

}  // namespace

int lane_team(int lanes, int cores) {
  const int n = std::max(1, lanes);
  return std::max(1, (cores + n - 1) / n);
}

KernelReport check_kernel(const std::vector<Executor*>& lanes, const KernelDesc& kernel, const Schedule& schedule,
                          const LaneSettings& settings, SuiteListener& listener) {
  return KernelLanes(kernel, schedule, settings, listener).run(lanes);
}

SuiteResult run_suite(const std::vector<SuiteKernel>& kernels, const RunSettings& settings, SuiteListener& listener) {
  SuiteResult result;
  result.seed = settings.seed;
  result.command = settings.command_line;
  result.shard = settings.shard;
  const double total_seconds = settings.seconds > 0 ? settings.seconds : (settings.cases > 0 ? 0 : kDefaultRunSeconds);
  const int gpus = std::max<int>(1, static_cast<int>(settings.gpus.size()));
  const auto session_start = Clock::now();
  // Schedules first: a kernel that is skipped (no device, an op it lacks) leaves its share of the
  // time to the kernels that run, so `--seconds` is the length of the run.
  ScheduleOptions so;
  so.seed = settings.seed;
  so.op = settings.op;
  so.shape = settings.shape;
  so.huge = settings.huge;
  // One MPS context for the lanes of a CUDA kernel, started for the first kernel that has two
  // lanes or more on a GPU and kept to the end of the run (shared_context.h).
  std::unique_ptr<SharedContext> shared;
  std::string shared_why_not;
  bool shared_tried = false;
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
    listener.kernel_started(x, kernels.size(), sk.desc, budget, settings.shard.cases_below(settings.cases));
    KernelReport report;
    if (listener.should_stop()) {
      report = kernel_report(sk.desc);
      mark_interrupted(listener, report, result, false);
    } else if (!schedule) {
      report = skipped_report(sk.desc, skips[x]);
    } else {
      // Lanes: `jobs` kernel processes per GPU for CUDA kernels, `jobs` in all for host ones.
      const int lanes = sk.desc.is_cuda() ? settings.jobs * gpus : settings.jobs;
      const bool share = sk.desc.is_cuda() && settings.jobs >= 2 && settings.shared_context != SharedContextMode::off;
      if (share && !shared_tried) {
        shared_tried = true;
        shared = SharedContext::start(&shared_why_not);
        if (!shared && settings.shared_context == SharedContextMode::mps)
          throw std::runtime_error("--shared-context mps: the MPS daemon could not start: " + shared_why_not);
      }
      const bool placed = sk.desc.is_cuda() && !settings.gpus.empty();
      // The lanes' CUDA contexts are made a few at a time (StartGate). Not a compiling kernel's:
      // its processes' starts are mostly the interpreter's imports, which run side by side.
      std::shared_ptr<StartGate> gate;
      if (sk.desc.is_cuda() && lanes > 1 && sk.command.warmup_timeout_s <= 0)
        gate = std::make_shared<StartGate>(StartGate::default_slots(gpus));
      // Lane w's command; in_shared: as a client of the shared context.
      auto lane_command = [&](int w, bool in_shared) {
        WorkerCommand command = sk.command;
        command.start_gate = gate;
        if (placed)
          command.env.emplace_back("CUDA_VISIBLE_DEVICES", settings.gpus[static_cast<size_t>(w) % settings.gpus.size()]);
        if (in_shared)
          for (auto& kv : shared->client_env()) command.env.push_back(kv);
        return command;
      };
      const bool in_shared = share && shared;
      std::vector<std::shared_ptr<WorkerExecutor>> executors;
      std::vector<Executor*> raw;
      for (int w = 0; w < lanes; ++w) {
        executors.push_back(w == 0 && sk.started && !placed && !in_shared
                                ? sk.started
                                : std::make_shared<WorkerExecutor>(lane_command(w, in_shared), settings.timeout_s));
        raw.push_back(executors.back().get());
      }
      // The lanes' own contexts, made when the shared one is lost (their starts are counted too).
      std::mutex own_mutex;
      std::vector<std::shared_ptr<WorkerExecutor>> own;
      // A compiling kernel warms up first, outside its time (harness/process/warmup.h).
      std::vector<WorkerExecutor*> workers;
      for (const auto& e : executors) workers.push_back(e.get());
      const double warmup = warm_up_lanes(workers, [&](double s) { listener.warming_up(sk.desc, s); });
      LaneSettings ls;
      ls.cases = settings.cases;
      ls.shard = settings.shard;
      ls.seconds = budget;
      ls.seed = settings.seed;
      ls.case_options.case_dir = settings.case_dir;
      ls.case_options.policy = settings.policy;
      ls.replay_args = sk.replay_args;
      if (in_shared) {
        ls.own_context = [&](size_t w) -> std::shared_ptr<Executor> {
          auto e = std::make_shared<WorkerExecutor>(lane_command(static_cast<int>(w), false), settings.timeout_s);
          std::lock_guard<std::mutex> lock(own_mutex);
          own.push_back(e);
          return e;
        };
      }
      report = check_kernel(raw, sk.desc, *schedule, ls, listener);
      for (const auto& e : executors) report.workers += e->starts();
      for (const auto& e : own) report.workers += e->starts();
      if (sk.desc.is_cuda()) {
        report.context = in_shared ? "mps" : "own";
        if (share && !shared) report.context_note = "MPS could not start: " + shared_why_not;
      }
      report.warmup_seconds = warmup;
      mark_interrupted(listener, report, result, true);
    }
    report.stream = sk.stream;
    listener.kernel_finished(report);
    result.checked += report.cases;
    result.kernels.push_back(std::move(report));
  }
  return result;
}

namespace {

// "FILE:LINE: " of the expect line that disagrees with ref (of its group's, for a grouped case).
std::string expect_place(const std::string& path, const Problem& p, const ExactResult& ref) {
  std::string key = "expect";
  if (op_quantizes(p.op)) {
    const int64_t x = compare_expect(p, ref, 1).first.front();
    key = x < static_cast<int64_t>(ref.quant->q.size()) ? "expect_q" : "expect_sfq";
  } else if (op_is_grouped(p.op)) {
    const int64_t x = compare_expect(p, ref, 1).first.front();
    size_t g = 0;
    while (g + 1 < ref.group_offset.size() && ref.group_offset[g + 1] <= x) ++g;
    key += "." + std::to_string(g);
  }
  const int line = case_key_line(path, key);
  return line > 0 ? path + ":" + std::to_string(line) + ": " : path + ": ";
}

}  // namespace

ReplayInput read_replay_input(const std::string& path, bool fuzz_input) {
  ReplayInput in;
  in.path = std::filesystem::absolute(path).string();
  if (fuzz_input) {
    // The fuzzer's inputs are at most its -max_len (32 KiB under OSS-Fuzz); 16 MiB is far past that.
    static const InputLimit fuzz_limit{uint64_t(1) << 24, "a kernel fuzzer input",
                                       "the fuzzer's own inputs are at most its -max_len"};
    in.fuzz_bytes = read_input_file(path, fuzz_limit, false);
    in.fuzz_limits = fuzz_limits_from_environment();
    std::string why;
    std::optional<Problem> p = fuzz_input_problem(*in.fuzz_bytes, nullptr, in.fuzz_limits, &why);
    if (!p) throw CaseError(path + ": " + why);
    in.problem = std::move(*p);
  } else {
    in.problem = read_case_file(path);
  }
  try {
    if (!in.problem.has_data()) expand_seeded_case(in.problem);
  } catch (const std::invalid_argument& e) {
    throw CaseError(path + ": " + e.what());
  }
  if (has_expect(in.problem)) {
    const ExactResult ref = op_reference(in.problem);
    const std::string mismatch = expect_mismatch(in.problem, ref);
    if (!mismatch.empty())
      throw CaseError(expect_place(path, in.problem, ref) + mismatch + " (the case file or the reference is wrong)");
    clear_expect(in.problem);  // checked once here
  }
  return in;
}

CaseOutcome replay_case(Executor& executor, const ReplayInput& input, const CaseOptions& base) {
  CaseOptions options = base;
  options.existing_file = input.path;
  // The stale-state data depends on the case, not on the path it was given by (a fuzz input's, on
  // its bytes, as in the fuzzer). A case drawn from its seed is that seed's text: formatting a
  // 2 GiB case's data as hex would cost seconds and twice its size in memory.
  const Problem& p = input.problem;
  const CaseText text = p.seed && p.data_from_seed ? CaseText::seed_only : CaseText::full;
  options.stale_seed = input.fuzz_bytes ? fnv1a(*input.fuzz_bytes) : fnv1a(write_case(p, text));
  try {
    return check_case(executor, input.problem, options);
  } catch (const WorkerStartError& e) {
    return start_failure(input.problem, e.what());
  }
}

KernelReport replay_kernel(Executor& executor, const KernelDesc& kernel, const std::vector<const ReplayInput*>& inputs,
                           const CaseOptions& base, const KernelArgs& replay_args, SuiteListener& listener) {
  KernelReport report = kernel_report(kernel);
  const auto start = Clock::now();
  for (size_t y = 0; y < inputs.size(); ++y) {
    const CaseOutcome out = replay_case(executor, *inputs[y], base);
    if (listener.should_stop()) break;
    listener.case_done(kernel, static_cast<int64_t>(y), out);
    // Every input is checked; the first failure is the one reported in full.
    if (out.verdict == CaseOutcome::Verdict::fail && !report.failure)
      report_failure(report, kernel, out, static_cast<int64_t>(y), std::nullopt, replay_args, listener);
    else
      add_outcome(report, out, static_cast<int64_t>(y), "", "");
  }
  report.seconds = since(start);
  finish_report(report);
  return report;
}

SuiteResult replay_suite(const std::vector<SuiteKernel>& kernels, const std::vector<ReplayInput>& inputs,
                         const ReplaySettings& settings, SuiteListener& listener) {
  SuiteResult result;
  result.command = settings.command_line;
  for (size_t x = 0; x < kernels.size(); ++x) {
    const SuiteKernel& sk = kernels[x];
    // A named kernel gets every input (one outside its constraints checks its UNSUPPORTED path);
    // by default a kernel gets the inputs of an op and layout it declares.
    std::vector<ReplayInput> drawn;  // fuzz inputs as the fuzzer drew them for this kernel
    drawn.reserve(inputs.size());
    std::vector<const ReplayInput*> mine;
    for (const ReplayInput& given : inputs) {
      const ReplayInput* in = &given;
      if (given.fuzz_bytes) {
        drawn.push_back(given);
        drawn.back().problem = *fuzz_input_problem(*given.fuzz_bytes, &sk.desc.info, given.fuzz_limits);
        in = &drawn.back();
      }
      if (settings.named || given.fuzz_bytes ||
          (sk.desc.supports_op(static_cast<uint32_t>(in->problem.op)) &&
           sk.desc.supports_layout(static_cast<uint32_t>(in->problem.sf_layout))))
        mine.push_back(in);
    }
    if (mine.empty()) continue;
    listener.kernel_started(x, kernels.size(), sk.desc, 0, static_cast<int64_t>(mine.size()));
    KernelReport report;
    if (listener.should_stop()) {
      report = kernel_report(sk.desc);
      mark_interrupted(listener, report, result, false);
    } else if (!sk.desc.runnable) {
      report = skipped_report(sk.desc, sk.desc.why_not);
    } else {
      const std::shared_ptr<WorkerExecutor> started =
          sk.started ? sk.started : std::make_shared<WorkerExecutor>(sk.command, settings.timeout_s);
      WorkerExecutor& executor = *started;
      CaseOptions base;
      base.case_dir = settings.case_dir;
      base.policy = settings.policy;
      report = replay_kernel(executor, sk.desc, mine, base, sk.replay_args, listener);
      report.workers = executor.starts();
      mark_interrupted(listener, report, result, true);
    }
    listener.kernel_finished(report);
    result.checked += report.cases;
    result.kernels.push_back(std::move(report));
  }
  return result;
}

namespace {

// The names of the bits set, comma-separated, or "-".
std::string bit_names(uint32_t bits, const std::vector<std::pair<uint32_t, const char*>>& names) {
  std::string s;
  for (const auto& [bit, name] : names)
    if (bits & bit) s += (s.empty() ? "" : ",") + std::string(name);
  return s.empty() ? std::string("-") : s;
}

std::string flag_names(uint32_t flags) {
  return bit_names(flags, {{NVFP4_FLAG_SIGNED_SCALES, "signed-scales"},
                           {NVFP4_FLAG_NONDETERMINISTIC, "nondeterministic"},
                           {NVFP4_FLAG_FP16_ACCUMULATE, "fp16-accumulate"},
                           {NVFP4_FLAG_SATURATES, "saturates"},
                           {NVFP4_FLAG_EXACT, "exact"},
                           {NVFP4_FLAG_UNIT_ALPHA, "unit-alpha"},
                           {NVFP4_FLAG_MMA_ACCUMULATE, "mma-accumulate"},
                           {NVFP4_FLAG_GROUPS_PACKED, "groups-packed"},
                           {NVFP4_FLAG_QUANT_2D, "quant-2d"},
                           {NVFP4_FLAG_ROW_GLOBAL_SCALE, "row-global-scale"},
                           {NVFP4_FLAG_STOCHASTIC, "stochastic"},
                           {NVFP4_FLAG_SF_PADDING_KEPT, "sf-padding-kept"}});
}

// The lines under a kernel's row (indented by w): operand formats beyond NVFP4's, what a
// quantizer takes and makes, and where a plugin's kernel came from.
std::string kernel_notes(const KernelDesc& desc, size_t w) {
  const nvfp4_kernel_info& info = desc.info;
  const auto names = [](uint32_t bits, uint32_t first, uint32_t last, auto to_name) {
    std::string out;
    for (uint32_t v = first; v <= last; ++v)
      if ((bits >> v) & 1u) out += (out.empty() ? "" : ",") + std::string(to_name(v));
    return out.empty() ? std::string("-") : out;
  };
  const auto format_name = [](uint32_t v) { return to_string(static_cast<BlockFormat>(v)); };
  std::string t;
  const uint32_t nvfp4_only = 1u << NVFP4_FORMAT_NVFP4;
  if (declared_formats(info, false) != nvfp4_only || declared_formats(info, true) != nvfp4_only)
    t += fmt::format("{:<{}}  operand formats: A {}, B {}\n", "", w, names(declared_formats(info, false), 1, 4, format_name),
                     names(declared_formats(info, true), 1, 4, format_name));
  if ((info.ops >> NVFP4_OP_QUANTIZE) & 1u) {
    t += fmt::format("{:<{}}  quantizes {} to {} by {}\n", "", w,
                     names(info.in_types, 1, 3, [](uint32_t v) { return to_string(static_cast<InType>(v)); }),
                     names(info.q_formats ? info.q_formats : 2u, 1, 4, format_name),
                     names(info.recipes, 1, 7, [](uint32_t v) { return to_string(static_cast<Recipe>(v)); }));
  }
  if (desc.origin != "builtin") t += fmt::format("{:<{}}  from {} (ABI version {})\n", "", w, desc.origin, info.abi_version);
  return t;
}

}  // namespace

std::string kernel_table(const std::vector<SuiteKernel>& kernels) {
  std::vector<std::pair<uint32_t, const char*>> op_bits;
  for (const OpModule& m : op_modules()) op_bits.emplace_back(1u << static_cast<uint32_t>(m.op), m.info().name);
  size_t w = 6;
  for (const SuiteKernel& k : kernels) w = std::max(w, k.desc.name.size());
  // groups: the most groups per grouped call ("any" when unlimited) and "packed" for the packed
  // arrangement; "-" for a kernel without grouped GEMM.
  // A reason shared by several kernels (no CUDA device: every CUDA kernel) is printed once under
  // the table and referred to as "[n]"; a reason of one kernel stays on its row.
  std::vector<std::string> shared_reasons;
  std::map<std::string, int> kernels_with;
  for (const SuiteKernel& k : kernels)
    if (!k.desc.runnable && ++kernels_with[k.desc.why_not] == 2) shared_reasons.push_back(k.desc.why_not);
  const auto runnable_text = [&](const SuiteKernel& k) {
    if (k.desc.runnable) return std::string("yes");
    const auto at = std::find(shared_reasons.begin(), shared_reasons.end(), k.desc.why_not);
    if (at == shared_reasons.end()) return "no: " + k.desc.why_not;
    return fmt::format("no [{}]", at - shared_reasons.begin() + 1);
  };
  const char* row = "{:<{}}  {:<6}  {:<22}  {:<15}  {:<14}  {:<14}  {:>6}  {:<11}  {:<11}  {:<18}  {}\n";
  std::string t = fmt::format(row, "kernel", w, "memory", "ops", "sf layouts", "out types", "groups", "min_sm",
                              "m/n/k mult", "accumulates", "flags", "runnable here");
  for (const SuiteKernel& k : kernels) {
    const nvfp4_kernel_info& info = k.desc.info;
    const std::string accumulates = (info.flags & NVFP4_FLAG_EXACT)         ? "exactly"
                                    : (info.flags & NVFP4_FLAG_MMA_ACCUMULATE) ? "matrix-unit"
                                                                              : "ieee-fp32";
    std::string groups = "-";
    if (info.ops & ops_with(kOpGrouped)) {
      groups = info.max_groups == 0 ? std::string("any") : fmt::format("<={}", info.max_groups);
      if (info.flags & NVFP4_FLAG_GROUPS_PACKED) groups += ",packed";
    }
    t += fmt::format(row, k.desc.name, w, info.memory == NVFP4_MEMORY_CUDA ? "cuda" : "host",
                     bit_names(info.ops, op_bits),
                     bit_names(info.sf_layouts, {{1u << NVFP4_SF_LINEAR, "linear"}, {1u << NVFP4_SF_PERMUTED, "permuted"}}),
                     bit_names(declared_out_types(info), {{1u << NVFP4_OUT_FP16, "fp16"},
                                                          {1u << NVFP4_OUT_BF16, "bf16"},
                                                          {1u << NVFP4_OUT_FP32, "fp32"},
                                                          {1u << NVFP4_OUT_NVFP4, "nvfp4"}}),
                     groups, info.min_sm, fmt::format("{}/{}/{}", info.m_multiple, info.n_multiple, info.k_multiple),
                     accumulates, flag_names(info.flags), runnable_text(k));
    t += kernel_notes(k.desc, w);
  }
  for (size_t i = 0; i < shared_reasons.size(); ++i)
    t += fmt::format("[{}] {} kernels cannot run here: {}\n", i + 1, kernels_with[shared_reasons[i]], shared_reasons[i]);
  return t;
}

}  // namespace nvfp4
