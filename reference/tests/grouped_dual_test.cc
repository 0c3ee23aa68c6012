// The exact reference for the revision-3 problems: BF16 and FP32 outputs against an independent
// rounding (nearbyint on a scaled double), grouped GEMM against each group computed alone, the
// packed arrangement's offsets and buffers against SPEC section 2's formulas (64-bit sizes
// included), and dual GEMM's silu(G) * U against __float128 to show its 2^-60 relative error.
#include <gtest/gtest.h>
#include <omp.h>
#include <quadmath.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "reference/exact_gemm.h"
#include "reference/long_double_exp.h"
#include "reference/scale_layout.h"
#include "reference/tests/random_problem.h"

namespace nvfp4 {
namespace {

// RN to `precision` bits, normal exponents from emin, Inf from 2^(emax+1) after rounding: the
// textbook formula, exact for doubles whose scaled value fits 53 bits.
double round_formula(double v, int precision, int emin, int emax) {
  if (v == 0) return v;
  const int e = std::max(std::ilogb(v), emin);
  const double r = std::ldexp(std::nearbyint(std::ldexp(v, precision - 1 - e)), e - (precision - 1));
  if (std::fabs(r) >= std::ldexp(1.0, emax + 1)) return std::copysign(INFINITY, v);
  return r;
}

TEST(ExactOutputs, Bf16AndFp32RoundTheExactValueOnce) {
  const uint64_t seed = 31;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int64_t checked = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const OutType type = iter % 2 ? OutType::bf16 : OutType::fp32;
    // alpha from tiny (subnormal outputs) to huge (overflow).
    const float alpha = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 250) - 140);
    const Problem p = random_gemm(rng, type, 1 + rng() % 9, 1 + rng() % 5, 2 * (1 + rng() % 40), alpha);
    const ExactResult ref = exact_gemm(p);
    ASSERT_EQ(ref.out_type, type);
    ASSERT_EQ(ref.size(), static_cast<size_t>(p.c_elems()));
    ASSERT_EQ(type == OutType::fp32 ? ref.c32.size() : ref.c.size(), ref.size());
    const OutFormat f = out_format(type);
    for (size_t x = 0; x < ref.size(); ++x) {
      const ExactElement& e = ref.elems[x];
      // |sum| < 80 * 2^43: with alpha's 24 bits the product needs more than 53 bits only rarely;
      // those are skipped (the exact path is checked against FP16's in out_type_test).
      const double sum = static_cast<double>(static_cast<int64_t>(e.sum));
      const double exact = sum * static_cast<double>(alpha);
      if (std::fma(sum, static_cast<double>(alpha), -exact) != 0) continue;
      const double want = round_formula(std::ldexp(exact, -20), f.precision, f.emin, f.emax);
      const double got = decode_out(type, ref.word(x));
      ASSERT_EQ(got, want) << "iteration " << iter << " element " << x;
      if (e.sum != 0) { ASSERT_EQ(std::signbit(got), std::signbit(want)); }
      if (e.sum == 0) { ASSERT_EQ(ref.word(x), 0u); }  // an exact zero is +0
      ++checked;
    }
  }
  EXPECT_GT(checked, 2000);
}

TEST(ExactOutputs, Fp16PathUnchanged) {
  std::mt19937_64 rng(3);
  const Problem p = random_gemm(rng, OutType::fp16, 37, 5, 96, 0.1f);
  const ExactResult ref = exact_gemm(p);
  ASSERT_TRUE(ref.c32.empty());
  for (size_t x = 0; x < ref.size(); ++x) {
    ASSERT_EQ(ref.c[x], round_result(ref.elems[x], p.alpha));
    ASSERT_EQ(ref.word(x), ref.c[x]);
  }
  EXPECT_EQ(ref.group_offset, (std::vector<int64_t>{0, p.c_elems()}));
}

Problem random_grouped(std::mt19937_64& rng, const std::vector<int64_t>& ms, bool packed, OutType type) {
  Problem p;
  p.op = Op::grouped_gemm;
  p.packed = packed;
  p.out_type = type;
  const int64_t n = 1 + rng() % 6, k = 2 * (1 + rng() % 40);
  for (const int64_t m : ms) {
    Group g;
    g.m = m;
    g.n = packed ? n : 1 + rng() % 6;
    g.k = packed ? k : 2 * (1 + rng() % 40);
    g.alpha = std::ldexp(1.0f + static_cast<float>(rng() % 100) / 100.0f, static_cast<int>(rng() % 8) - 4);
    if (m > 0) {
      g.a = random_bytes(rng, g.a_bytes(BlockFormat::nvfp4));
      g.b = random_bytes(rng, g.b_bytes(BlockFormat::nvfp4));
      g.sfa = random_scales(rng, g.sfa_bytes(BlockFormat::nvfp4), true);
      g.sfb = random_scales(rng, g.sfb_bytes(BlockFormat::nvfp4), true);
      if (rng() % 8 == 0) g.sfb[0] = 0x7F;  // a NaN scale in one group only
    }
    p.groups.push_back(std::move(g));
  }
  return p;
}

