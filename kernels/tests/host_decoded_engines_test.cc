// The host engines compute from rows decoded once per call (kernels/host/host_mx_gemm.h's
// gemm_decoded, kernels/host/host_gemm_nvfp4_out.h's gemm_out_decoded); their definitions decode
// each element again for every output element (mx::dot, quant::out_block_values). These tests
// hold the two to the same bits on thousands of drawn problems: random bytes (NaN and Inf
// elements and scales included), every format pair, every MX bug and quantize bug the mutants
// plant, batches, both scale layouts and tiles smaller than the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/host/host_gemm_nvfp4_out.h"
#include "kernels/host/host_mx_gemm.h"

namespace nvfp4::kern {
namespace {

using mx::MxBug;

// An element byte of format f: fully random (mode 0), or with its exponent field kept within a
// few binades (mode 1, so that blocks fit the exact fast path), or finite (mode 2).
uint8_t element_byte(std::mt19937_64& rng, uint32_t f, int mode) {
  uint8_t v = static_cast<uint8_t>(rng());
  if (mode == 0) return v;
  if (f == NVFP4_FORMAT_MXFP8_E5M2) {
    if (mode == 1) return static_cast<uint8_t>((v & 0x83u) | ((14u + rng() % 4) << 2));
    if ((v & 0x7Cu) == 0x7Cu) v ^= 0x04u;
  } else if (f == NVFP4_FORMAT_MXFP8_E4M3) {
    if (mode == 1) return static_cast<uint8_t>((v & 0x87u) | ((6u + rng() % 4) << 3));
    if ((v & 0x7Fu) == 0x7Fu) v ^= 1u;
  }
  return v;
}

// A scale byte: E8M0 near 2^0 with now and then 0x00, 0xFE and NaN; E4M3 random (NaN and
// zero included) or near 1.
uint8_t scale_byte(std::mt19937_64& rng, uint32_t f, int mode) {
  const uint64_t r = rng() % 64;
  if (f != NVFP4_FORMAT_NVFP4) {
    if (r == 0) return 0x00;
    if (r == 1) return 0xFE;
    if (r == 2 && mode == 0) return 0xFF;
    return static_cast<uint8_t>(mode == 0 ? rng() % 255 : 124 + rng() % 7);
  }
  if (mode == 0) return static_cast<uint8_t>(rng());
  return static_cast<uint8_t>(0x30 + rng() % 24);
}

std::string bits_text(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return std::to_string(v) + " (0x" + std::to_string(b) + ")";
}

bool same_bits(double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; }
// The same bits, or both NaN: which NaN an addition of two NaNs keeps depends on the order the
// compiler gives its operands (x86 keeps the first; inf * 0 makes a negative one), which differs
// between dot() and the decoded engine as they are inlined; the output may be any NaN (SPEC.md
// section 3, rule 1).
bool same_result(double x, double y) { return same_bits(x, y) || (std::isnan(x) && std::isnan(y)); }

struct MxCounts {
  int64_t exact_blocks = 0, fallback_blocks = 0, problems = 0;
};

// One drawn GEMM of the MX engine (dual: B2 too) through gemm_decoded against dot().
void check_mx_problem(std::mt19937_64& rng, MxCounts& counts) {
  const uint32_t fa = 1 + rng() % 4, fb = 1 + rng() % 4;
  const MxBug bug = static_cast<MxBug>(rng() % (static_cast<int>(MxBug::group0_scales) + 1));
  const bool nibbles = !mx::byte_elements(fa) || !mx::byte_elements(fb) || bug == MxBug::mxfp8_as_nibbles;
  const int64_t m = 1 + rng() % 9, n = 1 + rng() % 9, l = 1 + rng() % 3;
  int64_t k = 1 + rng() % (rng() % 4 == 0 ? 300 : 80);
  if (nibbles) k += k % 2;
  const uint32_t layout = rng() % 2 ? NVFP4_SF_LINEAR : NVFP4_SF_PERMUTED;
  const int mode = static_cast<int>(rng() % 3);
  const bool dual = rng() % 3 == 0;
  const int64_t kb16 = (k + 15) / 16;
  const auto fill = [&](std::vector<uint8_t>& data, std::vector<uint8_t>& sf, uint32_t f, int64_t rows) {
    data.resize(static_cast<size_t>(l * rows * k));
    for (uint8_t& v : data) v = element_byte(rng, f, mode);
    sf.resize(static_cast<size_t>(quant::sf_bytes(NVFP4_SF_PERMUTED, rows, kb16, l)));
    for (uint8_t& v : sf) v = scale_byte(rng, f, mode);
  };
  std::vector<uint8_t> a, sfa, b, sfb, b2, sfb2;
  fill(a, sfa, fa, m);
  fill(b, sfb, fb, n);
  fill(b2, sfb2, fb, n);
  const mx::MxOperand oa{fa, a.data(), sfa.data(), m}, ob{fb, b.data(), sfb.data(), n},
      ob2{fb, b2.data(), sfb2.data(), n};
  // Batches of A, B's data and B's scales, as run_mx (all one) and a packed grouped call (A's
  // batch 0, B's g, its scales g or 0) take them.
  const int64_t ba = rng() % l, bb = rng() % l, sbb = rng() % 2 ? bb : rng() % l;
  const int64_t rows = rng() % 2 ? 0 : 1 + rng() % 4;
  std::vector<char> seen(static_cast<size_t>(m * n), 0);
  const std::string what = "formats " + std::to_string(fa) + "/" + std::to_string(fb) + " bug " +
                           std::to_string(static_cast<int>(bug)) + " m n k l " + std::to_string(m) + " " +
                           std::to_string(n) + " " + std::to_string(k) + " " + std::to_string(l) + " layout " +
                           std::to_string(layout) + " mode " + std::to_string(mode);
  mx::gemm_decoded(
      oa, ob, dual ? &ob2 : nullptr, layout, m, n, k, ba, bb, sbb, bug, rng() % 2 == 0,
      [&](int64_t i, int64_t j, double g, double u) {
        seen[static_cast<size_t>(i * n + j)] = 1;
        const double want_g = mx::dot(oa, ob, layout, k, ba, bb, sbb, i, j, bug);
        EXPECT_TRUE(same_result(g, want_g)) << what << " at " << i << "," << j << ": " << bits_text(g) << " vs "
                                          << bits_text(want_g);
        if (dual) {
          const double want_u = mx::dot(oa, ob2, layout, k, ba, bb, sbb, i, j, bug);
          EXPECT_TRUE(same_result(u, want_u)) << what << " U at " << i << "," << j;
        }
      },
      rows);
  for (char s : seen) EXPECT_TRUE(s) << what << ": an output element was never stored";
  // How many blocks took the exact path (the tests below require both paths to be exercised).
  mx::DecodedRows da, db;
  mx::decode_rows(oa, layout, k, ba, ba, 0, m, bug, false, da);
  mx::decode_rows(ob, layout, k, bb, sbb, 0, n, bug, false, db);
  const int64_t block = mx::block_of(fa, bug);
  const int b_shift = __builtin_ctzll(static_cast<uint64_t>(mx::block_of(fb, bug)));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t s = 0; s < da.kb; ++s) {
        double sum;
        const bool exact = mx::exact_block_sum(da.row(i), da.row_facts(i), da.row_scales(i)[s], db.row(j),
                                               db.row_facts(j), db.row_scales(j), b_shift, s * block,
                                               std::min(k, (s + 1) * block), &sum);
        ++(exact ? counts.exact_blocks : counts.fallback_blocks);
      }
  ++counts.problems;
}

TEST(MxHostDecoded, SameBitsAsPerElementDecoding) {
  std::mt19937_64 rng(20261202);
  MxCounts counts;
  for (int t = 0; t < 3000 && !HasFailure(); ++t) check_mx_problem(rng, counts);
  EXPECT_EQ(counts.problems, 3000);
  // Both the exact sums and the in-order fallback ran on a good share of the blocks.
  EXPECT_GT(counts.exact_blocks, 10000);
  EXPECT_GT(counts.fallback_blocks, 10000);
  std::printf("MX engine: %lld problems, %lld blocks summed exactly, %lld in order\n",
              static_cast<long long>(counts.problems), static_cast<long long>(counts.exact_blocks),
              static_cast<long long>(counts.fallback_blocks));
}

// The exact path's bound is what makes it exact: an E5M2 block whose products span 2^-32 to
// 2^31.6 (beyond 53 bits: dot()'s double sum rounds) falls back to the ordered sum and gives
// dot()'s rounded result; the same block with products from 2^-32 to 2^5 is summed exactly.
TEST(MxHostDecoded, WideBlocksFallBackToTheOrderedSum) {
  const int64_t k = 32;
  std::vector<uint8_t> a(k, 0x00), b(k, 0x00), sfa(1, 127), sfb(1, 127);
  a[0] = 0x01, b[0] = 0x01;  // 2^-16 each: the product 2^-32
  a[1] = 0x7B, b[1] = 0x7B;  // 57344 each: the product about 2^31.6
  a[2] = 0x01, b[2] = 0x01;  // 2^-32 again
  a[3] = 0xFB, b[3] = 0x7B;  // -57344 * 57344 cancels the large product: the exact sum is 2^-31
  const mx::MxOperand oa{NVFP4_FORMAT_MXFP8_E5M2, a.data(), sfa.data(), 1}, ob{NVFP4_FORMAT_MXFP8_E5M2, b.data(), sfb.data(), 1};
  mx::DecodedRows da, db;
  mx::decode_rows(oa, NVFP4_SF_LINEAR, k, 0, 0, 0, 1, MxBug::none, false, da);
  mx::decode_rows(ob, NVFP4_SF_LINEAR, k, 0, 0, 0, 1, MxBug::none, false, db);
  double sum = 0;
  EXPECT_FALSE(mx::exact_block_sum(da.row(0), da.row_facts(0), 1.0, db.row(0), db.row_facts(0), db.row_scales(0), 5, 0,
                                   k, &sum));
  const double want = mx::dot(oa, ob, NVFP4_SF_LINEAR, k, 0, 0, 0, MxBug::none);
  EXPECT_EQ(want, 0.0);  // in dot()'s order both 2^-32 are rounded away next to 2^31.6
  EXPECT_TRUE(same_bits(mx::dot_decoded(da, 0, db, 0, k, 32, 5, MxBug::none), want));
  // 224 * 0.125 = 28 and its negation in place of the large products: 2^-32 .. 2^5.
  a[1] = 0x5B, b[1] = 0x30, a[3] = 0xDB, b[3] = 0x30;
  mx::decode_rows(oa, NVFP4_SF_LINEAR, k, 0, 0, 0, 1, MxBug::none, false, da);
  mx::decode_rows(ob, NVFP4_SF_LINEAR, k, 0, 0, 0, 1, MxBug::none, false, db);
  EXPECT_TRUE(mx::exact_block_sum(da.row(0), da.row_facts(0), 1.0, db.row(0), db.row_facts(0), db.row_scales(0), 5, 0,
                                  k, &sum));
  EXPECT_TRUE(same_bits(sum, mx::dot(oa, ob, NVFP4_SF_LINEAR, k, 0, 0, 0, MxBug::none)));
}

// The formats whose spans alone keep a block's sum exact: E2M1 (4 bits of span) and E4M3 (18)
// with each other and themselves when A's block lies inside B's; not E5M2 (32) beside E4M3 or
// E5M2, nor A's blocks of 32 against B's of 16 (two scales in one block). Such pairs need no
// exponent facts per chunk, and WideBlocksFallBackToTheOrderedSum's E5M2 pair still takes them.
TEST(MxHostDecoded, FormatsWhoseSpansFitSkipTheChunkFacts) {
  const auto fit = [](uint32_t fa, uint32_t fb, MxBug bug = MxBug::none) {
    return mx::formats_fit({fa, nullptr, nullptr, 1}, {fb, nullptr, nullptr, 1}, bug);
  };
  EXPECT_EQ(mx::element_span(mx::CodeTable(NVFP4_FORMAT_NVFP4, MxBug::none)), 4);
  EXPECT_EQ(mx::element_span(mx::CodeTable(NVFP4_FORMAT_MXFP8_E4M3, MxBug::none)), 18);
  EXPECT_EQ(mx::element_span(mx::CodeTable(NVFP4_FORMAT_MXFP8_E5M2, MxBug::none)), 32);
  EXPECT_TRUE(fit(NVFP4_FORMAT_NVFP4, NVFP4_FORMAT_NVFP4));
  EXPECT_TRUE(fit(NVFP4_FORMAT_MXFP4, NVFP4_FORMAT_MXFP8_E5M2));
  EXPECT_TRUE(fit(NVFP4_FORMAT_MXFP8_E4M3, NVFP4_FORMAT_MXFP8_E4M3));
  EXPECT_TRUE(fit(NVFP4_FORMAT_NVFP4, NVFP4_FORMAT_MXFP8_E4M3));    // A's 16 inside B's 32
  EXPECT_FALSE(fit(NVFP4_FORMAT_MXFP8_E4M3, NVFP4_FORMAT_NVFP4));   // B's 16 split A's 32
  EXPECT_FALSE(fit(NVFP4_FORMAT_MXFP8_E4M3, NVFP4_FORMAT_MXFP8_E5M2));
  EXPECT_FALSE(fit(NVFP4_FORMAT_MXFP8_E5M2, NVFP4_FORMAT_MXFP8_E5M2));
  EXPECT_FALSE(fit(NVFP4_FORMAT_MXFP8_E5M2, NVFP4_FORMAT_MXFP8_E4M3, MxBug::none));
  EXPECT_TRUE(fit(NVFP4_FORMAT_MXFP8_E5M2, NVFP4_FORMAT_MXFP8_E4M3, MxBug::mxfp8_as_nibbles));  // both E2M1 then
}

// The block-scaled output engine as its definition computes it: every block of every row from
// out_block_values (elements decoded per output element) into quantize_out_block.
void per_element_gemm_out(const quant::OutOperands& g, const quant::OutOperands* u, int64_t b, float alpha, float alpha2,
                          uint32_t recipe, float gs, uint8_t* q, uint8_t* sfq, quant::Bug bug) {
  const int64_t nb = (g.n + 15) / 16;
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t s = 0; s < nb; ++s) {
      float v[16];
      const int64_t count = quant::out_block_values(g, u, alpha, alpha2, b, i, s, v);
      quant::quantize_out_block(v, count, recipe, gs, g.layout, g.m, nb, b, i, s, q + (b * g.m + i) * (g.n / 2), sfq,
                                quant::ExactRcp{}, bug);
    }
}

