// The CUDA GEMM, dual GEMM and grouped GEMM with block-scaled output (out_type nvfp4, SPEC.md
// section 2): one thread per 16-column block of an output row, the arithmetic of
// kernels/block_scaled_epilogue.h (each k block in FP32 times sa*sb, blocks in order; alpha *
// acc, or silu(G) * U with the accurate expf; the recipe with IEEE reciprocals, inside `fast`'s
// window), the permuted SFQ's padding cells written 0x00 by the same threads. Grouped: blockIdx.y
// is the group, its operands from the device group table and its Q, SFQ and global scale from
// the device group_out table. Shared by the built-in kernels and the mutants (a Bug builds each).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/block_scaled_epilogue.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern::quant {

constexpr int kOutThreads = 256;
constexpr int64_t kOutMaxGroups = 65535;  // gridDim.y

// static: the built-in library and the mutants plugin each compile their own copy.
static __global__ void gemm_nvfp4_out_kernel(nvfp4_problem p, Bug bug) {
  const int64_t m = p.m, n = p.n, nb = (n + 15) / 16, blocks = p.l * m * nb;
  const OutOperands g{p.a, p.sfa, p.b, p.sfb, m, n, p.k, p.sf_layout};
  const OutOperands u{p.a, p.sfa, p.b2, p.sfb2, m, n, p.k, p.sf_layout};
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  write_sf_padding(p.sf_layout, m, nb, p.l, p.sfq, first, stride, bug);
  for (int64_t t = first; t < blocks; t += stride) {
    const int64_t b = t / (m * nb), i = t / nb % m, s = t % nb;
    float v[16];
    const int64_t count = out_block_values(g, p.op == NVFP4_OP_DUAL_GEMM ? &u : nullptr, p.alpha, p.alpha2, b, i, s, v);
    quantize_out_block(v, count, p.recipe, p.global_scale[0], p.sf_layout, m, nb, b, i, s, p.q + (b * m + i) * (n / 2),
                       p.sfq, ExactRcp{}, bug);
  }
}

static __global__ void grouped_gemm_nvfp4_out_kernel(nvfp4_problem p, Bug bug) {
  const int64_t gi = blockIdx.y;
  const nvfp4_group q = p.group_device[gi];
  if (q.m == 0) return;  // an empty group: its pointers are NULL, nothing to write
  const nvfp4_group_out out = p.group_out_device[gi];
  const float gs = group_out_scale(p.group_out_device, gi, bug);
  const int64_t nb = (q.n + 15) / 16, blocks = q.m * nb;
  const OutOperands o{q.a, q.sfa, q.b, q.sfb, q.m, q.n, q.k, p.sf_layout};
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  write_sf_padding(p.sf_layout, q.m, nb, 1, out.sfq, first, stride, bug);
  for (int64_t t = first; t < blocks; t += stride) {
    const int64_t i = t / nb, s = t % nb;
    float v[16];
    const int64_t count = out_block_values(o, nullptr, q.alpha, 1.0f, 0, i, s, v);
    quantize_out_block(v, count, p.recipe, gs, p.sf_layout, q.m, nb, 0, i, s, out.q + i * (q.n / 2), out.sfq, ExactRcp{},
                       bug);
  }
}

inline int out_launch_result(const nvfp4_kernel_info& info) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return NVFP4_OK;
  std::fprintf(stderr, "%s: launch failed: %s: %s\n", info.name, cudaGetErrorName(err), cudaGetErrorString(err));
  return NVFP4_ERROR;
}

// Threads to cover `work` (blocks of the output or SFQ cells), grid-striding past 2^20 blocks.
inline unsigned out_grid(int64_t work) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((work + kOutThreads - 1) / kOutThreads, int64_t{1} << 20)));
}

// GEMM and dual GEMM.
inline int launch_gemm_nvfp4_out(const nvfp4_kernel_info& info, const nvfp4_problem* p, Bug bug) {
  if (!problem_fits(info, p) || p->op == NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const int64_t nb = (p->n + 15) / 16;
  const int64_t work = std::max(p->l * p->m * nb, sf_bytes(p->sf_layout, p->m, nb, p->l));
  gemm_nvfp4_out_kernel<<<out_grid(work), kOutThreads, 0, static_cast<cudaStream_t>(p->stream)>>>(*p, bug);
  return out_launch_result(info);
}

// Grouped GEMM, separate arrangement: a grid row per group (up to kOutMaxGroups, which the
// kernel declares as max_groups), as many thread blocks across as the largest group needs.
inline int launch_grouped_gemm_nvfp4_out(const nvfp4_kernel_info& info, const nvfp4_problem* p, Bug bug) {
  if (!problem_fits(info, p) || p->op != NVFP4_OP_GROUPED_GEMM || p->groups > kOutMaxGroups) return NVFP4_UNSUPPORTED;
  int64_t work = 0;
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    const int64_t nb = (q.n + 15) / 16;
    if (q.m > 0) work = std::max(work, std::max(q.m * nb, sf_bytes(p->sf_layout, q.m, nb, 1)));
  }
  if (work == 0) return NVFP4_OK;  // every group empty: nothing to write
  const dim3 grid(out_grid(work), static_cast<unsigned>(p->groups));
  grouped_gemm_nvfp4_out_kernel<<<grid, kOutThreads, 0, static_cast<cudaStream_t>(p->stream)>>>(*p, bug);
  return out_launch_result(info);
}

}  // namespace nvfp4::kern::quant
