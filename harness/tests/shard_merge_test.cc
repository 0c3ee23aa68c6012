// `run --shard I/N` then `merge`: for N = 1, 2, 3 and 7 the merged report is the unsharded run's
// (verdicts, first failing index, counts that add up, the distribution drawn), for passing
// built-in kernels and a failing mutant; and merge refuses what is not N shards of one run.
// --cases bounds every run (never --seconds) and one lane each, so every count is exact.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/engine/report_merge.h"
#include "harness/tests/program_runner.h"

#ifndef NVFP4CHECK_EXE
#error "NVFP4CHECK_EXE must name the nvfp4check executable"
#endif

namespace nvfp4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::Outcome;
using test::read_json;

Outcome program(const std::string& args) { return test::run_program(NVFP4CHECK_EXE, args); }

const int64_t kShardCounts[] = {1, 2, 3, 7};

// `run ARGS --report R`, unsharded; returns the report.
json run_report(const fs::path& dir, const std::string& args, const std::string& name, int expected_exit) {
  const fs::path report = dir / (name + ".json");
  const std::string a = "run " + args + " --jobs 1 --case-dir " + (dir / (name + "-cases")).string() + " --report " +
                        report.string();
  const Outcome o = program(a);
  EXPECT_EQ(o.exit_code, expected_exit) << a;
  return read_json(report);
}

// The merged report through the program (its exit code, its summary) for shards 0..N-1.
json merge_reports(const fs::path& dir, const std::vector<fs::path>& shards, const std::string& name,
                   int expected_exit) {
  std::string a = "merge";
  for (const fs::path& s : shards) a += " " + s.string();
  const fs::path out = dir / (name + ".json");
  a += " --report " + out.string();
  const Outcome o = program(a);
  EXPECT_EQ(o.exit_code, expected_exit) << a;
  EXPECT_NE(o.output.find("kernel "), std::string::npos) << "the summary table";
  return read_json(out);
}

// Everything of a kernel's entry that an unsharded run and the merge of its shards must agree on
// (not the time, the workers started, or where the case files were written).
void expect_same_kernel(const json& merged, const json& whole) {
  SCOPED_TRACE(whole["name"].get<std::string>());
  for (const char* key : {"name", "origin", "verdict", "cases", "unsupported_cases", "skipped_cases", "failed_cases",
                          "elements", "exact_elements", "max_error_ulps", "max_error_over_bound", "flags", "policy",
                          "accumulation", "drawn"})
    EXPECT_EQ(merged.value(key, json()), whole.value(key, json())) << key;
  EXPECT_DOUBLE_EQ(merged["exact_regime_share"].get<double>(), whole["exact_regime_share"].get<double>());
  ASSERT_EQ(merged.contains("failure"), whole.contains("failure"));
  if (whole.contains("failure")) {
    const json &m = merged["failure"], &w = whole["failure"];
    for (const char* key : {"check", "case_index", "call", "message", "hint", "element"})
      EXPECT_EQ(m.value(key, json()), w.value(key, json())) << key;
    // The same case: the same file name (kernel, shape and a hash of the content), in the shard's folder.
    EXPECT_EQ(fs::path(m["case_file"].get<std::string>()).filename(), fs::path(w["case_file"].get<std::string>()).filename());
  }
}

std::vector<fs::path> run_shards(const fs::path& dir, const std::string& args, const std::string& name, int64_t n,
                                 std::vector<json>* reports, std::function<int(const json&)> exit_of) {
  std::vector<fs::path> paths;
  for (int64_t i = 0; i < n; ++i) {
    const std::string shard_name = name + "-" + std::to_string(i) + "of" + std::to_string(n);
    const fs::path report = dir / (shard_name + ".json");
    const std::string a = "run " + args + " --jobs 1 --case-dir " + (dir / (shard_name + "-cases")).string() +
                          " --report " + report.string() + " --shard " + std::to_string(i) + "/" + std::to_string(n);
    const Outcome o = program(a);
    const json r = read_json(report);
    EXPECT_EQ(o.exit_code, exit_of(r)) << a;
    if (n > 1) {
      EXPECT_EQ(r["shard"]["index"], i);
      EXPECT_EQ(r["shard"]["count"], n);
      EXPECT_NE(o.output.find("shard: " + std::to_string(i) + "/" + std::to_string(n)), std::string::npos);
    } else {
      EXPECT_FALSE(r.contains("shard")) << "1/1 is the whole schedule";
    }
    reports->push_back(r);
    paths.push_back(report);
  }
  return paths;
}

