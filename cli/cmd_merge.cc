// `nvfp4check merge REPORT...`: the reports of `run --shard I/N` joined into the one an unsharded
// run would have written (harness/engine/report_merge.h); with --summary, a campaign's account as well:
// each shard's work, every shard's first failure replayed through its own reproduce line, and the
// campaign's verdict. Argument parsing, printing and the replays' processes.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <memory>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "harness/engine/report_merge.h"
#include "harness/process/worker.h"

extern char** environ;

namespace nvfp4::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> reports;
  std::string out;
  bool summary = false;
  int64_t shards = 0;                   // --summary: N, when no report may say it
  std::vector<std::string> incomplete;  // --summary: work the scheduler did not complete, as it names it
  std::string resubmit;                 // --summary: the command that runs what is missing
};

// Exit status of --summary for a campaign that is not complete (never a pass).
constexpr int kIncomplete = 3;

void print_merged(const MergedReport& m, const std::string& indent) {
  std::string t = fmt::format("seed: {}\nmerged {} shard(s) of: {}\n\n{}", m.seed, m.shards, m.command,
                              summary_table(m.kernels));
  for (const KernelReport& k : m.kernels)
    if (k.drawn.cases > 0) t += fmt::format("drawn, {}: {}\n", k.name, k.drawn.text());
  for (size_t x = 0; x < m.kernels.size(); ++x) {
    const KernelReport& k = m.kernels[x];
    if (!k.failure) continue;
    t += fmt::format("FAIL {}: first failure at case {} (shard {}/{}), check \"{}\"\n  case file: {}\n", k.name,
                     k.failure->case_index, m.failure_shard[x], m.shards, check_name(k.failure->check),
                     k.failure->case_file);
    if (!k.failure->reproduce.empty()) t += fmt::format("  reproduce: {}\n", k.failure->reproduce);
    for (const ShardFailure& f : m.shard_failures[x])
      if (f.failure.case_index != k.failure->case_index)
        t += fmt::format("  shard {} stopped at its own first failure, case {} ({})\n", f.shard, f.failure.case_index,
                         check_name(f.failure.check));
  }
  size_t at = 0;
  for (size_t nl; (nl = t.find('\n', at)) != std::string::npos; at = nl + 1)
    fmt::print("{}{}\n", nl > at ? indent : "", t.substr(at, nl - at));
}

bool any_failed(const std::vector<KernelReport>& kernels) {
  return std::any_of(kernels.begin(), kernels.end(), [](const KernelReport& k) { return k.verdict == KernelVerdict::fail; });
}

