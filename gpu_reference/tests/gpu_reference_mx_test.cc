// The GPU reference for MX operands (exact_mx_gpu, and exact_gemm_gpu / exact_gemm_auto for MX
// problems of every op) must agree with the CPU reference (exact_mx, exact_gemm) bit for bit in
// every field the oracle reads: r and S limb by limb, t, g, the NaN and Inf flags, the words, a
// dual problem's U facts and silu values. Each test prints what it compared; a mismatch prints
// the case (index, seed, op, shape, formats, data) and the first differing element of both.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "gpu_reference/exact_gemm_gpu.h"
#include "harness/draw/schedule.h"
#include "reference/case_file.h"
#include "reference/exact_gemm.h"
#include "reference/exact_mx.h"

namespace nvfp4 {
namespace {

class GpuReferenceMx : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_reference_available(&why)) GTEST_SKIP() << "GPU reference not available: " << why;
  }
};

std::string describe(const Problem& p) {
  std::ostringstream s;
  s << to_string(p.op) << " " << to_string(p.a_format) << " x " << to_string(p.b_format) << " out "
    << to_string(p.out_type) << " " << to_string(p.semantics);
  if (p.op == Op::grouped_gemm) {
    s << " groups " << p.groups.size() << " (m n k:";
    for (const Group& g : p.groups) s << " " << g.m << "x" << g.n << "x" << g.k;
    s << ")";
  } else {
    s << " m=" << p.m << " n=" << p.n << " k=" << p.k << " l=" << p.l;
  }
  return s.str();
}

bool same_dual(const DualValue& x, const DualValue& y) {
  const auto eq = [](long double a, long double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  return eq(x.silu_g, y.silu_g) && eq(x.u, y.u) && eq(x.v, y.v);
}

// The first difference between two references of p in words, or "" when they agree in every field.
std::string first_difference(const ExactResult& cpu, const ExactResult& gpu) {
  if (cpu.out_type != gpu.out_type || cpu.size() != gpu.size() || cpu.c.size() != gpu.c.size() ||
      cpu.c32.size() != gpu.c32.size() || cpu.group_offset != gpu.group_offset || !cpu.mx != !gpu.mx ||
      !cpu.mx2 != !gpu.mx2 || cpu.elems2.size() != gpu.elems2.size() || cpu.dual.size() != gpu.dual.size())
    return "the results' shapes differ (sizes, group offsets or which facts they hold)";
  if (!gpu.mx) return "the GPU result holds no MX facts";
  for (size_t x = 0; x < cpu.size(); ++x) {
    const std::string at = "element " + std::to_string(x) + ": ";
    if (cpu.word(x) != gpu.word(x))
      return at + "word cpu 0x" + word_hex(cpu.out_type, cpu.word(x)) + " gpu 0x" + word_hex(gpu.out_type, gpu.word(x));
    if (!same_mx_facts((*cpu.mx)[x], (*gpu.mx)[x]))
      return at + "facts\n  cpu " + describe_mx_facts((*cpu.mx)[x]) + "\n  gpu " + describe_mx_facts((*gpu.mx)[x]);
    if (cpu.elems[x].nan != gpu.elems[x].nan) return at + "NaN flag";
    if (cpu.mx2 && !same_mx_facts((*cpu.mx2)[x], (*gpu.mx2)[x]))
      return at + "U's facts\n  cpu " + describe_mx_facts((*cpu.mx2)[x]) + "\n  gpu " + describe_mx_facts((*gpu.mx2)[x]);
    if (!cpu.elems2.empty() && cpu.elems2[x].nan != gpu.elems2[x].nan) return at + "U's NaN flag";
    if (!cpu.dual.empty() && !same_dual(cpu.dual[x], gpu.dual[x])) return at + "silu(G), U or v";
  }
  return "";
}

// A CUDA kernel declaring every op of the GEMM family, every output word type and every operand
// format: its schedule draws what a CUDA MX kernel meets, the large class included.
nvfp4_kernel_info any_mx_cuda_kernel() {
  nvfp4_kernel_info info{};
  info.abi_version = NVFP4_ABI_VERSION;
  info.memory = NVFP4_MEMORY_CUDA;
  info.ops = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM) | (1u << NVFP4_OP_GROUPED_GEMM) | (1u << NVFP4_OP_DUAL_GEMM);
  info.out_types = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
  info.sf_layouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
  info.m_multiple = info.n_multiple = info.k_multiple = 1;
  info.a_formats = info.b_formats = (1u << NVFP4_FORMAT_NVFP4) | (1u << NVFP4_FORMAT_MXFP4) |
                                    (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);
  return info;
}

