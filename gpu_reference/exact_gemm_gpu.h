// The exact NVFP4 reference on a CUDA device: the same ExactResult as exact_gemm() (bit for bit,
// every field), fast enough to check production shapes in full.
#pragma once

#include <string>

#include "reference/exact_gemm.h"

namespace nvfp4 {

// Largest k the GPU reference takes: its accumulators are 64-bit, exact for k <= 2^20
// (SPEC.md section 1). Larger k goes to the CPU reference.
constexpr int64_t kGpuReferenceMaxK = int64_t(1) << 20;

// Whether this build has the GPU reference and a CUDA device to run it; *why says why not.
bool gpu_reference_available(std::string* why);

// Where the time of one exact_gemm_gpu call went, in milliseconds.
struct GpuReferenceTiming {
  float decode_ms = 0;   // E2M1 codes and scales to integers (CUDA events)
  float compute_ms = 0;  // the exact dot products and the rounding (CUDA events)
  double total_ms = 0;   // the whole call, copies both ways included (host clock)
};

// exact_gemm(p) on the current CUDA device. Throws std::runtime_error (naming the CUDA error) when
// the device fails, std::invalid_argument when p is outside what it takes (k > kGpuReferenceMaxK).
ExactResult exact_gemm_gpu(const Problem& p, GpuReferenceTiming* timing = nullptr);

// The CPU reference below `threshold` multiply-adds (l*m*n*k), the GPU one above it when
// available. threshold < 0 reads NVFP4_GPU_REFERENCE_THRESHOLD (default 2^26).
ExactResult exact_gemm_auto(const Problem& p, double threshold = -1);

}  // namespace nvfp4
