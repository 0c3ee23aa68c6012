// Block-scaled output (out_type nvfp4): a hand case worked out on paper, rule 8 against an honest
// FP32 kernel written here (any accumulation order, then the recipe on its FP32 values), and the
// known bugs of fused quantizing epilogues, each of which rule 8 must catch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference/block_scaled_output.h"
#include "reference/case_file.h"
#include "reference/formats.h"
#include "reference/scale_layout.h"
#include "reference/tests/random_problem.h"

namespace nvfp4 {
namespace {

std::string hex(const std::vector<uint8_t>& v) {
  std::string s;
  char buf[4];
  for (const uint8_t b : v) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    s += buf;
  }
  return s;
}

// m = 1, n = 16, k = 16: A all 1.0, B row j one value v_j at element 0, every scale 1.0, so
// C[0][j] = v_j exactly: 6, 3, -1.5, 0.5 and twelve zeros.
Problem hand_case(Recipe recipe, float gs) {
  Problem p;
  p.op = Op::gemm;
  p.m = 1, p.n = 16, p.k = 16, p.l = 1;
  p.sf_layout = SfLayout::linear;
  p.out_type = OutType::nvfp4;
  p.out_recipe = recipe;
  p.out_global_scale = {gs};
  p.a.assign(8, 0x22);
  p.b.assign(16 * 8, 0x00);
  const uint8_t codes[4] = {0x7, 0x5, 0xB, 0x1};  // 6, 3, -1.5, 0.5
  for (int j = 0; j < 4; ++j) p.b[static_cast<size_t>(j * 8)] = codes[j];
  p.sfa.assign(1, 0x38);
  p.sfb.assign(16, 0x38);
  return p;
}

TEST(BlockScaledOutput, HandCaseTe) {
  // te, gs = 1: RN(gs * c6) = RN(1/6); RN(6 * RN(1/6)) = 1 (1 + 2^-26 rounds down), E4M3 1.0 is
  // 0x38; os = RN(1 / RN(1 * RN(1/1))) = 1, so the codes are e2m1 of C itself:
  // 6 -> 0x7, 3 -> 0x5, -1.5 -> 0xB, 0.5 -> 0x1; Q byte 0 = 0x57, byte 1 = 0x1B.
  Problem p = hand_case(Recipe::te, 1.0f);
  ASSERT_EQ(problem_error(p), "");
  const ExactResult ref = exact_gemm(p);
  set_block_scaled_expect(p, ref);
  EXPECT_EQ(hex(*p.expect_q), "571b000000000000");
  EXPECT_EQ(hex(*p.expect_sfq), "38");
}

TEST(BlockScaledOutput, HandCaseGlobalScale) {
  // te, gs = 448 (amax 6 * 448 = 2688): RN(6 * RN(448 * RN(1/6))) is 448 or just above, which
  // E4M3 saturates to 448 = 0x7E; os = RN(1 / RN(448 * RN(1/448))) is within an ulp of 1, which
  // leaves every code of C as it is at os = 1.
  Problem p = hand_case(Recipe::te, 448.0f);
  const ExactResult ref = exact_gemm(p);
  set_block_scaled_expect(p, ref);
  EXPECT_EQ(hex(*p.expect_q), "571b000000000000");
  EXPECT_EQ(hex(*p.expect_sfq), "7e");
}

// ---- an honest FP32 kernel ------------------------------------------------------------------

double dequant(const std::vector<uint8_t>& packed, const std::vector<uint8_t>& sf, int64_t row, int64_t k, int64_t x) {
  const int code = e2m1_twice(e2m1_nibble(packed.data() + row * (k / 2), x));
  const ScaleValue s = e4m3_decode(sf[static_cast<size_t>(row * ((k + 15) / 16) + x / 16)], ScaleSemantics::ue4m3);
  return code * 0.5 * s.sig * std::ldexp(1.0, s.exp);
}

// C[b][i][j] as an FP32 kernel adds it, from the last product to the first (an order the
// reference does not use). Every product is exact in FP32.
float fp32_dot(const std::vector<uint8_t>& a, const std::vector<uint8_t>& sfa, int64_t arow, const std::vector<uint8_t>& b,
               const std::vector<uint8_t>& sfb, int64_t brow, int64_t k, float alpha) {
  float acc = 0;
  for (int64_t x = k - 1; x >= 0; --x) {
    const float pa = static_cast<float>(dequant(a, sfa, arow, k, x)), pb = static_cast<float>(dequant(b, sfb, brow, k, x));
    acc += pa * pb;
  }
  return acc * alpha;
}

std::vector<float> kernel_values(const Problem& p, const OutUnit& u, size_t group) {
  std::vector<float> v;
  for (int64_t b = 0; b < u.l; ++b)
    for (int64_t i = 0; i < u.m; ++i)
      for (int64_t j = 0; j < u.n; ++j) {
        if (p.op == Op::grouped_gemm) {
          const Group& g = p.groups[group];
          v.push_back(fp32_dot(g.a, g.sfa, i, g.b, g.sfb, j, g.k, g.alpha));
        } else if (p.op == Op::dual_gemm) {
          const float gv = fp32_dot(p.a, p.sfa, b * p.m + i, p.b, p.sfb, b * p.n + j, p.k, p.alpha);
          const float uv = fp32_dot(p.a, p.sfa, b * p.m + i, p.b2, p.sfb2, b * p.n + j, p.k, p.alpha2);
          const float e = std::exp(-gv);
          const float d = 1.0f + e;
          const float s = gv / d;
          v.push_back(s * uv);
        } else {
          v.push_back(fp32_dot(p.a, p.sfa, b * p.m + i, p.b, p.sfb, b * p.n + j, p.k, p.alpha));
        }
      }
  return v;
}

enum class Mutation { none, scale_toward_zero, padding_not_written, group0_global_scale };

struct KernelOut {
  std::vector<uint8_t> q, sfq;
};

// The unit's Q and SFQ (in p.sf_layout, padding 0x00) as the kernel writes them: the recipe on its
// FP32 values, with the mutation.
KernelOut run_kernel(const Problem& p, const ExactResult& ref, const OutUnit& u, size_t group, Mutation mutation) {
  if (u.m == 0) return {};  // an empty group writes nothing
  Problem qp = unit_quantize_problem(p, ref, u);
  const std::vector<float> v = kernel_values(p, u, group);
  std::memcpy(qp.x.data(), v.data(), v.size() * 4);
  const float gs = mutation == Mutation::group0_global_scale ? out_units(p)[0].global_scale : u.global_scale;
  const QuantVariant variant = mutation == Mutation::scale_toward_zero ? QuantVariant::scale_toward_zero : QuantVariant::exact;
  const QuantResult r = quantize_reference(qp, std::vector<float>{gs}, variant);
  KernelOut out{r.q, r.sfq};
  if (p.sf_layout == SfLayout::permuted)
    out.sfq = sf_to_permuted(r.sfq.data(), u.m, u.nb(), u.l, mutation == Mutation::padding_not_written ? 0x7F : 0x00);
  return out;
}

// Random problems of every op with block-scaled output: n even but not always a multiple of 16,
// narrow scales (mostly the exact regime) and wide ones (the rounding regime), distinct global
// scales per group, recipes te, ref, fast and torchao.
Problem random_case(std::mt19937_64& rng, int which) {
  const Recipe recipes[] = {Recipe::te, Recipe::ref, Recipe::fast, Recipe::torchao};
  const int64_t n = 2 * (1 + static_cast<int64_t>(rng() % 20)), k = 16 * (1 + static_cast<int64_t>(rng() % 4));
  const auto scale = [&rng] { return std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 16) - 12); };
  Problem p;
  if (which % 3 == 2) {
    p.op = Op::grouped_gemm;
    for (int64_t m : {int64_t(3), int64_t(0), int64_t(1 + rng() % 140)}) {
      Group g;
      g.m = m, g.n = n, g.k = k;
      g.alpha = rng() % 2 ? 1.0f : 0.75f;
      const bool narrow = rng() % 2;
      g.a = random_bytes(rng, g.a_bytes(BlockFormat::nvfp4));
      g.b = random_bytes(rng, g.b_bytes(BlockFormat::nvfp4));
      g.sfa = random_scales(rng, g.sfa_bytes(BlockFormat::nvfp4), narrow);
      g.sfb = random_scales(rng, g.sfb_bytes(BlockFormat::nvfp4), narrow);
      p.groups.push_back(g);
      p.out_global_scale.push_back(scale());
    }
  } else {
    p = random_gemm(rng, OutType::nvfp4, 1 + static_cast<int64_t>(rng() % 140), n, k, rng() % 2 ? 1.0f : 0.375f);
    p.l = 1;
    if (which % 3 == 1) {
      p.op = Op::dual_gemm;
      p.b2 = random_bytes(rng, p.b_bytes());
      p.sfb2 = random_scales(rng, p.sfb_bytes(), true);
      p.alpha = 1.0f / 64;
      p.alpha2 = 1.0f / 64;
    }
    p.out_global_scale = {scale()};
  }
  p.out_type = OutType::nvfp4;
  p.out_recipe = recipes[rng() % 4];
  p.sf_layout = rng() % 2 ? SfLayout::permuted : SfLayout::linear;
  return p;
}

