// Seeded generators of shapes and data, shared by `nvfp4check run`, the property tests and the
// fuzzers. Every distribution is reachable by name, so a case file can say `generator = NAME`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "harness/draw/rng.h"
#include "harness/draw/shape_limits.h"
#include "kernels/nvfp4_kernel_abi.h"
#include "reference/problem.h"
#include "reference/stable_hash.h"

namespace nvfp4 {

// E2M1 data: uniform over all 16 codes; edge-heavy (+-6, +-0, +-0.5); sparse (mostly zero);
// one sign only; alternating signs (cancellation); fine_cancel (small values in every block but
// two, the middle one and the last, which hold one pair of products that cancel exactly: A
// +0.5, -0.5 against B 6, 6).
enum class ValueDist { uniform, edge, sparse, one_sign, alternating, fine_cancel };
// E4M3 scales: a narrow exponent window (outputs in the exact regime), the full range,
// subnormals only, near 448 (FP16 overflow), sign bit set, NaN in one used block, all zero;
// fine_cancel (subnormal scales, but in fine_cancel's two pair blocks A's is 2^-9 and B's 88).
//
// fine_cancel/fine_cancel is the tensor-core quirk behind gemm_tc's seed-11 failure made
// likely: each pair's A operand a*sa = 2^-10 is an FP16 subnormal once scaled by 2^-14, and a
// matrix unit then aligns the pair as if it were 2^10 larger (b*sb = 528), cutting the running
// sum of the fine blocks (multiples of 2^-20) at 2^-16. S stays near 1 (the pairs) while the
// output is the small fine sum: the exact regime, where every lost bit shows.
enum class ScaleDist { narrow, full, subnormal, near_max, sign_bit, nan_block, zero, fine_cancel };
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

struct Shape {
  Op op = Op::gemm;
  int64_t m = 1, n = 1, k = 2, l = 1;
};

// Sets p's op, m, n, k and l from s (nothing else).
void set_shape(Problem& p, const Shape& s);
// Why s cannot be a case of the suite: shape_error's reasons, or tensors (in both scale layouts,
// and C) beyond the 1 GiB a case may hold (kMaxCaseBytes); "" when it can. `run --shape` and the
// Python API's shape option check a shape given by a person through this.
std::string case_shape_error(const Shape& s);

// What a kernel's info declares, as the generators and the checks read it: its ops in the
// order gemv, gemm, grouped_gemm, dual_gemm (only `only`, when given; GEMV and GEMM alone for a
// version-1 kernel, which is handed nothing else), its output types in the order fp16, bf16,
// fp32 (FP16 alone for version 1 or out_types 0), and the scale semantics its flags call for.
std::vector<Op> declared_ops(const nvfp4_kernel_info& info, std::optional<Op> only = std::nullopt);
// declared_ops less grouped and dual GEMM: for problems built as one GEMV or GEMM (the warm-up,
// the mutation campaign's GPU MODE and KernelBench problems).
std::vector<Op> declared_gemv_gemm_ops(const nvfp4_kernel_info& info);
std::vector<OutType> declared_out_type_list(const nvfp4_kernel_info& info);
ScaleSemantics declared_semantics(const nvfp4_kernel_info& info);
// v rounded up to a multiple (itself when multiple <= 1).
inline int64_t round_up(int64_t v, int64_t multiple) {
  return multiple > 1 ? (v + multiple - 1) / multiple * multiple : v;
}

// A shape inside info's constraints, weighted toward tile edges (1, 2, 3, 15-17, 31-33,
// 63-65, 127-129, 255-257), k = 2, k % 16 != 0, k % 64 != 0, multiples of 64, batches 1-9.
Shape generate_shape(Rng& rng, Op op, const nvfp4_kernel_info& info, const ShapeLimits& limits);
// A shape that violates at least one of info's declared constraints (multiples), or
// nullopt-like {m = 0} when info declares none that can be violated.
Shape generate_unsupported_shape(Rng& rng, Op op, const nvfp4_kernel_info& info, const ShapeLimits& limits);

// Fills p's data (shape already set) from spec: see draw_data.
void fill_data(Rng& rng, const DataSpec& spec, Problem& p);

// A whole problem: shape for info, layout chosen among info's layouts, semantics from info's
// flags, data from spec.
Problem generate_problem(Rng& rng, Op op, const nvfp4_kernel_info& info, const DataSpec& spec,
                         const ShapeLimits& limits);

// Expands a case that names a seed (and optionally a generator) into explicit data: the tensors
// the case does not give explicitly (a grouped case's per group, a dual case's b2 and sfb2 too)
// are drawn from Rng(seed) with the named DataSpec (default uniform/narrow/one), a pure function
// of seed, generator and shape. alpha (alpha2, every group's) is drawn only when the generator
// names pow2 or arbitrary; otherwise the case's alphas stay. Sets p.data_from_seed when every tensor was drawn. Throws std::invalid_argument when there is neither data nor a seed, or
// the generator name is unknown.
void expand_seeded_case(Problem& p);

// ---------------------------------------------------------------------------------------------
// Everything above is a pure function of uniformly drawn raw numbers, reachable directly here.
// The seeded path draws them from an Rng (RngDraws); the property tests draw them with
// RapidCheck, which shrinks each one toward 0. A raw 0 always means the plainest choice (the
// smallest shape, E2M1 code 0, scale 1.0, alpha 1), so a shrunk failing case is small and plain.
class Draws {
 public:
  virtual ~Draws() = default;
  virtual uint64_t below(uint64_t bound) = 0;                 // uniform in [0, bound), bound >= 1
  virtual std::vector<uint8_t> bytes(std::size_t count) = 0;  // count uniform bytes
  // The same count bytes as bytes(count), handed to `take` in order, in pieces: a generator that
  // maps each byte at once never holds a large tensor's raw draws (by default: one piece).
  using Take = std::function<void(const uint8_t* piece, std::size_t size)>;
  virtual void bytes_to(std::size_t count, const Take& take);
};

// Draws from an Rng with our own arithmetic (not std::uniform_int_distribution, whose algorithm
// differs between standard libraries), so a seed means the same case everywhere.
class RngDraws final : public Draws {
 public:
  explicit RngDraws(Rng& rng) : rng_(rng) {}
  uint64_t below(uint64_t bound) override;
  std::vector<uint8_t> bytes(std::size_t count) override;
  void bytes_to(std::size_t count, const Take& take) override;  // pieces of 4 KiB

