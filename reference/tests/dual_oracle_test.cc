// The oracle for the revision-3 problems: rules 1-4 per output type (BF16 and FP32 words), rule 5
// (grouped: each group's alpha) and rule 6 (dual GEMM). Honest FP32 kernels emulated on the host
// must never be rejected: GEMMs writing BF16/FP32, and dual GEMMs whose silu uses a fast exp and
// divide with CUDA's documented worst errors (__expf: 2 + floor(|1.173 x|) ulps, taken at their
// extremes; __fdividef: 2 ulps, and 0 for divisors beyond 2^126). Wrong ones must be: U
// accumulated in FP16, BF16 written by truncation, one group's alpha wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "reference/oracle.h"
#include "reference/tests/random_problem.h"

namespace nvfp4 {
namespace {

double e2m1(int code) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8) ? -kMag[code & 7] : kMag[code & 7];
}

double e4m3(int byte) {  // ue4m3, NaN for NaN bytes
  const int e = (byte >> 3) & 15, m = byte & 7;
  if (e == 15 && m == 7) return NAN;
  return e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
}

// The word of `type` nearest to a double (one IEEE rounding), as a kernel's conversion writes it.
uint32_t word_of(OutType type, double v) {
  const OutFormat f = out_format(type);
  if (std::isnan(v)) return f.quiet_nan;
  if (std::isinf(v)) return (v < 0 ? f.sign_bit : 0u) | f.inf;
  if (v == 0) return std::signbit(v) ? f.sign_bit : 0u;
  int e = 0;
  const double frac = std::frexp(std::fabs(v), &e);
  return out_round(type, v < 0, static_cast<uint64_t>(std::ldexp(frac, 53)), e - 53);
}

enum class Accum { fp32, fp16 };

// One dot product as a CUDA-core kernel computes it: products exact in FP32 (at most 12
// significant bits), added in order in FP32 (or rounded to FP16 after every addition), times alpha.
float kernel_dot(const Problem& p, const std::vector<uint8_t>& b, const std::vector<uint8_t>& sfb, int64_t i,
                 int64_t j, float alpha, Accum accum) {
  float acc = 0;
  const int64_t kb = p.kb();
  for (int64_t x = 0; x < p.k; ++x) {
    const uint8_t ab = p.a[static_cast<size_t>(i * (p.k / 2) + x / 2)], bb = b[static_cast<size_t>(j * (p.k / 2) + x / 2)];
    const float av = static_cast<float>(e2m1(x % 2 ? ab >> 4 : ab & 15) * e4m3(p.sfa[static_cast<size_t>(i * kb + x / 16)]));
    const float bv = static_cast<float>(e2m1(x % 2 ? bb >> 4 : bb & 15) * e4m3(sfb[static_cast<size_t>(j * kb + x / 16)]));
    acc = acc + av * bv;
    if (accum == Accum::fp16) acc = static_cast<float>(decode_out(OutType::fp16, word_of(OutType::fp16, acc)));
  }
  return acc * alpha;
}

float step_ulps(float v, int64_t n) {
  for (int64_t s = 0; s < std::llabs(n); ++s) v = std::nextafter(v, n > 0 ? INFINITY : -INFINITY);
  return v;
}

// An error of up to `ulps`, at one of its two extremes half the time.
int64_t draw_error(std::mt19937_64& rng, int64_t ulps) {
  if (rng() % 2) return rng() % 2 ? ulps : -ulps;
  return static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * ulps + 1)) - ulps;
}

// __expf: ex2.approx(x * log2 e), overflowing at FP32's limit, 2 + floor(|1.173 x|) ulps off.
float fast_exp(float x, std::mt19937_64& rng) {
  const float e = static_cast<float>(std::exp(static_cast<double>(x)));
  if (std::isinf(e) || std::isnan(e) || e == 0) return e;
  return step_ulps(e, draw_error(rng, 2 + static_cast<int64_t>(std::floor(std::fabs(1.173 * x)))));
}

