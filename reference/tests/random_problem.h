// Seeded random data for the reference's tests (the harness's generators are not reachable
// from reference/).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "reference/problem.h"

namespace nvfp4 {

inline std::vector<uint8_t> random_bytes(std::mt19937_64& rng, int64_t n) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Scale bytes that are never NaN, over the whole finite range or a narrow one (2^-2 .. 2^1).
inline std::vector<uint8_t> random_scales(std::mt19937_64& rng, int64_t n, bool narrow) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& b : v) {
    do {
      b = narrow ? static_cast<uint8_t>(0x28 + rng() % 0x20) : static_cast<uint8_t>(rng());
    } while ((b & 0x7F) == 0x7F);
  }
  return v;
}

// Scales narrow or over the whole range: `narrow` 1 or 0, -1 for a coin flip.
inline Problem random_gemm(std::mt19937_64& rng, OutType type, int64_t m, int64_t n, int64_t k, float alpha,
                           int narrow_scales = -1) {
  Problem p;
  p.op = Op::gemm;
  p.m = m, p.n = n, p.k = k, p.l = 1;
  p.out_type = type;
  p.alpha = alpha;
  const bool narrow = narrow_scales < 0 ? rng() % 2 : narrow_scales == 1;
  p.a = random_bytes(rng, p.a_bytes());
  p.b = random_bytes(rng, p.b_bytes());
  p.sfa = random_scales(rng, p.sfa_bytes(), narrow);
  p.sfb = random_scales(rng, p.sfb_bytes(), narrow);
  return p;
}

}  // namespace nvfp4
