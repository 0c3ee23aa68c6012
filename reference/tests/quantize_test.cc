// The quantizers of SPEC section 2 against computations that share no code with them: the hand
// cases of corpus/quantize/ (expect lines from scripts/make_quantize_cases.py, exact Fraction
// arithmetic), an exhaustive pass over every BF16 value against a formulation in double with
// explicit rounding, and rule 7's judge with the failure text's variant names.
#include "reference/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "reference/case_file.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

std::string hex(const std::vector<uint8_t>& v) {
  static const char d[] = "0123456789abcdef";
  std::string s;
  for (const uint8_t b : v) s += std::string{d[b >> 4], d[b & 15]};
  return s;
}

std::vector<std::string> quantize_corpus() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(NVFP4_SOURCE_DIR) + "/corpus/quantize"))
    if (e.path().extension() == ".case") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(QuantizeCorpus, EveryHandCaseMatchesItsIndependentExpectLines) {
  const std::vector<std::string> files = quantize_corpus();
  ASSERT_GE(files.size(), 80u);
  int recipes_seen[8] = {};
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    const Problem p = read_case_file(f);
    ASSERT_TRUE(p.expect_q && p.expect_sfq);
    const QuantResult r = quantize_reference(p);
    EXPECT_EQ(hex(r.q), hex(*p.expect_q));
    EXPECT_EQ(hex(r.sfq), hex(*p.expect_sfq));
    ++recipes_seen[static_cast<int>(p.recipe)];
    // The reference's own bytes pass rule 7, in the case's layout, padding written 0x00.
    std::vector<uint8_t> sfq = r.sfq;
    if (p.sf_layout == SfLayout::permuted) sfq = sf_to_permuted(r.sfq.data(), p.m, p.qkb(), p.l, 0x00);
    EXPECT_TRUE(judge_quantize(p, r, r.q, sfq, 0x00).pass());
  }
  for (int recipe = 1; recipe <= 7; ++recipe) EXPECT_GE(recipes_seen[recipe], 4) << to_string(static_cast<Recipe>(recipe));
}


// ---- every BF16 value, against a formulation in double with explicit rounding ---------------
//
// Each FP32 operation is done in double and rounded once to float: a product of two floats is
// exact in double, and a quotient rounded twice (53 then 24 bits) equals the single rounding
// because 53 >= 2*24 + 2. E4M3 rounds with nearbyint on a binade's quantum, E2M1 by its decision
// thresholds written out, E8M0 by frexp.

float mul32(float a, float b) { return static_cast<float>(static_cast<double>(a) * static_cast<double>(b)); }
float div32(float a, float b) { return static_cast<float>(static_cast<double>(a) / static_cast<double>(b)); }

uint8_t e4m3_independent(float v) {  // v >= 0 or NaN
  if (std::isnan(v)) return 0x7F;
  if (!(v < 448.0f)) return 0x7E;
  if (v == 0) return 0x00;
  int e;
  std::frexp(static_cast<double>(v), &e);  // v in [2^(e-1), 2^e)
  const int binade = std::max(e - 1, -6);
  const double quantum = std::ldexp(1.0, binade - 3);
  const double r = std::nearbyint(static_cast<double>(v) / quantum) * quantum;  // ties to even
  if (r >= 448.0) return 0x7E;
  if (r < std::ldexp(1.0, -6)) return static_cast<uint8_t>(r / std::ldexp(1.0, -9));
  std::frexp(r, &e);
  return static_cast<uint8_t>((e - 1 + 7) << 3 | (static_cast<int>(r / std::ldexp(1.0, e - 4)) - 8));
}
double e4m3_independent_value(uint8_t b) {
  const int e = b >> 3, m = b & 7;
  return e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
}

uint8_t e2m1_independent(float y) {
  if (std::isnan(y)) return 0x7;
  const double a = std::fabs(static_cast<double>(y));
  const uint8_t mag = a <= 0.25 ? 0 : a < 0.75 ? 1 : a <= 1.25 ? 2 : a < 1.75 ? 3 : a <= 2.5 ? 4 : a < 3.5 ? 5 : a <= 5 ? 6 : 7;
  return static_cast<uint8_t>((std::signbit(y) ? 8 : 0) | mag);
}

// rceil of a non-negative float (cvt.rp.satfinite.ue8m0x2): by frexp, v = f * 2^e, f in [0.5, 1).
uint8_t e8m0_rceil_independent(float v) {
  if (std::isnan(v)) return 0xFF;
  if (std::isinf(v)) return 0xFE;
  if (v <= std::ldexp(1.0f, -127)) return 0;
  int e;
  const double f = std::frexp(static_cast<double>(v), &e);
  const int ceil_log2 = f == 0.5 ? e - 1 : e;
  return static_cast<uint8_t>(std::min(ceil_log2 + 127, 254));
}

