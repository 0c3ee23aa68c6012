// CUDA guarded buffers and the runner's own non-blocking stream, through the CUDA runtime API
// (plain C++: the device copies' kernels are in device_copy.cu). Built only with NVFP4_CUDA.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "harness/process/device_buffers.h"
#include "harness/process/device_copy.h"

namespace nvfp4 {
namespace {

using Clock = std::chrono::steady_clock;

// Set once a kernel hung or the context broke: from then on nothing is freed (cudaFree waits for
// the device, which may never finish), the process only reports and ends.
bool g_device_unusable = false;

[[noreturn]] void throw_cuda(cudaError_t e, const std::string& what) {
  g_device_unusable = true;
  throw DeviceError(DeviceError::Kind::cuda_error,
                    fmt::format("{}: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_cuda(e, what);
}

// Polls instead of cudaStreamSynchronize so a hung kernel becomes a "timeout" we can report.
// A case waits here several times a call for work of tens to hundreds of microseconds (a copy, a
// kernel): the first 200 us yield instead of sleeping, then each sleep is an eighth of the time
// waited so far (20 us to a millisecond) with the thread's timer slack at 1 us, so a wait ends at
// most about an eighth late and a long kernel costs no core. Doubling sleeps, each lasting the
// default 50 us slack past what it asks, overshoot a kernel of half a millisecond by up to 40%
// (gemv_naive's medium GEMV checks 2-3% more cases a second on an H100 this way).
void wait_stream(cudaStream_t stream, double timeout_s) {
  thread_local const bool slack_set = prctl(PR_SET_TIMERSLACK, 1000UL) == 0;
  (void)slack_set;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  const auto spin_until = start + std::chrono::microseconds(200);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) throw_cuda(e, "while waiting for the kernel's work on the runner's stream");
    const auto now = Clock::now();
    if (now > deadline) {
      g_device_unusable = true;
      throw DeviceError(DeviceError::Kind::hang, fmt::format("the work on the runner's stream did not finish "
                                               "within {} s (a hung kernel?)", timeout_s));
    }
    if (now < spin_until) {
      sched_yield();
      continue;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(now - start).count();
    usleep(static_cast<useconds_t>(std::clamp<int64_t>(waited / 8, 20, 1000)));
  }
}

// Device regions and their pinned staging copies, kept for reuse by capacity (powers of two).
struct CudaBlock {
  uint8_t* device = nullptr;
  uint8_t* staging = nullptr;
  int64_t capacity = 0;
};
// Kept by capacity and by whether they have staging (an input's device copy has none), up to
// kCudaPoolLimit bytes of each kind.
std::mutex g_cuda_pool_mutex;
std::multimap<std::pair<int64_t, bool>, CudaBlock> g_cuda_pool;
int64_t g_cuda_pool_bytes[2] = {0, 0};
constexpr int64_t kCudaPoolLimit = int64_t(2) << 30;

// Powers of two from 64 KiB, eighths of one past 64 MiB: a 2.2 GiB tensor then takes 2.25 GiB of
// device and pinned memory, not 4 (pinning costs time in proportion).
int64_t block_capacity(int64_t bytes) {
  int64_t c = int64_t(1) << 16;
  while (c < bytes) c <<= 1;
  if (c <= (int64_t(1) << 26)) return c;
  const int64_t eighth = c / 16;  // an eighth of the power of two below
  return (bytes + eighth - 1) / eighth * eighth;
}

// A pooled block of this capacity and kind into *out; false where the pool has none.
bool take_pooled(int64_t capacity, bool staged, CudaBlock* out) {
  std::lock_guard<std::mutex> lock(g_cuda_pool_mutex);
  auto it = g_cuda_pool.find({capacity, staged});
  if (it == g_cuda_pool.end()) return false;
  *out = it->second;
  g_cuda_pool.erase(it);
  g_cuda_pool_bytes[staged] -= capacity;
  return true;
}

// A block's memory back to the device and the host.
void free_block(const CudaBlock& b) {
  cudaFree(b.device);
  if (b.staging) cudaFreeHost(b.staging);
}

// Every pooled block back to the device and the host; false where the pool was empty.
bool empty_pool() {
  std::lock_guard<std::mutex> lock(g_cuda_pool_mutex);
  if (g_cuda_pool.empty() || g_device_unusable) return false;
  for (const auto& [key, b] : g_cuda_pool) free_block(b);
  g_cuda_pool.clear();
  g_cuda_pool_bytes[0] = g_cuda_pool_bytes[1] = 0;
  return true;
}

// An allocation of the suite's own memory; one that finds none tries again once with the pool's
// blocks given back. Still none is the suite's shortage (Kind::out_of_memory: other lanes or a
// kernel that keeps memory hold it), never a fault of the call's kernel; any other error is.
template <class Allocate>
void allocate_own(Allocate&& allocate, const char* what, int64_t capacity) {
  cudaError_t e = allocate();
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
    if (empty_pool()) e = allocate();
  }
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw DeviceError(DeviceError::Kind::out_of_memory,
                      fmt::format("{} of {} bytes: {} ({})", what, capacity, cudaGetErrorName(e), cudaGetErrorString(e)));
  }
  check_cuda(e, what);
}

CudaBlock take_block(int64_t bytes) {
  CudaBlock b;
  b.capacity = block_capacity(bytes);
  if (take_pooled(b.capacity, true, &b)) return b;
  const auto size = static_cast<size_t>(b.capacity);
  allocate_own([&] { return cudaMalloc(reinterpret_cast<void**>(&b.device), size); }, "cudaMalloc of a guarded buffer",
               b.capacity);
  try {
    allocate_own([&] { return cudaMallocHost(reinterpret_cast<void**>(&b.staging), size); },
                 "cudaMallocHost of a staging buffer", b.capacity);
  } catch (...) {
    if (!g_device_unusable) cudaFree(b.device);
    throw;
  }
  return b;
}

// An input's device copy of `bytes` (device memory only), or a block without memory where the
// device has no room for one (the input is then fetched and compared on the host, as every input
// was before copies).
CudaBlock take_copy(int64_t bytes) {
  CudaBlock b;
  b.capacity = block_capacity(bytes);
  if (take_pooled(b.capacity, false, &b)) return b;
  if (cudaMalloc(reinterpret_cast<void**>(&b.device), static_cast<size_t>(b.capacity)) != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
    b.device = nullptr;
  }
  return b;
}

void give_block(const CudaBlock& b) {
  if (!b.device || g_device_unusable) return;  // nothing may be freed or reused once the context broke
  const bool staged = b.staging != nullptr;
  std::lock_guard<std::mutex> lock(g_cuda_pool_mutex);
  if (g_cuda_pool_bytes[staged] + b.capacity <= kCudaPoolLimit) {
    g_cuda_pool.emplace(std::make_pair(b.capacity, staged), b);
    g_cuda_pool_bytes[staged] += b.capacity;
  } else {
    free_block(b);
  }
}

// What device comparisons leave for the host: one slot per buffer that keeps a copy, in device
// memory (the kernel's counts) and pinned memory (their copy, and single bytes probed at the
// first difference), allocated once per memory.
struct CompareSlots {
  struct Host {
    device_copy::Zones zones;
    uint8_t probe[8];
  };
  static constexpr int kSlots = 4096;
  device_copy::Zones* device = nullptr;
  Host* host = nullptr;
  std::mutex mutex;
  std::vector<int> free;

