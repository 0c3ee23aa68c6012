// The exact block-scaled reference (reference/exact_mx.h): corpus/mx's hand cases bit for bit
// (expect lines from scripts/make_mx_cases.py's Fraction arithmetic), random problems of every
// format pair against an independent slow sum (exact doubles added as 128-bit integers, IEEE
// doubles for Inf and NaN), NVFP4-only problems against exact_gemm, the Kulisch accumulator,
// rule 9's judge, and the a_format/b_format case files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "reference/case_file.h"
#include "reference/exact_gemm.h"
#include "reference/exact_mx.h"
#include "reference/tests/random_problem.h"

namespace nvfp4 {
namespace {

constexpr BlockFormat kFormats[] = {BlockFormat::nvfp4, BlockFormat::mxfp4, BlockFormat::mxfp8_e4m3,
                                    BlockFormat::mxfp8_e5m2};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// corpus/mx's hand cases of GEMV and GEMM (`gemv_gemm` true: what MxProblem reads) or of
// grouped and dual GEMM (false).
std::vector<std::string> mx_corpus(bool gemv_gemm = true) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(NVFP4_SOURCE_DIR) + "/corpus/mx")) {
    if (e.path().extension() != ".case") continue;
    const Op op = parse_case(read_text(e.path().string()), e.path().string()).op;
    if ((op == Op::gemv || op == Op::gemm) == gemv_gemm) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ExactMx, HandCasesBitForBit) {
  const std::vector<std::string> files = mx_corpus();
  ASSERT_GE(files.size(), 30u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    const MxProblem p = parse_mx_case(read_text(f), f);
    ASSERT_TRUE(p.expect.has_value());
    const std::vector<uint32_t> got = exact_mx_words(p);
    ASSERT_EQ(got.size(), p.expect->size());
    for (size_t x = 0; x < got.size(); ++x)
      EXPECT_TRUE(same_result_out(p.out_type, got[x], (*p.expect)[x]))
          << "element " << x << ": got " << word_hex(p.out_type, got[x]) << ", expect "
          << word_hex(p.out_type, (*p.expect)[x]);
  }
}

// ---- an independent slow sum -------------------------------------------------------------------

// Element values straight from the bit fields, as doubles (every value of these formats is one).
double element_double(BlockFormat f, uint8_t byte) {
  if (f == BlockFormat::nvfp4 || f == BlockFormat::mxfp4) {
    static const double kV[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (byte & 8) ? -kV[byte & 7] : kV[byte & 7];
  }
  const int s = byte >> 7;
  double mag;
  if (f == BlockFormat::mxfp8_e4m3) {
    const int e = (byte >> 3) & 15, m = byte & 7;
    if (e == 15 && m == 7) return NAN;
    mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  } else {
    const int e = (byte >> 2) & 31, m = byte & 3;
    if (e == 31) return m ? NAN : (s ? -INFINITY : INFINITY);
    mag = e == 0 ? std::ldexp(m, -16) : std::ldexp(4 + m, e - 17);
  }
  return s ? -mag : mag;
}

double scale_double(BlockFormat f, uint8_t byte) {
  if (f != BlockFormat::nvfp4) return byte == 0xFF ? NAN : std::ldexp(1.0, byte - 127);
  const int e = (byte >> 3) & 15, m = byte & 7;
  if (e == 15 && m == 7) return NAN;
  return e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);  // ue4m3
}

uint8_t element_byte(const MxOperand& op, int64_t row, int64_t x) {
  if (!packs_nibbles(op.format)) return op.data[static_cast<size_t>(row * op.k + x)];
  const uint8_t b = op.data[static_cast<size_t>(row * (op.k / 2) + x / 2)];
  return x % 2 ? b >> 4 : b & 15;
}

// r in units of 2^-kUnit (every product of the random problems below is a multiple of 2^-60 and
// below 2^120), S, t, g's exponent, and the IEEE special result.
constexpr int kUnit = 60;
struct SlowElement {
  i128 sum = 0, abs_sum = 0;
  int64_t t = 0;
  int g_exp = MxElement::kNoProducts;
  bool nan = false;
  double special = 0;  // IEEE double sum of the Inf/NaN products (0 when none)
};

SlowElement slow_element(const MxProblem& p, int64_t ra, int64_t rb) {
  SlowElement e;
  const int64_t ba = block_size(p.a.format), bb = block_size(p.b.format);
  for (int64_t s = 0; s < p.a.kb(); ++s) e.nan |= std::isnan(scale_double(p.a.format, p.a.scales[ra * p.a.kb() + s]));
  for (int64_t s = 0; s < p.b.kb(); ++s) e.nan |= std::isnan(scale_double(p.b.format, p.b.scales[rb * p.b.kb() + s]));
  for (int64_t x = 0; x < p.k; ++x) {
    const double sa = scale_double(p.a.format, p.a.scales[ra * p.a.kb() + x / ba]);
    const double sb = scale_double(p.b.format, p.b.scales[rb * p.b.kb() + x / bb]);
    if (std::isnan(sa) || std::isnan(sb)) continue;
    const double prod = element_double(p.a.format, element_byte(p.a, ra, x)) * sa *
                        element_double(p.b.format, element_byte(p.b, rb, x)) * sb;  // exact
    if (!std::isfinite(prod)) {
      e.special += prod;
      continue;
    }
    if (prod == 0) continue;
    const i128 v = static_cast<i128>(std::ldexp(prod, kUnit));
    EXPECT_EQ(static_cast<double>(v), std::ldexp(prod, kUnit)) << "the test's window is too narrow";
    e.sum += v;
    e.abs_sum += v < 0 ? -v : v;
    ++e.t;
    int exp;
    const double frac = std::frexp(std::fabs(prod), &exp);  // prod = frac * 2^exp, frac in [0.5, 1)
    const int64_t sig = static_cast<int64_t>(std::ldexp(frac, 53));
    e.g_exp = std::min(e.g_exp, exp - 53 + __builtin_ctzll(static_cast<uint64_t>(sig)));
  }
  e.nan |= std::isnan(e.special);
  return e;
}

