// The one case schedule of the suite. `run`, `mutants` and Python's nc.check walk Schedule::at
// (case i of a kernel is a pure function of the seed, the kernel's name and i, so workers on
// several GPUs split one schedule and any case is reproduced from its index); the property tests
// and the kernel fuzzer draw the same kinds of case through draw_case from raw draws they shrink
// or mutate.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/generators.h"
#include "reference/problem.h"

namespace nvfp4 {

// What a drawn case must be (property tests ask for some of these; the schedule for none).
struct CaseConstraints {
  std::optional<Op> op;            // else drawn among the kernel's ops
  std::optional<SfLayout> layout;  // else drawn among the kernel's layouts
  bool exact_regime = false;       // narrow scales and alpha 1 or a power of two
  bool no_nan = false;             // no NaN scale in a used block
  int64_t min_l = 1;               // at least this many batches
  int64_t min_full_blocks = 0;     // at least this many whole 16-element blocks per row
};

// The size classes of the schedule. `small` is most cases: every tile edge up to 257 rows and
// columns, k to 1024, l to 9, at most 2^16 outputs and 2^24 products: cheap to check. `large` spans several tiles in some dimension: m or n past
// 3 x 256 with ragged ends, k to 16384 with a tail, or l to 16 (about 2^26 multiply-adds at most;
// judged by the GPU reference where there is one).
ShapeLimits small_shape_limits();
ShapeLimits large_shape_limits();
Shape draw_large_shape(Draws& d, Op op, const nvfp4_kernel_info& info);

struct DrawnCase {
  Problem problem;
  DataSpec spec;
};

// One case inside the kernel's declared constraints (shape, layout, UNIT_ALPHA, scale
// semantics), from raw draws: the distribution first (it shrinks toward uniform/narrow/one),
// then the shape, the layout, the data.
DrawnCase draw_case(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& c, const ShapeLimits& limits);

struct ScheduleOptions {
  uint64_t seed = 0;
  std::optional<Op> op;        // only this op
  std::optional<Shape> shape;  // every case exactly this shape (production shapes)
  bool large_tail = true;      // one case in 16 of the large class
  ShapeLimits limits = small_shape_limits();
};

struct ScheduledCase {
  int64_t index = 0;
  Problem problem;      // its data drawn from problem.seed with problem.generator
  DataSpec spec;
  std::string kind;     // "plain", "mixed", "targeted", "large", "unsupported", "shape"
  uint64_t stale_seed = 0;
};

class Schedule {
 public:
  // Throws std::invalid_argument when the kernel declares no op the options allow.
  Schedule(const nvfp4_kernel_info& info, std::string kernel_name, ScheduleOptions options);
  // Case i: every second one the plainest data (uniform/narrow/one: the exact regime, where every
  // bug shows), the others any distribution the kernel allows (two in sixteen targeted: the
  // tensor-core quirk of generators.h's fine_cancel, and NaN scales in sparse data); one in eight
  // a problem just
  // outside the kernel's declared constraints (when it declares any that can be broken); one in
  // sixteen of the large class.
  ScheduledCase at(int64_t index) const;
  const std::vector<Op>& ops() const { return ops_; }
  // The data seed of case i (for the case's note and for reproducing it).
  uint64_t case_seed(int64_t index) const;

 private:
  nvfp4_kernel_info info_;
  std::string name_;
  ScheduleOptions options_;
  std::vector<Op> ops_;
  std::vector<DataSpec> specs_;
};

// What a run drew, for its report: cases by kind and by distribution, and how many sat on a tile
// edge, had several batches, a partial last block, or padding in the permuted layout.
struct ScheduleStats {
  int64_t cases = 0, tile_edge = 0, batched = 0, k_tail = 0, padded = 0;
  std::map<std::string, int64_t> by_kind, by_scales, by_values;
  void add(const ScheduledCase& c);
  void merge(const ScheduleStats& other);
  // "1000 cases: plain 500, mixed 375, ...; tile edge 62%, ..."
  std::string text() const;
};

}  // namespace nvfp4
