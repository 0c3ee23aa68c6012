// FP32 -> IEEE binary16, round to nearest even, the conversion a GPU epilogue does
// (__float2half_rn): subnormals kept, magnitudes >= 65520 to Inf, NaN stays NaN. The host
// kernels' own copy: kernels never include reference/.
#pragma once

#include <stdint.h>
#include <string.h>

namespace nvfp4::kern {

inline uint16_t fp16_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) {
    // NaN: quiet it and keep the top payload bits, so a NaN never becomes Inf.
    return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  }
  // 65520 = 65504 + half an ulp (ulp 32) is the first value that rounds to Inf (ties to the
  // even "significand" 2^16); 0x477FF000 is its float encoding. Inf lands here too.
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (ax >= 0x38800000u) {
    // Normal half (>= 2^-14): rebias the exponent (127 -> 15, i.e. subtract 112 << 23) and
    // round away the low 13 mantissa bits to nearest even; a carry moves into the exponent,
    // which is exactly the right next binade.
    const uint32_t rebiased = ax - (112u << 23);
    const uint32_t rounded = rebiased + 0xFFFu + ((rebiased >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  // Below 2^-14: a subnormal half counts units of 2^-24. 2^-25 (0x33000000) is the midpoint
  // between 0 and the smallest subnormal and ties to 0 (even); anything at or below it is +-0.
  if (ax <= 0x33000000u) return sign;
  // value = sig * 2^(e - 150) with the implicit bit; in units of 2^-24 that is
  // sig >> (126 - e), shift in [14, 24] for e in [102, 112].
  const uint32_t e = ax >> 23;
  const uint32_t sig = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t q = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  // q == 0x400 (rounded up to 2^-14) is also the right encoding of the smallest normal.
  return static_cast<uint16_t>(sign | q);
}

}  // namespace nvfp4::kern
