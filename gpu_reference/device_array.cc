#include "gpu_reference/device_array.h"

#include <mutex>
#include <vector>

namespace nvfp4::gpu {

bool stream_ordered_pool() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  static std::mutex mutex;
  static std::vector<int> known;  // per device: -1 not asked yet, 0 no pools, 1 pools
  std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<size_t>(device) >= known.size()) known.resize(static_cast<size_t>(device) + 1, -1);
  int& state = known[static_cast<size_t>(device)];
  if (state < 0) {
    int supported = 0;
    cudaMemPool_t pool = nullptr;
    uint64_t keep = kKeptPoolBytes;
    state = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess && supported &&
                    cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess &&
                    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess
                ? 1
                : 0;
  }
  return state == 1;
}

}  // namespace nvfp4::gpu
