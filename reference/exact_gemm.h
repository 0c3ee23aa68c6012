// The exact NVFP4 reference: integer accumulation in units of 2^-20 (SPEC.md section 1), one
// rounding to the output type at the end, and per output element what the oracle needs. GEMV,
// GEMM, grouped GEMM (each group an l = 1 GEMM with its alpha) and dual GEMM (G and U exact,
// silu(G) * U to better than 2^-60 relative before the one rounding).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "reference/fp16.h"
#include "reference/long_double_bits.h"
#include "reference/prefault.h"
#include "reference/problem.h"
#include "reference/quantize.h"

namespace nvfp4 {

struct MxElement;  // exact_mx.h

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
// RN_out(alpha * r) for any output type, the type's quiet NaN when e.nan; for fp16 exactly
// round_result above.
uint32_t round_result(const ExactElement& e, float alpha, OutType type);

// A dual GEMM element beyond G and U's exact sums: silu(G), U and v = silu(G) * U in long double
// (64-bit significand), v within 2^-60 relative of the exact value (reference/tests shows it
// against __float128). Zeros: silu(0) = +0; an exp(-G) beyond long double's range gives -0.
// Trivial (no member initialisers): a reference's vector of them is zeroed as plain memory, not
// by three x87 stores an element (a fifteenth of a small-k dual reference). DualValue{} is zero.
struct DualValue {
  long double silu_g, u, v;
};
// From G = alpha * g.sum * 2^-20 and U = alpha2 * u.sum * 2^-20 (NaN flags ignored).
DualValue dual_value(const ExactElement& g, float alpha, const ExactElement& u, float alpha2);
// An exact sum (-1)^negative * mag * 2^exp2 before alpha (mag of any width: bits beyond 103 are
// folded into a sticky bit, far below the 2^-60 that v keeps), for sums of other references.
struct DualSum {
  bool negative = false;
  u128 mag = 0;
  int exp2 = 0;
};
DualValue dual_value(const DualSum& g, float alpha, const DualSum& u, float alpha2);
// RN_out(v), once: +0 when U or G is exactly zero, else v's sign (also when v underflows long
// double); the type's quiet NaN when `nan`.
uint32_t round_dual(const DualValue& d, bool nan, OutType type);
// Where round_dual gives +0 whatever v's sign: U or G exactly zero (silu(G) is then +0).
inline bool dual_word_is_plus_zero(const DualValue& d) {
  return ld_is_zero(d.u) || (ld_is_zero(d.silu_g) && !ld_signbit(d.silu_g));
}

// Every element's facts; a large array's pages are faulted in parallel (prefault.h).
using ExactElements = std::vector<ExactElement, PrefaultAllocator<ExactElement>>;

// The reference of a problem. Outputs in C order, a grouped problem's groups one after another
// (the packed C), `group_offset` says where each starts.
//
// Output words: `c` holds the 16-bit words of fp16 and bf16 problems (FP16 bits for the default
// fp16, as the harness's 16-bit output buffers hold them), `c32` the words of fp32 problems; the
// other one is empty. word(i) reads either. (One vector of uint32_t words for every type would
// double the reference's output memory for the common fp16 case and break every caller.)
struct ExactResult {
  OutType out_type = OutType::fp16;
  ExactElements elems;              // C order ((b*m + i)*n + j); dual_gemm: G's
  std::vector<uint16_t> c;          // fp16 / bf16 words: RN_out(alpha * r), or RN_out(v)
  std::vector<uint32_t> c32;        // fp32 words (nvfp4: the FP32 values it quantizes)
  std::vector<int64_t> group_offset;  // grouped_gemm: G + 1 element offsets; else {0, size}
  ExactElements elems2;               // dual_gemm: U's (alpha2)
  std::vector<DualValue, PrefaultAllocator<DualValue>> dual;  // dual_gemm
  // quantize: the reference quantization (Q, SFQ, encode factors, global scales); the vectors
  // above stay empty. Shared: the reference of a large case is not copied with the outcome.
  std::shared_ptr<const QuantResult> quant;
  // Problems with MX operands (exact_mx.h): every element's facts, which the oracle judges by
  // rule 9 instead of elems (whose NaN flags alone are set). Null for NVFP4 problems.
  std::shared_ptr<const std::vector<MxElement>> mx;
  // dual_gemm with MX operands: U's facts beside G's in mx (alpha2), `dual` as for NVFP4.
  std::shared_ptr<const std::vector<MxElement>> mx2;

  size_t size() const { return elems.size(); }
  uint32_t word(size_t i) const { return out_word_bytes(out_type) == 4 ? c32[i] : c[i]; }
  std::vector<uint32_t> words() const;
};

// Computes every element of p exactly (scales linear, p must have data; throws
// std::invalid_argument otherwise). OpenMP across output rows; the result does not depend on
// the thread count.
ExactResult exact_gemm(const Problem& p);
// A dual GEMM's reference from G's and U's exact sums (g and u, as exact_gemm computes them for
// B and B2, however they were computed): silu(G), U, v and the words, as exact_gemm gives them.
ExactResult dual_from_sums(const Problem& p, ExactElements g, ExactElements u);
// The quantizer's reference (quantize_reference) as an ExactResult: `quant` set, no elements.
// Throws std::invalid_argument for an invalid problem or one of another op.
ExactResult exact_quantize(const Problem& p);

// Compares the expect lines of p (expect, or every group's expect.g) with ref, element by
// element; any two NaNs of the output type are the same result (SPEC rule 1), every other word
// must be equal bit for bit. `compared` counts the elements that have an expect word.
struct ExpectComparison {
  int64_t compared = 0, differing = 0;
  std::vector<int64_t> first;  // indices (as in ExactResult) of the first differing elements
  bool any_expect = false;     // p has at least one expect line
};
ExpectComparison compare_expect(const Problem& p, const ExactResult& ref, size_t max_listed = 10);
// The expect word of element `index` (as in ExactResult); p must have one there.
uint32_t expect_word(const Problem& p, int64_t index);
// Records ref's words as p's expect lines (expect, or expect.g of every non-empty group).
void set_expect(Problem& p, const ExactResult& ref);

}  // namespace nvfp4
