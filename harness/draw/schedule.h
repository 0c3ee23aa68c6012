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

#include "harness/draw/generators.h"
#include "reference/problem.h"

namespace nvfp4 {

// What the one draw may produce (the schedule allows everything it was asked for; property tests
// ask for some of these).
struct CaseConstraints {
  std::optional<Op> op;            // else drawn among the kernel's ops
  std::optional<SfLayout> layout;  // else drawn among the kernel's layouts
  std::optional<OutType> out_type; // else drawn among the kernel's output types (it must declare this one)
  bool gemv_gemm_only = false;     // only the kernel's GEMV and GEMM (checks written for one GEMM)
  bool exact_regime = false;       // narrow scales and alpha 1 or a power of two
  bool no_nan = false;             // no NaN scale in a used block
  int64_t min_l = 1;               // at least this many batches
  int64_t min_full_blocks = 0;     // at least this many whole 16-element blocks per row
  bool unsupported = false;        // may draw a problem just outside the kernel's constraints
  bool large = false;              // may draw from the large size class
  bool mx_large = false;           // ... with MX operands too (a GPU reference judges them)
};

// The shape class of a case: the small class, the large one, just outside what the kernel
// declares, the one shape a run was given (`run --shape`), or the huge tier (a CUDA quantizer's
// case past 2^31 elements of X, where the device holds it).
enum class CaseKind : uint8_t { small, large, unsupported, shape, huge };
// The data class of a case: the plainest data (uniform/narrow/one: the exact regime, where every
// bug shows), any distribution the kernel allows, or one of two targeted kinds that random data
// meets rarely: the matrix-unit quirk of subnormal operands (generators.h: fine_cancel; it took
// gemm_tc one case in 3,500 to show) and a NaN scale in mostly-zero data (a kernel that skips
// zero products never multiplies 0 by NaN).
enum class DataClass : uint8_t { plain, mixed, fine_cancel, nan_sparse };
const char* to_string(CaseKind kind);
const char* to_string(DataClass data);

// The size classes of the schedule and the fuzzers' limits: harness/draw/shape_limits.h.
Shape draw_large_shape(Draws& d, Op op, const nvfp4_kernel_info& info);
// The large class of grouped GEMM, within large_shape_limits: a few big experts (2-8, rows past
// 3 x 256, k to 7168 with tails) or many of moderate size (32-256 around the 128-row tile), a
// quarter of them empty; max_groups and the multiples respected.
std::vector<Group> draw_large_grouped_shape(Draws& d, const nvfp4_kernel_info& info);

// Everything about a case but its data, drawn independently of each other: shape class, data
// class (and distribution), op, layout, output type (among the declared ones), shape (a grouped
// problem's groups). problem has its op, shape, layout, semantics and out_type set; alphas and
// the tensors are not drawn yet.
struct CasePlan {
  CaseKind kind = CaseKind::small;
  DataClass data = DataClass::plain;
  DataSpec spec;
  Problem problem;
};
// The one draw of the suite, behind the schedule (raw draws from the case's seed), the property
// tests (RapidCheck's draws, which shrink toward raw 0: small, plain data, the kernel's first op
// and layout) and the kernel fuzzer (the fuzz input's bytes). Inside the kernel's declared
// constraints (shape, layout, UNIT_ALPHA, scale semantics) unless c.unsupported drew a case
// just outside them. `shape` fixes the shape (its op is taken when the kernel declares it).
CasePlan draw_plan(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& c, const ShapeLimits& limits,
                   const std::optional<Shape>& shape = std::nullopt);

struct DrawnCase {
  Problem problem;
  DataSpec spec;
  CaseKind kind = CaseKind::small;
  DataClass data = DataClass::plain;
};
// draw_plan, then the data from the same draws.
DrawnCase draw_case(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& c, const ShapeLimits& limits);

// The kernel fuzzer's case: draw_case over the fuzz input's bytes (ByteDraws), with problems just
// outside the declaration among them, for `kernel` (the generic kernel of every op, layout and
// shape when null: a fuzz input replayed for no particular kernel).
DrawnCase draw_fuzz_case(const uint8_t* data, std::size_t size, const nvfp4_kernel_info* kernel,
                         const ShapeLimits& limits = fuzz_shape_limits());
// Text to a person (no control byte but tab, CR and LF, no DEL): a fuzz input that is a case file.
bool is_case_text(const std::string& bytes);
// The problem one kernel fuzzer input stands for, for `kernel` (null: the generic kernel): text (no
// control byte but tab, CR and LF, no DEL) is a case file, so saved cases and hand-written seeds
// are inputs too (a seed-only one expanded); other bytes are draws (draw_fuzz_case) within
// `limits`. nullopt, with *why, when there is nothing to run: text that is no case file, or a case
// naming an unknown generator. The kernel fuzzer and `nvfp4check replay --fuzz-input` both call
// this with fuzz_limits_from_environment(), so a replay checks what the fuzzer checked.
std::optional<Problem> fuzz_input_problem(const std::string& bytes, const nvfp4_kernel_info* kernel,
                                          const ShapeLimits& limits, std::string* why = nullptr);
// The kernel fuzzer's limits: fuzz_shape_limits, with NVFP4_FUZZ_MAX_PRODUCTS (an integer >= 2)
// as the cap on l*m*n*k when it is set. Throws std::invalid_argument for any other value.
ShapeLimits fuzz_limits_from_environment();


// The huge tier: quantize cases of a CUDA kernel with l*m*k just past 2^31 elements (32-bit
// element offsets wrap there: flashinfer PR #4263), and grouped cases of a CUDA kernel that takes
// the packed arrangement with a packed B just past 2^31 bytes (32-bit expert offsets wrap there),
// about one such case in kHugeShare (`auto`), every one (`always`, `run --huge`), or none. Only
// where the device's free memory holds the case with margin; a case that does not fit stays the
// case drawn without the tier. Host kernels never draw it (their reference and kernel would share
// the parent's cores).
enum class HugeTier : uint8_t { off, automatic, always };
constexpr uint64_t kHugeShare = 64;
// A grouped case's huge shape in place of p's groups (p an NVFP4 grouped problem for a kernel
// declaring NVFP4_FLAG_GROUPS_PACKED): experts of 2048 x k (k 7168, 4096 or 5120 by pick) whose
// packed B passes 2^31 bytes, one to three tokens each or none, every expert from the one that
// straddles 2^31 on in use. False, p unchanged, where the kernel's declaration (max_groups) or
// the device's free memory does not allow it.
bool draw_huge_grouped_shape(uint64_t pick, const nvfp4_kernel_info& info, uint64_t device_free_bytes, Problem& p);

struct ScheduleOptions {
  uint64_t seed = 0;
  std::optional<Op> op;        // only this op
  std::optional<Shape> shape;  // every case exactly this shape (production shapes)
  bool large_tail = true;      // one case in 16 of the large class
  ShapeLimits limits = small_shape_limits();
  HugeTier huge = HugeTier::automatic;
  // The device's free bytes as the kernel's process saw them (KernelDesc::device_free_bytes):
  // 0 (a host kernel, no device, a caller that does not know) draws no huge case.
  uint64_t device_free_bytes = 0;
  // Whether this process has the GPU reference (gpu_reference_available) to judge a CUDA
  // kernel's large MX cases: only then do they keep the large class, which the CPU's Kulisch
  // sums would make slow. false (host kernels, callers that do not know) keeps them small, as
  // before the GPU reference took MX problems.
  bool gpu_reference = false;
};

// The seed of case `index` of a kernel's schedule: a pure function of the run's seed, the kernel's
// name and the index (Schedule::case_seed; a merge recomputes it to check a shard's report).
uint64_t schedule_case_seed(uint64_t seed, const std::string& kernel_name, int64_t index);

struct ScheduledCase {
  int64_t index = 0;
  Problem problem;      // its data drawn from problem.seed with problem.generator (huge: not yet, see at())
  DataSpec spec;
  CaseKind kind = CaseKind::small;
  DataClass data = DataClass::plain;
  uint64_t stale_seed = 0;
};

class Schedule {
 public:
  // Throws std::invalid_argument when the kernel declares no op the options allow.
  Schedule(const nvfp4_kernel_info& info, std::string kernel_name, ScheduleOptions options);
  // Case i: draw_plan from the case's own seed (every op sees every data class, shape class and
  // layout), its data from a seed of its own (so a case file can name it).
  ScheduledCase at(int64_t index) const;
  const std::vector<Op>& ops() const { return ops_; }
  // The data seed of case i (for the case's note and for reproducing it).
  uint64_t case_seed(int64_t index) const;

 private:
  nvfp4_kernel_info info_;
  std::string name_;
  ScheduleOptions options_;
  std::vector<Op> ops_;
};

// What a run drew, for its report: cases by shape class, data class, op (and op by data class),
// output type, distribution, and how many sat on a tile edge, had several batches, a partial last
// block, or padding in the permuted layout (a grouped case: any of its non-empty groups); grouped
// cases, their groups, empty groups, cases with every group empty, and group counts in buckets
// (1, 2-8, 9-64, 65-256).
// Each field is listed once, for the report, in harness/engine/report_fields.h.
struct ScheduleStats {
  int64_t cases = 0, tile_edge = 0, batched = 0, k_tail = 0, padded = 0, huge = 0;
  int64_t grouped = 0, groups = 0, empty_groups = 0, all_empty = 0;
  std::map<std::string, int64_t> by_kind, by_data, by_op, by_op_data, by_scales, by_values, by_out_type, by_groups;
  void add(const ScheduledCase& c);
  // "1000 cases: plain 500, mixed 375, ...; tile edge 62%, ..."
  std::string text() const;
};

}  // namespace nvfp4