// __fdividef: 2 ulps, and 0 for 2^126 < |y| (where the divisor's reciprocal underflows).
float fast_divide(float x, float y, std::mt19937_64& rng) {
  if (std::fabs(y) > 0x1p126f) return std::signbit(x) != std::signbit(y) ? -0.0f : 0.0f;
  const float q = static_cast<float>(static_cast<double>(x) / static_cast<double>(y));
  if (std::isinf(q) || std::isnan(q) || q == 0) return q;
  return step_ulps(q, draw_error(rng, 2));
}

// A dual GEMM kernel: G and U as kernel_dot computes them, silu(G) = G / (1 + exp(-G)) with fast
// exp and divide (or libm's expf and an IEEE divide), the product in FP32, one conversion.
std::vector<uint32_t> kernel_dual(const Problem& p, Accum u_accum, bool fast, std::mt19937_64& rng) {
  std::vector<uint32_t> out;
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      const float g = kernel_dot(p, p.b, p.sfb, i, j, p.alpha, Accum::fp32);
      const float u = kernel_dot(p, p.b2, p.sfb2, i, j, p.alpha2, u_accum);
      const float e = fast ? fast_exp(-g, rng) : std::exp(-g);
      const float silu = fast ? fast_divide(g, 1.0f + e, rng) : g / (1.0f + e);
      out.push_back(word_of(p.out_type, silu * u));
    }
  }
  return out;
}

Problem random_dual(std::mt19937_64& rng, OutType type, int narrow_scales = -1) {
  const int64_t m = 1 + rng() % 6, n = 1 + rng() % 6, k = 16 * (1 + rng() % 24) - 2 * (rng() % 4);
  // alpha spread so that G covers silu's whole shape (|G| up to a few hundred), powers of two
  // (exact regime possible) and not.
  auto draw_alpha = [&rng]() {
    const int e = static_cast<int>(rng() % 12) - 8;
    return rng() % 3 == 0 ? std::ldexp(1.0f, e) : std::ldexp(1.0f + static_cast<float>(rng() % 8388608) / 8388608.0f, e);
  };
  Problem p = random_gemm(rng, type, m, n, k, draw_alpha(), narrow_scales);
  p.op = Op::dual_gemm;
  p.alpha2 = draw_alpha();
  const Problem second = random_gemm(rng, type, m, n, k, 1.0f, narrow_scales);
  p.b2 = second.b;
  p.sfb2 = second.sfb;
  if (rng() % 16 == 0) p.sfb2[0] = 0x7F;  // a NaN scale in U: its outputs must be NaN
  return p;
}

TEST(DualOracle, HonestFp32KernelsWithFastExpAndDividePass) {
  const uint64_t seed = 4242;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const Policy policy = Policy::parse("fp32");
  double worst = 0;
  int64_t elements = 0, below_87 = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const OutType type = static_cast<OutType>(1 + iter % 3);
    const Problem p = random_dual(rng, type);
    const ExactResult ref = exact_gemm(p);
    for (const bool fast : {true, false}) {
      const std::vector<uint32_t> c = kernel_dual(p, Accum::fp32, fast, rng);
      const OracleSummary s = judge_words(p, ref, c.data(), policy);
      ASSERT_FALSE(s.any_failure()) << "iteration " << iter << " (" << to_string(type) << (fast ? ", fast" : "")
                                    << "): element (" << s.first_i << ", " << s.first_j << ") expected "
                                    << word_text(type, s.first.expected_bits) << " got "
                                    << word_text(type, s.first_actual) << ", error " << s.first.error << " bound "
                                    << s.first.bound;
      worst = std::max(worst, s.max_error_over_bound);
      elements += s.elements;
    }
    for (size_t x = 0; x < ref.size(); ++x)
      below_87 += static_cast<double>(ref.elems[x].sum) * p.alpha * 0x1p-20 < -87;
  }
  std::printf("%lld elements, %lld with G < -87, largest error / bound %.3g\n", static_cast<long long>(elements),
              static_cast<long long>(below_87), worst);
  EXPECT_GT(below_87, 100);
}

