// The GPU reference must agree with the CPU reference on every field of every element (r, S, t,
// g, NaN and the rounded output), bit for bit, on random cases from every edge distribution.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpu_reference/exact_gemm_gpu.h"
#include "gpu_reference/packed_elements.h"
#include "harness/draw/generators.h"
#include "property_tests/property_support.h"
#include "reference/exact_gemm.h"

namespace nvfp4 {
namespace {

std::string describe_element(const ExactElement& e) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "sum=%lld abs_sum=%llu t=%lld min_tz=%d nan=%d",
                static_cast<long long>(e.sum), static_cast<unsigned long long>(e.abs_sum),
                static_cast<long long>(e.nonzero), e.min_tz, static_cast<int>(e.nan));
  return buf;
}

// First element where the two results differ (elements or output words of any type), or -1.
int64_t first_difference(const ExactResult& x, const ExactResult& y) {
  if (x.out_type != y.out_type || x.size() != y.size() || x.c.size() != y.c.size() || x.c32.size() != y.c32.size())
    return 0;
  for (size_t i = 0; i < x.elems.size(); ++i) {
    const ExactElement &a = x.elems[i], &b = y.elems[i];
    if (a.sum != b.sum || a.abs_sum != b.abs_sum || a.nonzero != b.nonzero || a.min_tz != b.min_tz ||
        a.nan != b.nan || x.word(i) != y.word(i))
      return static_cast<int64_t>(i);
  }
  return -1;
}

// A dual GEMM's U elements and its silu(G), U and v, bit for bit.
void expect_same_dual(const ExactResult& cpu, const ExactResult& gpu, const std::string& where) {
  ASSERT_EQ(gpu.elems2.size(), cpu.elems2.size()) << where;
  ASSERT_EQ(gpu.dual.size(), cpu.dual.size()) << where;
  for (size_t i = 0; i < cpu.elems2.size(); ++i) {
    const ExactElement &a = cpu.elems2[i], &b = gpu.elems2[i];
    ASSERT_TRUE(a.sum == b.sum && a.abs_sum == b.abs_sum && a.nonzero == b.nonzero && a.min_tz == b.min_tz &&
                a.nan == b.nan)
        << where << ", U at " << i << ": " << describe_element(a) << " / " << describe_element(b);
    const DualValue &c = cpu.dual[i], &d = gpu.dual[i];
    ASSERT_EQ(std::memcmp(&c.silu_g, &d.silu_g, 10), 0) << where << ", silu(G) at " << i;
    ASSERT_EQ(std::memcmp(&c.u, &d.u, 10), 0) << where << ", U at " << i;
    ASSERT_EQ(std::memcmp(&c.v, &d.v, 10), 0) << where << ", v at " << i;
  }
  EXPECT_EQ(gpu.group_offset, cpu.group_offset) << where;
}

class GpuReference : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_reference_available(&why)) GTEST_SKIP() << "GPU reference not available: " << why;
  }
};

// Any shape up to a few hundred rows and columns, both ops, every data distribution, both
// scale semantics; shapes and data drawn so RapidCheck shrinks a mismatch to a small case.
TEST_F(GpuReference, MatchesCpuReferenceBitForBit) {
  nvfp4_kernel_info anything{};
  anything.abi_version = NVFP4_ABI_VERSION;
  anything.name = "any";
  anything.ops = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
  anything.sf_layouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
  anything.m_multiple = anything.n_multiple = anything.k_multiple = 1;
  const bool ok = rc::check("GPU reference == CPU reference", [&] {
    prop::RcDraws d;
    const Op op = d.below(2) ? Op::gemm : Op::gemv;
    ShapeLimits limits = prop::property_limits();
    const Shape s = draw_shape(d, op, anything, limits);
    Problem p;
    set_shape(p, s);
    p.semantics = d.below(2) ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
    const DataSpec spec = draw_spec(d);
    draw_data(d, spec, p);
    RC_TAG(spec.scales == ScaleDist::nan_block ? "nan" : "finite");
    const ExactResult cpu = exact_gemm(p);
    const ExactResult gpu = exact_gemm_gpu(p);
    const int64_t at = first_difference(cpu, gpu);
    if (at >= 0) {
      RC_FAIL("element " + std::to_string(at) + " of " + std::string(to_string(p.op)) + " m=" +
              std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
              " l=" + std::to_string(p.l) + " " + spec.name() + ": cpu " + describe_element(cpu.elems[at]) +
              " c=" + std::to_string(cpu.c[at]) + " / gpu " + describe_element(gpu.elems[at]) +
              " c=" + std::to_string(gpu.c[at]));
    }
  });
  EXPECT_TRUE(ok);
}

