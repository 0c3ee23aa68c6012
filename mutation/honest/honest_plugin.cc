// The nvfp4_honest plugin: the honest variants behind the kernel ABI. The mutation analysis runs
// them through the same checks as the mutants; any failure is a false alarm of the suite.
#include "kernels/host/host_quantize.h"
#include "kernels/problem_fits.h"
#include "mutation/honest/honest_variants.h"

namespace nvfp4::honest {
namespace {

constexpr uint32_t kBothOps = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);

struct Entry {
  nvfp4_kernel_info info;
  bool cuda;
  int variant;  // HostVariant or CudaVariant
};

constexpr nvfp4_kernel_info host_info(const char* name, uint32_t flags) {
  return {NVFP4_ABI_VERSION, name, NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, flags};
}
constexpr nvfp4_kernel_info cuda_info(const char* name, uint32_t flags) {
  return {NVFP4_ABI_VERSION, name, NVFP4_MEMORY_CUDA, kBothOps, kBothLayouts, 90, 1, 1, 1, flags};
}
// Grouped GEMM in the separate arrangement only (no GROUPS_PACKED), every output type, any G.
constexpr nvfp4_kernel_info grouped_cuda_info(const char* name, uint32_t flags) {
  constexpr uint32_t all_out = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
  return {NVFP4_ABI_VERSION, name, NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GROUPED_GEMM, kBothLayouts, 90, 1, 1, 1, flags,
          all_out, 0};
}

// Dual GEMM, every output type.
constexpr nvfp4_kernel_info dual_info(const char* name, uint32_t memory) {
  constexpr uint32_t all_out = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
  return {NVFP4_ABI_VERSION, name, memory, 1u << NVFP4_OP_DUAL_GEMM, kBothLayouts, memory == NVFP4_MEMORY_CUDA ? 90u : 0u,
          1, 1, 1, 0, all_out, 0};
}

const Entry kEntries[] = {
    {host_info("honest_host_forward", 0), false, static_cast<int>(HostVariant::forward)},
    {host_info("honest_host_reverse", 0), false, static_cast<int>(HostVariant::reverse)},
    {host_info("honest_host_pairwise", 0), false, static_cast<int>(HostVariant::pairwise)},
    {host_info("honest_host_split_k_random", NVFP4_FLAG_NONDETERMINISTIC), false,
     static_cast<int>(HostVariant::split_k_random)},
    {host_info("honest_host_fp64", 0), false, static_cast<int>(HostVariant::fp64)},
    {host_info("honest_host_truncating", 0), false, static_cast<int>(HostVariant::truncating)},
    {host_info("honest_host_fp16_dequant", 0), false, static_cast<int>(HostVariant::fp16_dequant)},
    {host_info("honest_host_signed_scales", NVFP4_FLAG_SIGNED_SCALES), false,
     static_cast<int>(HostVariant::signed_scales)},
    {dual_info("honest_host_dual_fp32", NVFP4_MEMORY_HOST), false, static_cast<int>(HostVariant::dual_fp32)},
#if defined(NVFP4_HONEST_WITH_CUDA)
    {cuda_info("honest_cuda_warp_tree", 0), true, static_cast<int>(CudaVariant::warp_tree)},
    {cuda_info("honest_cuda_atomic_split_k", NVFP4_FLAG_NONDETERMINISTIC), true,
     static_cast<int>(CudaVariant::atomic_split_k)},
    {cuda_info("honest_cuda_fp16_dequant", 0), true, static_cast<int>(CudaVariant::fp16_dequant)},
    {cuda_info("honest_cuda_fp64", 0), true, static_cast<int>(CudaVariant::fp64)},
    // Matrix-unit accumulation (SPEC section 3, revision 2): judged by the matrix-unit model.
    {cuda_info("honest_cuda_mma_f16", NVFP4_FLAG_MMA_ACCUMULATE), true, static_cast<int>(CudaVariant::mma_f16)},
    {cuda_info("honest_cuda_mma_split_k_bf16", NVFP4_FLAG_MMA_ACCUMULATE), true,
     static_cast<int>(CudaVariant::mma_split_k_bf16)},
    {cuda_info("honest_cuda_wgmma_f16", NVFP4_FLAG_MMA_ACCUMULATE), true, static_cast<int>(CudaVariant::wgmma_f16)},
    // cuBLAS's grouped FP16 GEMM adds on the tensor cores: the same matrix-unit rule.
    {grouped_cuda_info("honest_cuda_cublas_grouped_f16", NVFP4_FLAG_MMA_ACCUMULATE), true,
     static_cast<int>(CudaVariant::cublas_grouped_f16)},
    {dual_info("honest_cuda_dual_fp32_fast", NVFP4_MEMORY_CUDA), true, static_cast<int>(CudaVariant::dual_fp32_fast)},
#endif
};

constexpr int kGemmCount = static_cast<int>(sizeof(kEntries) / sizeof(kEntries[0]));

// Quantizers that differ from the recipe's reference only where rule 7 allows (SPEC section 3):
// reciprocals 1 ulp off for `fast`, zero codes of the other sign, any code for a NaN element, stochastic rounding from
// another random generator.
struct QuantEntry {
  nvfp4_kernel_info info;
  kern::quant::Bug variation;
};
constexpr uint32_t kAllInTypes = (1u << NVFP4_IN_FP16) | (1u << NVFP4_IN_BF16) | (1u << NVFP4_IN_FP32);
constexpr nvfp4_kernel_info quant_info(const char* name, uint32_t recipes, uint32_t flags = 0) {
  return {NVFP4_ABI_VERSION, name, NVFP4_MEMORY_HOST, 1u << NVFP4_OP_QUANTIZE, kBothLayouts, 0, 1, 1, 1, flags, 0, 0, 0, 0,
          kAllInTypes, 1u << NVFP4_FORMAT_NVFP4, recipes};
}
const QuantEntry kQuantEntries[] = {
    {quant_info("honest_host_quantize_fast_rcp_ulp", 1u << NVFP4_RECIPE_FAST), kern::quant::Bug::honest_rcp_jitter},
    {quant_info("honest_host_quantize_plus_zero",
                (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_REF) | (1u << NVFP4_RECIPE_TORCHAO)),
     kern::quant::Bug::honest_plus_zero},
    {quant_info("honest_host_quantize_nan_code_zero", (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_FAST)),
     kern::quant::Bug::honest_nan_code_zero},
    {quant_info("honest_host_quantize_sr_other_generator", (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_FAST),
                NVFP4_FLAG_STOCHASTIC),
     kern::quant::Bug::honest_sr_other_generator},
};
constexpr int kQuantCount = static_cast<int>(sizeof(kQuantEntries) / sizeof(kQuantEntries[0]));
constexpr int kCount = kGemmCount + kQuantCount;

}  // namespace
}  // namespace nvfp4::honest

