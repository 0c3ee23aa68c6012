// CUDA guarded buffers and the runner's own non-blocking stream, through the CUDA runtime API
// (plain C++: no device code here, so nvcc is not needed). Built only with NVFP4_CUDA.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "harness/device_buffers.h"

namespace nvfp4 {
namespace {

using Clock = std::chrono::steady_clock;

// Set once a kernel hung or the context broke: from then on nothing is freed (cudaFree waits for
// the device, which may never finish), the process only reports and ends.
bool g_device_unusable = false;

[[noreturn]] void throw_cuda(cudaError_t e, const std::string& what) {
  g_device_unusable = true;
  throw DeviceError("cuda-error",
                    fmt::format("{}: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_cuda(e, what);
}

// Polls instead of cudaStreamSynchronize so a hung kernel becomes a "timeout" we can report.
void wait_stream(cudaStream_t stream, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int sleep_us = 10;
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) throw_cuda(e, "while waiting for the kernel's work on the runner's stream");
    if (Clock::now() > deadline) {
      g_device_unusable = true;
      throw DeviceError("timeout", fmt::format("the work on the runner's stream did not finish "
                                               "within {} s (a hung kernel?)", timeout_s));
    }
    usleep(static_cast<useconds_t>(sleep_us));
    sleep_us = std::min(sleep_us * 2, 1000);
  }
}

// [guard][data][guard] in one cudaMalloc; a pinned staging copy of the whole region carries
// every upload and download, so copies are truly asynchronous and ordered on the stream.
class CudaBuffer final : public GuardedBuffer {
 public:
  CudaBuffer(int64_t bytes, GuardPattern pattern, cudaStream_t stream)
      : GuardedBuffer(bytes), pattern_(pattern), stream_(stream), total_(2 * kGuardBytes + bytes) {
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&device_), static_cast<size_t>(total_)),
               "cudaMalloc of a guarded buffer");
    const cudaError_t e = cudaMallocHost(reinterpret_cast<void**>(&staging_), static_cast<size_t>(total_));
    if (e != cudaSuccess) {
      cudaFree(device_);
      throw_cuda(e, "cudaMallocHost of a staging buffer");
    }
  }
  ~CudaBuffer() override {
    if (g_device_unusable) return;
    cudaFree(device_);
    cudaFreeHost(staging_);
  }

  uint8_t* data() override { return device_ + kGuardBytes; }

  void upload(const uint8_t* src) override {
    // The staging copy is not in flight here: every upload follows a wait on the stream.
    for (int64_t x = 0; x < kGuardBytes; ++x) {
      staging_[x] = guard_byte(pattern_, x);
      staging_[kGuardBytes + size_ + x] = guard_byte(pattern_, x);
    }
    if (size_ > 0) std::memcpy(staging_ + kGuardBytes, src, static_cast<size_t>(size_));
    check_cuda(cudaMemcpyAsync(device_, staging_, static_cast<size_t>(total_), cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync of an input to the device");
  }

  std::vector<uint8_t> download(double timeout_s) override {
    fetch(timeout_s);
    return std::vector<uint8_t>(staging_ + kGuardBytes, staging_ + kGuardBytes + size_);
  }

  GuardDamage check_guards(double timeout_s) override {
    fetch(timeout_s);
    GuardDamage d;
    for (int64_t x = 0; x < kGuardBytes; ++x) {
      const uint8_t want = guard_byte(pattern_, x);
      if (staging_[x] != want) d.record(true, x - kGuardBytes, want, staging_[x]);
    }
    for (int64_t x = 0; x < kGuardBytes; ++x) {
      const uint8_t want = guard_byte(pattern_, x);
      const uint8_t got = staging_[kGuardBytes + size_ + x];
      if (got != want) d.record(false, size_ + x, want, got);
    }
    return d;
  }

 private:
  void fetch(double timeout_s) {
    check_cuda(cudaMemcpyAsync(staging_, device_, static_cast<size_t>(total_), cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync of a buffer back to the host");
    wait_stream(stream_, timeout_s);
  }

  GuardPattern pattern_;
  cudaStream_t stream_;
  int64_t total_;
  uint8_t* device_ = nullptr;
  uint8_t* staging_ = nullptr;
};

void CUDART_CB hold_for_a_while(void*) {
  // Long against a kernel launch (microseconds), short against a whole case.
  std::this_thread::sleep_for(std::chrono::milliseconds(4));
}

class CudaMemory final : public KernelMemory {
 public:
  CudaMemory() {
    std::string why;
    if (!cuda_memory_available(&why)) throw DeviceError("cuda-error", why);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags for the runner's stream");
  }
  ~CudaMemory() override {
    if (g_device_unusable) return;
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }

  std::unique_ptr<GuardedBuffer> allocate(int64_t bytes, GuardPattern pattern) override {
    return std::make_unique<CudaBuffer>(bytes, pattern, stream_);
  }
  void* stream() override { return stream_; }

  void hold_stream() override {
    check_cuda(cudaLaunchHostFunc(stream_, hold_for_a_while, nullptr), "cudaLaunchHostFunc on the runner's stream");
  }

  void after_call() override {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw_cuda(e, "right after the kernel call (a launch error)");
  }

  void synchronize(double timeout_s) override { wait_stream(stream_, timeout_s); }

  // cudaDeviceSynchronize cannot be polled, so it runs on a helper thread; on a timeout that
  // thread is abandoned (the worker process ends after reporting, a hung device needs that).
  void synchronize_device(double timeout_s) override {
    struct Shared {
      std::mutex mutex;
      std::condition_variable done_cv;
      bool done = false;
      cudaError_t result = cudaSuccess;
    };
    auto shared = std::make_shared<Shared>();
    int device = 0;
    cudaGetDevice(&device);
    std::thread([shared, device] {
      cudaSetDevice(device);
      const cudaError_t e = cudaDeviceSynchronize();
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->result = e;
      shared->done = true;
      shared->done_cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(shared->mutex);
    if (!shared->done_cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return shared->done; })) {
      g_device_unusable = true;
      throw DeviceError("timeout", fmt::format("cudaDeviceSynchronize did not return within {} s: "
                                               "work the kernel left on some stream hangs", timeout_s));
    }
    if (shared->result != cudaSuccess)
      throw_cuda(shared->result, "cudaDeviceSynchronize after the kernel (its work on any stream)");
  }

 private:
  cudaStream_t stream_ = nullptr;
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
