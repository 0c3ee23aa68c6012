// RN16(alpha * sum * 2^-20) for an exact integer sum: the one final rounding of the exact
// references, shared by the CPU reference and the CUDA one (header-only, __host__ __device__).
#pragma once

#include <cstdint>
#include <cstring>

#include "reference/fp16.h"

namespace nvfp4 {

// A finite FP32 as (-1)^negative * sig * 2^exp with an integer sig < 2^24 (0 for +-0).
struct Fp32Parts {
  bool negative;
  uint32_t sig;
  int exp;
};

NVFP4_HD inline Fp32Parts fp32_parts(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  Fp32Parts p{};
  p.negative = (bits >> 31) != 0;
  const int e = static_cast<int>((bits >> 23) & 0xFF);
  const uint32_t frac = bits & 0x7FFFFFu;
  if (e == 0) {
    p.sig = frac;
    p.exp = -149;
  } else {
    p.sig = frac | 0x800000u;
    p.exp = e - 150;
  }
  return p;
}

// |sum| < 2^103 so that sum * sig fits in 127 bits; every exact reference sum does (k <= 2^56).
NVFP4_HD inline uint16_t round_scaled_sum(i128 sum, float alpha) {
  const Fp32Parts a = fp32_parts(alpha);
  const bool negative = (sum < 0) != a.negative;
  const u128 mag = static_cast<u128>(sum < 0 ? -sum : sum) * a.sig;
  if (mag == 0) return 0;  // an exact zero is +0, whatever alpha's sign
  return fp16_round(negative, mag, a.exp - 20);
}

}  // namespace nvfp4
