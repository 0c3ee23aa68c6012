// The roundings the honest variants and the mutants need beyond kernels/block_scaled_decode.h:
// binary16 from a double with a choice of rounding direction, binary16 back to float, and an FP32
// add that truncates (rounds toward zero) the way some tensor-core adders do. Host and device.
#pragma once

#include <stdint.h>
#include <string.h>

#include "kernels/block_scaled_decode.h"  // NVFP4_KERNEL_HD, float_bits, float_from_bits

namespace nvfp4::kern {

NVFP4_KERNEL_HD uint64_t bits_from_double(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t x;
  memcpy(&x, &d, sizeof x);
  return x;
#endif
}

enum class Fp16Rounding { nearest_even, toward_zero };

// The binary16 of a double, rounded once: to nearest even (magnitudes >= 65520 become Inf) or
// toward zero (what __float2half_rz does: overflow stops at 65504). Subnormals kept, NaN stays
// NaN. A float converts to double exactly, so this also serves floats with a single rounding.
NVFP4_KERNEL_HD uint16_t fp16_from_double(double v, Fp16Rounding mode = Fp16Rounding::nearest_even) {
  const uint64_t x = bits_from_double(v);
  const uint16_t sign = static_cast<uint16_t>((x >> 48) & 0x8000u);
  const uint64_t ax = x & 0x7FFFFFFFFFFFFFFFull;
  if (ax > 0x7FF0000000000000ull) return sign | 0x7E00u;  // NaN
  if (ax == 0x7FF0000000000000ull) return sign | 0x7C00u;  // Inf
  const int e = static_cast<int>(ax >> 52) - 1023;  // value in [2^e, 2^(e+1))
  // Below 2^-25 (half the smallest subnormal) everything rounds to zero either way.
  if (e < -25) return sign;
  if (e > 15) return sign | (mode == Fp16Rounding::toward_zero ? 0x7BFFu : 0x7C00u);
  const uint64_t sig = (ax & 0xFFFFFFFFFFFFFull) | (1ull << 52);  // 53 bits, value sig * 2^(e-52)
  // Keep 11 bits for a normal result (units 2^(e-10)), fewer in the subnormal range (units 2^-24).
  const int shift = e >= -14 ? 42 : 42 + (-14 - e);  // 42..53
  uint64_t q = sig >> shift;
  const uint64_t rem = sig & ((1ull << shift) - 1u);
  const uint64_t half = 1ull << (shift - 1);
  if (mode == Fp16Rounding::nearest_even && (rem > half || (rem == half && (q & 1u)))) ++q;
  // Normal: biased exponent e+15 above the implicit bit, written as (e+14) << 10 plus q (which
  // includes the implicit 0x400), so a rounding carry moves into the exponent by itself; a carry
  // out of 65504 lands exactly on 0x7C00 (Inf). Subnormal: q counts units of 2^-24, and q == 0x400
  // is also the right encoding of the smallest normal.
  const uint32_t bits = e >= -14 ? (static_cast<uint32_t>(e + 14) << 10) + static_cast<uint32_t>(q)
                                 : static_cast<uint32_t>(q);
  return static_cast<uint16_t>(sign | bits);
}

// binary16 bits to float (exact).
NVFP4_KERNEL_HD float float_from_fp16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return float_from_bits(sign | 0x7F800000u | (m << 13));
  if (e == 0) {
    const float mag = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return sign ? -mag : mag;
  }
  return float_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

// a + b in FP32 rounded toward zero: the round-to-nearest sum corrected by one ulp toward zero
// when TwoSum says it landed above the exact magnitude. Legitimate under SPEC.md section 3 (u is
// 2^-23, a full ulp, for exactly this reason).
NVFP4_KERNEL_HD float add_toward_zero(float a, float b) {
  const float s = a + b;
  const uint32_t sb = float_bits(s);
  if ((sb & 0x7F800000u) == 0x7F800000u || s == 0.0f) return s;  // Inf/NaN, or exact cancellation
  // TwoSum (Knuth): err = (a + b) - s exactly.
  const float bv = s - a;
  const float err = (a - (s - bv)) + (b - bv);
  if (err == 0.0f) return s;
  const bool s_negative = (sb >> 31) != 0;
  const bool err_negative = err < 0.0f;
  // |s| > |a + b| exactly when err points back toward zero: step one ulp toward zero.
  if (s_negative != err_negative) return float_from_bits(sb - 1u);
  return s;
}

}  // namespace nvfp4::kern
