// The naive CUDA GEMV/GEMM, grouped GEMM and dual GEMM for operands of any pair of block formats
// (kernels/mx_block_decode.h), FP32 accumulation, shared by the built-in mx_gemm_naive kernels
// (MxBug::none) and the MX mutants, which carry one decode bug each
// (mutation/mutants/mutant_mx_cuda.cu).
//
// One thread per output element. k is walked in chunks of the smaller block size of the two
// operands (16 with an NVFP4 operand, else 32: the longest run that shares one scale in both); a
// chunk's raw element products are summed in FP32 in element order, then scaled once:
// raw * (ma * mb) * 2^(ea + eb).
// For two MX operands ma * mb is 1, so the scale is one exact ldexpf and never forms 2^+-254
// (the product of two extreme E8M0 scales, outside FP32); with an NVFP4 operand it is its E4M3
// value, one rounded multiply. A NaN scale is a NaN mant and reaches the sum; an Inf E5M2
// element follows IEEE (Inf * 0 and Infs of both signs give NaN).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/mx_gemm_core.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern::mx {

__global__ void mx_gemm_naive_kernel(nvfp4_problem p, uint32_t out_type, MxBug bug) {
  const Operand a{p.a, p.sfa, format_or_nvfp4(p.a_format), p.m};
  const Operand bo{p.b, p.sfb, format_or_nvfp4(p.b_format), p.n};
  const int64_t count = p.l * p.m * p.n;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < count; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = e % p.n, i = (e / p.n) % p.m, b = e / (p.n * p.m);
    store_wide(p.c, e, out_type, p.alpha, output_sum(p, a, bo, b, i, j, bug));
  }
}

// Dual GEMM: C = silu(G) * U, G and U each summed as the GEMM's output, the epilogue in FP32.
__global__ void mx_dual_naive_kernel(nvfp4_problem p, uint32_t out_type, MxBug bug) {
  const Operand a{p.a, p.sfa, format_or_nvfp4(p.a_format), p.m};
  const Operand b1{p.b, p.sfb, format_or_nvfp4(p.b_format), p.n};
  const Operand b2{p.b2, p.sfb2, format_or_nvfp4(p.b_format), p.n};
  const int64_t count = p.l * p.m * p.n;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < count; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = e % p.n, i = (e / p.n) % p.m, b = e / (p.n * p.m);
    float g, u;
    dual_sums(p, a, b1, b2, b, i, j, bug, &g, &u);
    store_silu_product(p.c, e, out_type, g, u);
  }
}

// One launch of the GEMM or dual kernel over p's outputs on p's stream; false when it failed.
inline bool launch_one(const nvfp4_kernel_info& info, const nvfp4_problem& p, MxBug bug) {
  const int64_t count = p.l * p.m * p.n;
  const int64_t blocks = std::min<int64_t>((count + 255) / 256, int64_t{1} << 20);  // grid-stride beyond
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  if (p.op == NVFP4_OP_DUAL_GEMM)
    mx_dual_naive_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p, problem_out_type(&p), bug);
  else
    mx_gemm_naive_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p, problem_out_type(&p), bug);
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "%s: launch failed: %s: %s\n", info.name, cudaGetErrorName(err), cudaGetErrorString(err));
  return false;
}

// Runs the kernel with `bug` on p's stream, or refuses (touching nothing) a problem outside info.
// GEMV, GEMM and dual GEMM: one launch. Grouped GEMM: one GEMM launch per non-empty group, in
// the separate arrangement or (NVFP4_FLAG_GROUPS_PACKED) the packed one (mx_gemm_core.h's
// group_gemm, from the host copy of the group table).
inline int launch_naive(const nvfp4_kernel_info& info, const nvfp4_problem* p, MxBug bug) {
  if (!mx_problem_fits(info, p) || !formats_declared(info, *p)) return NVFP4_UNSUPPORTED;
  if (problem_out_type(p) == NVFP4_OUT_NVFP4) return NVFP4_UNSUPPORTED;  // C only
  if (p->op != NVFP4_OP_GROUPED_GEMM) return launch_one(info, *p, bug) ? NVFP4_OK : NVFP4_ERROR;
  const bool packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  int64_t row0 = 0, tile0 = 0;
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    if (q.m > 0 && !launch_one(info, group_gemm(*p, q, g, packed, row0, tile0), bug)) return NVFP4_ERROR;
    row0 += q.m;
    tile0 += (q.m + 127) / 128;
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::kern::mx
