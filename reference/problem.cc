// Names of the enums, the validity checks of a Problem and the packed arrangement of grouped
// problems (SPEC.md section 2).
#include "reference/problem.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>

#include "reference/block_scaled_output.h"
#include "reference/scale_layout.h"

namespace nvfp4 {

const char* to_string(Op op) {
  const OpInfo* o = find_op(op);
  return o != nullptr ? o->name : "unknown-op";
}

const char* to_string(OutType type) {
  switch (type) {
    case OutType::fp16: return "fp16";
    case OutType::bf16: return "bf16";
    case OutType::fp32: return "fp32";
    case OutType::nvfp4: return "nvfp4";
  }
  return "unknown-out-type";
}

const char* to_string(BlockFormat format) {
  switch (format) {
    case BlockFormat::nvfp4: return "nvfp4";
    case BlockFormat::mxfp4: return "mxfp4";
    case BlockFormat::mxfp8_e4m3: return "mxfp8_e4m3";
    case BlockFormat::mxfp8_e5m2: return "mxfp8_e5m2";
  }
  return "unknown-format";
}

const char* to_string(InType type) {
  switch (type) {
    case InType::fp16: return "fp16";
    case InType::bf16: return "bf16";
    case InType::fp32: return "fp32";
  }
  return "unknown-in-type";
}

const char* to_string(Recipe recipe) {
  switch (recipe) {
    case Recipe::te: return "te";
    case Recipe::ref: return "ref";
    case Recipe::fast: return "fast";
    case Recipe::torchao: return "torchao";
    case Recipe::mx_rceil: return "mx_rceil";
    case Recipe::mx_floor: return "mx_floor";
    case Recipe::mx_even: return "mx_even";
  }
  return "unknown-recipe";
}

namespace {

// Finds text among the names of an enum's values `first`..`last` (consecutive).
template <class E>
bool parse_enum(const std::string& text, E first, E last, E* out) {
  for (uint32_t v = static_cast<uint32_t>(first); v <= static_cast<uint32_t>(last); ++v) {
    if (text == to_string(static_cast<E>(v))) {
      *out = static_cast<E>(v);
      return true;
    }
  }
  return false;
}

}  // namespace

bool parse_op(const std::string& text, Op* op) {
  for (const OpInfo& o : kOpTable) {
    if (text == o.name) {
      *op = o.op;
      return true;
    }
  }
  return false;
}
std::string op_name_list(const char* conjunction) {
  std::string out;
  const size_t n = std::size(kOpTable);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += i + 1 == n ? std::string(" ") + conjunction + " " : std::string(", ");
    out += kOpTable[i].name;
  }
  return out;
}

bool parse_block_format(const std::string& text, BlockFormat* f) {
  return parse_enum(text, BlockFormat::nvfp4, BlockFormat::mxfp8_e5m2, f);
}
bool parse_in_type(const std::string& text, InType* t) { return parse_enum(text, InType::fp16, InType::fp32, t); }
bool parse_recipe(const std::string& text, Recipe* r) { return parse_enum(text, Recipe::te, Recipe::mx_even, r); }

bool parse_out_type(const std::string& text, OutType* type) {
  for (const OutType t : {OutType::fp16, OutType::bf16, OutType::fp32, OutType::nvfp4}) {
    if (text == to_string(t)) {
      *type = t;
      return true;
    }
  }
  return false;
}

const char* to_string(SfLayout layout) {
  switch (layout) {
    case SfLayout::linear: return "linear";
    case SfLayout::permuted: return "permuted";
  }
  return "unknown-layout";
}

const char* to_string(ScaleSemantics semantics) {
  switch (semantics) {
    case ScaleSemantics::ue4m3: return "ue4m3";
    case ScaleSemantics::e4m3: return "e4m3";
  }
  return "unknown-semantics";
}

