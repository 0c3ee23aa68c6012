// Worker processes and the parent's watchdog over them (see worker.h).
#include "harness/process/worker.h"

#include "harness/ops/op_module.h"

#include "harness/process/warmup.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "reference/scale_layout.h"

extern char** environ;

namespace nvfp4 {
namespace {

using Clock = std::chrono::steady_clock;

template <typename TimePoint>
double seconds_until(TimePoint deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

std::string self_executable() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot find the running executable (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(n));
}

// A call that ended with the worker's process lost (the parent kills it).
CallObservation lost_call(CallObservation::End end, std::string error) {
  CallObservation o;
  o.end = end;
  o.context_lost = true;
  o.error = std::move(error);
  return o;
}

// The names a fault's exit status indexes, from the case the worker was calling laid out again
// the way its kernel takes it (the names depend on the arrangement, not on the data); none
// outside a case.
std::vector<std::string> fault_names(const Problem* calling, uint32_t kernel_flags) {
  if (calling == nullptr) return {};
  try {
    return input_fault_names(op_module(calling->op).lay_out(*calling, CallSpec{}, kernel_flags),
                             op_is_grouped(calling->op));
  } catch (const std::exception&) {
    return {};
  }
}

// How a worker ended, in words, and what that means for the call it was in. calling: the case's
// problem while the worker was calling its kernel (names the input a fault wrote to).
CallObservation ended(int status, const std::string& during, const Problem* calling = nullptr,
                      uint32_t kernel_flags = 0) {
  CallObservation o = lost_call(CallObservation::End::crash, "");
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code >= kInputFaultExitBase) {
      const std::vector<std::string> names = fault_names(calling, kernel_flags);
      const size_t index = static_cast<size_t>(code - kInputFaultExitBase);
      if (index < names.size()) {
        o.end = CallObservation::End::input_fault;
        o.error = fmt::format("wrote to its input {} during the call (host inputs are read-only while the kernel "
                              "runs; the write faulted)", names[index]);
        return o;
      }
    }
    o.error = fmt::format("the kernel's process exited with status {} {}", code, during);
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    o.error = fmt::format("the kernel's process was killed by signal {} ({}) {}", sig, name ? name : "?", during);
  } else {
    o.error = "the kernel's process ended " + during;
  }
  return o;
}

// A started worker: its pid and the parent's (non-blocking) end of the channel.
struct Spawned {
  pid_t pid;
  int fd;
};

// Starts argv as a worker with environment envp: in its own process group (the parent ends
// everything it forks by killing the group), killed when the parent dies, the channel on
// kWorkerChannelFd. Throws WorkerStartError when no process could be made.
// shared_in, shared_out (or -1): the memory files the worker gets as kWorkerInputFd and
// kWorkerOutputFd.
Spawned spawn_worker(std::vector<std::string>& argv_strings, char* const* envp, int death_signal = SIGKILL,
                     int shared_in = -1, int shared_out = -1) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw WorkerStartError(std::string("socketpair: ") + std::strerror(errno));
  // Everything the child needs is built before fork (no allocation after it).
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    throw WorkerStartError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, death_signal);
    if (getppid() != parent) _exit(125);
    // Each descriptor first to a number above the three targets, so that moving one into place
    // cannot close another still to be moved; dup2 clears close-on-exec on the targets.
    const int from[3] = {sv[1], shared_in, shared_out};
    const int to[3] = {kWorkerChannelFd, kWorkerInputFd, kWorkerOutputFd};
    int high[3] = {-1, -1, -1};
    for (int x = 0; x < 3; ++x)
      if (from[x] >= 0 && (high[x] = fcntl(from[x], F_DUPFD_CLOEXEC, 10)) < 0) _exit(126);
    for (int x = 0; x < 3; ++x)
      if (high[x] >= 0 && dup2(high[x], to[x]) < 0) _exit(126);
    execve(argv[0], argv.data(), envp);
    _exit(127);
  }
  setpgid(pid, pid);  // also here: no race with the child's own call
  close(sv[1]);
  fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  return {pid, sv[0]};
}

}  // namespace

