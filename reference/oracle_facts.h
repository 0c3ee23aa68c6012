// The oracle's rules 1-4 over an element's facts (SPEC.md section 3: r, S, t, g, NaN), whatever
// arithmetic produced them: the NVFP4 reference's 2^-20 integers and the block-scaled
// reference's wide accumulators (rule 9) are judged by the same code.
#pragma once

#include <cstdint>

#include "reference/oracle.h"

namespace nvfp4 {

struct SumFacts {
  bool nan = false;        // rule 1: the output must be NaN
  bool inf = false;        // an Inf product (IEEE): only `expected`, that Inf, is acceptable
  uint32_t expected = 0;   // RN_out(alpha * r), a word of the output type
  long double r = 0;       // r before alpha, to 2^-63 relative
  long double abs_sum = 0; // S, to 2^-63 relative
  bool any_nonzero = false;
  int64_t nonzero = 0;     // t
  int g_exp = 0;           // g = 2^g_exp (meaningful when any_nonzero)
  int s_exp = 0;           // S < 2^s_exp exactly (meaningful when any_nonzero)
};

// The facts of an NVFP4 reference element.
SumFacts sum_facts(const ExactElement& e, float alpha, OutType type);
// judge_element over facts: rules 1-4, the policy's accumulation rule, saturation.
ElementVerdict judge_sum(const SumFacts& f, float alpha, uint32_t actual, const Policy& policy, OutType type);
// Rule 6 over G's and U's facts: g_value is alpha * G (to 2^-63 relative), `expected` RN_out(v)
// or the type's NaN; an Inf G or U (facts' inf) has no bound, as G or U beyond FP32's range.
ElementVerdict judge_dual_sum(const SumFacts& g, const SumFacts& u, long double g_value, const DualValue& d, float alpha,
                              float alpha2, uint32_t expected, uint32_t actual, const Policy& policy, OutType type);

}  // namespace nvfp4
