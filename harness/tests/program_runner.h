// The isolation and hostile tests' way of running the nvfp4check program (its output, stdout and
// stderr together, exit code and time, printed as the test's log), a fresh folder per test, and
// the JSON reports it writes.
#pragma once

#include <sys/wait.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/tests/scratch_dir.h"

namespace nvfp4::test {

struct Outcome {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

// Runs `program args` (with stdin_text piped in when given) through the shell. What it puts in
// the temporary folder (a failing replay's error maps) goes into a scratch folder of the test's.
inline Outcome run_program(const std::string& program, const std::string& args, const std::string& stdin_text = "") {
  static const std::string temporary = [] {
    const std::filesystem::path d = scratch_dir("tmp");
    std::filesystem::create_directories(d);
    return d.string();
  }();
  const std::string command = program + " " + args + " 2>&1";
  std::printf("$ %s\n", command.c_str());
  Outcome o;
  const auto start = std::chrono::steady_clock::now();
  const std::string line = "TMPDIR='" + temporary + "'; export TMPDIR; " +
                           (stdin_text.empty() ? command : "printf '%s' '" + stdin_text + "' | " + command);
  FILE* pipe = popen(line.c_str(), "r");
  if (!pipe) return o;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) o.output.append(buf, n);
  const int status = pclose(pipe);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::printf("%s(exit %d, %.1f s)\n", o.output.c_str(), o.exit_code, o.seconds);
  return o;
}

// An empty folder of its own under the test's temporary directory (scratch_dir's, removed when
// every test passed).
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path d = scratch_dir(name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace nvfp4::test
