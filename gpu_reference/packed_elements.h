// What the GPU reference's kernels write for each output: ExactElement's facts in the widths that
// k <= 2^20 needs, and the FP16 word, in 24 bytes, against ExactElement's 48 plus 2. Half the
// bytes cross PCIe, through pinned chunks that the host expands on every OpenMP thread while the
// next chunk is copied.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "reference/exact_gemm.h"

namespace nvfp4::gpu {

struct PackedElement {
  long long sum;               // ExactElement::sum (|sum| < 2^63 for k <= 2^20)
  unsigned long long abs_sum;  // ExactElement::abs_sum
  uint32_t nonzero;            // ExactElement::nonzero (at most k)
  uint8_t min_tz;              // ExactElement::min_tz (128 when there is no nonzero product)
  uint8_t nan;                 // ExactElement::nan
  uint16_t c;                  // RN16(alpha * r), 0x7E00 when nan
};
static_assert(sizeof(PackedElement) == 24, "PackedElement is copied as 24-byte records");

// Elements come back through pinned chunks of this many (8 MB each): a result of more takes several
// copies, and each chunk's elements land at their offset.
constexpr int64_t kFetchChunkElements = static_cast<int64_t>((size_t(8) << 20) / sizeof(PackedElement));

// Copies `count` packed elements from device memory (written by work queued on `stream`) to
// elems[0, count) and, unless c is null, c[0, count). Throws std::runtime_error naming the CUDA
// error.
void fetch_packed(const PackedElement* device, int64_t count, cudaStream_t stream, ExactElement* elems,
                  uint16_t* c);

}  // namespace nvfp4::gpu
