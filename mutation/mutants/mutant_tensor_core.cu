// The tensor-core mutant engine: a correct NVFP4 GEMM/GEMV on mma.sync m16n8k16 (FP16 operands,
// FP32 accumulators) with split-k inside a block: four warps per 16 x 8 output tile, warp w
// accumulating its own range of k16 steps, the four FP32 partials added in warp order. With
// Bug::none it is the control ctl_cuda_mma_unmutated (declares MMA_ACCUMULATE, must pass); each
// tensor-core mutant switches on one of the bugs such kernels have:
//   mma_k16_step_dropped    a k loop unrolled by two whose remainder handling forgets the odd
//                           full step: the last full k16 step is skipped when k/16 is odd.
//   mma_subnormal_operands  operands stored as value * 2^-14 (the old gemm_tc), FP16 subnormals
//                           for |value| < 1, whose products Hopper's mma.sync truncates; declares
//                           IEEE accumulation, as the old gemm_tc did.
//   split_k_partial_twice   the last warp's partial is added twice.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/block_scaled_decode.h"
#include "mutation/mutants/mutant_engines.h"
#include "kernels/tensor_core_layouts.h"

namespace nvfp4::mutants {
namespace {

namespace tc = kern::tc;

constexpr int kWarps = 4;  // k splits per tile

__device__ __forceinline__ uint32_t half2_bits(kern::FactorPair f, float scale) {
  // f.lo * scale is exact (a power-of-two scale of a value with 6 significant bits, no lower than
  // 2^-24): a normal half for scale 1, possibly subnormal for 2^-14.
  const __half2 h = __floats2half2_rn(f.lo * scale, f.hi * scale);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__global__ void __launch_bounds__(kWarps * 32) tc_mutant_kernel(nvfp4_problem p, Bug bug) {
  __shared__ float partial[kWarps][32][4];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t tiles_n = (p.n + 7) / 8, tiles_m = (p.m + 15) / 16, tiles = p.l * tiles_m * tiles_n;
  const int64_t steps = (p.k + 15) / 16, full_steps = p.k / 16;
  const int64_t s_begin = steps * warp / kWarps, s_end = steps * (warp + 1) / kWarps;
  // The operand scale, undone in the epilogue: 2^-14 per operand, 2^28 per product.
  const bool subnormal = bug == Bug::mma_subnormal_operands;
  const float operand_scale = subnormal ? 0x1p-14f : 1.0f, product_unit = subnormal ? 0x1p28f : 1.0f;

  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / (tiles_m * tiles_n), m0 = (t / tiles_n) % tiles_m * 16, n0 = t % tiles_n * 8;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t s = s_begin; s < s_end; ++s) {
      if (bug == Bug::mma_k16_step_dropped && full_steps % 2 == 1 && s == full_steps - 1) continue;
      uint32_t a[4], bf[2];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const tc::RowCol q = tc::mma_a_pair(lane, r);
        a[r] = half2_bits(kern::dequantized_pair(p.a, p.sfa, p.sf_layout, p.m, p.k, b, m0 + q.row, 16 * s + q.col),
                          operand_scale);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const tc::RowCol q = tc::mma_b_pair(lane, r);  // row: k, col: n
        bf[r] = half2_bits(kern::dequantized_pair(p.b, p.sfb, p.sf_layout, p.n, p.k, b, n0 + q.col, 16 * s + q.row),
                           operand_scale);
      }
      mma_16816(d, a, bf);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) partial[warp][lane][i] = d[i];
    __syncthreads();
    if (warp == 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float acc = partial[0][lane][i];
        for (int w = 1; w < kWarps; ++w) acc += partial[w][lane][i];
        if (bug == Bug::split_k_partial_twice) acc += partial[kWarps - 1][lane][i];
        const tc::RowCol e = tc::mma_c_element(lane, i);
        const int64_t row = m0 + e.row, col = n0 + e.col;
        if (row < p.m && col < p.n) p.c[(b * p.m + row) * p.n + col] = mutant_epilogue(acc * product_unit, p.alpha, bug);
      }
    }
    __syncthreads();  // partial[] is reused by the next tile
  }
}

}  // namespace

int run_tensor_core_mutant(Bug bug, const nvfp4_problem* p) {
  const int64_t tiles = p->l * ((p->m + 15) / 16) * ((p->n + 7) / 8);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{1} << 16));
  tc_mutant_kernel<<<blocks, kWarps * 32, 0, static_cast<cudaStream_t>(p->stream)>>>(*p, bug);
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return NVFP4_OK;
  std::fprintf(stderr, "nvfp4_mutants: tensor-core launch failed: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
  return NVFP4_ERROR;
}

}  // namespace nvfp4::mutants