float bf16_value(uint16_t bits) {
  const uint32_t w = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &w, sizeof f);
  return f;
}
uint16_t bf16_toward_zero(float f) {
  uint32_t w;
  std::memcpy(&w, &f, sizeof w);
  return static_cast<uint16_t>(w >> 16);
}

Problem bf16_problem(const std::vector<uint16_t>& words, int64_t m, int64_t k, BlockFormat f, Recipe r, bool row_scale) {
  Problem p;
  p.op = Op::quantize;
  p.in_type = InType::bf16;
  p.q_format = f;
  p.recipe = r;
  p.row_global_scale = row_scale;
  p.m = m;
  p.k = k;
  for (const uint16_t w : words) {
    p.x.push_back(static_cast<uint8_t>(w));
    p.x.push_back(static_cast<uint8_t>(w >> 8));
  }
  return p;
}

float amax_ignoring_nan(const std::vector<float>& v, size_t begin, size_t end) {
  float m = 0;
  for (size_t i = begin; i < end; ++i)
    if (!std::isnan(v[i]) && std::fabs(v[i]) > m) m = std::fabs(v[i]);
  return m;
}

// te, ref and torchao with a per-row global scale (SPEC section 2's table), one byte per code.
void nvfp4_independent(Recipe r, const std::vector<float>& x, int64_t m, int64_t k, std::vector<uint8_t>& codes,
                       std::vector<uint8_t>& sfq) {
  const float c6 = static_cast<float>(1.0 / 6.0);
  for (int64_t i = 0; i < m; ++i) {
    const float amax = amax_ignoring_nan(x, i * k, (i + 1) * k);
    float gs = r == Recipe::torchao ? div32(amax, 2688.0f) : div32(2688.0f, amax);
    if (r == Recipe::te && gs > FLT_MAX) gs = FLT_MAX;
    if (r == Recipe::te && (amax == 0 || gs == 0)) gs = 1;
    for (int64_t s = 0; s < k / 16; ++s) {
      const size_t b0 = static_cast<size_t>(i * k + s * 16);
      const float amax_b = amax_ignoring_nan(x, b0, b0 + 16);
      float sf32 = r == Recipe::te ? mul32(amax_b, mul32(gs, c6)) : r == Recipe::ref ? mul32(gs, mul32(amax_b, c6))
                                                                                    : div32(div32(amax_b, 6.0f), gs);
      if (r == Recipe::te && sf32 > FLT_MAX) sf32 = FLT_MAX;
      if (r == Recipe::torchao) sf32 = sf32 < 0x1p-6f ? 0x1p-6f : sf32 > 448.0f ? 448.0f : sf32;
      const uint8_t byte = e4m3_independent(sf32);
      sfq.push_back(byte);
      const float sf = byte == 0x7F ? NAN : static_cast<float>(e4m3_independent_value(byte));
      float os = r == Recipe::torchao ? div32(div32(1.0f, gs), sf) : div32(1.0f, mul32(sf, div32(1.0f, gs)));
      if (r == Recipe::te && os > FLT_MAX) os = FLT_MAX;
      if (r == Recipe::ref && sf == 0) os = 0;
      for (size_t j = b0; j < b0 + 16; ++j) codes.push_back(e2m1_independent(mul32(x[j], os)));
    }
  }
}

void rceil_independent(const std::vector<float>& x, std::vector<uint8_t>& codes, std::vector<uint8_t>& sfq) {
  const float inv6 = static_cast<float>(1.0 / 6.0);
  for (size_t b0 = 0; b0 < x.size(); b0 += 32) {
    const uint8_t byte = e8m0_rceil_independent(mul32(amax_ignoring_nan(x, b0, b0 + 32), inv6));
    sfq.push_back(byte);
    const float os = static_cast<float>(std::ldexp(1.0, 127 - byte));
    for (size_t j = b0; j < b0 + 32; ++j) codes.push_back(e2m1_independent(mul32(x[j], os)));
  }
}

std::vector<uint8_t> unpacked(const std::vector<uint8_t>& q) {
  std::vector<uint8_t> c;
  for (const uint8_t b : q) {
    c.push_back(b & 15);
    c.push_back(b >> 4);
  }
  return c;
}

