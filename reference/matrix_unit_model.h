// A bit-accurate software model of one matrix-unit (tensor-core) dot-product-accumulate:
// d = c + sum_k a[k] * b[k] for one output element of an MMA instruction, as the hardware computes
// it, parameterised per instruction; the measured parameters of the H200's instructions; and the
// check of SPEC.md section 3's matrix-unit rule on one such dot product (docs/MATRIX_UNITS.md).
//
// The model follows Khattak and Mikaitis, "Accurate Models of NVIDIA Tensor Cores"
// (arXiv:2512.07004) and Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor
// cores" (PeerJ CS 2021): products are exact, the addends of one fused addition (a block of
// products, and C) are aligned to a reference exponent and cut to a fixed window below it, summed
// exactly in fixed point, and the sum is rounded once to FP32.
#pragma once

#include <cstdint>
#include <string>

#include "reference/accumulation.h"

namespace nvfp4 {

// Operand formats of the instructions modelled. Operands are passed as raw bit patterns.
enum class MmaOperand : uint8_t {
  fp16,  // IEEE binary16. Sign: 1, exponent: 5, mantissa: 10, bias: 15; emin = -14.
  bf16,  // bfloat16. Sign: 1, exponent: 8, mantissa: 7, bias: 127; emin = -126.
  e4m3,  // E4M3FN. Sign: 1, exponent: 4, mantissa: 3, bias: 7; emin = -6; no Inf, NaN = S.1111.111.
  s8,    // two's-complement int8; C and D are int32 (the instruction wraps modulo 2^32)
};

// How an addend's bits below the adder's window are dropped.
enum class WindowRounding : uint8_t {
  toward_zero,       // the magnitude is truncated (sign-magnitude adder)
  toward_minus_inf,  // the two's-complement value is truncated
  nearest_even,
};

enum class ResultRounding : uint8_t { toward_zero, nearest_even };

// Where C (the accumulator input) enters.
enum class CEntry : uint8_t {
  with_products,   // aligned and cut together with the first block's products
  after_products,  // the block's products are fused alone; their exact sum is then added to C
                   // in a second two-addend fused addition with the same window
};

// The exponent a subnormal operand contributes to the alignment of its product.
enum class SubnormalOperands : uint8_t {
  minimum_exponent,  // emin, as the encoding stores it: the product is aligned as if it were up to
                     // 2^mantissa_bits larger than it is, so the window cuts other addends early
  normalized,        // the value's true exponent
  flush_to_zero,     // the operand is read as zero
};

enum class ZeroSign : uint8_t {
  ieee,           // -0 only when every addend is -0 (C and every product), else +0
  always_positive,
};

struct MatrixUnitModel {
  MmaOperand operand;
  int k;      // products per output element in one instruction
  int block;  // products in one fused addition; the k / block additions are chained in k order,
              // each rounded to FP32 and passed on as the next one's C
  // p: fraction bits the fused adder keeps below 2^E, E = the largest alignment exponent among
  // the nonzero addends (a product's is ea + eb, the sum of its operands' exponents, so a product
  // with significand in [2, 4) keeps p + 1 bits of its own; C's is its FP32 exponent).
  int kept_bits;
  WindowRounding window_rounding;
  ResultRounding result_rounding;
  CEntry c_entry;
  SubnormalOperands subnormal_operands;
  ZeroSign zero_sign;
  int product_bits;          // 0: products exact; else each product's significand is cut to
                             // this many bits (toward zero) before alignment
  int result_fraction_bits;  // 23: FP32; fewer: the result is cut to this many fraction bits
  bool overflow_to_inf;      // a rounded result >= 2^128 becomes Inf (else the largest finite)
  // The reference exponent E is raised to at least this (Khattak and Mikaitis's min_exp_limit):
  // seen only where every addend is below 2^-133, deep in FP32's subnormal range.
  int alignment_floor;
};

inline constexpr int kNoAlignmentFloor = -100000;

// Measured on the H200 (sm_90a) by probe/matrix_unit_probe, 2026-12-01: the model search leaves
// exactly these parameters, and they match every output of 2 x 10^6 random vectors per instruction
// (docs/MATRIX_UNITS.md has the runs). The wgmma models hold for A from registers and from shared
// memory alike. Every floating-point instruction there: exact products, one
// fused addition per instruction (block == k) with C aligned together with the products, a window
// of 25 bits below the largest alignment exponent, addends truncated toward zero, the sum
// truncated (RZ) to FP32, subnormal operands aligned at emin (the quirk behind gemm_tc's seed-11
// failure), and an exact zero always +0, even from -0 + (-0) products. What differs between
// Hopper's instructions is the operand type, k, the bits kept and the result's fraction bits.
constexpr MatrixUnitModel hopper_model(MmaOperand operand, int k, int kept_bits, int result_fraction_bits,
                                       bool overflow_to_inf = true) {
  return {operand,
          k,
          k,
          kept_bits,
          WindowRounding::toward_zero,
          ResultRounding::toward_zero,
          CEntry::with_products,
          SubnormalOperands::minimum_exponent,
          ZeroSign::always_positive,
          0,
          result_fraction_bits,
          overflow_to_inf,
          -133};
}
// mma.sync.m16n8k16.f32.{f16,bf16} and wgmma.m64n8k16.f32.{f16,bf16}: the same model.
inline constexpr MatrixUnitModel kH200MmaF16 = hopper_model(MmaOperand::fp16, 16, 25, 23);
inline constexpr MatrixUnitModel kH200MmaBf16 = hopper_model(MmaOperand::bf16, 16, 25, 23);
inline constexpr MatrixUnitModel kH200WgmmaF16 = kH200MmaF16;
inline constexpr MatrixUnitModel kH200WgmmaBf16 = kH200MmaBf16;
// wgmma.m64n8k32.f32.e4m3.e4m3: FP8 on Hopper keeps 13 bits (the "FP22" accumulator DeepSeek-V3
// reported): C is cut too.
inline constexpr MatrixUnitModel kH200WgmmaE4m3 = hopper_model(MmaOperand::e4m3, 32, 13, 13);
// mma.sync.m16n8k{32,16}.s32.s8.s8.s32: exact, modulo 2^32 (no .satfinite); the floating-point
// fields do not apply. k16 is the shape gpu_reference/ uses.
inline constexpr MatrixUnitModel kH200MmaS8 = hopper_model(MmaOperand::s8, 32, 0, 0, false);
inline constexpr MatrixUnitModel kH200MmaS8K16 = hopper_model(MmaOperand::s8, 16, 0, 0, false);

// d for one output element: a[0..k) and b[0..k) are operand bit patterns (a row of A, a column of
// B), c and the result are FP32 bits (int32 for s8). NaN results are 0x7FFFFFFF.
uint32_t matrix_unit_dot(const MatrixUnitModel& model, const uint32_t* a, const uint32_t* b, uint32_t c);

// Whether two results are the same: equal bits, or both NaN.
bool same_result(MmaOperand operand, uint32_t x, uint32_t y);

// The oracle's view of one dot product d = c + sum a[k] b[k], C counted as one more addend.
struct DotFacts {
  bool special = false;       // a NaN or Inf operand or C: no rule applies
  int addends = 0;            // t: nonzero products, plus one when C != 0
  double abs_sum = 0;         // S = |C| + sum |a[k] b[k]| (nearest double)
  int g_exp = 0;              // g = 2^g_exp: the largest power of two dividing every nonzero addend
  double exact = 0;           // the exact value (nearest double)
  // The conditions the rule's proof needs (docs/MATRIX_UNITS.md): every operand zero or normal,
  // every nonzero product and C, and the exact sum, zero or in FP32's normal range.
  bool in_domain = false;
};
DotFacts dot_facts(MmaOperand operand, int k, const uint32_t* a, const uint32_t* b, uint32_t c);

struct RuleVerdict {
  bool applies = false;       // in_domain and not special
  bool exact_regime = false;  // S < 2^exact_bits * g
  bool holds = false;         // exact regime: d == exact; else |d - exact| <= gamma_{t'} S
  double error = 0;           // |d - exact| (nearest double of the exact difference)
  double bound = 0;           // 0 in the exact regime, else gamma_{t'} S
};
// SPEC.md section 3's rules 2 and 3 for one instruction's dot product, C counted as an addend:
// t = DotFacts::addends, t' = rule.t_factor * t, u = 2^-23, gamma_n = n u / (1 - n u).
RuleVerdict check_rule(const AccumulationRule& rule, MmaOperand operand, int k, const uint32_t* a,
                       const uint32_t* b, uint32_t c, uint32_t d);

const char* to_string(MmaOperand operand);
std::string describe(const MatrixUnitModel& model);  // one line: every parameter by name

// The value of an operand bit pattern (NaN for NaN, +-Inf for Inf), and of FP32 bits.
double operand_value(MmaOperand operand, uint32_t bits);
double fp32_value(uint32_t bits);

}  // namespace nvfp4