namespace {

// No tensor of a problem may exceed this many bytes: far beyond any real case, and small enough
// that every product of two sizes below it fits in int64 (2^40 * 2^22 < 2^63).
constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;

// a * b * c, or -1 when it overflows or exceeds kMaxTensorBytes.
int64_t checked_bytes(int64_t a, int64_t b, int64_t c) {
  if (a < 0 || b < 0 || c < 0) return -1;
  int64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return -1;
  return abc > kMaxTensorBytes ? -1 : abc;
}

std::string size_error(const char* what, int64_t a, int64_t b, int64_t c) {
  if (checked_bytes(a, b, c) >= 0) return {};
  return std::string(what) + " would take more than 2^40 bytes";
}

}  // namespace

int64_t Problem::c_elems() const {
  if (op_quantizes(op)) return 0;
  if (!op_is_grouped(op)) return l * m * n;
  int64_t total = 0;
  for (const Group& g : groups) total += g.c_elems();
  return total;
}

const std::vector<uint8_t>* Problem::tensor(const std::string& name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return &t.bytes;
  return nullptr;
}

int64_t tensor_elements(const Problem& p, const TensorDecl& d) {
  switch (d.extent) {
    case TensorExtent::l_m: return p.l * p.m;
    case TensorExtent::l_n: return p.l * p.n;
    case TensorExtent::l_m_n: return p.l * p.m * p.n;
    case TensorExtent::l: return p.l;
  }
  return 0;
}

const char* tensor_extent_text(TensorExtent extent) {
  switch (extent) {
    case TensorExtent::l_m: return "l*m";
    case TensorExtent::l_n: return "l*n";
    case TensorExtent::l_m_n: return "l*m*n";
    case TensorExtent::l: return "l";
  }
  return "?";
}

std::string tensors_error(const Problem& p, bool seeded) {
  const TensorDecls decls = op_tensors(p.op);
  if (p.tensors.empty() && (decls.count == 0 || seeded)) return {};
  if (p.tensors.size() != decls.count) {
    std::string names;
    for (const TensorDecl& d : decls) names += std::string(names.empty() ? "" : ", ") + d.name;
    return std::string(to_string(p.op)) + " has " + std::to_string(p.tensors.size()) + " declared tensors, expected " +
           std::to_string(decls.count) + (names.empty() ? "" : " (" + names + ")");
  }
  for (size_t x = 0; x < decls.count; ++x) {
    const TensorDecl& d = decls.data[x];
    const NamedTensor& t = p.tensors[x];
    if (t.name != d.name) return "tensor " + std::to_string(x) + " is '" + t.name + "', expected '" + d.name + "'";
    const int64_t want = tensor_elements(p, d) * tensor_value_bytes(d.type);
    if (static_cast<int64_t>(t.bytes.size()) != want)
      return t.name + " has " + std::to_string(t.bytes.size()) + " bytes, expected " + std::to_string(want) + " (" +
             tensor_extent_text(d.extent) + " values)";
    if (d.type == TensorType::f32) {
      for (size_t i = 0; i < t.bytes.size(); i += 4) {
        float f;
        std::memcpy(&f, t.bytes.data() + i, 4);
        if (!std::isfinite(f)) return t.name + " value " + std::to_string(i / 4) + " is not finite";
      }
    }
  }
  return {};
}

bool Problem::has_data() const {
  if (!shape_error(*this).empty()) return false;
  if (!tensors_error(*this, false).empty()) return false;
  auto fits = [](const std::vector<uint8_t>& v, int64_t want) { return static_cast<int64_t>(v.size()) == want; };
  if (op_is_grouped(op)) {
    for (const Group& g : groups) {
      if (!fits(g.a, g.a_bytes(a_format)) || !fits(g.b, g.b_bytes(b_format)) || !fits(g.sfa, g.sfa_bytes(a_format)) ||
          !fits(g.sfb, g.sfb_bytes(b_format)))
        return false;
    }
    return true;
  }
  if (op_quantizes(op)) return fits(x, x_bytes());
  return fits(a, a_bytes()) && fits(b, b_bytes()) && fits(sfa, sfa_bytes()) && fits(sfb, sfb_bytes()) &&
         fits(b2, b2_bytes()) && fits(sfb2, sfb2_bytes());
}

