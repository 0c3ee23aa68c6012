// The CUDA quantizer (kernels/cuda/quantize_launch.cuh) with one quantizer bug each: the CUDA
// half of the quantize mutants (mutant_plugin.cc lists them). The `fast` recipe takes
// rcp.approx.ftz as production does; the other recipes IEEE reciprocals.
#include "kernels/cuda/quantize_launch.cuh"
#include "mutation/mutants/mutant_engines.h"

namespace nvfp4::mutants {

int run_cuda_quantize_mutant(const nvfp4_kernel_info& info, const nvfp4_problem* p, int bug) {
  const auto b = static_cast<kern::quant::Bug>(bug);
  if (p->recipe == NVFP4_RECIPE_FAST) return kern::quant::launch(info, p, kern::quant::ApproxRcp{}, b);
  return kern::quant::launch(info, p, kern::quant::ExactRcp{}, b);
}

}  // namespace nvfp4::mutants
