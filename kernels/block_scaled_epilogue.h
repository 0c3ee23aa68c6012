// The epilogue of a GEMM with block-scaled output (SPEC.md section 2, out_type nvfp4), for host
// and device: a row's FP32 results quantized along n, in blocks of 16, with the problem's recipe
// and global scale, by kernels/quantize_core.h's arithmetic. Codes go to Q (row-major like A with
// n in place of k), scale bytes to SFQ (the problem's layout with n in place of k).
#pragma once

#include "kernels/quantize_core.h"

namespace nvfp4::kern::quant {

// Block s (columns [16s, 16s + count)) of row i of batch b, its values v[0..count): the block's
// amax (NaN-suppressing), scale byte and encode factor, then its codes into q_row (the row's
// n/2 bytes). rows and nb: SFQ's rows per batch and blocks per row.
template <class Rcp>
NVFP4_QHD inline void quantize_out_block(const float* v, int64_t count, uint32_t recipe, float gs, uint32_t layout,
                                         int64_t rows, int64_t nb, int64_t b, int64_t i, int64_t s, uint8_t* q_row,
                                         uint8_t* sfq, Rcp rcp, Bug bug) {
  float amax = 0.0f;
  for (int64_t c = 0; c < count; ++c) {
    const float a = fabsf(v[c]);
    if (a > amax) amax = a;
  }
  float os;
  sfq[sf_offset(layout, rows, nb, b, i, s)] = nvfp4_block_scale(recipe, amax, gs, rcp, bug, &os);
  for (int64_t c = 0; c < count; ++c) {
    const int64_t x = 16 * s + c;
    const uint8_t code = e2m1_from_float(v[c] * os);
    uint8_t& byte = q_row[x / 2];
    byte = (x & 1) ? static_cast<uint8_t>((byte & 0x0F) | (code << 4)) : static_cast<uint8_t>((byte & 0xF0) | code);
  }
}

}  // namespace nvfp4::kern::quant