namespace {

std::string gemm_shape_error(int64_t m, int64_t n, int64_t k, int64_t l, int64_t out_bytes, const std::string& at,
                             bool gemv = false) {
  if (m < 1) return at + "m = " + std::to_string(m) + " must be >= 1";
  if (n < 1) return at + "n = " + std::to_string(n) + " must be >= 1";
  if (l < 1) return at + "l = " + std::to_string(l) + " must be >= 1";
  if (k < 2 || k % 2 != 0) return at + "k = " + std::to_string(k) + " must be even and >= 2";
  if (gemv && n != 1) return "gemv needs n = 1, got n = " + std::to_string(n);
  // k/2 bytes per row and kb scales per row are both <= k, so bounding l*rows*k bounds A, B and
  // the linear scales; checked in order so that later sizes are computed from bounded values.
  std::string e = size_error("A", l, m, k);
  if (e.empty()) e = size_error("B", l, n, k);
  if (e.empty()) e = size_error("C", l, m, checked_bytes(n, out_bytes, 1));
  if (e.empty()) e = size_error("permuted SFA", l, ceil_div(m, 128) * 128, ceil_div(k, 64) * 4);
  if (e.empty()) e = size_error("permuted SFB", l, ceil_div(n, 128) * 128, ceil_div(k, 64) * 4);
  return e.empty() ? e : at + e;
}

std::string mx_k_error(const Problem& p, int64_t k, const std::string& at);

std::string grouped_shape_error(const Problem& p) {
  const int64_t count = static_cast<int64_t>(p.groups.size());
  if (count < 1) return "grouped_gemm needs at least 1 group";
  if (count > kMaxGroups) return "grouped_gemm has " + std::to_string(count) + " groups, more than " + std::to_string(kMaxGroups);
  const int64_t out_bytes = out_word_bytes(p.out_type);
  const bool mx = p.mx_operands();
  // Totals over the groups (the packed buffers and the concatenated outputs): each per-group
  // size is below 2^40 and there are at most 2^20 groups, so the sums fit in int64 before the
  // final check.
  int64_t rows_k = 0, cols_k = 0, outputs = 0, tiles = 0;
  for (int64_t g = 0; g < count; ++g) {
    const Group& q = p.groups[static_cast<size_t>(g)];
    const std::string at = "group " + std::to_string(g) + ": ";
    if (q.m < 0) return at + "m = " + std::to_string(q.m) + " must be >= 0";
    if (q.m > (int64_t(1) << 40)) return at + "m = " + std::to_string(q.m) + " is too large";
    // An empty group still has a shape (its B slot in the packed arrangement). MX operands
    // follow mx_shape_error's k: even only where an operand packs E2M1 nibbles.
    std::string e = mx ? mx_k_error(p, q.k, at) : "";
    if (e.empty()) e = gemm_shape_error(std::max<int64_t>(q.m, 1), q.n, mx ? q.k + q.k % 2 : q.k, 1, out_bytes, at);
    if (!e.empty()) return e;
    if (p.packed && (q.n != p.groups[0].n || q.k != p.groups[0].k))
      return at + "n = " + std::to_string(q.n) + ", k = " + std::to_string(q.k) +
             ": the packed arrangement needs one n and one k for all groups (group 0 has n = " +
             std::to_string(p.groups[0].n) + ", k = " + std::to_string(p.groups[0].k) + ")";
    rows_k += q.m * q.k;
    cols_k += q.n * q.k;
    outputs += q.m * q.n;
    tiles += ceil_div(q.m, 128) * 128 * (ceil_div(q.k, 64) * 4) + ceil_div(q.n, 128) * 128 * (ceil_div(q.k, 64) * 4);
    if (rows_k > kMaxTensorBytes || cols_k > kMaxTensorBytes || outputs > kMaxTensorBytes / out_bytes ||
        tiles > kMaxTensorBytes)
      return "the groups' tensors together would take more than 2^40 bytes (at group " + std::to_string(g) + ")";
  }
  return {};
}

// quantize: X of l x m x k (n = 1), k even for E2M1 codes, the recipe one of the format's,
// the options its own (2D tiles and stochastic rounding for NVFP4 only).
std::string quantize_shape_error(const Problem& p) {
  if (p.m < 1) return "m = " + std::to_string(p.m) + " must be >= 1";
  if (p.l < 1) return "l = " + std::to_string(p.l) + " must be >= 1";
  if (p.n != 1) return "quantize needs n = 1, got n = " + std::to_string(p.n);
  if (p.k < 2 || (packs_nibbles(p.q_format) && p.k % 2 != 0))
    return "k = " + std::to_string(p.k) + (packs_nibbles(p.q_format) ? " must be even and >= 2" : " must be >= 2");
  if (static_cast<uint32_t>(p.in_type) < 1 || static_cast<uint32_t>(p.in_type) > 3) return "in_type must be fp16, bf16 or fp32";
  if (static_cast<uint32_t>(p.q_format) < 1 || static_cast<uint32_t>(p.q_format) > 4)
    return "format must be nvfp4, mxfp4, mxfp8_e4m3 or mxfp8_e5m2";
  if (static_cast<uint32_t>(p.recipe) < 1 || static_cast<uint32_t>(p.recipe) > 7) return "recipe is not one of SPEC section 2's";
  if (!recipe_fits(p.recipe, p.q_format))
    return std::string("recipe ") + to_string(p.recipe) + " does not quantize to " + to_string(p.q_format) +
           " (te, ref, fast and torchao make nvfp4; mx_rceil, mx_floor and mx_even the MX formats)";
  if (p.q_format != BlockFormat::nvfp4 && (p.quant_2d || p.row_global_scale))
    return "16 x 16 tiles and per-row global scales are NVFP4's (the MX recipes have no global scale)";
  if (p.quant_2d && p.row_global_scale) return "16 x 16 tiles span 16 rows: they cannot have one global scale per row";
  if (p.stochastic_seed && p.q_format != BlockFormat::nvfp4) return "stochastic rounding is for NVFP4 codes";
  std::string e = size_error("X", p.l, p.m, checked_bytes(p.k, in_word_bytes(p.in_type), 1));
  if (e.empty()) e = size_error("permuted SFQ", p.l, ceil_div(p.m, 128) * 128, ceil_div(p.qkb(), 4) * 4);
  return e;
}

bool valid_format(BlockFormat f) {
  return static_cast<uint32_t>(f) >= 1 && static_cast<uint32_t>(f) <= 4;
}

// With an MX operand an E4M3/E5M2 operand has a byte per element, so k need only be even (and
// >= 2) when an operand packs E2M1 nibbles; each operand has its own kb.
std::string mx_k_error(const Problem& p, int64_t k, const std::string& at) {
  const bool nibbles = packs_nibbles(p.a_format) || packs_nibbles(p.b_format);
  if (k < 1 || (nibbles && k % 2 != 0))
    return at + "k = " + std::to_string(k) + (nibbles ? " must be even and >= 2 (an E2M1 operand)" : " must be >= 1");
  return {};
}

// gemv/gemm/dual_gemm with an MX operand: gemm_shape_error's bounds hold for k rounded up to even
// (a row is at most k bytes).
std::string mx_shape_error(const Problem& p) {
  if (std::string e = mx_k_error(p, p.k, ""); !e.empty()) return e;
  return gemm_shape_error(p.m, p.n, p.k + p.k % 2, p.l, out_word_bytes(p.out_type), "", op_n_is_one(p.op));
}

// A block-scaled output records its expected outputs as expect_q and expect_sfq (linear), and
// only it and quantize have them.
std::string out_expect_error(const Problem& p) {
  if (op_quantizes(p.op)) return {};
  if (p.out_type != OutType::nvfp4)
    return p.expect_q || p.expect_sfq ? "expect_q and expect_sfq are for quantize and out_type nvfp4" : "";
  bool words = p.expect.has_value();
  for (const Group& g : p.groups) words = words || g.expect.has_value();
  if (words) return "out_type nvfp4 records its expected outputs as expect_q and expect_sfq, not expect";
  if (p.expect_q && static_cast<int64_t>(p.expect_q->size()) != out_q_bytes(p))
    return "expect_q has " + std::to_string(p.expect_q->size()) + " bytes, expected " + std::to_string(out_q_bytes(p));
  if (p.expect_sfq && static_cast<int64_t>(p.expect_sfq->size()) != out_sfq_bytes(p))
    return "expect_sfq has " + std::to_string(p.expect_sfq->size()) + " bytes, expected " +
           std::to_string(out_sfq_bytes(p));
  return {};
}

}  // namespace

