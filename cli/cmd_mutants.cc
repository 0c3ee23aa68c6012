// `nvfp4check mutants`: mutation analysis (docs/MUTANTS.md). Loads the mutants plugin and
// the honest plugin, runs every mutant through the suite and the two weaker checks, every honest
// kernel through the suite, prints the kill table and exits 0 only when the suite killed every
// mutant that could run and raised no false alarm.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "mutation/mutation_driver.h"

namespace nvfp4::cli {
namespace {

namespace fs = std::filesystem;

struct MutantsArgs {
  std::string plugin, honest_plugin, report, junit, memory = "all", case_dir = "nvfp4check-cases/mutants";
  std::vector<std::string> kernels;
  std::optional<uint64_t> seed;
  int64_t budget = 200;
  std::optional<int64_t> honest_cases, weak_cases;
  bool no_weak = false, honest_only = false, small_shapes = false, as_matrix_unit = false;
  double timeout_s = kDefaultCallTimeout;
  int64_t jobs = 0;
};

// Kernels checked side by side when --jobs is not given: one per CPU it may use, at most 8. A kernel's
// process and the parent's reference take turns, so each row alone keeps about one core busy.
int default_mutant_jobs() {
  const unsigned cores = usable_cpus();
  return static_cast<int>(std::clamp(cores, 1u, 8u));
}

// A plugin built with this program: next to the executable, in the build tree's kernels/ folder,
// or in the installed lib/ folder.
std::string find_plugin(const std::string& file, const std::string& subdir) {
  char buf[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (len <= 0) return "";
  const fs::path dir = fs::path(std::string(buf, static_cast<size_t>(len))).parent_path();
  for (const fs::path& candidate : {dir / file, dir / ".." / "mutation" / subdir / file, dir / ".." / "lib" / file,
                                    dir / ".." / "lib" / "nvfp4check" / file}) {
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return "";
}

int run_mutants(const MutantsArgs& args, const std::string& command) {
  MutationRun run;
  MutationOptions& options = run.options;
  if (args.seed) {
    options.seed = *args.seed;
  } else {
    std::random_device rd;
    options.seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  options.budget = args.budget;
  options.weak_cases = args.weak_cases.value_or(args.budget);
  options.weak_checks = !args.no_weak;
  options.case_dir = args.case_dir;
  options.timeout_s = args.timeout_s;
  options.small_shapes = args.small_shapes;
  options.as_matrix_unit = args.as_matrix_unit;
  run.honest_cases = args.honest_cases.value_or(args.budget);
  run.mutant_plugin = args.plugin.empty() ? find_plugin("libnvfp4_mutants.so", "mutants") : args.plugin;
  run.honest_plugin = args.honest_plugin.empty() ? find_plugin("libnvfp4_honest.so", "honest") : args.honest_plugin;
  if (run.mutant_plugin.empty() || run.honest_plugin.empty()) {
    fmt::print(stderr, "nvfp4check mutants: cannot find {} next to the program; build with -DNVFP4_MUTANTS=ON or "
               "pass --plugin/--honest-plugin\n", run.mutant_plugin.empty() ? "libnvfp4_mutants.so" : "libnvfp4_honest.so");
    return 2;
  }
  run.report = args.report;
  run.junit = args.junit;
  run.memory = args.memory;
  run.kernels = args.kernels;
  run.honest_only = args.honest_only;
  run.jobs = args.jobs > 0 ? static_cast<int>(args.jobs) : default_mutant_jobs();
  run.command_line = command;
  return run_mutation_analysis(run);
}

}  // namespace

void add_mutants_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<MutantsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "mutants", "Mutation analysis: run every mutant kernel through this suite and two weaker checks (GPU MODE and "
                 "KernelBench style), and every honest kernel through this suite; exit 0 only if every mutant is "
                 "killed and no honest kernel fails");
  cmd->add_option("--plugin", args->plugin, "the mutants plugin (default: libnvfp4_mutants.so built with this program)");
  cmd->add_option("--honest-plugin", args->honest_plugin,
                  "the honest kernels' plugin (default: libnvfp4_honest.so built with this program)");
  cmd->add_option("--budget", args->budget, "suite cases per mutant, at most (default 200)")
      ->check(count_in_range(int64_t(1) << 40));
  cmd->add_option("--seed", args->seed, "seed of every generated case (default: random, printed)")->check(unsigned_seed());
  cmd->add_option("--report", args->report, "write the JSON report here");
  cmd->add_option("--junit", args->junit,
                  "write JUnit XML here too: a test case per kernel (a mutant passes when killed, an honest kernel "
                  "when it raised no false alarm)");
  cmd->add_option("--honest-cases", args->honest_cases, "suite cases per honest kernel (default: the budget; 0: none)")
      ->check(CLI::Validator(
          [](std::string& t) { return t == "0" ? std::string() : count_in_range(int64_t(1) << 40)(t); }, "N >= 0"));
  cmd->add_option("--weak-cases", args->weak_cases, "GPU MODE style cases per mutant (default: the budget)")
      ->check(count_in_range(int64_t(1) << 40));
  cmd->add_flag("--no-weak", args->no_weak, "skip the GPU MODE and KernelBench style checks");
  cmd->add_flag("--honest-only", args->honest_only, "run only the honest kernels and the controls (long runs)");
  cmd->add_flag("--small-shapes", args->small_shapes,
                "small generated shapes (m <= 70, n <= 20, k <= 160, l <= 3, no large tail)");
  cmd->add_flag("--as-matrix-unit", args->as_matrix_unit,
                "judge every kernel as if it declared NVFP4_FLAG_MMA_ACCUMULATE (what the looser rule lets through)");
  cmd->add_option("--memory", args->memory, "host, cuda or all (default) kernels")
      ->check(CLI::IsMember({"host", "cuda", "all"}));
  cmd->add_option("--kernel", args->kernels, "only these kernels: names or glob patterns such as 'mut_cuda_mx_*' (repeatable)");
  cmd->add_option("--case-dir", args->case_dir, "where failing cases are saved (default nvfp4check-cases/mutants)");
  cmd->add_option("--timeout", args->timeout_s, "seconds per kernel call before it counts as hung (default 30)")
      ->check(seconds_in_range(24 * 3600.0));
  cmd->add_option("--jobs", args->jobs,
                  "kernels checked side by side, each in a process of its own (default: one per CPU it may use, at most 8); "
                  "the table does not depend on it")
      ->check(count_in_range(256));
  cmd->callback([args, &exit_code] {
    exit_code = run_mutants(*args, "nvfp4check mutants");
  });
}

}  // namespace nvfp4::cli