// Larger shapes (several GEMM tiles, tails in every dimension, many k blocks) on seeded data.
TEST_F(GpuReference, MatchesCpuOnLargerShapes) {
  const uint64_t seed = 20261130;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  const int64_t shapes[][4] = {{257, 130, 1040, 2}, {4096, 1, 16400, 1}, {1000, 1, 6, 3}, {129, 65, 4096, 1}};
  for (const auto& sh : shapes) {
    for (const DataSpec spec : {DataSpec::parse("uniform/full/arbitrary"), DataSpec::parse("edge/near_max/one"),
                                DataSpec::parse("alternating/subnormal/pow2"), DataSpec::parse("sparse/nan_block/one")}) {
      Problem p;
      p.op = sh[1] == 1 ? Op::gemv : Op::gemm;
      p.m = sh[0];
      p.n = sh[1];
      p.k = sh[2];
      p.l = sh[3];
      fill_data(rng, spec, p);
      const ExactResult cpu = exact_gemm(p);
      const ExactResult gpu = exact_gemm_gpu(p);
      const int64_t at = first_difference(cpu, gpu);
      EXPECT_EQ(at, -1) << spec.name() << " m=" << p.m << " n=" << p.n << " k=" << p.k << " l=" << p.l
                        << (at >= 0 ? " cpu " + describe_element(cpu.elems[at]) + " gpu " +
                                          describe_element(gpu.elems[at])
                                    : std::string());
    }
  }
}