// G swept through [-120, 120] element by element (G and U exact in FP32, the kernel's only
// error its silu and product): the eta allowance and the G < -87 term are what let it pass.
TEST(DualOracle, FastSiluAcrossTheWholeRangeOfG) {
  const uint64_t seed = 99;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const Policy policy = Policy::parse("fp32");
  int64_t checked = 0;
  for (const OutType type : {OutType::fp16, OutType::bf16, OutType::fp32}) {
    for (int x = 0; x <= 240000; ++x) {
      // G = gsum * 2^-20 with a 24-bit gsum: exact in FP32, in the exact regime (one product).
      const int64_t gsum = static_cast<int64_t>(std::llround((-120.0 + x / 1000.0) * 1048576.0 / 8)) * 8;
      const int64_t usum = static_cast<int64_t>(rng() % (1 << 24)) - (1 << 23);
      ExactElement g, u;
      g.sum = gsum, g.abs_sum = static_cast<u128>(std::llabs(gsum)), g.nonzero = gsum != 0, g.min_tz = gsum ? __builtin_ctzll(std::llabs(gsum)) : 128;
      u.sum = usum, u.abs_sum = static_cast<u128>(std::llabs(usum)), u.nonzero = usum != 0, u.min_tz = usum ? __builtin_ctzll(std::llabs(usum)) : 128;
      const float alpha2 = 0x1p-12f;
      const float gf = static_cast<float>(gsum * 0x1p-20), uf = static_cast<float>(usum * 0x1p-20) * alpha2;
      const DualValue d = dual_value(g, 1.0f, u, alpha2);
      const float silu = fast_divide(gf, 1.0f + fast_exp(-gf, rng), rng);
      const uint32_t actual = word_of(type, silu * uf);
      const ElementVerdict v = judge_dual_element(g, u, d, 1.0f, alpha2, actual, policy, type);
      ASSERT_TRUE(v.ok) << to_string(type) << " G " << gf << " U " << uf << ": expected "
                        << word_text(type, v.expected_bits) << " got " << word_text(type, actual) << ", error "
                        << v.error << " bound " << v.bound;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * 240001);
}

// The same honest FP32-epilogue kernels with the alphas the schedule draws for BF16 and FP32
// outputs: down among FP32's subnormals (G, silu(G) and the product lose up to 2^-150 each, which
// rule 6's absolute term allows) and up to 2^126 (G or U overflows FP32: silu(G) * U is then NaN
// or Inf, and rule 6 leaves such an element unjudged).
TEST(DualOracle, HonestFp32EpiloguesAcrossFp32sWholeRange) {
  const uint64_t seed = 2026;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const Policy policy = Policy::parse("fp32");
  int64_t subnormal_g = 0, unjudged = 0, elements = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const OutType type = iter % 2 ? OutType::bf16 : OutType::fp32;
    Problem p = random_dual(rng, type);
    // As harness/draw/generators.cc moves an arbitrary alpha: 2^-(100..129) or 2^(80..109) times it.
    const int shift = iter % 4 < 2 ? -100 - static_cast<int>(rng() % 30) : 80 + static_cast<int>(rng() % 30);
    float& moved = iter % 4 == 0 || iter % 4 == 2 ? p.alpha : p.alpha2;
    moved = std::ldexp(moved, shift);
    const ExactResult ref = exact_gemm(p);
    for (const bool fast : {true, false}) {
      const std::vector<uint32_t> c = kernel_dual(p, Accum::fp32, fast, rng);
      const OracleSummary s = judge_words(p, ref, c.data(), policy);
      ASSERT_FALSE(s.any_failure()) << "iteration " << iter << " (" << to_string(type) << (fast ? ", fast" : "")
                                    << ", alpha " << p.alpha << ", alpha2 " << p.alpha2 << "): element ("
                                    << s.first_i << ", " << s.first_j << ") expected "
                                    << word_text(type, s.first.expected_bits) << " got "
                                    << word_text(type, s.first_actual) << ", error " << s.first.error << " bound "
                                    << s.first.bound;
      unjudged += s.unjudged;
      elements += s.elements;
    }
    for (size_t x = 0; x < ref.size(); ++x) {
      const double g = std::fabs(static_cast<double>(ref.elems[x].sum) * p.alpha * 0x1p-20);
      subnormal_g += g > 0 && g < 0x1p-126;
    }
  }
  std::printf("%lld elements, %lld with a subnormal G, %lld unjudged\n", static_cast<long long>(elements),
              static_cast<long long>(subnormal_g), static_cast<long long>(unjudged));
  EXPECT_GT(subnormal_g, 100);
  EXPECT_GT(unjudged, 100);
}