// A random operand whose scales keep every product inside the slow sum's window: E8M0 exponents
// within +-10, NVFP4 scales of the narrow range; now and then a NaN scale or an Inf/NaN element.
MxOperand random_operand(std::mt19937_64& rng, BlockFormat f, int64_t rows, int64_t k, int64_t l, bool specials) {
  MxOperand op;
  op.format = f;
  op.rows = rows, op.k = k, op.l = l;
  op.data = random_bytes(rng, op.data_bytes());
  if (!specials) {
    for (auto& b : op.data) {
      while ((f == BlockFormat::mxfp8_e4m3 && (b & 0x7F) == 0x7F) || (f == BlockFormat::mxfp8_e5m2 && ((b >> 2) & 31) == 31))
        b = static_cast<uint8_t>(rng());
    }
  }
  op.scales = f == BlockFormat::nvfp4 ? random_scales(rng, op.scale_bytes(), true) : random_bytes(rng, op.scale_bytes());
  if (f != BlockFormat::nvfp4)
    for (auto& s : op.scales) s = static_cast<uint8_t>(117 + rng() % 21);
  if (specials && rng() % 4 == 0) op.scales[rng() % op.scales.size()] = 0xFF;
  return op;
}

MxProblem random_mx(std::mt19937_64& rng, BlockFormat fa, BlockFormat fb, bool specials) {
  MxProblem p;
  p.m = 1 + rng() % 4, p.n = 1 + rng() % 3, p.l = 1 + rng() % 2;
  const bool even = packs_nibbles(fa) || packs_nibbles(fb);
  p.k = 1 + rng() % 100;
  if (even && p.k % 2) ++p.k;
  p.out_type = static_cast<OutType>(1 + rng() % 3);
  p.a = random_operand(rng, fa, p.m, p.k, p.l, specials);
  p.b = random_operand(rng, fb, p.n, p.k, p.l, specials);
  return p;
}

void expect_matches_slow(const MxProblem& p) {
  const std::vector<MxElement> got = exact_mx(p);
  for (int64_t b = 0; b < p.l; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        SCOPED_TRACE(testing::Message() << "b " << b << " i " << i << " j " << j);
        const MxElement& e = got[static_cast<size_t>((b * p.m + i) * p.n + j)];
        const SlowElement s = slow_element(p, b * p.m + i, b * p.n + j);
        ASSERT_EQ(e.nan, s.nan);
        if (s.nan) continue;
        ASSERT_EQ(e.pos_inf, s.special > 0);
        ASSERT_EQ(e.neg_inf, s.special < 0);
        ASSERT_EQ(e.nonzero, s.t);
        ASSERT_EQ(e.g_exp, s.g_exp);
        // r and S: the Kulisch sums against the 128-bit ones, and the rounding of r.
        Kulisch want, want_abs;
        want.add(s.sum, -kUnit);
        want_abs.add(s.abs_sum, -kUnit);
        for (int w = 0; w < Kulisch::kLimbs; ++w) {
          ASSERT_EQ(e.sum.limb[w], want.limb[w]) << "limb " << w;
          ASSERT_EQ(e.abs_sum.limb[w], want_abs.limb[w]) << "limb " << w;
        }
        if (s.special != 0) continue;
        const u128 mag = static_cast<u128>(s.sum < 0 ? -s.sum : s.sum);
        ASSERT_EQ(round_mx(e, 1.0f, p.out_type), out_round(p.out_type, s.sum < 0, mag, -kUnit));
      }
}

TEST(ExactMx, EveryFormatPairMatchesAnIndependentSlowSum) {
  std::mt19937_64 rng(32);
  for (const BlockFormat fa : kFormats)
    for (const BlockFormat fb : kFormats)
      for (int rep = 0; rep < 40; ++rep) {
        SCOPED_TRACE(testing::Message() << to_string(fa) << " x " << to_string(fb) << " rep " << rep);
        expect_matches_slow(random_mx(rng, fa, fb, rep % 2 == 1));
        if (HasFatalFailure()) return;
      }
}

// NVFP4 x NVFP4 through the block-scaled reference is exact_gemm's problem: the same words and facts.
TEST(ExactMx, NvfpOnlyProblemsAgreeWithExactGemm) {
  std::mt19937_64 rng(4);
  for (int rep = 0; rep < 60; ++rep) {
    const OutType type = static_cast<OutType>(1 + rep % 3);
    const float alpha = rep % 5 == 0 ? 0.3f : 1.0f;
    Problem q = random_gemm(rng, type, 1 + rng() % 5, 1 + rng() % 4, 2 * (1 + rng() % 40), alpha);
    q.sf_layout = SfLayout::linear;
    MxProblem p;
    p.m = q.m, p.n = q.n, p.k = q.k, p.l = q.l, p.alpha = q.alpha, p.out_type = q.out_type;
    p.a = MxOperand{BlockFormat::nvfp4, q.m, q.k, q.l, q.a, q.sfa};
    p.b = MxOperand{BlockFormat::nvfp4, q.n, q.k, q.l, q.b, q.sfb};
    const ExactResult ref = exact_gemm(q);
    const std::vector<MxElement> got = exact_mx(p);
    const std::vector<uint32_t> words = exact_mx_words(p);
    for (size_t x = 0; x < got.size(); ++x) {
      SCOPED_TRACE(testing::Message() << "rep " << rep << " element " << x);
      ASSERT_EQ(words[x], ref.word(x));
      ASSERT_EQ(got[x].nan, ref.elems[x].nan);
      ASSERT_EQ(got[x].nonzero, ref.elems[x].nonzero);
      if (ref.elems[x].nonzero) {
        ASSERT_EQ(got[x].g_exp, ref.elems[x].min_tz - 20);
      }
      Kulisch want;
      want.add(ref.elems[x].sum, -20);
      for (int w = 0; w < Kulisch::kLimbs; ++w) ASSERT_EQ(got[x].sum.limb[w], want.limb[w]);
    }
  }
}

// ---- the accumulator ---------------------------------------------------------------------------

