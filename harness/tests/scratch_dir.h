// Folders a test program makes under its temporary directory, removed again when it ends with
// every test passed. A failed run keeps them (the log names them), so a failing case's files can
// be read; a passing run leaves nothing behind, run after run.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace nvfp4::test {

class ScratchDirs {
 public:
  static ScratchDirs& instance() {
    static ScratchDirs dirs;  // destroyed after main returns, when every test has run
    return dirs;
  }
  void add(const std::filesystem::path& d) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirs_.insert(d);
  }
  ~ScratchDirs() {
    // A forked child (a death test, a kernel's process before exec) leaves its parent's folders.
    if (getpid() != owner_) return;
    const ::testing::UnitTest* unit = ::testing::UnitTest::GetInstance();
    if (unit->Failed()) {
      for (const auto& d : dirs_) std::fprintf(stderr, "kept for the failed test: %s\n", d.c_str());
      return;
    }
    std::error_code ec;
    for (const auto& d : dirs_) std::filesystem::remove_all(d, ec);
  }

 private:
  ScratchDirs() : owner_(getpid()) {}
  pid_t owner_;
  std::mutex mutex_;
  std::set<std::filesystem::path> dirs_;
};

// The path of folder "nvfp4-NAME-PID" under the test's temporary directory (the pid keeps
// concurrent runs of a test, from several build trees or ctest -j, apart), not created; it is
// removed when the program ends with every test passed.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::path(::testing::TempDir()) / ("nvfp4-" + name + "-" + std::to_string(getpid()));
  ScratchDirs::instance().add(d);
  return d;
}

}  // namespace nvfp4::test
