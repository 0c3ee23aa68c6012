// The exact reference against a brute-force exact computation written from SPEC.md section 2's
// formula: each product a*sa*b*sb evaluated in double (at most 12 significant bits: exact),
// turned into an integer number of 2^-20 units and summed in 128 bits, one triple loop.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>

#include "reference/exact_gemm.h"
#include "reference/tests/fp16_formula.h"

namespace nvfp4 {
namespace {

double e2m1_value(int code) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8) ? -kMag[code & 7] : kMag[code & 7];
}

double e4m3_value(int byte, ScaleSemantics sem) {  // NaN for NaN bytes
  const int e = (byte >> 3) & 15, m = byte & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (sem == ScaleSemantics::e4m3 && (byte & 0x80)) ? -mag : mag;
}

ExactElement brute_force(const Problem& p, int64_t b, int64_t i, int64_t j) {
  ExactElement e;
  const int64_t kb = p.kb();
  for (int64_t x = 0; x < p.k; ++x) {
    const int64_t abyte = (b * p.m + i) * (p.k / 2) + x / 2, bbyte = (b * p.n + j) * (p.k / 2) + x / 2;
    const int ac = (x % 2) ? p.a[abyte] >> 4 : p.a[abyte] & 15;
    const int bc = (x % 2) ? p.b[bbyte] >> 4 : p.b[bbyte] & 15;
    const double sa = e4m3_value(p.sfa[(b * p.m + i) * kb + x / 16], p.semantics);
    const double sb = e4m3_value(p.sfb[(b * p.n + j) * kb + x / 16], p.semantics);
    if (std::isnan(sa) || std::isnan(sb)) {
      e.nan = true;
      continue;
    }
    const double units = std::ldexp(e2m1_value(ac) * sa * e2m1_value(bc) * sb, 20);
    const int64_t q = static_cast<int64_t>(units);
    if (static_cast<double>(q) != units) ADD_FAILURE() << "a product is not a multiple of 2^-20: " << units;
    e.sum += q;
    e.abs_sum += static_cast<u128>(q < 0 ? -q : q);
    if (q != 0) {
      ++e.nonzero;
      e.min_tz = std::min(e.min_tz, __builtin_ctzll(static_cast<uint64_t>(q < 0 ? -q : q)));
    }
  }
  return e;
}

std::string show(i128 v) {
  const bool neg = v < 0;
  u128 u = neg ? static_cast<u128>(-v) : static_cast<u128>(v);
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  } while (u);
  return neg ? "-" + s : s;
}

void expect_same(const ExactElement& got, const ExactElement& want, const std::string& where) {
  EXPECT_EQ(show(got.sum), show(want.sum)) << where;
  EXPECT_EQ(show(static_cast<i128>(got.abs_sum)), show(static_cast<i128>(want.abs_sum))) << where;
  EXPECT_EQ(got.nonzero, want.nonzero) << where;
  EXPECT_EQ(got.min_tz, want.min_tz) << where;
  EXPECT_EQ(got.nan, want.nan) << where;
}

// RN16(alpha * r) from the long double formula; exact while |sum| < 2^40 (64-bit significand).
bool formula_is_exact(const ExactElement& e) { return e.sum < (i128(1) << 40) && e.sum > -(i128(1) << 40); }

uint16_t rn16_formula(const ExactElement& e, float alpha) {
  if (e.nan) return 0x7E00;
  EXPECT_TRUE(formula_is_exact(e));
  const long double x = std::ldexp(static_cast<long double>(static_cast<int64_t>(e.sum)), -20) * alpha;
  return e.sum == 0 ? 0 : testing_formula::round_formula(x);
}

uint8_t random_scale(std::mt19937_64& rng, int style) {
  switch (style) {
    case 0: return static_cast<uint8_t>(rng());                        // anything, NaN included
    case 1: return static_cast<uint8_t>(0x30 + rng() % 16);            // near 1: exact regime
    case 2: return static_cast<uint8_t>(rng() % 8 | (rng() % 2) << 7); // subnormal or zero
    case 3: return static_cast<uint8_t>((0x70 + rng() % 15) | (rng() % 2) << 7);  // near 448
    default: { uint8_t s = static_cast<uint8_t>(rng()); return (s & 0x7F) == 0x7F ? 0x38 : s; }
  }
}

