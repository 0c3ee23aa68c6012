// One NVFP4 problem with its data (GEMV, GEMM, grouped GEMM, dual GEMM with SiLU), as the
// reference, case files and the harness see it (SPEC.md section 2). Scale factors are always held
// in LINEAR order here; the permuted copy a kernel may want is built from them (scale_layout.h).
// Output words are uint32_t, one per element, in the output type of out_type.h; expected outputs
// of a grouped problem are held per group.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reference/formats.h"
#include "reference/op_table.h"
#include "reference/out_type.h"

namespace nvfp4 {

// Op (values of NVFP4_OP_*) is defined in op_table.h, with its name and traits.
// Block formats of SPEC section 1 (values of NVFP4_FORMAT_*), quantize input types
// (NVFP4_IN_*) and quantization recipes of SPEC section 2 (NVFP4_RECIPE_*).
enum class BlockFormat : uint32_t { nvfp4 = 1, mxfp4 = 2, mxfp8_e4m3 = 3, mxfp8_e5m2 = 4 };
enum class InType : uint32_t { fp16 = 1, bf16 = 2, fp32 = 3 };
enum class Recipe : uint32_t { te = 1, ref = 2, fast = 3, torchao = 4, mx_rceil = 5, mx_floor = 6, mx_even = 7 };
enum class SfLayout : uint32_t { linear = 1, permuted = 2 };  // values of NVFP4_SF_*
// OutType (values of NVFP4_OUT_*) is defined in out_type.h, with its rounding: device code
// includes that header alone.

const char* to_string(Op op);
const char* to_string(SfLayout layout);
const char* to_string(ScaleSemantics semantics);
const char* to_string(OutType type);
const char* to_string(BlockFormat format);
const char* to_string(InType type);
const char* to_string(Recipe recipe);
// An op's name in op_table.h / "fp16", "bf16", "fp32" / "nvfp4",
// "mxfp4", "mxfp8_e4m3", "mxfp8_e5m2" / ... ; false for anything else.
bool parse_op(const std::string& text, Op* op);
// Every op's name in table order, the last two joined by `conjunction`: "gemv, gemm, ... or
// quantize" (for messages that list the choices).
std::string op_name_list(const char* conjunction);
bool parse_out_type(const std::string& text, OutType* type);
bool parse_block_format(const std::string& text, BlockFormat* format);
bool parse_in_type(const std::string& text, InType* type);
bool parse_recipe(const std::string& text, Recipe* recipe);

// Elements per scale block (16 for NVFP4, 32 for the MX formats), bytes per input word.
inline int64_t block_size(BlockFormat f) { return f == BlockFormat::nvfp4 ? 16 : 32; }
inline int in_word_bytes(InType t) { return t == InType::fp32 ? 4 : 2; }
// E2M1 elements are packed two to a byte; E4M3 and E5M2 take a byte each.
inline bool packs_nibbles(BlockFormat f) { return f == BlockFormat::nvfp4 || f == BlockFormat::mxfp4; }
// Whether a recipe quantizes to the format (the first four recipes NVFP4, the last three MX).
inline bool recipe_fits(Recipe r, BlockFormat f) {
  return (static_cast<uint32_t>(r) <= static_cast<uint32_t>(Recipe::torchao)) == (f == BlockFormat::nvfp4);
}

// Bytes of one row of k elements of an operand of format f (E2M1 packed, E4M3/E5M2 a byte each),
// and its scale blocks per row.
inline int64_t operand_row_bytes(BlockFormat f, int64_t k) { return packs_nibbles(f) ? k / 2 : k; }
inline int64_t operand_kb(BlockFormat f, int64_t k) { return (k + block_size(f) - 1) / block_size(f); }

// One GEMM of a grouped problem: l = 1, its own shape, alpha, data and expected output.
struct Group {
  int64_t m = 0, n = 1, k = 2;  // m may be 0: an expert that received no tokens
  float alpha = 1.0f;
  // The problem's operand formats, a_format for A and b_format for B (every group shares them):
  // rows of operand_row_bytes (packed E2M1: k/2), empty when m = 0.
  std::vector<uint8_t> a, b;
  std::vector<uint8_t> sfa, sfb;  // LINEAR scales, m*kb(a_format) and n*kb(b_format) bytes (empty when m = 0)
  std::optional<std::vector<uint32_t>> expect;  // m*n words, if recorded (never for m = 0)