ChildEnvironment::ChildEnvironment(const std::vector<std::pair<std::string, std::string>>& set) {
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& [key, value] : set) replaced |= entry.rfind(key + "=", 0) == 0;
    if (!replaced) strings_.push_back(entry);
  }
  for (const auto& [key, value] : set) strings_.push_back(key + "=" + value);
  for (std::string& s : strings_) pointers_.push_back(s.data());
  pointers_.push_back(nullptr);
}

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    if (end > start) {
      const std::string candidate = dirs.substr(start, end - start) + "/" + program;
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    start = end + 1;
  }
  return "";
}

std::string worker_program() {
  const char* env = std::getenv("NVFP4CHECK_PROGRAM");
  return env && *env ? std::string(env) : self_executable();
}

WorkerCommand kernel_worker_command(const std::string& kernel, const std::vector<std::string>& plugins,
                                    double timeout_s) {
  WorkerCommand c;
  c.kernel = kernel;
  c.argv = {worker_program(), "worker", "--kernel", kernel, "--timeout", fmt::format("{}", timeout_s)};
  for (const std::string& p : plugins) c.argv.insert(c.argv.end(), {"--plugin", p});
  return c;
}

StartGate::Pass StartGate::enter() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return open_ || free_ > 0; });
  if (open_) return Pass(nullptr);
  --free_;
  return Pass(this);
}

void StartGate::leave() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++free_;
  }
  cv_.notify_one();
}

void StartGate::open() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
  }
  cv_.notify_all();
}