struct Tally {
  int cases = 0, failing = 0, interval_blocks = 0;
  std::string first_failure;
};

Tally run_cases(int count, Mutation mutation, uint64_t seed, bool grouped_only = false) {
  std::mt19937_64 rng(seed);
  Tally t;
  for (int c = 0; c < count; ++c) {
    const Problem p = random_case(rng, grouped_only ? 2 : c);
    EXPECT_EQ(problem_error(p), "") << "case " << c;
    const ExactResult ref = exact_gemm(p);
    const std::vector<OutUnit> units = out_units(p);
    bool failed = false;
    for (size_t g = 0; g < units.size(); ++g) {
      const KernelOut k = run_kernel(p, ref, units[g], g, mutation);
      const BlockOutJudgement j = judge_block_scaled(p, ref, Policy{}, units[g], k.q, k.sfq, 0x00);
      t.interval_blocks += static_cast<int>(j.blocks - j.exact_blocks);
      if (!j.pass() && !failed) {
        failed = true;
        if (t.first_failure.empty()) t.first_failure = block_scaled_failure_text(p, ref, units[g], j, k.q, k.sfq, 0x00);
      }
    }
    ++t.cases;
    t.failing += failed;
  }
  return t;
}

TEST(BlockScaledOutput, HonestFp32KernelPasses) {
  const Tally t = run_cases(150, Mutation::none, 11);
  EXPECT_EQ(t.failing, 0) << t.first_failure;
  EXPECT_GT(t.interval_blocks, 100) << "the rounding regime is hardly reached";
}

