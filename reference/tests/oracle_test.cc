// The oracle of SPEC.md section 3: one test per rule and per named policy on hand-made elements,
// honest FP32 accumulators (forward, reverse, blocked pairwise, truncating, alpha folded into a
// scale) that must never be rejected over thousands of seeded random cases, and wrong outputs
// that must be.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include <omp.h>

#include "reference/exact_gemm.h"
#include "reference/oracle.h"
#include "reference/tests/random_problem.h"

namespace nvfp4 {
namespace {

constexpr uint16_t kOne = 0x3C00, kNaN = 0x7E00, kPosInf = 0x7C00, kNegInf = 0xFC00;
constexpr uint16_t kPosMax = 0x7BFF, kNegMax = 0xFBFF;

const Policy kFp32 = Policy::parse("fp32");

// An element with r = value, S = abs, t products and g = 2^(tz - 20), all in units of 2^-20.
ExactElement element(int64_t sum, int64_t abs, int64_t t, int tz) {
  ExactElement e;
  e.sum = sum;
  e.abs_sum = static_cast<u128>(abs);
  e.nonzero = t;
  e.min_tz = tz;
  return e;
}

// FP16 bits of a float, rounded to nearest even once (fp16_round is tested on its own).
uint16_t to_fp16(double f) {  // floats convert to double exactly
  if (std::isnan(f)) return kNaN;
  if (std::isinf(f)) return f > 0 ? kPosInf : kNegInf;
  int exp = 0;
  const double mant = std::frexp(std::fabs(f), &exp);  // f = mant * 2^exp, mant in [0.5, 1)
  const uint64_t sig = static_cast<uint64_t>(std::ldexp(mant, 53));
  return fp16_round(f < 0, sig, exp - 53);
}

uint16_t next_up(uint16_t h) {  // toward +Inf
  if (h == 0x8000) return 0x0001;
  return (h & 0x8000) ? static_cast<uint16_t>(h - 1) : static_cast<uint16_t>(h + 1);
}
uint16_t next_down(uint16_t h) {  // toward -Inf
  if (h == 0x0000) return 0x8001;
  return (h & 0x8000) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
}

// ---- Rule 1 ------------------------------------------------------------------------------------

TEST(OracleRules, NaNExactlyWhereAScaleIsNaN) {
  ExactElement nan_elem = element(1 << 20, 1 << 20, 1, 20);
  nan_elem.nan = true;
  const ExactElement plain = element(1 << 20, 1 << 20, 1, 20);
  for (const char* name : {"fp32", "exact", "fp16-accum", "allclose:1e-3:1e-3", "ulp:5"}) {
    const Policy policy = Policy::parse(name);
    SCOPED_TRACE(name);
    EXPECT_TRUE(judge_element(nan_elem, 1.0f, kNaN, policy).ok);
    EXPECT_TRUE(judge_element(nan_elem, 1.0f, 0xFE01, policy).ok);  // any payload, any sign
    EXPECT_FALSE(judge_element(nan_elem, 1.0f, kOne, policy).ok);
    EXPECT_FALSE(judge_element(nan_elem, 1.0f, kPosInf, policy).ok);
    EXPECT_FALSE(judge_element(plain, 1.0f, kNaN, policy).ok);
    EXPECT_TRUE(judge_element(plain, 1.0f, kOne, policy).ok);
    EXPECT_TRUE(std::isinf(judge_element(plain, 1.0f, kNaN, policy).error));
  }
}

// ---- Rule 2 ------------------------------------------------------------------------------------

TEST(OracleRules, ExactRegimeAcceptsOnlyRN16) {
  // Products 1 and 2^-12: r = 1 + 2^-12 rounds to 1.0; S = r < 2^24 * g = 2^12.
  const ExactElement e = element((1 << 20) + (1 << 8), (1 << 20) + (1 << 8), 2, 8);
  EXPECT_TRUE(exact_regime(e, 1.0f));
  EXPECT_TRUE(exact_regime(e, -0.25f));   // a negative power of two: negation is exact
  EXPECT_TRUE(exact_regime(e, 0x1p-100f));
  EXPECT_FALSE(exact_regime(e, 0.75f));   // not a power of two
  EXPECT_FALSE(exact_regime(e, 0.0f));
  EXPECT_FALSE(exact_regime(e, 0x1p-120f));  // alpha * g would leave FP32's normal range
  const ElementVerdict ok = judge_element(e, 1.0f, kOne, kFp32);
  EXPECT_TRUE(ok.ok);
  EXPECT_TRUE(ok.exact_regime);
  EXPECT_LE(ok.error_over_bound, 1.0);
  const ElementVerdict off = judge_element(e, 1.0f, 0x3C01, kFp32);  // 1 ulp up
  EXPECT_FALSE(off.ok);
  EXPECT_NEAR(off.error_ulps, 0.75, 1e-12);  // |1 + 2^-10 - (1 + 2^-12)| in ulps of 2^-10
  EXPECT_FALSE(judge_element(e, 1.0f, 0x3BFF, kFp32).ok);  // 1 ulp down
  EXPECT_FALSE(judge_element(e, 1.0f, 0xBC00, kFp32).ok);  // wrong sign
  EXPECT_TRUE(judge_element(e, -0.25f, 0xB400, kFp32).ok);  // -0.25 * r rounds to -0.25
  EXPECT_FALSE(judge_element(e, -0.25f, 0x3400, kFp32).ok);
}

TEST(OracleRules, ExactRegimeBoundaryIsTwoToThe24TimesG) {
  // g = 2^-20 (one unit): S = 2^24 - 1 units is in, S = 2^24 units is out.
  EXPECT_TRUE(exact_regime(element(1, (1 << 24) - 1, 3, 0), 1.0f));
  EXPECT_FALSE(exact_regime(element(1, 1 << 24, 3, 0), 1.0f));
  EXPECT_FALSE(exact_regime(element(0, 0, 0, 128), 3.0f));  // alpha not a power of two
  EXPECT_TRUE(exact_regime(element(0, 0, 0, 128), 2.0f));           // all products zero
  ExactElement nan = element(0, 0, 0, 128);
  nan.nan = true;
  EXPECT_FALSE(exact_regime(nan, 1.0f));
}

TEST(OracleRules, ZeroSignsAreEqual) {
  const ExactElement zero = element(0, 0, 0, 128);
  EXPECT_TRUE(judge_element(zero, 1.0f, 0x0000, kFp32).ok);
  EXPECT_TRUE(judge_element(zero, 1.0f, 0x8000, kFp32).ok);
  EXPECT_FALSE(judge_element(zero, 1.0f, 0x0001, kFp32).ok);
  // Cancellation to zero in the exact regime: +0 and -0 both fine.
  const ExactElement cancel = element(0, 2 << 20, 2, 20);
  EXPECT_TRUE(judge_element(cancel, 1.0f, 0x8000, kFp32).ok);
  EXPECT_TRUE(judge_element(cancel, 1.0f, 0x0000, Policy::parse("exact")).ok);
}

// ---- Rule 3 ------------------------------------------------------------------------------------

// The allowed error of rule 3, computed here from the SPEC's words in long double.
long double spec_bound(const ExactElement& e, float alpha, long double u, bool alpha_pow2, int t_factor = 1) {
  const long double t = static_cast<long double>(e.nonzero) * t_factor + (alpha_pow2 ? 0 : 2);
  const long double gamma = t * u / (1 - t * u);
  const long double s = std::ldexp(static_cast<long double>(e.abs_sum), -20);
  const long double x = std::ldexp(static_cast<long double>(e.sum), -20) * alpha;
  const long double spread = std::fabs(alpha) * gamma * s;
  const long double arg = std::fabs(x) + spread;
  const long double ulp = arg < std::ldexp(1.0L, -14) ? std::ldexp(1.0L, -24) : std::ldexp(1.0L, std::ilogb(arg) - 10);
  return spread + ulp / 2;
}

// Walks FP16 values outward from RN16 and checks that exactly those within the bound pass.
void check_bound_edges(const ExactElement& e, float alpha, const Policy& policy, long double bound) {
  const long double x = std::ldexp(static_cast<long double>(e.sum), -20) * alpha;
  const uint16_t center = round_result(e, alpha);
  int accepted_above = 0, accepted_below = 0;
  for (uint16_t h = center; !(fp16_parts(h).inf); h = next_up(h)) {
    const bool inside = std::fabs(fp16_to_double(h) - x) <= bound;
    ASSERT_EQ(judge_element(e, alpha, h, policy).ok, inside) << "bits 0x" << std::hex << h;
    if (!inside) break;
    ++accepted_above;
  }
  for (uint16_t h = center; !(fp16_parts(h).inf); h = next_down(h)) {
    const bool inside = std::fabs(fp16_to_double(h) - x) <= bound;
    ASSERT_EQ(judge_element(e, alpha, h, policy).ok, inside) << "bits 0x" << std::hex << h;
    if (!inside) break;
    ++accepted_below;
  }
  EXPECT_GT(accepted_above + accepted_below, 2) << "the bound should admit several values";
}

TEST(OracleRules, RoundingBoundAdmitsExactlyTheInterval) {
  // r = 1, S = 2^24 (lots of cancellation), t = 1000: gamma*S is about 2000.
  const ExactElement wide = element(int64_t(1) << 20, int64_t(1) << 44, 1000, 0);
  EXPECT_FALSE(exact_regime(wide, 1.0f));
  check_bound_edges(wide, 1.0f, kFp32, spec_bound(wide, 1.0f, std::ldexp(1.0L, -23), true));
  // alpha not a power of two: t + 2.
  check_bound_edges(wide, 0.3f, kFp32, spec_bound(wide, 0.3f, std::ldexp(1.0L, -23), false));
  // A narrow case: r = 1000.25, every product positive, t = 4001; the bound is a few ulps.
  const ExactElement narrow = element(int64_t(4001) << 18, int64_t(4001) << 18, 4001, 18);
  check_bound_edges(narrow, 0.7f, kFp32, spec_bound(narrow, 0.7f, std::ldexp(1.0L, -23), false));
  const ElementVerdict v = judge_element(wide, 1.0f, kOne, kFp32);
  EXPECT_FALSE(v.exact_regime);
  EXPECT_NEAR(v.bound, static_cast<double>(spec_bound(wide, 1.0f, std::ldexp(1.0L, -23), true)), 1e-9);
}

// The matrix-unit model (NVFP4_FLAG_MMA_ACCUMULATE): exact below 2^22 * g, t' = 9t.
TEST(OracleRules, MatrixUnitModelNarrowsTheExactRegimeAndWidensTheBound) {
  const Policy mma = Policy::parse("matrix-unit");
  EXPECT_EQ(mma.accumulation, Accumulation::matrix_unit);
  EXPECT_EQ(mma.device_sm, 0);  // no device: SPEC revision 2's provisional rule
  EXPECT_TRUE(exact_regime(element(1, (1 << 22) - 1, 3, 0), 1.0f, mma.rule()));
  EXPECT_FALSE(exact_regime(element(1, 1 << 22, 3, 0), 1.0f, mma.rule()));
  EXPECT_TRUE(exact_regime(element(1, 1 << 22, 3, 0), 1.0f, kIeeeFp32Rule));
  // Hopper's matrix units were measured (docs/MATRIX_UNITS.md): with normal operands their rule
  // is FP32's own.
  const Policy hopper = Policy::parse("matrix-unit:90");
  EXPECT_EQ(hopper.rule().exact_bits, 24);
  EXPECT_EQ(hopper.rule().t_factor, 1);
  EXPECT_EQ(hopper.name(), "matrix-unit:90");
  EXPECT_EQ(Policy::parse("matrix-unit:100").rule().exact_bits, 22);  // Blackwell: not yet measured
  // Between 2^22 g and 2^24 g: exact for IEEE adders, the rounding bound for matrix units.
  const ExactElement mid = element((int64_t(1) << 23) + 1, (int64_t(1) << 23) + 1, 40, 0);
  EXPECT_TRUE(judge_element(mid, 1.0f, round_result(mid, 1.0f), kFp32).exact_regime);
  EXPECT_FALSE(judge_element(mid, 1.0f, round_result(mid, 1.0f), mma).exact_regime);
  const ExactElement wide = element(int64_t(1) << 20, int64_t(1) << 44, 1000, 0);
  check_bound_edges(wide, 1.0f, mma, spec_bound(wide, 1.0f, std::ldexp(1.0L, -23), true, 9));
  check_bound_edges(wide, 0.3f, mma, spec_bound(wide, 0.3f, std::ldexp(1.0L, -23), false, 9));
  // The same output can fail the IEEE rule and pass the matrix-unit one.
  const long double ieee = spec_bound(wide, 1.0f, std::ldexp(1.0L, -23), true);
  const uint16_t outside_ieee = to_fp16(static_cast<double>(1 + 2 * ieee));
  EXPECT_FALSE(judge_element(wide, 1.0f, outside_ieee, kFp32).ok);
  EXPECT_TRUE(judge_element(wide, 1.0f, outside_ieee, mma).ok);
  // FP16 accumulation on matrix units: two bits fewer than FP16's 11 for the exact regime.
  const Policy fp16_mma = Policy::parse("fp16-accum/matrix-unit");
  const ExactElement small = element(int64_t(1000) << 20, int64_t(1000) << 20, 1000, 20);  // S = 1000 g
  EXPECT_TRUE(judge_element(small, 1.0f, round_result(small, 1.0f), Policy::parse("fp16-accum")).exact_regime);
  EXPECT_FALSE(judge_element(small, 1.0f, round_result(small, 1.0f), fp16_mma).exact_regime);
}

// ---- Rule 4 ------------------------------------------------------------------------------------

TEST(OracleRules, OverflowAcceptsInfWhereTheIntervalReaches65520) {
  // r = 65510, t = 10^6 all positive, g = 2^-20 (not exact): gamma*S is about 7800, reaching
  // beyond +65520 only.
  const ExactElement near = element(int64_t(65510) << 20, int64_t(65510) << 20, 1000000, 0);
  EXPECT_FALSE(exact_regime(near, 1.0f));
  EXPECT_TRUE(judge_element(near, 1.0f, kPosInf, kFp32).ok);
  EXPECT_FALSE(judge_element(near, 1.0f, kNegInf, kFp32).ok);
  EXPECT_TRUE(judge_element(near, 1.0f, kPosMax, kFp32).ok);  // finite and inside the interval
  // r = 65500, bound about 10 + 16: the interval ends near 65526, past 65520 (where RN16 gives
  // Inf) though short of 65536. Inf is acceptable, and only by that margin.
  const ExactElement edge = element(int64_t(65500) << 20, int64_t(65500) << 20, 1280, 0);
  EXPECT_TRUE(judge_element(edge, 1.0f, kPosInf, kFp32).ok);
  const ExactElement short_of_edge = element(int64_t(65490) << 20, int64_t(65490) << 20, 1280, 0);
  EXPECT_FALSE(judge_element(short_of_edge, 1.0f, kPosInf, kFp32).ok);  // ends near 65516
  // alpha*r = 54000 with a small bound: Inf is not acceptable.
  const ExactElement below = element(int64_t(60000) << 20, int64_t(60000) << 20, 1000, 20);
  EXPECT_FALSE(judge_element(below, 0.9f, kPosInf, kFp32).ok);
  EXPECT_FALSE(judge_element(below, 0.9f, kPosMax, kFp32).ok);
  // r = 2^17, wholly beyond: only +Inf; a saturating kernel may give +65504 instead.
  const ExactElement beyond = element(int64_t(1) << 37, int64_t(1) << 37, 1, 37);
  for (float alpha : {1.0f, 1.1f}) {  // exact regime and rounding regime
    SCOPED_TRACE(alpha);
    EXPECT_TRUE(judge_element(beyond, alpha, kPosInf, kFp32).ok);
    EXPECT_FALSE(judge_element(beyond, alpha, kPosMax, kFp32).ok);
    EXPECT_FALSE(judge_element(beyond, alpha, kNegInf, kFp32).ok);
    Policy saturating = kFp32;
    saturating.saturates = true;
    EXPECT_TRUE(judge_element(beyond, alpha, kPosMax, saturating).ok);
    EXPECT_FALSE(judge_element(beyond, alpha, kNegMax, saturating).ok);
    EXPECT_FALSE(judge_element(beyond, alpha, 0x7BFE, saturating).ok);
    EXPECT_TRUE(judge_element(beyond, -alpha, kNegMax, saturating).ok);
  }
  // Wide interval around 65000 reaching beyond both +-65520: both Infs are acceptable.
  const ExactElement both = element(int64_t(65000) << 20, int64_t(1) << 52, 1000, 0);
  EXPECT_TRUE(judge_element(both, 1.0f, kPosInf, kFp32).ok);
  EXPECT_TRUE(judge_element(both, 1.0f, kNegInf, kFp32).ok);
  EXPECT_EQ(judge_element(both, 1.0f, kPosInf, kFp32).error, 0.0);  // an accepted overflow
}

// ---- Named policies --------------------------------------------------------------------------------

TEST(OraclePolicies, ExactAlwaysWantsRN16) {
  const ExactElement wide = element(int64_t(1) << 20, int64_t(1) << 44, 1000, 0);
  const Policy exact = Policy::parse("exact");
  EXPECT_TRUE(judge_element(wide, 1.0f, 0x3C08, kFp32).ok);
  EXPECT_FALSE(judge_element(wide, 1.0f, 0x3C08, exact).ok);
  EXPECT_TRUE(judge_element(wide, 1.0f, kOne, exact).ok);
  EXPECT_TRUE(judge_element(wide, 1.0f, kOne, exact).exact_regime);
}

TEST(OraclePolicies, Fp16AccumUsesALargerUnitRoundoff) {
  // r = 100 from 400 positive products, g = 2^-20 (outside both exact regimes): the FP32 bound
  // is about 0.04, the FP16-accumulation one (u = 2^-10) about 64.
  const ExactElement e = element(int64_t(100) << 20, int64_t(100) << 20, 400, 0);
  const Policy fp16 = Policy::parse("fp16-accum");
  EXPECT_FALSE(judge_element(e, 1.0f, to_fp16(102.5f), kFp32).ok);
  EXPECT_TRUE(judge_element(e, 1.0f, to_fp16(102.5f), fp16).ok);
  EXPECT_TRUE(judge_element(e, 1.0f, to_fp16(160.0f), fp16).ok);
  EXPECT_FALSE(judge_element(e, 1.0f, to_fp16(180.0f), fp16).ok);
  EXPECT_FALSE(judge_element(e, 1.0f, to_fp16(102.5f), fp16).exact_regime);
  // With u = 2^-10, S < 2^11 * g keeps an FP16 accumulator exact: 4 products of 1.
  const ExactElement small = element(int64_t(4) << 20, int64_t(4) << 20, 4, 20);
  EXPECT_TRUE(judge_element(small, 1.0f, 0x4400, fp16).exact_regime);
  EXPECT_FALSE(judge_element(small, 1.0f, 0x4401, fp16).ok);
}

TEST(OraclePolicies, AllcloseComparesWithTheRN16Reference) {
  const ExactElement one = element(1 << 20, 1 << 20, 1, 20);
  const Policy gpumode = Policy::parse("allclose:1e-3:1e-3");
  EXPECT_TRUE(judge_element(one, 1.0f, 0x3C02, gpumode).ok);   // |c - 1| = 0.00195 <= 0.002
  EXPECT_FALSE(judge_element(one, 1.0f, 0x3C03, gpumode).ok);  // 0.00293
  EXPECT_FALSE(judge_element(one, 1.0f, 0x3C02, kFp32).ok);    // while fp32 wants RN16 here
  // atol dominates near zero.
  const ExactElement zero = element(0, 0, 0, 128);
  EXPECT_TRUE(judge_element(zero, 1.0f, to_fp16(0.00099f), gpumode).ok);
  EXPECT_FALSE(judge_element(zero, 1.0f, to_fp16(0.0011f), gpumode).ok);
  // Inf matches only the same Inf.
  const ExactElement huge = element(int64_t(1) << 37, int64_t(1) << 37, 1, 37);
  EXPECT_TRUE(judge_element(huge, 1.0f, kPosInf, gpumode).ok);
  EXPECT_FALSE(judge_element(huge, 1.0f, kPosMax, gpumode).ok);
  EXPECT_FALSE(judge_element(huge, 1.0f, kNegInf, gpumode).ok);
}

TEST(OraclePolicies, UlpCountsFp16Steps) {
  const ExactElement one = element(1 << 20, 1 << 20, 1, 20);
  const Policy two = Policy::parse("ulp:2");
  EXPECT_TRUE(judge_element(one, 1.0f, 0x3C02, two).ok);
  EXPECT_TRUE(judge_element(one, 1.0f, 0x3BFE, two).ok);
  EXPECT_FALSE(judge_element(one, 1.0f, 0x3C03, two).ok);
  EXPECT_EQ(judge_element(one, 1.0f, 0x3C03, two).error_ulps, 3.0);
  // Across zero: from 2^-24 to -2^-24 is two steps (+0 and -0 are one value).
  const ExactElement tiny = element(1, 1, 1, 0);  // r = 2^-20, alpha = 2^-4 gives 2^-24
  EXPECT_EQ(round_result(tiny, 0x1p-4f), 0x0001);
  EXPECT_TRUE(judge_element(tiny, 0x1p-4f, 0x8001, two).ok);
  EXPECT_FALSE(judge_element(tiny, 0x1p-4f, 0x8002, two).ok);
  EXPECT_FALSE(judge_element(one, 1.0f, 0x3C01, Policy::parse("ulp:0")).ok);
}

TEST(OraclePolicies, ParseNameAndFlags) {
  for (const char* text : {"fp32", "matrix-unit", "exact", "fp16-accum", "fp16-accum/matrix-unit",
                           "allclose:0.001:0.001", "ulp:3"})
    EXPECT_EQ(Policy::parse(text).name(), text);
  const Policy a = Policy::parse("allclose:1e-3:2.5e-2");
  EXPECT_EQ(a.kind, Policy::Kind::allclose);
  EXPECT_EQ(a.rtol, 1e-3);
  EXPECT_EQ(a.atol, 2.5e-2);
  EXPECT_EQ(Policy::parse("ulp:17").ulps, 17);
  for (const char* bad : {"", "fp64", "matrix-unit:", "matrix-unit:x", "matrix-unit:0", "allclose", "allclose:1e-3",
                          "allclose:x:1", "allclose:1:-1",
                          "allclose:1:inf", "ulp:", "ulp:-1", "ulp:1.5", "exact ", "FP32"})
    EXPECT_THROW(Policy::parse(bad), std::invalid_argument) << "'" << bad << "'";
  EXPECT_EQ(Policy::for_flags(0).kind, Policy::Kind::fp32);
  EXPECT_EQ(Policy::for_flags(1u << 4).kind, Policy::Kind::exact);
  EXPECT_EQ(Policy::for_flags(1u << 2).kind, Policy::Kind::fp16_accum);
  EXPECT_TRUE(Policy::for_flags(1u << 3).saturates);
  EXPECT_FALSE(Policy::for_flags(1u << 1).saturates);
  EXPECT_EQ(Policy::for_flags(0).accumulation, Accumulation::ieee_fp32);
  EXPECT_EQ(Policy::for_flags(1u << 6).name(), "matrix-unit");
  EXPECT_EQ(Policy::for_flags((1u << 6) | (1u << 2)).name(), "fp16-accum/matrix-unit");
  EXPECT_EQ(Policy::for_flags((1u << 6) | (1u << 4)).name(), "exact");  // exact needs no model
  EXPECT_EQ(kFp32.with_accumulation(Accumulation::matrix_unit).name(), "matrix-unit");
}

// ---- Honest FP32 kernels never fail; wrong ones do -------------------------------------------------

enum class Adder { forward, reverse, blocked_pairwise, truncating, alpha_folded, fp16, matrix_unit };
const char* name(Adder a) {
  switch (a) {
    case Adder::forward: return "forward";
    case Adder::reverse: return "reverse";
    case Adder::blocked_pairwise: return "blocked pairwise";
    case Adder::truncating: return "truncating";
    case Adder::alpha_folded: return "alpha folded into the A scale, truncating";
    case Adder::fp16: return "FP16 accumulator";
    case Adder::matrix_unit: return "matrix unit (22 kept bits, truncating)";
  }
  return "?";
}

float e2m1_float(int code) {
  static const float kMag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  return (code & 8) ? -kMag[code & 7] : kMag[code & 7];
}

float e4m3_float(uint8_t byte, ScaleSemantics sem) {
  const ScaleValue v = e4m3_decode(byte, sem);
  return v.nan ? NAN : static_cast<float>(v.sign) * std::ldexp(static_cast<float>(v.sig), v.exp);
}

float pairwise(const float* x, size_t n) {
  if (n == 1) return x[0];
  const size_t h = n / 2;
  return pairwise(x, h) + pairwise(x + h, n - h);
}

// The matrix unit SPEC section 3 assumes: each instruction takes the running sum and up to 16
// products, aligns them to the largest, keeps kKeptBits bits below its leading bit (the rest
// truncated), adds exactly and truncates the result to FP32.
constexpr int kKeptBits = 22;
float matrix_unit_sum(const float* products, int64_t k) {
  float acc = 0;
  for (int64_t x0 = 0; x0 < k; x0 += 16) {
    double addends[17];
    int count = 0, top = INT32_MIN;
    addends[count++] = acc;
    for (int64_t x = x0; x < std::min(k, x0 + 16); ++x) addends[count++] = products[x];
    bool special = false;  // NaN or Inf propagate as in any adder
    for (int q = 0; q < count; ++q) {
      special |= !std::isfinite(addends[q]);
      if (std::isfinite(addends[q]) && addends[q] != 0) top = std::max(top, std::ilogb(addends[q]));
    }
    if (special) {
      for (int q = 1; q < count; ++q) acc += static_cast<float>(addends[q]);
      continue;
    }
    if (top == INT32_MIN) continue;
    const double quantum = std::ldexp(1.0, top - kKeptBits);
    double exact = 0;  // at most 17 terms of kKeptBits + 1 bits: exact in double
    for (int q = 0; q < count; ++q) exact += std::trunc(addends[q] / quantum) * quantum;
    const int saved = std::fegetround();
    std::fesetround(FE_TOWARDZERO);
    acc = static_cast<float>(exact);
    std::fesetround(saved);
  }
  return acc;
}

// C as an FP32-accumulating kernel would compute it, in the given order, rounded once to FP16.
std::vector<uint16_t> fp32_kernel(const Problem& p, Adder acc) {
  std::vector<uint16_t> c(static_cast<size_t>(p.c_elems()));
  const int64_t kb = p.kb();
  const int saved = std::fegetround();
  std::vector<float> products(static_cast<size_t>(p.k)), blocks(static_cast<size_t>(kb));
  for (int64_t b = 0; b < p.l; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        if (acc == Adder::truncating || acc == Adder::alpha_folded) std::fesetround(FE_TOWARDZERO);
        for (int64_t x = 0; x < p.k; ++x) {
          const uint8_t* arow = p.a.data() + (b * p.m + i) * (p.k / 2);
          const uint8_t* brow = p.b.data() + (b * p.n + j) * (p.k / 2);
          float sa = e4m3_float(p.sfa[(b * p.m + i) * kb + x / 16], p.semantics);
          const float sb = e4m3_float(p.sfb[(b * p.n + j) * kb + x / 16], p.semantics);
          if (acc == Adder::alpha_folded) sa *= p.alpha;  // rounds (toward zero)
          const float av = e2m1_float(e2m1_nibble(arow, x)) * sa;
          const float bv = e2m1_float(e2m1_nibble(brow, x)) * sb;  // exact
          products[x] = av * bv;  // exact unless alpha was folded in
        }
        float sum = 0;
        switch (acc) {
          case Adder::forward:
          case Adder::truncating:
          case Adder::alpha_folded:
            for (int64_t x = 0; x < p.k; ++x) sum += products[x];
            break;
          case Adder::reverse:
            for (int64_t x = p.k - 1; x >= 0; --x) sum += products[x];
            break;
          case Adder::fp16: {
            // Each add rounded to FP16 (the double sum of two FP16-range values is exact).
            double h = 0;
            for (int64_t x = 0; x < p.k; ++x) h = fp16_to_double(to_fp16(h + products[x]));
            sum = static_cast<float>(h);
            break;
          }
          case Adder::matrix_unit:
            sum = matrix_unit_sum(products.data(), p.k);
            break;
          case Adder::blocked_pairwise:
            for (int64_t s = 0; s < kb; ++s) {
              float block = 0;
              for (int64_t x = 16 * s; x < std::min(p.k, 16 * s + 16); ++x) block += products[x];
              blocks[s] = block;
            }
            sum = pairwise(blocks.data(), static_cast<size_t>(kb));
            break;
        }
        if (acc != Adder::alpha_folded) sum *= p.alpha;
        std::fesetround(saved);
        c[(b * p.m + i) * p.n + j] = to_fp16(sum);
      }
  return c;
}

struct CaseStats {
  int64_t elements = 0, exact = 0, rounding = 0, differ_from_rn16 = 0, inf = 0, nan = 0;
};

// Random problems aimed at the oracle's edges. Styles: 0 scales up to 30; 1 all products
// positive with large k; 2 wide scale range with cancellation; 3 subnormal scales; 4 outputs
// near the FP16 overflow (alpha chosen from the exact result); 5 NaN scales now and then;
// 6 scales near 1 (mostly the exact regime); 7 cancellation of huge blocks next to tiny ones.
Problem adversarial_problem(std::mt19937_64& rng, int style) {
  Problem p;
  p.op = rng() % 3 == 0 ? Op::gemv : Op::gemm;
  p.m = 1 + rng() % 3;
  p.n = p.op == Op::gemv ? 1 : 1 + rng() % 3;
  p.l = 1 + rng() % 2;
  const int64_t big_k = rng() % 25 == 0 ? 16384 : 2048;
  p.k = style == 1 ? 2 * (1 + rng() % (big_k / 2)) : 2 * (1 + rng() % 300);
  p.semantics = rng() % 2 ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
  auto values = [&](std::vector<uint8_t>& v, int64_t n) {
    v.resize(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<uint8_t>(rng());
    if (style == 1)
      for (auto& x : v) x &= 0x77;
  };
  auto scales = [&](std::vector<uint8_t>& v, int64_t n) {
    v.resize(static_cast<size_t>(n));
    for (auto& s : v) {
      switch (style) {
        case 1: s = static_cast<uint8_t>(0x28 + rng() % 0x30); break;  // positive, 2^-4 .. 2^2
        case 3: s = static_cast<uint8_t>(rng() % 8 | (rng() % 2) << 7); break;
        case 6: s = static_cast<uint8_t>((0x30 + rng() % 16) | (rng() % 2) << 7); break;  // near 1
        case 0: s = static_cast<uint8_t>(rng() % 0x60 | (rng() % 2) << 7); break;  // up to 30
        default: s = static_cast<uint8_t>(rng()); if ((s & 0x7F) == 0x7F) s = 0x7E; break;
      }
      if (style == 5 && rng() % 200 == 0) s = 0x7F;
    }
  };
  values(p.a, p.a_bytes());
  values(p.b, p.b_bytes());
  scales(p.sfa, p.sfa_bytes());
  scales(p.sfb, p.sfb_bytes());
  if (style == 7) {
    // Catastrophic cancellation: every other A block has scale 448 and pairs (+v, -v) against
    // equal B pairs, so its products cancel exactly while an FP32 running sum loses the small
    // blocks' low bits next to them; the small blocks have subnormal scales.
    const int64_t kb = p.kb();
    for (int64_t row = 0; row < p.l * p.m; ++row)
      for (int64_t s = 0; s < kb; ++s) {
        const bool big = s % 2 == 0;
        p.sfa[row * kb + s] = big ? 0x7E : static_cast<uint8_t>(1 + rng() % 7);
        if (!big) continue;
        for (int64_t q = 8 * s; q < std::min(p.k / 2, 8 * s + 8); ++q) {
          const uint8_t v = static_cast<uint8_t>(rng() % 8);
          p.a[row * (p.k / 2) + q] = static_cast<uint8_t>(v | (v ^ 8) << 4);
        }
      }
    for (int64_t q = 0; q < p.l * p.n * (p.k / 2); ++q) {
      const uint8_t v = static_cast<uint8_t>(rng() % 16);
      p.b[q] = static_cast<uint8_t>(v | v << 4);
    }
    for (auto& s : p.sfb) s = static_cast<uint8_t>(0x30 + rng() % 16);
  }
  const float alphas[] = {1.0f, 0.5f, 0x1p-10f, 8.0f, 0.1f, -0.3f, 1.7f, 1e-3f, 0.999f, 3.0f};
  p.alpha = alphas[rng() % 10];
  if (style == 1 && rng() % 2) p.semantics = ScaleSemantics::ue4m3;
  if (style == 4) {
    // Aim the first output at 65520 * (1 +- 2^-8): alpha from its exact value.
    p.alpha = 1.0f;
    const ExactResult r = exact_gemm(p);
    const double v = std::ldexp(static_cast<double>(r.elems[0].sum), -20);
    if (v != 0 && !r.elems[0].nan) p.alpha = static_cast<float>(65520.0 * (1 + std::ldexp(double(int(rng() % 5) - 2), -9)) / v);
  }
  return p;
}

TEST(OracleHonestKernels, NeverRejectedAcrossThousandsOfRandomCases) {
  const uint64_t seed = 0x0bac1e;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  CaseStats stats;
  for (int trial = 0; trial < 2100; ++trial) {
    const int style = trial % 8;
    const Problem p = adversarial_problem(rng, style);
    const ExactResult ref = exact_gemm(p);
    for (Adder acc : {Adder::forward, Adder::reverse, Adder::blocked_pairwise,
                             Adder::truncating, Adder::alpha_folded}) {
      const std::vector<uint16_t> c = fp32_kernel(p, acc);
      const OracleSummary s = judge(p, ref, c.data(), kFp32);
      ASSERT_FALSE(s.any_failure())
          << "seed " << seed << " trial " << trial << " style " << style << " " << name(acc) << ": m " << p.m
          << " n " << p.n << " k " << p.k << " l " << p.l << " alpha " << p.alpha << " first failing ("
          << s.first_b << "," << s.first_i << "," << s.first_j << ") expected 0x" << std::hex
          << s.first.expected_bits << " actual 0x" << s.first_actual << std::dec << " error " << s.first.error
          << " bound " << s.first.bound;
      for (size_t x = 0; x < c.size(); ++x) {
        ++stats.elements;
        stats.exact += exact_regime(ref.elems[x], p.alpha);
        stats.rounding += !ref.elems[x].nan && !exact_regime(ref.elems[x], p.alpha);
        stats.differ_from_rn16 += c[x] != ref.c[x] && ((c[x] | ref.c[x]) & 0x7FFF) != 0;
        stats.inf += (c[x] & 0x7FFF) == 0x7C00;
        stats.nan += fp16_is_nan(c[x]);
      }
    }
  }
  std::printf("elements %lld: exact regime %lld, rounding regime %lld, differing from RN16 %lld, Inf %lld, NaN %lld\n",
              (long long)stats.elements, (long long)stats.exact, (long long)stats.rounding,
              (long long)stats.differ_from_rn16, (long long)stats.inf, (long long)stats.nan);
  // The cases must reach every rule, or passing proves little.
  EXPECT_GT(stats.exact, 1000);
  EXPECT_GT(stats.rounding, 1000);
  EXPECT_GT(stats.differ_from_rn16, 1000);
  EXPECT_GT(stats.inf, 10);
  EXPECT_GT(stats.nan, 10);
}

// The bound is not vacuous: a truncating FP32 sum of many positive products of varied size loses
// a fraction of an FP32 ulp per add, always in one direction, and gets within an order of
// magnitude of it.
TEST(OracleHonestKernels, LongTruncatingSumsComeCloseToTheBound) {
  const uint64_t seed = 0x7a11;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Problem p;
  p.m = 4;
  p.n = 2;
  p.k = 1 << 16;
  p.semantics = ScaleSemantics::ue4m3;
  p.a.resize(static_cast<size_t>(p.a_bytes()));
  p.b.resize(static_cast<size_t>(p.b_bytes()));
  for (auto& x : p.a) x = static_cast<uint8_t>(rng() & 0x77);
  for (auto& x : p.b) x = static_cast<uint8_t>(rng() & 0x77);
  p.sfa.resize(static_cast<size_t>(p.sfa_bytes()));
  p.sfb.resize(static_cast<size_t>(p.sfb_bytes()));
  for (auto& s : p.sfa) s = static_cast<uint8_t>(0x08 + rng() % 0x38);  // 2^-6 .. 2^1
  for (auto& s : p.sfb) s = static_cast<uint8_t>(0x08 + rng() % 0x38);
  p.alpha = 0x1p-8f;  // keep the outputs finite
  const ExactResult ref = exact_gemm(p);
  const std::vector<uint16_t> c = fp32_kernel(p, Adder::truncating);
  const OracleSummary s = judge(p, ref, c.data(), kFp32);
  EXPECT_FALSE(s.any_failure()) << "first failing (" << s.first_b << "," << s.first_i << "," << s.first_j << ")";
  std::printf("max error / bound %.3f, max error %.2f ulps\n", s.max_error_over_bound, s.max_error_ulps);
  EXPECT_GT(s.max_error_over_bound, 0.1);  // about 0.14 here; the worst case of the bound needs every add to lose a whole ulp
  EXPECT_EQ(s.exact_regime, 0);
}

// An FP16-accumulating kernel passes the fp16-accum policy and is caught by the default fp32 one.
TEST(OracleHonestKernels, Fp16AccumulationPassesItsPolicyAndFailsFp32) {
  const uint64_t seed = 0xf16;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const Policy fp16 = Policy::parse("fp16-accum");
  int caught = 0, trials = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Problem p = adversarial_problem(rng, 6);  // scales near 1: no FP16 overflow in partial sums
    p.alpha = 1.0f;
    const ExactResult ref = exact_gemm(p);
    const std::vector<uint16_t> c = fp32_kernel(p, Adder::fp16);
    const OracleSummary s = judge(p, ref, c.data(), fp16);
    ASSERT_FALSE(s.any_failure()) << "trial " << trial << " first failing (" << s.first_b << "," << s.first_i
                                  << "," << s.first_j << ") actual 0x" << std::hex << s.first_actual
                                  << " expected 0x" << s.first.expected_bits;
    caught += judge(p, ref, c.data(), kFp32).any_failure();
    ++trials;
  }
  std::printf("the fp32 policy rejects %d of %d FP16-accumulated outputs\n", caught, trials);
  EXPECT_GT(caught, trials / 4);
}

// A kernel that adds on a matrix unit of the kind SPEC section 3 assumes (22 kept bits, truncated
// addends and results) passes the matrix-unit policy on every adversarial style.
TEST(OracleHonestKernels, MatrixUnitAccumulationPassesItsPolicy) {
  const uint64_t seed = 0x3a7;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const Policy mma = Policy::parse("matrix-unit");
  int caught = 0, trials = 0;
  int64_t exact = 0, elements = 0;
  for (int trial = 0; trial < 1600; ++trial) {
    const int style = trial % 8;
    const Problem p = adversarial_problem(rng, style);
    const ExactResult ref = exact_gemm(p);
    const std::vector<uint16_t> c = fp32_kernel(p, Adder::matrix_unit);
    const OracleSummary s = judge(p, ref, c.data(), mma);
    ASSERT_FALSE(s.any_failure()) << "seed " << seed << " trial " << trial << " style " << style << " first failing ("
                                  << s.first_b << "," << s.first_i << "," << s.first_j << ") actual 0x" << std::hex
                                  << s.first_actual << " expected 0x" << s.first.expected_bits << std::dec
                                  << " error " << s.first.error << " bound " << s.first.bound;
    caught += judge(p, ref, c.data(), kFp32).any_failure();
    exact += s.exact_regime;
    elements += s.elements;
    ++trials;
  }
  std::printf("the IEEE fp32 policy rejects %d of %d matrix-unit outputs; %lld of %lld elements in the "
              "matrix-unit exact regime\n", caught, trials, (long long)exact, (long long)elements);
  EXPECT_GT(exact, elements / 10);
}

// Why the IEEE rule is unsound for matrix units, in one element: products 8, 2^-8 and 2^-20 in
// three scale blocks. S < 2^24 g (IEEE: exact regime), and 8 + 2^-8 is an FP16 tie that the last
// product breaks upward. A unit keeping 22 bits below the running sum's leading bit truncates
// 2^-20 away, lands on the tie and rounds to even: one FP16 ulp low, which the IEEE rule rejects
// and the matrix-unit rule allows. (gemm_tc's seed-11 failure on the H200 was of this kind.)
TEST(OracleHonestKernels, MatrixUnitTieBreakFailsIeeeAndPassesMatrixUnit) {
  Problem p;
  p.op = Op::gemv;
  p.m = p.n = p.l = 1;
  p.k = 48;
  p.a.assign(24, 0);
  p.b.assign(24, 0);
  p.a[0] = p.b[0] = 0x04;     // element 0: 2 and 2
  p.a[8] = p.b[8] = 0x01;     // element 16: 0.5 and 0.5
  p.a[16] = p.b[16] = 0x01;   // element 32: 0.5 and 0.5
  p.sfa = {0x40, 0x20, 0x01};  // 2, 2^-3, 2^-9
  p.sfb = {0x38, 0x20, 0x01};  // 1, 2^-3, 2^-9
  const ExactResult ref = exact_gemm(p);
  ASSERT_EQ(ref.c[0], 0x4801);  // 8 + 2^-8 + 2^-20 rounds up to 8.0078125
  ASSERT_TRUE(exact_regime(ref.elems[0], 1.0f));
  ASSERT_FALSE(exact_regime(ref.elems[0], 1.0f, kMatrixUnitProvisionalRule));
  const std::vector<uint16_t> c = fp32_kernel(p, Adder::matrix_unit);
  EXPECT_EQ(c[0], 0x4800);
  EXPECT_TRUE(judge(p, ref, c.data(), kFp32).any_failure());
  EXPECT_FALSE(judge(p, ref, c.data(), Policy::parse("matrix-unit")).any_failure());
  EXPECT_EQ(fp32_kernel(p, Adder::forward)[0], 0x4801);  // IEEE adders keep the last bit
}

TEST(OracleHonestKernels, WrongOutputsAreRejected) {
  const uint64_t seed = 0xbadbad;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int64_t off_by_one = 0, sign_flips = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const Problem p = adversarial_problem(rng, trial % 2 ? 6 : trial % 3);
    const ExactResult ref = exact_gemm(p);
    for (size_t x = 0; x < ref.c.size(); ++x) {
      const ExactElement& e = ref.elems[x];
      const uint16_t rn = ref.c[x];
      if (e.nan || (rn & 0x7FFF) >= 0x7C00) continue;
      if (exact_regime(e, p.alpha)) {
        // One ulp either way is a failure in the exact regime.
        ASSERT_FALSE(judge_element(e, p.alpha, next_up(rn), kFp32).ok) << "trial " << trial;
        ASSERT_FALSE(judge_element(e, p.alpha, next_down(rn), kFp32).ok) << "trial " << trial;
        ++off_by_one;
      }
      if (fp16_to_double(rn) != 0) {
        // The sign flipped is wrong in any regime unless the bound covers 2|alpha*r|.
        const ElementVerdict v = judge_element(e, p.alpha, static_cast<uint16_t>(rn ^ 0x8000), kFp32);
        if (v.bound < 2 * std::fabs(fp16_to_double(rn)) * 0.999) {
          ASSERT_FALSE(v.ok) << "trial " << trial;
          ++sign_flips;
        }
      }
      ASSERT_FALSE(judge_element(e, p.alpha, kNaN, kFp32).ok);
    }
  }
  EXPECT_GT(off_by_one, 500);
  EXPECT_GT(sign_flips, 1000);
}

TEST(OracleJudge, SummaryNamesTheFirstFailureInCOrder) {
  const uint64_t seed = 7;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Problem p;
  p.m = 3;
  p.n = 4;
  p.k = 64;
  p.l = 2;
  p.a.resize(static_cast<size_t>(p.a_bytes()));
  p.b.resize(static_cast<size_t>(p.b_bytes()));
  for (auto* v : {&p.a, &p.b}) for (auto& x : *v) x = static_cast<uint8_t>(rng());
  p.sfa.assign(static_cast<size_t>(p.sfa_bytes()), 0x38);
  p.sfb.assign(static_cast<size_t>(p.sfb_bytes()), 0x38);
  const ExactResult ref = exact_gemm(p);
  std::vector<uint16_t> c = ref.c;
  OracleSummary ok = judge(p, ref, c.data(), kFp32);
  EXPECT_FALSE(ok.any_failure());
  EXPECT_EQ(ok.elements, 24);
  EXPECT_EQ(ok.exact_regime, 24);  // unit scales: every element is in the exact regime
  EXPECT_EQ(ok.first_b, -1);
  const int64_t late = (1 * 3 + 2) * 4 + 1, early = (1 * 3 + 0) * 4 + 3;  // (1,2,1) and (1,0,3)
  c[late] = next_up(c[late]);
  c[early] = static_cast<uint16_t>(c[early] ^ 0x8000) == c[early] ? 0x3C00 : next_down(c[early]);
  const OracleSummary bad = judge(p, ref, c.data(), kFp32);
  EXPECT_EQ(bad.failing, 2);
  EXPECT_EQ(bad.first_b, 1);
  EXPECT_EQ(bad.first_i, 0);
  EXPECT_EQ(bad.first_j, 3);
  EXPECT_EQ(bad.first_actual, c[early]);
  EXPECT_EQ(bad.first.expected_bits, ref.c[early]);
  EXPECT_GE(bad.max_error_over_bound, 1.0);
  EXPECT_GT(bad.max_error_ulps, 0.4);
  ExactResult wrong_size = ref;
  wrong_size.elems.pop_back();
  EXPECT_THROW(judge(p, wrong_size, c.data(), kFp32), std::invalid_argument);
}

// A problem of many chunks is judged in parallel; the summary is the serial one whatever the
// thread count: the count of failures, the maxima, and the first failure in C order.
TEST(OracleJudge, ParallelSummaryIsTheSerialOne) {
  Problem p;
  p.m = 700;
  p.n = 300;
  p.k = 32;
  p.a.assign(static_cast<size_t>(p.a_bytes()), 0x22);  // every element 1.0 * 1.0 * 32 = 32
  p.b.assign(static_cast<size_t>(p.b_bytes()), 0x22);
  p.sfa.assign(static_cast<size_t>(p.sfa_bytes()), 0x38);
  p.sfb.assign(static_cast<size_t>(p.sfb_bytes()), 0x38);
  const ExactResult ref = exact_gemm(p);
  std::vector<uint16_t> c = ref.c;
  // Wrong outputs in three chunks of 2^16, written out of C order; an Inf in the last.
  c[70001] = next_up(c[70001]);
  c[150000] = next_up(next_up(c[150000]));
  c[200123] = 0x7C00;
  for (const int threads : {1, 3, 8}) {
    omp_set_num_threads(threads);
    const OracleSummary s = judge(p, ref, c.data(), kFp32);
    EXPECT_EQ(s.elements, 210000) << threads;
    EXPECT_EQ(s.failing, 3) << threads;
    EXPECT_EQ(s.exact_regime, 210000) << threads;
    EXPECT_EQ(s.first_i * p.n + s.first_j, 70001) << threads;
    EXPECT_EQ(s.first_actual, c[70001]) << threads;
    EXPECT_TRUE(std::isinf(s.max_error_ulps)) << threads;
  }
}

// ---- A whole output against its elements ---------------------------------------------------------

// judge_words screens plainly accepted elements (GEMM, grouped and dual GEMM) in double precision before
// the exact judgement; its summary must be the one the exact judgement of every element gives (judge_output): the same
// verdicts, counts, first failure and largest errors, to the bit. The outputs are the reference's
// words moved by 0 to 12 ulps (across the bound of many elements), signs flipped, zeros, the
// largest finite value, Inf and NaN, under every policy with a rounding allowance and others.
TEST(OracleSummary, WholeOutputJudgementIsTheElementByElementOne) {
  std::mt19937_64 rng(20261204);
  const OutType types[] = {OutType::fp16, OutType::bf16, OutType::fp32};
  const float alphas[] = {1.0f, 0.3f, -2.0f, 0x1p-10f, 1.5e-5f, 7.0f, 0x1p-140f, 3e30f};
  const char* policies[] = {"fp32", "fp16-accum", "matrix-unit:90", "fp16-accum/matrix-unit:90", "exact", "ulp:2"};
  int64_t screened_ok = 0, failing = 0;
  for (int round = 0; round < 2000; ++round) {
    const OutType type = types[round % 3];
    const OutFormat f = out_format(type);
    const int64_t m = 1 + rng() % 24, n = 1 + rng() % 24, k = 16 * (1 + rng() % 12) - 2 * (rng() % 4);
    Problem p = random_gemm(rng, type, m, n, k, alphas[rng() % 8]);
    if (round % 4 == 1) {  // a grouped GEMM, each group with its own alpha, now and then past a chunk
      Problem q;
      q.op = Op::grouped_gemm;
      q.out_type = type;
      const int64_t gn = 1 + rng() % 64;
      for (int g = 0, count = 2 + static_cast<int>(rng() % 5); g < count; ++g) {
        const int64_t gm = rng() % 3 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % 48);
        const Problem one = random_gemm(rng, type, std::max<int64_t>(gm, 1), gn, k, alphas[rng() % 8]);
        Group group;
        group.m = gm, group.n = gn, group.k = k, group.alpha = one.alpha;
        if (gm > 0) group.a = one.a, group.b = one.b, group.sfa = one.sfa, group.sfb = one.sfb;
        q.groups.push_back(std::move(group));
      }
      p = std::move(q);
    }
    if (round % 4 >= 2) {  // a dual GEMM, alphas spread so that G covers silu's whole shape
      const auto draw_alpha = [&rng]() {
        const int e = static_cast<int>(rng() % 12) - 8;
        return rng() % 3 == 0 ? std::ldexp(1.0f, e) : std::ldexp(1.0f + static_cast<float>(rng() % 8388608) / 8388608.0f, e);
      };
      p.op = Op::dual_gemm;
      p.alpha = draw_alpha();
      p.alpha2 = draw_alpha();
      // Now and then G or U near FP32's overflow threshold, where rule 6 leaves outputs unjudged.
      if (rng() % 8 == 0) (rng() % 2 ? p.alpha : p.alpha2) = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f, 100 + static_cast<int>(rng() % 28));
      const Problem second = random_gemm(rng, type, m, n, k, 1.0f);
      p.b2 = second.b;
      p.sfb2 = second.sfb;
      if (rng() % 16 == 0) p.sfb2[0] = 0x7F;
    }
    const ExactResult ref = exact_gemm(p);
    const Policy policy = Policy::parse(policies[rng() % 6]);
    std::vector<uint32_t> words(static_cast<size_t>(p.c_elems()));
    const uint32_t magnitude = f.sign_bit - 1;
    // Every other round moves words by at most an ulp and nothing else, so that the largest
    // errors belong to accepted elements (which the screen may skip) rather than to failures;
    // one round in eight keeps the reference's words, so that they belong to the rounding itself
    // (an exact-regime tie, RN to the even word, has an error of 1 over its bound).
    const bool gentle = round % 2 == 1, untouched = round % 8 == 5;
    for (size_t x = 0; x < words.size(); ++x) {
      uint32_t w = ref.word(x);
      const uint32_t mag = w & magnitude;
      switch (untouched ? 5 : gentle ? 5 + rng() % 2 * 4 : rng() % 16) {
        case 0: w ^= f.sign_bit; break;
        case 1: w = rng() % 2 ? 0 : f.sign_bit; break;
        case 2: w = (rng() % 2 ? f.sign_bit : 0) | f.max_finite; break;
        case 3: w = (rng() % 2 ? f.sign_bit : 0) | f.inf; break;
        case 4: w = f.quiet_nan; break;
        case 5: case 6: case 7: case 8: break;
        default: {
          const uint32_t d = gentle ? 1 : 1 + static_cast<uint32_t>(rng() % 12);
          const uint32_t moved = rng() % 2 ? std::min(mag + d, f.max_finite) : (mag > d ? mag - d : 0);
          if (mag <= f.inf) w = (w & f.sign_bit) | moved;
        }
      }
      words[x] = w;
    }
    const OracleSummary got = judge_words(p, ref, words.data(), policy);
    OracleSummary want;
    want.elements = p.c_elems();
    for (int64_t x = 0; x < p.c_elems(); ++x) {
      const ElementVerdict v = judge_output(p, ref, x, words[static_cast<size_t>(x)], policy);
      want.exact_regime += v.exact_regime;
      want.unjudged += v.unjudged;
      want.max_error_ulps = std::max(want.max_error_ulps, v.error_ulps);
      want.max_error_over_bound = std::max(want.max_error_over_bound, v.error_over_bound);
      if (v.ok) {
        ++screened_ok;
        continue;
      }
      if (want.failing++ == 0) {
        want.first_index = x;
        want.first_actual = words[static_cast<size_t>(x)];
        want.first = v;
      }
    }
    failing += want.failing;
    SCOPED_TRACE("round " + std::to_string(round) + ", policy " + policy.name());
    EXPECT_EQ(got.elements, want.elements);
    EXPECT_EQ(got.failing, want.failing);
    EXPECT_EQ(got.exact_regime, want.exact_regime);
    EXPECT_EQ(got.unjudged, want.unjudged);
    EXPECT_EQ(got.first_index, want.first_index);
    EXPECT_EQ(got.first_actual, want.first_actual);
    EXPECT_EQ(got.first.error_over_bound, want.first.error_over_bound);
    // Bitwise: the largest errors are the exact judgement's values, not estimates.
    EXPECT_EQ(std::memcmp(&got.max_error_ulps, &want.max_error_ulps, sizeof(double)), 0)
        << got.max_error_ulps << " vs " << want.max_error_ulps;
    EXPECT_EQ(std::memcmp(&got.max_error_over_bound, &want.max_error_over_bound, sizeof(double)), 0)
        << got.max_error_over_bound << " vs " << want.max_error_over_bound;
  }
  // Both sides of the bound were reached.
  EXPECT_GT(screened_ok, 10000);
  EXPECT_GT(failing, 1000);
}

}  // namespace
}  // namespace nvfp4
