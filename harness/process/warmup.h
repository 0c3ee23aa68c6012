// Warm-up (SPEC.md section 7, revision 3): Python kernels compile on their first call (torch's
// load_inline, Triton's JIT, CuTe DSL), which takes a minute and is no hang. Each such kernel
// process makes one call on a small declared problem before its first checked case, under a
// limit of its own; the per-call watchdog starts after it, and the time is not the checks'.
// Lanes after the first start once the first is warm, so they load from the compiler's cache.
#pragma once

#include <string>

#include "harness/process/kernel_call.h"

namespace nvfp4 {

// The warm-up's problem: the smallest inside what info declares (its first op and layout, each
// dimension its declared multiple, k at least 64, alpha 1, seeded data). Throws
// std::invalid_argument when info declares no op.
CaseData warmup_case(const nvfp4_kernel_info& info);
// "128x1x64 gemv" for messages.
std::string warmup_shape_text(const Problem& p);

}  // namespace nvfp4
