// The runner's isolation, each attack tried as an adversarial kernel or a careless user would, through the
// real program: a hostile plugin (at load time or in its kernel), a kernel that forges, closes or
// holds the runner's channel, changes directory, or edits an input and puts it back; replay
// inputs that used to pass having checked nothing; a watchdog that counted the suite's own time;
// arguments that gave unclear messages. Each must end in a clear message and the right exit code.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/tests/program_runner.h"

#ifndef NVFP4CHECK_EXE
#error "NVFP4CHECK_EXE must name the nvfp4check executable"
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using nvfp4::test::Outcome;

Outcome run(const std::string& args, const std::string& stdin_text = "") {
  return nvfp4::test::run_program(NVFP4CHECK_EXE, args, stdin_text);
}

fs::path fresh_dir(const std::string& name) { return nvfp4::test::fresh_dir("hostile-" + name); }
using nvfp4::test::read_json;

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

const std::string kHostile = std::string("--plugin ") + HOSTILE_PLUGIN;
std::string load_plugin(int mode) { return std::string(HOSTILE_LOAD_PREFIX) + std::to_string(mode) + ".so"; }

// A small case file, explicit or seeded, written to dir.
std::string case_file(const fs::path& dir, const std::string& name, const std::string& body) {
  const fs::path p = dir / name;
  std::ofstream(p) << body;
  return p.string();
}

// ---- 1. Plugin load-time code runs in a child ------------------------------------------------

TEST(HostilePlugin, LoadTimeAttacksFailTheirListingWithExitTwo) {
  const char* why[] = {"", "exited with status 0", "signal 11", "did not finish", "1 GiB", "min_sm", "NVFP4_FLAG_EXACT",
                       "longer than 64"};
  for (int mode = 1; mode <= 7; ++mode) {
    SCOPED_TRACE(mode);
    const std::string plugin = load_plugin(mode);
    // --timeout bounds the listing child too: the hanging plugin costs 3 s each.
    for (const std::string& command :
         {"list --timeout 3 --plugin " + plugin, "run --timeout 3 --plugin " + plugin + " --cases 1 --seed 1",
          "replay " + std::string(CORPUS_CASE) + " --timeout 3 --plugin " + plugin}) {
      const Outcome o = run(command);
      EXPECT_EQ(o.exit_code, 2) << command;
      EXPECT_TRUE(contains(o.output, plugin)) << "the message names the plugin";
      EXPECT_TRUE(contains(o.output, why[mode])) << "expected '" << why[mode] << "'";
      EXPECT_FALSE(contains(o.output, "pass")) << "nothing is reported as checked";
    }
  }
}

// ---- 2. Exceptions are failures with their case file, in run and in replay -------------------

TEST(HostileKernel, ExceptionsFailTheCaseAndTheRunGoesOn) {
  const fs::path dir = fresh_dir("throw");
  const Outcome o = run("run " + kHostile + " --kernel throws_runtime_error_host --kernel throws_bad_alloc_host" +
                        " --kernel host_gemv_fp32 --cases 3 --seed 5 --case-dir " + (dir / "cases").string() +
                        " --report " + (dir / "report.json").string());
  EXPECT_EQ(o.exit_code, 1);
  const nlohmann::json r = read_json(dir / "report.json");
  ASSERT_EQ(r["kernels"].size(), 3u);
  for (int x = 0; x < 2; ++x) {
    EXPECT_EQ(r["kernels"][x]["verdict"], "fail");
    EXPECT_EQ(r["kernels"][x]["failure"]["check"], "exception");
    EXPECT_TRUE(fs::exists(r["kernels"][x]["failure"]["case_file"].get<std::string>()));
  }
  EXPECT_TRUE(contains(r["kernels"][0]["failure"]["message"], "threw on purpose"));
  EXPECT_EQ(r["kernels"][2]["verdict"], "pass");
  const Outcome again = run("replay " + r["kernels"][0]["failure"]["case_file"].get<std::string>() + " " + kHostile +
                            " --kernel throws_runtime_error_host --case-dir " + (dir / "replay").string());
  EXPECT_EQ(again.exit_code, 1) << "replay reports the same failure, never a pass";
  EXPECT_TRUE(contains(again.output, "check \"exception\""));
}

