// mx_gemm_tc's algorithm on the CPU: each 32-element block's two mma.sync m16n8k16 BF16
// instructions replaced by the H200's measured model of them (reference/matrix_unit_model.h,
// bit for bit on 2 x 10^6 vectors), the block sums scaled into kernels/wide_sum.h's accumulator
// as the kernel does, judged by the suite under the policy the H200 applies (matrix-unit:90) on
// the schedule's cases for the kernel's own name and declaration. It stands in for the GPU where
// there is none, and it keeps the case that failed on the H200 (a plain FP32 accumulator there
// rounded sums near 2^-140 onto FP32's subnormal grid, then alpha's product rounded again): the
// same algorithm with that accumulator must fail it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness/draw/schedule.h"
#include "harness/tests/check_in_process.h"
#include "kernels/mx_block_decode.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"
#include "kernels/wide_sum.h"
#include "reference/matrix_unit_model.h"

namespace nvfp4 {
namespace {

constexpr uint32_t kMx = (1u << NVFP4_FORMAT_MXFP4) | (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);

// What mx_gemm_tc declares (kernels/cuda/mx_gemm_tc.cu), so that the schedule draws its cases.
nvfp4_kernel_info tc_info(uint32_t memory) {
  return {NVFP4_ABI_VERSION, "mx_gemm_tc", memory, (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM),
          (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), memory == NVFP4_MEMORY_CUDA ? 90u : 0u, 1, 1, 1,
          NVFP4_FLAG_MMA_ACCUMULATE, (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32), 0, kMx,
          kMx, 0, 0, 0};
}

bool g_plain_float_sum = false;  // the accumulator the H200 failed with

struct TcOperand {
  const uint8_t* data;
  const uint8_t* scales;
  uint32_t format;
  int64_t rows;
};

// Element x of row r as the kernel hands it to the MMA: BF16 bits, 0 past k.
uint32_t bf16_element(const TcOperand& o, int64_t k, int64_t b, int64_t r, int64_t x) {
  if (x >= k) return 0;
  const uint8_t* row = o.data + (b * o.rows + r) * kern::format_row_bytes(o.format, k);
  return kern::bf16_from_float(kern::format_element(o.format, row, x));
}

int run_model(const nvfp4_problem* p) {
  const TcOperand a{p->a, p->sfa, p->a_format, p->m}, bo{p->b, p->sfb, p->b_format, p->n};
  const int64_t k = p->k, kb = (k + 31) / 32;
  for (int64_t b = 0; b < p->l; ++b)
    for (int64_t i = 0; i < p->m; ++i)
      for (int64_t j = 0; j < p->n; ++j) {
        kern::WideSum wide;
        float plain = 0.0f;
        for (int64_t s = 0; s < kb; ++s) {
          uint32_t d = 0;  // C = 0, then the first instruction's D: two k16 steps of one block
          for (int64_t x0 = 32 * s; x0 < 32 * s + 32; x0 += 16) {
            uint32_t av[16], bv[16];
            for (int q = 0; q < 16; ++q) av[q] = bf16_element(a, k, b, i, x0 + q), bv[q] = bf16_element(bo, k, b, j, x0 + q);
            d = matrix_unit_dot(kH200MmaBf16, av, bv, d);
          }
          float part;
          std::memcpy(&part, &d, 4);
          const kern::ScaleParts sa = kern::e8m0_parts(a.scales[kern::scale_offset(p->sf_layout, a.rows, kb, b, i, s)]);
          const kern::ScaleParts sb = kern::e8m0_parts(bo.scales[kern::scale_offset(p->sf_layout, bo.rows, kb, b, j, s)]);
          wide.add(part * (sa.mant * sb.mant), sa.exp + sb.exp);
          plain += std::ldexp(part * (sa.mant * sb.mant), sa.exp + sb.exp);
        }
        const int64_t e = (b * p->m + i) * p->n + j;
        if (g_plain_float_sum)
          kern::store_scaled(p->c, e, p->out_type, p->alpha, plain);
        else
          kern::store_wide(p->c, e, p->out_type, p->alpha, wide);
      }
  return NVFP4_OK;
}

const nvfp4_kernel_info kHostInfo = tc_info(NVFP4_MEMORY_HOST);
int model_count() { return 1; }
const nvfp4_kernel_info* model_get(int) { return &kHostInfo; }
int model_run(int, const nvfp4_problem* p) {
  if (!kern::mx_problem_fits(kHostInfo, p) || !kern::formats_declared(kHostInfo, *p)) return NVFP4_UNSUPPORTED;
  return run_model(p);
}

const Kernel& model_kernel() {
  static Registry registry = [] {
    Registry r;
    r.add_provider(model_count, model_get, model_run, "mx_gemm_tc_model_test");
    return r;
  }();
  return *registry.find("mx_gemm_tc");
}

// Case `index` of the H200's schedule for mx_gemm_tc, checked on the model under matrix-unit:90.
CaseOutcome check_scheduled(uint64_t seed, int64_t index) {
  ScheduleOptions o;
  o.seed = seed;
  const Schedule schedule(tc_info(NVFP4_MEMORY_CUDA), "mx_gemm_tc", o);
  CaseOptions options;
  options.policy = Policy::parse("matrix-unit:90");
  return check_in_process(model_kernel(), schedule.at(index).problem, options);
}

TEST(MxGemmTcModel, DeclarationIsTheKernels) {
  const Kernel* k = Registry::with_builtins().find("mx_gemm_tc");
  if (!k) GTEST_SKIP() << "built without CUDA: mx_gemm_tc is not registered";
  const nvfp4_kernel_info want = tc_info(NVFP4_MEMORY_CUDA);
  EXPECT_EQ(k->info->ops, want.ops);
  EXPECT_EQ(k->info->sf_layouts, want.sf_layouts);
  EXPECT_EQ(k->info->flags, want.flags);
  EXPECT_EQ(k->info->out_types, want.out_types);
  EXPECT_EQ(k->info->a_formats, want.a_formats);
  EXPECT_EQ(k->info->b_formats, want.b_formats);
  EXPECT_EQ(k->info->min_sm, want.min_sm);
}

// Seed 1796209005160960480, case 108: gemm 128x1x2x4, MXFP8 E4M3 x E5M2, alpha -0.25, FP32 out,
// scales 2^-146..2^-95 between them. The H200's run failed it (err/bound 1.25).
TEST(MxGemmTcModel, TheH200sFailingCasePassesWithTheWideSumAndFailsWithAFloat) {
  const CaseOutcome wide = check_scheduled(1796209005160960480ull, 108);
  EXPECT_EQ(wide.verdict, CaseOutcome::Verdict::pass) << message_of(wide);
  g_plain_float_sum = true;
  const CaseOutcome plain = check_scheduled(1796209005160960480ull, 108);
  g_plain_float_sum = false;
  EXPECT_EQ(check_of(plain), "oracle") << message_of(plain);
}

TEST(MxGemmTcModel, SchedulesPass) {
  for (const uint64_t seed : {1796209005160960480ull, 20261202ull}) {
    int64_t checked = 0;
    for (int64_t index = 0; index < 80; ++index) {  // the model is slow: 16 products a call, bit by bit
      const CaseOutcome r = check_scheduled(seed, index);
      ASSERT_NE(r.verdict, CaseOutcome::Verdict::fail) << "seed " << seed << " case " << index << ": " << message_of(r);
      checked += r.verdict == CaseOutcome::Verdict::pass;
    }
    EXPECT_GT(checked, 50) << "seed " << seed;
  }
}

}  // namespace
}  // namespace nvfp4