TEST(BlockScaledHostDecoded, SameQAndSfqAsPerElementDecoding) {
  std::mt19937_64 rng(20261203);
  int64_t problems = 0, blocks = 0;
  for (int t = 0; t < 2000 && !HasFailure(); ++t) {
    const int64_t m = 1 + rng() % 12, n = 2 * (1 + rng() % 16), l = 1 + rng() % 3;
    const int64_t k = 2 * (1 + rng() % (rng() % 4 == 0 ? 100 : 40)), kb = (k + 15) / 16, nb = (n + 15) / 16;
    const uint32_t layout = rng() % 2 ? NVFP4_SF_LINEAR : NVFP4_SF_PERMUTED;
    const uint32_t recipe = 1 + rng() % 4;
    const bool dual = rng() % 2 == 0;
    const int mode = static_cast<int>(rng() % 2);
    const quant::Bug bug = rng() % 2 ? quant::Bug::none : static_cast<quant::Bug>(rng() % 17);
    const float alpha = std::ldexp(1.0f + static_cast<float>(rng() % 8) / 8, static_cast<int>(rng() % 9) - 4);
    const float gs = std::ldexp(1.0f + static_cast<float>(rng() % 64) / 64, static_cast<int>(rng() % 30) - 10);
    const auto fill = [&](int64_t rows, std::vector<uint8_t>& data, std::vector<uint8_t>& sf) {
      data.resize(static_cast<size_t>(l * rows * k / 2));
      for (uint8_t& v : data) v = static_cast<uint8_t>(rng());
      sf.resize(static_cast<size_t>(quant::sf_bytes(layout, rows, kb, l)));
      for (uint8_t& v : sf) v = scale_byte(rng, NVFP4_FORMAT_NVFP4, mode);
    };
    std::vector<uint8_t> a, sfa, b, sfb, b2, sfb2;
    fill(m, a, sfa);
    fill(n, b, sfb);
    fill(n, b2, sfb2);
    const quant::OutOperands g{a.data(), sfa.data(), b.data(), sfb.data(), m, n, k, layout};
    const quant::OutOperands u{a.data(), sfa.data(), b2.data(), sfb2.data(), m, n, k, layout};
    const size_t q_bytes = static_cast<size_t>(l * m * n / 2), sfq_bytes = static_cast<size_t>(quant::sf_bytes(layout, m, nb, l));
    std::vector<uint8_t> q_want(q_bytes, 0x5A), sfq_want(sfq_bytes, 0xA5), q_got = q_want, sfq_got = sfq_want;
    const int64_t rows = rng() % 2 ? 0 : 16 * (1 + static_cast<int64_t>(rng() % 2));
    const bool parallel = rng() % 2 == 0;
    for (int64_t bt = 0; bt < l; ++bt) {
      per_element_gemm_out(g, dual ? &u : nullptr, bt, alpha, 0.75f, recipe, gs, q_want.data(), sfq_want.data(), bug);
      quant::gemm_out_decoded(g, dual ? &u : nullptr, bt, alpha, 0.75f, recipe, gs, q_got.data(), sfq_got.data(),
                              parallel, bug, rows);
    }
    const std::string what = "m n k l " + std::to_string(m) + " " + std::to_string(n) + " " + std::to_string(k) + " " +
                             std::to_string(l) + " dual " + std::to_string(dual) + " recipe " + std::to_string(recipe);
    EXPECT_EQ(q_got, q_want) << what;
    EXPECT_EQ(sfq_got, sfq_want) << what;
    ++problems;
    blocks += l * m * nb;
  }
  EXPECT_EQ(problems, 2000);
  std::printf("block-scaled output engine: %lld problems, %lld output blocks\n", static_cast<long long>(problems),
              static_cast<long long>(blocks));
}

}  // namespace
}  // namespace nvfp4::kern