// ---- 7, 8. Forged verdicts, a closed channel, chdir, a child holding the channel -------------

TEST(HostileKernel, ForgedDoneAndClosedChannelAreFailures) {
  const fs::path dir = fresh_dir("forge");
  const Outcome o = run("run " + kHostile + " --kernel forges_verdict_host --kernel closes_channel_host --cases 2" +
                        " --seed 5 --case-dir " + (dir / "cases").string() + " --report " + (dir / "report.json").string());
  EXPECT_EQ(o.exit_code, 1);
  const nlohmann::json r = read_json(dir / "report.json");
  ASSERT_EQ(r["kernels"].size(), 2u);
  for (const auto& k : r["kernels"]) {
    EXPECT_EQ(k["verdict"], "fail") << k["name"];
    const std::string check = k["failure"]["check"];
    EXPECT_TRUE(check == "crash" || check == "protocol") << check;
    EXPECT_TRUE(fs::exists(k["failure"]["case_file"].get<std::string>())) << "the case file is kept";
  }
}

// Bytes in the runner's channel that are no frame of its protocol are the check `protocol` at once,
// not a wait for the rest of a frame that never comes (the watchdog's 60 s here).
TEST(HostileKernel, GarbageInTheChannelIsProtocolAtOnce) {
  const fs::path dir = fresh_dir("garbage");
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = run("run " + kHostile + " --kernel writes_every_fd_host --cases 2 --seed 5 --timeout 60" +
                        " --case-dir " + (dir / "cases").string() + " --report " + (dir / "report.json").string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(o.exit_code, 1);
  const nlohmann::json r = read_json(dir / "report.json");
  EXPECT_EQ(r["kernels"][0]["failure"]["check"], "protocol") << r.dump(2);
  EXPECT_LT(seconds, 20) << "waited for the watchdog";
}

// The memory files the runner and a kernel's process share are mapped by both: a kernel that
// truncates them (or seals them against the runner's writes) must not bring down the runner with
// a SIGBUS. They are sealed against shrinking and further seals, so the attack does nothing: the
// honest result passes, case after case through the same files.
TEST(HostileKernel, CuttingTheSharedFilesDoesNothing) {
  const fs::path dir = fresh_dir("cut-files");
  const Outcome o = run("run " + kHostile + " --kernel cuts_shared_files_host --cases 12 --seed 5 --shape 300x1x4096" +
                        " --case-dir " + (dir / "cases").string() + " --report " + (dir / "report.json").string());
  EXPECT_EQ(o.exit_code, 0) << o.output;
  const nlohmann::json r = read_json(dir / "report.json");
  EXPECT_EQ(r["kernels"][0]["verdict"], "pass") << r.dump(2);
  EXPECT_EQ(r["kernels"][0]["cases"], 12);
}

TEST(HostileKernel, ChdirDoesNotMoveTheSavedCase) {
  const fs::path dir = fresh_dir("chdir");
  const Outcome o = run("run " + kHostile + " --kernel chdir_and_wrong_host --cases 2 --seed 5 --case-dir cases-rel" +
                        " --report " + (dir / "report.json").string());
  EXPECT_EQ(o.exit_code, 1);
  const nlohmann::json r = read_json(dir / "report.json");
  const std::string file = r["kernels"][0]["failure"]["case_file"];
  EXPECT_TRUE(fs::path(file).is_absolute()) << file;
  EXPECT_TRUE(fs::exists(file)) << file;
  fs::remove_all(fs::path(file).parent_path());
}

TEST(HostileKernel, AForkedChildHoldingTheChannelCostsNoTimeoutAndDies) {
  const fs::path dir = fresh_dir("fork");
  const fs::path pidfile = dir / "child.pid";
  setenv("NVFP4_HOSTILE_PIDFILE", pidfile.c_str(), 1);
  const Outcome o = run("run " + kHostile + " --kernel forks_holding_channel_host --cases 1 --seed 5 --timeout 60" +
                        " --case-dir " + (dir / "cases").string());
  unsetenv("NVFP4_HOSTILE_PIDFILE");
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(contains(o.output, "check \"crash\""));
  EXPECT_LT(o.seconds, 30) << "the crash is seen when the worker dies, not when its child lets go";
  int child = 0;
  std::ifstream(pidfile) >> child;
  ASSERT_GT(child, 0);
  // Gone, or a zombie waiting for an init that does not reap (as in some containers): not running.
  std::string stat;
  std::getline(std::ifstream("/proc/" + std::to_string(child) + "/stat"), stat);
  const size_t paren = stat.rfind(')');
  const char state = paren == std::string::npos || paren + 2 >= stat.size() ? 'X' : stat[paren + 2];
  EXPECT_TRUE(state == 'X' || state == 'Z') << "the kernel's forked child " << child << " outlived the suite: " << stat;
}

// ---- 10. An input edited and put back during the call ------------------------------------------

TEST(HostileKernel, InputEditedAndRestoredDuringTheCallIsSeen) {
  const fs::path dir = fresh_dir("restore");
  const Outcome o = run("run " + kHostile + " --kernel modifies_and_restores_host --cases 1 --seed 5 --case-dir " +
                        (dir / "cases").string());
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(contains(o.output, "check \"inputs-modified\""));
  EXPECT_TRUE(contains(o.output, "read-only"));
  const Outcome exits = run("run " + kHostile + " --kernel exits_zero_host --cases 1 --seed 5 --case-dir " +
                            (dir / "cases").string());
  EXPECT_EQ(exits.exit_code, 1);
  EXPECT_TRUE(contains(exits.output, "exited with status 0"));
}

// A host kernel's group table is read-only during the call too: an edit undone before returning
// leaves nothing to compare afterwards, the write itself faults.
TEST(HostileKernel, GroupTableEditedAndRestoredDuringTheCallIsSeen) {
  const fs::path dir = fresh_dir("group-table");
  const Outcome o = run("run " + kHostile + " --kernel edits_group_table_host --cases 20 --seed 5 --case-dir " +
                        (dir / "cases").string());
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_TRUE(contains(o.output, "check \"inputs-modified\"")) << o.output;
  EXPECT_TRUE(contains(o.output, "wrote to its input group table during the call")) << o.output;
}

// ---- 3. Replay never passes having checked nothing -----------------------------------------

TEST(Replay, InputsThatCheckedNothingAreErrorsOrChecked) {
  const fs::path dir = fresh_dir("replay");
  const std::string tiny = "# nvfp4check case v1\nop = gemv\nm = 3\nk = 32\nl = 1\nseed = 7\n";
  // A form feed and a vertical tab in comments: still a case file, and checked.
  const std::string ff = case_file(dir, "ff.case", "# nvfp4check case v1\f\nop = gemv\nm = 3\n\vk = 32\nl = 1\nseed = 7\n");
  Outcome o = run("replay " + ff + " --kernel host_gemv_fp32 --report " + (dir / "ff.json").string());
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(read_json(dir / "ff.json")["kernels"][0]["cases"], 1);
  // 16 zero bytes are no case file (binary fuzz inputs need --fuzz-input).
  { std::ofstream(dir / "zeros.bin", std::ios::binary) << std::string(16, '\0'); }
  o = run("replay " + (dir / "zeros.bin").string());
  EXPECT_EQ(o.exit_code, 2);
  // An unknown generator is bad input, named with the file.
  const std::string bogus = case_file(dir, "bogus.case", tiny + "generator = bogus\n");
  o = run("replay " + bogus);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "bogus"));
  // e4m3 scales with sign bits on ue4m3 kernels only: skipped, and nothing checked is exit 2.
  const std::string signs = case_file(dir, "signs.case", "# nvfp4check case v1\nop = gemv\nm = 1\nk = 2\nl = 1\n"
                                                          "sf_layout = linear\nscale_semantics = e4m3\na = 22\nb = 22\nsfa = b8\nsfb = 38\n");
  o = run("replay " + signs + " --kernel host_gemv_fp32 --report " + (dir / "signs.json").string());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "nothing was checked"));
  EXPECT_EQ(read_json(dir / "signs.json")["kernels"][0]["verdict"], "skipped");
  // A wrong expect line: the case or the reference is wrong, nothing is judged.
  const std::string wrong = case_file(dir, "wrong.case", "# nvfp4check case v1\nop = gemv\nm = 1\nk = 2\nl = 1\n"
                                                         "sf_layout = linear\na = 22\nb = 22\nsfa = 38\nsfb = 38\nexpect = 3c01\n");
  o = run("replay " + wrong + " --kernel host_gemv_fp32");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "expect line disagrees"));
}

