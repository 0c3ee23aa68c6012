// The suite engine: which kernels, their cases from the one schedule spread over lanes (a kernel
// process each, on one GPU or several), and a typed result. How results are shown is not its
// business: it tells a SuiteListener (the console, the JSON report and the error maps are
// listeners, harness/engine/listeners.h; Python's C API and `mutants` are callers of check_kernel).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/engine/defaults.h"
#include "harness/judge/case_check.h"
#include "harness/engine/report.h"
#include "harness/draw/schedule.h"
#include "harness/draw/shard.h"
#include "harness/process/shared_context.h"
#include "harness/process/worker.h"

namespace nvfp4 {

// A kernel the suite checks, how to start its worker process, and how to name it on the command
// line (for the "reproduce:" line of its failures).
struct SuiteKernel {
  KernelDesc desc;
  WorkerCommand command;
  KernelArgs replay_args;  // e.g. {"--plugin", "/abs/lib.so", "--kernel", "name"}
  std::string stream;      // a Python kernel's --stream, for the report ("" for ABI kernels)
  // A process of `command` already started (the one that told the kernel's declarations): the
  // first lane takes it over, so a file is not imported (or compiled) once more.
  std::shared_ptr<WorkerExecutor> started;
};

// What the engine tells as it goes. Every method has an empty default. Calls come from the
// engine's thread or, for case_done, under a lock from a lane's.
class SuiteListener {
 public:
  virtual ~SuiteListener() = default;
  // A kernel's cases start; budget_s (time) or planned (cases, or inputs) says how long.
  virtual void kernel_started(size_t index, size_t kernels, const KernelDesc& kernel, double budget_s,
                              int64_t planned) {}
  // One case checked (any lane; the verdict of the kernel is not decided by it).
  virtual void case_done(const KernelDesc& kernel, int64_t index, const CaseOutcome& outcome) {}
  // A kernel's first failure, before it is rendered: a listener may attach what it made for it
  // (the error map's path) and append to its notes what it found out (a second run of the case);
  // the check's own message and hint are the engine's.
  virtual void annotate_failure(const KernelDesc& kernel, const CaseOutcome& outcome, FailureRecord& failure) {}
  // The first failure, rendered (failure.text).
  virtual void failed(const KernelDesc& kernel, const FailureRecord& failure) {}
  virtual void kernel_finished(const KernelReport& report) {}
  // True ends the current kernel's check; the case in progress is dropped (an interrupt).
  virtual bool should_stop() { return false; }
  // About once a second while a kernel's first process makes its warm-up call (a Python kernel
  // compiling: harness/process/warmup.h), with the seconds so far.
  virtual void warming_up(const KernelDesc& kernel, double seconds) {}
};

// Several listeners as one, called in order.
class Listeners final : public SuiteListener {
 public:
  explicit Listeners(std::vector<SuiteListener*> all) : all_(std::move(all)) {}
  void kernel_started(size_t index, size_t kernels, const KernelDesc& kernel, double budget_s,
                      int64_t planned) override;
  void case_done(const KernelDesc& kernel, int64_t index, const CaseOutcome& outcome) override;
  void annotate_failure(const KernelDesc& kernel, const CaseOutcome& outcome, FailureRecord& failure) override;
  void failed(const KernelDesc& kernel, const FailureRecord& failure) override;
  void kernel_finished(const KernelReport& report) override;
  bool should_stop() override;
  void warming_up(const KernelDesc& kernel, double seconds) override;