// Rows of 32 words: each BF16 value v as the block maximum (its block's other members are v
// times fractions, truncated toward zero so that none exceeds |v|), or as a member of a block
// whose maximum is `anchor`. te's rows end in a block holding 2688, which makes the row's global
// scale 1 for every |v| <= 2688 and 2688/|v| above.
std::vector<uint16_t> exhaustive_rows(bool te, bool as_maximum, float anchor, int64_t* rows) {
  static const float kFractions[] = {1, -1, 0.5f, 0.75f, 0.3f, 0.9f, -0.6f, 0.1f, 0.25f, 0.45f, 0.8f, -0.95f, 0.05f, 0.66f, 0.33f, 0.2f};
  const int block = te ? 16 : 32;  // te: a data block and an anchor block of 16 each
  std::vector<uint16_t> out;
  std::vector<uint16_t> row;
  for (uint32_t v = 0; v < 65536; ++v) {
    if (as_maximum) {
      for (int j = 0; j < block; ++j) row.push_back(bf16_toward_zero(bf16_value(static_cast<uint16_t>(v)) * kFractions[j % 16]));
    } else {
      if (row.empty()) row.push_back(bf16_toward_zero(anchor));
      row.push_back(static_cast<uint16_t>(v));
      if (static_cast<int>(row.size()) < block && v != 65535) continue;
      while (static_cast<int>(row.size()) < block) row.push_back(0);
    }
    if (te) {
      row.push_back(bf16_toward_zero(2688.0f));
      while (row.size() < 32) row.push_back(0);
    }
    out.insert(out.end(), row.begin(), row.end());
    row.clear();
  }
  *rows = static_cast<int64_t>(out.size()) / 32;
  return out;
}

void check_exhaustive(Recipe r, bool as_maximum, float anchor) {
  const bool te = r != Recipe::mx_rceil;  // the NVFP4 recipes' rows: a block of 16 and an anchor block
  int64_t m = 0;
  const std::vector<uint16_t> words = exhaustive_rows(te, as_maximum, anchor, &m);
  // te: a block of 16 and its anchor block per row; rceil: one block of 32 per row.
  const Problem p = bf16_problem(words, m, 32, te ? BlockFormat::nvfp4 : BlockFormat::mxfp4, r, te);
  std::vector<float> x;
  for (const uint16_t w : words) x.push_back(bf16_value(w));
  std::vector<uint8_t> codes, sfq;
  if (te) {
    nvfp4_independent(r, x, m, 32, codes, sfq);
  } else {
    rceil_independent(x, codes, sfq);
  }
  const QuantResult got = quantize_reference(p);
  ASSERT_EQ(got.sfq.size(), sfq.size());
  const std::vector<uint8_t> got_codes = unpacked(got.q);
  int64_t bad = 0;
  for (size_t s = 0; s < sfq.size() && bad < 5; ++s) {
    const size_t bs = te ? 16 : 32;
    bool same = got.sfq[s] == sfq[s];
    for (size_t j = s * bs; j < (s + 1) * bs; ++j) same = same && got_codes[j] == codes[j];
    if (same) continue;
    ++bad;
    std::string xs, want, have;
    for (size_t j = s * bs; j < (s + 1) * bs; ++j) {
      xs += std::to_string(x[j]) + " ";
      want += std::to_string(codes[j]) + " ";
      have += std::to_string(got_codes[j]) + " ";
    }
    ADD_FAILURE() << to_string(r) << " block " << s << ": scale " << int(sfq[s]) << " expected, " << int(got.sfq[s])
                  << " got\n x: " << xs << "\n codes expected: " << want << "\n codes got: " << have;
  }
}

// e2m1's code against the nearest of the grid found by brute force (ties to the even code,
// saturating, the sign kept, NaN to 0x7) for every float whose top 16 bits are a BF16 value and
// for the floats on and one ulp beside each midpoint: the written-out thresholds are the search.
TEST(QuantizeE2m1, EveryCodeIsTheNearestGridValueTiesToEven) {
  const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const auto brute = [&](float v) -> uint8_t {
    if (std::isnan(v)) return 0x7;
    const double a = std::fabs(static_cast<double>(v));
    int best = 7;
    if (a < 6) {
      best = 0;
      for (int c = 1; c < 8; ++c) {
        const double d = std::fabs(a - grid[c]), db = std::fabs(a - grid[best]);
        if (d < db || (d == db && c % 2 == 0)) best = c;
      }
    }
    return static_cast<uint8_t>((std::signbit(v) ? 0x8 : 0x0) | best);
  };
  std::vector<float> values;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t bits = h << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    values.push_back(v);
  }
  for (const double mid : {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0})
    for (const float sign : {1.0f, -1.0f}) {
      const float m = sign * static_cast<float>(mid);
      values.insert(values.end(), {m, std::nextafter(m, 0.0f), std::nextafter(m, 100.0f * sign)});
    }
  for (const float v : values) EXPECT_EQ(e2m1_code(v), brute(v)) << v;
}