// min_tz lowered late in k, at different blocks for different outputs of one thread, beside
// outputs with no nonzero product at all: the GEMM kernel searches a block's smallest tz only
// where its scales could lower an output's minimum, and these scales put that screen's every
// branch to work (exponents that fall along k at a pace set by the row and the column, zero
// scales, a row of zero values and a column of zero scales).
TEST_F(GpuReference, MinTzLoweredLateInKMatchesTheCpu) {
  const uint64_t seed = 20261205;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  for (const char* spec : {"uniform/full/one", "sparse/full/one"}) {
    Problem p;
    p.op = Op::gemm;
    p.m = 96;
    p.n = 80;
    p.k = 2048;
    p.l = 1;
    fill_data(rng, DataSpec::parse(spec), p);
    const int64_t kb = p.kb();
    // E4M3 bytes: exponent field in bits 3-6, mantissa in bits 0-2 (its trailing zeros add to tz).
    auto scale = [&](int64_t line, int64_t s, int64_t pace) -> uint8_t {
      if ((line * 7 + s) % 53 == 0) return 0;  // a zero scale now and then
      const int64_t exp = std::max<int64_t>(1, 14 - (s * pace) / kb);
      return static_cast<uint8_t>((exp << 3) | ((line + s) % 8));
    };
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t s = 0; s < kb; ++s) p.sfa[i * kb + s] = scale(i, s, 1 + i % 13);
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t s = 0; s < kb; ++s) p.sfb[j * kb + s] = j == 17 ? 0 : scale(j, s, 1 + (j * 5) % 11);
    std::fill(p.a.begin() + 5 * (p.k / 2), p.a.begin() + 6 * (p.k / 2), uint8_t{0});  // row 5: zeros
    const ExactResult cpu = exact_gemm(p);
    const ExactResult gpu = exact_gemm_gpu(p);
    const int64_t at = first_difference(cpu, gpu);
    EXPECT_EQ(at, -1) << spec << (at >= 0 ? " element " + std::to_string(at) + " cpu " + describe_element(cpu.elems[at]) +
                                                " gpu " + describe_element(gpu.elems[at])
                                          : std::string());
    // The same rows and columns cut to the first half of k: outputs whose minimum is lower over
    // all of k were lowered in the second half (what the skipped searches must not miss).
    Problem half = p;
    half.k = p.k / 2;
    const int64_t hkb = half.kb();
    half.a.assign(static_cast<size_t>(p.m * half.k / 2), 0);
    half.b.assign(static_cast<size_t>(p.n * half.k / 2), 0);
    half.sfa.assign(static_cast<size_t>(p.m * hkb), 0);
    half.sfb.assign(static_cast<size_t>(p.n * hkb), 0);
    for (int64_t i = 0; i < p.m; ++i) {
      std::copy_n(p.a.begin() + i * (p.k / 2), half.k / 2, half.a.begin() + i * (half.k / 2));
      std::copy_n(p.sfa.begin() + i * kb, hkb, half.sfa.begin() + i * hkb);
    }
    for (int64_t j = 0; j < p.n; ++j) {
      std::copy_n(p.b.begin() + j * (p.k / 2), half.k / 2, half.b.begin() + j * (half.k / 2));
      std::copy_n(p.sfb.begin() + j * kb, hkb, half.sfb.begin() + j * hkb);
    }
    const ExactResult first = exact_gemm(half);
    int lowered_late = 0, none = 0;
    for (size_t e = 0; e < cpu.elems.size(); ++e) {
      lowered_late += cpu.elems[e].min_tz < first.elems[e].min_tz;
      none += cpu.elems[e].nonzero == 0;
    }
    EXPECT_GT(lowered_late, 100) << spec << ": the scales no longer lower min_tz late in k";
    EXPECT_GT(none, 0) << spec << ": no output without a nonzero product";
    std::printf("%s: %d outputs lowered in k's second half, %d without a nonzero product\n", spec, lowered_late, none);
  }
}

// BF16 and FP32 outputs: the GPU computes the exact elements, the words come from the CPU
// reference's rounding of them; grouped and dual problems are left to the CPU reference.
TEST_F(GpuReference, Bf16AndFp32OutputsMatchTheCpu) {
  const uint64_t seed = 20261201;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  for (const OutType type : {OutType::bf16, OutType::fp32}) {
    for (const DataSpec spec : {DataSpec::parse("uniform/full/arbitrary"), DataSpec::parse("edge/near_max/one"),
                                DataSpec::parse("alternating/subnormal/pow2"), DataSpec::parse("sparse/nan_block/one")}) {
      Problem p;
      p.op = Op::gemm;
      p.m = 257, p.n = 130, p.k = 1040, p.l = 2;
      p.out_type = type;
      fill_data(rng, spec, p);
      const ExactResult cpu = exact_gemm(p), gpu = exact_gemm_gpu(p);
      EXPECT_EQ(first_difference(cpu, gpu), -1) << to_string(type) << " " << spec.name();
      EXPECT_EQ(first_difference(cpu, exact_gemm_auto(p, 0)), -1) << to_string(type) << " " << spec.name();
    }
  }
  Problem dual;
  dual.m = 300, dual.n = 200, dual.k = 512;
  fill_data(rng, DataSpec::parse("uniform/full/arbitrary"), dual);  // as a GEMM, then B again as B2
  dual.op = Op::dual_gemm;
  dual.b2 = dual.b;
  dual.sfb2 = dual.sfb;
  EXPECT_THROW(exact_gemm_gpu(dual), std::invalid_argument);
  EXPECT_EQ(exact_gemm_auto(dual, 0).words(), exact_gemm(dual).words());
  // A B2 shorter than the shape says is refused, not read past its end on the device.
  Problem short_b2 = dual;
  short_b2.b2.resize(short_b2.b2.size() / 2);
  EXPECT_THROW(exact_gemm_auto(short_b2, 0), std::invalid_argument);
}

