// Guarded buffers in a kernel's memory (host or CUDA) and the stream the runner orders work on.
// Every buffer sits between two guard regions filled with a known pattern, checked after each
// run; host buffers also sit between PROT_NONE pages so a write far out of bounds faults at once.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/process/tensor_rotation.h"

namespace nvfp4 {

// A failure of the memory or the stream rather than of the kernel's arithmetic: a CUDA error
// (named with cudaGetErrorName), or a device that did not finish in time.
class DeviceError : public std::runtime_error {
 public:
  // out_of_memory: the suite's own device or pinned memory for a buffer could not be had (after
  // its pooled blocks went back); not the kernel's doing, and the context is still good.
  enum class Kind : uint8_t { cuda_error, hang, out_of_memory };
  DeviceError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  bool hung() const { return kind_ == Kind::hang; }
  bool out_of_memory() const { return kind_ == Kind::out_of_memory; }

 private:
  Kind kind_;
};

// The repeating byte pattern of a guard region. Scale buffers use NaN scale bytes (0x7F, 0xFF),
// so a kernel that READS past the end of its scales also produces NaN and fails the oracle.
enum class GuardPattern { bytes, nan_scales, nan_fp16 };

// What check_guards found: the first damaged byte and how many bytes differ.
struct GuardDamage {
  bool intact = true;
  bool before = false;     // in the region before the data (else after)
  int64_t offset = 0;      // of the first damaged byte, relative to the data's start
  uint8_t expected = 0, actual = 0;
  int64_t damaged_bytes = 0;
  std::string describe(const std::string& buffer_name) const;
  // Counts one damaged byte, remembering the first.
  void record(bool in_before, int64_t at, uint8_t want, uint8_t got);
};

// Bytes of each guard region (before and after the data).
constexpr int64_t kGuardBytes = 4096;

// Buffers that share one block (a CUDA call's small buffers in an arena, a host call's buffers
// past its fenced ones): each region is both guards and the data, at 512-byte steps, and a block
// holds up to kSharedBlockBytes of them.
constexpr int64_t kSharedBlockBytes = int64_t(64) << 20;
constexpr int64_t shared_region_bytes(int64_t bytes) { return (2 * kGuardBytes + bytes + 511) / 512 * 512; }

// What comparing a buffer on the device found (CUDA inputs that keep a device copy): its guards
// as staged_guard_damage reports them, and the data's bytes that are no longer what was uploaded
// (how many, the first's offset, what it was and is).
struct DeviceComparison {
  GuardDamage guards;
  int64_t changed = 0, first = -1;
  uint8_t was = 0, now = 0;
};

// Buffers come from a process-wide pool: a case's buffers go back to it when the case ends and
// serve the next case of the same sizes (allocating pinned and device memory, or mapping fenced
// pages, costs more than a small case's whole check).
class GuardedBuffer {
 public:
  virtual ~GuardedBuffer() = default;
  // What the kernel is handed (a host or a device pointer).
  virtual uint8_t* data() = 0;
  int64_t size() const { return size_; }
  // Writes size() bytes and fresh guards, ordered on the memory's stream (for CUDA, through
  // pinned staging memory, so the copy really is asynchronous): fill(dst) writes the bytes to dst
  // (the buffer itself, or its staging copy); upload(src) copies them from src.
  virtual void upload_from(const std::function<void(uint8_t* dst)>& fill) = 0;
  void upload(const uint8_t* src) {
    upload_from([&](uint8_t* dst) {
      if (size_ > 0) std::memcpy(dst, src, static_cast<size_t>(size_));
    });
  }
  // Copies the whole region (guards and data) to the host copy, ordered on the memory's stream;
  // KernelMemory::synchronize then waits for every buffer's fetch at once. Host buffers need none.
  virtual void fetch_async() {}
  // The data and guards as last fetched (host buffers: as they are now).
  virtual const uint8_t* staged_data() const = 0;
  GuardDamage staged_guard_damage() const;
  // fetch, wait, then the data / the guards (one buffer at a time: tests and simple callers).
  std::vector<uint8_t> download(double timeout_s);
  GuardDamage check_guards(double timeout_s);
  // Host buffers: the data and the guard after it become read-only (or writable again), so a
  // kernel that writes an input faults at once; an upload writes through a second, writable
  // mapping of the same memory (where memory files can be made; else it makes the buffer
  // writable first), so the input stays read-only. A new buffer may come read-only from the pool:
  // whoever hands it to a kernel to write says set_read_only(false) first.
  // Device buffers cannot be protected: no-op.
  virtual void set_read_only(bool) {}

