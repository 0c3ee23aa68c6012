// gemm_naive: a simple correct CUDA NVFP4 GEMM. One block per 8x8 output tile; its 256 threads
// are 64 outputs x 4 k-lanes, lane q summing scale blocks q, q+4, q+8, ... in FP32, and the four
// lane sums reduced through shared memory in a fixed order (so results are deterministic).
// Any shape, both scale layouts, GEMV too (n == 1), FP16, BF16 or FP32 out.
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

constexpr int kTile = 8;                          // 8x8 outputs per block
constexpr int kLanes = 4;                         // threads splitting k per output
constexpr int kThreads = kTile * kTile * kLanes;  // 256

__global__ void gemm_naive_kernel(nvfp4_problem p, uint32_t out_type) {
  __shared__ float lane_sums[kLanes][kTile * kTile];
  const int64_t m = p.m, n = p.n, k = p.k, kb = (k + 15) / 16, row_bytes = k / 2;
  const int64_t tiles_m = (m + kTile - 1) / kTile, tiles_n = (n + kTile - 1) / kTile;
  const int64_t tiles = p.l * tiles_m * tiles_n;
  const int out = threadIdx.x % (kTile * kTile), lane = threadIdx.x / (kTile * kTile);
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t b = tile / (tiles_m * tiles_n), rest = tile % (tiles_m * tiles_n);
    const int64_t i = (rest / tiles_n) * kTile + out / kTile, j = (rest % tiles_n) * kTile + out % kTile;
    float acc = 0.0f;
    if (i < m && j < n) {  // threads of the ragged edge still reach the barriers below
      const uint8_t* a_row = p.a + (b * m + i) * row_bytes;
      const uint8_t* b_row = p.b + (b * n + j) * row_bytes;
      for (int64_t s = lane; s < kb; s += kLanes) {
        const float block_sum = block_products(a_row, b_row, s, k);
        const float sa = e4m3_to_float(p.sfa[scale_offset(p.sf_layout, m, kb, b, i, s)], false);
        const float sb = e4m3_to_float(p.sfb[scale_offset(p.sf_layout, n, kb, b, j, s)], false);
        acc += block_sum * (sa * sb);  // never skipped: a NaN scale must reach the output
      }
    }
    lane_sums[lane][out] = acc;
    __syncthreads();
    if (lane == 0 && i < m && j < n) {
      float total = lane_sums[0][out];
      for (int q = 1; q < kLanes; ++q) total += lane_sums[q][out];
      store_scaled(p.c, (b * m + i) * n + j, out_type, p.alpha, total);
    }
    __syncthreads();  // lane_sums is reused by the next tile
  }
}

int run_gemm_naive(const nvfp4_problem* p);

}  // namespace

NVFP4_DEFINE_BUILTIN(gemm_naive) = {
    {NVFP4_ABI_VERSION, "gemm_naive", NVFP4_MEMORY_CUDA, (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM),
     (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 90, 1, 1, 1, 0,
     (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32), 0},
    run_gemm_naive};

namespace {

int run_gemm_naive(const nvfp4_problem* p) {
  if (!problem_fits(builtin_gemm_naive.info, p)) return NVFP4_UNSUPPORTED;
  const int64_t tiles = p->l * ((p->m + kTile - 1) / kTile) * ((p->n + kTile - 1) / kTile);
  const int64_t blocks = std::min<int64_t>(tiles, int64_t{1} << 20);  // grid-stride beyond
  gemm_naive_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(p->stream)>>>(*p, problem_out_type(p));
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "gemm_naive: launch failed: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

}  // namespace
}  // namespace nvfp4::kern
