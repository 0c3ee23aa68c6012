// gemv_naive: the simplest correct CUDA NVFP4 GEMV, one thread per output row. Any shape, both
// scale layouts, FP32 accumulation (exact 16-element block sums, scaled by sa*sb, accumulated in
// FP32, alpha at the end, one rounding to FP16, BF16 or FP32). A baseline the fast kernels are compared with.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/block_scaled_decode.h"
#include "kernels/builtin.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

constexpr int kThreads = 256;

__global__ void gemv_naive_kernel(nvfp4_problem p, uint32_t out) {
  const int64_t m = p.m, k = p.k, rows = p.l * p.m, kb = (k + 15) / 16, row_bytes = k / 2;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = row / m, i = row % m;
    const uint8_t* a_row = p.a + row * row_bytes;
    const uint8_t* x_row = p.b + b * row_bytes;  // n == 1: B of batch b is one row
    float acc = 0.0f;
    for (int64_t s = 0; s < kb; ++s) {
      const float block_sum = block_products(a_row, x_row, s, k);
      const float sa = e4m3_to_float(p.sfa[scale_offset(p.sf_layout, m, kb, b, i, s)], false);
      const float sb = e4m3_to_float(p.sfb[scale_offset(p.sf_layout, 1, kb, b, 0, s)], false);
      acc += block_sum * (sa * sb);  // never skipped: a NaN scale must reach the output
    }
    store_scaled(p.c, row, out, p.alpha, acc);
  }
}

int run_gemv_naive(const nvfp4_problem* p);

}  // namespace

NVFP4_DEFINE_BUILTIN(gemv_naive) = {
    {NVFP4_ABI_VERSION, "gemv_naive", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GEMV,
     (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 90, 1, 1, 1, 0,
     (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32), 0},
    run_gemv_naive};

namespace {

int run_gemv_naive(const nvfp4_problem* p) {
  if (!problem_fits(builtin_gemv_naive.info, p)) return NVFP4_UNSUPPORTED;
  const int64_t rows = p->l * p->m;
  // Grid-stride loop: cap the grid, every thread then walks its rows.
  const int64_t blocks = std::min<int64_t>((rows + kThreads - 1) / kThreads, int64_t{1} << 20);
  gemv_naive_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(p->stream)>>>(*p, problem_out_type(p));
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "gemv_naive: launch failed: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

}  // namespace
}  // namespace nvfp4::kern
