// download(): device results into pageable host memory through pinned staging (device_array.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "gpu_reference/device_array.h"

namespace nvfp4::gpu {
namespace {

constexpr size_t kChunk = size_t(32) << 20;   // one staging buffer
constexpr size_t kDirect = size_t(16) << 20;  // below this a plain copy is as fast

struct Staging {
  std::mutex mutex;  // one download at a time uses the buffers
  void* buffer[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};
  bool ready = false;
};

Staging& staging() {
  static Staging* s = new Staging();  // never freed: the process's CUDA context may be gone at exit
  return *s;
}

// dst <- src, split over a few threads (one core copies about 10 GB/s; the pages are the vector's,
// already touched).
void host_copy(char* dst, const char* src, size_t bytes) {
  const unsigned threads = std::clamp(std::thread::hardware_concurrency() / 4, 1u, 4u);
  if (threads == 1 || bytes < (size_t(4) << 20)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const size_t part = (bytes + threads - 1) / threads;
  std::vector<std::thread> team;
  for (unsigned t = 1; t < threads; ++t) {
    const size_t from = std::min(bytes, t * part), to = std::min(bytes, from + part);
    if (to > from) team.emplace_back([=] { std::memcpy(dst + from, src + from, to - from); });
  }
  std::memcpy(dst, src, std::min(bytes, part));
  for (std::thread& t : team) t.join();
}

}  // namespace

void download(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes < kDirect) {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), "copy to the host");
    check_cuda(cudaStreamSynchronize(stream), "copy to the host");
    return;
  }
  Staging& s = staging();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.ready) {
    for (int b = 0; b < 2; ++b) {
      check_cuda(cudaHostAlloc(&s.buffer[b], kChunk, cudaHostAllocDefault), "cudaHostAlloc (staging)");
      check_cuda(cudaEventCreateWithFlags(&s.done[b], cudaEventDisableTiming), "cudaEventCreate (staging)");
    }
    s.ready = true;
  }
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  const size_t chunks = (bytes + kChunk - 1) / kChunk;
  auto enqueue = [&](size_t c) {
    const size_t at = c * kChunk, n = std::min(kChunk, bytes - at);
    check_cuda(cudaMemcpyAsync(s.buffer[c % 2], from + at, n, cudaMemcpyDeviceToHost, stream), "copy to the host");
    check_cuda(cudaEventRecord(s.done[c % 2], stream), "cudaEventRecord (staging)");
  };
  enqueue(0);
  for (size_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) enqueue(c + 1);  // the other buffer, emptied by the previous turn
    check_cuda(cudaEventSynchronize(s.done[c % 2]), "copy to the host");
    const size_t at = c * kChunk;
    host_copy(to + at, static_cast<const char*>(s.buffer[c % 2]), std::min(kChunk, bytes - at));
  }
}

}  // namespace nvfp4::gpu