// The schedule's own draws (every data class: 0x00/0xFE, NaN scales, E5M2 Inf/NaN, E4M3 +-448,
// mixed formats; small and large shapes), each computed by exact_gemm_gpu and by the CPU.
TEST_F(GpuReferenceMx, ScheduledMxCasesMatchTheCpuBitForBit) {
  const uint64_t seed = 20261212;
  const int64_t cases = 400;
  ScheduleOptions o;
  o.seed = seed;
  o.gpu_reference = true;
  const Schedule schedule(any_mx_cuda_kernel(), "gpu_reference_mx", o);
  std::map<std::string, int> per_op;
  int64_t compared = 0, large = 0, elements = 0, nan_elements = 0, inf_elements = 0;
  double most_products = 0, cpu_s = 0, gpu_s = 0;
  for (int64_t i = 0; i < cases; ++i) {
    const ScheduledCase c = schedule.at(i);
    const Problem& p = c.problem;
    if (c.kind == CaseKind::unsupported || !p.mx_operands()) continue;
    const auto t0 = std::chrono::steady_clock::now();
    const ExactResult cpu = exact_gemm(p);
    const auto t1 = std::chrono::steady_clock::now();
    const ExactResult gpu = exact_gemm_gpu(p);
    const auto t2 = std::chrono::steady_clock::now();
    cpu_s += std::chrono::duration<double>(t1 - t0).count();
    gpu_s += std::chrono::duration<double>(t2 - t1).count();
    const std::string diff = first_difference(cpu, gpu);
    ASSERT_EQ(diff, "") << "case " << i << " of seed " << seed << " (" << to_string(c.kind) << ", data "
                        << c.spec.name() << "): " << describe(p);
    ++compared;
    ++per_op[to_string(p.op)];
    large += c.kind == CaseKind::large;
    double products = 0;
    if (p.op == Op::grouped_gemm)
      for (const Group& g : p.groups) products += static_cast<double>(g.m) * g.n * g.k;
    else products = static_cast<double>(p.l) * p.m * p.n * p.k;
    most_products = std::max(most_products, products);
    elements += static_cast<int64_t>(cpu.size());
    for (const MxElement& e : *cpu.mx) nan_elements += e.nan, inf_elements += !e.nan && (e.pos_inf || e.neg_inf);
  }
  std::printf("seed %llu: %lld MX cases of %lld compared bit for bit (", static_cast<unsigned long long>(seed),
              static_cast<long long>(compared), static_cast<long long>(cases));
  for (const auto& [op, n] : per_op) std::printf("%s %d ", op.c_str(), n);
  std::printf("), %lld large (up to %.3g products), %lld elements (%lld NaN, %lld Inf); CPU %.1f s, GPU %.1f s\n",
              static_cast<long long>(large), most_products, static_cast<long long>(elements),
              static_cast<long long>(nan_elements), static_cast<long long>(inf_elements), cpu_s, gpu_s);
  EXPECT_GE(compared, 300);
  EXPECT_GE(large, 10);
  EXPECT_EQ(per_op.size(), 4u);
}

