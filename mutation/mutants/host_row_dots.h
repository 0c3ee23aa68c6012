// The host mutant engines' rows decoded once (each element its value times its block's scale)
// and their FP32 dot products.
#pragma once

#include <cstdint>

#include "mutation/mutants/mutant_bugs.h"

namespace nvfp4::mutants {

// Elements [0, k_end) of row r as an element-by-element k loop forms its factors: the E2M1 value
// (with the decoding bugs) times its block's scale (with the scale and layout bugs). `scale_row`
// is the row whose scales are read, `batch` the scales' batch; `swap` reads the nibbles swapped.
inline void decode_row(const uint8_t* row, const uint8_t* sf, uint32_t layout, int64_t rows, int64_t kb,
                       int64_t batch, int64_t scale_row, int64_t k_end, bool swap, Bug bug, float* out) {
  int64_t block = -1;
  float scale = 0.0f;
  for (int64_t x = 0; x < k_end; ++x) {
    const int64_t s = mutant_block(x, bug);
    if (s != block) {
      block = s;
      scale = mutant_scale(sf[mutant_scale_offset(layout, rows, kb, batch, scale_row, s, bug)], false, bug);
    }
    out[x] = mutant_e2m1(kern::e2m1_code(row, swap ? (x ^ 1) : x), bug) * scale;
  }
}

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