TEST(Kulisch, AddingAndRemovingAtEveryExponentLeavesTheOneValueKept) {
  std::mt19937_64 rng(9);
  for (int rep = 0; rep < 200; ++rep) {
    Kulisch k;
    std::vector<std::pair<i128, int>> terms;
    for (int x = 0; x < 50; ++x) {
      const i128 v = (static_cast<i128>(rng()) << 20) ^ static_cast<i128>(rng() >> (rng() % 64));
      terms.emplace_back(rng() % 2 ? v : -v, Kulisch::kLsbExp + static_cast<int>(rng() % 560));
      k.add(terms.back().first, terms.back().second);
    }
    std::shuffle(terms.begin(), terms.end(), rng);
    for (size_t x = 1; x < terms.size(); ++x) k.add(-terms[x].first, terms[x].second);
    Kulisch one;
    one.add(terms[0].first, terms[0].second);
    for (int w = 0; w < Kulisch::kLimbs; ++w) ASSERT_EQ(k.limb[w], one.limb[w]) << "rep " << rep;
    ASSERT_EQ(k.negative(), terms[0].first < 0);
    ASSERT_EQ(k.top_exp(), terms[0].second + bit_width_u128(static_cast<u128>(terms[0].first < 0 ? -terms[0].first : terms[0].first)));
  }
}

TEST(Kulisch, MagnitudeKeepsA103BitWindowAndASticky) {
  Kulisch k;
  k.add(1, 200);
  k.add(1, -300);  // far below: only the sticky bit remembers it
  u128 mag;
  int exp2;
  k.magnitude(&mag, &exp2);
  EXPECT_EQ(bit_width_u128(mag), 103);
  EXPECT_EQ(mag & 1, 1u);
  EXPECT_EQ(exp2 + 102, 200);
  k.add(-1, -300);
  k.magnitude(&mag, &exp2);
  EXPECT_EQ(mag & 1, 0u);
  // The tie 1 + 2^-11 and just above it, in fp16: the sticky bit decides.
  Kulisch tie;
  tie.add(1, 0);
  tie.add(1, -11);
  MxElement e;
  e.sum = tie;
  EXPECT_EQ(round_mx(e, 1.0f, OutType::fp16), 0x3C00u);
  e.sum.add(1, -300);
  EXPECT_EQ(round_mx(e, 1.0f, OutType::fp16), 0x3C01u);
  e.sum.add(-2, -300);
  EXPECT_EQ(round_mx(e, 1.0f, OutType::fp16), 0x3C00u);
}

// magnitude() takes its 103-bit window with word shifts; here the window is read bit by bit, as
// the definition says, for values built from random terms at every exponent and of both signs.
TEST(Kulisch, MagnitudeWindowMatchesABitByBitReading) {
  std::mt19937_64 rng(20261206);
  for (int rep = 0; rep < 20000; ++rep) {
    Kulisch k;
    const int terms = 1 + static_cast<int>(rng() % 4);
    for (int t = 0; t < terms; ++t) {
      const i128 v = static_cast<i128>(static_cast<int64_t>(rng() >> (rng() % 64)) | 1) * static_cast<int64_t>(rng() % 1000 + 1);
      k.add(rng() % 2 ? v : -v, Kulisch::kLsbExp + static_cast<int>(rng() % 620));
    }
    // |k| bit by bit.
    uint64_t a[Kulisch::kLimbs];
    bool carry = true;
    for (int x = 0; x < Kulisch::kLimbs; ++x) {
      a[x] = k.negative() ? ~k.limb[x] + (carry ? 1 : 0) : k.limb[x];
      if (k.negative()) carry = carry && a[x] == 0;
    }
    const int top = k.top_exp() - Kulisch::kLsbExp;
    u128 want = 0;
    int want_exp = Kulisch::kLsbExp;
    if (top <= 103) {
      want = (static_cast<u128>(a[1]) << 64) | a[0];
    } else {
      const int drop = top - 103;
      for (int bit = top - 1; bit >= drop; --bit) want = (want << 1) | ((a[bit / 64] >> (bit % 64)) & 1u);
      bool sticky = false;
      for (int bit = 0; bit < drop; ++bit) sticky = sticky || ((a[bit / 64] >> (bit % 64)) & 1u);
      want |= sticky ? 1u : 0u;
      want_exp += drop;
    }
    u128 mag;
    int exp2;
    k.magnitude(&mag, &exp2);
    ASSERT_TRUE(mag == want) << "rep " << rep;
    ASSERT_EQ(exp2, want_exp) << "rep " << rep;
  }
}

// ---- rule 9 --------------------------------------------------------------------------------------

// One element of a GEMV with the given bytes: A and B of the formats, one row each.
MxElement one_element(BlockFormat fa, BlockFormat fb, const std::vector<uint8_t>& a, const std::vector<uint8_t>& sfa,
                      const std::vector<uint8_t>& b, const std::vector<uint8_t>& sfb, int64_t k) {
  MxProblem p;
  p.op = Op::gemv;
  p.m = p.n = 1;
  p.k = k;
  p.a = MxOperand{fa, 1, k, 1, a, sfa};
  p.b = MxOperand{fb, 1, k, 1, b, sfb};
  return exact_mx(p)[0];
}

TEST(MxOracle, ExactRegimeWantsRNAndRejectsItsNeighbour) {
  // 1.5 * 2^-127 * 2^127 * 1 + 1 * 1: exact sum 2.5, S = 2.5, g = 0.5: exact regime.
  std::vector<uint8_t> a(32, 0), b(32, 0x38);
  a[0] = 0x3C, a[1] = 0x38;
  const MxElement e = one_element(BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e4m3, a, {0x7F}, b, {0x7F}, 32);
  const Policy fp32 = Policy::parse("fp32");
  const ElementVerdict ok = judge_mx_element(e, 1.0f, 0x4100u, fp32, OutType::fp16);
  EXPECT_TRUE(ok.ok);
  EXPECT_TRUE(ok.exact_regime);
  EXPECT_FALSE(judge_mx_element(e, 1.0f, 0x4101u, fp32, OutType::fp16).ok);
  EXPECT_FALSE(judge_mx_element(e, 1.0f, 0x7E00u, fp32, OutType::fp16).ok);
}

