// `nvfp4check run`: checks kernels on the suite's schedule of seeded cases (harness/suite.h),
// and the hidden `worker` command the kernel processes run. Argument parsing only.
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "harness/suite.h"

namespace nvfp4::cli {
namespace {

struct RunArgs {
  std::vector<std::string> plugins, kernels, gpus;
  std::string op, report, case_dir = "nvfp4check-cases", policy, shape;
  // run --python FILE[:FUNCTION] (SPEC.md sections 6 and 7)
  std::string python, format = "canonical", memory = "cuda", python_exe;
  uint32_t flags = 0;
  int64_t cases = 0;
  double seconds = 0, timeout_s = 30;
  std::optional<uint64_t> seed;
  int64_t jobs = 0;
};

// Kernel processes per GPU (or in all, for host kernels) when --jobs is not given: half the cores,
// at most 8, so the parent's references and the kernels' processes share the machine.
int default_jobs() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp(cores / 2, 1u, 8u));
}

// A Python callable as a kernel: its process is Python's nvfp4check worker, serving the function
// over the same protocol as the program's own workers; the kernel's info comes from its first
// start (importing the file), which also shows a file that does not import as bad input.
SuiteKernel python_kernel(const RunArgs& args) {
  SuiteKernel k;
  const char* env_python = std::getenv("NVFP4_PYTHON");
  const std::string python = !args.python_exe.empty() ? args.python_exe : env_python && *env_python ? env_python : "python3";
  k.command.kernel = args.python;
  k.command.argv = {python, "-m", "nvfp4check.worker", args.python, "--format", args.format, "--memory", args.memory,
                    "--flags", std::to_string(args.flags), "--timeout", fmt::format("{}", args.timeout_s),
                    "--serve-fd", std::to_string(kWorkerChannelFd)};
  if (!args.op.empty()) k.command.argv.insert(k.command.argv.end(), {"--op", args.op});
  // execve needs a path: find the interpreter on PATH here.
  if (k.command.argv[0].find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t start = 0; start <= dirs.size();) {
      const size_t end = std::min(dirs.find(':', start), dirs.size());
      const std::string candidate = dirs.substr(start, end - start) + "/" + k.command.argv[0];
      if (access(candidate.c_str(), X_OK) == 0) {
        k.command.argv[0] = candidate;
        break;
      }
      start = end + 1;
    }
  }
  WorkerExecutor first(k.command, args.timeout_s);
  k.desc = first.kernel();  // WorkerStartError: the file does not import, or declares nonsense
  k.desc.origin = args.python;
  return k;
}

int run_main(const RunArgs& args, const std::string& command_line) {
  RunSettings s;
  s.seed = args.seed;
  if (!args.op.empty()) s.op = args.op == "gemv" ? Op::gemv : Op::gemm;
  if (!args.shape.empty()) s.shape = parse_shape(args.shape);
  if (!args.policy.empty()) s.policy = Policy::parse(args.policy);
  s.cases = args.cases;
  s.seconds = args.seconds;
  s.case_dir = args.case_dir;
  s.report = args.report;
  s.timeout_s = args.timeout_s;
  s.jobs = args.jobs > 0 ? static_cast<int>(args.jobs) : default_jobs();
  s.gpus = args.gpus;
  s.progress_bar = isatty(2) != 0;
  s.command_line = command_line;
  if (!args.python.empty()) return run_suite({python_kernel(args)}, s);
  return run_suite(find_kernels(args.plugins, args.kernels, args.timeout_s), s);
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "Check kernels on seeded generated cases (each kernel in its own process)");
  run->add_option("--plugin", args->plugins, "Shared library exporting the nvfp4 kernel ABI (repeatable)");
  run->add_option("--kernel", args->kernels, "Kernel to check (repeatable; default: every kernel that can run here)");
  run->add_option("--op", args->op, "Only this op")->check(CLI::IsMember({"gemv", "gemm"}));
  run->add_option("--cases", args->cases, "Cases per kernel (default: as many as the time allows)")
      ->check(count_in_range(int64_t(1) << 40));
  run->add_option("--seconds", args->seconds, "Time for all kernels together (default 60 without --cases)")
      ->check(seconds_in_range(30 * 24 * 3600.0));
  run->add_option("--seed", args->seed, "Seed of the schedule (default: from the clock, printed)")->check(unsigned_seed());
  run->add_option("--report", args->report, "Write the JSON report here (checked before anything runs)");
  run->add_option("--case-dir", args->case_dir, "Where cases are saved before they run (kept when they fail)");
  run->add_option("--policy", args->policy,
                  "Judge with this oracle policy instead of the one the kernel's flags call for "
                  "(fp32, matrix-unit, exact, fp16-accum, fp16-accum/matrix-unit, allclose:RTOL:ATOL, ulp:N)");
  run->add_option("--timeout", args->timeout_s, "Watchdog: seconds one kernel call may take (default 30)")
      ->check(seconds_in_range(24 * 3600.0));
  run->add_option("--shape", args->shape,
                  "Every case of this shape, MxNxK or MxNxKxL (e.g. 7168x1x16384 for a production GEMV; large "
                  "problems are judged against the GPU reference where there is a device)");
  run->add_option("--jobs", args->jobs,
                  "Kernel processes per kernel and GPU, taking cases from one schedule (default: half the cores, "
                  "at most 8)")
      ->check(count_in_range(256));
  run->add_option("--python", args->python,
                  "Check a Python function instead: FILE[:FUNCTION] (default custom_kernel), called by Python's "
                  "nvfp4check worker (the package must be importable by --python-exe)");
  run->add_option("--format", args->format, "--python: what the function takes (SPEC.md section 7)")
      ->check(CLI::IsMember({"canonical", "gpumode"}));
  run->add_option("--memory", args->memory, "--python: where the function's tensors live (default cuda)")
      ->check(CLI::IsMember({"host", "cuda"}));
  run->add_option("--flags", args->flags, "--python: the function's declared flags (SPEC.md section 5 bits)");
  run->add_option("--python-exe", args->python_exe,
                  "--python: the interpreter (default: env NVFP4_PYTHON, else python3 on PATH)");
  run->add_option("--gpus", args->gpus,
                  "CUDA devices to spread CUDA kernels' processes over, as CUDA_VISIBLE_DEVICES values "
                  "(repeatable or comma-separated; default: the environment's)")
      ->delimiter(',');
  run->callback([args, &exit_code] {
    try {
      std::string command = "nvfp4check run";
      for (const auto& k : args->kernels) command += " --kernel " + k;
      for (const auto& p : args->plugins) command += " --plugin " + p;
      if (!args->op.empty()) command += " --op " + args->op;
      if (args->cases > 0) command += fmt::format(" --cases {}", args->cases);
      if (args->seconds > 0) command += fmt::format(" --seconds {}", args->seconds);
      if (!args->policy.empty()) command += " --policy " + args->policy;
      if (!args->shape.empty()) command += " --shape " + args->shape;
      if (!args->python.empty()) command += " --python " + args->python + " --format " + args->format;
      if (!args->python.empty() && (!args->plugins.empty() || !args->kernels.empty()))
        throw std::invalid_argument("--python checks one Python function; --plugin and --kernel do not go with it");
      exit_code = run_main(*args, command);
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