// Finite elements of any code and E8M0 scales in [lo, hi] (NVFP4 scales of any finite byte);
// with `specials`, a few of each operand's elements are Inf, NaN or +-448 and a few scales NaN:
// few enough that most outputs keep a finite sum.
MxOperand random_operand(std::mt19937_64& rng, BlockFormat f, int64_t rows, int64_t k, int64_t l, bool specials,
                         uint8_t scale_lo, uint8_t scale_hi) {
  MxOperand op;
  op.format = f;
  op.rows = rows, op.k = k, op.l = l;
  op.data.resize(static_cast<size_t>(op.data_bytes()));
  for (auto& b : op.data) {
    do b = static_cast<uint8_t>(rng());
    while ((f == BlockFormat::mxfp8_e4m3 && (b & 0x7F) == 0x7F) || (f == BlockFormat::mxfp8_e5m2 && ((b >> 2) & 31) == 31));
  }
  op.scales.resize(static_cast<size_t>(op.scale_bytes()));
  for (auto& s : op.scales) {
    if (f == BlockFormat::nvfp4) {
      do s = static_cast<uint8_t>(rng());
      while ((s & 0x7F) == 0x7F);
    } else {
      s = static_cast<uint8_t>(scale_lo + rng() % (scale_hi - scale_lo + 1));
    }
  }
  if (!specials) return op;
  const uint8_t e5m2[] = {0x7C, 0xFC, 0x7D}, e4m3[] = {0x7F, 0x7E, 0xFE};
  for (int64_t x = 0; x < std::max<int64_t>(1, op.data_bytes() / 40000) && !packs_nibbles(f); ++x)
    op.data[rng() % op.data.size()] = f == BlockFormat::mxfp8_e5m2 ? e5m2[rng() % 3] : e4m3[rng() % 3];
  for (int64_t x = 0; x < std::max<int64_t>(1, op.scale_bytes() / 2000); ++x)
    op.scales[rng() % op.scales.size()] = f == BlockFormat::nvfp4 ? 0x7F : 0xFF;
  return op;
}

// Shapes past the schedule's: several tiles with ragged edges, k not a multiple of 32, deep k,
// a GEMV of thousands of rows, E8M0 scales from 0x00 to 0xFE, and some with Inf, NaN and +-448
// elements and NaN scales.
TEST_F(GpuReferenceMx, LargeAndRaggedShapesMatchExactMx) {
  const uint64_t seed = 32;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  struct Shape {
    BlockFormat fa, fb;
    int64_t m, n, k, l;
    bool specials;
    uint8_t lo, hi;  // E8M0 scale bytes drawn in [lo, hi]
  };
  const Shape shapes[] = {
      {BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e5m2, 300, 200, 4100, 1, true, 0x00, 0xFE},
      {BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4, 257, 130, 1040, 2, false, 0x00, 0xFE},
      {BlockFormat::mxfp4, BlockFormat::mxfp8_e4m3, 4099, 1, 16400, 1, false, 0x70, 0x8F},
      {BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e5m2, 129, 65, 33, 3, true, 0x00, 0xFE},
      {BlockFormat::nvfp4, BlockFormat::mxfp8_e5m2, 200, 100, 1000, 1, true, 0x60, 0x9F},
      {BlockFormat::mxfp4, BlockFormat::mxfp4, 1024, 512, 2048, 1, false, 0x77, 0x87},
      {BlockFormat::mxfp8_e5m2, BlockFormat::mxfp4, 17, 1, 131072 + 6, 2, false, 0x00, 0xFE},
  };
  for (const Shape& s : shapes) {
    MxProblem p;
    p.op = s.n == 1 ? Op::gemv : Op::gemm;
    p.m = s.m, p.n = s.n, p.k = s.k, p.l = s.l;
    p.semantics = rng() % 2 ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
    p.a = random_operand(rng, s.fa, p.m, p.k, p.l, s.specials, s.lo, s.hi);
    p.b = random_operand(rng, s.fb, p.n, p.k, p.l, s.specials, s.lo, s.hi);
    const std::string what = std::string(to_string(s.fa)) + " x " + to_string(s.fb) + " m=" + std::to_string(p.m) +
                             " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) + " l=" + std::to_string(p.l);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<MxElement> cpu = exact_mx(p);
    const auto t1 = std::chrono::steady_clock::now();
    GpuReferenceTiming timing;
    const std::vector<MxElement> gpu = exact_mx_gpu(p, &timing);
    ASSERT_EQ(cpu.size(), gpu.size()) << what;
    int64_t nan = 0;
    for (size_t x = 0; x < cpu.size(); ++x) {
      nan += cpu[x].nan;
      ASSERT_TRUE(same_mx_facts(cpu[x], gpu[x])) << what << ", element " << x << "\n  cpu " << describe_mx_facts(cpu[x])
                                                 << "\n  gpu " << describe_mx_facts(gpu[x]);
    }
    std::printf("%-40s %8zu elements (%lld NaN) the same; CPU %.2f s, GPU %.1f ms (kernel %.1f ms)\n", what.c_str(),
                cpu.size(), static_cast<long long>(nan), std::chrono::duration<double>(t1 - t0).count(),
                timing.total_ms, timing.compute_ms);
  }
}

