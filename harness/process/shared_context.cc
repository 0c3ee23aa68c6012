// A private MPS control daemon (see shared_context.h).
#include "harness/process/shared_context.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "harness/process/worker.h"

namespace nvfp4 {
namespace {

constexpr const char* kControl = "nvidia-cuda-mps-control";

// Runs argv with envp and stdin from /dev/null, waits at most `limit` seconds; the exit status,
// or -1 when it could not run or did not end in time (it is killed then).
int run_and_wait(const std::vector<std::string>& argv, char** envp, double limit) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: the caller may have threads.
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
    execve(args[0], args.data(), envp);
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The watcher: waits for EOF on its stdin (the suite closed its end, or died), then quits the
// daemon, waits for every MPS process of this directory to end (SIGKILL after 20 s of the clock:
// a server that will not quit must not hold the GPU), and removes the directory. An MPS process of
// this directory is a live nvidia-cuda-mps* process whose environment names its pipes, or that
// holds a file of it open (the daemon and the server keep their logs open there), or that the
// daemon listed as its server before it quit: on the H200 one such process outlived the daemon's
// answer to quit by a second or two. A process's name is read with the shell's own `read`: a
// scan that started a program for every process took seconds on a loaded machine, and the wait
// for the suite's destructor ran out before the directory went. The control program gets 10 s
// an answer. $1: the directory, $2: the control program.
constexpr const char* kWatcherScript = R"sh(
trap '' INT TERM HUP
cat >/dev/null
ctl=$2
control() { if command -v timeout >/dev/null 2>&1; then timeout 10 "$ctl"; else "$ctl"; fi; }
servers=" $(echo get_server_list | control 2>/dev/null | tr -cs '0-9' ' ') "
echo quit | control >/dev/null 2>&1
mps_pids() {
  for d in /proc/[0-9]*; do
    comm=
    { read -r comm < "$d/comm"; } 2>/dev/null
    case "$comm" in nvidia-cuda-mps*) ;; *) continue ;; esac
    p=${d#/proc/}
    grep -q '^State:[[:space:]]*Z' "$d/status" 2>/dev/null && continue  # ended, not reaped yet
    if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "CUDA_MPS_PIPE_DIRECTORY=$1/pipe" ||
       ls -l "$d/fd" 2>/dev/null | grep -qF " $1/"; then
      echo "$p"
    else
      case "$servers" in *" $p "*) echo "$p" ;; esac
    fi
  done
}
end=$(( $(date +%s) + 20 ))
while [ -n "$(mps_pids)" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done
for p in $(mps_pids); do kill -9 "$p" 2>/dev/null; done
rm -rf "$1"
)sh";

}  // namespace

const char* to_string(SharedContextMode m) {
  switch (m) {
    case SharedContextMode::automatic: return "auto";
    case SharedContextMode::mps: return "mps";
    case SharedContextMode::off: return "off";
  }
  return "?";
}

bool parse_shared_context(const std::string& text, SharedContextMode* out) {
  for (SharedContextMode m : {SharedContextMode::automatic, SharedContextMode::mps, SharedContextMode::off})
    if (text == to_string(m)) {
      *out = m;
      return true;
    }
  return false;
}

bool environment_names_mps() {
  const char* pipe = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  return pipe && *pipe;
}

std::unique_ptr<SharedContext> SharedContext::start(std::string* why_not) {
  if (environment_names_mps()) {
    *why_not = "CUDA_MPS_PIPE_DIRECTORY is set: the kernels' processes join that MPS server";
    return nullptr;
  }
  const std::string control = find_on_path(kControl);
  if (control.empty()) {
    *why_not = std::string(kControl) + " is not on PATH";
    return nullptr;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/nvfp4check-mps-XXXXXX";
  if (!mkdtemp(pattern.data())) {
    *why_not = fmt::format("cannot make a directory for its pipes ({}): {}", pattern, std::strerror(errno));
    return nullptr;
  }
  std::unique_ptr<SharedContext> sc(new SharedContext());
  sc->dir_ = pattern;
  std::error_code ec;
  std::filesystem::create_directory(sc->dir_ + "/pipe", ec);
  std::filesystem::create_directory(sc->dir_ + "/log", ec);
  std::vector<std::pair<std::string, std::string>> vars = sc->client_env();
  vars.emplace_back("CUDA_MPS_LOG_DIRECTORY", sc->dir_ + "/log");
  ChildEnvironment env(vars);
  // The watcher first: from here on, whatever happens to this process, the daemon is quit.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    std::filesystem::remove_all(sc->dir_, ec);
    *why_not = std::string("pipe2: ") + std::strerror(errno);
    return nullptr;
  }
  std::vector<std::string> argv = {"/bin/sh", "-c", kWatcherScript, "nvfp4check-mps-watcher", sc->dir_, control};
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t watcher = fork();
  if (watcher < 0) {
    close(fds[0]);
    close(fds[1]);
    std::filesystem::remove_all(sc->dir_, ec);
    *why_not = std::string("fork: ") + std::strerror(errno);
    return nullptr;
  }
  if (watcher == 0) {
    // Its own session: a signal to the suite's process group (Ctrl-C, a job's end) must not take
    // the watcher before it has quit the daemon.
    setsid();
    dup2(fds[0], 0);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    execve(args[0], args.data(), env.envp());
    _exit(127);
  }
  close(fds[0]);
  sc->watcher_ = watcher;
  sc->watcher_fd_ = fds[1];
  const int rc = run_and_wait({control, "-d"}, env.envp(), 30);
  if (rc != 0) {
    *why_not = rc < 0 ? fmt::format("{} -d did not start", control) : fmt::format("{} -d exited with {}", control, rc);
    return nullptr;  // the destructor lets the watcher clean up
  }
  // The daemon answers once its control socket is there.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::filesystem::exists(sc->dir_ + "/pipe/control", ec)) {
    if (std::chrono::steady_clock::now() > deadline) {
      *why_not = fmt::format("{} -d started but made no control socket in {}/pipe within 10 s", control, sc->dir_);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return sc;
}

SharedContext::~SharedContext() {
  if (watcher_fd_ >= 0) close(watcher_fd_);
  if (watcher_ > 0) {
    // The watcher quits the daemon (10 s for each answer) and waits for it (20 s at most, then
    // kills what is left).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    while (waitpid(watcher_, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<std::pair<std::string, std::string>> SharedContext::client_env() const {
  return {{"CUDA_MPS_PIPE_DIRECTORY", dir_ + "/pipe"}};
}

}  // namespace nvfp4