std::string shape_error(const Problem& p) {
  if (find_op(p.op) == nullptr) return "op must be " + op_name_list("or");
  if (p.sf_layout != SfLayout::linear && p.sf_layout != SfLayout::permuted)
    return "sf_layout must be linear or permuted";
  if (p.semantics != ScaleSemantics::ue4m3 && p.semantics != ScaleSemantics::e4m3)
    return "scale_semantics must be ue4m3 or e4m3";
  if (p.out_type != OutType::fp16 && p.out_type != OutType::bf16 && p.out_type != OutType::fp32 &&
      p.out_type != OutType::nvfp4)
    return "out_type must be fp16, bf16, fp32 or nvfp4";
  if (!valid_format(p.a_format) || !valid_format(p.b_format))
    return "a_format and b_format must be nvfp4, mxfp4, mxfp8_e4m3 or mxfp8_e5m2";
  // The block-scaled output's reference quantizes exact NVFP4 results; MX operands have their own.
  if (p.mx_operands() && p.out_type == OutType::nvfp4 && !op_quantizes(p.op))
    return "out_type nvfp4 is for NVFP4 operands (a_format and b_format nvfp4)";
  if (std::string e = block_scaled_output_error(p); !e.empty()) return e;
  if (op_is_grouped(p.op)) return grouped_shape_error(p);
  if (!p.groups.empty()) return "only grouped_gemm has groups";
  if (op_quantizes(p.op)) {
    if (p.mx_operands()) return "a_format and b_format are for the GEMM family (quantize has format)";
    return p.packed ? "only grouped_gemm has the packed arrangement" : quantize_shape_error(p);
  }
  if (p.packed) return "only grouped_gemm has the packed arrangement";
  if (p.mx_operands()) return mx_shape_error(p);
  return gemm_shape_error(p.m, p.n, p.k, p.l, out_word_bytes(p.out_type), "", op_n_is_one(p.op));
}