 private:
  std::vector<SuiteListener*> all_;
};

// What a run or a replay came to.
struct SuiteResult {
  std::optional<uint64_t> seed;  // run: the schedule's seed
  std::vector<KernelReport> kernels;
  int64_t checked = 0;           // cases checked over all kernels
  std::string command;           // the command line, for the JSON report
  Shard shard;                   // run --shard I/N: which share of the schedule this was
  bool interrupted = false;      // the listener asked to stop: some kernels' cases were cut short
  bool any_failed() const;
};

// The built-in kernels and those of the plugins (loaded only in a child process, so a plugin
// whose loading crashes, hangs or exits fails its listing, never the suite), selected by name:
// every kernel when names is empty, each named one once. timeout_s bounds the listing child and
// is the kernels' watchdog. Throws WorkerStartError for a plugin that cannot be loaded,
// std::invalid_argument for an unknown name.
std::vector<SuiteKernel> find_kernels(const std::vector<std::string>& plugins, const std::vector<std::string>& names,
                                      double timeout_s);
// Which kernels: names (exact, or glob patterns such as "ctl_cuda_*"); none: every kernel. A
// pattern's matches and the default set are narrowed by memory and op; a name is taken as named
// (one in another memory than asked is an error; under an op it does not declare it is skipped
// later, saying so); a kernel matching an exclude pattern is left out.
// Whether `name` is one of `patterns`, each an exact name or a glob pattern (fnmatch).
bool name_matches(const std::vector<std::string>& patterns, const std::string& name);
struct KernelSelection {
  std::vector<std::string> names, exclude;
  std::optional<uint32_t> memory;  // NVFP4_MEMORY_HOST or NVFP4_MEMORY_CUDA
  std::optional<Op> op;
};
std::vector<SuiteKernel> select_kernels(const std::vector<std::string>& plugins, const KernelSelection& selection,
                                        double timeout_s);

// One kernel's cases from a schedule, spread over lanes (executors) that take the next case
// index as they finish one. Stops at the case limit, at the deadline (after at least one case),
// or at the first failure (the reproducer). The report is what one lane would have found: the
// first failure is the failing case of lowest index (lanes finish the lower cases in flight
// before it is decided), and only cases up to and including it are counted. A shard takes only
// its own indices (shard.h), and "up to" counts its own.
struct LaneSettings {
  int64_t cases = 0;       // 0: no limit; else only schedule indices below it (a shard's share of them)
  Shard shard;
  double seconds = 0;      // 0: no limit
  std::optional<uint64_t> seed;  // for the failure text
  CaseOptions case_options;      // stale_seed is taken from each scheduled case
  KernelArgs replay_args;        // for the failure's "reproduce:" line; empty: none is printed
  // Set when the lanes share one GPU context (harness/process/shared_context.h): lane L's
  // executor with a context of its own. A case that loses the shared context is run again on
  // it before it is reported, and from then on every lane uses its own.
  std::function<std::shared_ptr<Executor>(size_t lane)> own_context;
};
KernelReport check_kernel(const std::vector<Executor*>& lanes, const KernelDesc& kernel, const Schedule& schedule,
                          const LaneSettings& settings, SuiteListener& listener);
// The OpenMP team of each of `lanes` lanes (or mutation rows) side by side on `cores` cores
// (omp_get_num_procs()): the cores divided by the lanes, rounded up (at 12 lanes on 16 cores a
// team of one left the dual and GEMM schedules' references on one thread while other lanes waited
// on their kernels; teams of two: 11% and 7% more cases a second). A lane's results do not depend
// on its team's size.
int lane_team(int lanes, int cores);

// A kernel's report before any case: its name, origin and flags.
KernelReport kernel_report(const KernelDesc& kernel);
// The report of a kernel that was not checked, and why.
KernelReport skipped_report(const KernelDesc& kernel, const std::string& why);

// The kernel's schedule under these options, or nullopt with *why_not set when the kernel is
// skipped: it cannot run here, or declares no op the options allow.
std::optional<Schedule> kernel_schedule(const KernelDesc& kernel, const ScheduleOptions& options,
                                        std::string* why_not);

struct RunSettings {
  uint64_t seed = 0;    // the caller picks one (and prints it) when none was given
  std::optional<Op> op;
  std::optional<Shape> shape;
  int64_t cases = 0;    // per kernel (a shard checks its share of these indices)
  double seconds = 0;   // for all kernels together; with neither, kDefaultRunSeconds
  Shard shard;          // `--shard I/N`: only the cases whose index is I modulo N
  std::string case_dir = kDefaultCaseDir;
  std::optional<Policy> policy;
  double timeout_s = kDefaultCallTimeout;
  int jobs = 1;                   // kernel processes (lanes) per GPU, or in all for host kernels
  HugeTier huge = HugeTier::automatic;  // the huge tier of CUDA quantizers' cases (schedule.h)
  std::vector<std::string> gpus;  // CUDA_VISIBLE_DEVICES of the lanes; empty: the environment's
  SharedContextMode shared_context = SharedContextMode::automatic;  // CUDA lanes of one GPU: one MPS context
  std::string command_line;
};
SuiteResult run_suite(const std::vector<SuiteKernel>& kernels, const RunSettings& settings, SuiteListener& listener);

struct ReplayInput {
  std::string path;
  Problem problem;  // parsed, validated (and its `expect` checked) before anything runs
  // A kernel fuzzer input: its bytes, made a problem again for each kernel (fuzz_input_problem,
  // under the limits the fuzzer had), as the fuzzer did for the kernel it ran; `problem` is the
  // one for no particular kernel.
  std::optional<std::string> fuzz_bytes;
  ShapeLimits fuzz_limits;
};
struct ReplaySettings {
  std::string case_dir = kDefaultCaseDir;  // error maps and stale-state cases of failures
  std::optional<Policy> policy;
  double timeout_s = kDefaultCallTimeout;
  bool named = false;  // kernels were named: every input goes to every one
  std::string command_line;
};
// Reads and validates a case file (or, with fuzz_input, a kernel fuzzer input, taken as the fuzzer
// takes it in this environment: fuzz_input_problem with fuzz_limits_from_environment()); throws
// CaseError "FILE: what is wrong" (text that is no case file: the fuzzer runs nothing for it), or
// std::invalid_argument for a bad NVFP4_FUZZ_MAX_PRODUCTS.
ReplayInput read_replay_input(const std::string& path, bool fuzz_input);
// One input through every check (base gives the case directory for error maps and stale-state
// cases, and the policy).
CaseOutcome replay_case(Executor& executor, const ReplayInput& input, const CaseOptions& base);
// One kernel's inputs, as check_kernel does a schedule's cases (every input is checked).
KernelReport replay_kernel(Executor& executor, const KernelDesc& kernel, const std::vector<const ReplayInput*>& inputs,
                           const CaseOptions& base, const KernelArgs& replay_args, SuiteListener& listener);
// The inputs a kernel gets (all when named, else those of an op and layout it declares), each
// kernel through replay_kernel. result.checked == 0 means nothing was checked at all.
SuiteResult replay_suite(const std::vector<SuiteKernel>& kernels, const std::vector<ReplayInput>& inputs,
                         const ReplaySettings& settings, SuiteListener& listener);

// The table of `list`.
std::string kernel_table(const std::vector<SuiteKernel>& kernels);

}  // namespace nvfp4