  // Sizes for operands of format fa (A) and fb (B): a group does not know the problem's formats,
  // so every caller names them (an NVFP4-only default would size MX groups silently wrong).
  int64_t kb(BlockFormat f) const { return operand_kb(f, k); }
  int64_t a_bytes(BlockFormat fa) const { return m * operand_row_bytes(fa, k); }
  int64_t b_bytes(BlockFormat fb) const { return m == 0 ? 0 : n * operand_row_bytes(fb, k); }
  int64_t sfa_bytes(BlockFormat fa) const { return m * kb(fa); }
  int64_t sfb_bytes(BlockFormat fb) const { return m == 0 ? 0 : n * kb(fb); }
  int64_t c_elems() const { return m * n; }
};

// One value of an op's declared tensors (op_table.h's TensorDecl of that name): its values as
// little-endian words of the declared type, in C order.
struct NamedTensor {
  std::string name;
  std::vector<uint8_t> bytes;
  bool operator==(const NamedTensor& o) const { return name == o.name && bytes == o.bytes; }
};

struct Problem {
  Op op = Op::gemm;
  int64_t m = 1, n = 1, k = 2, l = 1;
  SfLayout sf_layout = SfLayout::permuted;  // the layout kernels are handed
  ScaleSemantics semantics = ScaleSemantics::ue4m3;
  float alpha = 1.0f;
  OutType out_type = OutType::fp16;
  // The operands' block formats (SPEC section 1): NVFP4, or an MX format (every op of the GEMM
  // family; a grouped problem's groups and a dual problem's B2 share them). `semantics` applies
  // to NVFP4 operands' E4M3 scales.
  BlockFormat a_format = BlockFormat::nvfp4, b_format = BlockFormat::nvfp4;
  std::vector<uint8_t> a, b;      // l*m and l*n rows of operand_row_bytes (packed E2M1: k/2)
  std::vector<uint8_t> sfa, sfb;  // LINEAR scales, l*m*kb() and l*n*kb_b() bytes
  // Reference words of out_type in C order, if recorded (not for grouped_gemm: see Group).
  std::optional<std::vector<uint32_t>> expect;
  // dual_gemm: the second B (U's), laid out like b and sfb, and U's global scale.
  std::vector<uint8_t> b2, sfb2;
  float alpha2 = 1.0f;
  // grouped_gemm: m, n, k, l and alpha above are unused; each group holds its own. `packed` is
  // the arrangement of SPEC section 2 (one n, one k), see packed_layout().
  std::vector<Group> groups;
  bool packed = false;
  // quantize (SPEC section 2): X, l*m*k little-endian words of in_type in C order (n is 1),
  // quantized to q_format by `recipe` into Q (codes, laid out like A) and SFQ (one scale per
  // block of k, LINEAR here like every scale; sf_layout is the layout the kernel writes).
  // quant_2d: NVFP4 blocks of 16 x 16 (16 rows, 16 k); row_global_scale: one global scale per
  // row; stochastic_seed: codes rounded stochastically from it. out_type is fp16 and unused.
  InType in_type = InType::bf16;
  BlockFormat q_format = BlockFormat::nvfp4;
  Recipe recipe = Recipe::te;
  bool quant_2d = false, row_global_scale = false;
  std::optional<uint64_t> stochastic_seed;
  std::vector<uint8_t> x;
  std::optional<std::vector<uint8_t>> expect_q, expect_sfq;  // reference Q and SFQ (linear), if recorded
  // out_type nvfp4 (gemm, grouped_gemm, dual_gemm; SPEC section 2's block-scaled output): the
  // recipe the output is quantized with and its global scale in the recipe's convention (one, or
  // for grouped_gemm one per group). expect_q and expect_sfq then hold the reference Q and SFQ
  // (linear), a grouped problem's groups one after another; `expect` is unused.
  Recipe out_recipe = Recipe::te;
  std::vector<float> out_global_scale;
  // The tensors op declares in op_table.h (a bias), in declaration order: each present with its
  // length, or none at all in a case given as a seed until its data are drawn.
  std::vector<NamedTensor> tensors;
  std::string note;
  // A case may name a seed and generator instead of explicit data (SPEC.md section 4); the
  // harness's generators fill a, b, sfa, sfb from them. Explicit data always wins.
  std::optional<uint64_t> seed;
  std::string generator;
  // Set when a, b, sfa and sfb are exactly what `seed` and `generator` expand to (the harness's
  // expand_seeded_case sets it), so a large case can be saved as its seed alone. Not written to
  // case files; whoever changes the data clears it.
  bool data_from_seed = false;