TEST(QuantizeExhaustiveBf16, TeEveryValueAsBlockMaximum) { check_exhaustive(Recipe::te, true, 0); }
TEST(QuantizeExhaustiveBf16, TeEveryValueAsMemberOfABlockOfMaximum6) { check_exhaustive(Recipe::te, false, 6.0f); }
TEST(QuantizeExhaustiveBf16, TeEveryValueAsMemberOfABlockOfMaximum0p3) { check_exhaustive(Recipe::te, false, 0.3f); }
TEST(QuantizeExhaustiveBf16, RefEveryValueAsBlockMaximum) { check_exhaustive(Recipe::ref, true, 0); }
TEST(QuantizeExhaustiveBf16, RefEveryValueAsMemberOfABlockOfMaximum6) { check_exhaustive(Recipe::ref, false, 6.0f); }
TEST(QuantizeExhaustiveBf16, TorchaoEveryValueAsBlockMaximum) { check_exhaustive(Recipe::torchao, true, 0); }
TEST(QuantizeExhaustiveBf16, TorchaoEveryValueAsMemberOfABlockOfMaximum6) { check_exhaustive(Recipe::torchao, false, 6.0f); }
TEST(QuantizeExhaustiveBf16, MxRceilEveryValueAsBlockMaximum) { check_exhaustive(Recipe::mx_rceil, true, 0); }
TEST(QuantizeExhaustiveBf16, MxRceilEveryValueAsMemberOfABlockOfMaximum6) { check_exhaustive(Recipe::mx_rceil, false, 6.0f); }
TEST(QuantizeExhaustiveBf16, MxRceilEveryValueAsMemberOfABlockOfMaximum1e30) { check_exhaustive(Recipe::mx_rceil, false, 1e30f); }


// ---- rule 7's judge ----------------------------------------------------------------------------

Problem fp32_problem(const std::vector<float>& x, int64_t m, int64_t k, BlockFormat f, Recipe r) {
  Problem p;
  p.op = Op::quantize;
  p.in_type = InType::fp32;
  p.q_format = f;
  p.recipe = r;
  p.m = m;
  p.k = k;
  p.sf_layout = SfLayout::linear;
  for (const float v : x) {
    uint32_t w;
    std::memcpy(&w, &v, sizeof w);
    for (int b = 0; b < 4; ++b) p.x.push_back(static_cast<uint8_t>(w >> (8 * b)));
  }
  return p;
}

void set_code(std::vector<uint8_t>& q, int64_t elem, uint8_t code) {
  uint8_t& b = q[static_cast<size_t>(elem / 2)];
  b = elem % 2 ? static_cast<uint8_t>((b & 0x0F) | code << 4) : static_cast<uint8_t>((b & 0xF0) | code);
}
uint8_t code_at(const std::vector<uint8_t>& q, int64_t elem) {
  return elem % 2 ? q[static_cast<size_t>(elem / 2)] >> 4 : q[static_cast<size_t>(elem / 2)] & 15;
}

// Row 0 sets the global scale to 1 (amax 2688); row 1 is a block of amax 6 (sf = 1, os = 1)
// holding 2.5 (an E2M1 tie: RN gives 2, anything above gives 3), 2.5 * (1 + 2^-19) (3 for any os
// within 2^-20, 2 for os * (1 - 2^-18)), -0 and 0.
Problem boundary_problem(Recipe r) {
  std::vector<float> x(32, 0.0f);
  x[0] = 2688;
  x[16] = 6, x[17] = 2.5f, x[18] = 2.5f * (1 + 0x1p-19f), x[19] = -0.0f, x[20] = 1, x[21] = -3;
  return fp32_problem(x, 2, 16, BlockFormat::nvfp4, r);
}

