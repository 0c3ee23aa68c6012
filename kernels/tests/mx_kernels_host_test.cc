// The MX kernels' own decoders (kernels/mx_block_decode.h) against the reference's
// (reference/mx_formats.h) for every byte, and the naive MX GEMM's arithmetic
// (kernels/mx_gemm_core.h, what the CUDA mx_gemm_naive and the MX mutants run on the device)
// run here on the host against the exact MX reference and SPEC's oracle: every format pair
// passes, and each MX mutant's bug fails the same cases. Needs no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/mx_gemm_core.h"
#include "kernels/output_words.h"
#include "kernels/tests/mx_grouped_dual_problems.h"
#include "kernels/tests/mx_problems.h"
#include "reference/mx_formats.h"

namespace nvfp4 {
namespace {

// An ElementValue as a double (NaN, +-Inf, or +-sig * 2^exp).
double value_of(const ElementValue& v) {
  if (v.nan) return std::nan("");
  if (v.inf) return v.negative ? -INFINITY : INFINITY;
  const double mag = std::ldexp(static_cast<double>(v.sig), v.exp);
  return v.negative ? -mag : mag;
}

void expect_same(double want, float got, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
  } else {
    EXPECT_EQ(static_cast<double>(got), want) << what;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << what;
  }
}

TEST(MxKernelDecode, EveryByteAgreesWithTheReference) {
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const uint8_t row[1] = {static_cast<uint8_t>(byte)};
    const std::string at = " byte 0x" + std::to_string(byte);
    expect_same(value_of(e4m3_element(row[0])), kern::format_element(NVFP4_FORMAT_MXFP8_E4M3, row, 0), "e4m3" + at);
    expect_same(value_of(e5m2_element(row[0])), kern::format_element(NVFP4_FORMAT_MXFP8_E5M2, row, 0), "e5m2" + at);
    expect_same(value_of(e2m1_element(byte & 0xFu)), kern::format_element(NVFP4_FORMAT_MXFP4, row, 0), "e2m1 lo" + at);
    expect_same(value_of(e2m1_element(byte >> 4)), kern::format_element(NVFP4_FORMAT_MXFP4, row, 1), "e2m1 hi" + at);
    const E8m0Value want = e8m0_decode(row[0]);
    const kern::ScaleParts got = kern::format_scale(NVFP4_FORMAT_MXFP4, byte);
    EXPECT_EQ(std::isnan(got.mant), want.nan) << "e8m0" << at;
    if (!want.nan) {
      EXPECT_EQ(got.mant, 1.0f) << "e8m0" << at;
      EXPECT_EQ(got.exp, want.exp) << "e8m0" << at;
    }
  }
}

// The naive MX GEMM's output words for t (scales in `layout`), computed here.
std::vector<uint32_t> run_core(const MxProblem& t, uint32_t layout, float alpha, kern::mx::MxBug bug) {
  const std::vector<uint8_t> sfa = scales_in_layout(t.a, layout), sfb = scales_in_layout(t.b, layout);
  nvfp4_problem p{};
  p.m = t.m, p.n = t.n, p.k = t.k, p.l = t.l;
  p.sf_layout = layout;
  const kern::mx::Operand a{t.a.data.data(), sfa.data(), static_cast<uint32_t>(t.a.format), t.m};
  const kern::mx::Operand b{t.b.data.data(), sfb.data(), static_cast<uint32_t>(t.b.format), t.n};
  const int64_t count = t.l * t.m * t.n;
  std::vector<uint32_t> words(static_cast<size_t>(count));
  std::vector<uint8_t> c(static_cast<size_t>(count) * 4);
  for (int64_t e = 0; e < count; ++e) {
    const int64_t j = e % t.n, i = (e / t.n) % t.m, bb = e / (t.n * t.m);
    kern::store_wide(c.data(), e, static_cast<uint32_t>(t.out_type), alpha, kern::mx::output_sum(p, a, b, bb, i, j, bug));
    words[e] = t.out_type == OutType::fp32 ? reinterpret_cast<const uint32_t*>(c.data())[e]
                                           : reinterpret_cast<const uint16_t*>(c.data())[e];
  }
  return words;
}

