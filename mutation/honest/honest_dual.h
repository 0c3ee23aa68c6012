// Honest dual GEMMs with an FP32 epilogue, as production CUDA kernels write one: G and U summed
// in FP32 in k order, G = alpha * sum and U = alpha2 * sum rounded to FP32, silu(G) and the
// product in FP32, the product then converted to the output type (a second rounding for FP16 and
// BF16). SPEC.md section 3 rule 6 must accept every word they write: with a tiny alpha G, silu(G)
// and the product fall among FP32's subnormals; below G = -87 the FP32 silu is -0.
#pragma once

#include <stdint.h>

#include "kernels/block_scaled_decode.h"
#include "kernels/output_words.h"

namespace nvfp4::honest {

enum class SiluForm {
  reciprocal,  // g * (1 / (1 + expf(-g))): a reciprocal, then a multiply
  fast,        // __fdividef(g, 1 + __expf(-g)) on the device (CUDA's fast intrinsics)
};

// G's or U's FP32 sum for output (b, i, j): products exact in FP32, added in k order.
NVFP4_KERNEL_HD float dual_dot(const nvfp4_problem& p, const uint8_t* b_data, const uint8_t* sfb, int64_t b, int64_t i,
                               int64_t j) {
  const int64_t k = p.k, kb = (k + 15) / 16, row_bytes = k / 2;
  const uint8_t* a_row = p.a + (b * p.m + i) * row_bytes;
  const uint8_t* b_row = b_data + (b * p.n + j) * row_bytes;
  float acc = 0.0f;
  for (int64_t x = 0; x < k; ++x) {
    const float sa = kern::e4m3_to_float(p.sfa[kern::scale_offset(p.sf_layout, p.m, kb, b, i, x / 16)], false);
    const float sb = kern::e4m3_to_float(sfb[kern::scale_offset(p.sf_layout, p.n, kb, b, j, x / 16)], false);
    acc += (kern::e2m1_to_float(kern::e2m1_code(a_row, x)) * sa) * (kern::e2m1_to_float(kern::e2m1_code(b_row, x)) * sb);
  }
  return acc;
}

// Output element (b, i, j) of a dual GEMM, written with an FP32 epilogue.
template <SiluForm kForm>
NVFP4_KERNEL_HD void dual_fp32_element(const nvfp4_problem& p, uint32_t out, int64_t b, int64_t i, int64_t j) {
  const float g = p.alpha * dual_dot(p, p.b, p.sfb, b, i, j);
  const float u = p.alpha2 * dual_dot(p, p.b2, p.sfb2, b, i, j);
  float silu;
#if defined(__CUDA_ARCH__)
  if constexpr (kForm == SiluForm::fast) {
    silu = __fdividef(g, 1.0f + __expf(-g));
  } else {
    silu = g * __frcp_rn(1.0f + expf(-g));
  }
#else
  silu = g * (1.0f / (1.0f + std::exp(-g)));
#endif
  kern::store_output(p.c, (b * p.m + i) * p.n + j, out, static_cast<double>(silu * u));
}

}  // namespace nvfp4::honest