int merge_main(const MergeArgs& args) {
  if (!args.out.empty()) check_report_writable(args.out);
  const MergedReport m = merge_shard_reports(read_shard_reports(args.reports));
  print_merged(m, "");
  const bool failed = any_failed(m.kernels);
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

// Runs a failure's reproduce line (`nvfp4check replay ...`) with this program, its output in
// LOG; what the replay said, in words.
std::string replay(const FailureRecord& f) {
  if (f.reproduce.empty()) return "not replayed: the report has no reproduce line for it";
  std::optional<std::vector<std::string>> words = shell_words(f.reproduce);
  if (!words || words->size() < 2 || (*words)[0] != "nvfp4check" || (*words)[1] != "replay")
    return "not replayed: its reproduce line is no `nvfp4check replay` command";
  (*words)[0] = worker_program();
  const std::string log = f.case_file + ".replay.log";
  std::vector<char*> argv;
  for (std::string& w : *words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t io;
  posix_spawn_file_actions_init(&io);
  posix_spawn_file_actions_addopen(&io, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&io, 1, 2);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, argv[0], &io, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&io);
  if (error != 0) return fmt::format("replay error (cannot start {}: {})", argv[0], std::strerror(error));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (rc == 1) return "reproduced (exit 1: the kernel fails)";
  if (rc == 0) return "did NOT reproduce (exit 0)";
  return fmt::format("replay error (exit {}, see {})", rc, log);
}

// A campaign's account from the shards' reports that exist (those of incomplete tasks are
// missing): work per shard, the merge when every shard is there, every shard's first failure
// replayed, the verdict. Exit 0 pass, 1 a failure, 2 bad reports, 3 incomplete.
int summary_main(const MergeArgs& args) {
  const std::vector<ShardReport> reports = read_shard_reports(args.reports);
  int64_t n = args.shards;
  std::map<int64_t, const ShardReport*> by_index;
  std::vector<std::vector<KernelReport>> kernels;
  for (const ShardReport& r : reports) {
    const int64_t count = r.json.contains("shard") ? r.json["shard"].value("count", int64_t{1}) : 1;
    const int64_t index = r.json.contains("shard") ? r.json["shard"].value("index", int64_t{0}) : 0;
    if (n == 0) n = count;
    if (count != n || index < 0 || index >= n || by_index.count(index))
      throw MergeError(fmt::format("{}: shard {}/{} is not one of the {} shards, or given twice", r.path, index, count, n));
    by_index[index] = &r;
  }
  if (n == 0) throw MergeError("no report, and no --shards N to say how many are missing");
  int64_t total_cases = 0;
  double total_seconds = 0;
  std::map<int64_t, std::vector<KernelReport>> parts;
  for (const auto& [index, r] : by_index) {
    int64_t cases = 0;
    double seconds = 0;
    for (const nlohmann::json& e : r->json.at("kernels")) {
      try {
        parts[index].push_back(kernel_report_from_json(e));
      } catch (const MergeError& err) {
        throw MergeError(r->path + ": " + err.what());
      }
      cases += parts[index].back().cases;
      seconds += parts[index].back().seconds;
    }
    fmt::print("shard {}/{}: {} cases in {:.1f} s{}\n", index, n, cases, seconds,
               seconds > 0 ? fmt::format(" ({:.1f} cases/s)", double(cases) / seconds) : "");
    total_cases += cases;
    total_seconds += seconds;
  }
  fmt::print("checked: {}\n", total_seconds > 0 ? fmt::format("{} cases, {:.1f} cases/s per task", total_cases,
                                                               double(total_cases) / total_seconds)
                                                 : fmt::format("{} cases", total_cases));
  std::string missing;
  for (int64_t i = 0; i < n; ++i)
    if (!by_index.count(i)) missing += fmt::format("{}{}", missing.empty() ? "" : " ", i);
  if (missing.empty()) {
    if (!args.out.empty()) fmt::print("merged report of the {} shard(s): {}\n", n, args.out);
    const int rc = merge_main(MergeArgs{args.reports, args.out});
    if (rc == 2) return 2;
  } else {
    fmt::print("NOT MERGED: shard(s) {} of {} have no report (their tasks did not complete)\n", missing, n);
  }
  // Every shard's own first failure, replayed: a failure a later shard found is news as well.
  fmt::print("failures:\n");
  int found = 0;
  for (const auto& [index, ks] : parts)
    for (const KernelReport& k : ks) {
      if (!k.failure) continue;
      ++found;
      fmt::print("  {}: case {}, check \"{}\", found by shard {}/{} (task {})\n", k.name, k.failure->case_index,
                 check_name(k.failure->check), index, n, index);
      fmt::print("    {}  -> {}\n", k.failure->reproduce.empty() ? k.failure->case_file : k.failure->reproduce,
                 replay(*k.failure));
    }
  if (found == 0) fmt::print("  none\n");
  std::string not_done;
  for (const std::string& what : args.incomplete) not_done += (not_done.empty() ? " " : ", ") + what;
  if (not_done.empty() && !missing.empty()) not_done = fmt::format(" shard(s) {} of {} have no report", missing, n);
  if (found > 0) {
    fmt::print("verdict: FAIL ({} failure(s) above){}\n", found, not_done.empty() ? "" : "; also incomplete:" + not_done);
    return 1;
  }
  if (!not_done.empty()) {
    fmt::print("verdict: INCOMPLETE, not a pass:{}{}\n", not_done, args.resubmit.empty() ? "" : "; resubmit: " + args.resubmit);
    return kIncomplete;
  }
  fmt::print("verdict: PASS (every task completed, nothing failed)\n");
  return 0;
}

}  // namespace

void add_merge_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* merge = app.add_subcommand(
      "merge", "Join the JSON reports of `run --shard I/N` (I = 0..N-1) into the report of one unsharded run");
  merge->add_option("reports", args->reports, "The shards' reports (--report of each `run --shard`)");
  merge->add_option("--report", args->out, "Write the merged JSON report here");
  merge->add_flag("--summary", args->summary,
                  "A campaign's account: work per shard, the merge when every shard is there, every shard's first "
                  "failure replayed through its reproduce line, the verdict (exit 3: incomplete)");
  merge->add_option("--shards", args->shards, "--summary: the campaign's N (shards with no report are missing)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  merge->add_option("--incomplete", args->incomplete,
                    "--summary: work that did not complete, as the scheduler names it (\"task 1 CANCELLED\"; repeatable)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  merge->add_option("--resubmit", args->resubmit, "--summary: the command that runs what is missing");
  merge->callback([args, &exit_code] {
    try {
      if (!args->summary && args->reports.empty()) throw MergeError("no report to merge");
      exit_code = args->summary ? summary_main(*args) : merge_main(*args);
    } catch (const std::exception& e) {
      // Not a report, reports of different runs, a shard missing or twice, an unwritable output.
      fmt::print(stderr, "nvfp4check merge: {}\n", e.what());
      exit_code = 2;
    }
  });
}

}  // namespace nvfp4::cli
