// The warm-up's problem lies inside every declaration it is made for (a compiled kernel is never
// warmed up on a problem it refuses), and is small and the same every time.
#include <gtest/gtest.h>

#include "harness/judge/case_check.h"
#include "harness/process/warmup.h"

namespace nvfp4 {
namespace {

nvfp4_kernel_info info(uint32_t ops, uint32_t layouts, uint32_t m, uint32_t n, uint32_t k, uint32_t flags = 0) {
  nvfp4_kernel_info i{};
  i.abi_version = 1;
  i.name = "warm";
  i.memory = NVFP4_MEMORY_CUDA;
  i.ops = ops;
  i.sf_layouts = layouts;
  i.m_multiple = m;
  i.n_multiple = n;
  i.k_multiple = k;
  i.flags = flags;
  return i;
}

TEST(Warmup, ProblemIsInsideTheDeclaration) {
  const uint32_t gemv = 1u << NVFP4_OP_GEMV, gemm = 1u << NVFP4_OP_GEMM;
  const uint32_t linear = 1u << NVFP4_SF_LINEAR, permuted = 1u << NVFP4_SF_PERMUTED;
  for (const nvfp4_kernel_info& i :
       {info(gemv, permuted, 128, 1, 64, NVFP4_FLAG_UNIT_ALPHA), info(gemm, permuted, 128, 128, 256),
        info(gemv | gemm, linear | permuted, 1, 1, 1), info(gemm, linear, 3, 5, 7), info(gemv, linear, 1, 1, 96),
        info(gemm, permuted, 1, 1, 1, NVFP4_FLAG_SIGNED_SCALES)}) {
    const CaseData d = warmup_case(i);
    EXPECT_EQ(unsupported_reason(i, d.problem), "") << warmup_shape_text(d.problem);
    EXPECT_TRUE(d.problem.has_data());
    EXPECT_LE(d.problem.m * d.problem.k, 128 * 256 * 3);
    EXPECT_EQ(d.problem.k % 2, 0);
    EXPECT_GE(d.problem.k, 64);
  }
  // A kernel of MX operands alone is warmed up with the first formats it declares.
  nvfp4_kernel_info mx = info(gemv | gemm, linear | permuted, 1, 1, 1);
  mx.abi_version = 3;
  mx.a_formats = 1u << NVFP4_FORMAT_MXFP8_E5M2;
  mx.b_formats = (1u << NVFP4_FORMAT_MXFP4) | (1u << NVFP4_FORMAT_MXFP8_E4M3);
  const CaseData m = warmup_case(mx);
  EXPECT_EQ(unsupported_reason(mx, m.problem), "");
  EXPECT_EQ(m.problem.b_format, BlockFormat::mxfp4);
  EXPECT_TRUE(m.problem.has_data());
  const CaseData gpumode = warmup_case(info(gemv, permuted, 128, 1, 64, NVFP4_FLAG_UNIT_ALPHA));
  EXPECT_EQ(warmup_shape_text(gpumode.problem), "128x1x64 gemv");
  EXPECT_EQ(gpumode.problem.a, warmup_case(info(gemv, permuted, 128, 1, 64)).problem.a) << "seeded";
  EXPECT_THROW(warmup_case(info(0, permuted, 1, 1, 1)), std::invalid_argument);
}

// A failed warm-up is the next case's first call, once, in the one wording every front end uses;
// a warm-up that returned leaves nothing for the cases.
TEST(Warmup, AFailedWarmupIsTheFirstCallOfOneCase) {
  const Problem p = warmup_case(info(1u << NVFP4_OP_GEMV, 1u << NVFP4_SF_PERMUTED, 128, 1, 64)).problem;
  WarmupFailure w;
  EXPECT_TRUE(w.record({CallObservation{}}, p));
  EXPECT_FALSE(w.hand_to_case());
  CallObservation crash;
  crash.end = CallObservation::End::crash;
  crash.error = "SIGSEGV";
  EXPECT_FALSE(w.record({crash}, p));
  const std::optional<std::vector<CallObservation>> first = w.hand_to_case();
  ASSERT_TRUE(first && first->size() == 1u);
  EXPECT_EQ(first->front().error, "during the warm-up call (one 128x1x64 gemv before the first case): SIGSEGV");
  EXPECT_FALSE(w.hand_to_case()) << "a later case tries again";
  CallObservation slow;
  slow.end = CallObservation::End::timeout;
  EXPECT_FALSE(w.record({slow}, p, ", --warmup-timeout 9 s", "9 s: raise it"));
  EXPECT_EQ(w.kept()->error, "the warm-up call (one 128x1x64 gemv before the first case, --warmup-timeout 9 s) "
                             "did not finish within 9 s: raise it");
}

}  // namespace
}  // namespace nvfp4
