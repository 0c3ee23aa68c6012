// The exact reference on a CUDA device: the same ExactResult as exact_gemm() (bit for bit, every
// field), fast enough to check production shapes in full. NVFP4 problems in 64-bit integers
// (exact_gemm_gpu.cu), problems with MX operands in the Kulisch accumulator (exact_mx_gpu.cu).
#pragma once

#include <string>

#include "reference/exact_gemm.h"
#include "reference/exact_mx.h"

namespace nvfp4 {

// Largest k the NVFP4 GPU reference takes: its accumulators are 64-bit, exact for k <= 2^20
// (SPEC.md section 1). Larger k goes to the CPU reference. MX problems have no such limit (the
// Kulisch accumulator holds 2^40 products).
constexpr int64_t kGpuReferenceMaxK = int64_t(1) << 20;

// Whether this build has the GPU reference and a CUDA device to run it; *why says why not.
bool gpu_reference_available(std::string* why);

// Where the time of one exact_gemm_gpu call went, in milliseconds.
struct GpuReferenceTiming {
  float decode_ms = 0;   // E2M1 codes and scales to integers (CUDA events); 0 for MX problems,
                         // whose kernel decodes as it loads
  float compute_ms = 0;  // the exact dot products and the rounding (CUDA events); MX: every GEMM's
                         // kernel (a grouped problem's groups, a dual problem's G and U), without
                         // the rounding, which the host does
  double total_ms = 0;   // the whole call, copies both ways included (host clock)
};

// exact_gemm(p) on the current CUDA device. NVFP4: GEMV and GEMM; MX operands: every op of the
// GEMM family, each GEMM of it on the device. Throws std::runtime_error (naming the CUDA error)
// when the device fails, std::invalid_argument when p is outside what it takes (NVFP4 with
// k > kGpuReferenceMaxK, or grouped or dual).
ExactResult exact_gemm_gpu(const Problem& p, GpuReferenceTiming* timing = nullptr);

// exact_mx(p) on the current CUDA device: every element's facts, bit for bit. Throws as
// exact_gemm_gpu does, std::invalid_argument for an invalid p (validate).
std::vector<MxElement> exact_mx_gpu(const MxProblem& p, GpuReferenceTiming* timing = nullptr);

// The GPU reference where there is a device and the problem is large enough, else the CPU's, by
// multiply-adds (l*m*n*k): a grouped problem from `threshold` (summed over the groups, each group
// then on the GPU from threshold/4); a GEMV, GEMM or dual GEMM (its G and U) past threshold/16.
// Problems with MX operands take the grouped rule at threshold/16: the CPU's wide accumulators
// cost 5 to 15 times NVFP4's integers per product. threshold < 0 reads
// NVFP4_GPU_REFERENCE_THRESHOLD (default 2^26).
ExactResult exact_gemm_auto(const Problem& p, double threshold = -1);

}  // namespace nvfp4
