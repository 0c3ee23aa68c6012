// The matrix-unit model (reference/matrix_unit_model.h): each parameter on targeted dot products
// whose result is known by hand, the H200 results the probe recorded (the evidence's inexact step
// among them), and RapidCheck properties that the accumulation rule of reference/accumulation.h
// holds for the measured models, for one instruction and for chains of them as kernels use them,
// and fails for a model that keeps too few bits.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <cstring>
#include <vector>

#include "reference/matrix_unit_model.h"

namespace nvfp4 {
namespace {

uint32_t f32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

// fp16 bits of an exactly representable value (normal or subnormal).
uint32_t h(double v) {
  if (v == 0) return std::signbit(v) ? 0x8000u : 0u;
  const uint32_t sign = v < 0 ? 0x8000u : 0u;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // v = m 2^e, m in [0.5, 1)
  if (e - 1 >= -14) {
    const double frac = std::ldexp(m, 11) - 1024;  // 10 fraction bits
    EXPECT_EQ(frac, std::trunc(frac)) << v << " is not an fp16";
    return sign | (static_cast<uint32_t>(e - 1 + 15) << 10) | static_cast<uint32_t>(frac);
  }
  const double sub = std::ldexp(std::fabs(v), 24);
  EXPECT_EQ(sub, std::trunc(sub)) << v << " is not an fp16";
  return sign | static_cast<uint32_t>(sub);
}

// bf16 bits of an exactly representable value.
uint32_t bf(float v) {
  const uint32_t u = f32(v);
  EXPECT_EQ(u & 0xFFFFu, 0u) << v << " is not a bf16";
  return u >> 16;
}

// A model like the H200's fp16 mma with one parameter changed by `edit`.
template <typename Edit>
MatrixUnitModel variant(Edit edit) {
  MatrixUnitModel m = kH200MmaF16;
  edit(m);
  return m;
}

// d = c + sum of the listed products (slot, a, b) on a k = 16 instruction.
uint32_t dot16(const MatrixUnitModel& m, std::initializer_list<std::array<double, 3>> slots, float c) {
  std::vector<uint32_t> a(m.k, 0), b(m.k, 0);
  for (const auto& s : slots) {
    a[static_cast<int>(s[0])] = m.operand == MmaOperand::bf16 ? bf(static_cast<float>(s[1])) : h(s[1]);
    b[static_cast<int>(s[0])] = m.operand == MmaOperand::bf16 ? bf(static_cast<float>(s[2])) : h(s[2]);
  }
  return matrix_unit_dot(m, a.data(), b.data(), f32(c));
}

double val(uint32_t bits) { return fp32_value(bits); }

TEST(MatrixUnitModel, DecodesEveryOperandFormat) {
  EXPECT_EQ(operand_value(MmaOperand::fp16, 0x3C00), 1.0);
  EXPECT_EQ(operand_value(MmaOperand::fp16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(operand_value(MmaOperand::fp16, 0xFBFF), -65504.0);
  EXPECT_TRUE(std::isnan(operand_value(MmaOperand::fp16, 0x7E00)));
  EXPECT_EQ(operand_value(MmaOperand::bf16, 0x3F80), 1.0);
  EXPECT_EQ(operand_value(MmaOperand::bf16, 0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(operand_value(MmaOperand::e4m3, 0x7E), 448.0);
  EXPECT_EQ(operand_value(MmaOperand::e4m3, 0x01), std::ldexp(1.0, -9));
  EXPECT_TRUE(std::isnan(operand_value(MmaOperand::e4m3, 0xFF)));
  EXPECT_EQ(operand_value(MmaOperand::s8, 0x80), -128.0);
}

// 1 - 1 + 2^-d: the window of p bits below 2^0 keeps 2^-d for d <= p only.
TEST(MatrixUnitModel, KeepsExactlyKeptBitsBelowTheLargestAddend) {
  for (int p = 22; p <= 27; ++p) {
    const MatrixUnitModel m = variant([&](MatrixUnitModel& x) { x.kept_bits = p; });
    for (int d = 18; d <= 28; ++d) {
      const double small = std::ldexp(1.0, -d);
      const uint32_t got = dot16(m, {{0, 1, 1}, {5, -1, 1}, {9, std::ldexp(1.0, -d / 2), std::ldexp(1.0, d / 2 - d)}}, 0);
      EXPECT_EQ(val(got), d <= p ? small : 0.0) << "p=" << p << " d=" << d;
      // C as the largest addend sets the window the same way.
      const uint32_t got_c = dot16(m, {{3, -1, 1}, {9, std::ldexp(1.0, -d / 2), std::ldexp(1.0, d / 2 - d)}}, 1.0f);
      EXPECT_EQ(val(got_c), d <= p ? small : 0.0) << "p=" << p << " d=" << d;
    }
  }
}

// A product with significand in [2, 4) aligns at ea + eb and keeps one bit more of its own.
TEST(MatrixUnitModel, AlignsProductsAtTheSumOfTheirOperandExponents) {
  const MatrixUnitModel m = kH200MmaF16;  // p = 25
  // 1.5 * 1.5 = 2.25 aligns at 2^0: 2^-25 survives beside it, 2^-26 does not.
  EXPECT_EQ(val(dot16(m, {{0, 1.5, 1.5}, {1, -1.5, 1.5}, {2, std::ldexp(1.0, -12), std::ldexp(1.0, -13)}}, 0)),
            std::ldexp(1.0, -25));
  EXPECT_EQ(val(dot16(m, {{0, 1.5, 1.5}, {1, -1.5, 1.5}, {2, std::ldexp(1.0, -13), std::ldexp(1.0, -13)}}, 0)), 0.0);
}

TEST(MatrixUnitModel, RoundsAddendsAsConfigured) {
  const double small = 3 * std::ldexp(1.0, -27);  // 1.5 units of the p = 25 window... 0.75 of 2^-25
  const double big = 1.5 * std::ldexp(1.0, -25);  // 1.5 units of 2^-25
  auto run = [&](WindowRounding r, double s) {
    const MatrixUnitModel m = variant([&](MatrixUnitModel& x) { x.window_rounding = r; });
    const double half = std::ldexp(1.0, -13);
    return val(dot16(m, {{0, 1, 1}, {1, -1, 1}, {2, s / half, half}}, 0));
  };
  EXPECT_EQ(run(WindowRounding::toward_zero, big), std::ldexp(1.0, -25));
  EXPECT_EQ(run(WindowRounding::toward_zero, -big), -std::ldexp(1.0, -25));
  EXPECT_EQ(run(WindowRounding::toward_minus_inf, -big), -std::ldexp(1.0, -24));
  EXPECT_EQ(run(WindowRounding::toward_minus_inf, -small), -std::ldexp(1.0, -25));
  EXPECT_EQ(run(WindowRounding::nearest_even, big), std::ldexp(1.0, -24));
  EXPECT_EQ(run(WindowRounding::nearest_even, small), std::ldexp(1.0, -25));
  EXPECT_EQ(run(WindowRounding::toward_zero, small), 0.0);
}

TEST(MatrixUnitModel, RoundsTheResultAsConfigured) {
  // 1 + 1.5 * 2^-24: RZ gives 1, RN gives 1 + 2^-23; mirrored for the negative sum.
  const MatrixUnitModel rz = kH200MmaF16;
  const MatrixUnitModel rn = variant([](MatrixUnitModel& x) { x.result_rounding = ResultRounding::nearest_even; });
  const double a = 1.5 * std::ldexp(1.0, -12), b = std::ldexp(1.0, -12);
  EXPECT_EQ(val(dot16(rz, {{0, 1, 1}, {1, a, b}}, 0)), 1.0);
  EXPECT_EQ(val(dot16(rn, {{0, 1, 1}, {1, a, b}}, 0)), 1.0 + std::ldexp(1.0, -23));
  EXPECT_EQ(val(dot16(rz, {{0, -1, 1}, {1, -a, b}}, 0)), -1.0);
  EXPECT_EQ(val(dot16(rn, {{0, -1, 1}, {1, -a, b}}, 0)), -1.0 - std::ldexp(1.0, -23));
  // A tie (1 + 2^-24) goes to even under RN.
  EXPECT_EQ(val(dot16(rn, {{0, 1, 1}, {1, std::ldexp(1.0, -12), b}}, 0)), 1.0);
}

// C = 1 and eight products of 2^-26: lost one by one when aligned together with C (p = 25), kept
// as 2^-23 when the products are summed first.
TEST(MatrixUnitModel, PlacesCAsConfigured) {
  const MatrixUnitModel with = kH200MmaF16;
  const MatrixUnitModel after = variant([](MatrixUnitModel& x) { x.c_entry = CEntry::after_products; });
  std::vector<uint32_t> a(16, 0), b(16, 0);
  for (int x = 0; x < 8; ++x) {
    a[x] = h(std::ldexp(1.0, -13));
    b[x] = h(std::ldexp(1.0, -13));
  }
  EXPECT_EQ(val(matrix_unit_dot(with, a.data(), b.data(), f32(1.0f))), 1.0);
  EXPECT_EQ(val(matrix_unit_dot(after, a.data(), b.data(), f32(1.0f))), 1.0 + std::ldexp(1.0, -23));
}

// 1 at slot 0, 2^-24 at slot 1, -1 at slot 8: one fused addition keeps 2^-24; blocks of 8 round
// 1 + 2^-24 to 1 first; with the order mirrored, blocks of 8 keep it too.
TEST(MatrixUnitModel, ChainsBlocksInKOrder) {
  const MatrixUnitModel one = kH200MmaF16;
  const MatrixUnitModel eights = variant([](MatrixUnitModel& x) { x.block = 8; });
  const double s = std::ldexp(1.0, -12);
  EXPECT_EQ(val(dot16(one, {{0, 1, 1}, {1, s, s}, {8, -1, 1}}, 0)), std::ldexp(1.0, -24));
  EXPECT_EQ(val(dot16(eights, {{0, 1, 1}, {1, s, s}, {8, -1, 1}}, 0)), 0.0);
  EXPECT_EQ(val(dot16(eights, {{0, -1, 1}, {9, s, s}, {8, 1, 1}}, 0)), std::ldexp(1.0, -24));
}

// The step behind gemm_tc's seed-11 failure (shared/evidence/mma_subnormal_probe.cu, section 6):
// the subnormal operand aligns its product at 2^(-5 - 14) although the product is 2^-26, so the
// window of 25 bits ends at 2^-44 and C = acc * 2^-28 (= -8456458 * 2^-46, lowest set bit 2^-45)
// loses that bit. The same
// product from normal operands aligns at 2^-26 and the step is exact, as FP32 would be. The values
// are what the H200 returned (docs/MATRIX_UNITS.md, first probe run).
TEST(MatrixUnitModel, ReproducesTheEvidenceSubnormalStep) {
  const MatrixUnitModel m = kH200MmaF16;
  const float acc = -32.258827209472656f;
  std::vector<uint32_t> a(16, 0), b(16, 0);
  a[3] = h(std::ldexp(-640.0, -14));
  b[3] = h(std::ldexp(-0.01171875, -14));
  ASSERT_EQ(b[3] & 0x7C00u, 0u) << "the second operand is an fp16 subnormal";
  const float c = std::ldexp(acc, -28);
  const double exact = static_cast<double>(c) + std::ldexp(7.5, -28);
  ASSERT_EQ(static_cast<double>(static_cast<float>(exact)), exact) << "FP32 holds the sum exactly";
  const uint32_t got = matrix_unit_dot(m, a.data(), b.data(), f32(c));
  EXPECT_NE(val(got), exact);
  EXPECT_EQ(val(got), exact + std::ldexp(1.0, -45)) << "C's 2^-45 is cut, toward zero";
  a[3] = h(std::ldexp(2.5, -14));
  b[3] = h(std::ldexp(3.0, -14));
  EXPECT_EQ(val(matrix_unit_dot(m, a.data(), b.data(), f32(c))), exact);
  // With subnormal operands aligned at their true exponent the step would be exact too.
  const MatrixUnitModel normalized = variant([](MatrixUnitModel& x) {
    x.subnormal_operands = SubnormalOperands::normalized;
  });
  a[3] = h(std::ldexp(-640.0, -14));
  b[3] = h(std::ldexp(-0.01171875, -14));
  EXPECT_EQ(val(matrix_unit_dot(normalized, a.data(), b.data(), f32(c))), exact);
  // Outside the rule's domain: check_rule does not apply to it.
  EXPECT_FALSE(check_rule(kMatrixUnitRule, MmaOperand::fp16, 16, a.data(), b.data(), f32(c), got).applies);
}

// Below 2^-133 the H200 aligns as if the largest addend were at 2^-133 (the "min_exp_limit" of
// Khattak and Mikaitis). The one vector of the first probe run's 10^6 bf16 vectors that showed it
// (random distribution "underflow", tile 7697, output (9, 6)): exact -14044.0018 * 2^-149; without
// the floor the window ends at 2^-159 and RZ gives -14044 * 2^-149, the H200 gave -14043 * 2^-149.
TEST(MatrixUnitModel, AlignsNoLowerThanTheFloor) {
  const uint32_t a[16] = {0xa1ec, 0x1b19, 0x0000, 0x0000, 0xa094, 0x9795, 0x9ae8, 0x1c1c,
                          0x20ac, 0x1a21, 0x19ad, 0xa1fb, 0x9fe8, 0x0000, 0x9fd9, 0x9ba0};
  const uint32_t b[16] = {0x0000, 0x1b04, 0x97f9, 0x19c7, 0x0000, 0x17ae, 0x19cb, 0x1ee8,
                          0x0000, 0x9b0e, 0x1834, 0x1adf, 0x9b56, 0x996f, 0x98a3, 0xa0ee};
  EXPECT_EQ(matrix_unit_dot(kH200MmaBf16, a, b, 0), 0x800036dbu);
  MatrixUnitModel no_floor = kH200MmaBf16;
  no_floor.alignment_floor = kNoAlignmentFloor;
  EXPECT_EQ(matrix_unit_dot(no_floor, a, b, 0), 0x800036dcu);
}

TEST(MatrixUnitModel, HandlesSpecialsAndSignedZeros) {
  const MatrixUnitModel m = kH200MmaF16;
  EXPECT_EQ(dot16(m, {{0, 1, 1}}, std::numeric_limits<float>::infinity()), 0x7F800000u);
  EXPECT_TRUE(std::isnan(val(dot16(m, {{0, 1, 1}}, std::nanf("")))));
  std::vector<uint32_t> a(16, 0), b(16, 0);
  a[0] = 0x7C00;  // +Inf
  b[0] = h(1.0);
  EXPECT_EQ(matrix_unit_dot(m, a.data(), b.data(), 0), 0x7F800000u);
  b[0] = 0;  // Inf * 0
  EXPECT_TRUE(std::isnan(val(matrix_unit_dot(m, a.data(), b.data(), 0))));
  // An exact zero is +0 on the H200 even when C and every product are -0 (the probe's "specials");
  // IEEE addition would give -0 there. Exact cancellation is +0 either way.
  EXPECT_EQ(dot16(m, {}, -0.0f), 0u);
  std::vector<uint32_t> neg_zero(16, 0x8000u), zero(16, 0u);
  EXPECT_EQ(matrix_unit_dot(m, neg_zero.data(), zero.data(), f32(-0.0f)), 0u);
  const MatrixUnitModel ieee = variant([](MatrixUnitModel& x) { x.zero_sign = ZeroSign::ieee; });
  EXPECT_EQ(matrix_unit_dot(ieee, neg_zero.data(), zero.data(), f32(-0.0f)), 0x80000000u);
  EXPECT_EQ(dot16(m, {{0, 1, 1}, {1, -1, 1}}, -0.0f), 0u);
}

TEST(MatrixUnitModel, Fp8KeepsThirteenBitsEvenOfC) {
  // Hopper's e4m3 path cuts C itself to 13 fraction bits below its leading bit.
  std::vector<uint32_t> a(32, 0), b(32, 0);
  const uint32_t got = matrix_unit_dot(kH200WgmmaE4m3, a.data(), b.data(), f32(1.0f + std::ldexp(1.0f, -20)));
  EXPECT_EQ(val(got), 1.0);
}

TEST(MatrixUnitModel, IntegerMmaWrapsModulo2To32) {
  std::vector<uint32_t> a(32, 0), b(32, 0);
  a[0] = 1;
  b[0] = 1;
  EXPECT_EQ(matrix_unit_dot(kH200MmaS8, a.data(), b.data(), 0x7FFFFFFFu), 0x80000000u);
  for (int x = 0; x < 32; ++x) a[x] = b[x] = 0x80;  // -128 * -128 each
  EXPECT_EQ(static_cast<int32_t>(matrix_unit_dot(kH200MmaS8, a.data(), b.data(), 0)), 32 * 16384);
}

// --- the accumulation rule ---------------------------------------------------------------

// Operands drawn for the rule: every one zero or normal, exponents around a centre so that
// alignment, truncation and cancellation all happen, or NVFP4 data (E2M1 times an E4M3 scale).
struct Draw {
  MmaOperand op;
  bool nvfp4;
  int centre, width;
};

uint32_t draw_operand(const Draw& d) {
  if (*rc::gen::inRange(0, 8) == 0) return 0;
  const bool neg = *rc::gen::arbitrary<bool>();
  if (d.nvfp4) {
    static const double kE2m1[] = {0.5, 1, 1.5, 2, 3, 4, 6};
    const double v = kE2m1[*rc::gen::inRange(0, 7)];
    const int sig = *rc::gen::inRange(8, 16), e = *rc::gen::inRange(-9, 6);  // E4M3 scale sig * 2^(e - 3)
    const double x = (neg ? -v : v) * sig * std::ldexp(1.0, e - 3);
    return d.op == MmaOperand::fp16 ? h(x) : bf(static_cast<float>(x));
  }
  const int e = d.centre + *rc::gen::inRange(-d.width, d.width + 1);
  const int man_bits = d.op == MmaOperand::fp16 ? 10 : 7;
  // Extreme significands (1, 1 + ulp, 2 - ulp, 2 - 2 ulp) put sums at binade edges, where the
  // cut and the final truncation can both take close to their maximum.
  const uint32_t top = (1u << man_bits) - 1u;
  uint32_t man = 0;
  switch (*rc::gen::inRange(0, 6)) {
    case 0: man = 0; break;
    case 1: man = 1; break;
    case 2: man = top; break;
    case 3: man = top - 1; break;
    default: man = *rc::gen::inRange<uint32_t>(0, 1u << man_bits);
  }
  if (d.op == MmaOperand::fp16) {
    const int ec = std::clamp(e, -14, 15);
    return (neg ? 0x8000u : 0u) | (static_cast<uint32_t>(ec + 15) << 10) | man;
  }
  const int ec = std::clamp(e, -56, 63);  // keeps products and partial sums FP32-normal
  return (neg ? 0x8000u : 0u) | (static_cast<uint32_t>(ec + 127) << 7) | man;
}

Draw draw_kind(MmaOperand op) {
  Draw d{op, *rc::gen::inRange(0, 3) == 0, 0, *rc::gen::element(0, 1, 3, 8, 14)};
  d.centre = op == MmaOperand::fp16 ? *rc::gen::inRange(-8, 9) : *rc::gen::inRange(-40, 41);
  return d;
}

// One instruction, C counted as an addend: random C (zero, near cancelling, or any normal).
void single_instruction_rule_holds(const MatrixUnitModel& m, const AccumulationRule& rule) {
  const Draw d = draw_kind(m.operand);
  std::vector<uint32_t> a(m.k), b(m.k);
  for (uint32_t& x : a) x = draw_operand(d);
  for (uint32_t& x : b) x = draw_operand(d);
  const DotFacts pre = dot_facts(m.operand, m.k, a.data(), b.data(), 0);
  uint32_t c = 0;
  switch (*rc::gen::inRange(0, 3)) {
    case 0: break;
    case 1:  // a few ulps from cancelling the products
      if (pre.exact != 0) c = f32(static_cast<float>(-pre.exact)) + static_cast<uint32_t>(*rc::gen::inRange(-2, 3));
      break;
    default: c = f32(static_cast<float>(std::ldexp(*rc::gen::inRange(1, 1 << 24), *rc::gen::inRange(-40, 10))));
  }
  if (*rc::gen::arbitrary<bool>()) c ^= 0x80000000u;
  const uint32_t got = matrix_unit_dot(m, a.data(), b.data(), c);
  const RuleVerdict v = check_rule(rule, m.operand, m.k, a.data(), b.data(), c, got);
  RC_PRE(v.applies);
  RC_TAG(v.exact_regime ? "exact regime" : "rounding regime");
  RC_ASSERT(v.holds);
}

// A kernel's view: C starts at 0 and each block of k products is one instruction whose result is
// the next one's C; the rule is taken over all products of the chain (t nonzero products, S their
// absolute sum, g their common power of two), as the oracle does.
void chain_rule_holds(const MatrixUnitModel& m, const AccumulationRule& rule) {
  const Draw d = draw_kind(m.operand);
  const int blocks = *rc::gen::inRange(1, 65);
  const int k = m.k * blocks;
  std::vector<uint32_t> a(k), b(k);
  const int sparsity = *rc::gen::inRange(0, 3);  // NVFP4 cases are often sparse: one product a block
  for (int x = 0; x < k; ++x) {
    a[x] = draw_operand(d);
    b[x] = draw_operand(d);
    if (sparsity == 2 && x % m.k != 0) a[x] = 0;
  }
  uint32_t acc = 0;
  for (int blk = 0; blk < blocks; ++blk) acc = matrix_unit_dot(m, &a[blk * m.k], &b[blk * m.k], acc);
  const RuleVerdict v = check_rule(rule, m.operand, k, a.data(), b.data(), 0, acc);
  RC_PRE(v.applies);
  RC_TAG(v.exact_regime ? "exact regime" : "rounding regime");
  RC_ASSERT(v.holds);
}

RC_GTEST_PROP(MatrixUnitRule, HoldsForOneF16Instruction, ()) {
  single_instruction_rule_holds(kH200MmaF16, kMatrixUnitRule);
}
RC_GTEST_PROP(MatrixUnitRule, HoldsForOneBf16Instruction, ()) {
  single_instruction_rule_holds(kH200MmaBf16, kMatrixUnitRule);
}
RC_GTEST_PROP(MatrixUnitRule, HoldsForF16Chains, ()) { chain_rule_holds(kH200WgmmaF16, kMatrixUnitRule); }
RC_GTEST_PROP(MatrixUnitRule, HoldsForBf16Chains, ()) { chain_rule_holds(kH200WgmmaBf16, kMatrixUnitRule); }

// The rule is not vacuous: an adder keeping 20 bits breaks it, and the property finds that.
TEST(MatrixUnitRule, FailsForAModelKeepingTooFewBits) {
  const MatrixUnitModel weak = variant([](MatrixUnitModel& x) { x.kept_bits = 20; });
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = 2000;
  rc::detail::TestMetadata metadata;
  metadata.id = metadata.description = "rule with a 20-bit adder";
  const auto result =
      rc::detail::checkTestable([&] { chain_rule_holds(weak, kMatrixUnitRule); }, metadata, params);
  EXPECT_TRUE(result.template is<rc::detail::FailureResult>())
      << "no counterexample for a 20-bit adder (RapidCheck seed " << params.seed << ")";
}

}  // namespace
}  // namespace nvfp4