 private:
  void fill(uint8_t* out, std::size_t count);
  Rng& rng_;
};

// Draws from a fuzzer's input: each choice takes the next bytes (as many as its bound needs, little
// endian), so a mutation of one byte changes one choice; past the input's end, draws continue from
// an Rng seeded with the input's hash, so a short input still makes a whole case with varied data
// and the same input always the same case.
class ByteDraws final : public Draws {
 public:
  ByteDraws(const uint8_t* data, std::size_t size);
  uint64_t below(uint64_t bound) override;
  std::vector<uint8_t> bytes(std::size_t count) override;

 private:
  const uint8_t* data_;
  std::size_t size_, at_ = 0;
  Rng rest_;
  RngDraws rest_draws_;
};

// The edge values dimensions m and n are drawn from (besides uniform ones).
const std::vector<int64_t>& tile_edge_dims();
// Whether a shape lies on a tile edge: m or n one of tile_edge_dims() other than 1, or k % 64 != 0.
bool on_tile_edge(const Shape& s);

Shape draw_shape(Draws& d, Op op, const nvfp4_kernel_info& info, const ShapeLimits& limits);
// The groups of a grouped problem (shapes only, alpha 1, no data): G from 1 to 256 (raw 0: one;
// mostly 1-8, sometimes 9-64, rarely up to 256; never above info.max_groups when it is set),
// empty groups often (sometimes every group), m_g on tile edges (0, 1, 2, 127-129, 255-257) or
// uniform, n_g and k_g per group, or one n and one k for a GROUPS_PACKED kernel; every m_g, n_g,
// k_g a multiple of what info declares (0 is a multiple of anything); all groups together within
// limits (fit_group_limits).
std::vector<Group> draw_grouped_shape(Draws& d, const nvfp4_kernel_info& info, const ShapeLimits& limits);
// Halves the largest contributor to whichever of limits' totals (outputs, products, A and B
// elements, summed over the groups) is exceeded, keeping multiples and a packed kernel's one n
// and one k, until they all fit or every group is at its minimum.
void fit_group_limits(std::vector<Group>& groups, const nvfp4_kernel_info& info, const ShapeLimits& limits);
// Makes p a grouped problem of these groups, packed when info declares NVFP4_FLAG_GROUPS_PACKED.
void set_groups(Problem& p, std::vector<Group> groups, const nvfp4_kernel_info& info);
Shape draw_unsupported_shape(Draws& d, Op op, const nvfp4_kernel_info& info,
                             const ShapeLimits& limits);
// A spec weighted toward the exact regime (narrow scales, alpha 1) with every distribution
// reachable; raw 0 gives uniform/narrow/one.
DataSpec draw_spec(Draws& d);
// Fills a, b, sfa, sfb (linear) and alpha of p from spec. Draw order: raw bytes of A (one per
// element), of B, of SFA, of SFB (one per scale), then a sign choice, a NaN position, alpha.
// Dual GEMM adds b2, sfb2 (like b, sfb) and alpha2, and sometimes pushes G into silu's hard
// regions (below -87, large positive, near 0). Grouped GEMM: each non-empty group its own draw
// (own scales, distinct from the other groups' where the distribution has enough values, own
// alpha), nan_block's one NaN in one group.
void draw_data(Draws& d, const DataSpec& spec, Problem& p);

// MX operands (mx_draw.cc). draw_operand_formats: A's and B's formats among those info declares
// (drawing nothing where it declares one). draw_mx_data: draw_data for a problem with an MX
// operand: elements by spec.values, E8M0 exponents pairwise distinct inside each row and column
// of blocks (within a window), 0x00 against 0xFE in one block column (scales full or zero), NaN
// scales and E5M2 Inf/NaN elements (nan_block), E4M3 +-448 and E5M2 +-57344 (edge). Every op
// of the GEMM family: a grouped problem's groups each so (nan_block's NaN in one group), a dual
// problem's B2 like B, with G and U kept below 2^120 as for NVFP4.
void draw_operand_formats(Draws& d, const nvfp4_kernel_info& info, Problem& p);
void draw_mx_data(Draws& d, const DataSpec& spec, Problem& p);

// The per-distribution maps from one raw uniform byte, the building blocks of draw_data.
// x is the element's index within its row, tensor_b selects B (alternating signs differ between
// A and B so that products alternate too); negative selects the sign of one_sign.
uint8_t e2m1_code_from_raw(ValueDist dist, uint8_t raw, int64_t x, bool tensor_b, bool negative);
uint8_t scale_from_raw(ScaleDist dist, uint8_t raw);  // nan_block: like narrow, NaN added apart
float alpha_from_raw(AlphaDist dist, uint32_t raw);

// The E4M3 byte with twice the value of `byte` (same sign bit), or -1 when 2x is not
// representable or byte is NaN. Zero doubles to itself.
int e4m3_doubled(uint8_t byte);

}  // namespace nvfp4
