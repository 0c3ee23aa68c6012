// A deliberately wrong NVFP4 GEMV/GEMM element for the fuzzing demonstration plugin: when k is
// over 64 and not a multiple of 64, the elements past the last multiple of 64 are dropped (the
// "k tail beyond the last full 64-wide tile" bug of tiled kernels). Otherwise it is a correct
// FP32-accumulating kernel, so only a shape with such a tail (and a nonzero tail) shows it.
#pragma once

#include "kernels/block_scaled_decode.h"

namespace nvfp4::fuzz_demo {

// Whether p has the tail the bug drops.
NVFP4_KERNEL_HD bool has_k_tail(const nvfp4_problem& p) { return p.k > 64 && p.k % 64 != 0; }

// drop_tail false: the correct element (the faulting demonstration kernel computes that one).
NVFP4_KERNEL_HD float broken_k_tail_element(const nvfp4_problem& p, int64_t b, int64_t i, int64_t j,
                                            bool drop_tail = true) {
  using namespace nvfp4::kern;
  const int64_t k = p.k, kb = (k + 15) / 16, row_bytes = k / 2;
  // THE BUG: a 64-wide main loop without its remainder loop.
  const int64_t k_done = drop_tail && has_k_tail(p) ? k / 64 * 64 : k;
  const uint8_t* a_row = p.a + (b * p.m + i) * row_bytes;
  const uint8_t* b_row = p.b + (b * p.n + j) * row_bytes;
  float acc = 0.0f;
  for (int64_t s = 0; s < kb; ++s) {
    float block_sum = 0.0f;
    for (int64_t x = 16 * s; x < 16 * s + 16 && x < k_done; ++x) {
      block_sum += e2m1_to_float(e2m1_code(a_row, x)) * e2m1_to_float(e2m1_code(b_row, x));
    }
    const float sa = e4m3_to_float(p.sfa[scale_offset(p.sf_layout, p.m, kb, b, i, s)], false);
    const float sb = e4m3_to_float(p.sfb[scale_offset(p.sf_layout, p.n, kb, b, j, s)], false);
    acc += block_sum * (sa * sb);
  }
  return p.alpha * acc;
}

}  // namespace nvfp4::fuzz_demo
