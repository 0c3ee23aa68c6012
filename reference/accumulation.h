// Accumulation models (SPEC.md section 3, revision 2): how a kernel adds decides which outputs
// the oracle must accept. Each model is two numbers the oracle's rules 2 and 3 use.
#pragma once

#include <cstdint>
#include <string>

namespace nvfp4 {

enum class Accumulation {
  ieee_fp32,    // CUDA-core FADD/FFMA: every addition rounded to nearest (the default)
  matrix_unit,  // tensor-core MMA with FP32 accumulators: aligned, truncated addends (flag bit 6)
};

struct AccumulationRule {
  // Rule 2: the output must be bit-exact when S < 2^exact_bits * g (every addend and partial
  // sum then fits the adder without losing a bit).
  int exact_bits;
  // Rule 3: Higham's bound is taken with t' = t_factor * t nonzero products.
  int t_factor;
};

// IEEE FP32: 24 significand bits; each addition loses at most u = 2^-23 relative, so t' = t.
inline constexpr AccumulationRule kIeeeFp32Rule{24, 1};

// Matrix units. An adder that aligns the addends of one instruction to the largest and keeps p
// bits below its leading bit, truncating the rest, loses less than 2^(1-p) * S on each nonzero
// product and on the incoming partial sum, and less than u * S when it truncates its result.
// SPEC revision 2 assumes p >= 22: over t steps that is less than
// t * (2 * 2^-21 + 2^-23) * S = 9t * u * S, so t' = 9t (3t would do with p >= 24). Exact when
// S < 2^22 * g: every addend and partial sum is then a multiple of g below 2^22 * g, which 22
// kept bits hold. Tightened only where docs/MATRIX_UNITS.md's measurements prove it.
inline constexpr AccumulationRule kMatrixUnitRule{22, 9};

inline const AccumulationRule& rule_for(Accumulation a) {
  return a == Accumulation::matrix_unit ? kMatrixUnitRule : kIeeeFp32Rule;
}

// "ieee-fp32" | "matrix-unit": the names reports and the JSON use.
inline std::string to_string(Accumulation a) {
  return a == Accumulation::matrix_unit ? "matrix-unit" : "ieee-fp32";
}

}  // namespace nvfp4
