// gemm_nvfp4_out_naive: a simple correct CUDA GEMM and dual GEMM with block-scaled output
// (out_type nvfp4, SPEC.md section 2): one thread per 16-column block of a row accumulates its
// (up to) 16 results in FP32 (each 16-element k block in FP32, times sa*sb, k blocks in order),
// alpha * acc (dual: silu(G) * U with the accurate expf and an IEEE division) rounded to FP32,
// then quantizes them with the recipe and the global scale (kernels/block_scaled_epilogue.h,
// IEEE reciprocals, inside `fast`'s window). SFQ is zeroed on the stream first, which writes the
// permuted layout's padding cells 0x00. Any shape with n even, both layouts.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/block_scaled_decode.h"
#include "kernels/block_scaled_epilogue.h"
#include "kernels/builtin.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

__device__ float out_dot(const nvfp4_problem& p, const uint8_t* b_data, const uint8_t* b_scales, int64_t b, int64_t i,
                         int64_t j) {
  const int64_t m = p.m, n = p.n, k = p.k, kb = (k + 15) / 16;
  const uint8_t* a_row = p.a + (b * m + i) * (k / 2);
  const uint8_t* b_row = b_data + (b * n + j) * (k / 2);
  float acc = 0.0f;
  for (int64_t s = 0; s < kb; ++s) {
    const float sa = e4m3_to_float(p.sfa[scale_offset(p.sf_layout, m, kb, b, i, s)], false);
    const float sb = e4m3_to_float(b_scales[scale_offset(p.sf_layout, n, kb, b, j, s)], false);
    acc += block_products(a_row, b_row, s, k) * (sa * sb);  // never skipped: NaN must show
  }
  return acc;
}

__global__ void gemm_nvfp4_out_kernel(nvfp4_problem p) {
  const int64_t m = p.m, n = p.n, nb = (n + 15) / 16, blocks = p.l * m * nb;
  const bool dual = p.op == NVFP4_OP_DUAL_GEMM;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < blocks;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = t / (m * nb), i = t / nb % m, s = t % nb;
    const int64_t count = n - 16 * s < 16 ? n - 16 * s : 16;
    float v[16];
    for (int64_t c = 0; c < count; ++c) {
      const int64_t j = 16 * s + c;
      const float g = p.alpha * out_dot(p, p.b, p.sfb, b, i, j);
      if (!dual) {
        v[c] = g;
        continue;
      }
      const float u = p.alpha2 * out_dot(p, p.b2, p.sfb2, b, i, j);
      const float silu = g / (1.0f + expf(-g));
      v[c] = silu * u;
    }
    quant::quantize_out_block(v, count, p.recipe, p.global_scale[0], p.sf_layout, m, nb, b, i, s,
                              p.q + (b * m + i) * (n / 2), p.sfq, quant::ExactRcp{}, quant::Bug::none);
  }
}

int run_gemm_nvfp4_out_naive(const nvfp4_problem* p);

}  // namespace

NVFP4_DEFINE_BUILTIN(gemm_nvfp4_out_naive) = {
    {NVFP4_ABI_VERSION, "gemm_nvfp4_out_naive", NVFP4_MEMORY_CUDA, (1u << NVFP4_OP_GEMM) | (1u << NVFP4_OP_DUAL_GEMM),
     (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 90, 1, 1, 1, 0, 1u << NVFP4_OUT_NVFP4, 0, 0, 0, 0, 0,
     (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_REF) | (1u << NVFP4_RECIPE_FAST) | (1u << NVFP4_RECIPE_TORCHAO)},
    run_gemm_nvfp4_out_naive};

namespace {

int run_gemm_nvfp4_out_naive(const nvfp4_problem* p) {
  if (!problem_fits(builtin_gemm_nvfp4_out_naive.info, p) || p->op == NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  const int64_t nb = (p->n + 15) / 16, blocks = p->l * p->m * nb;
  cudaError_t err = cudaMemsetAsync(p->sfq, 0, static_cast<size_t>(quant::sf_bytes(p->sf_layout, p->m, nb, p->l)), stream);
  if (err == cudaSuccess) {
    const int64_t grid = std::min<int64_t>((blocks + 255) / 256, int64_t{1} << 20);  // grid-stride beyond
    gemm_nvfp4_out_kernel<<<static_cast<unsigned>(grid), 256, 0, stream>>>(*p);
    err = cudaGetLastError();
  }
  if (err != cudaSuccess) {
    std::fprintf(stderr, "gemm_nvfp4_out_naive: launch failed: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

}  // namespace
}  // namespace nvfp4::kern
