// `nvfp4check run` and `replay` survive kernels that kill or hang their process: the failure is
// reported as "crash" / "timeout" with the case file saved before the kernel ran, exit code 1,
// and the other kernels still run. Also the usage errors that must give exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/tests/program_runner.h"

#ifndef NVFP4CHECK_EXE
#error "NVFP4CHECK_EXE must name the nvfp4check executable"
#endif
#if !defined(CRASHING_PLUGIN) || !defined(WRONG_PLUGIN)
#error "CRASHING_PLUGIN and WRONG_PLUGIN must name the test plugins"
#endif

namespace {

namespace fs = std::filesystem;

using nvfp4::test::Outcome;

Outcome run(const std::string& args) { return nvfp4::test::run_program(NVFP4CHECK_EXE, args); }

fs::path fresh_dir(const std::string& name) { return nvfp4::test::fresh_dir("isolation-" + name); }
using nvfp4::test::read_json;

const std::string kPlugin = std::string("--plugin ") + CRASHING_PLUGIN;

TEST(Isolation, SegfaultingKernelIsACrashAndTheNextKernelStillRuns) {
  const fs::path dir = fresh_dir("segv");
  const Outcome o = run("run " + kPlugin + " --kernel segfaults_host --kernel host_gemm_fp32 --cases 3 --seed 11" +
                        " --case-dir " + (dir / "cases").string() + " --report " + (dir / "report.json").string());
  EXPECT_EQ(o.exit_code, 1);
  const nlohmann::json report = read_json(dir / "report.json");
  EXPECT_EQ(report["seed"], 11);
  ASSERT_EQ(report["kernels"].size(), 2u);
  const nlohmann::json& crashed = report["kernels"][0];
  EXPECT_EQ(crashed["name"], "segfaults_host");
  EXPECT_EQ(crashed["verdict"], "fail");
  EXPECT_EQ(crashed["failure"]["check"], "crash");
  const std::string case_file = crashed["failure"]["case_file"];
  EXPECT_TRUE(fs::exists(case_file)) << case_file;
  EXPECT_NE(o.output.find("Segmentation fault"), std::string::npos) << "the signal is named";
  EXPECT_NE(o.output.find(case_file), std::string::npos) << "the case file is printed";
  const nlohmann::json& next = report["kernels"][1];
  EXPECT_EQ(next["name"], "host_gemm_fp32");
  EXPECT_EQ(next["verdict"], "pass");
  EXPECT_EQ(next["cases"], 3);

  // The saved case reproduces it; two inputs get two results (a fresh worker after the crash).
  const Outcome again = run("replay " + case_file + " " + case_file + " " + kPlugin + " --kernel segfaults_host" +
                            " --case-dir " + (dir / "replay").string() + " --report " + (dir / "replay.json").string());
  EXPECT_EQ(again.exit_code, 1);
  const nlohmann::json replayed = read_json(dir / "replay.json");
  ASSERT_EQ(replayed["kernels"].size(), 1u);
  EXPECT_EQ(replayed["kernels"][0]["failure"]["check"], "crash");
  EXPECT_EQ(replayed["kernels"][0]["cases"], 2);
  EXPECT_EQ(replayed["kernels"][0]["failed_cases"], 2);
}

TEST(Isolation, HangingKernelIsATimeoutWithASavedCase) {
  const fs::path dir = fresh_dir("hang");
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = run("run " + kPlugin + " --kernel hangs_host --cases 2 --seed 3 --timeout 2 --case-dir " +
                        (dir / "cases").string() + " --report " + (dir / "report.json").string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_LT(seconds, 60) << "the watchdog ends a hang";
  const nlohmann::json report = read_json(dir / "report.json");
  ASSERT_EQ(report["kernels"].size(), 1u);
  EXPECT_EQ(report["kernels"][0]["failure"]["check"], "timeout");
  const std::string case_file = report["kernels"][0]["failure"]["case_file"];
  EXPECT_TRUE(fs::exists(case_file)) << case_file;
}

// A wrong answer end to end: exit 1, the first bad element in text and report, the saved case
// and its error map on disk, and `replay` of that case fails the same check. An honest kernel of
// the same plugin passes in the same run.
TEST(Cli, WrongKernelFailureIsSelfContained) {
  const fs::path dir = fresh_dir("wrong");
  const std::string plugin = std::string("--plugin ") + WRONG_PLUGIN;
  const Outcome o = run("run " + plugin + " --kernel wrong_answer_host --kernel honest_host --cases 4 --seed 8" +
                        " --case-dir " + (dir / "cases").string() + " --report " + (dir / "report.json").string());
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.output.find("first bad element (b="), std::string::npos);
  EXPECT_NE(o.output.find("seed 8"), std::string::npos);
  const nlohmann::json report = read_json(dir / "report.json");
  ASSERT_EQ(report["kernels"].size(), 2u);
  const nlohmann::json& failure = report["kernels"][0]["failure"];
  EXPECT_EQ(failure["check"], "oracle");
  ASSERT_TRUE(failure.contains("element"));
  EXPECT_TRUE(failure["element"].contains("expected"));
  const std::string case_file = failure["case_file"], error_map = failure["error_map"];
  EXPECT_TRUE(fs::exists(case_file)) << case_file;
  EXPECT_TRUE(fs::exists(error_map)) << error_map;
  EXPECT_EQ(fs::path(error_map).stem(), fs::path(case_file).stem()) << "the map sits next to its case";
  EXPECT_EQ(report["kernels"][1]["verdict"], "pass");

  const Outcome again = run("replay " + case_file + " " + plugin + " --kernel wrong_answer_host --case-dir " +
                            (dir / "replay").string());
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.output.find("check \"oracle\""), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "replay" / (fs::path(case_file).stem().string() + ".png")))
      << "replay writes its error map to --case-dir, not next to the input";
  const Outcome honest = run("replay " + case_file + " " + plugin + " --kernel honest_host --case-dir " +
                             (dir / "replay").string());
  EXPECT_EQ(honest.exit_code, 0);
}