// Rule 6's absolute term is small: an output flushed to zero, or off by a few of FP32's smallest
// steps times |U|, still fails.
TEST(DualOracle, UnderflowAllowanceIsOnlyAFewSubnormalSteps) {
  const Policy fp32 = Policy::parse("fp32");
  ExactElement g, u;
  g.sum = 3 << 20, g.abs_sum = 3 << 20, g.nonzero = 1, g.min_tz = 20;  // G = 3 * alpha
  u.sum = 1 << 20, u.abs_sum = 1 << 20, u.nonzero = 1, u.min_tz = 20;  // U = 1
  const float alpha = 0x1p-140f;  // G = 3 * 2^-140, silu(G) ~ G / 2: about 24 units of 2^-149
  const DualValue d = dual_value(g, alpha, u, 1.0f);
  const uint32_t right = round_dual(d, false, OutType::fp32);
  ASSERT_EQ(right, word_of(OutType::fp32, 1.5 * 0x1p-140));
  EXPECT_TRUE(judge_dual_element(g, u, d, alpha, 1.0f, right, fp32, OutType::fp32).ok);
  EXPECT_TRUE(judge_dual_element(g, u, d, alpha, 1.0f, right + 2, fp32, OutType::fp32).ok);
  EXPECT_FALSE(judge_dual_element(g, u, d, alpha, 1.0f, right + 8, fp32, OutType::fp32).ok);
  EXPECT_FALSE(judge_dual_element(g, u, d, alpha, 1.0f, 0u, fp32, OutType::fp32).ok);
  // G at FP32's overflow threshold: any word, NaN included, is unjudged; a NaN scale still rules.
  ExactElement huge = g;
  huge.sum = i128(1) << 40, huge.abs_sum = u128(1) << 40, huge.min_tz = 40;  // 2^20 * alpha
  const DualValue dh = dual_value(huge, 0x1p108f, u, 1.0f);                   // G = 2^128
  const ElementVerdict v = judge_dual_element(huge, u, dh, 0x1p108f, 1.0f, 0x7fc00000u, fp32, OutType::fp32);
  EXPECT_TRUE(v.ok);
  EXPECT_TRUE(v.unjudged);
  ExactElement nan_u = u;
  nan_u.nan = true;
  EXPECT_FALSE(judge_dual_element(huge, nan_u, dh, 0x1p108f, 1.0f, 0x3f800000u, fp32, OutType::fp32).ok);
  // Just below the threshold it is judged: 2^127 * silu(1)... far from Inf, a NaN fails.
  const DualValue db = dual_value(huge, 0x1p106f, u, 1.0f);  // G = 2^126
  EXPECT_FALSE(judge_dual_element(huge, u, db, 0x1p106f, 1.0f, 0x7fc00000u, fp32, OutType::fp32).ok);
}