  CompareSlots() {
    constexpr int64_t kDevice = sizeof(device_copy::Zones) * kSlots, kHost = sizeof(Host) * kSlots;
    allocate_own([&] { return cudaMalloc(reinterpret_cast<void**>(&device), kDevice); },
                 "cudaMalloc of the comparison slots", kDevice);
    try {
      allocate_own([&] { return cudaMallocHost(reinterpret_cast<void**>(&host), kHost); },
                   "cudaMallocHost of the comparison slots", kHost);
    } catch (...) {
      if (!g_device_unusable) cudaFree(device);
      throw;
    }
    for (int x = kSlots - 1; x >= 0; --x) free.push_back(x);
  }
  ~CompareSlots() {
    if (g_device_unusable) return;
    cudaFree(device);
    cudaFreeHost(host);
  }
  int take() {
    std::lock_guard<std::mutex> lock(mutex);
    if (free.empty()) return -1;
    const int x = free.back();
    free.pop_back();
    return x;
  }
  void give(int x) {
    std::lock_guard<std::mutex> lock(mutex);
    free.push_back(x);
  }
};

// Inputs of this size or more keep a device copy; a smaller one costs less to fetch and compare
// on the host than the comparison's launch and its wait. Smaller buffers asked for together share
// an arena.
constexpr int64_t kDeviceCopyBytes = int64_t(256) << 10;

// Copies between buffers and their staging twins, queued in order and put on the stream by
// flush(): a run of copies in one direction goes out sorted, and copies that continue each other
// on both sides (buffers side by side in an arena) as one. The memory's thread only, like the
// stream.
class PendingCopies {
 public:
  void add(uint8_t* dst, const uint8_t* src, int64_t bytes, cudaMemcpyKind kind) {
    copies_.push_back({dst, src, bytes, kind});
  }
  void flush(cudaStream_t stream) {
    if (copies_.empty()) return;
    for (size_t run = 0; run < copies_.size();) {
      size_t end = run + 1;
      while (end < copies_.size() && copies_[end].kind == copies_[run].kind) ++end;
      // Within a run the regions are distinct, so their order on the stream does not matter.
      std::sort(copies_.begin() + static_cast<std::ptrdiff_t>(run), copies_.begin() + static_cast<std::ptrdiff_t>(end),
                [](const Copy& a, const Copy& b) { return a.dst < b.dst; });
      for (size_t x = run; x < end;) {
        Copy joined = copies_[x];
        for (++x; x < end && copies_[x].dst == joined.dst + joined.bytes && copies_[x].src == joined.src + joined.bytes;
             ++x)
          joined.bytes += copies_[x].bytes;
        check_cuda(cudaMemcpyAsync(joined.dst, joined.src, static_cast<size_t>(joined.bytes), joined.kind, stream),
                   joined.kind == cudaMemcpyHostToDevice ? "cudaMemcpyAsync of buffers to the device"
                                                         : "cudaMemcpyAsync of buffers back to the host");
      }
      run = end;
    }
    copies_.clear();
  }

