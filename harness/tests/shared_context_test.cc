// The private MPS daemon's life (harness/process/shared_context.h) without a GPU: a stand-in
// nvidia-cuda-mps-control on PATH that, like the real one, daemonizes with -d, makes its control
// socket (a file here) in CUDA_MPS_PIPE_DIRECTORY and ends when told "quit" on its stdin. The
// suite must start it in a directory of its own, and leave neither process nor directory behind,
// whether the run ends or is killed.
#include "harness/process/shared_context.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace nvfp4 {
namespace {

namespace fs = std::filesystem;

// Processes whose name starts as the daemon's and whose environment names dir's pipes.
int daemons_of(const std::string& dir) {
  int n = 0;
  const std::string wanted = "CUDA_MPS_PIPE_DIRECTORY=" + dir + "/pipe";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("nvidia-cuda-mps", 0) != 0) continue;
    std::ifstream env(entry.path() / "environ", std::ios::binary);
    std::string var;
    while (std::getline(env, var, '\0'))
      if (var == wanted) ++n;
  }
  return n;
}

// A process that exists and has not ended (a zombie waiting to be reaped has).
bool running(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  bool exists = false;
  while (std::getline(status, line)) {
    exists = true;
    if (line.rfind("State:", 0) == 0 && line.find('Z') != std::string::npos) return false;
  }
  return exists;
}

bool eventually(const std::function<bool()>& done, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

class SharedContextDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = (fs::path(::testing::TempDir()) / ("nvfp4-mps-test-" + std::to_string(getpid()))).string();
    fs::remove_all(work_);
    fs::create_directories(work_ + "/bin");
    fs::create_directories(work_ + "/tmp");
    // The daemon starts a server too, without its pipe directory in the environment, which
    // lingers a second after the daemon has gone (as the real one did on the H200); the daemon
    // lists it for get_server_list.
    const std::string fake = work_ + "/bin/nvidia-cuda-mps-control";
    std::ofstream(fake) << "#!/bin/bash\n"
                           "P=$CUDA_MPS_PIPE_DIRECTORY\n"
                           "if [ \"$1\" = -d ]; then\n"
                           "  : > \"$P/control\"\n"
                           "  env -u CUDA_MPS_PIPE_DIRECTORY \"$(dirname \"$0\")/nvidia-cuda-mps-server\" \"$P/control\" "
                           "</dev/null >/dev/null 2>&1 &\n"
                           "  echo $! > \"$P/server.pid\"\n"
                           "  env -u CUDA_MPS_PIPE_DIRECTORY \"$(dirname \"$0\")/nvidia-cuda-mps-linger\" \"$P/control\" "
                           "\"$CUDA_MPS_LOG_DIRECTORY/control.log\" </dev/null >/dev/null 2>&1 &\n"
                           "  echo $! > \"$P/linger.pid\"\n"
                           "  ( while [ -e \"$P/control\" ]; do sleep 0.05; done ) </dev/null >/dev/null 2>&1 &\n"
                           "  exit 0\n"
                           "fi\n"
                           "read -r cmd\n"
                           "[ \"$cmd\" = get_server_list ] && cat \"$P/server.pid\"\n"
                           "[ \"$cmd\" = quit ] && rm -f \"$P/control\"\n"
                           "true\n";
    fs::permissions(fake, fs::perms::owner_all);
    const std::string server = work_ + "/bin/nvidia-cuda-mps-server";
    std::ofstream(server) << "#!/bin/bash\n"
                             "while [ -e \"$1\" ]; do sleep 0.05; done\n"
                             "sleep 1\n";
    fs::permissions(server, fs::perms::owner_all);
    // ... and a process that neither names the pipes nor is listed, but holds the log open (and
    // outlives the server).
    const std::string linger = work_ + "/bin/nvidia-cuda-mps-linger";
    std::ofstream(linger) << "#!/bin/bash\n"
                             "exec 3>>\"$2\"\n"
                             "while [ -e \"$1\" ]; do sleep 0.05; done\n"
                             "sleep 2\n";
    fs::permissions(linger, fs::perms::owner_all);
    const char* path = std::getenv("PATH");
    old_path_ = path ? path : "";
    setenv("PATH", (work_ + "/bin:" + old_path_).c_str(), 1);
    const char* tmp = std::getenv("TMPDIR");
    old_tmp_ = tmp ? tmp : "";
    had_tmp_ = tmp != nullptr;
    setenv("TMPDIR", (work_ + "/tmp").c_str(), 1);
    unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  }
  void TearDown() override {
    setenv("PATH", old_path_.c_str(), 1);
    if (had_tmp_) setenv("TMPDIR", old_tmp_.c_str(), 1); else unsetenv("TMPDIR");
    fs::remove_all(work_);
  }
  std::string work_, old_path_, old_tmp_;
  bool had_tmp_ = false;
};