TEST(DualOracle, FailsAKernelThatAccumulatesUInFp16) {
  // FP16 accumulation loses about 2^-11 of the partial sums: always visible in FP32 outputs,
  // mostly in FP16 ones (half an ulp is 2^-11 there too), and in BF16 ones only where it grows
  // past 2^-9, so BF16 is caught less often, but caught. Narrow scales: over the full range,
  // sums that cancel massively leave bounds (|alpha| gamma_t S) that no output can exceed.
  const uint64_t seed = 777;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const Policy policy = Policy::parse("fp32");
  int64_t cases[4] = {}, caught[4] = {};
  for (int iter = 0; iter < 900; ++iter) {
    const OutType type = static_cast<OutType>(1 + iter % 3);
    Problem p = random_dual(rng, type, 1);
    if (p.k < 64) continue;
    p.sfb2[0] = 0x38;  // no NaN: the accumulation is what is judged
    const ExactResult ref = exact_gemm(p);
    const std::vector<uint32_t> c = kernel_dual(p, Accum::fp16, false, rng);
    const int t = static_cast<int>(type);
    ++cases[t];
    caught[t] += judge_words(p, ref, c.data(), policy).any_failure();
  }
  for (const OutType t : {OutType::fp16, OutType::bf16, OutType::fp32}) {
    const int x = static_cast<int>(t);
    std::printf("U accumulated in FP16, %s outputs: caught in %lld of %lld cases\n", to_string(t),
                static_cast<long long>(caught[x]), static_cast<long long>(cases[x]));
  }
  // The misses are cases whose every G lies below -87 (where rule 6 lets silu(G) be 0) or whose
  // sums cancel.
  EXPECT_GE(caught[3], cases[3] * 95 / 100);
  EXPECT_GE(caught[1], cases[1] * 80 / 100);
  EXPECT_GE(caught[2], cases[2] * 50 / 100);
}

