// Host quantizers (SPEC section 2): NVFP4 by the te, ref, fast and torchao recipes (the host's
// exact reciprocals lie inside `fast`'s window), with 16 x 16 tiles or per-row global scales, and
// the MX formats by mx_rceil, mx_floor and mx_even, and NVFP4 with stochastic rounding (te and fast). The CI baseline for the quantize op; the arithmetic is
// kernels/quantize_core.h's, the loop kernels/host/host_quantize.h's.
#include "kernels/builtin.h"
#include "kernels/host/host_quantize.h"

namespace nvfp4::kern {
namespace {

constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kAllInTypes = (1u << NVFP4_IN_FP16) | (1u << NVFP4_IN_BF16) | (1u << NVFP4_IN_FP32);
constexpr uint32_t kNvfp4Recipes =
    (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_REF) | (1u << NVFP4_RECIPE_FAST) | (1u << NVFP4_RECIPE_TORCHAO);
constexpr uint32_t kMxFormats =
    (1u << NVFP4_FORMAT_MXFP4) | (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);
constexpr uint32_t kQuantize = 1u << NVFP4_OP_QUANTIZE;

// info: abi, name, memory, ops, sf_layouts, min_sm, m/n/k multiples, flags, out_types,
// max_groups, a_formats, b_formats, in_types, q_formats, recipes.
#define NVFP4_HOST_QUANTIZER(name, flags, formats, recipes)                                                      \
  int run_##name(const nvfp4_problem* p);                                                                        \
  NVFP4_DEFINE_BUILTIN(name) = {{NVFP4_ABI_VERSION, #name, NVFP4_MEMORY_HOST, kQuantize, kBothLayouts, 0, 1, 1, 1, \
                                 flags, 0, 0, 0, 0, kAllInTypes, formats, recipes},                              \
                                run_##name};                                                                     \
  int run_##name(const nvfp4_problem* p) { return quant::quantize_on_host(p, builtin_##name.info, quant::Bug::none); }

}  // namespace

NVFP4_HOST_QUANTIZER(host_quantize_nvfp4, 0, 1u << NVFP4_FORMAT_NVFP4, kNvfp4Recipes)
NVFP4_HOST_QUANTIZER(host_quantize_nvfp4_2d, NVFP4_FLAG_QUANT_2D, 1u << NVFP4_FORMAT_NVFP4, 1u << NVFP4_RECIPE_TE)
NVFP4_HOST_QUANTIZER(host_quantize_nvfp4_rows, NVFP4_FLAG_ROW_GLOBAL_SCALE, 1u << NVFP4_FORMAT_NVFP4,
                     (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_FAST))
// Stochastic rounding (gradients): the codes from a hash of (seed, element index).
NVFP4_HOST_QUANTIZER(host_quantize_nvfp4_sr, NVFP4_FLAG_STOCHASTIC, 1u << NVFP4_FORMAT_NVFP4,
                     (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_FAST))
NVFP4_HOST_QUANTIZER(host_quantize_mx, 0, kMxFormats,
                     (1u << NVFP4_RECIPE_MX_RCEIL) | (1u << NVFP4_RECIPE_MX_FLOOR) | (1u << NVFP4_RECIPE_MX_EVEN))

}  // namespace nvfp4::kern
