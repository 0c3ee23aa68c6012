// mx_gemm_naive (GEMV/GEMM), mx_grouped_gemm_naive (separate and _packed) and mx_dual_gemm_naive:
// simple correct CUDA kernels for operands of any pair of the four block
// formats (NVFP4, MXFP4, MXFP8 E4M3 and E5M2; A and B may differ), FP32 accumulation, both
// scale layouts, FP16, BF16 or FP32 out. The kernel is kernels/cuda/mx_gemm_naive.cuh.
#include "kernels/builtin.h"
#include "kernels/cuda/mx_gemm_naive.cuh"

namespace nvfp4::kern {
namespace {

constexpr uint32_t kAllFormats = (1u << NVFP4_FORMAT_NVFP4) | (1u << NVFP4_FORMAT_MXFP4) |
                                 (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);

int run_mx_gemm_naive(const nvfp4_problem* p);
int run_mx_grouped_gemm_naive(const nvfp4_problem* p);
int run_mx_grouped_gemm_naive_packed(const nvfp4_problem* p);
int run_mx_dual_gemm_naive(const nvfp4_problem* p);
constexpr uint32_t kOutTypes = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
constexpr uint32_t kLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);

}  // namespace

NVFP4_DEFINE_BUILTIN(mx_gemm_naive) = {
    {NVFP4_ABI_VERSION, "mx_gemm_naive", NVFP4_MEMORY_CUDA, (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM),
     (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 90, 1, 1, 1, 0,
     (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32), 0, kAllFormats, kAllFormats, 0, 0, 0},
    run_mx_gemm_naive};
NVFP4_DEFINE_BUILTIN(mx_grouped_gemm_naive) = {
    {NVFP4_ABI_VERSION, "mx_grouped_gemm_naive", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GROUPED_GEMM, kLayouts, 90, 1, 1, 1,
     0, kOutTypes, 0, kAllFormats, kAllFormats, 0, 0, 0},
    run_mx_grouped_gemm_naive};
NVFP4_DEFINE_BUILTIN(mx_grouped_gemm_naive_packed) = {
    {NVFP4_ABI_VERSION, "mx_grouped_gemm_naive_packed", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GROUPED_GEMM, kLayouts, 90, 1,
     1, 1, NVFP4_FLAG_GROUPS_PACKED, kOutTypes, 0, kAllFormats, kAllFormats, 0, 0, 0},
    run_mx_grouped_gemm_naive_packed};
NVFP4_DEFINE_BUILTIN(mx_dual_gemm_naive) = {
    {NVFP4_ABI_VERSION, "mx_dual_gemm_naive", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_DUAL_GEMM, kLayouts, 90, 1, 1, 1, 0,
     kOutTypes, 0, kAllFormats, kAllFormats, 0, 0, 0},
    run_mx_dual_gemm_naive};

namespace {

int run_mx_gemm_naive(const nvfp4_problem* p) { return mx::launch_naive(builtin_mx_gemm_naive.info, p, mx::MxBug::none); }
int run_mx_grouped_gemm_naive(const nvfp4_problem* p) {
  return mx::launch_naive(builtin_mx_grouped_gemm_naive.info, p, mx::MxBug::none);
}
int run_mx_grouped_gemm_naive_packed(const nvfp4_problem* p) {
  return mx::launch_naive(builtin_mx_grouped_gemm_naive_packed.info, p, mx::MxBug::none);
}
int run_mx_dual_gemm_naive(const nvfp4_problem* p) {
  return mx::launch_naive(builtin_mx_dual_gemm_naive.info, p, mx::MxBug::none);
}

}  // namespace
}  // namespace nvfp4::kern