std::string problem_error(const Problem& p) {
  std::string e = shape_error(p);
  if (e.empty()) e = out_expect_error(p);
  if (e.empty()) e = tensors_error(p, false);
  if (!e.empty()) return e;
  auto length = [](const std::string& what, size_t got, int64_t want) -> std::string {
    if (static_cast<int64_t>(got) == want) return {};
    return what + " has " + std::to_string(got) + " bytes, expected " + std::to_string(want);
  };
  auto expect_length = [](const std::string& what, const std::optional<std::vector<uint32_t>>& expect,
                          int64_t want) -> std::string {
    if (!expect || static_cast<int64_t>(expect->size()) == want) return {};
    return what + " has " + std::to_string(expect->size()) + " values, expected " + std::to_string(want);
  };
  const uint32_t word_mask = out_word_bytes(p.out_type) == 2 ? 0xFFFFu : 0xFFFFFFFFu;
  auto expect_words = [word_mask](const std::string& what, const std::optional<std::vector<uint32_t>>& expect) -> std::string {
    if (!expect) return {};
    for (const uint32_t w : *expect) {
      if ((w & ~word_mask) != 0) return what + " holds a word wider than the output type";
    }
    return {};
  };
  if (op_is_grouped(p.op)) {
    for (size_t g = 0; g < p.groups.size(); ++g) {
      const Group& q = p.groups[g];
      const std::string at = "group " + std::to_string(g) + ": ";
      if (!std::isfinite(q.alpha)) return at + "alpha must be finite";
      for (std::string err : {length(at + "a", q.a.size(), q.a_bytes(p.a_format)),
                              length(at + "b", q.b.size(), q.b_bytes(p.b_format)),
                              length(at + "sfa", q.sfa.size(), q.sfa_bytes(p.a_format)),
                              length(at + "sfb", q.sfb.size(), q.sfb_bytes(p.b_format)),
                              expect_length(at + "expect", q.expect, q.c_elems()),
                              expect_words(at + "expect", q.expect)}) {
        if (!err.empty()) return err;
      }
      if (q.m == 0 && q.expect) return at + "an empty group has no expect";
    }
    if (p.expect) return "grouped_gemm holds its expected outputs per group";
    return {};
  }
  if (op_quantizes(p.op)) {
    auto optional_length = [&](const std::string& what, const std::optional<std::vector<uint8_t>>& v, int64_t want) {
      return v ? length(what, v->size(), want) : std::string();
    };
    for (std::string err : {length("x", p.x.size(), p.x_bytes()), optional_length("expect_q", p.expect_q, p.q_bytes()),
                            optional_length("expect_sfq", p.expect_sfq, p.sfq_bytes())})
      if (!err.empty()) return err;
    if (p.expect) return "quantize records its expected outputs as expect_q and expect_sfq";
    return {};
  }
  if (!std::isfinite(p.alpha)) return "alpha must be finite";
  if (!std::isfinite(p.alpha2)) return "alpha2 must be finite";
  for (std::string err : {length("a", p.a.size(), p.a_bytes()), length("b", p.b.size(), p.b_bytes()),
                          length("sfa", p.sfa.size(), p.sfa_bytes()),
                          length("sfb", p.sfb.size(), p.sfb_bytes()),
                          length("b2", p.b2.size(), p.b2_bytes()),
                          length("sfb2", p.sfb2.size(), p.sfb2_bytes()),
                          expect_length("expect", p.expect, p.c_elems()), expect_words("expect", p.expect)}) {
    if (!err.empty()) return err;
  }
  return {};
}