bool StartGate::is_open() {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

int StartGate::default_slots(int gpus) {
  if (const char* env = std::getenv("NVFP4_START_SLOTS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 0 && v <= 1024) return static_cast<int>(v);
  }
  return 2 * std::max(1, gpus);
}

WorkerExecutor::WorkerExecutor(WorkerCommand command, double timeout_s, double startup_s)
    : command_(std::move(command)), timeout_s_(timeout_s), startup_s_(startup_s) {
  signal(SIGPIPE, SIG_IGN);  // a dead worker must not kill the parent through a write
}

WorkerExecutor::~WorkerExecutor() {
  if (pid_ > 0 && fd_ >= 0) {
    const std::vector<uint8_t> quit = encode_message(QuitMsg{});
    (void)!send(fd_, quit.data(), quit.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    // A moment to leave on its own (CUDA teardown), then the whole group goes.
    const auto deadline = Clock::now() + std::chrono::milliseconds(500);
    int status = 0;
    while (!dead_ && Clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) dead_ = true;
      else usleep(2000);
    }
  }
  stop();
}

void WorkerExecutor::start() {
  if (!command_.start_gate) return start_process();
  const StartGate::Pass pass = command_.start_gate->enter();
  try {
    start_process();
  } catch (...) {
    command_.start_gate->open();  // a failed start: the other lanes need not wait their turn
    throw;
  }
}

void WorkerExecutor::start_process() {
  ChildEnvironment env(command_.env);
  // A compiling kernel's process that loses its parent gets SIGTERM: Python's worker then ends
  // the compiler and unlocks its cache (nvfp4check.worker), and dies by the default action after.
  // Fresh memory files for each process: nothing a lost worker left in them is read again.
  shared_in_ = SharedFile::create("nvfp4check-case");
  shared_out_ = SharedFile::create("nvfp4check-outputs");
  const Spawned child =
      spawn_worker(command_.argv, env.envp(), warms_up() ? SIGTERM : SIGKILL, shared_in_.fd(), shared_out_.fd());
  pid_ = child.pid;
  dead_ = false;
  fd_ = child.fd;
  frames_ = FrameReader();
  frames_.set_shared(&shared_out_);
  ++starts_;
  warm_ = false;

  CallObservation end;
  // A submission may compile when it is imported: its start has the warm-up's limit, the one the
  // user gave (--warmup-timeout), shorter or longer than a plugin's start.
  gentle_ = warms_up();
  const double limit = warms_up() ? command_.warmup_timeout_s : startup_s_;
  std::optional<WorkerMessage> m = receive(limit, &end);
  gentle_ = false;
  if (!m) {
    stop();
    if (end.end == CallObservation::End::timeout)
      throw WorkerStartError(fmt::format("the worker process for {} did not start within {} s{}: it was still "
                                         "importing its file or loading its kernel when the watchdog killed it",
                                         command_.kernel, limit, warms_up() ? " (--warmup-timeout)" : ""));
    // A first message that is no message of this protocol: most likely another build's.
    const std::string skew = end.end == CallObservation::End::protocol ? "; " + other_protocol(0) : "";
    throw WorkerStartError(
        fmt::format("the worker process for {} did not start: {}{}", command_.kernel, end.error, skew));
  }
  const ReadyMsg* ready = std::get_if<ReadyMsg>(&*m);
  if (!ready) {
    stop();
    throw WorkerStartError("the worker's first message was not its kernel list");
  }
  if (ready->protocol != kProtocolVersion) {
    stop();
    throw WorkerStartError(fmt::format("the worker process for {} did not start: {}", command_.kernel,
                                       other_protocol(ready->protocol)));
  }
  if (!ready->error.empty()) {
    stop();
    throw WorkerStartError(ready->error);
  }
  if (ready->kernels.size() != 1) {
    stop();
    throw WorkerStartError("the worker reported " + std::to_string(ready->kernels.size()) + " kernels, not one");
  }
  desc_ = ready->kernels.front();
  have_desc_ = true;
}

void WorkerExecutor::stop() {
  if (pid_ > 0 && gentle_ && !dead_) {
    // A compiler may be running: SIGTERM lets it end and leave its cache unlocked.
    kill(-pid_, SIGTERM);
    const auto grace = Clock::now() + std::chrono::duration<double>(kStopGraceSeconds);
    int status = 0;
    while (Clock::now() < grace) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        dead_ = true;
        break;
      }
      usleep(10000);
    }
  }
  if (pid_ > 0) {
    // The whole group: children the kernel forked die with it.
    kill(-pid_, SIGKILL);
    if (!dead_) {
      kill(pid_, SIGKILL);
      // A process stuck in the GPU driver may take a while to die; do not wait for it forever.
      int status = 0;
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      while (waitpid(pid_, &status, WNOHANG) == 0 && Clock::now() < deadline) usleep(1000);
    }
    pid_ = -1;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  frames_ = FrameReader();
  shared_in_ = SharedFile();
  shared_out_ = SharedFile();
}

std::optional<WorkerMessage> WorkerExecutor::receive(double timeout_s, CallObservation* end) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  auto lost = [&](CallObservation o) {
    *end = std::move(o);
    stop();
    return std::nullopt;
  };
  for (;;) {
    try {
      if (std::optional<WorkerMessage> m = frames_.next()) return m;
    } catch (const ProtocolError& e) {
      return lost(lost_call(CallObservation::End::protocol,
                            std::string("the kernel's process wrote something into the runner's channel that is "
                                        "no message of the runner's protocol (") + e.what() + ")"));
    }
    // Whether the worker is still there: a dead worker whose children hold the socket open
    // must not cost a whole timeout. Once reaped, its status is kept for the report.
    if (!dead_) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        dead_ = true;
        dead_status_ = status;
      }
    }
    pollfd pfd{fd_, POLLIN, 0};
    const double left = seconds_until(deadline);
    const int slice = dead_ ? 0 : static_cast<int>(std::clamp(left * 1000, 0.0, 50.0));
    bool closed = false, got_any = false;
    if (poll(&pfd, 1, slice) > 0) {
      uint8_t chunk[1 << 16];
      for (;;) {
        const ssize_t got = read(fd_, chunk, sizeof chunk);
        if (got > 0) {
          frames_.feed(chunk, static_cast<size_t>(got));
          got_any = true;
          continue;
        }
        if (got == 0) closed = true;
        break;  // EOF, or nothing more for now (EAGAIN)
      }
    }
    if (got_any) continue;  // parse what came first
    if (dead_) return lost(ended(dead_status_, "", calling_, desc_.info.flags));
    if (closed) {
      // A process that dies closes its end first: give it a moment to be reaped as a crash.
      const auto grace = Clock::now() + std::chrono::seconds(2);
      int status = 0;
      while (Clock::now() < grace) {
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          dead_ = true;
          dead_status_ = status;
          return lost(ended(status, "", calling_, desc_.info.flags));
        }
        usleep(1000);
      }
      return lost(lost_call(CallObservation::End::protocol,
                            "the kernel's process closed the runner's channel while still running"));
    }
    if (left <= 0) {
      return lost(lost_call(CallObservation::End::timeout,
                            fmt::format("no progress for {} s: the watchdog killed the kernel's process", timeout_s)));
    }
  }
}

const KernelDesc& WorkerExecutor::kernel() {
  if (!have_desc_) start();
  return desc_;
}