TEST_F(SharedContextDaemon, StartsInItsOwnDirectoryAndLeavesNothingBehind) {
  std::string why, dir;
  pid_t server = 0, linger = 0;
  {
    std::unique_ptr<SharedContext> sc = SharedContext::start(&why);
    ASSERT_TRUE(sc) << why;
    dir = sc->directory();
    EXPECT_EQ(fs::path(dir).parent_path(), fs::path(work_ + "/tmp"));
    EXPECT_TRUE(fs::exists(dir + "/pipe/control"));
    ASSERT_EQ(sc->client_env().size(), 1u);
    EXPECT_EQ(sc->client_env()[0].first, "CUDA_MPS_PIPE_DIRECTORY");
    EXPECT_EQ(sc->client_env()[0].second, dir + "/pipe");
    EXPECT_GE(daemons_of(dir), 1);
    std::ifstream(dir + "/pipe/server.pid") >> server;
    std::ifstream(dir + "/pipe/linger.pid") >> linger;
    ASSERT_GT(server, 0);
    ASSERT_GT(linger, 0);
    EXPECT_TRUE(running(server));
    EXPECT_TRUE(running(linger));
  }
  // The destructor returns once the watcher has quit the daemon, seen its server end and removed
  // the directory.
  EXPECT_EQ(daemons_of(dir), 0);
  EXPECT_FALSE(running(server)) << "the server outlived the run: " << server;
  EXPECT_FALSE(running(linger)) << "a process holding the log outlived the run: " << linger;
  EXPECT_FALSE(fs::exists(dir)) << dir;
}

// A run killed outright never reaches the destructor: its watcher, in a session of its own, sees
// the pipe close and quits the daemon all the same.
TEST_F(SharedContextDaemon, AKilledRunsDaemonIsQuitByItsWatcher) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t run = fork();
  ASSERT_GE(run, 0);
  if (run == 0) {
    close(fds[0]);
    std::string why;
    std::unique_ptr<SharedContext> sc = SharedContext::start(&why);
    const std::string dir = sc ? sc->directory() : "";
    (void)!write(fds[1], dir.c_str(), dir.size());
    close(fds[1]);
    kill(getpid(), SIGKILL);
  }
  close(fds[1]);
  char buffer[4096];
  const ssize_t got = read(fds[0], buffer, sizeof buffer);
  close(fds[0]);
  int status = 0;
  waitpid(run, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  ASSERT_GT(got, 0) << "the daemon did not start in the killed run";
  const std::string dir(buffer, static_cast<size_t>(got));
  pid_t server = 0;
  std::ifstream(dir + "/pipe/server.pid") >> server;
  EXPECT_TRUE(eventually([&] { return daemons_of(dir) == 0 && !fs::exists(dir) && !running(server); }, 20))
      << dir << ": " << daemons_of(dir) << " daemon(s) left";
}

TEST_F(SharedContextDaemon, SaysWhyNotWithoutTheProgramOrWithAnMpsOfTheEnvironment) {
  std::string why;
  setenv("CUDA_MPS_PIPE_DIRECTORY", "/somewhere", 1);
  EXPECT_FALSE(SharedContext::start(&why));
  EXPECT_NE(why.find("CUDA_MPS_PIPE_DIRECTORY is set"), std::string::npos) << why;
  unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  setenv("PATH", "/nonexistent", 1);
  EXPECT_FALSE(SharedContext::start(&why));
  EXPECT_NE(why.find("nvidia-cuda-mps-control is not on PATH"), std::string::npos) << why;
  EXPECT_TRUE(fs::is_empty(work_ + "/tmp"));
}

TEST(SharedContextMode, ParsesItsThreeNames) {
  SharedContextMode m = SharedContextMode::off;
  EXPECT_TRUE(parse_shared_context("auto", &m));
  EXPECT_EQ(m, SharedContextMode::automatic);
  EXPECT_TRUE(parse_shared_context("mps", &m));
  EXPECT_EQ(m, SharedContextMode::mps);
  EXPECT_TRUE(parse_shared_context("off", &m));
  EXPECT_EQ(m, SharedContextMode::off);
  EXPECT_FALSE(parse_shared_context("on", &m));
}

}  // namespace
}  // namespace nvfp4