 private:
  struct Copy {
    uint8_t* dst;
    const uint8_t* src;
    int64_t bytes;
    cudaMemcpyKind kind;
  };
  std::vector<Copy> copies_;
};

// A pooled block shared by the buffers placed in it; back to the pool with the last of them.
struct SharedBlock {
  CudaBlock block;
  ~SharedBlock() { give_block(block); }
};

// [guard][data][guard]: at the start of a pooled device block of its own, or at its place in an
// arena shared with the call's other small buffers (the guard after then runs on to the next
// region, which starts 512-byte aligned, so no byte between two buffers goes unchecked). The
// pinned staging twin carries every upload and fetch, so copies are truly asynchronous and
// ordered on the stream; an arena's copies wait in `pending` for the memory's flush.
class CudaBuffer final : public GuardedBuffer {
 public:
  // A buffer with a block of its own.
  CudaBuffer(int64_t bytes, GuardPattern pattern, cudaStream_t stream, std::shared_ptr<CompareSlots> slots,
             std::shared_ptr<PendingCopies> pending)
      : GuardedBuffer(bytes, pattern),
        stream_(stream),
        total_(2 * kGuardBytes + bytes),
        block_(std::make_shared<SharedBlock>()),
        slots_(std::move(slots)),
        pending_(std::move(pending)) {
    block_->block = take_block(total_);
    device_ = block_->block.device;
    staging_ = block_->block.staging;
  }
  // A buffer at `offset` of an arena, `region` bytes long (its guards and padding included).
  CudaBuffer(int64_t bytes, GuardPattern pattern, cudaStream_t stream, std::shared_ptr<CompareSlots> slots,
             std::shared_ptr<PendingCopies> pending, std::shared_ptr<SharedBlock> arena, int64_t offset, int64_t region)
      : GuardedBuffer(bytes, pattern),
        stream_(stream),
        total_(region),
        block_(std::move(arena)),
        slots_(std::move(slots)),
        pending_(std::move(pending)),
        deferred_(true) {
    device_ = block_->block.device + offset;
    staging_ = block_->block.staging + offset;
  }
  ~CudaBuffer() override {
    give_block(copy_);
    if (slot_ >= 0) slots_->give(slot_);
  }

