// x87's 80-bit long double, read and built from its bits: 64 significand bits with the integer
// bit explicit, then the sign and a 15-bit exponent biased by 16383. libm's ldexpl, frexpl and
// ilogbl, and conversions of long double to 128-bit integers, are slow enough to show in the
// reference and the oracle; where long double has another format the callers use libm.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace nvfp4 {

#if defined(__x86_64__) && LDBL_MANT_DIG == 64
inline constexpr bool kX87LongDouble = true;
#else
inline constexpr bool kX87LongDouble = false;
#endif

// v's fields read from its bytes in memory (x87 only): taken by reference, so that nothing is
// loaded onto the x87 stack (its loads, compares and stores dominated code that only tests
// signs and zeros of stored values).
struct X87Bits {
  uint64_t significand = 0;
  uint16_t sign_exponent = 0;
  int exponent() const { return sign_exponent & 0x7FFF; }
  bool negative() const { return (sign_exponent >> 15) != 0; }
  bool zero() const { return exponent() == 0 && significand == 0; }
};
inline X87Bits x87_bits(const long double& v) {
  X87Bits b;
  std::memcpy(&b.significand, &v, sizeof b.significand);
  std::memcpy(&b.sign_exponent, reinterpret_cast<const unsigned char*>(&v) + 8, sizeof b.sign_exponent);
  return b;
}

// A stored value's sign, zero and finiteness: from its bytes on x87, from libm elsewhere.
inline bool ld_signbit(const long double& v) {
  if constexpr (kX87LongDouble) return x87_bits(v).negative();
  return std::signbit(v);
}
inline bool ld_is_zero(const long double& v) {
  if constexpr (kX87LongDouble) return x87_bits(v).zero();
  return v == 0;
}
inline bool ld_is_finite(const long double& v) {
  if constexpr (kX87LongDouble) return x87_bits(v).exponent() != 0x7FFF;
  return std::isfinite(v);
}

// 2^e, exactly, for |e| < 16000.
inline long double pow2l(int e) {
  if (!kX87LongDouble) return std::ldexp(1.0L, e);
  long double v = 0;
  const uint64_t significand = uint64_t(1) << 63;
  const uint16_t exponent = static_cast<uint16_t>(e + 16383);
  std::memcpy(&v, &significand, sizeof significand);
  std::memcpy(reinterpret_cast<unsigned char*>(&v) + 8, &exponent, sizeof exponent);
  return v;
}

}  // namespace nvfp4
