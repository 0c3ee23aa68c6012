// Honest kernels: legitimate ways to compute an NVFP4 GEMV/GEMM that differ from the obvious one
// in summation order, grouping, accumulator width or rounding, all of which SPEC.md section 3's
// oracle must accept. The suite must never fail them (no false alarms).
#pragma once

#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4::honest {

enum class HostVariant {
  forward,         // FP32, products summed left to right
  reverse,         // FP32, right to left
  pairwise,        // FP32, recursive pairwise (a balanced tree, like a reduction)
  split_k_random,  // FP32, k cut into random chunks summed in random order (NONDETERMINISTIC)
  fp64,            // FP64 accumulation, alpha in FP64, one rounding to FP16
  truncating,      // FP32 adds rounded toward zero (tensor-core adders)
  fp16_dequant,    // a*sa and b*sb dequantized to FP16 (exact), FP32 FMA accumulation
  signed_scales,   // FP32 forward with e4m3 semantics (declares SIGNED_SCALES)
  dual_fp32,       // dual GEMM only: FP32 sums and an FP32 epilogue, silu by reciprocal (honest_dual.h)
};

int run_host_variant(HostVariant v, const nvfp4_problem* p);

#if defined(NVFP4_HONEST_WITH_CUDA)
enum class CudaVariant {
  warp_tree,       // one warp per output, lanes stride k, shuffle-xor tree
  atomic_split_k,  // one block per output, threads atomicAdd into shared memory (NONDETERMINISTIC)
  fp16_dequant,    // __half dequantization, FP32 FMA, shared-memory tree
  fp64,            // FP64 accumulation per thread and in the tree
  // On the tensor cores (declare MMA_ACCUMULATE; honest_tensor_core.cu):
  mma_f16,           // mma.sync m16n8k16 f16, one warp per 16x8 tile, k in order
  mma_split_k_bf16,  // mma.sync bf16, k split over warps, FP32 partials added in a rotated order
  wgmma_f16,         // wgmma m64n32k16 (sm_90a only), both operands from shared memory
  // Grouped GEMM only (honest_cublas_grouped.cu):
  cublas_grouped_f16,  // FP16 dequantization, one cublasGemmGroupedBatchedEx call (see the file)
  // Dual GEMM only (honest_dual.cu):
  dual_fp32_fast,      // FP32 sums, an FP32 epilogue with __expf and __fdividef (honest_dual.h)
};

int run_cuda_variant(CudaVariant v, const nvfp4_problem* p);
int run_tensor_core_variant(CudaVariant v, const nvfp4_problem* p);
int run_cublas_grouped(const nvfp4_problem* p);
int run_cuda_dual_fp32_fast(const nvfp4_problem* p);
#endif

}  // namespace nvfp4::honest
