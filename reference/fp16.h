// Round an exact value to IEEE binary16 once, to nearest-even (SPEC.md section 1). Header-only
// and usable from CUDA device code: the CPU and GPU references share this one function.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "reference/formats.h"  // NVFP4_HD

namespace nvfp4 {

using u128 = unsigned __int128;
using i128 = __int128;

NVFP4_HD inline int bit_width_u128(u128 v) {
  const uint64_t hi = static_cast<uint64_t>(v >> 64), lo = static_cast<uint64_t>(v);
#if defined(__CUDA_ARCH__)
  if (hi) return 128 - __clzll(static_cast<long long>(hi));
  return lo ? 64 - __clzll(static_cast<long long>(lo)) : 0;
#else
  if (hi) return 128 - __builtin_clzll(hi);
  return lo ? 64 - __builtin_clzll(lo) : 0;
#endif
}

NVFP4_HD inline int bit_width_u64(uint64_t v) {
#if defined(__CUDA_ARCH__)
  return v ? 64 - __clzll(static_cast<long long>(v)) : 0;
#else
  return v ? 64 - __builtin_clzll(v) : 0;
#endif
}

// mag / 2^shift rounded to an integer, ties to even: a magnitude's significand in units of its
// result's last place (shift: that place's exponent less the magnitude's). U is the magnitude's
// type, 64 or 128 bits wide (kBits). shift >= kBits (only where the unit lies above the whole
// magnitude) gives 1 only past half a unit; shift <= 0 is exact where the callers use it (the
// significand stays below 2^precision).
template <class U, int kBits>
NVFP4_HD inline U round_to_unit(U mag, int shift) {
  if (shift <= 0) return mag << (-shift);
  if (shift >= kBits) return (shift == kBits && mag > (static_cast<U>(1) << (kBits - 1))) ? 1 : 0;
  U q = mag >> shift;
  const U rem = mag - (q << shift);
  const U half = static_cast<U>(1) << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  return q;
}

// The binary16 nearest to (-1)^negative * mag * 2^exp2, ties to even, subnormals kept,
// magnitudes >= 65520 to Inf. A zero magnitude gives +0 (an exact zero sum is +0). A magnitude
// below 2^64 (nearly every sum) is rounded in 64-bit arithmetic, by the same steps: 128-bit
// shifts and comparisons were a sixth of a grouped case's reference.
NVFP4_HD inline uint16_t fp16_round(bool negative, u128 mag, int exp2) {
  if (mag == 0) return 0;
  const uint16_t sign = negative ? 0x8000u : 0u;
  const bool narrow = static_cast<uint64_t>(mag >> 64) == 0;
  const int width = narrow ? bit_width_u64(static_cast<uint64_t>(mag)) : bit_width_u128(mag);
  // Value = mag * 2^exp2 lies in [2^(top), 2^(top+1)) with top = width - 1 + exp2.
  const int top = width - 1 + exp2;
  if (top > 15) return sign | 0x7C00u;
  // Units of the result's last place: 2^-24 in the subnormal range, else 2^(top-10).
  const int unit = top < -14 ? -24 : top - 10;
  const int shift = unit - exp2;  // drop this many low bits of mag
  // q is the significand in units of 2^unit (at most 2048); a carry may move it to the next binade.
  uint64_t q = narrow ? round_to_unit<uint64_t, 64>(static_cast<uint64_t>(mag), shift)
                      : static_cast<uint64_t>(round_to_unit<u128, 128>(mag, shift));
  if (unit == -24) {
    // Subnormals and the lowest normal binade (top == -14): the bits are q itself. q < 1024 is
    // a subnormal, 1024 <= q < 2048 the normals 0x0400..0x07FF, and a carry to 2048 gives
    // 0x0800 = 2^-13, the next binade: the encoding is continuous here.
    return sign | static_cast<uint16_t>(q);
  }
  int e = top + 15;  // biased exponent, >= 1 here
  if (q == 2048) {
    q = 1024;
    ++e;
  }
  if (e >= 31) return sign | 0x7C00u;
  return sign | static_cast<uint16_t>((e << 10) | static_cast<int>(q - 1024));
}

// Exact decoding of binary16 bits: the value is (-1)^neg * sig * 2^exp (sig < 2048).
struct Fp16Parts {
  bool negative, inf, nan;
  int sig, exp;
};

NVFP4_HD inline Fp16Parts fp16_parts(uint16_t h) {
  Fp16Parts p{};
  p.negative = (h & 0x8000u) != 0;
  const int e = (h >> 10) & 0x1F;
  const int f = h & 0x3FF;
  p.inf = e == 31 && f == 0;
  p.nan = e == 31 && f != 0;
  if (e == 0) {
    p.sig = f;
    p.exp = -24;
  } else {
    p.sig = f | 0x400;
    p.exp = e - 25;
  }
  return p;
}

// The value of binary16 bits as a double (exact: every binary16 value is a double). Host only.
inline double fp16_to_double(uint16_t h) {
  const Fp16Parts q = fp16_parts(h);
  if (q.nan) return std::numeric_limits<double>::quiet_NaN();
  // sig * 2^exp with the power of two built from its bits (exp in [-24, 5]): the product is exact,
  // and libm's ldexp for every element was a tenth of a quantizer's judging.
  const uint64_t two_bits = static_cast<uint64_t>(q.exp + 1023) << 52;
  double two;
  std::memcpy(&two, &two_bits, sizeof two);
  const double mag = q.inf ? std::numeric_limits<double>::infinity() : static_cast<double>(q.sig) * two;
  return q.negative ? -mag : mag;
}

NVFP4_HD inline bool fp16_is_nan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu); }
// The same result: equal bits, or both NaN (a NaN's payload and sign are no part of the answer).
NVFP4_HD inline bool fp16_same_result(uint16_t x, uint16_t y) { return x == y || (fp16_is_nan(x) && fp16_is_nan(y)); }

}  // namespace nvfp4