  // An input's buffer: CUDA buffers of kDeviceCopyBytes or more then keep, with every upload, a
  // copy of the region (guards and data) on the device, so that restore() writes the same bytes
  // again without the host and compare_async() checks them there (a 2 GiB input is not fetched
  // back over the bus three times a case). Host buffers and small ones: no-op.
  virtual void keep_device_copy() {}
  // Writes the region as last uploaded again, ordered on the stream; false (nothing done) where
  // the buffer keeps no copy.
  virtual bool restore() { return false; }
  // Writes the region as last uploaded again with its data moved as r says (the guards as they
  // were), ordered on the stream, and keeps that as the copy: the next upload of the same tensor
  // moved, made on the device. False (nothing done) where the buffer keeps no copy or r does not
  // move size() bytes.
  virtual bool upload_rotated(const TensorRotation& /*r*/) { return false; }
  // Compares the region with the copy on the device, ordered on the stream, instead of a fetch;
  // false (nothing done) where the buffer keeps no copy. After KernelMemory::synchronize,
  // compared() gives what it found (nullopt where the buffer was not compared on the device).
  virtual bool compare_async() { return false; }
  virtual std::optional<DeviceComparison> compared(double /*timeout_s*/) { return std::nullopt; }

 protected:
  GuardedBuffer(int64_t size, GuardPattern pattern) : size_(size), pattern_(pattern) {}
  // The staged guard regions: kGuardBytes before the data, after_bytes() after it.
  virtual const uint8_t* staged_region() const = 0;  // the first guard byte
  virtual int64_t after_bytes() const { return kGuardBytes; }
  virtual void wait(double timeout_s) = 0;           // for this buffer's fetch
  int64_t size_;
  GuardPattern pattern_;
};

// One kernel's memory and the stream its work is ordered on. Creating a CUDA memory never happens
// in the parent process of `nvfp4check run` (a worker owns the CUDA context).
class KernelMemory {
 public:
  virtual ~KernelMemory() = default;
  // NVFP4_MEMORY_HOST or NVFP4_MEMORY_CUDA; throws DeviceError for CUDA when the build has no
  // CUDA or the device cannot be used, std::invalid_argument for an unknown memory kind.
  static std::unique_ptr<KernelMemory> create(uint32_t memory);

  virtual std::unique_ptr<GuardedBuffer> allocate(int64_t bytes, GuardPattern pattern) = 0;
  // A call's buffers at once, in the order asked (bytes > 0 each). CUDA places the small ones
  // side by side in one device region with one staging twin, each still between its own guards,
  // so their uploads and fetches travel as one copy: a grouped call's hundreds of tensors cost
  // hundreds of copies otherwise, each a few microseconds of the runtime's time and the bus's.
  // Buffers asked for one after another that are uploaded or fetched together therefore should
  // be asked for in that order.
  struct Request {
    int64_t bytes;
    GuardPattern pattern;
  };
  virtual std::vector<std::unique_ptr<GuardedBuffer>> allocate_all(const std::vector<Request>& requests);
  // The stream handed to the kernel (a non-blocking cudaStream_t, or NULL for host memory).
  virtual void* stream() = 0;
  // CUDA: makes the stream wait, before the uploads that follow, until release_stream() (the
  // kernel call has returned) or at most a few milliseconds (a kernel that synchronises its
  // stream inside the call must not deadlock), so a kernel that works on any other stream runs
  // before its inputs are there and reads stale data.
  virtual void hold_stream() {}
  virtual void release_stream() {}
  // CUDA: picks up launch errors of the kernel call (cudaGetLastError). Throws DeviceError.
  virtual void after_call() {}
  // Waits for the stream, or throws DeviceError (Kind::hang) after timeout_s.
  virtual void synchronize(double timeout_s) = 0;
  // CUDA: the uploads and fetches of buffers from allocate_all are queued and put on the stream,
  // joined where they are adjacent, before anything else the memory puts there and before any
  // wait. Work of the caller's own on the stream (a kernel's call) comes after flush().
  virtual void flush() {}
  // CUDA: waits for the whole device and names any error, so work a kernel left on another
  // stream is finished (and its errors seen) before buffers are read again or freed.
  virtual void synchronize_device(double timeout_s) {}
};

// Whether CUDA memory can be created here; when not, *why says why. Initialises CUDA.
bool cuda_memory_available(std::string* why);

// The host buffer of KernelMemory::create(NVFP4_MEMORY_HOST) (also used directly by tests).
std::unique_ptr<KernelMemory> make_host_memory();
#if defined(NVFP4_HAVE_CUDA)
std::unique_ptr<KernelMemory> make_cuda_memory();  // device_buffers_cuda.cc
#endif

// The guard byte at position `index` of a guard region (shared by host and CUDA buffers).
uint8_t guard_byte(GuardPattern pattern, int64_t index);
// Fills count bytes with the pattern from its start.
void write_guard_pattern(uint8_t* at, int64_t count, GuardPattern pattern);

}  // namespace nvfp4
