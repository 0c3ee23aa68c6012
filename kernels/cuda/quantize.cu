// CUDA quantizers (SPEC section 2): one thread per scale block (or 16 x 16 tile) of X, the
// arithmetic of kernels/quantize_core.h. quantize_naive follows te, ref and torchao with IEEE
// reciprocals; quantize_fast is the production `fast` recipe, both reciprocals by
// rcp.approx.ftz.f32 as TensorRT-LLM, FlashInfer and vLLM write them; quantize_mx the MX formats
// by mx_rceil; quantize_sr te with stochastic rounding (the host's bytes for the same seed). The
// permuted SFQ's padding is written 0x00 first, on the same stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/builtin.h"
#include "kernels/cuda/quantize_launch.cuh"

namespace nvfp4::kern {
namespace {

constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kAllInTypes = (1u << NVFP4_IN_FP16) | (1u << NVFP4_IN_BF16) | (1u << NVFP4_IN_FP32);
constexpr uint32_t kQuantize = 1u << NVFP4_OP_QUANTIZE;
constexpr uint32_t kMxFormats =
    (1u << NVFP4_FORMAT_MXFP4) | (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);

int run_quantize_naive(const nvfp4_problem* p);
int run_quantize_fast(const nvfp4_problem* p);
int run_quantize_mx(const nvfp4_problem* p);
int run_quantize_sr(const nvfp4_problem* p);

}  // namespace

// info: abi, name, memory, ops, sf_layouts, min_sm, m/n/k multiples, flags, out_types,
// max_groups, a_formats, b_formats, in_types, q_formats, recipes.
NVFP4_DEFINE_BUILTIN(quantize_naive) = {
    {NVFP4_ABI_VERSION, "quantize_naive", NVFP4_MEMORY_CUDA, kQuantize, kBothLayouts, 90, 1, 1, 1, 0, 0, 0, 0, 0,
     kAllInTypes, 1u << NVFP4_FORMAT_NVFP4,
     (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_REF) | (1u << NVFP4_RECIPE_TORCHAO)},
    run_quantize_naive};
NVFP4_DEFINE_BUILTIN(quantize_fast) = {
    {NVFP4_ABI_VERSION, "quantize_fast", NVFP4_MEMORY_CUDA, kQuantize, kBothLayouts, 90, 1, 1, 1, 0, 0, 0, 0, 0,
     kAllInTypes, 1u << NVFP4_FORMAT_NVFP4, 1u << NVFP4_RECIPE_FAST},
    run_quantize_fast};
NVFP4_DEFINE_BUILTIN(quantize_mx) = {
    {NVFP4_ABI_VERSION, "quantize_mx", NVFP4_MEMORY_CUDA, kQuantize, kBothLayouts, 90, 1, 1, 1, 0, 0, 0, 0, 0,
     kAllInTypes, kMxFormats, 1u << NVFP4_RECIPE_MX_RCEIL},
    run_quantize_mx};
NVFP4_DEFINE_BUILTIN(quantize_sr) = {
    {NVFP4_ABI_VERSION, "quantize_sr", NVFP4_MEMORY_CUDA, kQuantize, kBothLayouts, 90, 1, 1, 1, NVFP4_FLAG_STOCHASTIC, 0,
     0, 0, 0, kAllInTypes, 1u << NVFP4_FORMAT_NVFP4, 1u << NVFP4_RECIPE_TE},
    run_quantize_sr};

namespace {

int run_quantize_naive(const nvfp4_problem* p) {
  return quant::launch(builtin_quantize_naive.info, p, quant::ExactRcp{}, quant::Bug::none);
}
int run_quantize_fast(const nvfp4_problem* p) {
  return quant::launch(builtin_quantize_fast.info, p, quant::ApproxRcp{}, quant::Bug::none);
}
int run_quantize_mx(const nvfp4_problem* p) {
  return quant::launch(builtin_quantize_mx.info, p, quant::ExactRcp{}, quant::Bug::none);
}

int run_quantize_sr(const nvfp4_problem* p) {
  return quant::launch(builtin_quantize_sr.info, p, quant::ExactRcp{}, quant::Bug::none);
}

}  // namespace
}  // namespace nvfp4::kern