  uint8_t* data() override { return device_ + kGuardBytes; }

  void keep_device_copy() override { keeps_copy_ = !deferred_ && size_ >= kDeviceCopyBytes; }

  void upload_from(const std::function<void(uint8_t*)>& fill) override {
    copy_valid_ = compared_ = false;
    // The staging copy is not in flight here: every upload follows a wait on the stream.
    write_guard_pattern(staging_, kGuardBytes, pattern_);
    write_guard_pattern(staging_ + kGuardBytes + size_, after_bytes(), pattern_);
    fill(staging_ + kGuardBytes);
    if (deferred_) {
      pending_->add(device_, staging_, total_, cudaMemcpyHostToDevice);
      return;
    }
    pending_->flush(stream_);
    check_cuda(cudaMemcpyAsync(device_, staging_, static_cast<size_t>(total_), cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync of an input to the device");
    // Pinned staging memory is mapped into the device's address space (UVA), and the allocator
    // can place a large buffer's staging block right beside its device block, one block size
    // (2^32 bytes) away: a kernel whose 32-bit offset wraps past 2^31 bytes then lands at the same
    // offset of the staging copy and reads the right data over the bus. Once the copy is done,
    // and before anything after it on the stream, the staging data becomes guard bytes. (The
    // staging block outlives the host function: it is freed only after the stream is waited on,
    // and never once the device is unusable.)
    if (size_ >= kScrubBytes) {
      auto* job = new ScrubJob{staging_ + kGuardBytes, size_, pattern_};
      const cudaError_t e = cudaLaunchHostFunc(stream_, scrub_staging, job);
      if (e != cudaSuccess) {
        delete job;
        throw_cuda(e, "cudaLaunchHostFunc (scrubbing the staging copy)");
      }
    }
    if (keeps_copy_ && ensure_copy()) {
      check_cuda(device_copy::keep(device_, copy_.device, total_, salt_, stream_), "keeping the device copy of an input");
      copy_valid_ = true;
    }
  }

  bool restore() override {
    if (!copy_valid_) return false;
    compared_ = false;
    pending_->flush(stream_);
    check_cuda(device_copy::restore(device_, copy_.device, total_, salt_, stream_),
               "writing an input again from its device copy");
    return true;
  }

  bool upload_rotated(const TensorRotation& r) override {
    if (!copy_valid_ || r.bytes() != size_) return false;
    compared_ = false;
    pending_->flush(stream_);
    check_cuda(device_copy::rotate(device_, copy_.device, total_, kGuardBytes, r, salt_, stream_),
               "writing an input moved from its device copy");
    check_cuda(device_copy::keep(device_, copy_.device, total_, salt_, stream_), "keeping the device copy of an input");
    return true;
  }

  bool compare_async() override {
    if (!copy_valid_) return false;
    pending_->flush(stream_);
    check_cuda(device_copy::compare(device_, copy_.device, total_, kGuardBytes, kGuardBytes + size_, salt_,
                                    slots_->device + slot_, stream_),
               "comparing an input with its device copy");
    check_cuda(cudaMemcpyAsync(&slots_->host[slot_].zones, slots_->device + slot_, sizeof(device_copy::Zones),
                               cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync of a comparison's counts");
    compared_ = true;
    result_.reset();
    return true;
  }

  std::optional<DeviceComparison> compared(double timeout_s) override {
    if (!compared_) return std::nullopt;
    if (result_) return result_;
    const device_copy::Zones z = slots_->host[slot_].zones;
    DeviceComparison out;
    for (int zone = 0; zone < 3; ++zone) {
      if (z.count[zone] == 0) continue;
      // Rare (a kernel wrote where it must not): the first differing byte, now and as uploaded.
      const int64_t at = static_cast<int64_t>(~z.first_not[zone]);
      uint8_t* probe = slots_->host[slot_].probe;
      check_cuda(cudaMemcpyAsync(probe, device_ + at, 1, cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync of a changed byte");
      check_cuda(cudaMemcpyAsync(probe + 1, copy_.device + at, 1, cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync of a changed byte's copy");
      wait_stream(stream_, timeout_s);
      const uint8_t now = probe[0], was = static_cast<uint8_t>(probe[1] ^ device_copy::mask_byte(at, salt_));
      const auto count = static_cast<int64_t>(z.count[zone]);
      if (zone == 1) {
        out.changed = count;
        out.first = at - kGuardBytes;
        out.was = was;
        out.now = now;
        continue;
      }
      // The guard before first, as staged_guard_damage walks them.
      out.guards.record(zone == 0, at - kGuardBytes, was, now);
      out.guards.damaged_bytes += count - 1;
    }
    result_ = out;
    return result_;
  }

  void fetch_async() override {
    if (deferred_) {
      pending_->add(staging_, device_, total_, cudaMemcpyDeviceToHost);
      return;
    }
    pending_->flush(stream_);
    check_cuda(cudaMemcpyAsync(staging_, device_, static_cast<size_t>(total_), cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync of a buffer back to the host");
  }
  const uint8_t* staged_data() const override { return staging_ + kGuardBytes; }

 protected:
  const uint8_t* staged_region() const override { return staging_; }
  int64_t after_bytes() const override { return total_ - kGuardBytes - size_; }
  void wait(double timeout_s) override {
    pending_->flush(stream_);
    wait_stream(stream_, timeout_s);
  }

 private:
  // Large enough for a wrapped 32-bit offset to point back into the buffer's staging twin.
  static constexpr int64_t kScrubBytes = int64_t(1) << 30;
  struct ScrubJob {
    uint8_t* at;
    int64_t bytes;
    GuardPattern pattern;
  };
  static void CUDART_CB scrub_staging(void* arg) {
    std::unique_ptr<ScrubJob> job(static_cast<ScrubJob*>(arg));
    write_guard_pattern(job->at, job->bytes, job->pattern);
  }

  // The copy and its comparison slot, taken at the first upload that keeps one; false where
  // either is not to be had (the buffer then works without).
  bool ensure_copy() {
    if (copy_.device) return true;
    if (no_copy_) return false;
    if (slot_ < 0) slot_ = slots_->take();
    if (slot_ >= 0) copy_ = take_copy(total_);
    no_copy_ = copy_.device == nullptr;
    salt_ = reinterpret_cast<uintptr_t>(copy_.device) * 0x9E3779B97F4A7C15ull;
    return !no_copy_;
  }

  cudaStream_t stream_;
  int64_t total_;  // the region: guards, data and (in an arena) the padding to the next region
  std::shared_ptr<SharedBlock> block_;
  uint8_t* device_ = nullptr;   // the region's first guard byte
  uint8_t* staging_ = nullptr;  // and its twin
  std::shared_ptr<CompareSlots> slots_;
  std::shared_ptr<PendingCopies> pending_;
  bool deferred_ = false;  // in an arena: copies wait for the flush
  bool keeps_copy_ = false, copy_valid_ = false, compared_ = false, no_copy_ = false;
  CudaBlock copy_;  // device memory only
  int slot_ = -1;
  uint64_t salt_ = 0;
  std::optional<DeviceComparison> result_;
};

// The hold on the runner's stream: the stream waits until the kernel call has returned (release),
// or at most `limit`: 4 ms, long against a kernel launch and short against a case. A kernel that
// synchronizes the stream it was handed waits that long, so the hold cannot last the whole call.
// On a loaded machine a kernel's work on a stream of its own can start later than 4 ms into the
// call; it then reads complete inputs, gives the right answer, and the stream check has nothing to
// see in that case. The same holds for a call that, inside the hold, launches a kernel for the
// first time (CUDA's lazy loading) or calls cudaFree: each of these waited for the runner's stream
// when a host function held it (measured on the H200 with CUDA 13, 1.5 s holds:
// docs/runs/2026-12-04-s25-b-h200.txt; not measured again with the wait-value hold), so such a
// call sees it lapse. The runner's own kernels are loaded before any hold. NVFP4_STREAM_GATE_MS
// (1 to 60,000) sets the limit, for a test that needs the hold to outlast a call.
//
// The hold is a stream memory operation where the device takes one: the stream waits for a word
// of mapped pinned memory to equal the hold's token, and the release is one store of it, which
// the device sees at once. Each hold has a word of a ring of its own and a token drawn at random,
// so a stray device write into that memory releases no hold but by a 2^-32 chance, and a hold
// that lapsed leaves no word a later hold waits on. (A host function held the stream before: the
// driver's callback thread woke at the hold and again at the release before the stream went on,
// 143 us a call of a medium GEMV on an H100: bench/THROUGHPUT.md, session 53.) Where the device
// refuses a trial wait, the host function stays.
constexpr int kGateWords = 64;

struct StreamGate {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t held = 0, released = 0, lapsed = 0;
  std::chrono::milliseconds limit{4};
  // The wait-value hold, where the device takes it: the entry point, the ring of words (host and
  // device addresses), the current hold's token and the time it was queued.
  PFN_cuStreamWaitValue32_v11070 wait_value = nullptr;
  uint32_t* words = nullptr;
  CUdeviceptr words_device = 0;
  uint32_t token = 0;
  Clock::time_point held_at;
  std::mt19937 tokens{std::random_device{}()};
  bool quit = false;

  uint32_t* word(uint64_t hold) { return words + hold % kGateWords; }
  CUdeviceptr word_device(uint64_t hold) { return words_device + sizeof(uint32_t) * (hold % kGateWords); }
};

std::chrono::milliseconds stream_gate_limit() {
  const char* env = std::getenv("NVFP4_STREAM_GATE_MS");
  const long ms = env ? std::strtol(env, nullptr, 10) : 4;
  return std::chrono::milliseconds(std::clamp<long>(ms, 1, 60000));
}

void CUDART_CB wait_at_gate(void* arg) {
  auto* gate = static_cast<StreamGate*>(arg);
  std::unique_lock<std::mutex> lock(gate->mutex);
  const uint64_t mine = gate->held;
  gate->cv.wait_for(lock, gate->limit, [&] { return gate->released >= mine; });
}

// The wait-value hold's limit: one thread a process, asleep but while a hold is on, which at the
// limit stores the hold's token itself. It never calls CUDA, so it ends even on a hung device.
void lapse_holds(StreamGate* g) {
  std::unique_lock<std::mutex> lock(g->mutex);
  for (;;) {
    g->cv.wait(lock, [&] { return g->quit || g->held > std::max(g->released, g->lapsed); });
    if (g->quit) return;
    const uint64_t mine = g->held;
    const uint32_t token = g->token;
    if (!g->cv.wait_until(lock, g->held_at + g->limit, [&] { return g->quit || g->released >= mine; })) {
      __atomic_store_n(g->word(mine), token, __ATOMIC_RELEASE);
      g->lapsed = mine;
    }
  }
}

// cudaDeviceSynchronize cannot be polled: one helper thread makes the calls, and the caller waits
// for it with a timeout (on a timeout the thread is abandoned with the process, which ends after
// reporting: a hung device needs that).
class DeviceSynchronizer {
 public:
  explicit DeviceSynchronizer(int device) : state_(std::make_shared<State>()) {
    std::thread([s = state_, device] {
      cudaSetDevice(device);
      std::unique_lock<std::mutex> lock(s->mutex);
      for (;;) {
        s->cv.wait(lock, [&] { return s->requested > s->done || s->quit; });
        if (s->quit) return;
        const uint64_t ticket = s->requested;
        lock.unlock();
        const cudaError_t e = cudaDeviceSynchronize();
        lock.lock();
        s->result = e;
        s->done = ticket;
        s->cv.notify_all();
      }
    }).detach();
  }
  ~DeviceSynchronizer() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->quit = true;
    state_->cv.notify_all();
  }
  // false on a timeout; *result is cudaDeviceSynchronize's answer otherwise.
  bool synchronize(double timeout_s, cudaError_t* result) {
    std::unique_lock<std::mutex> lock(state_->mutex);
    const uint64_t ticket = ++state_->requested;
    state_->cv.notify_all();
    if (!state_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return state_->done >= ticket; }))
      return false;
    *result = state_->result;
    return true;
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    uint64_t requested = 0, done = 0;
    bool quit = false;
    cudaError_t result = cudaSuccess;
  };
  std::shared_ptr<State> state_;
};

class CudaMemory final : public KernelMemory {
 public:
  CudaMemory() {
    std::string why;
    if (!cuda_memory_available(&why)) throw DeviceError(DeviceError::Kind::cuda_error, why);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags for the runner's stream");
    int device = 0;
    cudaGetDevice(&device);
    synchronizer_ = std::make_unique<DeviceSynchronizer>(device);
    gate_.limit = stream_gate_limit();
    check_cuda(device_copy::load_kernels(), "loading the runner's copy kernels");
    take_wait_value();
  }
  ~CudaMemory() override {
    if (lapser_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(gate_.mutex);
        gate_.quit = true;
      }
      gate_.cv.notify_all();
      lapser_.join();
    }
    if (g_device_unusable) {
      (void)synchronizer_.release();
      return;
    }
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    if (gate_.words) cudaFreeHost(gate_.words);
  }

  std::unique_ptr<GuardedBuffer> allocate(int64_t bytes, GuardPattern pattern) override {
    if (!slots_) slots_ = std::make_shared<CompareSlots>();
    return std::make_unique<CudaBuffer>(bytes, pattern, stream_, slots_, pending_);
  }

  // Buffers under kDeviceCopyBytes share one arena, in the order asked, up to kSharedBlockBytes; the
  // rest have blocks of their own. (One small buffer alone gains nothing from an arena.)
  std::vector<std::unique_ptr<GuardedBuffer>> allocate_all(const std::vector<Request>& requests) override {
    if (!slots_) slots_ = std::make_shared<CompareSlots>();
    // Each placed buffer's region: its offset in the arena and its length, up to the next region.
    std::vector<int64_t> offset(requests.size(), -1), length(requests.size(), 0);
    int64_t used = 0;
    size_t placed = 0;
    for (size_t x = 0; x < requests.size(); ++x) {
      const int64_t region = shared_region_bytes(requests[x].bytes);
      if (requests[x].bytes >= kDeviceCopyBytes || used + region > kSharedBlockBytes) continue;
      offset[x] = used;
      length[x] = region;
      used += region;
      ++placed;
    }
    std::shared_ptr<SharedBlock> arena;
    if (placed >= 2) {
      arena = std::make_shared<SharedBlock>();
      arena->block = take_block(used);
    }
    std::vector<std::unique_ptr<GuardedBuffer>> all;
    all.reserve(requests.size());
    for (size_t x = 0; x < requests.size(); ++x) {
      if (!arena || offset[x] < 0) {
        all.push_back(allocate(requests[x].bytes, requests[x].pattern));
        continue;
      }
      all.push_back(std::make_unique<CudaBuffer>(requests[x].bytes, requests[x].pattern, stream_, slots_, pending_,
                                                 arena, offset[x], length[x]));
    }
    return all;
  }
  void* stream() override { return stream_; }
  void flush() override { pending_->flush(stream_); }

  void hold_stream() override {
    pending_->flush(stream_);
    if (!gate_.wait_value) {
      {
        std::lock_guard<std::mutex> lock(gate_.mutex);
        ++gate_.held;
      }
      check_cuda(cudaLaunchHostFunc(stream_, wait_at_gate, &gate_), "cudaLaunchHostFunc on the runner's stream");
      return;
    }
    uint64_t mine = 0;
    uint32_t token = 0;
    {
      std::lock_guard<std::mutex> lock(gate_.mutex);
      mine = ++gate_.held;
      do token = static_cast<uint32_t>(gate_.tokens()); while (token == 0);
      gate_.token = token;
      gate_.held_at = Clock::now();
      // The ring's word went by 64 holds ago, each of whose calls waited for the stream.
      __atomic_store_n(gate_.word(mine), 0u, __ATOMIC_RELEASE);
    }
    gate_.cv.notify_all();
    const CUresult r = gate_.wait_value(reinterpret_cast<CUstream>(stream_), gate_.word_device(mine), token,
                                        CU_STREAM_WAIT_VALUE_EQ);
    if (r != CUDA_SUCCESS) {
      release_stream();
      g_device_unusable = true;
      throw DeviceError(DeviceError::Kind::cuda_error,
                        fmt::format("cuStreamWaitValue32 on the runner's stream: CUresult {}", static_cast<int>(r)));
    }
  }
  void release_stream() override {
    {
      std::lock_guard<std::mutex> lock(gate_.mutex);
      if (gate_.wait_value && gate_.released < gate_.held)
        __atomic_store_n(gate_.word(gate_.held), gate_.token, __ATOMIC_RELEASE);
      gate_.released = gate_.held;
    }
    gate_.cv.notify_all();
  }

  void after_call() override {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw_cuda(e, "right after the kernel call (a launch error)");
  }

  void synchronize(double timeout_s) override {
    pending_->flush(stream_);
    wait_stream(stream_, timeout_s);
  }

  void synchronize_device(double timeout_s) override {
    pending_->flush(stream_);
    cudaError_t result = cudaSuccess;
    if (!synchronizer_->synchronize(timeout_s, &result)) {
      g_device_unusable = true;
      throw DeviceError(DeviceError::Kind::hang, fmt::format("cudaDeviceSynchronize did not return within {} s: "
                                               "work the kernel left on some stream hangs", timeout_s));
    }
    if (result != cudaSuccess) throw_cuda(result, "cudaDeviceSynchronize after the kernel (its work on any stream)");
  }

 private:
  // The wait-value hold where the driver has the entry point, mapped pinned memory can be had
  // and the device takes a trial wait on the runner's stream; else the host function.
  void take_wait_value() {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 11070, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess || !fn) {
      cudaGetLastError();
      return;
    }
    void* host = nullptr;
    void* device = nullptr;
    if (cudaHostAlloc(&host, kGateWords * sizeof(uint32_t), cudaHostAllocMapped) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    std::memset(host, 0, kGateWords * sizeof(uint32_t));
    const auto wait_value = reinterpret_cast<PFN_cuStreamWaitValue32_v11070>(fn);
    if (cudaHostGetDevicePointer(&device, host, 0) != cudaSuccess ||
        wait_value(reinterpret_cast<CUstream>(stream_), reinterpret_cast<CUdeviceptr>(device), 0,
                   CU_STREAM_WAIT_VALUE_EQ) != CUDA_SUCCESS ||
        cudaStreamSynchronize(stream_) != cudaSuccess) {
      cudaGetLastError();
      cudaFreeHost(host);
      return;
    }
    gate_.words = static_cast<uint32_t*>(host);
    gate_.words_device = reinterpret_cast<CUdeviceptr>(device);
    gate_.wait_value = wait_value;
    lapser_ = std::thread(lapse_holds, &gate_);
  }

  cudaStream_t stream_ = nullptr;
  StreamGate gate_;
  std::thread lapser_;
  std::unique_ptr<DeviceSynchronizer> synchronizer_;
  std::shared_ptr<CompareSlots> slots_;
  std::shared_ptr<PendingCopies> pending_ = std::make_shared<PendingCopies>();
};

}  // namespace

std::unique_ptr<KernelMemory> make_cuda_memory() { return std::make_unique<CudaMemory>(); }

bool cuda_memory_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why) *why = fmt::format("no usable CUDA device: cudaGetDeviceCount gave {} ({})", cudaGetErrorName(e),
                                cudaGetErrorString(e));
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device on this machine";
    return false;
  }
  return true;
}

}  // namespace nvfp4
