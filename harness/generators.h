// Seeded generators of shapes and data, shared by `nvfp4check run`, the property tests and the
// fuzzers. Every distribution is reachable by name, so a case file can say `generator = NAME`.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/nvfp4_kernel_abi.h"
#include "reference/problem.h"

namespace nvfp4 {

using Rng = std::mt19937_64;

// E2M1 data: uniform over all 16 codes; edge-heavy (+-6, +-0, +-0.5); sparse (mostly zero);
// one sign only; alternating signs (cancellation).
enum class ValueDist { uniform, edge, sparse, one_sign, alternating };
// E4M3 scales: a narrow exponent window (outputs in the exact regime), the full range,
// subnormals only, near 448 (FP16 overflow), sign bit set, NaN in one used block, all zero.
enum class ScaleDist { narrow, full, subnormal, near_max, sign_bit, nan_block, zero };
// alpha: 1, a power of two, an arbitrary finite FP32.
enum class AlphaDist { one, pow2, arbitrary };

struct DataSpec {
  ValueDist values = ValueDist::uniform;
  ScaleDist scales = ScaleDist::narrow;
  AlphaDist alpha = AlphaDist::one;
  std::string name() const;  // "values/scales/alpha", e.g. "uniform/narrow/one"
  static DataSpec parse(const std::string& name);  // throws std::invalid_argument
  static const std::vector<DataSpec>& all();       // every combination
};

// Limits on generated shapes. Shapes always respect the kernel's declared multiples.
struct ShapeLimits {
  int64_t max_m = 300, max_n = 64, max_k = 1024, max_l = 9;
  int64_t max_outputs = 1 << 16, max_products = int64_t(1) << 24;  // keep cases cheap
};

struct Shape {
  Op op = Op::gemm;
  int64_t m = 1, n = 1, k = 2, l = 1;
};

// A shape inside info's constraints, weighted toward tile edges (1, 2, 3, 15-17, 31-33,
// 63-65, 127-129, 255-257), k = 2, k % 16 != 0, k % 64 != 0, multiples of 64, batches 1-9.
Shape generate_shape(Rng& rng, Op op, const nvfp4_kernel_info& info, const ShapeLimits& limits);
// A shape that violates at least one of info's declared constraints (multiples), or
// nullopt-like {m = 0} when info declares none that can be violated.
Shape generate_unsupported_shape(Rng& rng, Op op, const nvfp4_kernel_info& info, const ShapeLimits& limits);

// Fills a, b, sfa, sfb (linear) and alpha of p (shape already set) from spec.
void fill_data(Rng& rng, const DataSpec& spec, Problem& p);

// A whole problem: shape for info, layout chosen among info's layouts, semantics from info's
// flags, data from spec.
Problem generate_problem(Rng& rng, Op op, const nvfp4_kernel_info& info, const DataSpec& spec,
                         const ShapeLimits& limits);

// Expands a case that names a seed (and optionally a generator) into explicit data.
void expand_seeded_case(Problem& p);

}  // namespace nvfp4
