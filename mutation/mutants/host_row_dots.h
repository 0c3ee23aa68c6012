// The host mutant engines' FP32 dot products over rows decoded once (each element already its
// value times its block's scale).
#pragma once

#include <cstdint>

namespace nvfp4::mutants {

// out[j] = the FP32 sum over x of a[x] * b[j * k + x] for j < n, in element order: the sums of an
// element-by-element loop, bit for bit (no FMA contraction on the baseline x86-64 target), four
// outputs side by side so their additions overlap.
inline void row_dots(const float* a, const float* b, int64_t n, int64_t k, float* out) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *b0 = b + j * k, *b1 = b0 + k, *b2 = b1 + k, *b3 = b2 + k;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    for (int64_t x = 0; x < k; ++x) {
      const float v = a[x];
      s0 += v * b0[x];
      s1 += v * b1[x];
      s2 += v * b2[x];
      s3 += v * b3[x];
    }
    out[j] = s0, out[j + 1] = s1, out[j + 2] = s2, out[j + 3] = s3;
  }
  for (; j < n; ++j) {
    const float* bj = b + j * k;
    float acc = 0.0f;
    for (int64_t x = 0; x < k; ++x) acc += a[x] * bj[x];
    out[j] = acc;
  }
}

}  // namespace nvfp4::mutants