TEST(DualOracle, RuleSixDetails) {
  const Policy fp32 = Policy::parse("fp32"), exact = Policy::parse("exact");
  ExactElement g, u;
  g.sum = 1 << 20, g.abs_sum = 1 << 20, g.nonzero = 1, g.min_tz = 20;  // G = 1
  u.sum = 1 << 20, u.abs_sum = 1 << 20, u.nonzero = 1, u.min_tz = 20;  // U = 1
  const DualValue d = dual_value(g, 1.0f, u, 1.0f);
  // silu(1) = 0.731058578630...: FP32 0x3f3b26a8; eta = 2^-16 allows about 2^8 FP32 ulps.
  for (const Policy& policy : {fp32, exact}) {
    EXPECT_TRUE(judge_dual_element(g, u, d, 1.0f, 1.0f, 0x3f3b26a8u, policy, OutType::fp32).ok);
    EXPECT_TRUE(judge_dual_element(g, u, d, 1.0f, 1.0f, 0x3f3b26a8u + 20, policy, OutType::fp32).ok);
    EXPECT_FALSE(judge_dual_element(g, u, d, 1.0f, 1.0f, 0x3f3b26a8u + 400, policy, OutType::fp32).ok);
    // BF16: B is far below half an ulp: only RN_bf16(v) = 0x3f3b passes.
    EXPECT_TRUE(judge_dual_element(g, u, d, 1.0f, 1.0f, 0x3f3bu, policy, OutType::bf16).ok);
    EXPECT_FALSE(judge_dual_element(g, u, d, 1.0f, 1.0f, 0x3f3cu, policy, OutType::bf16).ok);
    EXPECT_FALSE(judge_dual_element(g, u, d, 1.0f, 1.0f, 0x7fc0u, policy, OutType::bf16).ok);
  }
  // NaN in U's scales: only NaN passes, any payload.
  ExactElement nan_u = u;
  nan_u.nan = true;
  EXPECT_TRUE(judge_dual_element(g, nan_u, d, 1.0f, 1.0f, 0xffc00001u, fp32, OutType::fp32).ok);
  EXPECT_FALSE(judge_dual_element(g, nan_u, d, 1.0f, 1.0f, 0x3f3b26a8u, fp32, OutType::fp32).ok);
  // G = -90 (below -87): an FP32 silu's -0 is accepted, a +1 ulp value beside it too, 2^-100 not.
  ExactElement far = g;
  far.sum = -(int64_t(90) << 20), far.abs_sum = int64_t(90) << 20, far.min_tz = 21;
  const DualValue df = dual_value(far, 1.0f, u, 1.0f);
  EXPECT_TRUE(judge_dual_element(far, u, df, 1.0f, 1.0f, 0x80000000u, fp32, OutType::fp32).ok);
  EXPECT_TRUE(judge_dual_element(far, u, df, 1.0f, 1.0f, 0x00000000u, fp32, OutType::fp32).ok);
  EXPECT_FALSE(judge_dual_element(far, u, df, 1.0f, 1.0f, word_of(OutType::fp32, -0x1p-100), fp32, OutType::fp32).ok);
  // The same G = -80 (above -87): -0 is wrong there for FP32 (v = -1.4e-33 is far above 2^-149).
  ExactElement near = far;
  near.sum = -(int64_t(80) << 20), near.min_tz = 24;
  const DualValue dn = dual_value(near, 1.0f, u, 1.0f);
  EXPECT_FALSE(judge_dual_element(near, u, dn, 1.0f, 1.0f, 0x80000000u, fp32, OutType::fp32).ok);
  // Overflow (rule 4): v beyond BF16's range accepts only +Inf. G = U = 2^70: inside FP32's
  // range (beyond it rule 6 leaves the element unjudged), v = 2^140 beyond BF16's.
  ExactElement big = g;
  big.sum = i128(1) << 90, big.abs_sum = u128(1) << 90, big.min_tz = 90;
  const DualValue db = dual_value(big, 1.0f, big, 1.0f);
  EXPECT_TRUE(judge_dual_element(big, big, db, 1.0f, 1.0f, 0x7f80u, fp32, OutType::bf16).ok);
  EXPECT_FALSE(judge_dual_element(big, big, db, 1.0f, 1.0f, 0xff80u, fp32, OutType::bf16).ok);
  EXPECT_FALSE(judge_dual_element(big, big, db, 1.0f, 1.0f, 0x7f7fu, fp32, OutType::bf16).ok);
  EXPECT_FALSE(judge_dual_element(big, big, db, 1.0f, 1.0f, 0x7f7fu, fp32, OutType::bf16).unjudged);
  Policy saturating = fp32;
  saturating.saturates = true;
  EXPECT_TRUE(judge_dual_element(big, big, db, 1.0f, 1.0f, 0x7f7fu, saturating, OutType::bf16).ok);
}

// ---- rules 1-4 for BF16 and FP32 outputs ---------------------------------------------------------

std::vector<uint32_t> kernel_gemm(const Problem& p, const std::vector<float>& alphas_per_row = {}) {
  std::vector<uint32_t> out;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j)
      out.push_back(word_of(p.out_type, kernel_dot(p, p.b, p.sfb, i, j, alphas_per_row.empty() ? p.alpha : alphas_per_row[i], Accum::fp32)));
  return out;
}