TEST(QuantizeJudge, TheReferencePassesAndZerosOfEitherSignAreEqual) {
  const Problem p = boundary_problem(Recipe::te);
  const QuantResult r = quantize_reference(p);
  EXPECT_TRUE(judge_quantize(p, r, r.q, r.sfq, 0).pass());
  EXPECT_EQ(code_at(r.q, 19), 0x8);  // -0 keeps its sign
  std::vector<uint8_t> q = r.q;
  set_code(q, 19, 0x0);  // -0 written +0
  set_code(q, 22, 0x8);  // +0 written -0
  EXPECT_TRUE(judge_quantize(p, r, q, r.sfq, 0).pass());
  set_code(q, 20, 0xA);  // 1 written -1
  const QuantJudgement j = judge_quantize(p, r, q, r.sfq, 0);
  EXPECT_EQ(j.wrong_codes, 1);
  EXPECT_EQ(j.i, 1);
  EXPECT_EQ(j.x, 4);
  EXPECT_EQ(j.expected_code, 0x2);
  EXPECT_EQ(j.actual_code, 0xA);
  std::vector<uint8_t> sfq = r.sfq;
  sfq[1] ^= 1;
  EXPECT_EQ(judge_quantize(p, r, r.q, sfq, 0).wrong_scales, 1);
}

