// The exact NVFP4 GEMV/GEMM reference: integer accumulation in units of 2^-20 (SPEC.md section 1),
// one rounding to FP16 at the end, and per output element what the oracle needs.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/fp16.h"
#include "reference/problem.h"

namespace nvfp4 {

// Everything the oracle knows about one output element. All sums are exact, in units of 2^-20
// (every product a*sa*b*sb is an integer multiple of that).
struct ExactElement {
  i128 sum = 0;          // r = sum * 2^-20 (before alpha)
  u128 abs_sum = 0;      // S = abs_sum * 2^-20: sum of |product|
  int64_t nonzero = 0;   // t: number of nonzero products
  int min_tz = 128;      // g = 2^(min_tz - 20): largest power of two dividing every nonzero
                         // product; 128 when there is none
  bool nan = false;      // some scale used by this element is NaN (then sum, abs_sum, nonzero
                         // and min_tz describe the blocks whose scales are not NaN)
};

// RN16(alpha * r) for one element, NaN (0x7E00) when e.nan. alpha must be finite (an infinite
// one gives IEEE's answer: NaN for r == 0, else Inf). An exact zero, alpha = +-0 included, is +0.
uint16_t round_result(const ExactElement& e, float alpha);

struct ExactResult {
  std::vector<ExactElement> elems;  // C order: ((b*m + i)*n + j)
  std::vector<uint16_t> c;          // RN16(alpha * r), FP16 bits
};

// Computes every element of p exactly (p.sfa / p.sfb are linear, p must have data).
// OpenMP across output rows; the result does not depend on the thread count.
ExactResult exact_gemm(const Problem& p);

}  // namespace nvfp4
