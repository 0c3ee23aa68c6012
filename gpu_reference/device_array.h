// What the GPU reference's host code needs around CUDA calls: errors turned into exceptions that
// name the call, and device allocations freed on scope exit, so a throwing check leaks nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace nvfp4::gpu {

inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("GPU reference: ") + what + ": " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ")");
  }
}

// Whether the current device has stream-ordered allocation (cudaMallocAsync), its default pool
// then told to keep up to kKeptPoolBytes of freed memory (the default, 0, hands it back at every
// synchronisation, so each call would map its memory again). Asked once per device. 256 MiB holds
// every array of a schedule's largest dual case many times over and takes little from a kernel
// that shares the process (Python's adapters).
bool stream_ordered_pool();
constexpr uint64_t kKeptPoolBytes = uint64_t(256) << 20;

// Device memory for `count` T, used on `stream` alone, taken from and given back to the device's
// pool in that stream's order (cudaMalloc where the device has no pools): cudaFree waits for the
// whole device, so a call of the reference in one of the runner's lanes waited for every other
// lane's reference work in flight, and cudaMalloc ordered its stream behind them. The stream must
// outlive the array (declare it first).
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  cudaStream_t stream;
  bool pooled;
  DeviceArray(size_t count, cudaStream_t s) : stream(s), pooled(stream_ordered_pool()) {
    if (pooled) {
      check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&ptr), bytes(count), stream), "cudaMallocAsync");
    } else {
      check_cuda(cudaMalloc(&ptr, bytes(count)), "cudaMalloc");
    }
  }
  ~DeviceArray() {
    if (pooled) {
      cudaFreeAsync(ptr, stream);
    } else {
      cudaFree(ptr);
    }
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

 private:
  static size_t bytes(size_t count) { return count == 0 ? 1 : count * sizeof(T); }
};

template <typename T>
void upload(DeviceArray<T>& dst, const std::vector<T>& src, cudaStream_t stream) {
  check_cuda(cudaMemcpyAsync(dst.ptr, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice, stream),
             "copy to device");
}

// A non-blocking stream destroyed on scope exit.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

}  // namespace nvfp4::gpu
