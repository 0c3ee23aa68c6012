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
  // A runnable CUDA quantizer or packed grouped kernel: the device's free bytes when its process
  // described it (what the schedule's huge tier may take); 0 otherwise.
  uint64_t device_free_bytes = 0;
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

// The version of these messages and of the memory files beside them, raised with every change to
// either. A kernel's process from another build (a Python package whose libnvfp4check_capi.so is
// older than the nvfp4check that runs it) is refused at its start, by name, instead of failing
// cases by messages it misreads. 3: the files are sealed against shrinking (a version-2 worker
// empties a large one by truncating it, which the seal refuses). 4: a call can end in
// suite_memory, and a case the worker could not read is answered as case kUnreadCase.
constexpr int64_t kProtocolVersion = 4;
// The case id of the answer to a case the worker ran out of memory reading (it never learned the
// id): accepted only as the first answer to a case, and only ending in suite_memory.
constexpr int64_t kUnreadCase = -1;
// Why a worker speaking version `theirs` is not run (names what to reinstall); theirs <= 0: a
// first message this build cannot read, which another build's worker would send.
std::string other_protocol(int64_t theirs);

// worker -> parent, first: the kernels it loaded (one for `worker --kernel`, all for `--list`),
// or why it could not load them.
struct ReadyMsg {
  std::vector<KernelDesc> kernels;
  std::string error;  // not empty: loading failed (bad plugin, unknown kernel)
  int64_t protocol = kProtocolVersion;
};
// parent -> worker: run these calls of one case.
struct RunCaseMsg {
  int64_t case_id = 0;
  CaseData data;
  std::vector<CallSpec> plan;  // the return codes the parent expects stay with the parent
  // Whether the worker says when call 0 starts (CallStartedMsg): asked for a case whose bytes
  // take a while to receive, so that the watchdog gives the receiving its own allowance. A small
  // case's call 0 is timed from the message, and every later call from its predecessor's answer:
  // each message wakes the other process, and a small case spent 43% of its time in them.
  bool started_first = true;
};
// worker -> parent: call 0 of case `case_id` starts now (the watchdog's heartbeat; only when the
// case asked for it).
struct CallStartedMsg {
  int64_t case_id = 0, index = 0;
};
// worker -> parent: what call `index` of case `case_id` left behind. A case's calls stop after
// one that ended other than `returned`; otherwise call index + 1 starts at once.
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

// Byte strings longer than this (a tensor, a call's output words) travel beside the frame, in a
// memory file (memfd) both processes hold: the frame carries only where they lie. Below it the
// frame carries them (a tiny case's tensors: one write instead of a write each). A tensor in
// the frame is copied several times through CBOR, byte by byte when decoded: a small GEMV's 32 KiB
// A cost more there than a write and a read of the file (at 64 KiB here, 128x1x512 checked 8% fewer
// cases a second on two cores), a 4 GiB BF16 X would be copied five times. Below 4 KiB the writes
// cost more than the copies (at 512 bytes, 32x16x128 GEMMs checked 7% fewer).
constexpr size_t kSharedBytes = size_t(1) << 12;
// A memory file keeps up to this many bytes between messages (its pages are reused by the next
// case); a larger message's bytes are given back once read.
constexpr uint64_t kKeptSharedBytes = uint64_t(64) << 20;
// From this size a tensor is read through a mapping of the file (one copy, no zeroing first).
constexpr uint64_t kMappedReadBytes = uint64_t(1) << 20;
// The worker's ends of the two memory files: the parent writes the cases' tensors into the first,
// the worker its outputs into the second (each side reads only what the other writes).
constexpr int kWorkerInputFd = 4, kWorkerOutputFd = 5;