// `--seconds` is the length of the run: a kernel skipped for an op it lacks leaves its share of the
// time to the kernels that run (the H200 run of every CUDA kernel lost cublaslt_nvfp4's fifth).
TEST(Cli, SkippedKernelLeavesItsTimeToTheOthers) {
  const fs::path dir = fresh_dir("budget");
  const Outcome o = run("run --op gemm --kernel host_gemm_fp32 --kernel host_gemv_fp32 --seconds 3 --seed 5"
                        " --case-dir " + (dir / "cases").string() + " --report " + (dir / "report.json").string());
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json report = read_json(dir / "report.json");
  ASSERT_EQ(report["kernels"].size(), 2u);
  EXPECT_EQ(report["kernels"][0]["verdict"], "pass");
  EXPECT_GE(report["kernels"][0]["seconds"].get<double>(), 2.5) << "the runnable kernel got the whole 3 s";
  EXPECT_EQ(report["kernels"][1]["verdict"], "skipped");
  EXPECT_EQ(report["kernels"][1]["skip_reason"], "does not support gemm");
}

TEST(Isolation, ListShowsPluginKernels) {
  const Outcome o = run("list " + kPlugin);
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_NE(o.output.find("segfaults_host"), std::string::npos);
  EXPECT_NE(o.output.find("hangs_host"), std::string::npos);
  EXPECT_NE(o.output.find("host_gemm_fp32"), std::string::npos);
}

TEST(Isolation, UsageErrorsExitTwo) {
  EXPECT_EQ(run("run --kernel no_such_kernel --cases 1").exit_code, 2);
  EXPECT_EQ(run("list --plugin /nonexistent/plugin.so").exit_code, 2);
  EXPECT_EQ(run("run --plugin /nonexistent/plugin.so --cases 1").exit_code, 2);
  EXPECT_EQ(run("replay /nonexistent/case.case").exit_code, 2);
  const fs::path dir = fresh_dir("usage");
  std::ofstream(dir / "bad.case") << "# nvfp4check case v1\nop = gemm\nbogus_key = 1\n";
  EXPECT_EQ(run("replay " + (dir / "bad.case").string()).exit_code, 2);
}

}  // namespace
