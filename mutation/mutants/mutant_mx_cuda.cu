// The naive CUDA MX GEMM (kernels/cuda/mx_gemm_naive.cuh) with one MX decode bug each: the CUDA
// MX mutants (mutant_plugin.cc lists them), the same kernel as the built-in mx_gemm_naive.
#include "kernels/cuda/mx_gemm_naive.cuh"
#include "mutation/mutants/mutant_engines.h"

namespace nvfp4::mutants {

int run_cuda_mx_mutant(const nvfp4_kernel_info& info, const nvfp4_problem* p, int bug) {
  return kern::mx::launch_naive(info, p, static_cast<kern::mx::MxBug>(bug));
}

}  // namespace nvfp4::mutants