TEST(MxOracle, CancellationAt2To254IsTheRoundingRegime) {
  // 448 * 2^254 - 448 * 2^254 + 1.5 (blocks with scales 0xFE, 0x00 x 0xFE, 0xFE): r = 1.5 but
  // S ~ 2^263: no FP32 sum is exact, and the bound is Higham's.
  std::vector<uint8_t> a(96, 0), b(96, 0x38);
  a[0] = 0x7E, a[32] = 0x3C, a[64] = 0xFE;
  const MxElement e =
      one_element(BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e4m3, a, {0xFE, 0x00, 0xFE}, b, {0xFE, 0xFE, 0xFE}, 96);
  EXPECT_EQ(round_mx(e, 1.0f, OutType::fp32), 0x3FC00000u);
  EXPECT_EQ(e.abs_sum.top_exp(), 264);
  const ElementVerdict v = judge_mx_element(e, 1.0f, 0x00000000u, Policy::parse("fp32"), OutType::fp32);
  EXPECT_FALSE(v.exact_regime);
  EXPECT_TRUE(v.ok);  // what an FP32 accumulator gives: 0 (2^-262 relative error allowed)
  EXPECT_FALSE(judge_mx_element(e, 1.0f, 0x00000000u, Policy::parse("exact"), OutType::fp32).ok);
}

TEST(MxOracle, TinyProductsBelowFp32sRangeAreNotExactRegime) {
  // One product 2^-16 * 2^-127 * 2^-16 * 2^-127: far below every output type's subnormals.
  std::vector<uint8_t> a(32, 0), b(32, 0);
  a[0] = 0x01, b[0] = 0x01;
  const MxElement e = one_element(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e5m2, a, {0x00}, b, {0x00}, 32);
  EXPECT_EQ(e.g_exp, -286);
  const ElementVerdict zero = judge_mx_element(e, 1.0f, 0u, Policy::parse("fp32"), OutType::fp32);
  EXPECT_TRUE(zero.ok);
  EXPECT_FALSE(zero.exact_regime);  // FP32's partial sums would underflow: rule 2 does not apply
  EXPECT_FALSE(judge_mx_element(e, 1.0f, 1u, Policy::parse("fp32"), OutType::fp32).ok);  // 2^-149: too far
}

TEST(MxOracle, NaNScalesAndElementsAndInfs) {
  std::vector<uint8_t> a(32, 0x3C), b(32, 0x3C);  // E5M2 ones
  const Policy fp32 = Policy::parse("fp32");
  // 0xFF scale: NaN only.
  MxElement e = one_element(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e5m2, a, {0xFF}, b, {0x7F}, 32);
  EXPECT_TRUE(judge_mx_element(e, 1.0f, 0x7E00u, fp32, OutType::fp16).ok);
  EXPECT_FALSE(judge_mx_element(e, 1.0f, 0x5000u, fp32, OutType::fp16).ok);  // 32: the scale ignored
  // +Inf element: +Inf only (not the largest finite, not NaN).
  a[3] = 0x7C;
  e = one_element(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e5m2, a, {0x7F}, b, {0x7F}, 32);
  EXPECT_TRUE(e.pos_inf);
  EXPECT_TRUE(judge_mx_element(e, 1.0f, 0x7C00u, fp32, OutType::fp16).ok);
  EXPECT_FALSE(judge_mx_element(e, 1.0f, 0x7BFFu, fp32, OutType::fp16).ok);
  EXPECT_FALSE(judge_mx_element(e, 1.0f, 0x7E00u, fp32, OutType::fp16).ok);
  EXPECT_TRUE(judge_mx_element(e, -2.0f, 0xFC00u, fp32, OutType::fp16).ok);
  // ... and alpha = 0 makes it Inf * 0: NaN.
  EXPECT_TRUE(judge_mx_element(e, 0.0f, 0x7E00u, fp32, OutType::fp16).ok);
  // -Inf beside it: NaN. Inf times a zero element: NaN.
  a[4] = 0xFC;
  e = one_element(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e5m2, a, {0x7F}, b, {0x7F}, 32);
  EXPECT_TRUE(e.nan);
  a[4] = 0x3C;
  b[3] = 0x80;
  e = one_element(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e5m2, a, {0x7F}, b, {0x7F}, 32);
  EXPECT_TRUE(e.nan);
  // A NaN element (E4M3 0x7F) times zero is still NaN.
  std::vector<uint8_t> a8(32, 0), b8(32, 0);
  a8[0] = 0x7F;
  e = one_element(BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e4m3, a8, {0x7F}, b8, {0x7F}, 32);
  EXPECT_TRUE(e.nan);
}

