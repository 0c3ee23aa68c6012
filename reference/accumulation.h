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

// Matrix units (NVFP4_FLAG_MMA_ACCUMULATE) whose adders have not been measured: SPEC revision 2's
// provisional rule, for an adder keeping p >= 22 bits below the largest addend and truncating the
// rest and its result: less than 2^(1-p) S lost on each nonzero product and on the incoming
// partial sum, less than u S when the result is truncated, t (2 * 2^-21 + 2^-23) S = 9t u S in all;
// exact when S < 2^22 g. Blackwell's block-scaled FP4 MMA is judged by this until its probe has
// run (docs/BLACKWELL.md).
inline constexpr AccumulationRule kMatrixUnitProvisionalRule{22, 9};

// Hopper's matrix units, measured. Measured on the H200 for every instruction a kernel may use with FP16 or BF16
// operands and FP32 accumulators (mma.sync m16n8k16, wgmma m64nNk16 with A from registers or
// shared memory; reference/matrix_unit_model.h, docs/MATRIX_UNITS.md; the model matches 2 x 10^6
// random vectors each bit for bit): one fused addition of C and the instruction's products; every
// nonzero addend is aligned at E, the largest alignment exponent among them (ea + eb for a
// product, C's exponent), and cut toward zero to a multiple of w = 2^(E - 25) (p = 25); the exact
// sum T of the cut addends is truncated (RZ) to FP32. Proof that this obeys the IEEE FP32 numbers, {24, 1}:
//
// Conditions, which a kernel declaring the flag is responsible for: (A) every operand is zero or
// normal: an FP16 subnormal operand aligns its product at -14 + eb, up to 2^10 above the
// product's value, so the window cuts C early (gemm_tc's seed-11 failure, evidence/); (B) every
// product, accumulator and partial result is zero or of magnitude in [2^-126, 2^128). NVFP4 data
// dequantised to FP16 or BF16 meets both without tile scaling: a*sa lies in [2^-10, 2688], and
// products and partial sums are multiples of 2^-20 below 2^63 (SPEC section 1).
//
// One instruction, n nonzero products, addends x_i (C and the products), S_j = sum |x_i|, and
// u = 2^-23 as in SPEC section 3:
//  (1) The addends aligned at E lose nothing: C holds 24 significant bits from 2^E down to
//      2^(E - 23), a product of normal operands at most 22 from 2^(E + 1) down to 2^(E - 20), both
//      multiples of w. So at most n addends are cut, each by less than w; and that addend's
//      magnitude >= 2^E gives w <= 2^-25 S_j = S_j u / 4.
//  (2) T is a multiple of w. If ulp(T) >= w (FP32's ulp), RZ moves T toward zero by at most
//      ulp(T) - w. If ulp(T) < w, |T| < 2^(E - 2) and T has at most 23 significant bits: exact.
//  (3) The error |d - (C + sum p)| is therefore: 0 for n = 0 (C alone passes unchanged); for
//      n = 1, one cut c (|c| < w) plus the rounding (at most ulp(T) - w, or 0): less than ulp(T)
//      <= u |T| <= u S_j whatever their signs, or less than w; for n >= 2, less than
//      ulp(T) - w + n w <= u S_j + (n - 1) S_j u / 4 <= n u S_j. In every case at most n u S_j:
//      what n IEEE FP32 additions may lose.
//  (4) A kernel's chain (C_1 = 0, C_{j+1} = d_j) is recursive summation where block j costs at
//      most n_j u (|d_{j-1}| + its products' absolute sum). With e_j = |d_j - s_j| and B_j the
//      products' absolute sum so far, e_j <= (1 + n_j u) e_{j-1} + n_j u B_j; since
//      1 + n u <= (1 + u)^n, induction gives e <= ((1 + u)^t - 1) S <= gamma_t S (Higham, Accuracy
//      and Stability of Numerical Algorithms, lemma 3.1), t = the nonzero products: t' = t. Chains
//      combined by FP32 additions stay within gamma_t S as IEEE sums do.
//  (5) Exact regime: if S < 2^24 g, every partial sum is exact by induction: it and the products
//      are multiples of g; 2^E <= S < 2^24 g makes w < g / 2, a power of two dividing g, so
//      nothing is cut; T, a multiple of g below 2^24 g, is exact in FP32. exact_bits = 24.
// 25 kept bits is what makes (5) reach FP32's own 24 bits; (3) would hold from p = 23 on.
//
// Not covered: Hopper's FP8 wgmma (e4m3 or e5m2 operands) keeps 13 bits and cuts its result to 13
// fraction bits, C alone included (kH200WgmmaE4m3). Its error grows with the number of
// instructions, not of products, so no t' = factor * t holds: a kernel accumulating across FP8
// instructions in the tensor core must not declare the flag. One FP8 instruction from a zero C
// is exact when S < 2^13 g (32 E2M1 x E2M1 products always are); its results added in FP32 obey
// the IEEE rule.
inline constexpr AccumulationRule kMatrixUnitRule{24, 1};

// The matrix-unit rule for a CUDA device of this compute capability (major * 10 + minor): the
// measured one where a probe of its matrix units backs it (Hopper, 9.x), else the provisional one
// (0: no device known, e.g. a host kernel declaring the flag).
inline const AccumulationRule& matrix_unit_rule(int compute_capability) {
  return compute_capability / 10 == 9 ? kMatrixUnitRule : kMatrixUnitProvisionalRule;
}

// "ieee-fp32" | "matrix-unit": the names reports and the JSON use.
inline std::string to_string(Accumulation a) {
  return a == Accumulation::matrix_unit ? "matrix-unit" : "ieee-fp32";
}

}  // namespace nvfp4
