// The typed protocol between the runner (parent) and a kernel's process (worker): messages are
// C++ structs, sent as length-prefixed CBOR frames over a socket. The worker only reports what
// it observed; every verdict is decided by the parent, so nothing the kernel writes into the
// channel can pass a case it did not compute.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "harness/process/kernel_call.h"

namespace nvfp4 {

// A kernel as the parent knows it: its declared info (copied), where it came from and whether it
// can run on this machine. The parent never holds a plugin's code.
struct KernelDesc {
  std::string name, origin, description;  // description: a mutant's one line, else ""
  nvfp4_kernel_info info{};               // info.name is not kept (use `name`)
  bool runnable = true;
  std::string why_not;
  bool is_cuda() const { return info.memory == NVFP4_MEMORY_CUDA; }
  bool supports_op(uint32_t op) const { return (info.ops >> op) & 1u; }
  bool supports_layout(uint32_t layout) const { return (info.sf_layouts >> layout) & 1u; }
};
KernelDesc describe_kernel(const Kernel& k);  // runnable/why_not from kernel_runnable()

// One call the parent wants made, and the return code it expects.
struct PlannedCall {
  CallSpec spec;
  int expected_rc = NVFP4_OK;
};

// worker -> parent, first: the kernels it loaded (one for `worker --kernel`, all for `--list`),
// or why it could not load them.
struct ReadyMsg {
  std::vector<KernelDesc> kernels;
  std::string error;  // not empty: loading failed (bad plugin, unknown kernel)
};
// parent -> worker: run these calls of one case.
struct RunCaseMsg {
  int64_t case_id = 0;
  CaseData data;
  std::vector<CallSpec> plan;  // the return codes the parent expects stay with the parent
};
// worker -> parent: call `index` of case `case_id` starts now (the watchdog's heartbeat).
struct CallStartedMsg {
  int64_t case_id = 0, index = 0;
};
// worker -> parent: what call `index` of case `case_id` left behind. A case's calls stop after
// one that ended other than `returned`.
struct CallDoneMsg {
  int64_t case_id = 0, index = 0;
  CallObservation observation;
};
// parent -> worker: end.
struct QuitMsg {};

using WorkerMessage = std::variant<ReadyMsg, RunCaseMsg, CallStartedMsg, CallDoneMsg, QuitMsg>;

// Frames: the 4 bytes "NVF4", an 8-byte little-endian length, then CBOR (a case and its stale
// data together can pass 4 GiB). The mark makes bytes that
// someone else wrote into the channel show at their first byte, instead of as a length the
// parent would wait on. Bad input throws ProtocolError.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
std::vector<uint8_t> encode_message(const WorkerMessage& m);
WorkerMessage decode_message(const uint8_t* data, size_t size);  // one frame's payload
// Largest frame accepted: the data of the largest case (kMaxCaseBytes) twice (the stale data)
// and some.
constexpr uint64_t kMaxFrameBytes = (uint64_t(1) << 33) + (uint64_t(1) << 20);
constexpr size_t kFrameHeaderBytes = 12;

// Blocking send of one frame on fd (throws ProtocolError when the peer is gone).
void send_message(int fd, const WorkerMessage& m);
// Blocking receive (the worker's side; the parent polls with a deadline instead).
WorkerMessage receive_message(int fd);

constexpr uint8_t kFrameMark[4] = {'N', 'V', 'F', '4'};

// Incremental frame reader for the parent: feed bytes, take complete messages.
class FrameReader {
 public:
  void feed(const uint8_t* data, size_t size);
  // A complete message if one is buffered; throws ProtocolError for bytes that cannot begin a
  // frame, a frame longer than the limit, or a malformed one.
  std::optional<WorkerMessage> next();
  // No buffered byte is waiting (after the last frame the parent asked for, anything buffered was
  // written by someone else).
  bool empty() const { return start_ == buffer_.size(); }
  // The longest frame the parent can be sent now (what it asked for bounds it); kMaxFrameBytes by default.
  void set_limit(uint64_t bytes) { limit_ = bytes; }

 private:
  std::vector<uint8_t> buffer_;
  size_t start_ = 0;
  uint64_t limit_ = kMaxFrameBytes;
};

}  // namespace nvfp4