double WorkerExecutor::warm_up() {
  if (!warms_up() || warmup_.kept() || (warm_ && pid_ > 0)) return 0;
  const auto t = Clock::now();
  try {
    if (pid_ < 0) start();
  } catch (const WorkerStartError&) {
    return 0;  // the next case starts it again and reports why it does not start
  }
  CaseData data;
  try {
    data = warmup_case(desc_.info);
  } catch (const std::invalid_argument&) {
    return 0;  // it declares nothing to call: the schedule skips it
  }
  const double watchdog = timeout_s_;
  timeout_s_ = command_.warmup_timeout_s;
  gentle_ = true;
  std::vector<CallObservation> out = run_calls(data, {PlannedCall{}});
  gentle_ = false;
  timeout_s_ = watchdog;
  const double seconds = std::chrono::duration<double>(Clock::now() - t).count();
  if (out.empty()) out.push_back(lost_call(CallObservation::End::protocol, "no answer"));
  // Its output is not judged: the cases are.
  warm_ = warmup_.record(out, data.problem, fmt::format(", --warmup-timeout {} s", command_.warmup_timeout_s),
                         fmt::format("{:.0f} s: the compile takes longer (raise --warmup-timeout) or the kernel "
                                     "hangs; its process group got SIGTERM, then SIGKILL after {:.0f} s",
                                     command_.warmup_timeout_s, kStopGraceSeconds));
  return seconds;
}

std::vector<CallObservation> WorkerExecutor::run_case(const CaseData& data, const std::vector<PlannedCall>& plan) {
  if (warms_up() && !warmup_.kept() && !(warm_ && pid_ > 0)) warm_up();
  // Handed to one case, as its first call; a later case tries again in a fresh process.
  if (std::optional<std::vector<CallObservation>> failed = warmup_.hand_to_case()) return std::move(*failed);
  return run_calls(data, plan);
}

std::vector<CallObservation> WorkerExecutor::run_calls(const CaseData& data, const std::vector<PlannedCall>& plan) {
  if (pid_ < 0) start();
  const int64_t id = next_case_++;
  std::vector<CallSpec> specs;
  for (const PlannedCall& call : plan) specs.push_back(call.spec);
  // The last case's tensors are gone from the file before this one's are written (the worker
  // read them before it answered).
  shared_in_.reset();
  // A case of some megabytes takes a while to receive (and more under load): its call 0 is timed
  // from when the worker says it starts, after at least 30 s for the receiving.
  bool started_first = false;
  const std::vector<uint8_t> frame = encode_run_case(id, data, specs, &shared_in_, &started_first);
  // What can come back: per call, the outputs twice as byte strings of words (at most 4 bytes
  // each) and the report of guards and inputs (a few per buffer: a grouped problem has five
  // buffers per group) and an error (a traceback: 1 MiB is plenty).
  int64_t words = op_module(data.problem.op).output_words(data.problem);
  if (data.stale) words = std::max(words, op_module(data.stale->op).output_words(*data.stale));
  const uint64_t buffers = 8 + 5 * data.problem.groups.size();
  frames_.set_limit(static_cast<uint64_t>(8 * words) + 256 * buffers + (uint64_t(1) << 20));
  if (std::optional<CallObservation> failed = send_frame(frame)) return {std::move(*failed)};
  calling_ = &data.problem;
  struct Forget {
    const Problem*& calling;
    ~Forget() { calling = nullptr; }
  } forget{calling_};
  return receive_calls(id, plan.size(), started_first);
}

std::optional<CallObservation> WorkerExecutor::send_frame(const std::vector<uint8_t>& frame) {
  // Send with the watchdog on: a worker that stops reading is hung.
  size_t sent = 0;
  const auto send_deadline = Clock::now() + std::chrono::duration<double>(std::max(timeout_s_, 30.0));
  while (sent < frame.size()) {
    const ssize_t w = send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (w > 0) {
      sent += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
    pollfd pfd{fd_, POLLOUT, 0};
    poll(&pfd, 1, 50);
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      dead_ = true;
      CallObservation end = ended(status, "before the case's first call");
      stop();
      return end;
    }
    if (Clock::now() > send_deadline) break;
  }
  if (sent == frame.size()) return std::nullopt;
  stop();
  return lost_call(CallObservation::End::timeout, "the kernel's process stopped reading the runner's channel");
}