using nvfp4::honest::kCount;
using nvfp4::honest::kEntries;
using nvfp4::honest::kGemmCount;
using nvfp4::honest::kQuantEntries;

extern "C" __attribute__((visibility("default"))) int nvfp4_kernel_count(void) { return kCount; }

extern "C" __attribute__((visibility("default"))) const nvfp4_kernel_info* nvfp4_kernel_get(int index) {
  if (index < 0 || index >= kCount) return nullptr;
  return index < kGemmCount ? &kEntries[index].info : &kQuantEntries[index - kGemmCount].info;
}

extern "C" __attribute__((visibility("default"))) int nvfp4_kernel_run(int index, const nvfp4_problem* p) {
  if (index < 0 || index >= kCount) return NVFP4_ERROR;
  if (index >= kGemmCount) {
    const auto& q = kQuantEntries[index - kGemmCount];
    return nvfp4::kern::quant::quantize_on_host(p, q.info, q.variation);
  }
  const auto& e = kEntries[index];
  if (!nvfp4::kern::problem_fits(e.info, p)) return NVFP4_UNSUPPORTED;
#if defined(NVFP4_HONEST_WITH_CUDA)
  if (e.cuda) return nvfp4::honest::run_cuda_variant(static_cast<nvfp4::honest::CudaVariant>(e.variant), p);
#endif
  return nvfp4::honest::run_host_variant(static_cast<nvfp4::honest::HostVariant>(e.variant), p);
}