// One side's access to a memory file, and at most `limit` bytes taken from it per message (what
// the parent asked for bounds it, as it bounds a frame). The parent makes both files sealed
// against shrinking (F_SEAL_SHRINK, then F_SEAL_SEAL: no other seal can be added), so a mapping
// of the file up to a size once seen is never past its end: the parent may map a file its worker
// holds without a SIGBUS from a worker that truncates it (it cannot), and a short read is a
// protocol error. Each side then writes and reads through mappings kept from case to case: a
// medium case's megabytes cost a copy each way, where pwrite walked the page cache and a read
// mapped, populated and unmapped them (2 MiB: 153 and 723 us against 83 and 58 on the 2-core
// machine). A file without the seal (a kernel older than memfd sealing) goes by pwrite and pread.
class SharedFile {
 public:
  SharedFile() = default;
  explicit SharedFile(int fd) : fd_(fd) {}
  // A new anonymous memory file (the parent's side), sealed against shrinking where the kernel
  // can; throws ProtocolError when none can be made.
  static SharedFile create(const char* name);
  SharedFile(SharedFile&& o) noexcept { take(o); }
  SharedFile& operator=(SharedFile&& o) noexcept;
  ~SharedFile();
  bool open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Empties the file (past kKeptSharedBytes its memory is given back); the next append writes at offset 0.
  void reset();
  // Writes the bytes at the end and returns their offset.
  uint64_t append(const uint8_t* data, size_t size);
  // The same, but false (nothing kept) where the process's file size limit (ulimit -f, with
  // SIGXFSZ ignored) refuses them: the caller carries them in the frame instead.
  bool try_append(const uint8_t* data, size_t size, uint64_t* at);
  // Bytes written since the last reset.
  uint64_t size() const { return end_; }
  // The bytes [offset, offset + size); throws ProtocolError past the file's end or the limit.
  std::vector<uint8_t> read(uint64_t offset, uint64_t size, const std::string& at) const;
  void set_limit(uint64_t bytes) { limit_ = bytes; }
  uint64_t limit() const { return limit_; }
  // Whether the file is sealed against shrinking, so that it is mapped (else pwrite and pread).
  bool mappable() const;

 private:
  void take(SharedFile& o) noexcept;
  void unmap() const;
  // A mapping of at least [0, bytes) of the file (read-write for the writer); false where none
  // can be had (unsealed, or mmap failed): the caller goes by pwrite or pread.
  bool map(uint64_t bytes, bool writable) const;

  int fd_ = -1;
  uint64_t end_ = 0;
  uint64_t limit_ = UINT64_MAX;
  mutable int sealed_ = -1;  // mappable(), once asked: -1 not yet
  mutable uint8_t* map_ = nullptr;
  mutable uint64_t mapped_ = 0;
  mutable bool map_writable_ = false;
};

// shared: where byte strings past kSharedBytes go (null or not open: into the frame).
std::vector<uint8_t> encode_message(const WorkerMessage& m, SharedFile* shared = nullptr);
// The frame of RunCaseMsg{case_id, data, plan, started_first} without copying data into a
// message; started_first where the frame and its bytes in `shared` pass kStartedFirstBytes
// (returned through *started_first when given).
std::vector<uint8_t> encode_run_case(int64_t case_id, const CaseData& data, const std::vector<CallSpec>& plan,
                                     SharedFile* shared = nullptr, bool* started_first = nullptr);
constexpr uint64_t kStartedFirstBytes = uint64_t(8) << 20;
// One frame's payload; shared: where its tensors beside the frame are read from (null: a frame
// naming one is malformed), at most shared->limit() bytes of them.
WorkerMessage decode_message(const uint8_t* data, size_t size, const SharedFile* shared = nullptr);
// Largest frame accepted: the data of the largest case (kMaxCaseBytes) twice (the stale data)
// and some.
constexpr uint64_t kMaxFrameBytes = (uint64_t(1) << 33) + (uint64_t(1) << 20);
constexpr size_t kFrameHeaderBytes = 12;

// Blocking send of one frame on fd (throws ProtocolError when the peer is gone).
void send_message(int fd, const WorkerMessage& m, SharedFile* shared = nullptr);
// Blocking receive (the worker's side; the parent polls with a deadline instead).
WorkerMessage receive_message(int fd, const SharedFile* shared = nullptr);

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
  // The longest frame the parent can be sent now (what it asked for bounds it); kMaxFrameBytes by
  // default. The same bound holds for the bytes one message names in the shared file.
  void set_limit(uint64_t bytes) { limit_ = bytes; }
  // Where frames' tensors beside them are read from (null: a frame naming one is malformed).
  void set_shared(SharedFile* shared) { shared_ = shared; }

 private:
  std::vector<uint8_t> buffer_;
  size_t start_ = 0;
  uint64_t limit_ = kMaxFrameBytes;
  SharedFile* shared_ = nullptr;
};

}  // namespace nvfp4
