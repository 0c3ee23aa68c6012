// The CUDA quantizer: one thread per scale block (or 16 x 16 tile) of X, the arithmetic of
// kernels/quantize_core.h, the permuted SFQ's padding written 0x00 first on the same stream.
// Shared by the built-in CUDA quantizers and the mutants and honest plugins (a Bug builds each).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/host/host_quantize.h"

namespace nvfp4::kern::quant {

constexpr int kThreads = 128;

struct ApproxRcp {
  __device__ float operator()(float v) const {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
  }
};

template <class Rcp>
__global__ void quantize_kernel(nvfp4_problem p, uint32_t flags, int64_t tile, Rcp rcp, Bug bug) {
  const int64_t bs = block_elems(p.q_format), kb = (p.k + bs - 1) / bs;
  const int64_t tiles = (p.m + tile - 1) / tile, units = p.l * tiles * kb;
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u < units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = u % kb, t = (u / kb) % tiles, b = u / (kb * tiles);
    const int64_t r0 = t * tile, r1 = r0 + tile < p.m ? r0 + tile : p.m;
    quantize_block(p, flags, bug, b, r0, r1, s, rcp);
  }
}

template <class Rcp>
inline int launch(const nvfp4_kernel_info& info, const nvfp4_problem* p, Rcp rcp, Bug bug) {
  if (!quantize_fits(info, p)) return NVFP4_UNSUPPORTED;
  const cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  const int64_t bs = block_elems(p->q_format), kb = (p->k + bs - 1) / bs;
  if (p->sf_layout == NVFP4_SF_PERMUTED && bug != Bug::padding_not_written && bug != Bug::linear_scales_declared_permuted)
    cudaMemsetAsync(p->sfq, 0, static_cast<size_t>(sf_bytes(NVFP4_SF_PERMUTED, p->m, kb, p->l)), stream);
  const int64_t tile = (info.flags & NVFP4_FLAG_QUANT_2D) ? 16 : 1;
  const int64_t units = p->l * ((p->m + tile - 1) / tile) * kb;
  const int64_t blocks = std::min<int64_t>((units + kThreads - 1) / kThreads, int64_t{1} << 20);
  quantize_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(*p, info.flags, tile, rcp, bug);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: launch failed: %s: %s\n", info.name, cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::kern::quant
