// The GPU reference's entry points in a build without CUDA: never available, so exact_gemm_auto
// always takes the CPU reference.
#include <stdexcept>

#include "gpu_reference/exact_gemm_gpu.h"

namespace nvfp4 {

bool gpu_reference_available(std::string* why) {
  if (why) *why = "built without CUDA";
  return false;
}

ExactResult exact_gemm_gpu(const Problem&, GpuReferenceTiming*) { throw std::runtime_error("GPU reference: built without CUDA"); }

std::vector<MxElement> exact_mx_gpu(const MxProblem&, GpuReferenceTiming*) {
  throw std::runtime_error("GPU reference: built without CUDA");
}

ExactResult exact_gemm_auto(const Problem& p, double) { return exact_gemm(p); }

}  // namespace nvfp4