// A grouped problem above the threshold goes to the GPU one group at a time (empty groups, each
// group's alpha, FP32 words): bit for bit the CPU reference's.
TEST_F(GpuReference, GroupedProblemsMatchTheCpuGroupByGroup) {
  const uint64_t seed = 20261202;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  Problem p;
  p.op = Op::grouped_gemm;
  p.out_type = OutType::fp32;
  for (const int64_t m : {0, 129, 1, 0, 300}) {
    Problem one;
    one.op = Op::gemm;
    one.m = std::max<int64_t>(m, 1), one.n = 96, one.k = 528, one.l = 1;
    fill_data(rng, DataSpec::parse("uniform/full/arbitrary"), one);
    Group g;
    g.m = m, g.n = one.n, g.k = one.k, g.alpha = one.alpha;
    if (m > 0) g.a = one.a, g.b = one.b, g.sfa = one.sfa, g.sfb = one.sfb;
    p.groups.push_back(std::move(g));
  }
  const ExactResult cpu = exact_gemm(p), gpu = exact_gemm_auto(p, 0);
  EXPECT_EQ(gpu.words(), cpu.words());
  EXPECT_EQ(gpu.group_offset, cpu.group_offset);
  EXPECT_EQ(first_difference(cpu, gpu), -1);
}

// A grouped GEMM with block-scaled output above the threshold: each group is the GPU's GEMM with
// that group's output global scale (group_problem once gave the groups none, and the GPU path
// refused every such case), and the FP32 values it quantizes are the CPU reference's.
TEST_F(GpuReference, GroupedBlockScaledOutputMatchesTheCpu) {
  const uint64_t seed = 20261203;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  Problem p;
  p.op = Op::grouped_gemm;
  p.out_type = OutType::nvfp4;
  p.out_recipe = Recipe::te;
  for (const int64_t m : {129, 0, 64}) {
    Problem one;
    one.op = Op::gemm;
    one.m = std::max<int64_t>(m, 1), one.n = 96, one.k = 528, one.l = 1;
    fill_data(rng, DataSpec::parse("uniform/full/arbitrary"), one);
    Group g;
    g.m = m, g.n = one.n, g.k = one.k, g.alpha = one.alpha;
    if (m > 0) g.a = one.a, g.b = one.b, g.sfa = one.sfa, g.sfb = one.sfb;
    p.groups.push_back(std::move(g));
    p.out_global_scale.push_back(0.5f * static_cast<float>(p.groups.size()));
  }
  const ExactResult cpu = exact_gemm(p), gpu = exact_gemm_auto(p, 0);
  EXPECT_EQ(gpu.words(), cpu.words());
  EXPECT_EQ(first_difference(cpu, gpu), -1);
}

// A dual GEMM above the threshold: G and U are the GPU's GEMMs, silu and the words the host's.
// Every field of G's and U's sums, silu(G), U and v (all 80 bits) and every word must be the CPU
// reference's: batches, a k tail, n = 1, each output type.
TEST_F(GpuReference, DualProblemsMatchTheCpu) {
  const uint64_t seed = 20261204;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  struct Shape {
    int64_t m, n, k, l;
    OutType out;
  };
  // The last has more outputs than one pinned chunk of fetched elements (349,525), so they come
  // back in two, and with no words asked for.
  const Shape shapes[] = {{129, 96, 528, 1, OutType::fp16}, {64, 1, 1024, 2, OutType::bf16},
                          {33, 70, 272, 3, OutType::fp32}, {256, 128, 64, 1, OutType::fp16},
                          {600, 640, 32, 1, OutType::bf16}};
  const char* specs[] = {"uniform/full/arbitrary", "edge/narrow/one", "fine_cancel/fine_cancel/arbitrary",
                         "one_sign/nan_block/pow2"};
  int x = 0;
  for (const Shape& s : shapes) {
    for (const char* spec : specs) {
      Problem p;
      p.op = Op::dual_gemm;
      p.m = s.m, p.n = s.n, p.k = s.k, p.l = s.l;
      p.out_type = s.out;
      fill_data(rng, DataSpec::parse(spec), p);
      const ExactResult cpu = exact_gemm(p), gpu = exact_gemm_auto(p, 0);
      const std::string where = "shape " + std::to_string(x / 4) + ", " + spec;
      ++x;
      ASSERT_NO_FATAL_FAILURE(expect_same_dual(cpu, gpu, where));
    }
  }
}