TEST(BlockScaledOutput, ScaleRoundedTowardZeroFails) {
  const Tally t = run_cases(60, Mutation::scale_toward_zero, 12);
  EXPECT_GT(t.failing, 30);
  EXPECT_NE(t.first_failure.find("scale"), std::string::npos) << t.first_failure;
}

TEST(BlockScaledOutput, PaddingNotWrittenFails) {
  const Tally t = run_cases(60, Mutation::padding_not_written, 13);
  EXPECT_GT(t.failing, 20);
  EXPECT_NE(t.first_failure.find("padding"), std::string::npos) << t.first_failure;
}

TEST(BlockScaledOutput, GroupZeroGlobalScaleFails) {
  const Tally t = run_cases(30, Mutation::group0_global_scale, 14, true);
  EXPECT_GT(t.failing, 25);
  EXPECT_NE(t.first_failure.find("of group 2"), std::string::npos) << t.first_failure;
}

TEST(BlockScaledOutput, WrongCodeOutsideTheExactRegimeFails) {
  std::mt19937_64 rng(15);
  int checked = 0;
  for (int c = 0; c < 200 && checked < 10; ++c) {
    const Problem p = random_case(rng, 0);
    const ExactResult ref = exact_gemm(p);
    const OutUnit u = out_units(p)[0];
    KernelOut k = run_kernel(p, ref, u, 0, Mutation::none);
    // The first element outside the exact regime whose code is 2 or more in size: its sign flipped.
    for (int64_t e = 0; e < u.m * u.n; ++e) {
      const OutputInterval iv = output_interval(p, ref, e, Policy{});
      const uint8_t code = static_cast<uint8_t>(e % 2 ? k.q[static_cast<size_t>(e / 2)] >> 4 : k.q[static_cast<size_t>(e / 2)] & 0xF);
      if (iv.exact || iv.nan || (code & 7) < 4) continue;
      k.q[static_cast<size_t>(e / 2)] ^= static_cast<uint8_t>(e % 2 ? 0x80 : 0x08);
      const BlockOutJudgement j = judge_block_scaled(p, ref, Policy{}, u, k.q, k.sfq, 0x00);
      EXPECT_EQ(j.interval_wrong_codes, 1) << block_scaled_failure_text(p, ref, u, j, k.q, k.sfq, 0x00);
      const std::string text = block_scaled_failure_text(p, ref, u, j, k.q, k.sfq, 0x00);
      EXPECT_NE(text.find("column " + std::to_string(e % u.n)), std::string::npos) << text;
      ++checked;
      break;
    }
  }
  EXPECT_EQ(checked, 10);
}

