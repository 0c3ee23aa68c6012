// Process isolation for `run` and `replay`: each kernel's cases run in a child worker process
// (this same executable, exec'd fresh), which reports JSON lines on a pipe. A CUDA illegal
// address poisons a context for good and a segfaulting plugin ends its process; a hang must not
// hang the suite. So the parent never runs a kernel itself: it watches the events with a
// watchdog, kills a silent worker, reports "crash" or "timeout" with the case file the worker
// saved before running the case, and starts a fresh worker for what is left.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/report.h"

namespace nvfp4 {

// The file descriptor on which a worker writes its events.
constexpr int kWorkerEventFd = 3;

// A child process started from argv (argv[0] is the executable), its events read from a pipe
// that the child sees as kWorkerEventFd.
class WorkerProcess {
 public:
  explicit WorkerProcess(const std::vector<std::string>& argv);  // throws std::runtime_error
  ~WorkerProcess();                                              // kills the child if still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  enum class Next { event, ended, timeout };
  // Waits up to timeout_s for the next event line. `ended`: the pipe closed and the child was
  // reaped (see end_description()).
  Next next(nlohmann::json* event, double timeout_s);
  void kill_now();
  // "exited with status N" or "killed by signal N (name)".
  std::string end_description() const;
  bool exited_with_zero() const;

 private:
  void reap();
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
  bool reaped_ = false;
  int status_ = 0;
};

// The worker's side: one JSON object per line, one write(2) per line so a crash right after an
// event still leaves the whole line in the pipe.
class EventWriter {
 public:
  explicit EventWriter(int fd) : fd_(fd) {}
  void emit(const nlohmann::json& event) const;

 private:
  int fd_;
};

// One kernel's work, as the parent hands it to workers. Events a worker sends:
//   {"event":"begin","index":N,"input":PATH?}   a case starts (input: the replayed file)
//   {"event":"saved","case_file":PATH}           its case file is on disk (before the kernel runs)
//   {"event":"stage","stage":NAME}               a heartbeat before each kernel call
//   {"event":"result","result":{...}}            case_result_json of the case
//   {"event":"skipped","why":TEXT}               the kernel cannot run here
//   {"event":"restart"}                          the worker stops: its CUDA context is lost
//   {"event":"error","message":TEXT}             bad usage or input (the command exits 2)
//   {"event":"done"}                             all work done
struct WorkerJob {
  std::string kernel, origin;
  std::vector<std::string> argv;  // the worker's command line, without the inputs
  std::vector<std::string> inputs;  // replay: the inputs, passed as "--input PATH" each
  double timeout_s = 30;   // longest silence during a case
  double startup_s = 120;  // longest silence before the first case (CUDA start-up)
  std::optional<uint64_t> seed;  // for failure text
};

// Bad usage or input reported by a worker (the command exits 2).
class WorkerUsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs the job in as many workers as it takes (a crash or a lost context in replay restarts one
// for the inputs left) and adds every case up. on_event sees each event (progress display) and
// each crash/timeout record made here (as a "result" event).
KernelReport supervise_worker(const WorkerJob& job, const std::function<void(const nlohmann::json&)>& on_event);

// Absolute path of the running executable (/proc/self/exe), for starting workers.
std::string self_executable();

}  // namespace nvfp4