Problem random_problem(std::mt19937_64& rng) {
  Problem p;
  p.op = rng() % 4 == 0 ? Op::gemv : Op::gemm;
  p.m = 1 + rng() % 9;
  p.n = p.op == Op::gemv ? 1 : 1 + rng() % 5;
  const int64_t ks[] = {2, 4, 14, 16, 18, 30, 32, 34, 62, 64, 66, 254, 256, 258, 510, 1000};
  p.k = rng() % 3 == 0 ? ks[rng() % 16] : 2 * (1 + rng() % 300);
  p.l = 1 + rng() % 3;
  p.semantics = rng() % 2 ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
  const int value_style = static_cast<int>(rng() % 3), scale_style = static_cast<int>(rng() % 5);
  auto fill_values = [&](std::vector<uint8_t>& v, int64_t bytes) {
    v.resize(static_cast<size_t>(bytes));
    for (auto& x : v) {
      x = static_cast<uint8_t>(rng());
      if (value_style == 1) x &= 0x77;                       // one sign
      if (value_style == 2 && rng() % 4) x = 0x77;           // mostly +6: large sums
    }
  };
  fill_values(p.a, p.a_bytes());
  fill_values(p.b, p.b_bytes());
  p.sfa.resize(static_cast<size_t>(p.sfa_bytes()));
  p.sfb.resize(static_cast<size_t>(p.sfb_bytes()));
  for (auto& s : p.sfa) s = random_scale(rng, scale_style);
  for (auto& s : p.sfb) s = random_scale(rng, scale_style);
  const float alphas[] = {1.0f, 0.5f, 4.0f, -1.0f, 0.0f, 0.1f, -3.7f, 1e-30f, 0x1p-149f, 1234.5f};
  p.alpha = alphas[rng() % 10];
  return p;
}

TEST(ExactGemm, MatchesBruteForceOnRandomCases) {
  const uint64_t seed = 0x5eed0001;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 400; ++trial) {
    const Problem p = random_problem(rng);
    const std::string shape = "trial " + std::to_string(trial) + " m " + std::to_string(p.m) + " n " +
                              std::to_string(p.n) + " k " + std::to_string(p.k) + " l " + std::to_string(p.l);
    const ExactResult r = exact_gemm(p);
    ASSERT_EQ(static_cast<int64_t>(r.elems.size()), p.c_elems());
    ASSERT_EQ(static_cast<int64_t>(r.c.size()), p.c_elems());
    for (int64_t b = 0; b < p.l; ++b)
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) {
          const int64_t idx = (b * p.m + i) * p.n + j;
          const ExactElement want = brute_force(p, b, i, j);
          const std::string where = shape + " at " + std::to_string(b) + "," + std::to_string(i) + "," + std::to_string(j);
          if (!want.nan) expect_same(r.elems[idx], want, where);
          else EXPECT_TRUE(r.elems[idx].nan) << where;
          // round_result itself is checked against the formula below; here the formula is used
          // where it is exact.
          const uint16_t want_c = formula_is_exact(want) || want.nan ? rn16_formula(want, p.alpha) : round_result(want, p.alpha);
          ASSERT_EQ(r.c[idx], want_c) << where << " alpha " << p.alpha;
          if (::testing::Test::HasFailure()) return;
        }
  }
}

int64_t first_value(const ExactResult& r) { return static_cast<int64_t>(r.elems[0].sum >> 20); }

TEST(ExactGemm, SignedScalesNegateTheirBlock) {
  Problem p;
  p.op = Op::gemv;
  p.m = 1;
  p.k = 32;
  p.a.assign(16, 0x22);  // every element 1.0
  p.b.assign(16, 0x22);
  p.sfa = {0xB8, 0x38};  // -1 and 1 under e4m3, 1 and 1 under ue4m3
  p.sfb = {0x38, 0x40};  // 1 and 2
  p.semantics = ScaleSemantics::e4m3;
  EXPECT_EQ(first_value(exact_gemm(p)), 16);  // -16 + 32
  p.semantics = ScaleSemantics::ue4m3;
  EXPECT_EQ(first_value(exact_gemm(p)), 48);  // 16 + 32
}

TEST(ExactGemm, LargestValuesAtTwoToTheTwentyAndBeyondStayExact) {
  for (int64_t k : {int64_t(1) << 20, int64_t(1) << 21}) {
    Problem p;
    p.op = Op::gemv;
    p.m = 2;  // row 0: every product +6*448*6*448; row 1: every product negative
    p.k = k;
    p.a.assign(static_cast<size_t>(k), 0x77);
    std::fill(p.a.begin() + k / 2, p.a.end(), 0xFF);
    p.b.assign(static_cast<size_t>(k / 2), 0x77);
    p.sfa.assign(static_cast<size_t>(2 * p.kb()), 0x7E);
    p.sfb.assign(static_cast<size_t>(p.kb()), 0x7E);
    p.alpha = 0x1p-60f;
    const ExactResult r = exact_gemm(p);
    // One product: 36 * 448^2 = 7225344 = 441 * 2^14, i.e. 441 * 2^34 units of 2^-20.
    const i128 product = static_cast<i128>(441) << 34;
    for (int row = 0; row < 2; ++row) {
      const ExactElement& e = r.elems[row];
      EXPECT_EQ(show(e.sum), show(row == 0 ? product * k : -product * k)) << "k " << k;
      EXPECT_EQ(show(static_cast<i128>(e.abs_sum)), show(product * k));
      EXPECT_EQ(e.nonzero, k);
      EXPECT_EQ(e.min_tz, 34);
      EXPECT_FALSE(e.nan);
      // alpha*r = +-441 * 2^14 * k * 2^-60, exactly representable: 441 fits in 11 bits.
      const uint16_t want = fp16_round(row == 1, 441, 14 + (k == (1 << 20) ? 20 : 21) - 60);
      EXPECT_EQ(r.c[row], want);
    }
    EXPECT_GT(show(r.elems[0].sum).size(), 18u);  // beyond int64 at k = 2^21
  }
}