bool has_expect(const Problem& p) {
  if (p.expect || p.expect_q || p.expect_sfq) return true;
  for (const Group& g : p.groups) {
    if (g.expect) return true;
  }
  return false;
}

void clear_expect(Problem& p) {
  p.expect.reset();
  p.expect_q.reset();
  p.expect_sfq.reset();
  for (Group& g : p.groups) g.expect.reset();
}

int64_t PackedLayout::sfb_permuted_bytes() const {
  return sf_permuted_bytes(n, kb_b, static_cast<int64_t>(row_offset.size() - 1));
}

int64_t PackedLayout::sfb_permuted_offset(size_t g) const {
  return static_cast<int64_t>(g) * ceil_div(n, 128) * ceil_div(kb_b, 4) * 512;
}

PackedLayout packed_layout(const Problem& p) {
  if (!op_is_grouped(p.op) || p.groups.empty())
    throw std::invalid_argument("packed_layout: not a grouped problem");
  PackedLayout L;
  L.n = p.groups[0].n;
  L.k = p.groups[0].k;
  L.kb = operand_kb(p.a_format, L.k);
  L.kb_b = operand_kb(p.b_format, L.k);
  L.a_row = operand_row_bytes(p.a_format, L.k);
  L.b_row = operand_row_bytes(p.b_format, L.k);
  L.row_offset.assign(1, 0);
  L.tile_offset.assign(1, 0);
  for (const Group& g : p.groups) {
    if (g.n != L.n || g.k != L.k)
      throw std::invalid_argument("packed_layout: the groups do not share one n and one k");
    L.row_offset.push_back(L.row_offset.back() + g.m);
    L.tile_offset.push_back(L.tile_offset.back() + ceil_div(g.m, 128));
  }
  return L;
}

