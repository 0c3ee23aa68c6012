// Small host kernels for the runner's tests: one honest FP32-accumulating kernel and one per way a
// kernel can be wrong that a runner check must catch. They are added to a Registry with
// add_provider, exactly like built-ins, so the runner sees them only through the ABI.
#pragma once

#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4::test {

int wrong_host_kernel_count();
const nvfp4_kernel_info* wrong_host_kernel_get(int index);
int wrong_host_kernel_run(int index, const nvfp4_problem* p);

// The honest computation all of them start from (also used by the CUDA tests' host side):
// C = RN16(alpha * FP32 sum of a*sa*b*sb), every element written, on the host.
void honest_host_gemm(const nvfp4_problem* p, bool signed_scales);

}  // namespace nvfp4::test
