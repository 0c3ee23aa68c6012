// What every built-in kernel needs to read an NVFP4 problem (SPEC.md sections 1 and 2): E2M1 and
// E4M3 bytes to float, and where the scale of (batch, row, block) lives in either layout.
// Kernels know only the ABI, never reference/, so this is the kernels' own copy of the format;
// the suite checks the two agree by running every kernel against the reference.
#pragma once

#include <stdint.h>
#include <string.h>

#include "kernels/nvfp4_kernel_abi.h"

#if defined(__CUDACC__)
#define NVFP4_KERNEL_HD __host__ __device__ __forceinline__
#else
#define NVFP4_KERNEL_HD inline
#endif

namespace nvfp4::kern {

// A float's bits and back (the one pair every kernel, honest variant and mutant uses).
NVFP4_KERNEL_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
#endif
}

NVFP4_KERNEL_HD float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// E2M1 (sign, 2 exponent bits, 1 mantissa bit, bias 1; no Inf or NaN) as a float. Built from
// the bit fields rather than a table so device code needs no constant memory: exponent field 0
// is the subnormal 0.5*m, otherwise (1 + m/2) * 2^(e-1), i.e. float exponent e-1+127 and the
// mantissa bit placed at the top of the float's mantissa.
NVFP4_KERNEL_HD float e2m1_to_float(uint32_t code) {
  const uint32_t e = (code >> 1) & 3u, m = code & 1u;
  const uint32_t sign = (code & 8u) << 28;  // bit 3 -> bit 31
  const uint32_t mag = e == 0 ? (m ? 0x3F000000u : 0u)  // 0.5 or 0
                              : ((e + 126u) << 23) | (m << 22);
  return float_from_bits(sign | mag);
}

// An E4M3FN scale byte as a float: NaN iff (byte & 0x7F) == 0x7F; exponent field 0 is the
// subnormal m * 2^-9, otherwise (8 + m) * 2^(e - 10) = float exponent e - 7 + 127 with the three
// mantissa bits at the top of the float's mantissa. With signed_scales (e4m3 semantics) the sign
// bit negates the scale; without it (ue4m3, the NVFP4 default) the sign bit is ignored.
NVFP4_KERNEL_HD float e4m3_to_float(uint32_t byte, bool signed_scales) {
  const uint32_t sign = (signed_scales && (byte & 0x80u)) ? 0x80000000u : 0u;
  if ((byte & 0x7Fu) == 0x7Fu) return float_from_bits(0x7FC00000u | sign);
  const uint32_t e = (byte >> 3) & 0xFu, m = byte & 7u;
  if (e == 0) {
    // m * 2^-9 is exact in float; keep the sign so that -0 stays -0.
    const float mag = static_cast<float>(m) * 0.001953125f;
    return sign ? -mag : mag;
  }
  return float_from_bits(sign | ((e + 120u) << 23) | (m << 20));
}

// Offset of the scale of (batch b, row i, block s) for a matrix with `rows` rows and kb scale
// blocks per row. Linear: [l][rows][kb]. Permuted (cuBLASLt / CUTLASS 128x4 tiles): tile
// (b, i/128, s/4) holds 512 bytes; inside it row i sits at (i%32)*16 + ((i%128)/32)*4 and block
// s at s%4.
NVFP4_KERNEL_HD int64_t scale_offset(uint32_t layout, int64_t rows, int64_t kb, int64_t b, int64_t i,
                                     int64_t s) {
  if (layout == NVFP4_SF_LINEAR) return (b * rows + i) * kb + s;
  const int64_t row_tiles = (rows + 127) / 128, k_tiles = (kb + 3) / 4;
  return ((b * row_tiles + i / 128) * k_tiles + s / 4) * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 +
         s % 4;
}

// Element x of a packed E2M1 row: element 2t is the LOW nibble of byte t.
NVFP4_KERNEL_HD uint32_t e2m1_code(const uint8_t* row, int64_t x) {
  const uint32_t byte = row[x >> 1];
  return (x & 1) ? (byte >> 4) : (byte & 0xFu);
}

// Scale block s of two packed E2M1 rows of length k (the last block may be short): the sum of
// its 16 products as a float, in element order, before the scales. What a plain FP32 kernel adds
// up per block; the order is part of its result.
NVFP4_KERNEL_HD float block_products(const uint8_t* a_row, const uint8_t* b_row, int64_t s, int64_t k) {
  const int64_t byte_end = (16 * s + 16 < k ? 16 * s + 16 : k) / 2;
  float sum = 0.0f;
  for (int64_t y = 8 * s; y < byte_end; ++y) {
    const uint32_t av = a_row[y], bv = b_row[y];
    sum += e2m1_to_float(av & 0xFu) * e2m1_to_float(bv & 0xFu);
    sum += e2m1_to_float(av >> 4) * e2m1_to_float(bv >> 4);
  }
  return sum;
}

// Elements x and x+1 (x even) of row r of batch b of an operand with `rows` rows (A: m, B: n),
// each times its block's scale under ue4m3 semantics: the factors a*sa a tensor-core kernel
// feeds its MMA, each exact in FP16 and BF16 (SPEC section 1). Zeros past the operand (r >= rows
// or x >= k; k is even, so x and x+1 are inside or outside together, and share a block), read
// from nothing there: padding scales never reach a product.
struct FactorPair {
  float lo, hi;  // elements x, x+1
};
NVFP4_KERNEL_HD FactorPair dequantized_pair(const uint8_t* data, const uint8_t* scales, uint32_t layout,
                                            int64_t rows, int64_t k, int64_t b, int64_t r, int64_t x) {
  if (r >= rows || x >= k) return {0.0f, 0.0f};
  const uint32_t byte = data[(b * rows + r) * (k / 2) + x / 2];
  const float s = e4m3_to_float(scales[scale_offset(layout, rows, (k + 15) / 16, b, r, x / 16)], false);
  return {e2m1_to_float(byte & 0xFu) * s, e2m1_to_float(byte >> 4) * s};
}

}  // namespace nvfp4::kern
