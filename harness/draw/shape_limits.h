// Every set of limits on drawn shapes, in one place: what a case may cost decides how fast a run,
// a fuzzer or a mutation campaign goes, and the sets are easier to weigh against each other side
// by side. Shapes always respect the kernel's declared multiples, whatever the limits say.
#pragma once

#include <cstdint>

namespace nvfp4 {

struct ShapeLimits {
  int64_t max_m = 300, max_n = 64, max_k = 1024, max_l = 9;
  int64_t max_outputs = 1 << 16, max_products = int64_t(1) << 24;  // keep cases cheap
  int64_t max_elements = int64_t(1) << 20;  // E2M1 elements of A, and of B (l*m*k, l*n*k)
};

// The schedule's small class, most cases: every tile edge up to 257 rows and columns (n reaches
// the same edges as m, so a GEMM's second N tile is in the small class too), k to 1024, l to 9,
// at most 2^16 outputs and 2^24 products: cheap to check.
inline ShapeLimits small_shape_limits() {
  ShapeLimits l;
  l.max_n = 300;
  return l;
}

// The schedule's large class: several tiles in some dimension, m or n past 3 x 256 with ragged
// ends, k to 16384 with a tail, or l to 16 (about 2^26 multiply-adds at most; judged by the GPU
// reference where there is one).
inline ShapeLimits large_shape_limits() {
  ShapeLimits l;
  l.max_m = 1040;
  l.max_n = 1040;
  l.max_k = 16384;
  l.max_l = 16;
  l.max_outputs = int64_t(1) << 20;
  l.max_products = int64_t(1) << 26;
  l.max_elements = int64_t(1) << 24;
  return l;
}

// The kernel fuzzer's: every tile edge the kernels and the permuted layout have (rows 127-129 and
// 255-257, k tails past 1024, several batches) with at most 2^18 products, so one check stays
// cheap enough for hundreds of executions a second (big problems find no more bugs than small
// ones). 2^18 still admits every tile edge with small other sides (257x1x1020, 129x17x80).
inline ShapeLimits fuzz_shape_limits() {
  ShapeLimits l;
  l.max_m = 264;
  l.max_n = 136;
  l.max_k = 1056;
  l.max_l = 4;
  l.max_products = int64_t(1) << 18;
  return l;
}

// The reference fuzzer's, smaller: its brute force is O(l*m*n*k) in 128-bit arithmetic; m up to
// 260 still crosses two 128-row tile edges of the permuted layout.
inline ShapeLimits reference_fuzz_shape_limits() {
  ShapeLimits l = fuzz_shape_limits();
  l.max_m = 260;
  l.max_n = 40;
  l.max_k = 200;
  l.max_l = 3;
  l.max_products = int64_t(1) << 16;
  return l;
}

// For long honest runs of the mutation campaign: small cases, still across tile edges of 32 rows
// and 64 elements.
inline ShapeLimits quick_shape_limits() {
  ShapeLimits l;
  l.max_m = 70;
  l.max_n = 20;
  l.max_k = 160;
  l.max_l = 3;
  return l;
}

}  // namespace nvfp4
