// The oracle of SPEC.md section 3: which output words (fp16, bf16, fp32) are acceptable for an
// exactly known result, under a named tolerance policy: rules 1-4 per element, rule 5 (grouped:
// each group's alpha) and rule 6 (dual GEMM).
#pragma once

#include <cstdint>
#include <string>

#include "reference/accumulation.h"
#include "reference/exact_gemm.h"

namespace nvfp4 {

struct Policy {
  enum class Kind { fp32, exact, fp16_accum, allclose, ulp };
  Kind kind = Kind::fp32;
  double rtol = 0, atol = 0;  // allclose
  int64_t ulps = 0;           // ulp:N
  bool saturates = false;     // kernel clamps to the type's largest finite value where Inf would be expected/accepted
  // How the kernel adds (rules 2 and 3 of fp32 and fp16-accum): IEEE adders, or matrix units
  // (NVFP4_FLAG_MMA_ACCUMULATE), whose rule depends on the device's matrix units: measured where
  // a probe backs it (device_sm 90: Hopper), SPEC's provisional one otherwise (device_sm 0).
  Accumulation accumulation = Accumulation::ieee_fp32;
  int device_sm = 0;

  // "fp32", "matrix-unit" (fp32 accumulators on matrix units, provisional rule), "matrix-unit:SM"
  // (the rule measured for that compute capability), "exact", "fp16-accum",
  // "fp16-accum/matrix-unit[:SM]", "allclose:RTOL:ATOL", "ulp:N"; throws std::invalid_argument.
  static Policy parse(const std::string& text);
  // The policy SPEC.md section 5's flags call for (NVFP4_FLAG_EXACT -> exact, FP16_ACCUMULATE ->
  // fp16-accum, else fp32; MMA_ACCUMULATE -> the matrix-unit model; SATURATES sets saturates).
  static Policy for_flags(uint32_t flags);
  // This policy with another accumulation model (for kinds other than fp32 and fp16-accum, the
  // model changes nothing).
  Policy with_accumulation(Accumulation a) const;
  // Whether the accumulation model takes part in this policy's rules.
  bool models_accumulation() const { return kind == Kind::fp32 || kind == Kind::fp16_accum; }
  // The two numbers rules 2 and 3 use.
  const AccumulationRule& rule() const {
    return accumulation == Accumulation::matrix_unit ? matrix_unit_rule(device_sm) : kIeeeFp32Rule;
  }
  std::string name() const;
};

// Rule 2 of SPEC.md section 3: S < 2^p * g (p = 24 for IEEE FP32, the matrix-unit rule's kept
// bits for matrix units) and |alpha| a power of two (-2^e counts: negation is exact), and, beyond
// the SPEC's words, g*|alpha| and S*|alpha| inside FP32's normal range so that no partial sum can
// underflow or overflow. False for NaN elements.
bool exact_regime(const ExactElement& e, float alpha, const AccumulationRule& rule = kIeeeFp32Rule);

// What the policy tests, per element (x = alpha*r, or v = silu(G)*U for dual GEMM). `error` and
// `bound` are in the policy's own terms:
// fp32 / fp16-accum / exact: error = |c - x|, bound = the allowed error (rule 3, or rule 6's
//   B + ulp_out/2), or in the exact regime the half ulp_out at x (only RN_out itself is
//   accepted there; dual GEMM has no exact regime, under `exact` too);
// allclose: error = |c - RN_out(x)|, bound = ATOL + RTOL*|RN_out(x)|;
// ulp:N: error_ulps = the number of steps of the output type between c and RN_out(x), bound = N ulps.
// An accepted Inf (overflow) has error 0; a NaN where none belongs, or the reverse, error Inf.
struct ElementVerdict {
  bool ok = true;
  bool exact_regime = false;  // only the bit-exact RN_out(x) was acceptable
  bool unjudged = false;      // rule 6 has no bound here (G or U at FP32's overflow threshold): passes
  double expected = 0;        // RN_out(x) as a double (NaN when the element must be NaN)
  uint32_t expected_bits = 0; // RN_out(x), a word of the output type
  double bound = 0;           // see above
  double error = 0;           // see above (Inf when a NaN/Inf mismatches)
  double error_ulps = 0;      // error in ulps of the output type at the expected value
  double error_over_bound = 0;
};

// Rules 1-4 for one element of a GEMV, GEMM or group (with that group's alpha); `actual` is a
// word of `type`.
ElementVerdict judge_element(const ExactElement& e, float alpha, uint32_t actual, const Policy& policy, OutType type);
// The same for FP16 outputs.
ElementVerdict judge_element(const ExactElement& e, float alpha, uint16_t actual, const Policy& policy);
// Rule 6 for one dual GEMM element: g and u are G's and U's exact sums, d = dual_value(g, alpha,
// u, alpha2).
ElementVerdict judge_dual_element(const ExactElement& g, const ExactElement& u, const DualValue& d, float alpha,
                                  float alpha2, uint32_t actual, const Policy& policy, OutType type);

// What rules 1-3 and 6 say of output element `index` of p before any rounding to an output
// type: the value a block-scaled output quantizes (rule 8). nan: rule 1; exact: rule 2 or the
// `exact` policy, the value is `fp32` (RN_fp32 of the exact one, what an FP32 accumulator holds
// there); otherwise within x +- spread (Inf where rule 6 has no bound). allclose and ulp bound
// rounded outputs only: for them the interval is the fp32 policy's.
struct OutputInterval {
  bool nan = false, exact = false;
  uint32_t fp32 = 0;
  long double x = 0, spread = 0;
};
OutputInterval output_interval(const Problem& p, const ExactResult& ref, int64_t index, const Policy& policy);
// The same with the element's alpha given (output_alpha's): finding a grouped problem's group
// walks the groups, once per element otherwise.
OutputInterval output_interval(const Problem& p, const ExactResult& ref, int64_t index, const Policy& policy,
                               float alpha);
// The alpha output element `index` is scaled by: its group's for a grouped problem, else p's.
float output_alpha(const Problem& p, int64_t index);

struct OracleSummary {
  int64_t elements = 0, failing = 0, exact_regime = 0;
  int64_t unjudged = 0;  // elements that passed because rule 6 has no bound for them
  bool any_failure() const { return failing > 0; }
  // First failing element in output order: its group (-1 unless grouped), batch, row and column
  // within its GEMM, and its index in the outputs (as in ExactResult).
  int64_t first_g = -1, first_b = -1, first_i = -1, first_j = -1, first_index = -1;
  ElementVerdict first;                               // its verdict
  uint32_t first_actual = 0;
  double max_error_ulps = 0, max_error_over_bound = 0;
};

// Judges every output of p against ref (rules 1-6 as p's op calls for): c holds p.c_elems()
// 16-bit words (fp16 or bf16 problems; throws std::invalid_argument for fp32), words any type's
// words, in output order (grouped: the groups' outputs one after another).
OracleSummary judge(const Problem& p, const ExactResult& ref, const uint16_t* c, const Policy& policy);
// One output element of p (index in output order) judged as judge_words judges it.
ElementVerdict judge_output(const Problem& p, const ExactResult& ref, int64_t index, uint32_t actual,
                            const Policy& policy);
OracleSummary judge_words(const Problem& p, const ExactResult& ref, const uint32_t* words, const Policy& policy);

}  // namespace nvfp4
