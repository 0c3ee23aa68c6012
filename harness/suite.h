// The suite core's top: which kernels, their cases from the one schedule spread over lanes (a
// kernel process each, on one GPU or several), progress, failures as they come, the summary
// table, the JSON report and the exit code. `run`, `replay` and `list` are thin callers of this;
// Python's nc.check runs check_kernel with an in-process executor.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/case_check.h"
#include "harness/report.h"
#include "harness/schedule.h"
#include "harness/worker.h"

namespace nvfp4 {

// A kernel the suite checks, and how to start its worker process.
struct SuiteKernel {
  KernelDesc desc;
  WorkerCommand command;
};

// The built-in kernels and those of the plugins (loaded only in a child process, so a plugin
// whose loading crashes, hangs or exits fails its listing, never the suite), selected by name:
// every kernel when names is empty, each named one once. timeout_s bounds the listing child and
// is the kernels' watchdog. Throws WorkerStartError for a plugin that cannot be loaded,
// std::invalid_argument for an unknown name.
std::vector<SuiteKernel> find_kernels(const std::vector<std::string>& plugins, const std::vector<std::string>& names,
                                      double timeout_s);

// One kernel's cases from a schedule, spread over lanes (executors) that take the next case
// index as they finish one. Stops at the case limit, at the deadline (after at least one case),
// or at the first failure (the reproducer).
struct LaneSettings {
  int64_t cases = 0;       // 0: no limit
  double seconds = 0;      // 0: no limit
  std::optional<uint64_t> seed;  // for the failure text
  CaseOptions case_options;      // stale_seed is taken from each scheduled case
  // Asked after each case: true ends the check, and that case is dropped (an interrupt in a
  // Python kernel).
  std::function<bool()> should_stop;
};
// Called under the report's lock after each case (progress displays, Python's callbacks).
using OnCase = std::function<void(const ScheduledCase&, const CaseOutcome&, const std::string& failure_text)>;
KernelReport check_kernel(const std::vector<Executor*>& lanes, const KernelDesc& kernel, const Schedule& schedule,
                          const LaneSettings& settings, const OnCase& on_case = {});

// A kernel's report before any case: its name, origin and flags.
KernelReport kernel_report(const KernelDesc& kernel);
// The report of a kernel that was not checked, and why.
KernelReport skipped_report(const KernelDesc& kernel, const std::string& why);

// The kernel's schedule under these options, or nullopt with *why_not set when the kernel is
// skipped: it cannot run here, or declares no op the options allow.
std::optional<Schedule> kernel_schedule(const KernelDesc& kernel, const ScheduleOptions& options,
                                        std::string* why_not);

struct RunSettings {
  std::optional<uint64_t> seed;  // else from the clock (printed)
  std::optional<Op> op;
  std::optional<Shape> shape;
  int64_t cases = 0;    // per kernel
  double seconds = 0;   // for all kernels together; with neither, the main job: 60 s
  std::string case_dir = "nvfp4check-cases";
  std::string report;
  std::optional<Policy> policy;
  double timeout_s = 30;
  int jobs = 1;                   // kernel processes (lanes) per GPU, or in all for host kernels
  std::vector<std::string> gpus;  // CUDA_VISIBLE_DEVICES of the lanes; empty: the environment's
  bool progress_bar = false;
  std::string command_line;
};
// Returns the exit code: 0 every kernel passed or was skipped, 1 one failed, 2 the report could
// not be written.
int run_suite(const std::vector<SuiteKernel>& kernels, const RunSettings& settings);

struct ReplayInput {
  std::string path;
  Problem problem;  // parsed, validated (and its `expect` checked) before anything runs
};
struct ReplaySettings {
  std::string case_dir = "nvfp4check-cases";  // error maps and stale-state cases of failures
  std::string report;
  std::optional<Policy> policy;
  double timeout_s = 30;
  bool named = false;  // kernels were named: every input goes to every one
  bool progress_bar = false;
  std::string command_line;
};
// Reads and validates a case file (or, with fuzz_input, decodes a kernel fuzzer input for no
// particular kernel); throws CaseError "FILE: what is wrong".
ReplayInput read_replay_input(const std::string& path, bool fuzz_input);
// One input through every check (base gives the case directory for error maps and stale-state
// cases, and the policy), its failure rendered as `replay` prints it.
struct ReplayedCase {
  CaseOutcome outcome;
  std::string failure_text, error_map;  // of a failure
};
ReplayedCase replay_case(Executor& executor, const KernelDesc& kernel, const ReplayInput& input,
                         const CaseOptions& base);
// 0 all passed, 1 a kernel failed, 2 nothing was checked at all or the report failed.
int replay_suite(const std::vector<SuiteKernel>& kernels, const std::vector<ReplayInput>& inputs,
                 const ReplaySettings& settings);

// The table of `list`.
std::string kernel_table(const std::vector<SuiteKernel>& kernels);

}  // namespace nvfp4
