// The CUDA honest dual GEMM with an FP32 epilogue in CUDA's fast intrinsics (honest_dual.h): one
// thread per output, grid-stride.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/problem_fits.h"
#include "mutation/honest/honest_dual.h"
#include "mutation/honest/honest_variants.h"

namespace nvfp4::honest {
namespace {

constexpr int kThreads = 128;

__global__ void dual_fp32_fast_kernel(nvfp4_problem p, uint32_t out) {
  const int64_t total = p.l * p.m * p.n;
  for (int64_t o = blockIdx.x * int64_t{kThreads} + threadIdx.x; o < total; o += int64_t{gridDim.x} * kThreads)
    dual_fp32_element<SiluForm::fast>(p, out, o / (p.m * p.n), o / p.n % p.m, o % p.n);
}

}  // namespace

int run_cuda_dual_fp32_fast(const nvfp4_problem* p) {
  const int64_t total = p->l * p->m * p->n;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t{1} << 16));
  dual_fp32_fast_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(p->stream)>>>(*p, kern::problem_out_type(p));
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "nvfp4_honest: dual launch failed: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::honest