int exit_by_verdicts(const json& r) {
  for (const json& k : r["kernels"])
    if (k["verdict"] == "fail") return 1;
  return 0;
}

TEST(ShardMerge, PassingKernelsMergeToTheUnshardedReport) {
  const fs::path dir = test::fresh_dir("shard-pass");
  const std::string args = "--kernel host_gemv_fp32 --kernel host_gemm_fp32 --cases 32 --seed 3";
  const json whole = run_report(dir, args, "whole", 0);
  ASSERT_EQ(whole["kernels"].size(), 2u);
  for (int64_t n : kShardCounts) {
    SCOPED_TRACE("N = " + std::to_string(n));
    std::vector<json> shards;
    const auto paths = run_shards(dir, args, "pass", n, &shards, exit_by_verdicts);
    // Every index below 32 once: shard I has the ceil((32 - I) / N) of them that are I mod N.
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(shards[static_cast<size_t>(i)]["kernels"][0]["cases"], (32 - i + n - 1) / n);
    const json merged = merge_reports(dir, paths, "pass-merged-" + std::to_string(n), 0);
    EXPECT_EQ(merged["seed"], 3);
    EXPECT_EQ(merged["merged_shards"], n);
    EXPECT_EQ(merged["command"], whole["command"]);
    ASSERT_EQ(merged["kernels"].size(), 2u);
    for (size_t x = 0; x < 2; ++x) expect_same_kernel(merged["kernels"][x], whole["kernels"][x]);
  }
}

#ifdef NVFP4_MUTANTS_PLUGIN
// A mutant that saturates without declaring it: under seed 2 the first case it fails is index 11,
// and shards of 2, 3 and 7 stop at first failures of their own past it or reach the limit (7
// shards: none, none, none, 31, 11, 12, 27).
TEST(ShardMerge, FailingKernelMergesToTheSameFirstFailureAndCountsAddUp) {
  const fs::path dir = test::fresh_dir("shard-fail");
  const std::string base = std::string("--plugin ") + NVFP4_MUTANTS_PLUGIN +
                           " --kernel mut_host_saturates_undeclared --seed 2";
  const int64_t limit = 40;
  const json whole = run_report(dir, base + " --cases " + std::to_string(limit), "whole", 1);
  const json& wf = whole["kernels"][0];
  ASSERT_EQ(wf["verdict"], "fail");
  const int64_t first = wf["failure"]["case_index"];
  ASSERT_GT(first, 0) << "a first failure past index 0, so shards differ";
  // The unsharded run stops there: with one lane it checked exactly the indices 0..first.
  EXPECT_EQ(wf["cases"], first + 1);
  EXPECT_EQ(wf["failed_cases"], 1);

  for (int64_t n : kShardCounts) {
    SCOPED_TRACE("N = " + std::to_string(n));
    std::vector<json> shards;
    const auto paths = run_shards(dir, base + " --cases " + std::to_string(limit), "fail", n, &shards, exit_by_verdicts);
    const json merged = merge_reports(dir, paths, "fail-merged-" + std::to_string(n), 1);
    const json& mk = merged["kernels"][0];
    EXPECT_EQ(mk["verdict"], "fail");
    EXPECT_EQ(mk["failure"]["case_index"], first) << "the smallest failing index over the shards";
    EXPECT_EQ(mk["failure"]["shard"], first % n);
    EXPECT_EQ(mk["failure"]["check"], wf["failure"]["check"]);
    EXPECT_EQ(fs::path(mk["failure"]["case_file"].get<std::string>()).filename(),
              fs::path(wf["failure"]["case_file"].get<std::string>()).filename());
    // Counts add up: each shard checked its indices up to its own first failure (or the limit).
    int64_t expected_cases = 0, failing_shards = 0;
    for (int64_t i = 0; i < n; ++i) {
      const json& k = shards[static_cast<size_t>(i)]["kernels"][0];
      if (k.contains("failure")) {
        const int64_t own = k["failure"]["case_index"];
        EXPECT_EQ(own % n, i) << "a shard only checks its own indices";
        EXPECT_GE(own, first);
        expected_cases += Shard{i, n}.cases_below(own + 1);
        ++failing_shards;
      } else {
        expected_cases += Shard{i, n}.cases_below(limit);
      }
    }
    EXPECT_EQ(mk["cases"], expected_cases);
    EXPECT_EQ(mk["failed_cases"], failing_shards);
    EXPECT_EQ(mk["shard_failures"].size(), static_cast<size_t>(failing_shards));
    EXPECT_GE(mk["cases"].get<int64_t>(), first + 1) << "at least the unsharded run's indices 0..first";
    // The reproduce command, as the shard wrote it, names the mutant's plugin.
    EXPECT_NE(mk["failure"]["reproduce"].get<std::string>().find(NVFP4_MUTANTS_PLUGIN), std::string::npos);

    // Shards bounded at the first failure check exactly 0..first between them: then the merge is
    // the unsharded run's report in every count.
    std::vector<json> cut;
    const auto cut_paths =
        run_shards(dir, base + " --cases " + std::to_string(first + 1), "cut", n, &cut, exit_by_verdicts);
    const json whole_cut = run_report(dir, base + " --cases " + std::to_string(first + 1), "whole-cut", 1);
    const json merged_cut = merge_reports(dir, cut_paths, "cut-merged-" + std::to_string(n), 1);
    expect_same_kernel(merged_cut["kernels"][0], whole_cut["kernels"][0]);
    expect_same_kernel(whole_cut["kernels"][0], wf);
    EXPECT_EQ(merged_cut["kernels"][0]["cases"], first + 1);
  }
}
#endif