// Configurations (format pair, shape, output type, layout, alpha) with a failing element, up to
// the first when stop_at_first; the same shapes and data as cuda_kernels_test's MX cases.
int64_t core_failures(kern::mx::MxBug bug, bool stop_at_first, std::string* first) {
  std::mt19937_64 rng(0x3A7);
  struct Shape {
    Op op;
    int64_t m, n, k, l;
  };
  const Shape shapes[] = {{Op::gemv, 1, 1, 2, 1}, {Op::gemv, 129, 1, 80, 3}, {Op::gemm, 7, 5, 34, 2},
                          {Op::gemm, 33, 30, 520, 1}, {Op::gemm, 130, 17, 96, 2}};
  const Policy policy = Policy::for_flags(0);
  int64_t failing = 0;
  for (BlockFormat fa : kAllBlockFormats)
    for (BlockFormat fb : kAllBlockFormats)
      for (const Shape& s : shapes)
        for (bool extremes : {false, true}) {
          MxProblem t = random_mx_problem(rng, fa, fb, s.op, s.m, s.n, s.k, s.l, OutType::fp16, {extremes, extremes});
          const std::vector<MxElement> exact = exact_mx(t);
          for (OutType out : {OutType::fp16, OutType::bf16, OutType::fp32}) {
            if (extremes && out != OutType::fp16) continue;  // sums below FP32's normal range
            t.out_type = out;
            for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED})
              for (float alpha : {1.0f, 0.5f}) {
                const std::vector<uint32_t> got = run_core(t, layout, alpha, bug);
                for (size_t e = 0; e < got.size(); ++e) {
                  if (judge_mx_element(exact[e], alpha, got[e], policy, out).ok) continue;
                  if (failing++ == 0)
                    *first = std::string(to_string(fa)) + " x " + to_string(fb) + " m" + std::to_string(s.m) + " n" +
                             std::to_string(s.n) + " k" + std::to_string(s.k) + " " + to_string(out) + " layout " +
                             std::to_string(layout) + (extremes ? " extremes" : "") + " element " + std::to_string(e);
                  if (stop_at_first) return failing;
                  break;
                }
              }
          }
        }
  return failing;
}

TEST(MxKernelCore, EveryFormatPairPassesTheOracle) {
  std::string first;
  EXPECT_EQ(core_failures(kern::mx::MxBug::none, false, &first), 0) << "first: " << first;
}

// The hand cases of corpus/mx (expect lines from Python fractions, scripts/make_mx_cases.py):
// E8M0 0x00 and 0xFE, E5M2 Inf and NaN, E4M3 at 448, mixed formats, ties.
TEST(MxKernelCore, HandCasesPassTheOracle) {
  const std::string dir = std::string(NVFP4_SOURCE_DIR) + "/corpus/mx";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".case") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    // Grouped and dual hand cases: the grouped/dual MX tests' (this core is one GEMM's element).
    if (text.str().find("\nop = gemv\n") == std::string::npos && text.str().find("\nop = gemm\n") == std::string::npos)
      continue;
    const MxProblem t = parse_mx_case(text.str(), entry.path().string());
    // The naive kernel reads NVFP4 scales as ue4m3 (it does not declare signed scales).
    if (t.semantics != ScaleSemantics::ue4m3) continue;
    // Blocks of +-448 * 2^254 cancel exactly there, but each is far beyond FP32: any FP32
    // accumulation gives Inf - Inf = NaN, which rule 1 refuses. No FP32 kernel can pass it.
    if (entry.path().filename() == "extreme_scales_cancel.case") continue;
    ++files;
    const std::vector<MxElement> exact = exact_mx(t);
    const std::vector<uint32_t> got = run_core(t, NVFP4_SF_LINEAR, t.alpha, kern::mx::MxBug::none);
    for (size_t e = 0; e < got.size(); ++e)
      EXPECT_TRUE(judge_mx_element(exact[e], t.alpha, got[e], Policy::for_flags(0), t.out_type).ok)
          << entry.path().filename() << " element " << e << ": got 0x" << std::hex << got[e] << ", exact 0x"
          << round_mx(exact[e], t.alpha, t.out_type);
  }
  EXPECT_GT(files, 0);
}