// An honest FP32 kernel (any order) on random MX data passes rule 9; one that reads 0x00 as zero
// fails where such a scale matters.
TEST(MxOracle, HonestFp32SumsPassAndAZeroReadE8m0Fails) {
  std::mt19937_64 rng(17);
  const Policy fp32 = Policy::parse("fp32");
  int64_t judged = 0, mutant_caught = 0, skipped = 0;
  for (int rep = 0; rep < 300; ++rep) {
    MxProblem p = random_mx(rng, kFormats[1 + rep % 3], kFormats[1 + (rep / 3) % 3], false);
    if (rep % 2) p.a.scales[0] = 0x00;  // 2^-127: invisible to an FP32 sum unless B's scale lifts it
    if (rep % 2) p.b.scales[0] = 0xFE;
    const std::vector<MxElement> elems = exact_mx(p);
    for (int64_t bi = 0; bi < p.l * p.m; ++bi)
      for (int64_t j = 0; j < p.n; ++j) {
        const int64_t b = bi / p.m, rb = b * p.n + j;
        float honest = 0, mutant = 0;
        bool in_range = true;  // SPEC's rules 3-4 assume FP32 products: see below
        for (int64_t x = p.k - 1; x >= 0; --x) {  // backwards: another order than the reference's
          const double sa = scale_double(p.a.format, p.a.scales[bi * p.a.kb() + x / block_size(p.a.format)]);
          const double sb = scale_double(p.b.format, p.b.scales[rb * p.b.kb() + x / block_size(p.b.format)]);
          const double ea = element_double(p.a.format, element_byte(p.a, bi, x));
          const double eb = element_double(p.b.format, element_byte(p.b, rb, x));
          const double prod = ea * sa * eb * sb;
          in_range &= prod == 0 || (std::fabs(prod) >= 0x1p-126 && std::fabs(prod) < 0x1p100);
          honest += static_cast<float>(prod);
          mutant += static_cast<float>(ea * (sa < 0x1p-126 ? 0.0 : sa) * eb * sb);
        }
        const MxElement& e = elems[static_cast<size_t>(bi * p.n + j)];
        // Products outside FP32's normal range (the pairs of a 0x00 with an ordinary scale, or of
        // a 0xFE with a large one) round or overflow in an FP32 kernel beyond what rules 3-4
        // allow: SPEC revision 4 has no allowance for them yet, so they are not judged here.
        if (!in_range) {
          ++skipped;
          continue;
        }
        uint32_t hw, mw;
        std::memcpy(&hw, &honest, 4);
        std::memcpy(&mw, &mutant, 4);
        ++judged;
        const ElementVerdict v = judge_mx_element(e, 1.0f, hw, fp32, OutType::fp32);
        ASSERT_TRUE(v.ok) << "rep " << rep << " b " << b << " i " << bi % p.m << " j " << j << " got " << honest
                          << " expected " << v.expected << " error " << v.error << " bound " << v.bound;
        mutant_caught += !judge_mx_element(e, 1.0f, mw, fp32, OutType::fp32).ok;
      }
  }
  EXPECT_GT(judged, 1000);
  EXPECT_LT(skipped, judged / 4);
  EXPECT_GT(mutant_caught, 20);
}

// ---- case files ------------------------------------------------------------------------------

TEST(MxCaseFile, RoundTripsEveryHandCase) {
  for (const std::string& f : mx_corpus()) {
    SCOPED_TRACE(f);
    const MxProblem p = parse_mx_case(read_text(f), f);
    const std::string text = write_mx_case(p);
    const MxProblem q = parse_mx_case(text, "rewritten");
    EXPECT_EQ(write_mx_case(q), text);
    EXPECT_EQ(q.a.format, p.a.format);
    EXPECT_EQ(q.b.format, p.b.format);
    EXPECT_EQ(q.a.data, p.a.data);
    EXPECT_EQ(q.b.scales, p.b.scales);
    EXPECT_EQ(q.alpha, p.alpha);
    EXPECT_EQ(q.expect, p.expect);
  }
}

TEST(MxCaseFile, FormatsDecideTheLengthsAndBadInputIsNamed) {
  const std::string head = "op = gemv\nm = 1\nn = 1\nk = 40\n";
  // mxfp8 A: 40 bytes; mxfp4 B: 20 bytes; kb = 2 for both (not 3 as NVFP4's blocks of 16).
  const std::string a = "a = " + std::string(80, '3') + "\n", b = "b = " + std::string(40, '2') + "\n";
  const std::string ok = head + "a_format = mxfp8_e4m3\nb_format = mxfp4\n" + a + b + "sfa = 7f7f\nsfb = 7f80\n";
  const MxProblem p = parse_mx_case(ok, "ok");
  EXPECT_EQ(p.a.format, BlockFormat::mxfp8_e4m3);
  EXPECT_EQ(p.b.format, BlockFormat::mxfp4);
  EXPECT_EQ(p.a.kb(), 2);
  auto error_of = [](const std::string& text) {
    try {
      parse_mx_case(text, "bad");
    } catch (const CaseError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(head + "a_format = mxfp8_e4m3\nb_format = mxfp4\n" + a + b + "sfa = 7f7f7f\nsfb = 7f80\n")
                .find("sfa holds 3 bytes, expected 2"),
            std::string::npos);
  EXPECT_NE(error_of(head + "a_format = mxfp6\n" + a + b + "sfa = 7f7f\nsfb = 7f80\n").find("a_format must be"),
            std::string::npos);
  EXPECT_NE(error_of("op = gemv\nm = 1\nn = 1\nk = 33\na_format = mxfp4\nb_format = mxfp8_e4m3\n").find("k must be even"),
            std::string::npos);
  EXPECT_NE(error_of(ok + "b_formats = mxfp4\n").find("unknown key 'b_formats'"), std::string::npos);
  EXPECT_NE(error_of(ok + "a_format = mxfp4\n").find("duplicate key"), std::string::npos);
  // A problem built in code is checked the same way.
  MxProblem q = p;
  q.alpha = INFINITY;
  EXPECT_THROW(validate(q), std::invalid_argument);
  q = p;
  q.b.scales.pop_back();
  EXPECT_THROW(exact_mx(q), std::invalid_argument);
  // The default stays NVFP4: 16-element blocks, kb = 3 for k = 40.
  EXPECT_NE(error_of(head + "a = " + std::string(40, '1') + "\n" + b + "sfa = 383838\nsfb = 3838\n").find("sfb holds 2"),
            std::string::npos);
}

}  // namespace
}  // namespace nvfp4

// ---- MX operands in the ordinary Problem -------------------------------------------------------

