// Host MX kernels (OpenMP) for GEMV, GEMM, grouped GEMM (both arrangements) and dual GEMM with
// operands of any of SPEC.md's four formats, A and B each its own (kernels/host/host_mx_gemm.h's
// arithmetic: products and sums in double, one rounding to the output type; dual GEMM's silu(G) * U
// in FP32). The CI baseline for MX problems where there is no GPU.
#include "kernels/builtin.h"
#include "kernels/host/host_mx_gemm.h"

namespace nvfp4::kern {
namespace {

constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kAllOutTypes = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
constexpr uint32_t kAllFormats = (1u << NVFP4_FORMAT_NVFP4) | (1u << NVFP4_FORMAT_MXFP4) |
                                 (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);

int run_host_mx_gemv_fp32(const nvfp4_problem* p);
int run_host_mx_gemm_fp32(const nvfp4_problem* p);
int run_host_mx_grouped_gemm_fp32(const nvfp4_problem* p);
int run_host_mx_grouped_gemm_fp32_packed(const nvfp4_problem* p);
int run_host_mx_dual_gemm_fp32(const nvfp4_problem* p);

}  // namespace

// info: abi, name, memory, ops, sf_layouts, min_sm, m/n/k multiples, flags, out_types,
// max_groups, a_formats, b_formats.
NVFP4_DEFINE_BUILTIN(host_mx_gemv_fp32) = {
    {NVFP4_ABI_VERSION, "host_mx_gemv_fp32", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMV, kBothLayouts, 0, 1, 1, 1, 0,
     kAllOutTypes, 0, kAllFormats, kAllFormats},
    run_host_mx_gemv_fp32};
NVFP4_DEFINE_BUILTIN(host_mx_gemm_fp32) = {
    {NVFP4_ABI_VERSION, "host_mx_gemm_fp32", NVFP4_MEMORY_HOST, (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM),
     kBothLayouts, 0, 1, 1, 1, 0, kAllOutTypes, 0, kAllFormats, kAllFormats},
    run_host_mx_gemm_fp32};
NVFP4_DEFINE_BUILTIN(host_mx_grouped_gemm_fp32) = {
    {NVFP4_ABI_VERSION, "host_mx_grouped_gemm_fp32", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GROUPED_GEMM, kBothLayouts, 0, 1,
     1, 1, 0, kAllOutTypes, 0, kAllFormats, kAllFormats},
    run_host_mx_grouped_gemm_fp32};
NVFP4_DEFINE_BUILTIN(host_mx_grouped_gemm_fp32_packed) = {
    {NVFP4_ABI_VERSION, "host_mx_grouped_gemm_fp32_packed", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GROUPED_GEMM,
     kBothLayouts, 0, 1, 1, 1, NVFP4_FLAG_GROUPS_PACKED, kAllOutTypes, 0, kAllFormats, kAllFormats},
    run_host_mx_grouped_gemm_fp32_packed};
NVFP4_DEFINE_BUILTIN(host_mx_dual_gemm_fp32) = {
    {NVFP4_ABI_VERSION, "host_mx_dual_gemm_fp32", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_DUAL_GEMM, kBothLayouts, 0, 1, 1,
     1, 0, kAllOutTypes, 0, kAllFormats, kAllFormats},
    run_host_mx_dual_gemm_fp32};

namespace {
int run_host_mx_gemv_fp32(const nvfp4_problem* p) { return mx::run_mx(builtin_host_mx_gemv_fp32.info, p, mx::MxBug::none); }
int run_host_mx_gemm_fp32(const nvfp4_problem* p) { return mx::run_mx(builtin_host_mx_gemm_fp32.info, p, mx::MxBug::none); }
int run_host_mx_grouped_gemm_fp32(const nvfp4_problem* p) {
  return mx::run_mx_grouped(builtin_host_mx_grouped_gemm_fp32.info, p, mx::MxBug::none);
}
int run_host_mx_grouped_gemm_fp32_packed(const nvfp4_problem* p) {
  return mx::run_mx_grouped(builtin_host_mx_grouped_gemm_fp32_packed.info, p, mx::MxBug::none);
}
int run_host_mx_dual_gemm_fp32(const nvfp4_problem* p) {
  return mx::run_mx(builtin_host_mx_dual_gemm_fp32.info, p, mx::MxBug::none);
}
}  // namespace

}  // namespace nvfp4::kern
