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

}  // namespace
