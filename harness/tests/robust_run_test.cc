// `run`, `replay`, `reference` and `show` through the real program where the world is unkind: a
// case folder that cannot take the case, a signal in the middle of a run, inputs that never end
// (/dev/zero), never start (a FIFO with no writer), are too large or are a directory. Each must
// keep what it knows (the failure, the report) and end quickly with the right exit code.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/tests/program_runner.h"

#if !defined(NVFP4CHECK_EXE) || !defined(CRASHING_PLUGIN) || !defined(WRONG_PLUGIN) || !defined(SEEDED_CASE)
#error "NVFP4CHECK_EXE, CRASHING_PLUGIN, WRONG_PLUGIN and SEEDED_CASE must be defined"
#endif

namespace {

namespace fs = std::filesystem;
using nvfp4::test::Outcome;
using nvfp4::test::read_json;

Outcome run(const std::string& args) { return nvfp4::test::run_program(NVFP4CHECK_EXE, args); }
fs::path fresh_dir(const std::string& name) { return nvfp4::test::fresh_dir("robust-" + name); }
bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kWrong = std::string("--plugin ") + WRONG_PLUGIN;

// ---- A case folder that cannot take the case -------------------------------------------------

// Where the case folder should be there is a file (as root, whom a read-only folder does not
// stop, this is what fails): no case is saved, and the failure, the report and the next kernel
// must survive it.
TEST(CaseDir, UnwritableFolderKeepsTheFailureAndTheReport) {
  const fs::path dir = fresh_dir("notadir");
  std::ofstream(dir / "cases") << "a file where the case folder should be\n";
  const Outcome o = run("run " + kWrong + " --kernel wrong_answer_host --kernel honest_host --cases 4 --seed 8" +
                        " --jobs 1 --case-dir " + (dir / "cases").string() + " --report " +
                        (dir / "report.json").string());
  EXPECT_EQ(o.exit_code, 1) << "a failing kernel is exit 1, whatever happened to its case file";
  EXPECT_TRUE(contains(o.output, "FAIL wrong_answer_host")) << "the diagnosis is printed";
  EXPECT_TRUE(contains(o.output, "first bad element")) << "with its element";
  EXPECT_TRUE(contains(o.output, "case file: not saved: ")) << "and says its case was not kept";
  EXPECT_EQ(count(o.output, "warning: a case could not be saved"), 1u) << "the warning comes once";
  ASSERT_TRUE(fs::exists(dir / "report.json"));
  const nlohmann::json r = read_json(dir / "report.json");
  ASSERT_EQ(r["kernels"].size(), 2u);
  EXPECT_EQ(r["kernels"][0]["verdict"], "fail");
  EXPECT_EQ(r["kernels"][0]["failure"]["check"], "oracle");
  EXPECT_EQ(r["kernels"][0]["failure"]["case_file"], "");
  EXPECT_FALSE(r["kernels"][0]["failure"].value("case_file_error", "").empty());
  EXPECT_EQ(r["kernels"][1]["verdict"], "pass") << "the next kernel still runs";
  EXPECT_EQ(r["kernels"][1]["cases"], 4);
}

// A disk that fills while the failing case is written in full (a file size limit stands in for
// it, as root too): the failure keeps its seed-only record, says why the full case is missing,
// and no truncated case file is left behind.
TEST(CaseDir, FullDiskWhileSavingTheFailureLeavesNoTruncatedFile) {
  const fs::path dir = fresh_dir("full");
  // 64 KiB: room for the seed-only records and the report, not for the failing case in full.
  const Outcome o = nvfp4::test::run_program(
      "sh -c \"trap '' XFSZ; ulimit -f 128; exec " + std::string(NVFP4CHECK_EXE) + " \\\"\\$@\\\"\" nvfp4check",
      "run " + kWrong + " --kernel wrong_answer_host --kernel honest_host --cases 30 --seed 1 --jobs 1 --shape " +
          "300x1x600 --case-dir " + (dir / "cases").string() + " --report " + (dir / "report.json").string());
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(contains(o.output, "FAIL wrong_answer_host"));
  EXPECT_TRUE(contains(o.output, "the full case could not be saved")) << "the failure says so";
  ASSERT_TRUE(fs::exists(dir / "report.json"));
  const nlohmann::json r = read_json(dir / "report.json");
  ASSERT_EQ(r["kernels"].size(), 2u);
  EXPECT_EQ(r["kernels"][1]["verdict"], "pass");
  const std::string kept = r["kernels"][0]["failure"]["case_file"];
  EXPECT_FALSE(kept.empty()) << "the seed-only record reproduces the failure";
  EXPECT_TRUE(contains(r["kernels"][0]["failure"].value("case_file_error", ""), "File too large"));
  for (const auto& entry : fs::directory_iterator(dir / "cases")) {
    if (entry.path().extension() != ".case") continue;
    const Outcome show = run("show " + entry.path().string());
    EXPECT_EQ(show.exit_code, 0) << "a case file left behind is whole: " << entry.path();
  }
  const Outcome again = run("replay " + kept + " " + kWrong + " --kernel wrong_answer_host --case-dir " +
                            (dir / "replay").string());
  EXPECT_EQ(again.exit_code, 1) << "the record kept reproduces the failure";
}

// ---- Signals ---------------------------------------------------------------------------------

struct Started {
  pid_t pid = -1;
  fs::path output;
};

// Starts nvfp4check with args, its output to a file, and waits until the output shows `ready`.
// tmpdir: the program's TMPDIR, where given.
Started start(const std::string& args, const fs::path& dir, const std::string& ready, const fs::path& tmpdir = {}) {
  Started s;
  s.output = dir / "output.txt";
  std::printf("$ %s %s\n", NVFP4CHECK_EXE, args.c_str());
  s.pid = fork();
  if (s.pid == 0) {
    const int fd = open(s.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (!tmpdir.empty()) setenv("TMPDIR", tmpdir.c_str(), 1);
    execl("/bin/sh", "sh", "-c", ("exec " + std::string(NVFP4CHECK_EXE) + " " + args).c_str(), (char*)nullptr);
    _exit(127);
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (!contains(slurp(s.output), ready) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return s;
}

// Sends sig, waits for the end; returns the wait status.
int stop_with(const Started& s, int sig, double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  kill(s.pid, sig);
  int status = 0;
  waitpid(s.pid, &status, 0);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s(%.1f s after the signal)\n", slurp(s.output).c_str(), *seconds);
  return status;
}

// A run stopped by SIGTERM, SIGINT or SIGHUP writes its table and report, marked interrupted; a
// kernel cut short is never a pass; the process ends as the signal would (128 + it to a shell).
TEST(Signals, InterruptedRunKeepsItsReportMarkedInterrupted) {
  for (const int sig : {SIGTERM, SIGINT, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    const fs::path dir = fresh_dir("signal-" + std::to_string(sig));
    const Started s = start("run --kernel host_gemm_fp32 --cases 100000000 --seed 3 --jobs 2 --case-dir " +
                                (dir / "cases").string() + " --report " + (dir / "report.json").string(),
                            dir, "[1/1] host_gemm_fp32");
    // Some cases done: the first case's record appears when it starts; then give it time.
    const auto t0 = std::chrono::steady_clock::now();
    while (!fs::exists(dir / "cases") && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    double seconds = 0;
    const int status = stop_with(s, sig, &seconds);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "ends as the signal would";
    EXPECT_LT(seconds, 30.0);
    const std::string out = slurp(s.output);
    EXPECT_TRUE(contains(out, "kernel ")) << "the table is printed";
    EXPECT_TRUE(contains(out, "interrupted after"));
    ASSERT_TRUE(fs::exists(dir / "report.json")) << "the report is written";
    const nlohmann::json r = read_json(dir / "report.json");
    EXPECT_EQ(r.value("interrupted", false), true);
    ASSERT_EQ(r["kernels"].size(), 1u);
    EXPECT_EQ(r["kernels"][0]["verdict"], "skipped") << "a kernel cut short is never a pass";
    EXPECT_GT(r["kernels"][0]["cases"].get<int64_t>(), 0);
    EXPECT_TRUE(contains(r["kernels"][0].value("skip_reason", ""), "interrupted after"));
    EXPECT_EQ(r["kernels"][0].value("interrupted", false), true);
  }
}

// A kernel that finished before the signal keeps its verdict; the one in progress is cut short.
TEST(Signals, FinishedKernelsKeepTheirVerdict) {
  const fs::path dir = fresh_dir("signal-finished");
  const Started s = start("run --plugin " + std::string(CRASHING_PLUGIN) +
                              " --kernel host_gemv_fp32 --kernel hangs_host --cases 3 --seed 4 --jobs 1 --timeout 3" +
                              " --case-dir " + (dir / "cases").string() + " --report " + (dir / "report.json").string(),
                          dir, "[2/2] hangs_host");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double seconds = 0;
  const int status = stop_with(s, SIGTERM, &seconds);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  ASSERT_TRUE(fs::exists(dir / "report.json"));
  const nlohmann::json r = read_json(dir / "report.json");
  EXPECT_EQ(r.value("interrupted", false), true);
  ASSERT_EQ(r["kernels"].size(), 2u);
  EXPECT_EQ(r["kernels"][0]["verdict"], "pass");
  EXPECT_EQ(r["kernels"][0]["cases"], 3);
  EXPECT_FALSE(r["kernels"][0].contains("interrupted"));
  EXPECT_EQ(r["kernels"][1]["verdict"], "skipped") << "the hanging case in flight is dropped, not a failure";
  EXPECT_EQ(r["kernels"][1].value("interrupted", false), true);
}

// A replay stopped by a signal while its kernel runs removes its temporary folder as a finished
// one does (nothing was written there yet): the signal ends the process, whose destructors do
// not run, so the folder is settled before.
TEST(Signals, InterruptedReplayLeavesNoTemporaryFolder) {
  const fs::path dir = fresh_dir("signal-replay");
  const fs::path tmp = dir / "tmp";
  fs::create_directories(tmp);
  const Started s = start("replay " + std::string(SEEDED_CASE) + " --plugin " + std::string(CRASHING_PLUGIN) +
                              " --kernel hangs_host --timeout 2",
                          dir, "[1/1] hangs_host", tmp);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double seconds = 0;
  const int status = stop_with(s, SIGTERM, &seconds);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "ends as the signal would";
  std::string left;
  for (const auto& e : fs::directory_iterator(tmp)) left += e.path().string() + " ";
  EXPECT_EQ(left, "") << "the replay's empty temporary folder was left behind";
}

// ---- Inputs that never end, never start, or are not files ------------------------------------

// Each command that reads a case (or a fuzzer input) ends with exit 2 within seconds.
void expect_quick_refusal(const std::string& args, const std::string& why) {
  const Outcome o = run(args);
  EXPECT_EQ(o.exit_code, 2) << args;
  EXPECT_LT(o.seconds, 10.0) << args;
  EXPECT_TRUE(contains(o.output, why)) << args << ": expected '" << why << "'";
}

TEST(Inputs, EndlessFilesAreRefusedAtOnce) {
  const fs::path dir = fresh_dir("endless");
  const std::string out = " --out " + (dir / "o.bin").string();
  expect_quick_refusal("reference /dev/zero" + out, "/dev/zero:1: NUL byte");
  expect_quick_refusal("show /dev/zero", "NUL byte");
  expect_quick_refusal("replay /dev/zero --kernel host_gemm_fp32", "NUL byte");
  expect_quick_refusal("replay --fuzz-input /dev/zero --kernel host_gemm_fp32", "the limit of a kernel fuzzer input");
}

TEST(Inputs, FifoWithoutWriterIsRefusedNotWaitedFor) {
  const fs::path dir = fresh_dir("fifo");
  const std::string fifo = (dir / "p.case").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string why = "no writer";
  expect_quick_refusal("reference " + fifo + " --out " + (dir / "o.bin").string(), why);
  expect_quick_refusal("show " + fifo, why);
  expect_quick_refusal("replay " + fifo + " --kernel host_gemm_fp32", why);
  expect_quick_refusal("replay --fuzz-input " + fifo + " --kernel host_gemm_fp32", why);
  // A pipe with a writer is read: process substitution and a shell pipe.
  const Outcome sub = nvfp4::test::run_program("bash -c '" + std::string(NVFP4CHECK_EXE) + " show <(sleep 1; cat " +
                                               SEEDED_CASE + ")'", "");
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_TRUE(contains(sub.output, "gemm"));
  const Outcome piped = nvfp4::test::run_program("(sleep 1; cat " + std::string(SEEDED_CASE) + ") | " + NVFP4CHECK_EXE,
                                                 "show /dev/stdin");
  EXPECT_EQ(piped.exit_code, 0);
}

TEST(Inputs, DirectoriesAndOversizedFilesSayWhat) {
  const fs::path dir = fresh_dir("dirs");
  expect_quick_refusal("show " + dir.string(), "is a directory");
  expect_quick_refusal("replay --fuzz-input " + dir.string() + " --kernel host_gemm_fp32", "is a directory");
  // A sparse file past the limit is refused by its size, before anything is read.
  const fs::path big = dir / "big.case";
  { std::ofstream(big) << "op = gemm\n"; }
  fs::resize_file(big, (uintmax_t(13) << 30));
  expect_quick_refusal("show " + big.string(), "bytes of tensors a case may have");
  const fs::path big_fuzz = dir / "big.fuzz";
  { std::ofstream(big_fuzz) << "x"; }
  fs::resize_file(big_fuzz, uintmax_t(1) << 30);
  expect_quick_refusal("replay --fuzz-input " + big_fuzz.string() + " --kernel host_gemm_fp32",
                       "the limit of a kernel fuzzer input");
}

// The 4 GiB limit counts tensors, not the reference's memory: a case that fits the limit but not
// the memory ends with exit 2 and a message saying what it needs (here under a 1.5 GB limit).
TEST(Inputs, CaseLargerThanMemoryEndsCleanly) {
  const fs::path dir = fresh_dir("memory");
  std::ofstream(dir / "big.case") << "op = grouped_gemm\ngroups = 2\ngroup_m = 20000000 20000000\ngroup_n = 1\n"
                                     "group_k = 2\nseed = 1\ngenerator = uniform/narrow/one\n";
  const Outcome o = nvfp4::test::run_program(
      "sh -c 'ulimit -v 1500000; exec " + std::string(NVFP4CHECK_EXE) + " reference " + (dir / "big.case").string() +
          " --out " + (dir / "o.bin").string() + "'",
      "");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "out of memory: a case needs about 100 bytes of host memory per output"));
}

// A grouped case of `groups` 1x1x2 groups with FP32 output: every group five buffers in the
// kernel's process for a few bytes of data.
void write_one_element_groups(const fs::path& path, int groups) {
  std::ofstream out(path);
  out << "op = grouped_gemm\ngroups = " << groups << "\ngroup_m =";
  for (int g = 0; g < groups; ++g) out << " 1";
  out << "\ngroup_n = 1\ngroup_k = 2\nout_type = fp32\n";
  for (int g = 0; g < groups; ++g) out << "a." << g << " = 22\nb." << g << " = 22\nsfa." << g << " = 38\nsfb." << g << " = 38\n";
}

// A case of 7,000 one-element groups is 35,001 buffers in the kernel's process: more memory areas
// than a process may have, with a fence page around each, and the honest kernel was failed as a
// crash (with an out-of-memory message). It passes.
TEST(Inputs, CaseOfThousandsOfGroupsPassesAnHonestKernel) {
  const fs::path dir = fresh_dir("groups");
  write_one_element_groups(dir / "groups.case", 7000);
  const Outcome o = run("replay " + (dir / "groups.case").string() + " --kernel host_grouped_gemm_fp32");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "1 case")) << o.output;
  EXPECT_FALSE(contains(o.output, "crash")) << o.output;
}

// When the kernel's process cannot allocate the suite's own buffers for a case (here 20,000
// groups under a 400 MB limit, where the runner needs a fraction of that), the honest kernel was
// failed as a crash, with the runner's out-of-memory message. Nothing is judged: the suite's error,
// exit 2, naming the kernel's process and what it was doing.
TEST(Inputs, KernelProcessOutOfMemoryIsTheSuitesErrorNotTheKernels) {
  const fs::path dir = fresh_dir("worker-memory");
  write_one_element_groups(dir / "groups.case", 20000);
  const Outcome o = nvfp4::test::run_program(
      "sh -c 'ulimit -v 400000; exec " + std::string(NVFP4CHECK_EXE) + " replay " + (dir / "groups.case").string() +
          " --kernel host_grouped_gemm_fp32'",
      "");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_TRUE(contains(o.output, "the kernel's process ran out of host memory for the suite's own work on this case "
                                 "(laying its inputs out in guarded buffers, the kernel was not called)"))
      << o.output;
  EXPECT_FALSE(contains(o.output, "FAIL")) << o.output;
  EXPECT_FALSE(contains(o.output, "crash")) << o.output;
}

// An empty --shard is a mistake (a script's unset variable), not a run of the whole schedule.
TEST(RunArguments, EmptyShardIsRefused) {
  const Outcome o = run("run --shard '' --seed 1 --cases 1 --kernel host_gemv_fp32");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "expected I/N"));
}

// An expect line that disagrees with the reference is named by its line, as parse errors are.
TEST(RunArguments, ReplayNamesTheExpectLineThatDisagrees) {
  const std::string wrong = std::string(SEEDED_CASE).substr(0, std::string(SEEDED_CASE).rfind('/')) + "/wrong_expect.case";
  const Outcome o = run("replay " + wrong + " --kernel host_gemm_fp32");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_TRUE(contains(o.output, "wrong_expect.case:28: the expect line disagrees")) << "line 28 holds expect";
}

}  // namespace
