// Test-only FP16 rounding written from the IEEE definition with long double arithmetic, apart
// from fp16.h's integer code, so that the two can check each other.
#pragma once

#include <cmath>
#include <cstdint>

namespace nvfp4::testing_formula {

// Value of positive finite FP16 bits (h <= 0x7BFF) from the IEEE definition.
inline long double decode_formula(uint16_t h) {
  const int e = (h >> 10) & 31, f = h & 1023;
  return e == 0 ? std::ldexp((long double)f, -24) : std::ldexp(1024.0L + f, e - 25);
}

// Bits of the FP16 nearest to x, ties to even, +-Inf at magnitudes >= 65520, +0 for 0. x must be
// exact in long double. Divides by the ulp of x's binade (a power of two: exact), rounds with
// nearbyint in the default to-nearest-even mode, and finds the bits by bisection on the decoded
// values.
inline uint16_t round_formula(long double x) {
  const uint16_t sign = x < 0 ? 0x8000 : 0;
  x = std::fabs(x);
  if (x == 0) return 0;
  if (x >= 65520.0L) return sign | 0x7C00;
  const int binade = x < std::ldexp(1.0L, -14) ? -14 : std::ilogb(x);
  const long double ulp = std::ldexp(1.0L, binade - 10);
  const long double r = std::nearbyint(x / ulp) * ulp;
  uint16_t lo = 0, hi = 0x7C00;  // decode_formula increases on [0, 0x7BFF]
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (decode_formula(mid) < r) lo = static_cast<uint16_t>(mid + 1); else hi = mid;
  }
  return sign | lo;  // r == 65536 gives lo == 0x7C00: Inf
}

}  // namespace nvfp4::testing_formula
