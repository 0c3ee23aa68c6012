// dual_gemm_naive: a simple correct CUDA NVFP4 dual GEMM with SiLU (the gate/up projection of a
// SwiGLU MLP, GPU MODE's nvfp4_dual_gemm): C = RN_out(silu(G) * U), G = alpha * A B1^T and
// U = alpha2 * A B2^T, both accumulated in FP32 like gemm_naive (one block per 8x8 output tile,
// 4 k-lanes per output reduced in a fixed order), G, U, silu (the accurate expf and an IEEE
// division) and the product in FP32, then rounded to the output type (kernels/output_words.h).
// Any shape, both layouts, FP16, BF16 or FP32 out.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/block_scaled_decode.h"
#include "kernels/builtin.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

constexpr int kTile = 8;
constexpr int kLanes = 4;
constexpr int kThreads = kTile * kTile * kLanes;  // 256

__global__ void dual_gemm_naive_kernel(nvfp4_problem p, uint32_t out) {
  __shared__ float lane_sums[2][kLanes][kTile * kTile];  // G's and U's
  const int64_t m = p.m, n = p.n, k = p.k, kb = (k + 15) / 16, row_bytes = k / 2;
  const int64_t tiles_m = (m + kTile - 1) / kTile, tiles_n = (n + kTile - 1) / kTile;
  const int64_t tiles = p.l * tiles_m * tiles_n;
  const int out_idx = threadIdx.x % (kTile * kTile), lane = threadIdx.x / (kTile * kTile);
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t b = tile / (tiles_m * tiles_n), rest = tile % (tiles_m * tiles_n);
    const int64_t i = (rest / tiles_n) * kTile + out_idx / kTile, j = (rest % tiles_n) * kTile + out_idx % kTile;
    float gate = 0.0f, up = 0.0f;
    if (i < m && j < n) {
      const uint8_t* a_row = p.a + (b * m + i) * row_bytes;
      const uint8_t* b1_row = p.b + (b * n + j) * row_bytes;
      const uint8_t* b2_row = p.b2 + (b * n + j) * row_bytes;
      for (int64_t s = lane; s < kb; s += kLanes) {
        const float sa = e4m3_to_float(p.sfa[scale_offset(p.sf_layout, m, kb, b, i, s)], false);
        const float sb1 = e4m3_to_float(p.sfb[scale_offset(p.sf_layout, n, kb, b, j, s)], false);
        const float sb2 = e4m3_to_float(p.sfb2[scale_offset(p.sf_layout, n, kb, b, j, s)], false);
        gate += block_products(a_row, b1_row, s, k) * (sa * sb1);  // never skipped: NaN must show
        up += block_products(a_row, b2_row, s, k) * (sa * sb2);
      }
    }
    lane_sums[0][lane][out_idx] = gate;
    lane_sums[1][lane][out_idx] = up;
    __syncthreads();
    if (lane == 0 && i < m && j < n) {
      float g = lane_sums[0][0][out_idx], u = lane_sums[1][0][out_idx];
      for (int x = 1; x < kLanes; ++x) {
        g += lane_sums[0][x][out_idx];
        u += lane_sums[1][x][out_idx];
      }
      store_silu_product(p.c, (b * m + i) * n + j, out, p.alpha * g, p.alpha2 * u);
    }
    __syncthreads();
  }
}

int run_dual_gemm_naive(const nvfp4_problem* p);

}  // namespace

NVFP4_DEFINE_BUILTIN(dual_gemm_naive) = {
    {NVFP4_ABI_VERSION, "dual_gemm_naive", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_DUAL_GEMM,
     (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 90, 1, 1, 1, 0,
     (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32), 0},
    run_dual_gemm_naive};

namespace {

int run_dual_gemm_naive(const nvfp4_problem* p) {
  if (!problem_fits(builtin_dual_gemm_naive.info, p)) return NVFP4_UNSUPPORTED;
  const int64_t tiles = p->l * ((p->m + kTile - 1) / kTile) * ((p->n + kTile - 1) / kTile);
  const int64_t blocks = std::min<int64_t>(tiles, int64_t{1} << 20);  // grid-stride beyond
  dual_gemm_naive_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(p->stream)>>>(
      *p, problem_out_type(p));
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "dual_gemm_naive: launch failed: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

}  // namespace
}  // namespace nvfp4::kern
