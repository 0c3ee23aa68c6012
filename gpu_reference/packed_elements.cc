#include "gpu_reference/packed_elements.h"

#include <algorithm>
#include <mutex>

#include "gpu_reference/device_array.h"

namespace nvfp4::gpu {
namespace {

// Two pinned chunks, allocated at the first fetch and kept for the process: pinning costs about
// 30 ms per 64 MB on the H200's host, more than a chunk's copy saves, so it is paid once. 8 MB a
// chunk copies in about 0.2 ms and expands in about 1 ms on 16 threads. The mutex lets threads
// of one process share them.
constexpr int64_t kPerChunk = kFetchChunkElements;
constexpr size_t kChunkBytes = static_cast<size_t>(kPerChunk) * sizeof(PackedElement);

struct Chunks {
  std::mutex mutex;
  PackedElement* buf[2] = {nullptr, nullptr};
  cudaEvent_t copied[2] = {nullptr, nullptr};
};

Chunks& chunks() {
  static Chunks* c = new Chunks;  // never destroyed: a CUDA call in a static destructor may
                                  // run after the runtime has gone
  return *c;
}

// A team only for a large chunk: a grouped problem fetches hundreds of small groups, and a team
// woken for each keeps its threads spinning between them, taking cores from the kernel's calls
// that the reference runs beside.
constexpr int64_t kTeamElements = int64_t(1) << 16;

void unpack(const PackedElement* src, int64_t count, ExactElement* elems, uint16_t* c) {
#pragma omp parallel for schedule(static) if (count >= kTeamElements)
  for (int64_t i = 0; i < count; ++i) {
    const PackedElement& p = src[i];
    ExactElement& e = elems[i];
    e.sum = p.sum;
    e.abs_sum = p.abs_sum;
    e.nonzero = p.nonzero;
    e.min_tz = p.min_tz;
    e.nan = p.nan != 0;
    if (c) c[i] = p.c;
  }
}

}  // namespace

void fetch_packed(const PackedElement* device, int64_t count, cudaStream_t stream, ExactElement* elems,
                  uint16_t* c) {
  if (count <= 0) return;
  Chunks& ch = chunks();
  std::lock_guard<std::mutex> lock(ch.mutex);
  for (int b = 0; b < 2; ++b) {
    if (!ch.buf[b]) {
      check_cuda(cudaHostAlloc(reinterpret_cast<void**>(&ch.buf[b]), kChunkBytes, cudaHostAllocDefault),
                 "cudaHostAlloc");
    }
    if (!ch.copied[b]) check_cuda(cudaEventCreateWithFlags(&ch.copied[b], cudaEventDisableTiming), "cudaEventCreate");
  }
  const int64_t n_chunks = (count + kPerChunk - 1) / kPerChunk;
  auto start_copy = [&](int64_t i) {
    const int64_t at = i * kPerChunk, n = std::min(kPerChunk, count - at);
    check_cuda(cudaMemcpyAsync(ch.buf[i % 2], device + at, n * sizeof(PackedElement), cudaMemcpyDeviceToHost, stream),
               "copy elements back");
    check_cuda(cudaEventRecord(ch.copied[i % 2], stream), "cudaEventRecord");
  };
  start_copy(0);
  for (int64_t i = 0; i < n_chunks; ++i) {
    // Chunk i + 1 goes into the buffer chunk i - 1 was expanded from, which is done with.
    if (i + 1 < n_chunks) start_copy(i + 1);
    check_cuda(cudaEventSynchronize(ch.copied[i % 2]), "copy elements back");
    const int64_t at = i * kPerChunk;
    // No words wanted (c null) stays null past the first chunk: c + at would not be.
    unpack(ch.buf[i % 2], std::min(kPerChunk, count - at), elems + at, c ? c + at : nullptr);
  }
}

}  // namespace nvfp4::gpu