TEST(QuantizeJudge, ANanElementMayTakeAnyCodeAndTheRestOfItsBlockIsJudged) {
  std::vector<float> x = {std::nanf(""), 1, -2, 3, 0.5f, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const Problem p = fp32_problem(x, 1, 16, BlockFormat::nvfp4, Recipe::ref);
  const QuantResult r = quantize_reference(p);
  for (uint8_t c = 0; c < 16; ++c) {
    std::vector<uint8_t> q = r.q;
    set_code(q, 0, c);
    EXPECT_TRUE(judge_quantize(p, r, q, r.sfq, 0).pass()) << int(c);
  }
  std::vector<uint8_t> q = r.q;
  set_code(q, 1, static_cast<uint8_t>(code_at(q, 1) + 1));
  EXPECT_FALSE(judge_quantize(p, r, q, r.sfq, 0).pass());
}

// Codes made with os' = os * factor, one product each (what a kernel with that os writes).
std::vector<uint8_t> codes_with_os_factor(const Problem& p, const QuantResult& r, double factor) {
  std::vector<uint8_t> q = r.q;
  for (int64_t e = 0; e < p.m * p.k; ++e) {
    const float os = static_cast<float>(r.os[static_cast<size_t>(e / 16)] * factor);
    set_code(q, e, e2m1_independent(quantize_input(p, e) * os));
  }
  return q;
}

TEST(QuantizeJudge, FastWindowAcceptsOneUlpReciprocalsAndRejects2ToTheMinus18) {
  const Problem fast = boundary_problem(Recipe::fast), ref = boundary_problem(Recipe::ref);
  const QuantResult r = quantize_reference(fast);
  ASSERT_EQ(r.os[1], 1.0f);
  ASSERT_EQ(code_at(r.q, 17), 0x4);  // the tie 2.5 goes to 2
  // The 1-ulp reciprocals move 2.5 to 3: inside fast's window, not ref's.
  const QuantResult approx = quantize_reference(fast, QuantVariant::approx_reciprocal);
  ASSERT_EQ(code_at(approx.q, 17), 0x5);
  EXPECT_TRUE(judge_quantize(fast, r, approx.q, r.sfq, 0).pass());
  const QuantJudgement j = judge_quantize(ref, quantize_reference(ref), approx.q, r.sfq, 0);
  EXPECT_FALSE(j.pass());
  EXPECT_NE(quantize_failure_text(ref, j, approx.q, r.sfq, 0).find("[approx_reciprocal]"), std::string::npos);
  // os * (1 + 2^-21) is inside the window; os * (1 - 2^-18) moves 2.5 * (1 + 2^-19) below 2.5.
  EXPECT_TRUE(judge_quantize(fast, r, codes_with_os_factor(fast, r, 1 + 0x1p-21), r.sfq, 0).pass());
  const std::vector<uint8_t> far = codes_with_os_factor(fast, r, 1 - 0x1p-18);
  ASSERT_EQ(code_at(far, 18), 0x4);
  const QuantJudgement jf = judge_quantize(fast, r, far, r.sfq, 0);
  EXPECT_EQ(jf.wrong_codes, 1);
  EXPECT_EQ(jf.x, 2);
}

TEST(QuantizeJudge, PermutedPaddingMustBeZeroOrKept) {
  Problem p = boundary_problem(Recipe::te);
  p.sf_layout = SfLayout::permuted;
  const QuantResult r = quantize_reference(p);
  std::vector<uint8_t> sfq = sf_to_permuted(r.sfq.data(), p.m, p.qkb(), p.l, 0x00);
  EXPECT_TRUE(judge_quantize(p, r, r.q, sfq, 0x00).pass());
  EXPECT_EQ(judge_quantize(p, r, r.q, sfq, 0xAB).wrong_padding, 510);  // 512 cells, 2 used
  sfq = sf_to_permuted(r.sfq.data(), p.m, p.qkb(), p.l, 0xAB);
  EXPECT_TRUE(judge_quantize(p, r, r.q, sfq, 0xAB).pass());  // NVFP4_FLAG_SF_PADDING_KEPT
  const QuantJudgement j = judge_quantize(p, r, r.q, sfq, 0x00);
  EXPECT_EQ(j.wrong_padding, 510);
  EXPECT_NE(quantize_failure_text(p, j, r.q, sfq, 0x00).find("510 padding cells of the permuted SFQ not 0x00"),
            std::string::npos);
}

// A tensor rich in the points each variant moves: E4M3 midpoints as block maxima under gs = 6
// (association), integer-valued blocks (E2M1 ties, the reciprocals), random magnitudes (scale
// rounding and os from the unrounded scale), with per-row global scales.
Problem rich_problem(Recipe r, BlockFormat f) {
  std::mt19937_64 rng(31);
  const int64_t k = 64;
  std::vector<float> x;
  // Block maxima that the two associations round apart under gs = 6 (pts = RN(1/6)), found by
  // search in exact arithmetic: E4M3 midpoints 25/16 * 2^j for te/ref, the last row's for torchao.
  const float mids[] = {0.0244140625f, 0.048828125f, 0.09765625f, 0.1953125f, 0.390625f, 0.78125f,
                        1.5625f,       3.125f,        6.25f,        12.5f,      25,        50,
                        0.08984375f,   0.12109375f,   0.1796875f};
  for (int row = 0; row < 5; ++row) {  // maxima at E4M3 midpoints, row amax 448 (gs = 6)
    std::vector<float> v(k, 0.0f);
    v[0] = 448;
    for (int b = 1; b < 4; ++b) v[static_cast<size_t>(16 * b)] = mids[row * 3 + b - 1], v[static_cast<size_t>(16 * b + 1)] = mids[row * 3 + b - 1] / 3;
    x.insert(x.end(), v.begin(), v.end());
  }
  for (int row = 0; row < 6; ++row)  // integers
    for (int64_t j = 0; j < k; ++j) x.push_back(static_cast<float>(static_cast<int>(rng() % 17) - 8));
  std::normal_distribution<float> normal;
  for (int row = 0; row < 6; ++row)
    for (int64_t j = 0; j < k; ++j) x.push_back(bf16_value(bf16_toward_zero(normal(rng) * std::ldexp(1.0f, row * 3 - 8))));
  Problem p = fp32_problem(x, static_cast<int64_t>(x.size()) / k, k, f, r);
  p.row_global_scale = f == BlockFormat::nvfp4;
  return p;
}

// tiles_2d: 16 x 16 tiles (17 rows: a whole tile and a one-row one) with one global scale; the
// failure text tries a variant on the first wrong block's tile before the whole tensor.
void expect_variant_named(Recipe r, BlockFormat f, QuantVariant v, bool tiles_2d = false) {
  SCOPED_TRACE(std::string(to_string(r)) + " " + to_string(v) + (tiles_2d ? " 2d" : ""));
  Problem p = rich_problem(r, f);
  if (tiles_2d) p.quant_2d = true, p.row_global_scale = false;
  const QuantResult exact = quantize_reference(p), wrong = quantize_reference(p, v);
  ASSERT_TRUE(wrong.q != exact.q || wrong.sfq != exact.sfq) << "the variant changes nothing here";
  const QuantJudgement j = judge_quantize(p, exact, wrong.q, wrong.sfq, 0);
  ASSERT_FALSE(j.pass());
  const std::string text = quantize_failure_text(p, j, wrong.q, wrong.sfq, 0);
  EXPECT_NE(text.find(std::string("[") + to_string(v) + "]"), std::string::npos) << text;
  EXPECT_NE(text.find("first wrong block: batch 0, row " + std::to_string(j.i)), std::string::npos) << text;
}

TEST(QuantizeFailureText, NamesEachVariant) {
  for (const Recipe r : {Recipe::te, Recipe::ref, Recipe::torchao}) {
    for (const QuantVariant v : {QuantVariant::other_association, QuantVariant::approx_reciprocal, QuantVariant::scale_toward_zero,
                                 QuantVariant::os_from_unrounded, QuantVariant::decode_as_encode})
      for (const bool tiles_2d : {false, true}) expect_variant_named(r, BlockFormat::nvfp4, v, tiles_2d);
  }
  for (const QuantVariant v : {QuantVariant::scale_toward_zero, QuantVariant::os_from_unrounded}) {
    expect_variant_named(Recipe::mx_rceil, BlockFormat::mxfp4, v);
    expect_variant_named(Recipe::mx_even, BlockFormat::mxfp8_e4m3, v);
  }
  // fast accepts its own reciprocals: that variant is no failure there.
  const Problem p = rich_problem(Recipe::fast, BlockFormat::nvfp4);
  const QuantResult approx = quantize_reference(p, QuantVariant::approx_reciprocal);
  EXPECT_TRUE(judge_quantize(p, quantize_reference(p), approx.q, approx.sfq, 0).pass());
}

TEST(QuantizeFailureText, SaysTheBlockScaleAndCodesWithValues) {
  const Problem p = boundary_problem(Recipe::te);
  const QuantResult r = quantize_reference(p);
  std::vector<uint8_t> q = r.q;
  set_code(q, 21, 0x5);  // -3 written +3
  const QuantJudgement j = judge_quantize(p, r, q, r.sfq, 0);
  const std::string text = quantize_failure_text(p, j, q, r.sfq, 0);
  EXPECT_NE(text.find("1 wrong codes, 0 wrong scale bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("batch 0, row 1, block 0 (elements 0..15): scale expected 0x38 (1), got 0x38 (1)"), std::string::npos) << text;
  EXPECT_NE(text.find("element 5 (x = -3): code expected 0xD (-3), got 0x5 (3)"), std::string::npos) << text;
  EXPECT_EQ(text.find("The kernel's bytes are what"), std::string::npos) << text;
}


TEST(QuantizeJudge, StochasticCodesMayBeEitherGridNeighbour) {
  std::vector<float> x(32, 0.0f);
  x[0] = 2688;
  x[16] = 6, x[17] = 2.2f, x[18] = -0.3f, x[19] = 3;
  Problem p = fp32_problem(x, 2, 16, BlockFormat::nvfp4, Recipe::te);
  p.stochastic_seed = 7;
  const QuantResult r = quantize_reference(p);
  ASSERT_EQ(r.os[1], 1.0f);
  const auto judged = [&](int64_t elem, uint8_t code) {
    std::vector<uint8_t> q = r.q;
    set_code(q, elem, code);
    return judge_quantize(p, r, q, r.sfq, 0).pass();
  };
  EXPECT_TRUE(judged(17, 0x4) && judged(17, 0x5));    // 2.2: 2 or 3
  EXPECT_FALSE(judged(17, 0x3) || judged(17, 0x6));   // not 1.5, not 4
  EXPECT_TRUE(judged(18, 0x8) && judged(18, 0x9) && judged(18, 0x0));  // -0.3: -0 (either zero) or -0.5
  EXPECT_FALSE(judged(18, 0x1));                      // not +0.5
  EXPECT_TRUE(judged(19, 0x5));                       // 3 is on the grid: only 3
  EXPECT_FALSE(judged(19, 0x4) || judged(19, 0x6));
  p.stochastic_seed.reset();
  std::vector<uint8_t> q = r.q;
  set_code(q, 17, 0x5);
  EXPECT_FALSE(judge_quantize(p, r, q, r.sfq, 0).pass());  // round to nearest: 2 only
}

}  // namespace
}  // namespace nvfp4

namespace nvfp4 {
namespace {

// A stochastic problem's reference codes (rounded to nearest) lie inside the allowed grid
// neighbours of every element: judge_quantize_each's masks work each element's codes out with no
// shortcut, so the reference's own output passing there is what lets judge_quantize pass a code
// equal to the reference's without working them out. Inputs of every kind of float: random
// bits (NaN, Inf, subnormals and signed zeros among them) and random magnitudes.
TEST(QuantizeJudge, StochasticReferenceCodesAreAllowedNeighbours) {
  const uint64_t seed = 20261205;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (const Recipe r : {Recipe::te, Recipe::fast, Recipe::ref, Recipe::torchao})
    for (int t = 0; t < 20; ++t) {
      SCOPED_TRACE(std::string(to_string(r)) + " problem " + std::to_string(t));
      const int64_t m = 8, k = 64;
      std::vector<float> x(static_cast<size_t>(m * k));
      for (float& v : x) {
        if (t % 2) {
          const uint32_t bits = static_cast<uint32_t>(rng());
          std::memcpy(&v, &bits, sizeof v);
        } else {
          v = std::ldexp(static_cast<float>(static_cast<int64_t>(rng() % 20001) - 10000), static_cast<int>(rng() % 40) - 30);
        }
      }
      Problem p = fp32_problem(x, m, k, BlockFormat::nvfp4, r);
      p.stochastic_seed = rng();
      const QuantResult ref = quantize_reference(p);
      const std::vector<QuantOutput> twice{{&ref.q, &ref.sfq}, {&ref.q, &ref.sfq}};
      for (const QuantJudgement& j : judge_quantize_each(p, ref, twice, 0))
        EXPECT_TRUE(j.pass()) << "element " << j.x << " of block " << j.s << ", row " << j.i;
      EXPECT_TRUE(judge_quantize(p, ref, ref.q, ref.sfq, 0).pass());
    }
}

// judge_quantize_each gives each output the judgement judge_quantize gives it, every field: on
// stochastic and round-to-nearest problems of every NVFP4 recipe (fast's window included) and
// MXFP4's, for
// outputs whose codes move to either grid neighbour, elsewhere, and whose scale bytes change.
TEST(QuantizeJudge, EachOutputOfOneProblemJudgedAsAlone) {
  std::mt19937_64 rng(20261203);
  int failing = 0, passing = 0;
  const std::pair<Recipe, BlockFormat> kinds[] = {{Recipe::te, BlockFormat::nvfp4},
                                                  {Recipe::fast, BlockFormat::nvfp4},
                                                  {Recipe::ref, BlockFormat::nvfp4},
                                                  {Recipe::torchao, BlockFormat::nvfp4},
                                                  {Recipe::mx_rceil, BlockFormat::mxfp4}};
  for (const auto& [r, f] : kinds)
    for (const bool stochastic : {false, true}) {
      if (stochastic && f != BlockFormat::nvfp4) continue;
      SCOPED_TRACE(std::string(to_string(r)) + (stochastic ? " sr" : " rn"));
      Problem p = rich_problem(r, f);
      if (stochastic) p.stochastic_seed = 11;
      const QuantResult ref = quantize_reference(p);
      std::vector<std::vector<uint8_t>> qs, sfqs;
      for (int o = 0; o < 24; ++o) {
        std::vector<uint8_t> q = ref.q, sfq = ref.sfq;
        const int changes = o % 4 == 0 ? 0 : static_cast<int>(rng() % 6);
        for (int c = 0; c < changes; ++c) {
          const int64_t elem = static_cast<int64_t>(rng() % static_cast<uint64_t>(p.m * p.k));
          const uint8_t code = code_at(q, elem);
          // A neighbour on the grid (same sign) most of the time, any code otherwise.
          const uint8_t moved = rng() % 4 ? static_cast<uint8_t>((code & 8) | std::min(7, std::max(0, (code & 7) + (rng() % 2 ? 1 : -1))))
                                         : static_cast<uint8_t>(rng() % 16);
          set_code(q, elem, moved);
        }
        if (o % 7 == 3) sfq[rng() % sfq.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        qs.push_back(std::move(q));
        sfqs.push_back(std::move(sfq));
      }
      std::vector<QuantOutput> outputs;
      for (size_t o = 0; o < qs.size(); ++o) outputs.push_back({&qs[o], &sfqs[o]});
      const std::vector<QuantJudgement> each = judge_quantize_each(p, ref, outputs, 0);
      ASSERT_EQ(each.size(), qs.size());
      for (size_t o = 0; o < qs.size(); ++o) {
        const QuantJudgement alone = judge_quantize(p, ref, qs[o], sfqs[o], 0), &e = each[o];
        SCOPED_TRACE(o);
        EXPECT_EQ(e.wrong_codes, alone.wrong_codes);
        EXPECT_EQ(e.wrong_scales, alone.wrong_scales);
        EXPECT_EQ(e.wrong_padding, alone.wrong_padding);
        EXPECT_EQ(std::make_tuple(e.b, e.i, e.s, e.x), std::make_tuple(alone.b, alone.i, alone.s, alone.x));
        EXPECT_EQ(std::make_tuple(e.expected_scale, e.actual_scale, e.expected_code, e.actual_code),
                  std::make_tuple(alone.expected_scale, alone.actual_scale, alone.expected_code, alone.actual_code));
        (alone.pass() ? passing : failing) += 1;
      }
    }
  // Both kinds of output were judged (the moves to a grid neighbour pass under stochastic rounding).
  EXPECT_GT(failing, 40);
  EXPECT_GT(passing, 40);
}

}  // namespace
}  // namespace nvfp4