TEST(ExactGrouped, EveryGroupIsItsOwnGemmWithItsAlpha) {
  const uint64_t seed = 41;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 60; ++iter) {
    std::vector<int64_t> ms;
    const int count = 1 + static_cast<int>(rng() % 8);
    for (int g = 0; g < count; ++g) ms.push_back(rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 260));
    const OutType type = static_cast<OutType>(1 + rng() % 3);
    const Problem p = random_grouped(rng, ms, rng() % 2, type);
    ASSERT_EQ(problem_error(p), "");
    const ExactResult ref = exact_gemm(p);
    ASSERT_EQ(ref.group_offset.size(), ms.size() + 1);
    ASSERT_EQ(ref.group_offset.back(), p.c_elems());
    for (size_t g = 0; g < ms.size(); ++g) {
      const Group& q = p.groups[g];
      ASSERT_EQ(ref.group_offset[g + 1] - ref.group_offset[g], q.m * q.n);
      if (q.m == 0) continue;
      Problem alone;
      alone.op = Op::gemm;
      alone.m = q.m, alone.n = q.n, alone.k = q.k, alone.l = 1;
      alone.alpha = q.alpha;
      alone.out_type = type;
      alone.a = q.a, alone.b = q.b, alone.sfa = q.sfa, alone.sfb = q.sfb;
      const ExactResult want = exact_gemm(alone);
      for (size_t x = 0; x < want.size(); ++x) {
        const size_t at = static_cast<size_t>(ref.group_offset[g]) + x;
        ASSERT_EQ(ref.elems[at].sum, want.elems[x].sum) << "group " << g << " element " << x;
        ASSERT_EQ(ref.elems[at].nan, want.elems[x].nan);
        ASSERT_EQ(ref.word(at), want.word(x)) << "group " << g << " element " << x;
        const OutputPosition pos = output_position(p, static_cast<int64_t>(at));
        ASSERT_EQ(pos.g, static_cast<int64_t>(g));
        ASSERT_EQ(pos.i * q.n + pos.j, static_cast<int64_t>(x));
      }
    }
  }
}

