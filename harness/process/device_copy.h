// A guarded CUDA buffer's copy on the device: the region (guards and data) as last uploaded, kept
// so the next call with the same input rewrites it without the host (restore), and so the check
// that a kernel left its inputs alone compares on the device instead of fetching gigabytes back.
//
// The copy is stored masked, every 8-byte word XORed with a word of a keystream: a kernel whose
// 32-bit offset wraps and strays into it reads garbage, never the right data (the pinned staging
// copy is scrubbed for the same reason, device_buffers_cuda.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "harness/process/tensor_rotation.h"

namespace nvfp4::device_copy {

// Where a region's bytes differ from the copy, by zone: 0 the guard before the data, 1 the data,
// 2 the guard after it. first_not[z] is the bitwise NOT of the first differing byte's index (so
// zeroed memory means "none yet" and one atomicMax keeps the smallest index).
struct Zones {
  unsigned long long count[3];
  unsigned long long first_not[3];
};

// copy[0, bytes) = region[0, bytes) masked. Both hold bytes rounded up to 8.
cudaError_t keep(const uint8_t* region, uint8_t* copy, int64_t bytes, uint64_t salt, cudaStream_t stream);
// region[0, bytes) = the copy unmasked.
cudaError_t restore(uint8_t* region, const uint8_t* copy, int64_t bytes, uint64_t salt, cudaStream_t stream);
// region[0, bytes) = the copy unmasked, its data [data_begin, data_begin + r.bytes()) moved as r
// says (from the copy's data).
cudaError_t rotate(uint8_t* region, const uint8_t* copy, int64_t bytes, int64_t data_begin, const TensorRotation& r,
                   uint64_t salt, cudaStream_t stream);
// Counts the bytes of region[0, bytes) that differ from the copy, by zone ([data_begin, data_end)
// is the data), into *zones (device memory, zeroed here first).
cudaError_t compare(const uint8_t* region, const uint8_t* copy, int64_t bytes, int64_t data_begin, int64_t data_end,
                    uint64_t salt, Zones* zones, cudaStream_t stream);
// The mask of the byte at `index` (to unmask one byte of the copy on the host).
// Loads the three kernels above now. CUDA loads a kernel at its first launch, and that launch
// waits for every stream's queued work, the runner's held stream included (harness/process/
// device_buffers_cuda.cc's StreamGate): loaded inside the hold, the first upload would wait it out.
cudaError_t load_kernels();
uint8_t mask_byte(int64_t index, uint64_t salt);

}  // namespace nvfp4::device_copy
