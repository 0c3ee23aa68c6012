// Kernel processes. The runner never loads a plugin or calls a kernel itself: a worker process
// (this program's hidden `worker` command, or Python's nvfp4check worker) loads it, calls it and
// sends back what it observed over a socket; the parent watches with a watchdog, kills the
// worker's whole process group when it hangs, crashes or talks nonsense, and starts a new one
// for the next case. Plugins are listed the same way, so a hostile constructor can only fail
// its own listing.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/process/executor.h"
#include "harness/process/warmup.h"

namespace nvfp4 {

// The file descriptor of the channel in a worker process.
constexpr int kWorkerChannelFd = 3;

// At most `slots` kernel processes of one kernel's lanes starting at once. A CUDA context is
// made under the driver's locks: on an H100 one process alone was ready in 0.16 s, and eight
// started together were each ready after 0.83 s, sixteen after 1.72 s, all of them near the end
// and none sooner, with MPS or without (bench/THROUGHPUT.md, 7 December 2026). Let in a few at a
// time, the first lanes check cases while the others start. A start that fails (a plugin that
// hangs, crashes or cannot load) opens the gate for good: the lanes of a kernel that cannot start
// must not each wait for the one before them to time out.
class StartGate {
 public:
  explicit StartGate(int slots) : free_(slots), open_(slots <= 0) {}
  StartGate(const StartGate&) = delete;
  StartGate& operator=(const StartGate&) = delete;
  // Waits for a slot (none once open); the slot is given back when the returned pass ends.
  class Pass {
   public:
    explicit Pass(StartGate* gate) : gate_(gate) {}
    Pass(Pass&& o) noexcept : gate_(o.gate_) { o.gate_ = nullptr; }
    Pass& operator=(Pass&&) = delete;
    ~Pass() {
      if (gate_) gate_->leave();
    }

   private:
    StartGate* gate_;
  };
  Pass enter();
  void open();
  bool is_open();
  // NVFP4_START_SLOTS when set (0: no gate), else 2 a GPU.
  static int default_slots(int gpus);

 private:
  void leave();
  std::mutex mutex_;
  std::condition_variable cv_;
  int free_;
  bool open_;
};

// How to start a worker: its command line and extra environment (e.g. CUDA_VISIBLE_DEVICES).
struct WorkerCommand {
  std::string kernel;  // for messages
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  // > 0: a kernel that compiles on its first call (Python's): each process makes one warm-up
  // call (harness/process/warmup.h) within this many seconds before its first case, its start may take
  // as long, and a process stopped while starting or warming up gets SIGTERM first (so the
  // compiler's cache is left unlocked), SIGKILL after kStopGraceSeconds. 0: none (ABI plugins
  // are compiled ahead; their first call is watched like any other).
  double warmup_timeout_s = 0;
  // Shared by the lanes of a kernel whose processes make CUDA contexts (null: no gate).
  std::shared_ptr<StartGate> start_gate;
};
constexpr double kStopGraceSeconds = 5;

// This process's environment with `set` added, each replacing any variable of its name, as the
// NULL-terminated array execve takes (valid as long as this object): built before a fork, since
// the child may call nothing but async-signal-safe functions before it execs.
class ChildEnvironment {
 public:
  explicit ChildEnvironment(const std::vector<std::pair<std::string, std::string>>& set);
  ChildEnvironment(const ChildEnvironment&) = delete;
  ChildEnvironment& operator=(const ChildEnvironment&) = delete;
  char** envp() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// The path of `program` in one of PATH's folders (/usr/bin:/bin without PATH; empty entries are
// skipped), "" when none holds it executable: execve does not search.
std::string find_on_path(const std::string& program);

// The nvfp4check program whose hidden `worker` command serves kernels: env NVFP4CHECK_PROGRAM
// when set (tests, the Python package), else the running executable.
std::string worker_program();

// The worker command of this program for one kernel (`nvfp4check worker --kernel NAME ...`).
WorkerCommand kernel_worker_command(const std::string& kernel, const std::vector<std::string>& plugins,
                                    double timeout_s);

// Calls a kernel in a worker process. The worker starts at the first use and again after one
// was lost; timeout_s bounds each call, startup_s the worker's start (CUDA initialises there).
class WorkerExecutor final : public Executor {
 public:
  WorkerExecutor(WorkerCommand command, double timeout_s, double startup_s = 120);
  ~WorkerExecutor() override;
  WorkerExecutor(const WorkerExecutor&) = delete;
  WorkerExecutor& operator=(const WorkerExecutor&) = delete;