// ---- 4. The watchdog counts the kernel's time only ------------------------------------------------

TEST(Watchdog, TheSuitesReferenceTimeIsNotTheKernels) {
  const fs::path dir = fresh_dir("watchdog");
  // A reference of about 1.5e9 multiply-adds (a second or more here) against a 1 s watchdog;
  // the kernel refuses at once, so the verdict must be refused-supported, not a timeout.
  const std::string big = case_file(dir, "big.case", "# nvfp4check case v1\nop = gemm\nm = 512\nn = 384\nk = 8192\n"
                                                       "l = 1\nseed = 3\n");
  const Outcome o = run("replay " + big + " --plugin " + WRONG_PLUGIN + " --kernel refuses_supported_host --timeout 1");
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(contains(o.output, "check \"refused-supported\"")) << "not a timeout of the suite's own reference";
}

// ---- 5, 6, 9, 10. Arguments -------------------------------------------------------------------

TEST(Arguments, UnwritableReportIsFoundBeforeTheRun) {
  const Outcome o = run("run --kernel host_gemv_fp32 --seconds 30 --report /nonexistent-dir/r.json");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_LT(o.seconds, 10) << "found before the 30-second run";
  EXPECT_TRUE(contains(o.output, "cannot write the report"));
}

TEST(Arguments, ClearMessages) {
  for (const char* t : {"nan", "inf", "1e300", "-1", "0"}) {
    const Outcome o = run(std::string("run --timeout ") + t + " --cases 1");
    EXPECT_EQ(o.exit_code, 2) << t;
    EXPECT_LT(o.output.size(), 400u) << "a short message, not 309 digits";
  }
  Outcome o = run("run --shape 99999999999x1x2 --cases 1");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "4 GiB"));
  EXPECT_FALSE(contains(o.output, "bad_alloc"));
  o = run("run --seed -1 --cases 1");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "not a seed"));
  o = run("frobnicate");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "unknown command 'frobnicate'"));
  o = run("show /dev/stdin", "# nvfp4check case v1\nop = gemv\nm = 2\nk = 4\nl = 1\nseed = 1\n");
  EXPECT_EQ(o.exit_code, 0) << "a case read from a pipe";
  EXPECT_TRUE(contains(o.output, "gemv"));
  o = run("show /dev/stdin", "# nvfp4check case v1\nop = gemv\nm = 2\nk = 0\nl = 1\nseed = 1\n");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "k must be at least 2"));
}

TEST(Arguments, ARepeatedKernelRunsOnce) {
  const fs::path dir = fresh_dir("repeat");
  const Outcome o = run("run --kernel host_gemv_fp32 --kernel host_gemv_fp32 --cases 2 --seed 1 --report " +
                        (dir / "r.json").string());
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(read_json(dir / "r.json")["kernels"].size(), 1u);
}

}  // namespace
