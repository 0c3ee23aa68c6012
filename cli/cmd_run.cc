// `nvfp4check run`: checks kernels on the suite's schedule of seeded cases (harness/engine/suite.h),
// and the hidden `worker` command the kernel processes run. Argument parsing only.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/python_kernel.h"
#include "harness/engine/listeners.h"
#include "harness/ops/op_module.h"
#include "harness/engine/suite.h"

namespace nvfp4::cli {
namespace {

struct RunArgs {
  std::vector<std::string> plugins, kernels, exclude, gpus;
  std::string memory,  // --memory without --python: only the kernels in this memory
      op, report, junit, case_dir = kDefaultCaseDir, policy, shape, shard;
  PythonArgs python;  // run --python FILE[:FUNCTION] (SPEC.md sections 6 and 7)
  int64_t cases = 0;
  double seconds = 0, timeout_s = kDefaultCallTimeout;
  std::optional<uint64_t> seed;
  int64_t jobs = 0;
  bool shard_given = false;  // `--shard ''` is an error, not no sharding
  std::string huge = "off";
  std::string shared_context = "auto";
};

int run_main(const RunArgs& args, const std::string& command_line) {
  RunSettings s;
  if (args.shard_given) s.shard = parse_shard(args.shard);
  // Without one seed the shards would each draw their own schedule, not split one.
  if (s.shard.sharded() && !args.seed) throw std::invalid_argument("--shard needs --seed (every shard the same)");
  s.seed = seed_or_clock(args.seed, "--seed ");
  if (!args.op.empty()) {
    Op op = Op::gemm;
    parse_op(args.op, &op);  // the option's check admits the four names only
    s.op = op;
  }
  if (!args.shape.empty()) s.shape = parse_shape(args.shape);
  if (!args.policy.empty()) s.policy = Policy::parse(args.policy);
  s.cases = args.cases;
  s.seconds = args.seconds;
  s.case_dir = args.case_dir;
  s.timeout_s = args.timeout_s;
  s.jobs = args.jobs > 0 ? static_cast<int>(args.jobs) : default_run_jobs(usable_cpus(), args.gpus.size());
  s.gpus = args.gpus;
  parse_shared_context(args.shared_context, &s.shared_context);  // the option's check admits the three names only
  s.huge = args.huge == "always" ? HugeTier::always : args.huge == "off" ? HugeTier::off : HugeTier::automatic;
  s.command_line = command_line;
  if (!args.report.empty()) check_report_writable(args.report);
  if (!args.junit.empty()) check_report_writable(args.junit);
  PythonArgs python = args.python;
  if (!args.op.empty()) python.ops = {args.op};  // run --op names the op it declares too
  KernelSelection selection;
  selection.names = args.kernels;
  selection.exclude = args.exclude;
  selection.op = s.op;
  if (!args.memory.empty()) selection.memory = args.memory == "cuda" ? NVFP4_MEMORY_CUDA : NVFP4_MEMORY_HOST;
  const std::vector<SuiteKernel> kernels = !args.python.python.empty()
                                               ? std::vector<SuiteKernel>{python_kernel(python, args.timeout_s)}
                                               : select_kernels(args.plugins, selection, args.timeout_s);
  fmt::print("seed: {}\n", s.seed);
  if (s.shard.sharded()) fmt::print("shard: {}/{}\n", s.shard.index, s.shard.count);
  std::fflush(stdout);
  ConsoleListener console(isatty(2) != 0, s.shape.has_value());
  ErrorMapListener maps;
  // A Python CUDA function's stream failures are run once more on the other stream, before the
  // failure is shown.
  const std::unique_ptr<SuiteListener> streams =
      !args.python.python.empty() ? other_stream_listener(kernels.front(), python, args.timeout_s, args.case_dir)
                                  : nullptr;
  InterruptListener interrupt;
  std::vector<SuiteListener*> all = {&interrupt, &maps, &console};
  if (streams) all.insert(all.begin(), streams.get());
  Listeners listeners(all);
  const SuiteResult result = run_suite(kernels, s, listeners);
  console.summary(result);
  const bool written = write_json_report(args.report, result) & write_junit_report(args.junit, "nvfp4check run", result);
  const int code = suite_exit_code(result, written, false);
  interrupt.end_if_interrupted();
  return code;
}

// The command line, for the report: what selects the kernels and the cases.
std::string run_command_line(const RunArgs& args) {
  std::string command = "nvfp4check run";
  for (const auto& k : args.kernels) command += " --kernel " + shell_quote(k);
  for (const auto& p : args.plugins) command += " --plugin " + p;
  for (const auto& x : args.exclude) command += " --exclude " + shell_quote(x);
  if (!args.memory.empty()) command += " --memory " + args.memory;
  if (!args.op.empty()) command += " --op " + args.op;
  if (args.cases > 0) command += fmt::format(" --cases {}", args.cases);
  if (args.seconds > 0) command += fmt::format(" --seconds {}", args.seconds);
  if (!args.policy.empty()) command += " --policy " + args.policy;
  if (!args.shape.empty()) command += " --shape " + args.shape;
  if (args.huge != "off") command += " --huge " + args.huge;
  if (!args.python.python.empty()) {
    command += " --python " + args.python.python + " --format " +
               (args.python.problem.empty() ? args.python.format : "gpumode");
    if (!args.python.problem.empty()) command += " --problem " + args.python.problem;
    if (args.python.stream != "current") command += " --stream " + args.python.stream;
  }
  return command;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "Check kernels on seeded generated cases (each kernel in its own process)");
  run->add_option("--plugin", args->plugins, "Shared library exporting the nvfp4 kernel ABI (repeatable)");
  run->add_option("--kernel", args->kernels,
                  "Kernel to check, or a glob pattern of names such as 'ctl_cuda_*' (repeatable; default: every "
                  "kernel)");
  run->add_option("--exclude", args->exclude, "Leave out the kernels whose names match this glob pattern (repeatable)");
  run->add_option("--op", args->op, "Only this op: the kernels that declare it (all named ones), and its cases")
      ->check(CLI::IsMember(op_names()));
  run->add_option("--cases", args->cases, "Cases per kernel (default: as many as the time allows)")
      ->check(count_in_range(int64_t(1) << 40));
  run->add_option("--seconds", args->seconds, fmt::format("Time for all kernels together (default {} without --cases)", kDefaultRunSeconds))
      ->check(seconds_in_range(30 * 24 * 3600.0));
  run->add_option("--seed", args->seed, "Seed of the schedule (default: from the clock, printed)")->check(unsigned_seed());
  run->add_option("--report", args->report, "Write the JSON report here (checked before anything runs)");
  run->add_option("--junit", args->junit, "Write JUnit XML here too, one test case per kernel (for CI dashboards)");
  run->add_option("--case-dir", args->case_dir, "Where cases are saved before they run (kept when they fail)");
  run->add_option("--policy", args->policy,
                  "Judge with this oracle policy instead of the one the kernel's flags call for "
                  "(fp32, matrix-unit, exact, fp16-accum, fp16-accum/matrix-unit, allclose:RTOL:ATOL, ulp:N)");
  run->add_option("--timeout", args->timeout_s, "Watchdog: seconds one kernel call may take (default 30)")
      ->check(seconds_in_range(24 * 3600.0));
  run->add_option("--shape", args->shape,
                  "Every case of this shape, MxNxK or MxNxKxL (e.g. 7168x1x16384 for a production GEMV; large "
                  "problems are judged against the GPU reference where there is a device)");
  run->add_option("--huge", args->huge,
                  "The huge tier of CUDA kernels: quantize cases with l*m*k just past 2^31 elements of X, and "
                  "grouped cases of a kernel taking the packed arrangement with a packed B just past 2^31 bytes "
                  "(32-bit offsets wrap there), drawn where the device's free memory holds them with margin: auto "
                  "(about one such case in 64), always (every one: to check the tier itself), off (the default: "
                  "one such case costs 15 s to a minute or more and tens of GB of host memory on an H200, past a "
                  "short run's time budget)")
      ->check(CLI::IsMember({"auto", "always", "off"}));
  run->add_option("--jobs", args->jobs,
                  "Kernel processes per kernel and GPU, taking cases from one schedule (default: three quarters of "
                  "the CPUs this process may use, shared among the --gpus, at least 2, at most 12)")
      ->check(count_in_range(256));
  run->add_option("--shared-context", args->shared_context,
                  "A CUDA kernel's processes on one GPU: auto (the default: one MPS context that this run starts "
                  "and quits, where nvidia-cuda-mps-control is on PATH and --jobs is 2 or more; else a context "
                  "each), mps (the same, an error where MPS cannot start), off (a context each, which the GPU runs "
                  "in turns). A case that loses the shared context is run again alone before it is reported")
      ->check(CLI::IsMember({"auto", "mps", "off"}));
  run->add_option("--shard", args->shard,
                  "I/N: only the cases whose schedule index is I modulo N (with --cases C, those below C), so N "
                  "machines split one schedule; `nvfp4check merge` joins their reports");
  add_python_options(run, args->python, false);
  run->add_option("--gpus", args->gpus,
                  "CUDA devices to spread CUDA kernels' processes over, as CUDA_VISIBLE_DEVICES values "
                  "(repeatable or comma-separated; default: the environment's)")
      ->delimiter(',');
  run->callback([args, run, &exit_code] {
    try {
      args->shard_given = run->count("--shard") > 0;
      // One --memory: a --python function's tensors, or which kernels (python_kernel.cc adds it).
      if (args->python.python.empty() && run->count("--memory") > 0) args->memory = args->python.memory;
      if (args->python.python.empty() && declares_anything(args->python))
        throw std::invalid_argument("--problem, --stream, --m-multiple, --n-multiple, --k-multiple, --min-sm, --flag, "
                                    "--flags, --sf-layout, --out-type and --name declare a --python function; a "
                                    "plugin's kernels declare for themselves");
      if (!args->python.python.empty() &&
          (!args->plugins.empty() || !args->kernels.empty() || !args->exclude.empty()))
        throw std::invalid_argument("--python checks one Python function; --plugin, --kernel and --exclude do not go "
                                    "with it");
      exit_code = run_main(*args, run_command_line(*args));
    } catch (const std::exception& e) {
      // Bad plugins, unknown kernel names, bad shapes or policies, an unwritable report.
      fmt::print(stderr, "nvfp4check run: {}\n", e.what());
      exit_code = 2;
    }
  });

  // The kernel process of run, replay and list; not for people (hidden from --help).
  auto wargs = std::make_shared<WorkerArgs>();
  CLI::App* worker = app.add_subcommand("worker", "internal: a kernel's process, driven over fd 3");
  worker->group("");
  worker->add_flag("--list", wargs->list);
  worker->add_option("--kernel", wargs->kernel);
  worker->add_option("--plugin", wargs->plugins);
  worker->add_option("--timeout", wargs->timeout_s);
  worker->callback([wargs, &exit_code] { exit_code = worker_main(*wargs); });
}

}  // namespace nvfp4::cli