std::vector<CallObservation> WorkerExecutor::receive_calls(int64_t id, size_t calls, bool started_first) {
  std::vector<CallObservation> out;
  // Receiving a large case, then call 0 from its CallStarted; a small case's call 0 at once.
  double wait = started_first ? std::max(timeout_s_, 30.0) : timeout_s_;
  for (bool first = true;; first = false) {  // first: the case's first message
    CallObservation end;
    std::optional<WorkerMessage> m = receive(wait, &end);
    if (!m) {
      if (end.end == CallObservation::End::timeout)
        end.error = fmt::format("no progress for {} s during call {} of the case: the watchdog killed the kernel's "
                                "process", wait, out.size() + 1);
      out.push_back(end);
      return out;
    }
    // The worker has read the case: its tensors' copy in the file may go now.
    if (first) shared_in_.reset();
    if (const auto* started = std::get_if<CallStartedMsg>(&*m);
        started && first && started_first && started->case_id == id && started->index == 0) {
      wait = timeout_s_;
      continue;
    }
    auto* done = std::get_if<CallDoneMsg>(&*m);
    const bool unread = done && first && done->case_id == kUnreadCase && done->index == 0 &&
                        done->observation.end == CallObservation::End::suite_memory;
    if (!done || (done->case_id != id && !unread) || done->index != static_cast<int64_t>(out.size())) {
      stop();
      out.push_back(lost_call(CallObservation::End::protocol,
                              "the kernel's process sent a message the runner did not ask for (a kernel writing "
                              "into the runner's channel?)"));
      return out;
    }
    out.push_back(std::move(done->observation));
    const CallObservation& o = out.back();
    if (o.context_lost) stop();
    if (o.end == CallObservation::End::returned && out.size() < calls) {
      wait = timeout_s_;  // the next call started as the worker sent this answer
      continue;
    }
    // The worker sends nothing after the last answer: bytes after it were written by another.
    if (!frames_.empty() && fd_ >= 0) {
      stop();
      out.back() = lost_call(CallObservation::End::protocol,
                             "the kernel's process wrote something into the runner's channel after the last "
                             "answer (a kernel writing into the runner's descriptors?)");
    }
    return out;
  }
}

namespace {

// Runs work on this thread (a worker started on a thread that ends would get its parent-death
// signal), ticking about once a second from another until it is done.
template <typename Work>
void with_ticks(Work work, std::chrono::steady_clock::time_point start, const std::function<void(double)>& tick) {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::thread ticker([&] {
    std::unique_lock<std::mutex> lock(mutex);
    while (!cv.wait_for(lock, std::chrono::seconds(1), [&] { return done; }))
      if (tick) tick(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  });
  work();
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
  }
  cv.notify_all();
  ticker.join();
}

}  // namespace

double warm_up_lanes(const std::vector<WorkerExecutor*>& lanes, const std::function<void(double)>& tick) {
  if (lanes.empty() || !lanes.front()->warms_up()) return 0;
  const auto start = std::chrono::steady_clock::now();
  double first = 0;
  with_ticks([&] { first = lanes.front()->warm_up(); }, start, tick);
  if (const std::optional<CallObservation>& failed = lanes.front()->warmup_failure()) {
    for (size_t x = 1; x < lanes.size(); ++x) lanes[x]->set_warmup_failure(*failed);
    return first;
  }
  // The other lanes warm up as their cases begin, each on its lane's thread (their processes
  // must not outlive the thread that started them), loading what the first one compiled.
  return first;
}