  // Sizes of the problem-level tensors (0 for grouped_gemm, whose data are per group, and for
  // quantize, whose data are X).
  // kb(): A's scale blocks per row (B's too unless the formats' blocks differ), kb_b(): B's.
  int64_t kb() const { return operand_kb(a_format, k); }
  int64_t kb_b() const { return operand_kb(b_format, k); }
  // Whether an operand is of an MX format (the block-scaled reference and rule 9 judge it).
  bool mx_operands() const { return a_format != BlockFormat::nvfp4 || b_format != BlockFormat::nvfp4; }
  bool gemm_data() const { return !op_is_grouped(op) && !op_quantizes(op); }
  int64_t a_bytes() const { return gemm_data() ? l * m * operand_row_bytes(a_format, k) : 0; }
  int64_t b_bytes() const { return gemm_data() ? l * n * operand_row_bytes(b_format, k) : 0; }
  int64_t b2_bytes() const { return op_is_dual(op) ? l * n * operand_row_bytes(b_format, k) : 0; }
  int64_t sfa_bytes() const { return gemm_data() ? l * m * kb() : 0; }
  int64_t sfb_bytes() const { return gemm_data() ? l * n * kb_b() : 0; }
  int64_t sfb2_bytes() const { return op_is_dual(op) ? l * n * kb_b() : 0; }
  // quantize: X's bytes, Q's bytes, scale blocks per row and SFQ's bytes (linear).
  int64_t x_bytes() const { return op_quantizes(op) ? l * m * k * in_word_bytes(in_type) : 0; }
  int64_t q_bytes() const { return op_quantizes(op) ? (packs_nibbles(q_format) ? l * m * k / 2 : l * m * k) : 0; }
  int64_t qkb() const { return (k + block_size(q_format) - 1) / block_size(q_format); }
  int64_t sfq_bytes() const { return op_quantizes(op) ? l * m * qkb() : 0; }
  // Output elements: l*m*n, or for grouped_gemm the sum of m_g*n_g (the groups' outputs one
  // after another, which is also the packed C). quantize: 0 (its outputs are Q and SFQ).
  int64_t c_elems() const;
  int64_t c_bytes() const { return c_elems() * out_word_bytes(out_type); }
  bool has_data() const;  // every tensor present with the right length (every group's too)
  // The declared tensor `name`'s bytes, or nullptr when p does not hold it.
  const std::vector<uint8_t>* tensor(const std::string& name) const;
};

// A declared tensor's number of values for p's shape, its bytes per value, and the count as
// messages state it ("l*m").
int64_t tensor_elements(const Problem& p, const TensorDecl& d);
inline int tensor_value_bytes(TensorType) { return 4; }
const char* tensor_extent_text(TensorExtent extent);
// Empty when p holds exactly its op's declared tensors (all of them, or none with a seed when
// `seeded` allows it), each of its length with valid values (finite FP32); else what is wrong.
std::string tensors_error(const Problem& p, bool seeded);

// Empty when the shape is valid, else a sentence saying what is wrong. gemv/gemm/dual_gemm:
// m, n, l >= 1, k even >= 2, n == 1 for gemv; MX operand formats for gemv and gemm only, where
// k >= 1 need only be even for an E2M1 operand. grouped_gemm: 1 <= groups <= kMaxGroups, every
// m_g >= 0, n_g >= 1, k_g even >= 2, one n and one k when packed. Every size (each tensor, the
// totals, the packed buffers) fits in memory arithmetic (2^40 bytes).
std::string shape_error(const Problem& p);
// shape_error plus finite alphas, data lengths (and expect's length when present), no data or
// expect in an empty group.
std::string problem_error(const Problem& p);

constexpr int64_t kMaxGroups = int64_t(1) << 20;

// Whether p records any expected output (expect, or some group's expect.g), and forgetting them.
bool has_expect(const Problem& p);
void clear_expect(Problem& p);

// The packed arrangement of a grouped problem (SPEC section 2), all offsets 64-bit:
//   A and C: group g's rows start at row M_g = m_0 + ... + m_(g-1);
//   B, SFB: G consecutive n x k matrices / scale sets (a batch of l = G);
//   SFA linear: rows back to back like A; SFA permuted: group g's 128x4 tiles start at tile
//   T_g = ceil(m_0/128) + ... + ceil(m_(g-1)/128).
// Rows take operand_row_bytes of their format (packed E2M1: k/2) and scale blocks kb of A's
// format (kb) or B's (kb_b).
// Valid for any grouped problem whose groups share n and k (shape_error requires that of
// packed ones).
struct PackedLayout {
  int64_t n = 0, k = 0, kb = 0, kb_b = 0;
  int64_t a_row = 0, b_row = 0;      // bytes of one row of A and of B
  std::vector<int64_t> row_offset;   // M_g, G + 1 entries (the last is sum m_g)
  std::vector<int64_t> tile_offset;  // T_g, G + 1 entries
  int64_t total_m() const { return row_offset.back(); }
  int64_t a_bytes() const { return total_m() * a_row; }
  int64_t b_bytes() const { return static_cast<int64_t>(row_offset.size() - 1) * n * b_row; }
  int64_t sfa_linear_bytes() const { return total_m() * kb; }
  int64_t sfa_permuted_bytes() const { return tile_offset.back() * ((kb + 3) / 4) * 512; }
  int64_t sfb_linear_bytes() const { return static_cast<int64_t>(row_offset.size() - 1) * n * kb_b; }
  int64_t sfb_permuted_bytes() const;
  int64_t c_elems() const { return total_m() * n; }
  // Byte offsets of group g in each packed buffer, and its first element of C.
  int64_t a_offset(size_t g) const { return row_offset[g] * a_row; }
  int64_t b_offset(size_t g) const { return static_cast<int64_t>(g) * n * b_row; }
  int64_t sfa_linear_offset(size_t g) const { return row_offset[g] * kb; }
  int64_t sfa_permuted_offset(size_t g) const { return tile_offset[g] * ((kb + 3) / 4) * 512; }
  int64_t sfb_linear_offset(size_t g) const { return static_cast<int64_t>(g) * n * kb_b; }
  int64_t sfb_permuted_offset(size_t g) const;
  int64_t c_offset(size_t g) const { return row_offset[g] * n; }
};
// Throws std::invalid_argument when the groups do not share n and k (or p is not grouped).
PackedLayout packed_layout(const Problem& p);

// The packed buffers of a grouped problem with data. Permuted scales: every group's tiles in
// place (SFB: a batch of l = G), padding cells (rows past m_g in a group's last tile, blocks past
// kb) set to pad_byte; the suite uses a NaN scale there.
struct PackedData {
  std::vector<uint8_t> a, b, sfa_linear, sfb_linear, sfa_permuted, sfb_permuted;
};
// What pack_groups fills: every buffer, or only the scales of one layout (for a caller that lays
// A and B out from the groups' own bytes, which are gigabytes in a production MoE layer).
enum class PackedParts { all, linear_scales, permuted_scales };
PackedData pack_groups(const Problem& p, uint8_t pad_byte, PackedParts parts = PackedParts::all);

// Where output element `index` (in C order, groups one after another) lies: group g (-1 for
// problems that are not grouped), batch b, row i, column j.
struct OutputPosition {
  int64_t g = -1, b = 0, i = 0, j = 0;
};
OutputPosition output_position(const Problem& p, int64_t index);
// Group g of a grouped problem as the l = 1 GEMM it is: its shape, alpha and data, p's output
// type (a block-scaled one with the group's global scale) and scale semantics, linear scales (as
// every Problem holds them); with_data false: all of it but the data.
Problem group_problem(const Problem& p, size_t g, bool with_data = true);

// First output element of each group (G + 1 entries, the last is c_elems()); {0, c_elems()}
// for problems that are not grouped.
std::vector<int64_t> group_output_offsets(const Problem& p);

}  // namespace nvfp4
