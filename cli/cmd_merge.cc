// `nvfp4check merge REPORT...`: the reports of `run --shard I/N` joined into the one an unsharded
// run would have written (harness/report_merge.h). Argument parsing and printing only.
#include <algorithm>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "harness/report_merge.h"

namespace nvfp4::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> reports;
  std::string out;
};

int merge_main(const MergeArgs& args) {
  if (!args.out.empty()) check_report_writable(args.out);
  const MergedReport m = merge_shard_reports(read_shard_reports(args.reports));
  fmt::print("seed: {}\nmerged {} shard(s) of: {}\n", m.seed, m.shards, m.command);
  fmt::print("\n{}", summary_table(m.kernels));
  for (const KernelReport& k : m.kernels)
    if (k.drawn.cases > 0) fmt::print("drawn, {}: {}\n", k.name, k.drawn.text());
  for (size_t x = 0; x < m.kernels.size(); ++x) {
    const KernelReport& k = m.kernels[x];
    if (!k.failure) continue;
    fmt::print("FAIL {}: first failure at case {} (shard {}/{}), check \"{}\"\n  case file: {}\n", k.name,
               k.failure->case_index, m.failure_shard[x], m.shards, check_name(k.failure->check), k.failure->case_file);
    if (!k.failure->reproduce.empty()) fmt::print("  reproduce: {}\n", k.failure->reproduce);
    for (const ShardFailure& f : m.shard_failures[x])
      if (f.failure.case_index != k.failure->case_index)
        fmt::print("  shard {} stopped at its own first failure, case {} ({})\n", f.shard, f.failure.case_index,
                   check_name(f.failure.check));
  }
  const bool failed = std::any_of(m.kernels.begin(), m.kernels.end(), [](const KernelReport& k) { return k.verdict == KernelVerdict::fail; });
  if (!args.out.empty()) {
    try {
      write_report_file(args.out, merged_report_json(m));
    } catch (const std::exception& e) {
      fmt::print(stderr, "nvfp4check merge: {}\n", e.what());
      return failed ? 1 : 2;
    }
  }
  return failed ? 1 : 0;
}

}  // namespace

void add_merge_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* merge = app.add_subcommand(
      "merge", "Join the JSON reports of `run --shard I/N` (I = 0..N-1) into the report of one unsharded run");
  merge->add_option("reports", args->reports, "The shards' reports (--report of each `run --shard`)")->required();
  merge->add_option("--report", args->out, "Write the merged JSON report here");
  merge->callback([args, &exit_code] {
    try {
      exit_code = merge_main(*args);
    } catch (const std::exception& e) {
      // Not a report, reports of different runs, a shard missing or twice, an unwritable output.
      fmt::print(stderr, "nvfp4check merge: {}\n", e.what());
      exit_code = 2;
    }
  });
}

}  // namespace nvfp4::cli