TEST(OutTypeOracle, HonestFp32GemmsWritingBf16AndFp32Pass) {
  const uint64_t seed = 1234;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int64_t exact = 0, elements = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    const OutType type = iter % 2 ? OutType::bf16 : OutType::fp32;
    const float alpha = rng() % 2 ? std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10) : 0.1f * (1 + rng() % 30);
    const Problem p = random_gemm(rng, type, 1 + rng() % 8, 1 + rng() % 8, 2 * (1 + rng() % 200), alpha);
    const ExactResult ref = exact_gemm(p);
    const std::vector<uint32_t> c = kernel_gemm(p);
    for (const char* name : {"fp32", "matrix-unit"}) {
      const OracleSummary s = judge_words(p, ref, c.data(), Policy::parse(name));
      ASSERT_FALSE(s.any_failure()) << name << " iteration " << iter << " (" << to_string(type) << "): ("
                                    << s.first_i << ", " << s.first_j << ") expected "
                                    << word_text(type, s.first.expected_bits) << " got "
                                    << word_text(type, s.first_actual);
      if (std::string(name) == "fp32") exact += s.exact_regime, elements += s.elements;
    }
  }
  std::printf("%lld of %lld elements in the exact regime\n", static_cast<long long>(exact), static_cast<long long>(elements));
  EXPECT_GT(exact, elements / 4);
}

TEST(OutTypeOracle, Bf16ByTruncationIsCaught) {
  const uint64_t seed = 55;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int64_t caught = 0;
  for (int iter = 0; iter < 200; ++iter) {
    const Problem p = random_gemm(rng, OutType::bf16, 4, 4, 64, 1.0f);
    const ExactResult ref = exact_gemm(p);
    std::vector<uint32_t> c;
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        const float f = kernel_dot(p, p.b, p.sfb, i, j, p.alpha, Accum::fp32);
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof bits);
        c.push_back(bits >> 16);  // the upper half of the FP32 word: rounding toward zero
      }
    caught += judge_words(p, ref, c.data(), Policy::parse("fp32")).any_failure();
  }
  EXPECT_GT(caught, 150);
}

TEST(OutTypeOracle, OverflowSaturationUlpAndAllclosePerType) {
  ExactElement e;  // r = 7: alpha * r = 1.75 * 2^127 (below BF16's threshold) or 1.75 * 2^128
  e.sum = 7 << 20, e.abs_sum = 7 << 20, e.nonzero = 1, e.min_tz = 20;
  const Policy fp32 = Policy::parse("fp32");
  EXPECT_TRUE(judge_element(e, 0x1p125f, 0x7f60u, fp32, OutType::bf16).ok);  // 1.75 * 2^127 exactly
  EXPECT_FALSE(judge_element(e, 0x1p125f, 0x7f80u, fp32, OutType::bf16).ok);
  EXPECT_TRUE(judge_element(e, 0x1p126f, 0x7f80u, fp32, OutType::bf16).ok);  // beyond: Inf only
  EXPECT_FALSE(judge_element(e, 0x1p126f, 0x7f7fu, fp32, OutType::bf16).ok);
  EXPECT_FALSE(judge_element(e, 0x1p126f, 0xff80u, fp32, OutType::bf16).ok);
  Policy saturating = fp32;
  saturating.saturates = true;
  EXPECT_TRUE(judge_element(e, 0x1p126f, 0x7f7fu, saturating, OutType::bf16).ok);
  EXPECT_TRUE(judge_element(e, 0x1p126f, 0x7f7fffffu, saturating, OutType::fp32).ok);
  EXPECT_FALSE(judge_element(e, 0x1p126f, 0x7f7fu, saturating, OutType::fp32).ok);
  // ulp:N counts steps of the output type; allclose compares values of it.
  ExactElement one;
  one.sum = 1 << 20, one.abs_sum = 1 << 20, one.nonzero = 1, one.min_tz = 20;
  EXPECT_TRUE(judge_element(one, 1.0f, 0x3f800003u, Policy::parse("ulp:3"), OutType::fp32).ok);
  EXPECT_FALSE(judge_element(one, 1.0f, 0x3f800004u, Policy::parse("ulp:3"), OutType::fp32).ok);
  EXPECT_EQ(judge_element(one, 1.0f, 0x3f82u, Policy::parse("ulp:3"), OutType::bf16).error_ulps, 2);
  EXPECT_TRUE(judge_element(one, 1.0f, 0x3f81u, Policy::parse("allclose:1e-2:0"), OutType::bf16).ok);
  EXPECT_FALSE(judge_element(one, 1.0f, 0x3f82u, Policy::parse("allclose:1e-2:0"), OutType::bf16).ok);
  // Subnormal results: BF16's unit is 2^-133.
  ExactElement tiny;
  tiny.sum = 3, tiny.abs_sum = 3, tiny.nonzero = 1, tiny.min_tz = 0;  // 3 * 2^-20
  EXPECT_TRUE(judge_element(tiny, 0x1p-114f, 0x0002u, fp32, OutType::bf16).ok);  // 1.5 units -> 2
  EXPECT_FALSE(judge_element(tiny, 0x1p-114f, 0x0003u, fp32, OutType::bf16).ok);
  EXPECT_EQ(judge_element(tiny, 0x1p-114f, 0x0003u, fp32, OutType::bf16).expected_bits, 0x0002u);
}