#ifdef NVFP4_MUTANTS_PLUGIN
// ---- Forged shard reports (exit 2, naming the file and what does not add up). ----

// Real shards of a campaign in which one shard finds the bug: `run --shard I/3 --seed 11 --cases
// 30` of a failing mutant (shard 1 fails at index 7, its third case; shards 0 and 2 pass their 10).
const char* const kForgedKernel = "mut_host_gemv_path_alpha_ignored";
constexpr int64_t kForgeryCases = 30, kForgeryShards = 3;

struct Campaign {
  fs::path dir;
  std::vector<fs::path> paths;
  std::vector<json> reports;
  size_t failing = 0;  // the shard that found the bug
  size_t passing = 0;  // one that did not
};

const Campaign& forgery_campaign() {
  static const Campaign c = [] {
    Campaign out;
    out.dir = test::fresh_dir("shard-forged");
    const std::string args = std::string("--plugin ") + NVFP4_MUTANTS_PLUGIN + " --kernel " + kForgedKernel +
                             " --seed 11 --cases " + std::to_string(kForgeryCases);
    out.paths = run_shards(out.dir, args, "honest", kForgeryShards, &out.reports, exit_by_verdicts);
    int failing = 0;
    for (size_t i = 0; i < out.reports.size(); ++i) {
      if (out.reports[i]["kernels"][0]["verdict"] == "fail") out.failing = i, ++failing;
      else out.passing = i;
    }
    EXPECT_EQ(failing, 1) << "one shard of three finds the bug";
    return out;
  }();
  return c;
}

// Merges the campaign's shards with shard `replaced`'s report replaced by `forged` (written as
// NAME.json); expects exit 2 and a message naming that file and saying `says`.
void expect_forgery_refused(size_t replaced, const json& forged, const std::string& name, const std::string& says) {
  SCOPED_TRACE(name);
  const Campaign& c = forgery_campaign();
  const fs::path path = c.dir / (name + ".json");
  std::ofstream(path) << forged.dump(2);
  std::string a = "merge";
  for (size_t i = 0; i < c.paths.size(); ++i) a += " " + (i == replaced ? path : c.paths[i]).string();
  const Outcome o = program(a);
  EXPECT_EQ(o.exit_code, 2) << a << "\n" << o.output;
  EXPECT_NE(o.output.find(path.string()), std::string::npos) << o.output;
  EXPECT_NE(o.output.find(says), std::string::npos) << o.output;
}

// The failing shard's report with its failure removed and the given verdict and counts.
json without_failure(const char* verdict, int64_t cases, int64_t failed_cases) {
  json r = forgery_campaign().reports[forgery_campaign().failing];
  json& k = r["kernels"][0];
  k["verdict"] = verdict;
  k["cases"] = cases;
  k["failed_cases"] = failed_cases;
  k.erase("failure");
  return r;
}

