// Worker processes, their event pipe and the parent's watchdog (see worker_process.h).
#include "harness/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace nvfp4 {

WorkerProcess::WorkerProcess(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::runtime_error("worker: empty command line");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec. dup2 clears O_CLOEXEC on the new fd.
    if (fds[1] == kWorkerEventFd) {
      fcntl(fds[1], F_SETFD, 0);
    } else if (dup2(fds[1], kWorkerEventFd) < 0) {
      _exit(126);
    }
    execv(args[0], args.data());
    static const char kMsg[] = "{\"event\":\"error\",\"message\":\"cannot exec the worker\"}\n";
    ssize_t ignored = write(kWorkerEventFd, kMsg, sizeof kMsg - 1);
    (void)ignored;
    _exit(127);
  }
  close(fds[1]);
  pid_ = pid;
  fd_ = fds[0];
}

WorkerProcess::~WorkerProcess() {
  if (!reaped_) {
    kill_now();
  }
  if (fd_ >= 0) close(fd_);
}

void WorkerProcess::kill_now() {
  if (reaped_ || pid_ < 0) return;
  ::kill(pid_, SIGKILL);
  reap();
}

void WorkerProcess::reap() {
  if (reaped_) return;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  status_ = status;
  reaped_ = true;
}

WorkerProcess::Next WorkerProcess::next(nlohmann::json* event, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      const std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      if (line.empty()) continue;
      try {
        *event = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        // Not ours (e.g. a kernel writing to fd 3): carried as text so nothing is lost.
        *event = {{"event", "garbage"}, {"text", line}};
      }
      return Next::event;
    }
    if (fd_ < 0) {
      reap();
      return Next::ended;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Next::timeout;
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (ready <= 0) continue;
    char chunk[65536];
    const ssize_t got = read(fd_, chunk, sizeof chunk);
    if (got > 0) {
      buffer_.append(chunk, static_cast<size_t>(got));
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
      close(fd_);
      fd_ = -1;
      // A partial last line (a worker killed mid-write) is dropped.
      if (!buffer_.empty() && buffer_.back() != '\n') buffer_.clear();
    }
  }
}

std::string WorkerProcess::end_description() const {
  if (!reaped_) return "still running";
  if (WIFEXITED(status_)) return fmt::format("exited with status {}", WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) {
    const int sig = WTERMSIG(status_);
    const char* name = strsignal(sig);
    return fmt::format("killed by signal {} ({})", sig, name ? name : "?");
  }
  return "ended";
}

bool WorkerProcess::exited_with_zero() const {
  return reaped_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0;
}

void EventWriter::emit(const nlohmann::json& event) const {
  const std::string line = event.dump() + "\n";
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the parent is gone; nothing to report to
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string self_executable() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot find the running executable (/proc/self/exe)");
  path[n] = '\0';
  return path;
}

namespace {

// A case result the parent makes when a worker died or went silent.
nlohmann::json lost_case(const WorkerJob& job, const std::string& check, const std::string& what,
                         const std::string& case_file, const std::string& stage) {
  std::string text = fmt::format("FAIL {}: check \"{}\"", job.kernel, check);
  if (job.seed) text += fmt::format(" (seed {})", *job.seed);
  text += "\n  " + what + (stage.empty() ? "" : " during stage \"" + stage + "\"") + "\n";
  if (!case_file.empty()) {
    text += "  case file: " + case_file + "\n";
    text += fmt::format("  reproduce: nvfp4check replay {} --kernel {}\n", case_file, job.kernel);
  } else {
    text += "  (no case had started: the worker failed outside any case)\n";
  }
  return {{"verdict", "fail"},
          {"elements", 0},
          {"exact_elements", 0},
          {"failure",
           {{"check", check}, {"message", what}, {"case_file", case_file}, {"text", text}}}};
}

}  // namespace

KernelReport supervise_worker(const WorkerJob& job, const std::function<void(const nlohmann::json&)>& on_event) {
  KernelReport report;
  report.name = job.kernel;
  report.origin = job.origin;
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> inputs = job.inputs;
  const bool replay = !job.inputs.empty();

  for (;;) {
    std::vector<std::string> argv = job.argv;
    for (const std::string& in : inputs) {
      argv.push_back("--input");
      argv.push_back(in);
    }
    WorkerProcess worker(argv);
    std::string case_file, input, stage;
    bool in_case = false, finished = false, restart = false;
    double wait = job.startup_s;
    std::string lost_check, lost_what;
    // Time by step: each event closes the step in progress and may open the next.
    std::string step = "start";
    auto step_started = std::chrono::steady_clock::now();
    auto close_step = [&](const std::string& next) {
      const auto now = std::chrono::steady_clock::now();
      const double sec = std::chrono::duration<double>(now - step_started).count();
      auto it = std::find_if(report.stage_seconds.begin(), report.stage_seconds.end(),
                             [&](const auto& e) { return e.first == step; });
      if (it == report.stage_seconds.end()) {
        report.stage_seconds.emplace_back(step, sec);
      } else {
        it->second += sec;
      }
      step = next;
      step_started = now;
    };
    for (;;) {
      nlohmann::json ev;
      const WorkerProcess::Next n = worker.next(&ev, wait);
      if (n == WorkerProcess::Next::timeout) {
        worker.kill_now();
        if (finished || restart) break;  // all reported; only its exit was slow
        lost_check = "timeout";
        lost_what = fmt::format("no progress for {} s: the watchdog killed the worker process", wait);
        break;
      }
      if (n == WorkerProcess::Next::ended) {
        if (!finished && !restart) {
          lost_check = "crash";
          const std::string how = worker.end_description();
          lost_what = "the worker process " + std::string(how.rfind("killed", 0) == 0 ? "was " : "") + how;
        }
        break;
      }
      const std::string type = ev.value("event", "");
      if (type == "begin") close_step("prepare");
      if (type == "stage") close_step(ev.value("stage", ""));
      if (type == "result") close_step("generate");
      if (type == "done") close_step("end");
      if (type == "begin") {
        in_case = true;
        input = ev.value("input", "");
        case_file = input;
        stage.clear();
        wait = job.timeout_s;
      } else if (type == "saved") {
        case_file = ev.value("case_file", "");
      } else if (type == "stage") {
        stage = ev.value("stage", "");
        wait = job.timeout_s;
      } else if (type == "result") {
        accumulate(report, ev.at("result"));
        in_case = false;
        if (replay && !inputs.empty()) inputs.erase(inputs.begin());
      } else if (type == "skipped") {
        report.verdict = "skipped";
        report.skip_reason = ev.value("why", "");
      } else if (type == "restart") {
        restart = true;
      } else if (type == "error") {
        throw WorkerUsageError(ev.value("message", "the worker reported an error"));
      } else if (type == "done") {
        finished = true;
      }
      if (on_event) on_event(ev);
    }
    if (!lost_check.empty()) {
      const nlohmann::json lost = lost_case(job, lost_check, lost_what, in_case ? case_file : "", in_case ? stage : "");
      accumulate(report, lost);
      if (on_event) on_event({{"event", "result"}, {"result", lost}});
      if (replay && in_case && !inputs.empty()) inputs.erase(inputs.begin());
      // A worker that dies outside any case would die again: stop here.
      if (!in_case) break;
    }
    if (finished || !replay || inputs.empty()) break;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace nvfp4