TEST(ExactGemm, ResultsDoNotDependOnTheThreadCount) {
  const uint64_t seed = 0x5eed0002;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Problem p;
  p.m = 67;
  p.n = 13;
  p.k = 1000;
  p.l = 2;
  p.alpha = 0.3f;
  p.a.resize(static_cast<size_t>(p.a_bytes()));
  p.b.resize(static_cast<size_t>(p.b_bytes()));
  p.sfa.resize(static_cast<size_t>(p.sfa_bytes()));
  p.sfb.resize(static_cast<size_t>(p.sfb_bytes()));
  for (auto* v : {&p.a, &p.b, &p.sfa, &p.sfb})
    for (auto& x : *v) x = static_cast<uint8_t>(rng());
  const int saved = omp_get_max_threads();
  std::vector<ExactResult> results;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    results.push_back(exact_gemm(p));
  }
  omp_set_num_threads(saved);
  for (size_t t = 1; t < results.size(); ++t) {
    ASSERT_EQ(results[t].c, results[0].c) << "threads " << t + 1;
    for (size_t x = 0; x < results[0].elems.size(); ++x)
      expect_same(results[t].elems[x], results[0].elems[x], "element " + std::to_string(x));
  }
  // And the threaded result is right: spot-check against brute force.
  for (int64_t i : {0, 33, 66})
    for (int64_t j : {0, 12}) {
      const ExactElement want = brute_force(p, 1, i, j);
      if (!want.nan) expect_same(results[2].elems[(p.m + i) * p.n + j], want, "spot check");
    }
}

TEST(ExactGemm, RoundResultAppliesAlphaExactly) {
  const uint64_t seed = 0x5eed0003;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 200000; ++trial) {
    ExactElement e;
    const int bits = static_cast<int>(rng() % 40);
    e.sum = static_cast<int64_t>(rng() & ((uint64_t(1) << bits) - 1)) * (rng() % 2 ? 1 : -1);
    uint32_t abits = static_cast<uint32_t>(rng());
    float alpha;
    std::memcpy(&alpha, &abits, 4);
    if (!std::isfinite(alpha)) continue;
    // Keep alpha * r near FP16's range sometimes, anywhere otherwise.
    if (trial % 2) alpha = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, -static_cast<int>(rng() % 50)) * (rng() % 2 ? 1 : -1);
    ASSERT_EQ(round_result(e, alpha), rn16_formula(e, alpha)) << "sum " << show(e.sum) << " alpha " << alpha;
  }
  ExactElement nan;
  nan.nan = true;
  EXPECT_TRUE(fp16_is_nan(round_result(nan, 1.0f)));
  ExactElement zero;
  EXPECT_EQ(round_result(zero, -2.0f), 0x0000);  // an exact zero is +0 whatever alpha's sign
  ExactElement one;
  one.sum = i128(1) << 20;
  EXPECT_EQ(round_result(one, -0.0f), 0x0000);   // alpha = -0: the exact value is 0, and 0 is +0
}

TEST(ExactGemm, RoundResultKeepsStickyBitsOfHugeSums) {
  // |sum| * alpha's significand beyond 128 bits (not reachable from a Problem that fits in
  // memory, but round_result takes any ExactElement): 2^110 * (2^23 + 2^12) * 2^-133 is
  // 1 + 2^-11, the tie between 1 and 1 + 2^-10; one more unit in the sum breaks the tie upward.
  const float alpha = 0x1.002p-90f;
  ExactElement tie;
  tie.sum = i128(1) << 110;
  EXPECT_EQ(round_result(tie, alpha), 0x3C00);
  ExactElement above = tie;
  above.sum += 1;
  EXPECT_EQ(round_result(above, alpha), 0x3C01);
  ExactElement below = tie;
  below.sum -= 1;
  EXPECT_EQ(round_result(below, alpha), 0x3C00);
  below.sum = -below.sum - 2;  // -(2^110 + 1)
  EXPECT_EQ(round_result(below, alpha), 0xBC01);
}

TEST(ExactGemm, RejectsInvalidProblems) {
  Problem p;
  p.k = 3;
  EXPECT_THROW(exact_gemm(p), std::invalid_argument);
  p.k = 4;
  EXPECT_THROW(exact_gemm(p), std::invalid_argument);  // no data
}

}  // namespace
}  // namespace nvfp4