// exact_gemm_auto above its threshold sends MX problems of every op to the GPU (grouped: each
// group from a quarter of it), and gives the CPU's result in every field.
TEST_F(GpuReferenceMx, AutoServesEveryOpFromTheGpu) {
  std::mt19937_64 rng(4087);
  std::printf("seed 4087\n");
  const auto filled = [&](Op op, BlockFormat fa, BlockFormat fb, int64_t m, int64_t n, int64_t k, OutType type) {
    Problem p;
    p.op = op;
    p.m = m, p.n = n, p.k = k;
    p.a_format = fa, p.b_format = fb;
    p.out_type = type;
    p.alpha = 0.75f;
    const MxOperand a = random_operand(rng, fa, m, k, 1, false, 0x70, 0x8F), b = random_operand(rng, fb, n, k, 1, false, 0x70, 0x8F);
    p.a = a.data, p.sfa = a.scales, p.b = b.data, p.sfb = b.scales;
    if (op == Op::dual_gemm) {
      const MxOperand b2 = random_operand(rng, fb, n, k, 1, false, 0x70, 0x8F);
      p.b2 = b2.data, p.sfb2 = b2.scales;
      p.alpha2 = 1.5f;
    }
    return p;
  };
  std::vector<Problem> problems = {
      filled(Op::gemm, BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4, 300, 70, 1000, OutType::bf16),
      filled(Op::gemv, BlockFormat::mxfp4, BlockFormat::mxfp8_e5m2, 700, 1, 2050, OutType::fp32),
      filled(Op::dual_gemm, BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4, 130, 40, 512, OutType::fp16),
  };
  Problem grouped;
  grouped.op = Op::grouped_gemm;
  grouped.a_format = BlockFormat::mxfp4, grouped.b_format = BlockFormat::mxfp8_e4m3;
  grouped.out_type = OutType::fp32;
  for (const int64_t m : {0, 129, 1, 0, 300}) {
    const Problem one = filled(Op::gemm, grouped.a_format, grouped.b_format, std::max<int64_t>(m, 1), 96, 528, OutType::fp32);
    Group g;
    g.m = m, g.n = one.n, g.k = one.k;
    g.alpha = m == 129 ? 0.5f : 3.0f;
    if (m > 0) g.a = one.a, g.b = one.b, g.sfa = one.sfa, g.sfb = one.sfb;
    grouped.groups.push_back(std::move(g));
  }
  problems.push_back(std::move(grouped));
  for (const Problem& p : problems) {
    ASSERT_EQ(problem_error(p), "") << describe(p);
    const ExactResult cpu = exact_gemm(p), gpu = exact_gemm_auto(p, 0);
    ASSERT_EQ(first_difference(cpu, gpu), "") << describe(p);
    std::printf("%s: %zu elements the same\n", describe(p).c_str(), cpu.size());
  }
}

// corpus/mx's hand cases (expect lines from Python's exact fractions) on the GPU, bit for bit.
TEST_F(GpuReferenceMx, HandCasesBitForBit) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(NVFP4_SOURCE_DIR) + "/corpus/mx")) {
    if (entry.path().extension() != ".case") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    const Problem p = parse_case(text.str(), entry.path().string());
    const ExpectComparison cmp = compare_expect(p, exact_gemm_gpu(p));
    ASSERT_TRUE(cmp.any_expect) << entry.path();
    EXPECT_EQ(cmp.differing, 0) << entry.path() << ": first differing element "
                                << (cmp.first.empty() ? -1 : cmp.first.front());
    ++files;
  }
  std::printf("%d hand cases of corpus/mx compared with their expect lines\n", files);
  EXPECT_GE(files, 40);
}

}  // namespace
}  // namespace nvfp4