// The results come back in pinned chunks of kFetchChunkElements: one short of a chunk, exactly
// one, one past it, exactly two and one past two, as GEMVs (one output a row), GEMMs (their
// words) and dual GEMMs (no words fetched), each against the CPU. A chunk landing at the wrong
// offset, or a pointer moved past a chunk where none was given, shows here and nowhere smaller.
TEST_F(GpuReference, FetchedChunkEdgesMatchTheCpu) {
  const uint64_t seed = 20261206;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  const int64_t chunk = gpu::kFetchChunkElements;
  ASSERT_EQ(chunk, 775 * 451) << "the GEMM shapes below are built from this chunk's factors";
  struct Shape {
    Op op;
    int64_t m, n, l;
  };
  const Shape shapes[] = {
      {Op::gemv, chunk - 1, 1, 1},     {Op::gemv, chunk, 1, 1},      {Op::gemv, chunk + 1, 1, 1},
      {Op::gemv, chunk, 1, 2},         {Op::gemv, 2 * chunk + 1, 1, 1},
      {Op::gemm, 775, 451, 1},         {Op::gemm, 776, 451, 1},      {Op::gemm, 775, 451, 2},
      {Op::dual_gemm, 775, 451, 1},    {Op::dual_gemm, 776, 451, 1}, {Op::dual_gemm, 1550, 451, 1},
  };
  const char* specs[] = {"uniform/full/arbitrary", "one_sign/nan_block/pow2"};
  for (const Shape& s : shapes) {
    for (const char* spec : specs) {
      Problem p;
      p.op = s.op;
      p.m = s.m, p.n = s.n, p.k = 32, p.l = s.l;
      p.out_type = OutType::fp16;
      fill_data(rng, DataSpec::parse(spec), p);
      const ExactResult cpu = exact_gemm(p), gpu = exact_gemm_auto(p, 0);
      const std::string where = std::string(to_string(s.op)) + " " + std::to_string(s.m) + "x" + std::to_string(s.n) +
                                "x32, l " + std::to_string(s.l) + " (" + std::to_string(p.c_elems()) +
                                " outputs), " + spec;
      ASSERT_EQ(gpu.size(), cpu.size()) << where;
      ASSERT_EQ(first_difference(cpu, gpu), -1) << where;
      if (op_is_dual(s.op)) {
        ASSERT_NO_FATAL_FAILURE(expect_same_dual(cpu, gpu, where));
      }
    }
  }
}

TEST_F(GpuReference, RefusesKBeyondItsAccumulators) {
  Problem p;
  p.op = Op::gemv;
  p.m = 1;
  p.k = kGpuReferenceMaxK + 2;
  p.a.assign(p.a_bytes(), 0x22);
  p.b.assign(p.b_bytes(), 0x22);
  p.sfa.assign(p.sfa_bytes(), 0x38);
  p.sfb.assign(p.sfb_bytes(), 0x38);
  EXPECT_THROW(exact_gemm_gpu(p), std::invalid_argument);
  // exact_gemm_auto takes the CPU reference instead, and stays exact.
  const ExactResult r = exact_gemm_auto(p, 0);
  EXPECT_EQ(r.c, exact_gemm(p).c);
}

}  // namespace
}  // namespace nvfp4
