// The CUDA half of the broken demonstration plugin: one thread per output element, on the
// caller's stream, computing broken_k_tail.h's element.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "mutation/wrong/broken_k_tail.h"

namespace {

__global__ void broken_k_tail_kernel(nvfp4_problem p) {
  const int64_t total = p.l * p.m * p.n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e % p.n, i = (e / p.n) % p.m, b = e / (p.n * p.m);
    p.c[e] = __half_as_ushort(__float2half_rn(nvfp4::fuzz_demo::broken_k_tail_element(p, b, i, j)));
  }
}

// Correct elements, but on a problem with the k tail one thread writes to address 8, which no
// allocation holds: an illegal address, the CUDA context of its process lost. Lanes that share one
// context (MPS) all lose theirs; the suite must still name this case, and only this kind of case.
__global__ void faulting_tail_kernel(nvfp4_problem p) {
  const int64_t total = p.l * p.m * p.n;
  if (nvfp4::fuzz_demo::has_k_tail(p) && blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<volatile int*>(8) = 1;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e % p.n, i = (e / p.n) % p.m, b = e / (p.n * p.m);
    p.c[e] = __half_as_ushort(__float2half_rn(nvfp4::fuzz_demo::broken_k_tail_element(p, b, i, j, false)));
  }
}

}  // namespace

int faulting_tail_cuda_run(const nvfp4_problem* p) {
  const int64_t total = p->l * p->m * p->n;
  const int64_t blocks = total / 128 + 1 < 4096 ? total / 128 + 1 : 4096;
  faulting_tail_kernel<<<static_cast<unsigned>(blocks), 128, 0, static_cast<cudaStream_t>(p->stream)>>>(*p);
  return cudaGetLastError() == cudaSuccess ? NVFP4_OK : NVFP4_ERROR;
}

int broken_k_tail_cuda_run(const nvfp4_problem* p) {
  const int64_t total = p->l * p->m * p->n;
  const int64_t blocks = total / 128 + 1 < 4096 ? total / 128 + 1 : 4096;
  broken_k_tail_kernel<<<static_cast<unsigned>(blocks), 128, 0, static_cast<cudaStream_t>(p->stream)>>>(*p);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "broken_k_tail_cuda: launch failed: %s\n", cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}
