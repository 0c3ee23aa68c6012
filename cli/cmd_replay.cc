// `nvfp4check replay FILE...`: saved cases (and, with --fuzz-input, binary inputs of the kernel
// fuzzer) against kernels, with every check of `run` (harness/engine/suite.h). Argument parsing only.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/python_kernel.h"
#include "harness/engine/listeners.h"
#include "harness/engine/suite.h"

namespace nvfp4::cli {
namespace {

struct ReplayArgs {
  std::vector<std::string> files, plugins, kernels;
  std::string report, junit, case_dir, policy;  // no case_dir: a fresh temporary folder (ReplayDir)
  PythonArgs python;
  double timeout_s = kDefaultCallTimeout;
  bool fuzz_input = false;
};

// Where a replay's error maps and stale-state cases go: --case-dir, or else a fresh folder under
// the system's temporary one (the inputs already are files: a replay writes nothing into the
// folder it runs in). That folder is removed when nothing was written into it, and named on
// stderr when something was (each failure text names its own files too).
class ReplayDir {
 public:
  explicit ReplayDir(const std::string& given) : path_(given) {
    if (!path_.empty()) return;
    std::string pattern = (std::filesystem::temp_directory_path() / "nvfp4check-replay-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a temporary folder " + pattern + ": " + std::strerror(errno));
    path_ = temporary_ = pattern;
  }
  ReplayDir(const ReplayDir&) = delete;
  ReplayDir& operator=(const ReplayDir&) = delete;
  ~ReplayDir() {
    if (temporary_.empty()) return;
    std::error_code ec;
    if (std::filesystem::is_empty(temporary_, ec) && !ec) std::filesystem::remove(temporary_, ec);
    else fmt::print(stderr, "nvfp4check replay: this replay's error maps and cases are in {}\n", temporary_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_, temporary_;
};

int replay_main(const ReplayArgs& args) {
  ReplaySettings s;
  if (!args.policy.empty()) s.policy = Policy::parse(args.policy);
  // Every input is read and validated here first, so a bad file is a usage error (exit 2) before
  // anything runs.
  std::vector<ReplayInput> inputs;
  for (const std::string& path : args.files) inputs.push_back(read_replay_input(path, args.fuzz_input));
  if (!args.report.empty()) check_report_writable(args.report);
  if (!args.junit.empty()) check_report_writable(args.junit);
  // The folder is settled (removed when empty, else named) before an interrupted replay ends by
  // its signal, which runs no destructor.
  std::optional<ReplayDir> dir(std::in_place, args.case_dir);
  s.case_dir = dir->path();
  s.timeout_s = args.timeout_s;
  s.command_line = "nvfp4check replay";
  for (const std::string& f : args.files) s.command_line += " " + f;
  std::vector<SuiteKernel> kernels;
  if (!args.python.python.empty()) {
    if (!args.plugins.empty() || !args.kernels.empty())
      throw std::invalid_argument("--python replays with one Python function; --plugin and --kernel do not go with it");
    kernels.push_back(python_kernel(args.python, args.timeout_s));
    s.named = true;
  } else {
    kernels = find_kernels(args.plugins, args.kernels, args.timeout_s);
    s.named = !args.kernels.empty();
  }
  ConsoleListener console(isatty(2) != 0);
  ErrorMapListener maps(s.case_dir);
  InterruptListener interrupt;
  Listeners listeners({&interrupt, &maps, &console});
  const SuiteResult result = replay_suite(kernels, inputs, s, listeners);
  console.summary(result);
  const bool written =
      write_json_report(args.report, result) & write_junit_report(args.junit, "nvfp4check replay", result);
  const int code = suite_exit_code(result, written, true);
  dir.reset();
  interrupt.end_if_interrupted();
  if (!result.any_failed() && result.checked == 0)
    fmt::print(stderr, "nvfp4check replay: nothing was checked: {}\n",
               result.kernels.empty() ? "no kernel declares the op and scale layout of these inputs"
                                      : "every kernel skipped every input (see the table)");
  return code;
}

}  // namespace

void add_replay_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* replay = app.add_subcommand("replay", "Run saved case files (or binary fuzz inputs) against kernels");
  replay->add_option("files", args->files, "Case files (or, with --fuzz-input, binary inputs of the kernel fuzzer)")
      ->required();
  replay->add_option("--plugin", args->plugins, "Shared library exporting the nvfp4 kernel ABI (repeatable)");
  replay->add_option("--kernel", args->kernels,
                     "Kernel to check (repeatable; default: every runnable kernel declaring the input's op and layout)");
  replay->add_option("--report", args->report, "Write the JSON report here (checked before anything runs)");
  replay->add_option("--junit", args->junit, "Write JUnit XML here too, one test case per kernel (for CI dashboards)");
  replay->add_option("--case-dir", args->case_dir,
                     "Where error maps and stale-state cases of failures go (default: a fresh temporary folder, "
                     "named when used)");
  replay->add_option("--policy", args->policy,
                     "Judge with this oracle policy instead of the one the kernel's flags call for");
  replay->add_option("--timeout", args->timeout_s, "Watchdog: seconds one kernel call may take (default 30)")
      ->check(seconds_in_range(24 * 3600.0));
  add_python_options(replay, args->python, true);
  replay->add_flag("--fuzz-input", args->fuzz_input,
                   "The files are inputs of the kernel fuzzer (drawn for each kernel as the fuzzer did), not case files");
  replay->callback([args, &exit_code] {
    try {
      exit_code = replay_main(*args);
    } catch (const std::exception& e) {
      // A bad input file, plugin or kernel name, or a report that cannot be written.
      fmt::print(stderr, "nvfp4check replay: {}\n", e.what());
      exit_code = 2;
    }
  });
}

}  // namespace nvfp4::cli