// ---- rule 5 ---------------------------------------------------------------------------------------

TEST(GroupedOracle, EachGroupWithItsOwnAlpha) {
  const uint64_t seed = 5050;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int64_t caught = 0, cases = 0;
  for (int iter = 0; iter < 200; ++iter) {
    Problem p;
    p.op = Op::grouped_gemm;
    p.out_type = static_cast<OutType>(1 + iter % 3);
    const int count = 2 + static_cast<int>(rng() % 5);
    std::vector<Problem> alone;
    for (int g = 0; g < count; ++g) {
      const int64_t m = g == 1 ? 0 : static_cast<int64_t>(rng() % 140);
      Problem q = random_gemm(rng, p.out_type, std::max<int64_t>(m, 1), 1 + rng() % 5, 32, std::ldexp(1.0f, g - 2));
      Group grp;
      grp.m = m, grp.n = q.n, grp.k = q.k, grp.alpha = q.alpha;
      if (m > 0) grp.a = q.a, grp.b = q.b, grp.sfa = q.sfa, grp.sfb = q.sfb;
      p.groups.push_back(grp);
      alone.push_back(q);
    }
    const ExactResult ref = exact_gemm(p);
    std::vector<uint32_t> honest, wrong;
    for (int g = 0; g < count; ++g) {
      if (p.groups[static_cast<size_t>(g)].m == 0) continue;  // an empty group has no output
      const std::vector<uint32_t> c = kernel_gemm(alone[static_cast<size_t>(g)]);
      honest.insert(honest.end(), c.begin(), c.end());
      // The wrong kernel uses group 0's alpha for every group (a per-group alpha lost).
      Problem q = alone[static_cast<size_t>(g)];
      q.alpha = p.groups[0].alpha;
      const std::vector<uint32_t> w = kernel_gemm(q);
      wrong.insert(wrong.end(), w.begin(), w.end());
    }
    ASSERT_EQ(honest.size(), ref.size());
    const OracleSummary s = judge_words(p, ref, honest.data(), Policy::parse("fp32"));
    ASSERT_FALSE(s.any_failure()) << "iteration " << iter << " group " << s.first_g;
    const OracleSummary w = judge_words(p, ref, wrong.data(), Policy::parse("fp32"));
    if (ref.size() > static_cast<size_t>(p.groups[0].m * p.groups[0].n)) {
      ++cases;
      caught += w.any_failure();
      if (w.any_failure()) { ASSERT_GT(w.first_g, 1); }  // groups 0 (its own alpha) and 1 (empty) are right
    }
  }
  EXPECT_EQ(caught, cases);
  // The 16-bit entry point refuses FP32 words.
  Problem p;
  p.op = Op::grouped_gemm;
  p.out_type = OutType::fp32;
  p.groups.resize(1);
  const ExactResult ref = exact_gemm(p);
  EXPECT_THROW(judge(p, ref, nullptr, Policy::parse("fp32")), std::invalid_argument);
}

}  // namespace
}  // namespace nvfp4