TEST(ShardMerge, HonestShardsOfTheForgeryCampaignMergeAsAFailure) {
  const Campaign& c = forgery_campaign();
  const json merged = merge_reports(c.dir, c.paths, "honest-merged", 1);
  EXPECT_EQ(merged["kernels"][0]["verdict"], "fail");
  EXPECT_EQ(merged["kernels"][0]["failure"]["shard"], c.failing);
}

// A campaign's account comes from the program: each shard's work, the merge, every shard's first
// failure replayed through the reproduce line its report carries, and the verdict.
TEST(ShardMerge, SummaryReplaysEachFailureAndGivesTheVerdict) {
  const Campaign& c = forgery_campaign();
  std::string all = "merge --summary";
  for (const fs::path& p : c.paths) all += " " + p.string();
  Outcome o = program(all);
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_NE(o.output.find("shard 0/3: 10 cases in "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("FAIL " + std::string(kForgedKernel) + ": first failure at case"), std::string::npos);
  const std::string found = std::string(kForgedKernel) + ": case " +
                            std::to_string(c.reports[c.failing]["kernels"][0]["failure"]["case_index"].get<int64_t>()) +
                            ", check \"";
  EXPECT_NE(o.output.find(found), std::string::npos) << o.output;
  const std::string reproduce = c.reports[c.failing]["kernels"][0]["failure"]["reproduce"];
  EXPECT_NE(o.output.find(reproduce + "  -> reproduced (exit 1: the kernel fails)"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("verdict: FAIL (1 failure(s) above)"), std::string::npos) << o.output;

  // Without the failing shard's report: not merged, nothing found, never a pass (exit 3).
  std::string partial = "merge --summary --incomplete 'task " + std::to_string(c.failing) + " CANCELLED'";
  for (size_t i = 0; i < c.paths.size(); ++i)
    if (i != c.failing) partial += " " + c.paths[i].string();
  o = program(partial);
  EXPECT_EQ(o.exit_code, 3) << o.output;
  EXPECT_NE(o.output.find("NOT MERGED: shard(s) " + std::to_string(c.failing) + " of 3"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("verdict: INCOMPLETE, not a pass: task " + std::to_string(c.failing) + " CANCELLED"),
            std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("PASS"), std::string::npos) << o.output;
  // No report at all: the count says what is missing.
  o = program("merge --summary --shards 2");
  EXPECT_EQ(o.exit_code, 3) << o.output;
  EXPECT_NE(o.output.find("NOT MERGED: shard(s) 0 1 of 2"), std::string::npos) << o.output;
}

TEST(ShardMerge, RefusesAForgedVerdictOrCount) {
  const Campaign& c = forgery_campaign();
  const size_t f = c.failing;
  // Skipped with no case, the drawn summary left saying cases were drawn.
  expect_forgery_refused(f, without_failure("skipped", 0, 0), "skipped-drawn", "drawn");
  // Skipped with no case and no drawn summary either, while the other shards checked theirs.
  json bare = without_failure("skipped", 0, 0);
  bare["kernels"][0].erase("drawn");
  expect_forgery_refused(f, bare, "skipped-bare", "no case");
  // A pass that still counts its failed case (the counts left as they were).
  const int64_t checked = c.reports[f]["kernels"][0]["cases"];
  expect_forgery_refused(f, without_failure("pass", checked, 1), "pass-failed-cases", "failed_cases");
  // A pass of 0, 5 or 1,000 cases: the shard's share of --cases 30 is exactly 10.
  for (int64_t cases : {0, 5, 1000})
    expect_forgery_refused(f, without_failure("pass", cases, 0), "pass-" + std::to_string(cases), "cases");
  // 1,000 cases with the drawn summary edited to match: still not the shard's 10.
  json both = without_failure("pass", 1000, 0);
  both["kernels"][0]["drawn"]["cases"] = 1000;
  expect_forgery_refused(f, both, "pass-1000-drawn-1000", "has exactly 10");
  // The failure kept, but the counts of a shard that went on past it.
  json past = c.reports[f];
  past["kernels"][0]["cases"] = 10;
  past["kernels"][0]["drawn"]["cases"] = 10;
  expect_forgery_refused(f, past, "fail-past-its-failure", "where it stops");
  // The right count for a pass, but the drawn summary still says what the failing run drew.
  const int64_t share = Shard{static_cast<int64_t>(f), kForgeryShards}.cases_below(kForgeryCases);
  expect_forgery_refused(f, without_failure("pass", share, 0), "pass-share-drawn", "drawn");
}

TEST(ShardMerge, RefusesAFailureOutsideTheShard) {
  const Campaign& c = forgery_campaign();
  const size_t f = c.failing;
  const int64_t own = c.reports[f]["kernels"][0]["failure"]["case_index"];
  for (int64_t index : {own + 1, int64_t{-3}, kForgeryCases + static_cast<int64_t>(f) + 3 * kForgeryShards}) {
    json r = c.reports[f];
    r["kernels"][0]["failure"]["case_index"] = index;
    expect_forgery_refused(f, r, "failure-at-" + std::to_string(index), "case_index");
  }
  // A failure put into a passing shard, at an index that is not its own.
  json r = c.reports[c.passing];
  json& k = r["kernels"][0];
  k["verdict"] = "fail";
  k["failed_cases"] = 1;
  k["failure"] = c.reports[f]["kernels"][0]["failure"];
  k["failure"]["case_index"] = static_cast<int64_t>(c.passing) + 1;
  expect_forgery_refused(c.passing, r, "injected-failure", "case_index");
}

TEST(ShardMerge, RefusesAShardUnderAnotherLabel) {
  const Campaign& c = forgery_campaign();
  // A passing shard's report, identical but for its label, in the failing shard's place (both
  // have 10 cases of --cases 30): its evidence is of the other shard's cases.
  json r = c.reports[c.passing];
  r["shard"]["index"] = c.failing;
  expect_forgery_refused(c.failing, r, "relabelled", "not those of shard");
}

TEST(ShardMerge, RefusesShardsOfAnotherBuildOrPlugin) {
  const Campaign& c = forgery_campaign();
  json other = c.reports[c.passing];
  other["build"] = "fnv1a64:0123456789abcdef";
  expect_forgery_refused(c.passing, other, "other-build", "another build");
  json older = c.reports[c.passing];
  older.erase("build");
  expect_forgery_refused(c.passing, older, "older-build", "older nvfp4check");
  json plugin = c.reports[c.passing];
  plugin["kernels"][0]["origin_identity"] = "fnv1a64:0123456789abcdef";
  expect_forgery_refused(c.passing, plugin, "other-plugin", "another plugin file");
}

// A shard stopped by a signal writes its report marked interrupted: the campaign is incomplete.
TEST(ShardMerge, RefusesAnInterruptedShard) {
  const Campaign& c = forgery_campaign();
  json r = c.reports[c.passing];
  r["interrupted"] = true;
  expect_forgery_refused(c.passing, r, "interrupted", "interrupted");
}
#endif

// ---- What merge refuses (exit 2), in the library and through the program. ----

// A passing shard's report whose counts add up for a command of `--cases 6` (or that checked
// `cases`, its drawn summary and digest agreeing).
json shard_json(uint64_t seed, const std::string& command, int64_t index, int64_t count, int64_t cases = -1) {
  KernelReport k;
  k.name = "host_gemv_fp32";
  k.origin = "builtin";
  k.cases = cases >= 0 ? cases : Shard{index, count}.cases_below(6);
  k.drawn.cases = k.cases;
  k.elements = 30;
  k.exact_elements = 20;
  k.policy = "fp32";
  finish_report(k);  // no case: skipped, as a run says
  return report_json(seed, {k}, command, Shard{index, count});
}

std::vector<ShardReport> shards_of(std::vector<json> list) {
  std::vector<ShardReport> out;
  for (size_t x = 0; x < list.size(); ++x) out.push_back({"r" + std::to_string(x) + ".json", list[x]});
  return out;
}

void expect_refused(const std::vector<ShardReport>& reports, const std::string& says) {
  try {
    merge_shard_reports(reports);
    ADD_FAILURE() << "merged, but should be refused: " << says;
  } catch (const MergeError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(ShardMerge, RefusesWhatIsNotTheShardsOfOneRun) {
  const std::string cmd = "nvfp4check run --cases 6";
  // The good case first, so that each refusal below is for its one reason.
  const MergedReport ok = merge_shard_reports(shards_of({shard_json(5, cmd, 1, 2), shard_json(5, cmd, 0, 2)}));
  EXPECT_EQ(ok.kernels.at(0).cases, 6);
  EXPECT_EQ(ok.kernels.at(0).verdict, KernelVerdict::pass);
  expect_refused(shards_of({shard_json(5, cmd, 0, 2), shard_json(6, cmd, 1, 2)}), "seed");
  expect_refused(shards_of({shard_json(5, cmd, 0, 2), shard_json(5, cmd + "0", 1, 2)}), "another command");
  expect_refused(shards_of({shard_json(5, cmd, 0, 3), shard_json(5, cmd, 1, 3)}), "missing shard(s) 2 of 3");
  expect_refused(shards_of({shard_json(5, cmd, 0, 2), shard_json(5, cmd, 0, 2)}), "shard 0/2 again");
  expect_refused(shards_of({shard_json(5, cmd, 0, 2), shard_json(5, cmd, 1, 3)}), "is one of 2");
  json replay = shard_json(5, "nvfp4check replay x.case", 0, 1);
  replay["seed"] = nullptr;
  expect_refused(shards_of({replay}), "no seed");
  json other = shard_json(5, cmd, 1, 2);
  other["kernels"][0]["name"] = "host_gemm_fp32";
  expect_refused(shards_of({shard_json(5, cmd, 0, 2), other}), "other kernels");
  json broken = shard_json(5, cmd, 1, 2);
  broken["kernels"][0].erase("cases");
  expect_refused(shards_of({shard_json(5, cmd, 0, 2), broken}), "no \"cases\"");
  json failing = shard_json(5, cmd, 1, 2);
  failing["kernels"][0]["verdict"] = "fail";
  expect_refused(shards_of({shard_json(5, cmd, 0, 2), failing}), "failure without verdict");
  EXPECT_THROW(merge_shard_reports({}), MergeError);
}

TEST(ShardMerge, CountsMustBeTheShardsShareOfTheCommand) {
  // Shard 1 of 2 of --cases 6 has indices 1, 3, 5: a pass checked all three, unless --seconds
  // ended it first. Each report here agrees with itself (drawn summary, digest): only the count
  // against the command is wrong.
  const std::string cmd = "nvfp4check run --cases 6";
  expect_refused(shards_of({shard_json(5, cmd, 0, 2), shard_json(5, cmd, 1, 2, 2)}), "has exactly 3");
  expect_refused(shards_of({shard_json(5, cmd, 0, 2), shard_json(5, cmd, 1, 2, 4)}), "has exactly 3");
  const std::string timed = "nvfp4check run --cases 6 --seconds 9";
  EXPECT_EQ(merge_shard_reports(shards_of({shard_json(5, timed, 0, 2), shard_json(5, timed, 1, 2, 2)})).kernels.at(0).cases, 5);
  expect_refused(shards_of({shard_json(5, timed, 0, 2), shard_json(5, timed, 1, 2, 4)}), "has exactly 3");
  // Shards with no share (6 and 7 of 8 with --cases 6) check nothing; the others theirs.
  std::vector<json> eight;
  for (int64_t i = 0; i < 8; ++i) eight.push_back(shard_json(5, cmd, i, 8));
  EXPECT_EQ(merge_shard_reports(shards_of(eight)).kernels.at(0).cases, 6);
}

TEST(ShardMerge, ProgramExitsTwoOnBadInput) {
  const fs::path dir = test::fresh_dir("shard-bad");
  const fs::path garbage = dir / "garbage.json", half = dir / "half.json";
  std::ofstream(garbage) << "{\"seed\": 1, \"kernels\": [";
  std::ofstream(half) << shard_json(5, "nvfp4check run", 0, 2).dump();
  Outcome o = program("merge " + garbage.string());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("garbage.json: not JSON"), std::string::npos);
  o = program("merge " + half.string());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("missing shard(s) 1 of 2"), std::string::npos);
  o = program("merge " + (dir / "absent.json").string());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.output.find("cannot read"), std::string::npos);
  for (const char* bad : {"2/2", "-1/2", "1/0", "x", "1/", "0/2"}) {
    o = program(std::string("run --kernel host_gemv_fp32 --cases 1 --shard ") + bad);
    EXPECT_EQ(o.exit_code, 2) << bad;
    EXPECT_NE(o.output.find("--shard"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace nvfp4