std::vector<KernelDesc> list_kernels(const std::vector<std::string>& plugins, double timeout_s) {
  std::vector<std::string> argv = {worker_program(), "worker", "--list"};
  for (const std::string& p : plugins) argv.insert(argv.end(), {"--plugin", p});
  // The listing child is a worker that sends one Ready with every kernel, then ends.
  const Spawned child = spawn_worker(argv, environ);
  const pid_t pid = child.pid;
  std::string who = plugins.empty() ? std::string("the built-in kernels") : "plugin";
  for (size_t x = 0; x < plugins.size(); ++x) who += (x ? ", " : " ") + plugins[x];
  FrameReader frames;
  std::optional<WorkerMessage> m;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  std::string failure;
  int status = 0;
  bool reaped = false;
  while (!m && failure.empty()) {
    pollfd pfd{child.fd, POLLIN, 0};
    poll(&pfd, 1, 50);
    uint8_t chunk[1 << 16];
    ssize_t got;
    while ((got = read(child.fd, chunk, sizeof chunk)) > 0) frames.feed(chunk, static_cast<size_t>(got));
    try {
      m = frames.next();
    } catch (const ProtocolError& e) {
      failure = std::string("it wrote something that is no message of the runner's protocol (") + e.what() + ")";
    }
    if (m || !failure.empty()) break;
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      continue;  // read what it left, then judge
    }
    if (reaped) failure = ended(status, "").error;
    else if (Clock::now() > deadline) failure = fmt::format("loading did not finish within {} s", timeout_s);
  }
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  if (!reaped) waitpid(pid, &status, 0);
  close(child.fd);
  if (!failure.empty()) throw WorkerStartError("cannot load " + who + ": " + failure);
  const ReadyMsg* ready = std::get_if<ReadyMsg>(&*m);
  if (!ready) throw WorkerStartError("cannot load " + who + ": its first message was not the kernel list");
  if (!ready->error.empty()) throw WorkerStartError(ready->error);
  return ready->kernels;
}

int serve_kernel(int fd, const Kernel& kernel, double timeout_s) {
  install_input_fault_handler();
  KernelCaller caller(kernel, timeout_s, /*protect_inputs=*/true);
  caller.prepare();  // the CUDA context is the process's start (the parent waits for Ready)
  send_message(fd, ReadyMsg{{describe_kernel(kernel)}, ""});
  // The memory files the parent opened for this process (none: every byte in the frames).
  SharedFile in(fcntl(kWorkerInputFd, F_GETFD) >= 0 ? kWorkerInputFd : -1);
  SharedFile out(fcntl(kWorkerOutputFd, F_GETFD) >= 0 ? kWorkerOutputFd : -1);
  for (;;) {
    WorkerMessage m;
    try {
      m = receive_message(fd, &in);
    } catch (const ProtocolError&) {
      return 0;  // the parent is gone or done
    } catch (const std::bad_alloc&) {
      // The case's bytes did not fit in this process's memory: the suite's error, said as the
      // answer to the case (whose id went unread), and this process ends.
      send_message(fd, CallDoneMsg{kUnreadCase, 0,
                                   lost_call(CallObservation::End::suite_memory,
                                             "the kernel's process ran out of host memory reading the case from "
                                             "the runner (the kernel was not called)")});
      return 3;
    }
    if (std::holds_alternative<QuitMsg>(m)) return 0;
    auto* run = std::get_if<RunCaseMsg>(&m);
    if (!run) return 2;
    // The parent has read every answer of the case before: its outputs' bytes may go.
    out.reset();
    caller.begin_case(std::move(run->data));
    for (size_t x = 0; x < run->plan.size(); ++x) {
      const int64_t index = static_cast<int64_t>(x);
      if (x == 0 && run->started_first) send_message(fd, CallStartedMsg{run->case_id, index});
      CallObservation o = caller.call(run->plan[x]);
      const bool stop = o.end != CallObservation::End::returned;
      const bool lost = o.context_lost;
      send_message(fd, CallDoneMsg{run->case_id, index, std::move(o)}, &out);
      // A lost CUDA context (or a hung kernel still running) can hang the runtime's teardown.
      if (lost) _exit(0);
      if (stop) break;
    }
  }
}

int worker_main(const WorkerArgs& args) {
  signal(SIGPIPE, SIG_IGN);
  const int fd = kWorkerChannelFd;
  if (fcntl(fd, F_GETFD) < 0) {
    std::fprintf(stderr, "nvfp4check worker: internal command, started by run, replay and list only\n");
    return 2;
  }
  Registry registry = Registry::with_builtins();
  try {
    for (const std::string& plugin : args.plugins) registry.load_plugin(plugin);
  } catch (const PluginError& e) {
    send_message(fd, ReadyMsg{{}, e.what()});
    return 2;
  }
  if (args.list) {
    ReadyMsg ready;
    for (const Kernel& k : registry.kernels()) ready.kernels.push_back(describe_kernel(k));
    send_message(fd, ready);
    return 0;
  }
  const Kernel* kernel = registry.find(args.kernel);
  if (!kernel) {
    send_message(fd, ReadyMsg{{}, "no kernel named " + args.kernel});
    return 2;
  }
  return serve_kernel(fd, *kernel, args.timeout_s);
}

}  // namespace nvfp4