  // Throws WorkerStartError when the worker cannot load the kernel.
  const KernelDesc& kernel() override;
  std::vector<CallObservation> run_case(const CaseData& data, const std::vector<PlannedCall>& plan) override;
  // Workers started so far (a crash, a timeout or a lost context costs one).
  int starts() const { return starts_; }

  // Warm-up (command.warmup_timeout_s > 0): makes the warm-up call now when this process has not
  // made it (run_case makes it first otherwise, e.g. after a restart) and returns its seconds.
  // A failed warm-up is kept and becomes the next case's first call. Never throws.
  bool warms_up() const { return command_.warmup_timeout_s > 0; }
  double warm_up();
  const std::optional<CallObservation>& warmup_failure() const { return warmup_.kept(); }
  void set_warmup_failure(CallObservation o) { warmup_.keep(std::move(o)); }

 private:
  void start();          // start_process() through the command's start gate, if it has one
  void start_process();  // the process, up to its kernel's description (throws WorkerStartError)
  void stop();  // kills the process group and reaps
  std::vector<CallObservation> run_calls(const CaseData& data, const std::vector<PlannedCall>& plan);
  // run_calls' halves: the case's frame sent with the watchdog on (what ended the case when it
  // could not be), then each call's answer in turn.
  std::optional<CallObservation> send_frame(const std::vector<uint8_t>& frame);
  std::vector<CallObservation> receive_calls(int64_t id, size_t calls, bool started_first);
  // The next message within the deadline; nullopt with *end set when the worker is gone, timed
  // out or sent garbage.
  std::optional<WorkerMessage> receive(double timeout_s, CallObservation* end);

  WorkerCommand command_;
  double timeout_s_, startup_s_;
  pid_t pid_ = -1;
  bool dead_ = false;  // reaped: pid_ names no process any more
  int dead_status_ = 0;
  const Problem* calling_ = nullptr;  // the case whose calls are being received (names a faulting input)
  int fd_ = -1;
  int starts_ = 0;
  int64_t next_case_ = 0;
  bool have_desc_ = false;
  bool warm_ = false;       // this process made its warm-up call
  bool gentle_ = false;     // starting or warming up: stop() sends SIGTERM first
  WarmupFailure warmup_;
  KernelDesc desc_;
  FrameReader frames_;  // what the worker sent that is not taken yet
  // The memory files of this process's tensors (worker_protocol.h): the cases' inputs, written
  // here, and its outputs, read here.
  SharedFile shared_in_, shared_out_;
};

// Warms the first lane up, on this thread; the others warm up when their cases begin, loading
// from the compiler's cache. `tick` is called about once a second with the seconds spent so far
// (the progress line). Returns the first lane's warm-up seconds (the compile). A failed warm-up
// is handed to every lane, so none of them compiles again.
double warm_up_lanes(const std::vector<WorkerExecutor*>& lanes, const std::function<void(double)>& tick);

// A worker that could not start: missing plugin symbol, unknown kernel, a plugin whose loading
// crashed, hung or exited. what() says which.
class WorkerStartError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every kernel of the built-ins and these plugins, as a child process that loads them reports
// it (throws WorkerStartError naming the plugin when the child fails, dies, hangs or exits).
std::vector<KernelDesc> list_kernels(const std::vector<std::string>& plugins, double timeout_s = 60);

// The worker's side (the `worker` command): `list` reports every kernel and ends; otherwise the
// named kernel is served: Ready, then each RunCase's calls until Quit or the channel closes.
struct WorkerArgs {
  bool list = false;
  std::string kernel;
  std::vector<std::string> plugins;
  double timeout_s = kDefaultCallTimeout;
};
int worker_main(const WorkerArgs& args);
// Serves one kernel on the channel fd (worker_main's loop; Python's worker calls it too).
int serve_kernel(int fd, const Kernel& kernel, double timeout_s);

}  // namespace nvfp4