// The naive MX kernel's grouped and dual GEMM as its CUDA launcher runs them (mx_gemm_core.h's
// group_gemm per non-empty group, dual_sums and the FP32 silu epilogue), here on the host buffers.
std::vector<uint32_t> run_core_grouped_dual(const Problem& p, kern::mx::MxBug bug) {
  MxCallBuffers call;
  lay_out_mx_call(p, call, [](std::vector<uint8_t>& v) { return v.data(); });
  const nvfp4_problem& abi = call.abi;
  const uint32_t out = static_cast<uint32_t>(p.out_type);
  const auto gemm = [&](const nvfp4_problem& q) {
    const kern::mx::Operand a{q.a, q.sfa, kern::format_or_nvfp4(q.a_format), q.m};
    const kern::mx::Operand b1{q.b, q.sfb, kern::format_or_nvfp4(q.b_format), q.n};
    const kern::mx::Operand b2{q.b2, q.sfb2, kern::format_or_nvfp4(q.b_format), q.n};
    for (int64_t e = 0; e < q.l * q.m * q.n; ++e) {
      const int64_t j = e % q.n, i = (e / q.n) % q.m, b = e / (q.n * q.m);
      if (q.op == NVFP4_OP_DUAL_GEMM) {
        float g, u;
        kern::mx::dual_sums(q, a, b1, b2, b, i, j, bug, &g, &u);
        kern::store_silu_product(q.c, e, out, g, u);
      } else {
        kern::store_wide(q.c, e, out, q.alpha, kern::mx::output_sum(q, a, b1, b, i, j, bug));
      }
    }
  };
  if (p.op != Op::grouped_gemm) {
    gemm(abi);
  } else {
    int64_t row0 = 0, tile0 = 0;
    for (int64_t g = 0; g < abi.groups; ++g) {
      if (abi.group[g].m > 0) gemm(kern::mx::group_gemm(abi, abi.group[g], g, p.packed, row0, tile0));
      row0 += abi.group[g].m;
      tile0 += (abi.group[g].m + 127) / 128;
    }
  }
  return mx_call_words(p, call);
}

// Every format pair, output type and layout, grouped (separate and packed) and dual, through the
// shared core against the exact reference and the oracle (rules 5, 6 and 9).
TEST(MxKernelCore, GroupedAndDualPassTheOracle) {
  std::mt19937_64 rng(20261202);
  int configurations = 0;
  for (BlockFormat fa : kAllBlockFormats)
    for (BlockFormat fb : kAllBlockFormats)
      for (OutType out : {OutType::fp16, OutType::bf16, OutType::fp32})
        for (SfLayout layout : {SfLayout::linear, SfLayout::permuted})
          for (int kind = 0; kind < 3; ++kind) {
            const Problem p = kind == 2 ? mx_dual_problem(rng, fa, fb, out, layout)
                                        : mx_grouped_problem(rng, fa, fb, out, layout, kind == 1);
            const ExactResult ref = exact_gemm(p);
            const std::vector<uint32_t> got = run_core_grouped_dual(p, kern::mx::MxBug::none);
            ASSERT_EQ(static_cast<int64_t>(got.size()), p.c_elems());
            const OracleSummary s = judge_words(p, ref, got.data(), Policy::for_flags(0));
            EXPECT_FALSE(s.any_failure()) << to_string(fa) << " x " << to_string(fb) << " " << to_string(out) << " "
                                          << to_string(layout) << " " << to_string(p.op) << (p.packed ? " packed" : "")
                                          << ": " << s.failing << " failing, first g " << s.first_g << " i " << s.first_i
                                          << " j " << s.first_j;
            ++configurations;
          }
  EXPECT_EQ(configurations, 16 * 3 * 2 * 3);
}

// The same problems with a scale read from the neighbouring block: grouped and dual see it too.
TEST(MxKernelCore, GroupedAndDualSeeANeighbourScale) {
  std::mt19937_64 rng(5);
  for (int kind = 0; kind < 3; ++kind) {
    const Problem p = kind == 2 ? mx_dual_problem(rng, BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4, OutType::fp32, SfLayout::permuted)
                                : mx_grouped_problem(rng, BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4, OutType::fp32,
                                                     SfLayout::permuted, kind == 1);
    const std::vector<uint32_t> got = run_core_grouped_dual(p, kern::mx::MxBug::neighbour_block_scale);
    EXPECT_TRUE(judge_words(p, exact_gemm(p), got.data(), Policy::for_flags(0)).any_failure()) << kind;
  }
}

class MxMutantCore : public ::testing::TestWithParam<int> {};

TEST_P(MxMutantCore, FailsTheSameCases) {
  std::string first;
  const int64_t failing = core_failures(static_cast<kern::mx::MxBug>(GetParam()), true, &first);
  EXPECT_GT(failing, 0) << "bug " << GetParam() << " passed every configuration";
  std::cout << "bug " << GetParam() << " fails " << first << "\n";
}

INSTANTIATE_TEST_SUITE_P(Bugs, MxMutantCore, ::testing::Range(1, 8));

}  // namespace
}  // namespace nvfp4