PackedData pack_groups(const Problem& p, uint8_t pad_byte, PackedParts parts) {
  const std::string error = problem_error(p);
  if (!error.empty()) throw std::invalid_argument("pack_groups: " + error);
  if (!p.has_data()) throw std::invalid_argument("pack_groups: the problem has no data");
  const PackedLayout L = packed_layout(p);
  const bool data = parts == PackedParts::all, permuted = parts != PackedParts::linear_scales;
  PackedData d;
  if (data) d.a.reserve(static_cast<size_t>(L.a_bytes()));
  d.sfa_linear.reserve(static_cast<size_t>(L.sfa_linear_bytes()));
  if (data) d.b.reserve(static_cast<size_t>(L.b_bytes()));
  d.sfb_linear.reserve(static_cast<size_t>(L.sfb_linear_bytes()));
  if (permuted) d.sfa_permuted.reserve(static_cast<size_t>(L.sfa_permuted_bytes()));
  for (const Group& g : p.groups) {
    if (data) d.a.insert(d.a.end(), g.a.begin(), g.a.end());
    d.sfa_linear.insert(d.sfa_linear.end(), g.sfa.begin(), g.sfa.end());
    // An empty group keeps its B slot (B_g sits at byte g*n*k/2): zero data under pad scales,
    // which no correct kernel reads.
    if (g.m == 0) {
      if (data) d.b.insert(d.b.end(), static_cast<size_t>(L.n * L.b_row), 0);
      d.sfb_linear.insert(d.sfb_linear.end(), static_cast<size_t>(L.n * L.kb_b), pad_byte);
    } else {
      if (data) d.b.insert(d.b.end(), g.b.begin(), g.b.end());
      d.sfb_linear.insert(d.sfb_linear.end(), g.sfb.begin(), g.sfb.end());
    }
    // Each group's SFA tiles on their own (l = 1): the group begins on a tile boundary and the
    // rows of its last tile past m_g are padding.
    if (g.m > 0 && permuted) {
      const std::vector<uint8_t> tiles = sf_to_permuted(g.sfa.data(), g.m, L.kb, 1, pad_byte);
      d.sfa_permuted.insert(d.sfa_permuted.end(), tiles.begin(), tiles.end());
    }
  }
  if (permuted)
    d.sfb_permuted = sf_to_permuted(d.sfb_linear.data(), L.n, L.kb_b, static_cast<int64_t>(p.groups.size()), pad_byte);
  if (parts == PackedParts::permuted_scales) d.sfa_linear = {}, d.sfb_linear = {};
  return d;
}

Problem group_problem(const Problem& p, size_t g, bool with_data) {
  const Group& q = p.groups.at(g);
  Problem one;
  one.op = Op::gemm;
  one.m = q.m, one.n = q.n, one.k = q.k, one.l = 1;
  one.sf_layout = SfLayout::linear;
  one.semantics = p.semantics;
  one.alpha = q.alpha;
  one.out_type = p.out_type;
  if (p.out_type == OutType::nvfp4) {
    // The group's own output global scale (one for all groups, or one per group): a block-scaled
    // GEMM needs one, and the group's bytes are encoded with it.
    one.out_recipe = p.out_recipe;
    if (!p.out_global_scale.empty()) one.out_global_scale = {p.out_global_scale[p.out_global_scale.size() == 1 ? 0 : g]};
  }
  one.a_format = p.a_format;
  one.b_format = p.b_format;
  if (with_data) one.a = q.a, one.b = q.b, one.sfa = q.sfa, one.sfb = q.sfb;
  return one;
}

std::vector<int64_t> group_output_offsets(const Problem& p) {
  std::vector<int64_t> offsets{0};
  if (!op_is_grouped(p.op)) {
    offsets.push_back(p.c_elems());
    return offsets;
  }
  for (const Group& g : p.groups) offsets.push_back(offsets.back() + g.c_elems());
  return offsets;
}

OutputPosition output_position(const Problem& p, int64_t index) {
  OutputPosition pos;
  if (!op_is_grouped(p.op)) {
    pos.b = index / (p.m * p.n);
    pos.i = (index / p.n) % p.m;
    pos.j = index % p.n;
    return pos;
  }
  int64_t base = 0;
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const int64_t count = p.groups[g].c_elems();
    if (index < base + count) {
      pos.g = static_cast<int64_t>(g);
      pos.i = (index - base) / p.groups[g].n;
      pos.j = (index - base) % p.groups[g].n;
      return pos;
    }
    base += count;
  }
  pos.g = static_cast<int64_t>(p.groups.size());  // past the last group
  return pos;
}

}  // namespace nvfp4
