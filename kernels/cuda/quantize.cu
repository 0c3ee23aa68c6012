// CUDA quantizers (SPEC section 2): one thread per scale block (or 16 x 16 tile) of X, the
// arithmetic of kernels/quantize_core.h. quantize_naive follows te, ref and torchao with IEEE
// reciprocals; quantize_fast is the production `fast` recipe, both reciprocals by
// rcp.approx.ftz.f32 as TensorRT-LLM, FlashInfer and vLLM write them; quantize_mx the MX formats
// by mx_rceil. The permuted SFQ's padding is written 0x00 first, on the same stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/builtin.h"
#include "kernels/host/host_quantize.h"

namespace nvfp4::kern {
namespace {

constexpr int kThreads = 128;

struct ApproxRcp {
  __device__ float operator()(float v) const {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
  }
};

template <class Rcp>
__global__ void quantize_kernel(nvfp4_problem p, uint32_t flags, int64_t tile, Rcp rcp) {
  const int64_t bs = quant::block_elems(p.q_format), kb = (p.k + bs - 1) / bs;
  const int64_t tiles = (p.m + tile - 1) / tile, units = p.l * tiles * kb;
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u < units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = u % kb, t = (u / kb) % tiles, b = u / (kb * tiles);
    const int64_t r0 = t * tile, r1 = r0 + tile < p.m ? r0 + tile : p.m;
    quant::quantize_block(p, flags, quant::Bug::none, b, r0, r1, s, rcp);
  }
}

template <class Rcp>
int launch(const nvfp4_kernel_info& info, const nvfp4_problem* p, Rcp rcp) {
  if (!quant::quantize_fits(info, p)) return NVFP4_UNSUPPORTED;
  const cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  const int64_t bs = quant::block_elems(p->q_format), kb = (p->k + bs - 1) / bs;
  if (p->sf_layout == NVFP4_SF_PERMUTED)
    cudaMemsetAsync(p->sfq, 0, static_cast<size_t>(quant::sf_bytes(NVFP4_SF_PERMUTED, p->m, kb, p->l)), stream);
  const int64_t tile = (info.flags & NVFP4_FLAG_QUANT_2D) ? 16 : 1;
  const int64_t units = p->l * ((p->m + tile - 1) / tile) * kb;
  const int64_t blocks = std::min<int64_t>((units + kThreads - 1) / kThreads, int64_t{1} << 20);
  quantize_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(*p, info.flags, tile, rcp);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: launch failed: %s: %s\n", info.name, cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kAllInTypes = (1u << NVFP4_IN_FP16) | (1u << NVFP4_IN_BF16) | (1u << NVFP4_IN_FP32);
constexpr uint32_t kQuantize = 1u << NVFP4_OP_QUANTIZE;
constexpr uint32_t kMxFormats =
    (1u << NVFP4_FORMAT_MXFP4) | (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);

int run_quantize_naive(const nvfp4_problem* p);
int run_quantize_fast(const nvfp4_problem* p);
int run_quantize_mx(const nvfp4_problem* p);

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

namespace {

int run_quantize_naive(const nvfp4_problem* p) { return launch(builtin_quantize_naive.info, p, quant::ExactRcp{}); }
int run_quantize_fast(const nvfp4_problem* p) { return launch(builtin_quantize_fast.info, p, ApproxRcp{}); }
int run_quantize_mx(const nvfp4_problem* p) { return launch(builtin_quantize_mx.info, p, quant::ExactRcp{}); }

}  // namespace
}  // namespace nvfp4::kern
