// The CUDA GEMM, dual GEMM and grouped GEMM with block-scaled output
// (kernels/cuda/gemm_nvfp4_out_launch.cuh, the built-in *_nvfp4_out_naive kernels' code) with one
// quantizer bug each: the CUDA half of the block-scaled output mutants (mutant_plugin.cc lists them).
#include "kernels/cuda/gemm_nvfp4_out_launch.cuh"
#include "mutation/mutants/mutant_engines.h"

namespace nvfp4::mutants {

int run_cuda_out_mutant(const nvfp4_kernel_info& info, const nvfp4_problem* p, int bug) {
  const auto b = static_cast<kern::quant::Bug>(bug);
  if (p->op == NVFP4_OP_GROUPED_GEMM) return kern::quant::launch_grouped_gemm_nvfp4_out(info, p, b);
  return kern::quant::launch_gemm_nvfp4_out(info, p, b);
}

}  // namespace nvfp4::mutants
