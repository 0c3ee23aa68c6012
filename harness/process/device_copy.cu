// The masked device copy of a guarded buffer (device_copy.h): three memory-bound kernels over
// 8-byte words, grid-stride, so a 2 GiB input is kept, restored or compared in about a
// millisecond instead of crossing the bus.
#include "harness/process/device_copy.h"

#include <algorithm>

namespace nvfp4::device_copy {
namespace {

// splitmix64's finaliser: a different-looking word for every index, cheap beside a load.
__host__ __device__ __forceinline__ uint64_t mask_word(int64_t word, uint64_t salt) {
  uint64_t z = static_cast<uint64_t>(word) + salt + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t words_of(int64_t bytes) { return (bytes + 7) / 8; }

// Enough blocks to fill the device, no more (grid-stride loops cover the rest).
unsigned grid_for(int64_t words) {
  static const int sms = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count <= 0)
      count = 132;
    return count;
  }();
  const int64_t blocks = (words + 255) / 256;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t(sms) * 8)));
}

__global__ void keep_kernel(const uint64_t* region, uint64_t* copy, int64_t words, uint64_t salt) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < words; j += stride)
    copy[j] = region[j] ^ mask_word(j, salt);
}

__global__ void restore_kernel(uint64_t* region, const uint64_t* copy, int64_t words, uint64_t salt) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < words; j += stride)
    region[j] = copy[j] ^ mask_word(j, salt);
}

// A byte of the copy, unmasked.
__device__ __forceinline__ uint8_t copy_byte(const uint8_t* copy, int64_t at, uint64_t salt) {
  return copy[at] ^ static_cast<uint8_t>(mask_word(at / 8, salt) >> (8 * (at % 8)));
}

// A byte a thread: outside the data as it was, inside it from where r moves it (each_rotated_run's
// runs, tensor_rotation.h).
__global__ void rotate_kernel(uint8_t* region, const uint8_t* copy, int64_t bytes, int64_t data_begin,
                              TensorRotation r, int64_t span, int64_t shift, uint64_t salt) {
  const int64_t data_end = data_begin + r.l * r.rows * r.row_bytes;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t at = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; at < bytes; at += stride) {
    if (at < data_begin || at >= data_end) {
      region[at] = copy_byte(copy, at, salt);
      continue;
    }
    const int64_t d = at - data_begin, row = d / r.row_bytes, c = d % r.row_bytes;
    const int64_t b = row / r.rows, i = row % r.rows;
    const int64_t from_row = ((b + r.batches_by) % r.l) * r.rows + (i + r.rows_by) % r.rows;
    const int64_t from_c = c >= span ? c : c < span - shift ? c + shift : c - (span - shift);
    region[at] = copy_byte(copy, data_begin + from_row * r.row_bytes + from_c, salt) ^ r.flip;
  }
}

__global__ void compare_kernel(const uint64_t* region, const uint64_t* copy, int64_t words, int64_t bytes,
                               int64_t data_begin, int64_t data_end, uint64_t salt, Zones* zones) {
  unsigned long long count[3] = {0, 0, 0}, first_not[3] = {0, 0, 0};
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < words; j += stride) {
    const uint64_t x = region[j] ^ copy[j] ^ mask_word(j, salt);
    if (x == 0) continue;
    // Rare: a changed word, byte by byte (little-endian: byte k of the word is bits 8k..8k+7).
    for (int k = 0; k < 8; ++k) {
      const int64_t at = j * 8 + k;
      if (at >= bytes) break;
      if (((x >> (8 * k)) & 0xFFu) == 0) continue;
      const int zone = at < data_begin ? 0 : at < data_end ? 1 : 2;
      ++count[zone];
      first_not[zone] = max(first_not[zone], ~static_cast<unsigned long long>(at));
    }
  }
  for (int zone = 0; zone < 3; ++zone)
    if (count[zone]) {
      atomicAdd(&zones->count[zone], count[zone]);
      atomicMax(&zones->first_not[zone], first_not[zone]);
    }
}

}  // namespace

cudaError_t keep(const uint8_t* region, uint8_t* copy, int64_t bytes, uint64_t salt, cudaStream_t stream) {
  const int64_t words = words_of(bytes);
  if (words == 0) return cudaSuccess;
  keep_kernel<<<grid_for(words), 256, 0, stream>>>(reinterpret_cast<const uint64_t*>(region),
                                                    reinterpret_cast<uint64_t*>(copy), words, salt);
  return cudaGetLastError();
}

cudaError_t restore(uint8_t* region, const uint8_t* copy, int64_t bytes, uint64_t salt, cudaStream_t stream) {
  const int64_t words = words_of(bytes);
  if (words == 0) return cudaSuccess;
  restore_kernel<<<grid_for(words), 256, 0, stream>>>(reinterpret_cast<uint64_t*>(region),
                                                       reinterpret_cast<const uint64_t*>(copy), words, salt);
  return cudaGetLastError();
}

cudaError_t rotate(uint8_t* region, const uint8_t* copy, int64_t bytes, int64_t data_begin, const TensorRotation& r,
                   uint64_t salt, cudaStream_t stream) {
  if (bytes <= 0) return cudaSuccess;
  if (r.bytes() > 0 && (r.row_bytes <= 0 || r.rows <= 0 || r.l <= 0)) return cudaErrorInvalidValue;
  rotate_kernel<<<grid_for(bytes), 256, 0, stream>>>(region, copy, bytes, data_begin, r, r.span(), r.shift(), salt);
  return cudaGetLastError();
}

cudaError_t compare(const uint8_t* region, const uint8_t* copy, int64_t bytes, int64_t data_begin, int64_t data_end,
                    uint64_t salt, Zones* zones, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(zones, 0, sizeof(Zones), stream);
  if (e != cudaSuccess) return e;
  const int64_t words = words_of(bytes);
  if (words == 0) return cudaSuccess;
  compare_kernel<<<grid_for(words), 256, 0, stream>>>(reinterpret_cast<const uint64_t*>(region),
                                                       reinterpret_cast<const uint64_t*>(copy), words, bytes,
                                                       data_begin, data_end, salt, zones);
  return cudaGetLastError();
}

cudaError_t load_kernels() {
  cudaFuncAttributes attributes{};
  for (const void* f : {reinterpret_cast<const void*>(keep_kernel), reinterpret_cast<const void*>(restore_kernel),
                        reinterpret_cast<const void*>(compare_kernel), reinterpret_cast<const void*>(rotate_kernel)}) {
    const cudaError_t e = cudaFuncGetAttributes(&attributes, f);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

uint8_t mask_byte(int64_t index, uint64_t salt) {
  return static_cast<uint8_t>(mask_word(index / 8, salt) >> (8 * (index % 8)));
}

}  // namespace nvfp4::device_copy