namespace nvfp4 {
namespace {

// Every hand case read by the ordinary case reader: formats, data and expect as parse_mx_case
// reads them, exact_gemm's words bit for bit, and write_case keeps the formats.
TEST(MxProblemCase, HandCasesReadByParseCaseReplayBitForBit) {
  for (const std::string& f : mx_corpus()) {
    SCOPED_TRACE(f);
    const MxProblem want = parse_mx_case(read_text(f), f);
    const Problem p = parse_case(read_text(f), f);
    EXPECT_EQ(p.a_format, want.a.format);
    EXPECT_EQ(p.b_format, want.b.format);
    EXPECT_EQ(p.a, want.a.data);
    EXPECT_EQ(p.sfb, want.b.scales);
    ASSERT_TRUE(p.expect.has_value());
    const ExactResult ref = exact_gemm(p);
    ASSERT_TRUE(ref.mx != nullptr || !p.mx_operands());
    const ExpectComparison c = compare_expect(p, ref);
    EXPECT_EQ(c.differing, 0);
    EXPECT_EQ(c.compared, static_cast<int64_t>(p.expect->size()));
    const Problem q = parse_case(write_case(p), "rewritten");
    EXPECT_EQ(q.a_format, p.a_format);
    EXPECT_EQ(q.b_format, p.b_format);
    EXPECT_EQ(q.b, p.b);
    EXPECT_EQ(write_case(q), write_case(p));
  }
}

TEST(MxProblemCase, SizesAndShapesFollowTheFormats) {
  Problem p;
  p.op = Op::gemm;
  p.m = 3, p.n = 2, p.k = 40, p.l = 2;
  p.a_format = BlockFormat::mxfp8_e5m2;
  p.b_format = BlockFormat::mxfp4;
  EXPECT_EQ(p.a_bytes(), 2 * 3 * 40);
  EXPECT_EQ(p.b_bytes(), 2 * 2 * 20);
  EXPECT_EQ(p.sfa_bytes(), 2 * 3 * 2);
  EXPECT_EQ(p.sfb_bytes(), 2 * 2 * 2);
  EXPECT_EQ(shape_error(p), "");
  p.k = 33;  // an E2M1 operand needs even k
  EXPECT_NE(shape_error(p).find("even"), std::string::npos);
  p.b_format = BlockFormat::mxfp8_e4m3;  // two byte-per-element operands: any k
  EXPECT_EQ(shape_error(p), "");
  p.k = 1;
  EXPECT_EQ(shape_error(p), "");
  p.a_format = BlockFormat::nvfp4;  // NVFP4 mixed with MXFP8: NVFP4's blocks of 16, k even
  p.k = 48;
  EXPECT_EQ(p.kb(), 3);
  EXPECT_EQ(p.kb_b(), 2);
  EXPECT_EQ(shape_error(p), "");
  p.op = Op::dual_gemm;  // every op of the GEMM family takes MX formats; B2 follows B's
  EXPECT_EQ(shape_error(p), "");
  EXPECT_EQ(p.b2_bytes(), p.b_bytes());
  EXPECT_EQ(p.sfb2_bytes(), p.sfb_bytes());
  p.out_type = OutType::nvfp4;  // a block-scaled output is of NVFP4 operands only
  EXPECT_NE(shape_error(p).find("out_type nvfp4 is for NVFP4 operands"), std::string::npos);
  p.out_type = OutType::fp16;
  p.op = Op::gemm;
  p.b_format = static_cast<BlockFormat>(9);
  EXPECT_NE(shape_error(p).find("b_format"), std::string::npos);
}

TEST(MxProblemCase, CaseReaderNamesFormatErrors) {
  auto error_of = [](const std::string& text) {
    try {
      parse_case(text, "bad");
    } catch (const CaseError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = "op = gemv\nm = 1\nn = 1\nk = 40\nl = 1\n";
  const std::string a = "a = " + std::string(80, '3') + "\n", b = "b = " + std::string(40, '2') + "\n";
  EXPECT_EQ(error_of(head + "a_format = mxfp8_e4m3\nb_format = mxfp4\n" + a + b + "sfa = 7f7f\nsfb = 7f80\n"),
            "no error");
  EXPECT_NE(error_of(head + "a_format = mxfp6\n" + a + b + "sfa = 7f7f\nsfb = 7f80\n").find("bad:6: a_format"),
            std::string::npos);
  // An E4M3 A of 40 elements is 40 bytes: NVFP4's 20 are too few.
  EXPECT_NE(error_of(head + "a_format = mxfp8_e4m3\nb_format = mxfp4\na = " + std::string(40, '3') + "\n" + b +
                     "sfa = 7f7f\nsfb = 7f80\n")
                .find("l*m*k = 40"),
            std::string::npos);
  // Dual and grouped GEMM take MX formats: the seeds alone, and each group's bytes by the formats.
  EXPECT_EQ(error_of("op = dual_gemm\nm = 1\nn = 1\nk = 32\nl = 1\na_format = mxfp4\nseed = 1\n"), "no error");
  const std::string grouped = "op = grouped_gemm\ngroups = 1\ngroup_m = 1\ngroup_n = 1\ngroup_k = 33\n"
                              "a_format = mxfp8_e4m3\nb_format = mxfp8_e5m2\n";
  EXPECT_EQ(error_of(grouped + "a.0 = " + std::string(66, '3') + "\nb.0 = " + std::string(66, '3') +
                     "\nsfa.0 = 7f7f\nsfb.0 = 7f7f\n"),
            "no error");
  EXPECT_NE(error_of(grouped + "a.0 = " + std::string(34, '3') + "\nb.0 = " + std::string(66, '3') +
                     "\nsfa.0 = 7f7f\nsfb.0 = 7f7f\n")
                .find("m_g*k_g = 33"),
            std::string::npos);
  EXPECT_NE(error_of("op = grouped_gemm\ngroups = 1\ngroup_m = 1\ngroup_n = 1\ngroup_k = 33\na_format = mxfp4\nseed = 1\n")
                .find("must be even"),
            std::string::npos);
  EXPECT_NE(error_of("op = quantize\nm = 1\nk = 32\nl = 1\nin_type = bf16\nformat = mxfp4\nrecipe = mx_floor\n"
                     "a_format = mxfp4\n")
                .find("a_format"),
            std::string::npos);
}

// The oracle judges a Problem with MX operands by rule 9: an E8M0 0xFF scale makes its outputs
// NaN, and 0x00 is 2^-127, not zero.
TEST(MxProblemCase, OracleJudgesMxProblemsByRule9) {
  Problem p;
  p.op = Op::gemv;
  p.m = 2, p.n = 1, p.k = 32, p.l = 1;
  p.a_format = p.b_format = BlockFormat::mxfp8_e4m3;
  p.out_type = OutType::fp32;
  p.sf_layout = SfLayout::linear;
  p.a.assign(64, 0x38);  // 1.0
  p.b.assign(32, 0x38);
  p.sfa = {0xFF, 0x00};   // row 0: NaN scale; row 1: 2^-127
  p.sfb = {0xFE};         // 2^127
  const ExactResult ref = exact_gemm(p);
  ASSERT_TRUE(ref.mx != nullptr);
  EXPECT_TRUE(ref.elems[0].nan);
  const float one_row = 32.0f;  // 32 * 2^-127 * 2^127
  uint32_t bits;
  std::memcpy(&bits, &one_row, 4);
  EXPECT_EQ(ref.word(1), bits);
  const Policy policy;
  std::vector<uint32_t> good = {0x7FC00000u, bits};
  EXPECT_FALSE(judge_words(p, ref, good.data(), policy).any_failure());
  std::vector<uint32_t> zero_scale = {0x7FC00000u, 0u};  // 0x00 read as zero
  EXPECT_TRUE(judge_words(p, ref, zero_scale.data(), policy).any_failure());
  std::vector<uint32_t> nan_ignored = {bits, bits};
  const OracleSummary s = judge_words(p, ref, nan_ignored.data(), policy);
  EXPECT_EQ(s.failing, 1);
  EXPECT_EQ(s.first_i, 0);
  EXPECT_FALSE(judge_output(p, ref, 1, 0u, policy).ok);
}

// ---- grouped and dual GEMM ---------------------------------------------------------------------

// Grouped and dual hand cases (scripts/make_mx_cases.py: Fractions per group; silu(G) * U from a
// 50-digit decimal exp over the exact G and U) bit for bit, through the ordinary case reader, and
// the case file written back reads the same.
TEST(MxGroupedDual, HandCasesBitForBit) {
  const std::vector<std::string> files = mx_corpus(false);
  int grouped = 0, dual = 0;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    const Problem p = parse_case(read_text(f), f);
    ASSERT_TRUE(has_expect(p));
    const ExactResult ref = exact_gemm(p);
    ASSERT_TRUE(ref.mx != nullptr);
    const ExpectComparison c = compare_expect(p, ref);
    EXPECT_EQ(c.differing, 0);
    EXPECT_EQ(c.compared, p.c_elems());
    EXPECT_FALSE(judge_words(p, ref, ref.words().data(), Policy{}).any_failure());
    const Problem q = parse_case(write_case(p), "rewritten");
    EXPECT_EQ(write_case(q), write_case(p));
    grouped += p.op == Op::grouped_gemm;
    dual += p.op == Op::dual_gemm;
  }
  EXPECT_GE(grouped, 6);
  EXPECT_GE(dual, 6);
}

// Random grouped problems of every format pair: each group's facts and words are exactly its
// own GEMM's (exact_mx of the group with the group's alpha), empty groups have none, and the
// oracle takes each group's alpha: the words of alpha = 1 fail a group whose alpha is 2.
TEST(MxGroupedDual, GroupedIsEachGroupsGemm) {
  std::mt19937_64 rng(20261202);
  for (const BlockFormat fa : kFormats)
    for (const BlockFormat fb : kFormats) {
      if (fa == BlockFormat::nvfp4 && fb == BlockFormat::nvfp4) continue;
      SCOPED_TRACE(std::string(to_string(fa)) + " x " + to_string(fb));
      Problem p;
      p.op = Op::grouped_gemm;
      p.a_format = fa, p.b_format = fb;
      p.out_type = OutType::fp32;
      p.sf_layout = SfLayout::linear;
      const bool odd = !packs_nibbles(fa) && !packs_nibbles(fb);
      for (const int64_t m : {int64_t(2), int64_t(0), int64_t(3)}) {
        Group g;
        g.m = m, g.n = 1 + static_cast<int64_t>(rng() % 3), g.k = odd ? 33 : 64 + 2 * static_cast<int64_t>(rng() % 10);
        g.alpha = m == 3 ? 2.0f : 1.0f;
        g.a = random_bytes(rng, g.a_bytes(fa));
        g.b = random_bytes(rng, g.b_bytes(fb));
        g.sfa.assign(static_cast<size_t>(g.sfa_bytes(fa)), 0);
        g.sfb.assign(static_cast<size_t>(g.sfb_bytes(fb)), 0);
        for (uint8_t& s : g.sfa) s = fa == BlockFormat::nvfp4 ? 0x38 : static_cast<uint8_t>(0x70 + rng() % 32);
        for (uint8_t& s : g.sfb) s = fb == BlockFormat::nvfp4 ? 0x38 : static_cast<uint8_t>(0x70 + rng() % 32);
        // E4M3/E5M2 NaN and Inf bytes out: the words of alpha 1 and 2 must differ everywhere.
        for (std::vector<uint8_t>* d : {&g.a, &g.b})
          if (!packs_nibbles(d == &g.a ? fa : fb))
            for (uint8_t& x : *d) x = static_cast<uint8_t>(x & 0xBF);
        p.groups.push_back(g);
      }
      ASSERT_EQ(problem_error(p), "");
      const ExactResult ref = exact_gemm(p);
      ASSERT_TRUE(ref.mx != nullptr);
      ASSERT_EQ(ref.group_offset, (std::vector<int64_t>{0, p.groups[0].c_elems(), p.groups[0].c_elems(), p.c_elems()}));
      for (const size_t g : {size_t(0), size_t(2)}) {
        const MxProblem one = mx_problem(group_problem(p, g));
        const std::vector<uint32_t> want = exact_mx_words([&] {
          MxProblem x = one;
          x.alpha = p.groups[g].alpha;
          return x;
        }());
        for (size_t x = 0; x < want.size(); ++x)
          EXPECT_EQ(ref.word(static_cast<size_t>(ref.group_offset[g]) + x), want[x]) << "group " << g << " element " << x;
      }
      // Group 2's words as if its alpha were 1: wrong wherever the product is not zero.
      std::vector<uint32_t> words = ref.words();
      Problem unit = p;
      unit.groups[2].alpha = 1.0f;
      const ExactResult unit_ref = exact_gemm(unit);
      bool any_nonzero = false;
      for (int64_t x = ref.group_offset[2]; x < ref.group_offset[3]; ++x) {
        words[static_cast<size_t>(x)] = unit_ref.word(static_cast<size_t>(x));
        any_nonzero = any_nonzero || (unit_ref.word(static_cast<size_t>(x)) & 0x7FFFFFFFu) != 0;
      }
      EXPECT_FALSE(judge_words(p, ref, ref.words().data(), Policy{}).any_failure());
      if (any_nonzero) {
        const OracleSummary s = judge_words(p, ref, words.data(), Policy{});
        EXPECT_TRUE(s.any_failure());
        EXPECT_EQ(s.first_g, 2);
      }
    }
}

// Dual GEMM: G and U are each the GEMM of A against B and B2 (exact_mx), v = silu(G) * U in long
// double against an independent double computation, NaN scales of B2 make only U's outputs NaN,
// and the oracle holds an FP32 epilogue (silu in float) to rule 6 while rejecting G * U.
TEST(MxGroupedDual, DualIsSiluOfGTimesU) {
  std::mt19937_64 rng(7);
  for (const BlockFormat fa : kFormats)
    for (const BlockFormat fb : kFormats) {
      if (fa == BlockFormat::nvfp4 && fb == BlockFormat::nvfp4) continue;
      SCOPED_TRACE(std::string(to_string(fa)) + " x " + to_string(fb));
      Problem p;
      p.op = Op::dual_gemm;
      p.a_format = fa, p.b_format = fb;
      p.m = 3, p.n = 2, p.l = 2, p.k = 64;
      p.out_type = OutType::fp32;
      p.sf_layout = SfLayout::linear;
      p.alpha = 0.5f, p.alpha2 = -1.5f;
      const auto element_bytes = [&](BlockFormat f, int64_t rows) {
        std::vector<uint8_t> v = random_bytes(rng, p.l * rows * operand_row_bytes(f, p.k));
        if (!packs_nibbles(f))
          for (uint8_t& x : v) x = static_cast<uint8_t>(x & 0x9F);  // |element| small, finite
        return v;
      };
      const auto scale_bytes = [&](BlockFormat f, int64_t rows) {
        std::vector<uint8_t> v(static_cast<size_t>(p.l * rows * operand_kb(f, p.k)));
        for (uint8_t& s : v) s = f == BlockFormat::nvfp4 ? static_cast<uint8_t>(0x30 + rng() % 8) : static_cast<uint8_t>(0x7A + rng() % 6);
        return v;
      };
      p.a = element_bytes(fa, p.m), p.b = element_bytes(fb, p.n), p.b2 = element_bytes(fb, p.n);
      p.sfa = scale_bytes(fa, p.m), p.sfb = scale_bytes(fb, p.n), p.sfb2 = scale_bytes(fb, p.n);
      p.sfb2[0] = fb == BlockFormat::nvfp4 ? 0x7F : 0xFF;  // U of column 0 of batch 0: NaN
      ASSERT_EQ(problem_error(p), "");
      const ExactResult ref = exact_gemm(p);
      ASSERT_TRUE(ref.mx != nullptr && ref.mx2 != nullptr);
      Problem gp = p, up = p;
      gp.op = up.op = Op::gemm;
      gp.b2.clear(), gp.sfb2.clear(), up.b2.clear(), up.sfb2.clear();
      up.b = p.b2, up.sfb = p.sfb2, up.alpha = p.alpha2;
      const ExactResult g = exact_gemm(gp), u = exact_gemm(up);
      std::vector<uint32_t> fp32_epilogue(ref.size()), product_only(ref.size());
      for (size_t x = 0; x < ref.size(); ++x) {
        const OutputPosition pos = output_position(p, static_cast<int64_t>(x));
        EXPECT_EQ(ref.elems2[x].nan, pos.b == 0 && pos.j == 0);
        float gv, uv;
        std::memcpy(&gv, &g.c32[x], 4);
        std::memcpy(&uv, &u.c32[x], 4);
        const float silu = gv / (1.0f + std::exp(-gv));
        const float v = silu * uv, plain = gv * uv;
        std::memcpy(&fp32_epilogue[x], &v, 4);
        std::memcpy(&product_only[x], &plain, 4);
        if (std::isnan(uv)) continue;
        const double want = static_cast<double>(gv) / (1.0 + std::exp(-static_cast<double>(gv))) * uv;
        EXPECT_NEAR(static_cast<double>(ref.dual[x].v), want, 1e-6 * std::fabs(want) + 1e-30);
      }
      EXPECT_FALSE(judge_words(p, ref, fp32_epilogue.data(), Policy{}).any_failure());
      EXPECT_TRUE(judge_words(p, ref, product_only.data(), Policy{}).any_failure());
    }
}

// An E5M2 Inf in G: rule 6 has no bound there (unjudged), a NaN element still demands NaN.
TEST(MxGroupedDual, InfInGIsUnjudgedAndNaNStaysNaN) {
  Problem p;
  p.op = Op::dual_gemm;
  p.a_format = p.b_format = BlockFormat::mxfp8_e5m2;
  p.m = 2, p.n = 1, p.k = 32, p.l = 1;
  p.out_type = OutType::bf16;
  p.sf_layout = SfLayout::linear;
  p.a.assign(64, 0x3C);  // 1.0
  p.b.assign(32, 0x3C);
  p.b2.assign(32, 0x3C);
  p.a[0] = 0x7C;   // row 0: +Inf in G and U
  p.a[32] = 0x7D;  // row 1: NaN element
  p.sfa = {0x7F, 0x7F};
  p.sfb = {0x7F};
  p.sfb2 = {0x7F};
  const ExactResult ref = exact_gemm(p);
  EXPECT_EQ(ref.word(0), 0x7F80u);  // silu(+Inf) * +Inf
  EXPECT_TRUE(judge_output(p, ref, 0, 0x1234u, Policy{}).unjudged);
  EXPECT_TRUE(judge_output(p, ref, 1, 0x7FC0u, Policy{}).ok);
  EXPECT_FALSE(judge_output(p, ref, 1, 0x3F80u, Policy{}).ok);
}

}  // namespace
}  // namespace nvfp4
