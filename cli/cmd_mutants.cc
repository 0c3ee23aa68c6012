// `nvfp4check mutants`: mutation analysis (issue 8, docs/MUTANTS.md). Loads the mutants plugin and
// the honest plugin, runs every mutant through the suite and the two weaker checks, every honest
// kernel through the suite, prints the kill table and exits 0 only when the suite killed every
// mutant that could run and raised no false alarm.
#include <unistd.h>

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

#include "cli/commands.h"
#include "harness/mutation.h"
#include "harness/report.h"
#include "kernels/registry.h"

namespace nvfp4::cli {
namespace {

namespace fs = std::filesystem;

struct MutantsArgs {
  std::string plugin, honest_plugin, report, memory = "all", case_dir = "nvfp4check-cases/mutants";
  std::vector<std::string> kernels;
  std::optional<uint64_t> seed;
  int64_t budget = 200;
  std::optional<int64_t> honest_cases, weak_cases;
  bool no_weak = false, honest_only = false, small_shapes = false;
  double timeout_s = 30;
};

// A plugin built with this program: next to the executable, in the build tree's kernels/ folder,
// or in the installed lib/ folder.
std::string find_plugin(const std::string& file, const std::string& subdir) {
  char buf[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (len <= 0) return "";
  const fs::path dir = fs::path(std::string(buf, static_cast<size_t>(len))).parent_path();
  for (const fs::path& candidate : {dir / file, dir / ".." / "kernels" / subdir / file, dir / ".." / "lib" / file,
                                    dir / ".." / "lib" / "nvfp4check" / file}) {
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return "";
}

bool wanted(const Kernel& k, const MutantsArgs& args) {
  if (args.memory == "host" && k.is_cuda()) return false;
  if (args.memory == "cuda" && !k.is_cuda()) return false;
  if (args.kernels.empty()) return true;
  for (const std::string& name : args.kernels)
    if (k.name() == name) return true;
  return false;
}

int run_mutants(const MutantsArgs& args, const std::string& command) {
  MutationOptions options;
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
  if (args.small_shapes) {
    // For long honest runs: small cases, still across tile edges of 32 rows and 64 elements.
    options.limits.max_m = 70;
    options.limits.max_n = 20;
    options.limits.max_k = 160;
    options.limits.max_l = 3;
  }
  const int64_t honest_cases = args.honest_cases.value_or(args.budget);

  const std::string mutant_plugin = args.plugin.empty() ? find_plugin("libnvfp4_mutants.so", "mutants") : args.plugin;
  const std::string honest_plugin =
      args.honest_plugin.empty() ? find_plugin("libnvfp4_honest.so", "honest") : args.honest_plugin;
  if (mutant_plugin.empty() || honest_plugin.empty()) {
    fmt::print(stderr, "nvfp4check mutants: cannot find {} next to the program; build with -DNVFP4_MUTANTS=ON or "
               "pass --plugin/--honest-plugin\n", mutant_plugin.empty() ? "libnvfp4_mutants.so" : "libnvfp4_honest.so");
    return 2;
  }
  Registry mutants, honest;
  try {
    mutants.load_plugin(mutant_plugin);
    honest.load_plugin(honest_plugin);
  } catch (const PluginError& e) {
    fmt::print(stderr, "nvfp4check mutants: {}\n", e.what());
    return 2;
  }
  for (const std::string& name : args.kernels) {
    if (!mutants.find(name) && !honest.find(name)) {
      fmt::print(stderr, "nvfp4check mutants: no kernel named '{}' in either plugin\n", name);
      return 2;
    }
  }

  fmt::print(stderr, "mutants: seed {} (rerun with --seed {}), budget {} suite cases, {} GPU MODE style cases, "
             "{} honest cases per kernel\n", options.seed, options.seed, options.budget,
             options.weak_checks ? options.weak_cases : 0, honest_cases);
  fmt::print(stderr, "mutants plugin {}\nhonest plugin {}\n", mutant_plugin, honest_plugin);

  std::vector<MutantRow> rows;
  std::vector<HonestRow> honest_rows;
  // The mutants plugin's controls (ctl_*: its engines with no bug) must pass like honest kernels.
  std::vector<const Kernel*> honest_kernels;
  for (const Kernel& k : mutants.kernels()) {
    if (!wanted(k, args)) continue;
    if (k.name().rfind("mut_", 0) != 0) {
      honest_kernels.push_back(&k);
      continue;
    }
    if (args.honest_only) continue;
    const MutantRow row = analyse_mutant(k, mutant_description(mutant_plugin, k.index), options);
    if (!row.runnable) {
      fmt::print(stderr, "  {}: skipped ({})\n", row.name, row.why_not);
    } else {
      fmt::print(stderr, "  {}: suite {}{} after {} case(s), {:.2f}s\n", row.name,
                 row.suite.failed ? "KILLED by " : "SURVIVED", row.suite.failed ? row.suite.check : "", row.suite.cases,
                 row.suite.seconds);
      if (row.suite.failed && !row.suite.case_desc.empty()) fmt::print(stderr, "    {}\n", row.suite.case_desc);
    }
    rows.push_back(row);
  }
  for (const Kernel& k : honest.kernels())
    if (wanted(k, args)) honest_kernels.push_back(&k);
  if (honest_cases > 0) {
    for (const Kernel* k : honest_kernels) {
      const HonestRow row = run_honest(*k, honest_cases, options);
      if (!row.runnable) {
        fmt::print(stderr, "  {}: skipped ({})\n", row.name, row.why_not);
      } else {
        fmt::print(stderr, "  {}: {} case(s), {}, {:.2f}s\n", row.name, row.suite.cases,
                   row.suite.failed ? "FALSE ALARM: " + row.suite.check + ": " + row.suite.message : "no false alarm",
                   row.suite.seconds);
      }
      honest_rows.push_back(row);
    }
  }

  if (!rows.empty()) fmt::print("{}\n", kill_table(rows));
  if (!honest_rows.empty()) fmt::print("{}", honest_table(honest_rows));
  fmt::print("seed {}\n", options.seed);

  if (!args.report.empty()) {
    try {
      write_report_file(args.report, mutation_report_json(options, rows, honest_rows, command));
    } catch (const std::exception& e) {
      fmt::print(stderr, "nvfp4check mutants: {}\n", e.what());
      return 2;
    }
  }
  bool ok = true;
  for (const MutantRow& r : rows) ok = ok && (!r.runnable || r.suite.failed);
  for (const HonestRow& r : honest_rows) ok = ok && !(r.runnable && r.suite.failed);
  return ok ? 0 : 1;
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
  cmd->add_option("--budget", args->budget, "suite cases per mutant, at most (default 200)")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", args->seed, "seed of every generated case (default: random, printed)");
  cmd->add_option("--report", args->report, "write the JSON report here");
  cmd->add_option("--honest-cases", args->honest_cases, "suite cases per honest kernel (default: the budget; 0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--weak-cases", args->weak_cases, "GPU MODE style cases per mutant (default: the budget)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-weak", args->no_weak, "skip the GPU MODE and KernelBench style checks");
  cmd->add_flag("--honest-only", args->honest_only, "run only the honest kernels and the controls (long runs)");
  cmd->add_flag("--small-shapes", args->small_shapes, "small generated shapes (m <= 70, n <= 20, k <= 160, l <= 3)");
  cmd->add_option("--memory", args->memory, "host, cuda or all (default) kernels")
      ->check(CLI::IsMember({"host", "cuda", "all"}));
  cmd->add_option("--kernel", args->kernels, "only these kernels (repeatable)");
  cmd->add_option("--case-dir", args->case_dir, "where failing cases are saved (default nvfp4check-cases/mutants)");
  cmd->add_option("--timeout", args->timeout_s, "seconds per kernel call before it counts as hung (default 30)")
      ->check(CLI::PositiveNumber);
  cmd->callback([args, &exit_code] {
    exit_code = run_mutants(*args, "nvfp4check mutants");
  });
}

}  // namespace nvfp4::cli