TEST(ExactGrouped, AllGroupsEmptyHaveNoOutput) {
  Problem p;
  p.op = Op::grouped_gemm;
  p.groups.resize(3);
  ASSERT_EQ(problem_error(p), "");
  const ExactResult ref = exact_gemm(p);
  EXPECT_EQ(ref.size(), 0u);
  EXPECT_EQ(ref.group_offset, (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(PackedLayout, OffsetsFollowSpecSection2) {
  std::mt19937_64 rng(7);
  const std::vector<int64_t> ms = {40, 0, 248, 1, 127, 129, 128};
  Problem p = random_grouped(rng, ms, true, OutType::bf16);
  const PackedLayout L = packed_layout(p);
  EXPECT_EQ(L.row_offset, (std::vector<int64_t>{0, 40, 40, 288, 289, 416, 545, 673}));
  EXPECT_EQ(L.tile_offset, (std::vector<int64_t>{0, 1, 1, 3, 4, 5, 7, 8}));
  const int64_t n = L.n, k = L.k, kb = L.kb, kt = ceil_div(kb, 4);
  const uint8_t pad = 0x7F;
  const PackedData d = pack_groups(p, pad);
  ASSERT_EQ(static_cast<int64_t>(d.a.size()), L.a_bytes());
  ASSERT_EQ(static_cast<int64_t>(d.b.size()), L.b_bytes());
  ASSERT_EQ(static_cast<int64_t>(d.sfa_linear.size()), L.sfa_linear_bytes());
  ASSERT_EQ(static_cast<int64_t>(d.sfa_permuted.size()), L.sfa_permuted_bytes());
  ASSERT_EQ(static_cast<int64_t>(d.sfb_linear.size()), L.sfb_linear_bytes());
  ASSERT_EQ(static_cast<int64_t>(d.sfb_permuted.size()), L.sfb_permuted_bytes());
  EXPECT_EQ(L.sfa_permuted_bytes(), 8 * kt * 512);
  EXPECT_EQ(L.c_elems(), 673 * n);
  std::vector<bool> written(d.sfa_permuted.size(), false);
  for (size_t g = 0; g < ms.size(); ++g) {
    const Group& q = p.groups[g];
    EXPECT_EQ(L.c_offset(g), L.row_offset[g] * n);
    EXPECT_EQ(L.b_offset(g), static_cast<int64_t>(g) * n * (k / 2));
    for (int64_t i = 0; i < q.m; ++i) {
      for (int64_t x = 0; x < k / 2; ++x)
        ASSERT_EQ(d.a[static_cast<size_t>((L.row_offset[g] + i) * (k / 2) + x)], q.a[static_cast<size_t>(i * (k / 2) + x)]);
      for (int64_t s = 0; s < kb; ++s) {
        const uint8_t want = q.sfa[static_cast<size_t>(i * kb + s)];
        ASSERT_EQ(d.sfa_linear[static_cast<size_t>(L.sfa_linear_offset(g) + i * kb + s)], want);
        // Group g's tiles start at tile T_g: SPEC's permuted formula with i counted in the group.
        const int64_t at = (L.tile_offset[g] + i / 128) * kt * 512 + (s / 4) * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 + s % 4;
        ASSERT_EQ(at, L.sfa_permuted_offset(g) + sf_permuted_offset(q.m, kb, 0, i, s));
        ASSERT_EQ(d.sfa_permuted[static_cast<size_t>(at)], want);
        written[static_cast<size_t>(at)] = true;
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t x = 0; x < k / 2; ++x) {
        const uint8_t want = q.m == 0 ? 0 : q.b[static_cast<size_t>(j * (k / 2) + x)];
        ASSERT_EQ(d.b[static_cast<size_t>(L.b_offset(g) + j * (k / 2) + x)], want);
      }
      for (int64_t s = 0; s < kb; ++s) {
        const uint8_t want = q.m == 0 ? pad : q.sfb[static_cast<size_t>(j * kb + s)];
        ASSERT_EQ(d.sfb_permuted[static_cast<size_t>(L.sfb_permuted_offset(g) + sf_permuted_offset(n, kb, 0, j, s))], want);
      }
    }
  }
  // Every cell no group row owns is padding: rows past m_g in a group's last tile, blocks past kb.
  int64_t padding = 0;
  for (size_t x = 0; x < written.size(); ++x) {
    if (written[x]) continue;
    ASSERT_EQ(d.sfa_permuted[x], pad) << x;
    ++padding;
  }
  EXPECT_EQ(padding, 8 * 128 * kt * 4 - 673 * kb);
}

TEST(PackedLayout, SixtyFourBitOffsets) {
  // 256 experts of n = 4096, k = 7168 (shape only): a packed B of 3.5 GiB.
  Problem p;
  p.op = Op::grouped_gemm;
  p.packed = true;
  for (int g = 0; g < 256; ++g) {
    Group q;
    q.m = g % 3 == 0 ? 0 : 129;
    q.n = 4096;
    q.k = 7168;
    p.groups.push_back(q);
  }
  ASSERT_EQ(shape_error(p), "");
  const PackedLayout L = packed_layout(p);
  EXPECT_EQ(L.b_bytes(), int64_t(256) * 4096 * 3584);
  EXPECT_GT(L.b_bytes(), int64_t(1) << 31);
  EXPECT_EQ(L.b_offset(255), int64_t(255) * 4096 * 3584);
  EXPECT_EQ(L.sfb_permuted_offset(255), int64_t(255) * 32 * 112 * 512);
  EXPECT_EQ(L.total_m(), 170 * 129);
}

TEST(ProblemShape, GroupedAndDualForms) {
  Problem p;
  p.op = Op::grouped_gemm;
  EXPECT_NE(shape_error(p).find("at least 1 group"), std::string::npos);
  p.groups.resize(2);
  p.groups[1].m = 5;
  p.groups[1].k = 34;
  EXPECT_EQ(shape_error(p), "");  // separate groups may differ in k
  p.packed = true;
  EXPECT_NE(shape_error(p).find("one n and one k"), std::string::npos) << shape_error(p);
  p.packed = false;
  p.groups[1].k = 3;
  EXPECT_NE(shape_error(p).find("group 1: k = 3"), std::string::npos) << shape_error(p);
  p.groups[1].k = 34;
  p.groups[0].m = -1;
  EXPECT_NE(shape_error(p).find("group 0: m = -1"), std::string::npos);
  p.groups[0].m = 0;
  p.groups[1].n = int64_t(1) << 39;
  p.groups[1].m = 4;
  EXPECT_NE(shape_error(p).find("2^40"), std::string::npos) << shape_error(p);
  p.groups[1].n = 3;
  EXPECT_FALSE(p.has_data());
  p.groups[1].a.resize(static_cast<size_t>(p.groups[1].a_bytes(BlockFormat::nvfp4)));
  p.groups[1].b.resize(static_cast<size_t>(p.groups[1].b_bytes(BlockFormat::nvfp4)));
  p.groups[1].sfa.resize(static_cast<size_t>(p.groups[1].sfa_bytes(BlockFormat::nvfp4)));
  p.groups[1].sfb.resize(static_cast<size_t>(p.groups[1].sfb_bytes(BlockFormat::nvfp4)));
  EXPECT_TRUE(p.has_data());
  p.groups[0].expect = std::vector<uint32_t>{};
  EXPECT_NE(problem_error(p).find("empty group has no expect"), std::string::npos) << problem_error(p);
  p.groups[0].expect.reset();
  p.groups[1].alpha = NAN;
  EXPECT_NE(problem_error(p).find("group 1: alpha"), std::string::npos);

  Problem d;
  d.op = Op::dual_gemm;
  d.m = 3, d.n = 2, d.k = 32;
  d.out_type = OutType::fp32;
  d.a.resize(static_cast<size_t>(d.a_bytes()));
  d.b.resize(static_cast<size_t>(d.b_bytes()));
  d.sfa.resize(static_cast<size_t>(d.sfa_bytes()));
  d.sfb.resize(static_cast<size_t>(d.sfb_bytes()));
  EXPECT_FALSE(d.has_data());
  EXPECT_NE(problem_error(d).find("b2 has 0 bytes, expected 32"), std::string::npos) << problem_error(d);
  d.b2 = d.b;
  d.sfb2 = d.sfb;
  EXPECT_EQ(problem_error(d), "");
  d.expect = std::vector<uint32_t>(6, 0x7FC00000u);
  EXPECT_EQ(problem_error(d), "");
  d.out_type = OutType::bf16;
  EXPECT_NE(problem_error(d).find("wider than the output type"), std::string::npos);
  EXPECT_EQ(d.c_bytes(), 12);
  d.groups.resize(1);
  EXPECT_NE(shape_error(d).find("only grouped_gemm has groups"), std::string::npos);
}

// ---- dual GEMM -------------------------------------------------------------------------------

// G = alpha * sum * 2^-20 exactly in __float128 (113 bits: the sums here have at most 80).
__float128 exact_q(i128 sum, float alpha) { return static_cast<__float128>(sum) * static_cast<__float128>(alpha) / static_cast<__float128>(1048576.0); }

__float128 v_q(i128 gsum, float alpha, i128 usum, float alpha2) {
  const __float128 g = exact_q(gsum, alpha), u = exact_q(usum, alpha2);
  return g / (1 + expq(-g)) * u;
}

ExactElement with_sum(i128 sum) {
  ExactElement e;
  e.sum = sum;
  return e;
}

double relative_error(long double got, __float128 want) {
  if (want == 0) return got == 0 ? 0 : INFINITY;
  return static_cast<double>(fabsq((static_cast<__float128>(got) - want) / want));
}

TEST(ExactDual, SiluTimesUWithin2ToTheMinus60) {
  const uint64_t seed = 2026;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  double worst = 0;
  int64_t points = 0;
  auto check = [&](i128 gsum, float alpha, i128 usum, float alpha2) {
    const DualValue d = dual_value(with_sum(gsum), alpha, with_sum(usum), alpha2);
    const __float128 want = v_q(gsum, alpha, usum, alpha2);
    const double rel = relative_error(d.v, want);
    worst = std::max(worst, rel);
    ++points;
    ASSERT_LT(rel, 0x1p-60) << "G sum " << static_cast<double>(gsum) << " alpha " << alpha << " U sum "
                            << static_cast<double>(usum);
  };
  // G around 0: tiny sums with tiny and unit alphas.
  for (int64_t s = -300; s <= 300; ++s) check(s, 1.0f, 12345 + s, 1.0f), check(s, 0x1p-30f, 777, 3.0f);
  // G near -87 (where an FP32 silu gives out), densely, and across -88.72 (FP32 exp overflow).
  for (int x = 0; x < 20000; ++x) {
    const double g = -92.0 + 10.0 * x / 20000.0;
    const i128 gsum = static_cast<i128>(std::llround(g * 1048576.0 * 1024.0)) | 1;  // odd: many bits
    check(gsum, 1.0f / 1024.0f, static_cast<i128>(rng() >> 20) + 1, 1.0f);
  }
  // Large negative G (v far below every output type, but exact to long double's range) and
  // large positive G (silu(G) = G to the last bit).
  for (const double g : {-200.0, -1000.5, -11000.25, 30.0, 87.0, 1000.0, 1e6, 1e12, 3e15}) {
    for (int x = 0; x < 200; ++x) {
      const i128 gsum = static_cast<i128>(g * 1048576.0) + x * 977;
      check(gsum, 1.0f, static_cast<i128>(rng() >> 10) - (int64_t(1) << 53), 0.1f);
    }
  }
  // Random exact sums and alphas: G and U of up to 80 bits.
  for (int x = 0; x < 200000; ++x) {
    const int gbits = 1 + static_cast<int>(rng() % 48), ubits = 1 + static_cast<int>(rng() % 60);
    const i128 gsum = static_cast<i128>(static_cast<int64_t>(rng()) >> (64 - gbits));
    const i128 usum = static_cast<i128>(static_cast<int64_t>(rng()) >> (64 - ubits)) * (i128(1) << (rng() % 20));
    const float alpha = std::ldexp(static_cast<float>(1 + rng() % 0xFFFFFF), static_cast<int>(rng() % 60) - 60);
    const float alpha2 = std::ldexp(static_cast<float>(1 + rng() % 0xFFFFFF), static_cast<int>(rng() % 60) - 40);
    if (gsum == 0 || usum == 0) continue;
    if (fabsq(exact_q(gsum, alpha)) > 11000) continue;  // exp(-G) beyond both types' range
    check(gsum, alpha, usum, alpha2);
  }
  std::printf("worst relative error of v over %lld points: 2^%.2f\n", static_cast<long long>(points), std::log2(worst));
}

// RN_out of a __float128 value with the textbook formula.
uint32_t round_q(OutType t, __float128 v) {
  if (v == 0) return 0;
  const OutFormat f = out_format(t);
  int e = 0;
  frexpq(fabsq(v), &e);
  const int unit = std::max(e - 1, f.emin) - (f.precision - 1);
  const __float128 q = nearbyintq(ldexpq(fabsq(v), -unit));  // ties to even
  const u128 mag = static_cast<u128>(q);
  // Exact now: mag * 2^unit, handed to the tested out_round for the encoding only.
  return out_round(t, v < 0, mag, unit);
}

TEST(ExactDual, OneRoundingMatchesHighPrecisionOutsideThinMidpointBands) {
  // v placed within 2^-40 relative of rounding midpoints of BF16 and FP32: G fixed, U chosen so
  // that silu(G) * U lands there. The reference must round like __float128 does, except within
  // 2^-59 of the midpoint itself (never hit at these distances).
  const uint64_t seed = 17;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int64_t checked = 0, near = 0;
  for (int x = 0; x < 40000; ++x) {
    const OutType t = x % 2 ? OutType::bf16 : OutType::fp32;
    const OutFormat f = out_format(t);
    // G in [-10, 100): U = usum * 2^-80 then has 53 to 121 bits, so v is within 2^-53 of M.
    const i128 gsum = static_cast<i128>(static_cast<int64_t>(rng() % (int64_t(110) << 20)) - (int64_t(10) << 20));
    if (gsum == 0) continue;
    const __float128 silu = exact_q(gsum, 1.0f) / (1 + expq(-exact_q(gsum, 1.0f)));
    // A midpoint M = (q + 1/2) * 2^unit of the type near 2^e.
    const int e = static_cast<int>(rng() % 40) - 20;
    const uint64_t q = (uint64_t(1) << (f.precision - 1)) + rng() % (uint64_t(1) << (f.precision - 1));
    const __float128 mid = ldexpq(static_cast<__float128>(q) + static_cast<__float128>(0.5), e - (f.precision - 1));
    // U puts v at M itself, then moves it off by 2^-31 .. 2^-58 relative: inside the band where
    // a value rounded twice (to 64 bits, then to the type) could go wrong, outside 2^-59.
    const __float128 at_mid = ldexpq(mid / silu, 80);  // alpha2 * 2^-20 = 2^-80
    const int off = 31 + static_cast<int>(rng() % 28);
    const __float128 moved = at_mid + (rng() % 2 ? 1 : -1) * ldexpq(fabsq(at_mid), -off);
    const i128 usum = static_cast<i128>(nearbyintq(moved));
    if (usum == 0) continue;
    const DualValue d = dual_value(with_sum(gsum), 1.0f, with_sum(usum), 0x1p-60f);
    const __float128 v = v_q(gsum, 1.0f, usum, 0x1p-60f);
    const double rel_to_mid = static_cast<double>(fabsq((fabsq(v) - mid) / mid));
    if (rel_to_mid < 0x1p-59) {
      ++near;
      continue;
    }
    ASSERT_LT(rel_to_mid, 0x1p-30) << "the construction missed the midpoint";
    ASSERT_EQ(round_dual(d, false, t), round_q(t, v)) << "x " << x;
    ++checked;
  }
  std::printf("%lld values within 2^-30 of a midpoint rounded like __float128, %lld within 2^-59 skipped\n",
              static_cast<long long>(checked), static_cast<long long>(near));
  EXPECT_GT(checked, 35000);
}

TEST(ExactDual, ZerosAndSignsAndNaN) {
  const DualValue zero_g = dual_value(with_sum(0), 1.0f, with_sum(5), 1.0f);
  EXPECT_EQ(round_dual(zero_g, false, OutType::fp32), 0u);
  const DualValue zero_u = dual_value(with_sum(-(5 << 20)), 1.0f, with_sum(0), -1.0f);
  EXPECT_EQ(round_dual(zero_u, false, OutType::bf16), 0u);
  // G = -12000: exp(-G) overflows long double; v is a tiny negative * U: signed zeros.
  const DualValue far = dual_value(with_sum(-(i128(12000) << 20)), 1.0f, with_sum(i128(1) << 60), 1.0f);
  EXPECT_EQ(round_dual(far, false, OutType::fp32), 0x80000000u);
  const DualValue far_neg_u = dual_value(with_sum(-(i128(12000) << 20)), 1.0f, with_sum(-(i128(1) << 60)), 1.0f);
  EXPECT_EQ(round_dual(far_neg_u, false, OutType::fp32), 0u);
  // G far above 0 (alpha 6.8e32: G = 1.19e40, as a scheduled FP32 case on the H200 had it):
  // silu(G) = G, v = G * U overflows every output type to +Inf (it once came out NaN, and its
  // rounding -0.5).
  const float big_alpha = 6.819607e+32f;
  // The sums of that case's element (g=0, i=2, j=142), in units of 2^-20: alpha * G's sum needs
  // more than long double's 64 bits, so the split has a low part.
  const DualValue huge = dual_value(with_sum(i128(18367299340776)), big_alpha, with_sum(i128(241672590528)), 0.0016877069f);
  EXPECT_FALSE(std::isnan(huge.silu_g));
  EXPECT_GT(huge.silu_g, 1e40L);
  EXPECT_EQ(round_dual(huge, false, OutType::fp32), 0x7F800000u);
  EXPECT_EQ(round_dual(huge, false, OutType::bf16), 0x7F80u);
  // silu(1) * 1 = 0.7310585786300049 -> FP32 0x3f3b26a8, BF16 0x3f3b, FP16 0x39d9.
  const DualValue one = dual_value(with_sum(1 << 20), 1.0f, with_sum(1 << 20), 1.0f);
  EXPECT_EQ(round_dual(one, false, OutType::fp32), 0x3f3b26a8u);
  EXPECT_EQ(round_dual(one, false, OutType::bf16), 0x3f3bu);
  EXPECT_EQ(round_dual(one, false, OutType::fp16), 0x39d9u);
  EXPECT_EQ(round_dual(one, true, OutType::bf16), 0x7FC0u);
}

// exp_ld, and so dual_value, takes exp(-G) as +Inf past 11357 and +0 below -11400 without
// calling libm: what libm's expl gives there (checked here on this build's libm), and the silu
// that follows.
TEST(ExactDual, ExpPastLongDoublesRangeIsLibmsInfAndZero) {
  for (long double x = 11357.0L; x < 1e30L; x = x * 1.0001L + 0.37L) {
    ASSERT_EQ(std::exp(x), HUGE_VALL) << static_cast<double>(x);
    ASSERT_EQ(std::exp(-x - 43.0L), 0.0L) << static_cast<double>(-x - 43.0L);
    ASSERT_EQ(exp_ld(x), HUGE_VALL) << static_cast<double>(x);
    ASSERT_EQ(exp_ld(-x - 43.0L), 0.0L) << static_cast<double>(-x - 43.0L);
  }
  EXPECT_GT(std::exp(11356.0L), 0x1p16382L) << "the threshold is not far from the overflow";
  EXPECT_GT(std::exp(-11390.0L), 0.0L) << "nor from the underflow";
  // Between the thresholds and the range's ends: the same Inf, subnormals and zero as libm.
  for (long double x = 11356.5L; x <= 11357.0L; x += 0.0009765625L) {
    ASSERT_EQ(std::isinf(exp_ld(x)), std::isinf(std::exp(x))) << static_cast<double>(x);
    ASSERT_EQ(exp_ld(-x - 43.0L) == 0, std::exp(-x - 43.0L) == 0) << static_cast<double>(-x - 43.0L);
  }
  for (const i128 g : {i128(11358) << 20, i128(11401) << 20, i128(1) << 70}) {
    const DualValue below = dual_value(with_sum(-g), 1.0f, with_sum(3 << 20), 1.0f);
    EXPECT_TRUE(below.silu_g == 0 && std::signbit(below.silu_g)) << "silu(G) is -0 where exp(-G) overflows";
    const DualValue above = dual_value(with_sum(g), 1.0f, with_sum(3 << 20), 1.0f);
    EXPECT_EQ(above.silu_g, static_cast<long double>(g) / 1048576.0L) << "silu(G) is G where exp(-G) is 0";
  }
}

// dual_value skips exp(-G) past G = 44.5, where 1 + exp(-G) rounds to 1: the silu it gives is
// the one the exponential gives.
TEST(ExactDual, SiluIsGWhereOnePlusExpRoundsToOne) {
  for (i128 sum = i128(30) << 20; sum < (i128(70) << 20); sum += 977) {
    const long double g = static_cast<long double>(sum) / 1048576.0L;
    const DualValue d = dual_value(with_sum(sum), 1.0f, with_sum(3 << 20), 1.0f);
    ASSERT_EQ(d.silu_g, g / (1 + exp_ld(-g))) << static_cast<double>(g);
    if (g > 44.5L) {
      ASSERT_EQ(d.silu_g, g) << static_cast<double>(g);
    }
  }
}

// The long double spacing at |v|.
__float128 ld_ulp(__float128 v) {
  int e = 0;
  frexpq(fabsq(v), &e);  // |v| in [2^(e-1), 2^e)
  return ldexpq(static_cast<__float128>(1), (e - 1 < -16382 ? -16382 : e - 1) - 63);
}

// exp_ld within 0.85 ulp of e^x everywhere silu meets it (libm's expl: up to 1.13), so silu(G) *
// U keeps the 2^-60 relative error SPEC section 1 asks for.
TEST(ExactDual, ExpIsWithinItsBoundOfTheTrueValue) {
  const uint64_t seed = 20261205;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const auto unit = [&] { return static_cast<long double>(rng() >> 11) * 0x1p-53L; };
  double worst = 0;
  for (int i = 0; i < 400000; ++i) {
    long double x = 0;
    switch (i % 4) {
      case 0: x = 2 * unit() - 1; break;                                      // r's own range and beyond
      case 1: x = 200 * unit() - 100 + static_cast<long double>(rng() >> 40) * 0x1p-64L; break;
      case 2: x = 22750 * unit() - 11392; break;                            // subnormal to overflow
      default: x = std::ldexp(static_cast<long double>(rng() | (uint64_t(1) << 63)), -63 - static_cast<int>(rng() % 70)) *
                   (rng() % 2 ? 1 : -1);                                      // tiny arguments
    }
    const __float128 want = expq(static_cast<__float128>(x));
    const long double got = exp_ld(x);
    if (std::isinf(got)) {
      ASSERT_GT(want, static_cast<__float128>(LDBL_MAX)) << static_cast<double>(x);
      continue;
    }
    const double err = static_cast<double>(fabsq(static_cast<__float128>(got) - want) / ld_ulp(want));
    worst = std::max(worst, err);
    ASSERT_LE(err, 0.85) << "exp_ld(" << static_cast<double>(x) << ")";
  }
  std::printf("largest error %.3f ulp\n", worst);
}

// The same bits on every host: libm's expl took x87's f2xm1, which differs between processor
// makers; exp_ld takes only correctly rounded operations. These are its values here.
TEST(ExactDual, ExpIsTheSameBitsOnEveryHost) {
  const struct {
    long double x, want;
  } cases[] = {{1.0L, 0xa.df85458a2bb4a9bp-2L},
               {-1.0L, 0xb.c5ab1b16779be36p-5L},
               {0.3466L, 0xb.5062c835e3bc801p-3L},
               {-0.3466L, 0xb.503b9e6b3c51d8bp-4L},
               {10653.4L, 0xc.300a20a27f2367dp+15366L},
               {-700.25L, 0xd.7aff4d242e472b8p-1014L},
               {11356.5L, 0xf.a13dba329dd768dp+16380L},
               {-11390.0L, 0x0.000000000001a0ep-16385L}};  // a subnormal
  for (const auto& c : cases) {
    const long double got = exp_ld(c.x);
    EXPECT_EQ(std::memcmp(&got, &c.want, 10), 0) << std::hexfloat << "exp_ld(" << c.x << ") = " << got << ", not "
                                                 << c.want;
  }
}

TEST(ExactDual, GAndUAreTheTwoGemms) {
  const uint64_t seed = 8;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (const OutType t : {OutType::fp16, OutType::bf16, OutType::fp32}) {
    Problem p = random_gemm(rng, t, 33, 7, 80, 0.37f);
    Problem g = p, u = p;
    p.op = Op::dual_gemm;
    p.alpha2 = -1.5f;
    Problem other = random_gemm(rng, t, 33, 7, 80, 1.0f);
    p.b2 = other.b;
    p.sfb2 = other.sfb;
    p.sfb2[3] = 0xFF;  // a NaN scale in U only
    u.b = p.b2, u.sfb = p.sfb2, u.alpha = p.alpha2;
    const ExactResult ref = exact_gemm(p), rg = exact_gemm(g), ru = exact_gemm(u);
    ASSERT_EQ(ref.elems2.size(), ref.size());
    ASSERT_EQ(ref.dual.size(), ref.size());
    int64_t nan = 0;
    for (size_t x = 0; x < ref.size(); ++x) {
      ASSERT_EQ(ref.elems[x].sum, rg.elems[x].sum);
      ASSERT_EQ(ref.elems2[x].sum, ru.elems[x].sum);
      ASSERT_EQ(ref.elems2[x].nan, ru.elems[x].nan);
      const bool is_nan = ref.elems[x].nan || ref.elems2[x].nan;
      nan += is_nan;
      ASSERT_EQ(ref.word(x), round_dual(dual_value(rg.elems[x], p.alpha, ru.elems[x], p.alpha2), is_nan, t));
      ASSERT_EQ(is_nan_out(t, ref.word(x)), is_nan);
    }
    EXPECT_EQ(nan, 33);  // column 0 of U has the NaN block: one column of outputs
  }
}


// The same problem's reference at 1, 2 and 3 threads: every word, sum and silu value equal.
void expect_same_at_any_thread_count(const Problem& p, const ExactResult& want) {
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    const ExactResult got = exact_gemm(p);
    ASSERT_EQ(got.size(), want.size());
    for (size_t x = 0; x < want.size(); ++x) {
      ASSERT_EQ(got.word(x), want.word(x)) << threads << " threads, element " << x;
      ASSERT_TRUE(got.elems[x].sum == want.elems[x].sum && got.elems[x].abs_sum == want.elems[x].abs_sum &&
                  got.elems[x].nonzero == want.elems[x].nonzero && got.elems[x].min_tz == want.elems[x].min_tz &&
                  got.elems[x].nan == want.elems[x].nan)
          << threads << " threads, element " << x;
      if (!want.elems2.empty()) {
        ASSERT_EQ(got.elems2[x].sum, want.elems2[x].sum) << threads << " threads, element " << x;
        const DualValue &d = got.dual[x], &w = want.dual[x];  // compared by value: long double has padding
        ASSERT_TRUE(d.silu_g == w.silu_g && d.u == w.u && d.v == w.v && std::signbit(d.v) == std::signbit(w.v))
            << threads << " threads, element " << x;
      }
    }
  }
  omp_set_num_threads(saved);
}

// Batches and G beside U in one parallel region: each batch's G and U are the GEMMs of that
// batch alone, at any thread count.
TEST(ExactDual, BatchedGAndUAreEachBatchsGemmsAtAnyThreadCount) {
  const uint64_t seed = 9;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const int64_t m = 37, n = 29, k = 272, l = 3;  // 2 * 3 * 37 * 29 * 272: past the threads' threshold
  Problem p;
  p.op = Op::dual_gemm;
  p.m = m, p.n = n, p.k = k, p.l = l;
  p.out_type = OutType::bf16;
  p.alpha = 0.37f;
  p.alpha2 = -1.5f;
  p.a = random_bytes(rng, p.a_bytes());
  p.b = random_bytes(rng, p.b_bytes());
  p.b2 = random_bytes(rng, p.b_bytes());
  p.sfa = random_scales(rng, p.sfa_bytes(), true);
  p.sfb = random_scales(rng, p.sfb_bytes(), true);
  p.sfb2 = random_scales(rng, p.sfb_bytes(), true);
  omp_set_num_threads(2);
  const ExactResult ref = exact_gemm(p);
  for (int64_t b = 0; b < l; ++b) {
    Problem g = random_gemm(rng, p.out_type, m, n, k, p.alpha);
    const auto slice = [b](const std::vector<uint8_t>& v, int64_t bytes) {
      return std::vector<uint8_t>(v.begin() + b * bytes, v.begin() + (b + 1) * bytes);
    };
    g.a = slice(p.a, g.a_bytes()), g.sfa = slice(p.sfa, g.sfa_bytes());
    g.b = slice(p.b, g.b_bytes()), g.sfb = slice(p.sfb, g.sfb_bytes());
    Problem u = g;
    u.b = slice(p.b2, g.b_bytes()), u.sfb = slice(p.sfb2, g.sfb_bytes()), u.alpha = p.alpha2;
    const ExactResult rg = exact_gemm(g), ru = exact_gemm(u);
    for (size_t x = 0; x < rg.size(); ++x) {
      const size_t at = static_cast<size_t>(b * m * n) + x;
      ASSERT_EQ(ref.elems[at].sum, rg.elems[x].sum) << "batch " << b << " element " << x;
      ASSERT_EQ(ref.elems2[at].sum, ru.elems[x].sum) << "batch " << b << " element " << x;
      ASSERT_EQ(ref.word(at), round_dual(dual_value(rg.elems[x], p.alpha, ru.elems[x], p.alpha2), false, p.out_type));
    }
  }
  expect_same_at_any_thread_count(p, ref);
}

// Groups large enough to share the threads and small ones that go a thread each, in one
// problem: every group is its own GEMM, at any thread count.
TEST(ExactGrouped, LargeAndSmallGroupsAreTheirOwnGemmsAtAnyThreadCount) {
  const uint64_t seed = 42;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Problem p;
  p.op = Op::grouped_gemm;
  p.out_type = OutType::fp32;
  // 256 x 128 x 128 (2^22 products) shares the threads; the rest, 2^18 and more in all, do not.
  const int64_t shapes[][3] = {{40, 30, 96}, {256, 128, 128}, {0, 8, 32}, {64, 64, 64}, {7, 100, 320}, {96, 50, 160}};
  for (const auto& s : shapes) {
    Group g;
    g.m = s[0], g.n = s[1], g.k = s[2];
    g.alpha = std::ldexp(1.0f + static_cast<float>(rng() % 100) / 100.0f, static_cast<int>(rng() % 8) - 4);
    if (g.m > 0) {
      g.a = random_bytes(rng, g.a_bytes(BlockFormat::nvfp4));
      g.b = random_bytes(rng, g.b_bytes(BlockFormat::nvfp4));
      g.sfa = random_scales(rng, g.sfa_bytes(BlockFormat::nvfp4), true);
      g.sfb = random_scales(rng, g.sfb_bytes(BlockFormat::nvfp4), true);
    }
    p.groups.push_back(std::move(g));
  }
  ASSERT_EQ(problem_error(p), "");
  omp_set_num_threads(2);
  const ExactResult ref = exact_gemm(p);
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const Group& q = p.groups[g];
    if (q.m == 0) continue;
    Problem alone;
    alone.op = Op::gemm;
    alone.m = q.m, alone.n = q.n, alone.k = q.k, alone.l = 1;
    alone.alpha = q.alpha;
    alone.out_type = p.out_type;
    alone.a = q.a, alone.b = q.b, alone.sfa = q.sfa, alone.sfb = q.sfb;
    const ExactResult want = exact_gemm(alone);
    for (size_t x = 0; x < want.size(); ++x) {
      const size_t at = static_cast<size_t>(ref.group_offset[g]) + x;
      ASSERT_EQ(ref.elems[at].sum, want.elems[x].sum) << "group " << g << " element " << x;
      ASSERT_EQ(ref.word(at), want.word(x)) << "group " << g << " element " << x;
    }
  }
  expect_same_at_any_thread_count(p, ref);
}

}  // namespace
}  // namespace nvfp4
