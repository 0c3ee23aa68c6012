// The CUDA honest variants: reduction orders and accumulator types a real GPU kernel uses.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/block_scaled_decode.h"
#include "mutation/honest/honest_variants.h"
#include "mutation/honest/rounding.h"

namespace nvfp4::honest {
namespace {

using kern::e2m1_code;
using kern::e2m1_to_float;
using kern::e4m3_to_float;
using kern::scale_offset;

constexpr int kThreads = 256;

struct Coords {
  int64_t b, i, j;
};

__device__ __forceinline__ Coords coords_of(const nvfp4_problem& p, int64_t o) {
  return {o / (p.m * p.n), (o / p.n) % p.m, o % p.n};
}

// The dequantized factors of product x of output (b, i, j): a*sa and b*sb, each exact in FP32.
__device__ __forceinline__ void factors(const nvfp4_problem& p, Coords c, int64_t x, float* fa, float* fb) {
  const int64_t kb = (p.k + 15) / 16, row_bytes = p.k / 2;
  const uint8_t* a_row = p.a + (c.b * p.m + c.i) * row_bytes;
  const uint8_t* b_row = p.b + (c.b * p.n + c.j) * row_bytes;
  *fa = e2m1_to_float(e2m1_code(a_row, x)) * e4m3_to_float(p.sfa[scale_offset(p.sf_layout, p.m, kb, c.b, c.i, x / 16)], false);
  *fb = e2m1_to_float(e2m1_code(b_row, x)) * e4m3_to_float(p.sfb[scale_offset(p.sf_layout, p.n, kb, c.b, c.j, x / 16)], false);
}

// One warp per output: lanes take every 32nd product, then a shuffle-xor butterfly.
__global__ void warp_tree_kernel(nvfp4_problem p) {
  const int64_t total = p.l * p.m * p.n;
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t o = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; o < total; o += warps) {
    const Coords c = coords_of(p, o);
    float acc = 0.0f;
    for (int64_t x = lane; x < p.k; x += 32) {
      float fa, fb;
      factors(p, c, x, &fa, &fb);
      acc += fa * fb;
    }
    for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, offset);
    if (lane == 0) p.c[o] = __half_as_ushort(__float2half_rn(p.alpha * acc));
  }
}

// One block per output; every thread adds its products into one shared float with atomics, in
// whatever order the hardware serialises them.
__global__ void atomic_split_k_kernel(nvfp4_problem p) {
  __shared__ float total_sum;
  const int64_t total = p.l * p.m * p.n;
  for (int64_t o = blockIdx.x; o < total; o += gridDim.x) {
    if (threadIdx.x == 0) total_sum = 0.0f;
    __syncthreads();
    const Coords c = coords_of(p, o);
    for (int64_t x = threadIdx.x; x < p.k; x += blockDim.x) {
      float fa, fb;
      factors(p, c, x, &fa, &fb);
      atomicAdd(&total_sum, fa * fb);
    }
    __syncthreads();
    if (threadIdx.x == 0) p.c[o] = __half_as_ushort(__float2half_rn(p.alpha * total_sum));
    __syncthreads();
  }
}

// One block per output: factors dequantized to __half (exact), FP32 FMA per thread, shared tree
// (FP32, or FP64 for the fp64 variant).
template <typename Acc, bool kHalfDequant>
__global__ void block_tree_kernel(nvfp4_problem p) {
  __shared__ Acc partial[kThreads];
  const int64_t total = p.l * p.m * p.n;
  const int tid = threadIdx.x;
  for (int64_t o = blockIdx.x; o < total; o += gridDim.x) {
    const Coords c = coords_of(p, o);
    Acc acc = 0;
    for (int64_t x = tid; x < p.k; x += kThreads) {
      float fa, fb;
      factors(p, c, x, &fa, &fb);
      if constexpr (kHalfDequant) {
        acc = fmaf(__half2float(__float2half_rn(fa)), __half2float(__float2half_rn(fb)), acc);
      } else {
        acc += static_cast<Acc>(fa) * static_cast<Acc>(fb);
      }
    }
    partial[tid] = acc;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
      if (tid < stride) partial[tid] += partial[tid + stride];
      __syncthreads();
    }
    if (tid == 0) {
      p.c[o] = kern::fp16_from_double(static_cast<Acc>(p.alpha) * partial[0]);
    }
    __syncthreads();
  }
}

}  // namespace

int run_cuda_variant(CudaVariant v, const nvfp4_problem* p) {
  if (v == CudaVariant::mma_f16 || v == CudaVariant::mma_split_k_bf16 || v == CudaVariant::wgmma_f16)
    return run_tensor_core_variant(v, p);
  if (v == CudaVariant::cublas_grouped_f16) return run_cublas_grouped(p);
  if (v == CudaVariant::dual_fp32_fast) return run_cuda_dual_fp32_fast(p);
  cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  const int64_t total = p->l * p->m * p->n;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(total, int64_t{1} << 16));
  switch (v) {
    case CudaVariant::warp_tree: {
      const int64_t warp_blocks = std::min<int64_t>((total + 7) / 8, int64_t{1} << 16);  // 8 warps per block
      warp_tree_kernel<<<static_cast<unsigned>(warp_blocks), kThreads, 0, stream>>>(*p);
      break;
    }
    case CudaVariant::atomic_split_k:
      atomic_split_k_kernel<<<blocks, kThreads, 0, stream>>>(*p);
      break;
    case CudaVariant::fp16_dequant:
      block_tree_kernel<float, true><<<blocks, kThreads, 0, stream>>>(*p);
      break;
    case CudaVariant::fp64:
      block_tree_kernel<double, false><<<blocks, kThreads, 0, stream>>>(*p);
      break;
    default:
      return NVFP4_ERROR;
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "nvfp4_honest: launch failed: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::honest