TEST(BlockScaledOutput, Validation) {
  Problem p = hand_case(Recipe::te, 1.0f);
  p.n = 15;
  p.b.resize(15 * 8);
  p.sfb.resize(15);
  EXPECT_NE(problem_error(p).find("must be even for out_type nvfp4"), std::string::npos) << problem_error(p);
  p = hand_case(Recipe::te, 1.0f);
  p.out_global_scale = {0.0f};
  EXPECT_NE(problem_error(p).find("finite and > 0"), std::string::npos);
  p = hand_case(Recipe::mx_rceil, 1.0f);
  EXPECT_NE(problem_error(p).find("out_recipe"), std::string::npos);
  p = hand_case(Recipe::te, 1.0f);
  p.out_type = OutType::fp16;
  EXPECT_NE(problem_error(p).find("only for out_type nvfp4"), std::string::npos);
  p = hand_case(Recipe::te, 1.0f);
  p.expect = std::vector<uint32_t>(16, 0);
  EXPECT_NE(problem_error(p).find("expect_q and expect_sfq"), std::string::npos);
}

// Each group of a grouped block-scaled problem, as the GEMM it is (the GPU reference computes a
// large grouped case so), is a valid problem whose output is that group's: its own global scale,
// and quantized alone it gives the bytes the grouped reference gives for the group.
TEST(BlockScaledOutput, EachGroupIsAValidBlockScaledGemmOfItsOwnScale) {
  std::mt19937_64 rng(20261203);
  for (int which = 2; which < 30; which += 3) {
    const Problem p = random_case(rng, which);
    ASSERT_EQ(p.op, Op::grouped_gemm);
    const ExactResult ref = exact_gemm(p);
    const std::vector<OutUnit> units = out_units(p);
    for (size_t g = 0; g < p.groups.size(); ++g) {
      if (p.groups[g].m == 0) continue;
      const Problem one = group_problem(p, g);
      ASSERT_EQ(problem_error(one), "") << "group " << g;
      EXPECT_EQ(one.out_global_scale, std::vector<float>{p.out_global_scale[g]});
      EXPECT_EQ(one.out_recipe, p.out_recipe);
      const QuantResult alone = block_scaled_reference(one, exact_gemm(one), out_units(one).front());
      const QuantResult within = block_scaled_reference(p, ref, units[g]);
      EXPECT_EQ(alone.q, within.q) << "group " << g;
      EXPECT_EQ(alone.sfq, within.sfq) << "group " << g;
    }
  }
}

TEST(BlockScaledOutput, CaseFileRoundTrip) {
  Problem p = hand_case(Recipe::torchao, 0.25f);
  set_block_scaled_expect(p, exact_gemm(p));
  const std::string text = write_case(p);
  EXPECT_NE(text.find("out_recipe = torchao"), std::string::npos) << text;
  const Problem back = parse_case(text, "round-trip");
  EXPECT_EQ(back.out_type, OutType::nvfp4);
  EXPECT_EQ(back.out_recipe, Recipe::torchao);
  EXPECT_EQ(back.out_global_scale, p.out_global_scale);
  EXPECT_EQ(back.expect_q, p.expect_q);
  EXPECT_EQ(back.expect_sfq, p.expect_sfq);
  EXPECT_EQ(write_case(back), text);
  EXPECT_EQ(compare_expect(back, exact_gemm(back)).differing, 0);
  Problem wrong = back;
  (*wrong.expect_sfq)[0] ^= 1;
  const ExpectComparison cmp = compare_expect(wrong, exact_gemm(wrong));
  EXPECT_EQ(cmp.differing, 1);
  EXPECT_EQ(cmp.first, std::vector<int64_t>{8});  // after Q's 8 bytes
  Problem recorded = hand_case(Recipe::torchao, 0.25f);
  set_expect(recorded, exact_gemm(recorded));
  EXPECT_EQ(recorded.expect_q, p.expect_q);
  EXPECT_FALSE(recorded.expect.has_value());
  EXPECT_THROW(parse_case(text + "expect = 0000\n", "x"), CaseError);
  EXPECT_THROW(parse_case("op = gemm\nm = 1\nn = 2\nk = 16\nl = 1\nout_recipe = te\nseed = 1\n", "x"), CaseError);
}

}  // namespace
}  // namespace nvfp4
