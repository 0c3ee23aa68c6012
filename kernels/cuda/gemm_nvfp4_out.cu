// gemm_nvfp4_out_naive and grouped_gemm_nvfp4_out_naive: simple correct CUDA GEMM, dual GEMM and
// grouped GEMM with block-scaled output (out_type nvfp4, SPEC.md section 2), one thread per
// 16-column block of an output row (kernels/cuda/gemm_nvfp4_out_launch.cuh, the arithmetic of
// kernels/block_scaled_epilogue.h). The grouped kernel takes each group's global scale from the
// group_out table (the separate arrangement only; the packed one has no place for each group's Q
// and SFQ). Any shape with n even, both layouts, the te, ref, fast and torchao recipes.
#include "kernels/builtin.h"
#include "kernels/cuda/gemm_nvfp4_out_launch.cuh"

namespace nvfp4::kern {
namespace {

int run_gemm_nvfp4_out_naive(const nvfp4_problem* p);
int run_grouped_gemm_nvfp4_out_naive(const nvfp4_problem* p);

constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kRecipes =
    (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_REF) | (1u << NVFP4_RECIPE_FAST) | (1u << NVFP4_RECIPE_TORCHAO);

}  // namespace

// info: abi, name, memory, ops, sf_layouts, min_sm, m/n/k multiples, flags, out_types,
// max_groups, a_formats, b_formats, in_types, q_formats, recipes.
NVFP4_DEFINE_BUILTIN(gemm_nvfp4_out_naive) = {
    {NVFP4_ABI_VERSION, "gemm_nvfp4_out_naive", NVFP4_MEMORY_CUDA, (1u << NVFP4_OP_GEMM) | (1u << NVFP4_OP_DUAL_GEMM),
     kBothLayouts, 90, 1, 1, 1, 0, 1u << NVFP4_OUT_NVFP4, 0, 0, 0, 0, 0, kRecipes},
    run_gemm_nvfp4_out_naive};
NVFP4_DEFINE_BUILTIN(grouped_gemm_nvfp4_out_naive) = {
    {NVFP4_ABI_VERSION, "grouped_gemm_nvfp4_out_naive", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GROUPED_GEMM, kBothLayouts,
     90, 1, 1, 1, 0, 1u << NVFP4_OUT_NVFP4, static_cast<uint32_t>(quant::kOutMaxGroups), 0, 0, 0, 0, kRecipes},
    run_grouped_gemm_nvfp4_out_naive};

namespace {

int run_gemm_nvfp4_out_naive(const nvfp4_problem* p) {
  return quant::launch_gemm_nvfp4_out(builtin_gemm_nvfp4_out_naive.info, p, quant::Bug::none);
}
int run_grouped_gemm_nvfp4_out_naive(const nvfp4_problem* p) {
  return quant::launch_grouped_gemm_nvfp4_out(builtin_grouped_gemm_nvfp4_out_naive.info, p, quant::Bug::none);
}

}  // namespace
}  // namespace nvfp4::kern
