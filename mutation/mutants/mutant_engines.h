// The mutant engines, one correct GEMV/GEMM kernel each (host with OpenMP, CUDA on CUDA cores,
// CUDA on tensor cores), each taking the bug to carry as a run-time switch. The plugin checks the
// problem against what the mutant declares before calling them.
#pragma once

#include "mutation/mutants/mutant_bugs.h"
#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4::mutants {

int run_host_mutant(Bug bug, const nvfp4_problem* p);
// ABI version 2's problems: any output type, dual GEMM, grouped GEMM (packed: the kernel declares
// NVFP4_FLAG_GROUPS_PACKED and reads only the packed buffers).
int run_host_v2_mutant(Bug bug, bool packed, const nvfp4_problem* p);
#if defined(NVFP4_MUTANTS_WITH_CUDA)
int run_cuda_mutant(Bug bug, const nvfp4_problem* p);
int run_tensor_core_mutant(Bug bug, const nvfp4_problem* p);
int run_cuda_v2_mutant(Bug bug, bool packed, const nvfp4_problem* p);
// The CUDA quantizer with kern::quant::Bug `bug` (mutant_quantize_cuda.cu).
int run_cuda_quantize_mutant(const nvfp4_kernel_info& info, const nvfp4_problem* p, int bug);
// The naive CUDA MX GEMM with kern::mx::MxBug `bug` (mutant_mx_cuda.cu).
int run_cuda_mx_mutant(const nvfp4_kernel_info& info, const nvfp4_problem* p, int bug);
// The CUDA GEMM, dual GEMM or grouped GEMM with block-scaled output with kern::quant::Bug `bug`
// (mutant_out_cuda.cu).
int run_cuda_out_mutant(const nvfp4_kernel_info& info, const nvfp4_problem* p, int bug);
#endif

}  // namespace nvfp4::mutants
