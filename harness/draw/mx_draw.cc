// Draws of problems with MX operands (SPEC.md section 1's block formats): the operand formats a
// kernel declares, and data that defeats cancellation. When every block of a tensor has the same
// E8M0 exponent a scale read from the wrong block cancels out, so by default the exponents of
// each operand differ pairwise inside every row of blocks and every column of blocks (within a
// window that repeats only every W rows or blocks). The data classes add the extreme exponents
// 0x00 (2^-127) against 0xFE (2^127) in one block column, NaN scales 0xFF, E5M2 Inf and NaN
// elements and E4M3 elements at +-448.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "harness/draw/generators.h"
#include "kernels/registry.h"
#include "reference/exact_mx.h"

namespace nvfp4 {
namespace {

// The formats among `set` (bits 1u << format), in the order nvfp4, mxfp4, mxfp8_e4m3, mxfp8_e5m2.
std::vector<BlockFormat> format_list(uint32_t set) {
  std::vector<BlockFormat> out;
  for (uint32_t f = 1; f <= 4; ++f)
    if ((set >> f) & 1u) out.push_back(static_cast<BlockFormat>(f));
  return out;
}

// A finite element code of format f from one raw byte, small (|v| <= 7.5) unless `edge`, which
// moves it to the format's largest finite magnitude (E2M1 6, E4M3 448, E5M2 57344).
uint8_t element_code(BlockFormat f, uint8_t raw, ValueDist dist, bool tensor_b, int64_t x) {
  const bool zero = dist == ValueDist::sparse && raw % 8 != 0;
  uint8_t sign = raw & 0x80;
  if (dist == ValueDist::one_sign) sign = 0;
  if (dist == ValueDist::alternating) sign = static_cast<uint8_t>(((x + (tensor_b ? 1 : 0)) % 2) * 0x80);
  const bool edge = dist == ValueDist::edge && raw % 4 == 0;
  if (packs_nibbles(f)) {
    const uint8_t mag = zero ? 0 : edge ? 7 : (raw >> 1) & 7;
    return static_cast<uint8_t>(mag | (sign ? 8 : 0));
  }
  if (f == BlockFormat::mxfp8_e4m3) {  // exponent field 0..9: |v| <= 7.5
    const uint8_t mag = zero ? 0 : edge ? 0x7E : static_cast<uint8_t>(((raw >> 3) % 10) << 3 | (raw & 7));
    return static_cast<uint8_t>(mag | sign);
  }
  const uint8_t mag = zero ? 0 : edge ? 0x7B : static_cast<uint8_t>(((raw >> 2) % 18) << 2 | (raw & 3));  // E5M2
  return static_cast<uint8_t>(mag | sign);
}

// One operand's data: rows x k elements per batch, packed by format.
std::vector<uint8_t> draw_elements(Draws& d, BlockFormat f, int64_t rows, int64_t k, int64_t l, ValueDist dist,
                                   bool tensor_b) {
  const std::vector<uint8_t> raw = d.bytes(static_cast<size_t>(l * rows * k));
  std::vector<uint8_t> out(static_cast<size_t>(l * rows * operand_row_bytes(f, k)), 0);
  for (int64_t r = 0; r < l * rows; ++r)
    for (int64_t x = 0; x < k; ++x) {
      const uint8_t c = element_code(f, raw[static_cast<size_t>(r * k + x)], dist, tensor_b, x);
      if (!packs_nibbles(f)) out[static_cast<size_t>(r * k + x)] = c;
      else out[static_cast<size_t>(r * (k / 2) + x / 2)] |= static_cast<uint8_t>(c << (4 * (x % 2)));
    }
  return out;
}

// Scales of one operand (linear, l x rows x kb): NVFP4's E4M3 from scale_from_raw; MX E8M0
// exponents center + perm[(i + s) % W] - W/2, pairwise distinct along each row and each column
// of blocks within W, perm a drawn permutation of 0..W-1.
std::vector<uint8_t> draw_scales(Draws& d, BlockFormat f, int64_t rows, int64_t kb, int64_t l, int center, int window) {
  std::vector<uint8_t> out(static_cast<size_t>(l * rows * kb));
  if (f == BlockFormat::nvfp4) {
    const std::vector<uint8_t> raw = d.bytes(out.size());
    for (size_t x = 0; x < out.size(); ++x) out[x] = scale_from_raw(ScaleDist::narrow, raw[x]);
    return out;
  }
  std::vector<int> perm(static_cast<size_t>(window));
  std::iota(perm.begin(), perm.end(), 0);
  for (size_t x = perm.size(); x > 1; --x) std::swap(perm[x - 1], perm[d.below(x)]);
  const uint64_t shift = d.below(static_cast<uint64_t>(window));
  for (int64_t b = 0; b < l; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t s = 0; s < kb; ++s) {
        const int e = center + perm[static_cast<size_t>((i + s + b + static_cast<int64_t>(shift)) % window)] - window / 2;
        out[static_cast<size_t>((b * rows + i) * kb + s)] = static_cast<uint8_t>(std::clamp(e, 0, 254));
      }
  return out;
}

// The distinct-exponent window and the centers of A's and B's exponents: products of small
// elements (|a*b| <= 56) near 2^0 after both scales, W wide enough to tell 8 blocks apart in FP16
// (sums of two offsets within +-8) and 32 in BF16/FP32 (within +-32); edge elements (448^2,
// 57344^2) moved down so that FP16 outputs stay mostly finite.
struct Window {
  int center_a = 127, center_b = 127, width = 8;
};

Window scale_window(const Problem& p, const DataSpec& spec) {
  Window w;
  w.width = p.out_type == OutType::fp16 ? 8 : 32;
  int down = 0;
  if (spec.values == ValueDist::edge)
    for (const BlockFormat f : {p.a_format, p.b_format}) down += f == BlockFormat::mxfp8_e5m2 ? 16 : f == BlockFormat::mxfp8_e4m3 ? 9 : 0;
  if (spec.scales == ScaleDist::near_max) down -= p.out_type == OutType::fp16 ? 6 : 60;  // toward overflow
  if (spec.scales == ScaleDist::subnormal) down += p.out_type == OutType::fp16 ? 16 : 100;  // toward underflow
  w.center_a -= down / 2;
  w.center_b -= down - down / 2;
  return w;
}

// One block column with A's exponent 0x00 (2^-127) and B's 0xFE (2^127), or the reverse: their
// products are ordinary numbers, visible only if 0x00 is read as 2^-127.
void place_extremes(Draws& d, Problem& p) {
  const int64_t kb = std::min(p.kb(), p.kb_b());
  const int64_t s = static_cast<int64_t>(d.below(static_cast<uint64_t>(kb)));
  const bool a_low = d.below(2) == 0;
  if (p.a_format == BlockFormat::nvfp4 || p.b_format == BlockFormat::nvfp4) return;
  for (int64_t r = 0; r < p.l * p.m; ++r) p.sfa[static_cast<size_t>(r * p.kb() + s)] = a_low ? 0x00 : 0xFE;
  for (int64_t r = 0; r < p.l * p.n; ++r) p.sfb[static_cast<size_t>(r * p.kb_b() + s)] = a_low ? 0xFE : 0x00;
}

// nan_block: one E8M0 NaN (0xFF) scale somewhere in SFA or SFB, and an E5M2 operand's Inf or NaN
// element; edge: an E5M2 operand's Inf.
void place_specials(Draws& d, const DataSpec& spec, Problem& p) {
  const uint64_t where = d.below(static_cast<uint64_t>(p.sfa.size() + p.sfb.size()));
  const uint64_t special = d.below(4);
  if (spec.scales == ScaleDist::nan_block) {
    const bool in_a = where < p.sfa.size();
    if ((in_a ? p.a_format : p.b_format) != BlockFormat::nvfp4) {
      std::vector<uint8_t>& sf = in_a ? p.sfa : p.sfb;
      sf[in_a ? where : where - p.sfa.size()] = 0xFF;
    }
  }
  if (spec.scales != ScaleDist::nan_block && spec.values != ValueDist::edge) return;
  for (const bool b_side : {false, true}) {
    std::vector<uint8_t>& v = b_side ? p.b : p.a;
    if ((b_side ? p.b_format : p.a_format) != BlockFormat::mxfp8_e5m2 || v.empty()) continue;
    // Inf, -Inf, or (nan_block only) NaN
    const uint8_t codes[] = {0x7C, 0xFC, 0x7D, 0xFE};
    v[where % v.size()] = codes[spec.scales == ScaleDist::nan_block ? special : special % 2];
  }
}

}  // namespace

void draw_operand_formats(Draws& d, const nvfp4_kernel_info& info, Problem& p) {
  const std::vector<BlockFormat> a = format_list(declared_formats(info, false)), b = format_list(declared_formats(info, true));
  // One declared format draws nothing: an NVFP4 kernel's seeds mean what they always meant.
  p.a_format = a.size() > 1 ? a[d.below(a.size())] : a.front();
  p.b_format = b.size() > 1 ? b[d.below(b.size())] : b.front();
}

namespace {

// GEMV, GEMM and dual GEMM data (a dual problem's B2 and SFB2 drawn like B's, after them).
void draw_dense_mx(Draws& d, const DataSpec& spec, Problem& p) {
  const Window w = scale_window(p, spec);
  p.a = draw_elements(d, p.a_format, p.m, p.k, p.l, spec.values, false);
  p.b = draw_elements(d, p.b_format, p.n, p.k, p.l, spec.values, true);
  p.sfa = draw_scales(d, p.a_format, p.m, p.kb(), p.l, w.center_a, w.width);
  p.sfb = draw_scales(d, p.b_format, p.n, p.kb_b(), p.l, w.center_b, w.width);
  if (spec.scales == ScaleDist::full || spec.scales == ScaleDist::zero) place_extremes(d, p);
  place_specials(d, spec, p);
  p.alpha = alpha_from_raw(spec.alpha, static_cast<uint32_t>(d.below(uint64_t(1) << 32)));
  if (!op_is_dual(p.op)) return;
  p.b2 = draw_elements(d, p.b_format, p.n, p.k, p.l, spec.values, true);
  p.sfb2 = draw_scales(d, p.b_format, p.n, p.kb_b(), p.l, w.center_b, w.width);
  p.alpha2 = alpha_from_raw(spec.alpha, static_cast<uint32_t>(d.below(uint64_t(1) << 32)));
}

// The largest S (sum of |products|, finite products only) over the outputs of A against B.
long double largest_abs_sum(const MxProblem& x) {
  long double most = 0;
  for (const MxElement& e : exact_mx(x)) most = std::max(most, e.abs_sum.to_long_double());
  return most;
}

// The largest |element * scale| of an operand over its finite elements whose scale is not NaN
// (S counts no other product), as a power of two at or above it.
long double largest_scaled_element(const MxOperand& o, ScaleSemantics semantics) {
  int top = INT32_MIN;  // every such |element * scale| < 2^top
  const int64_t block = block_size(o.format), kb = o.kb();
  for (int64_t r = 0; r < o.l * o.rows; ++r) {
    for (int64_t s = 0; s < kb; ++s) {
      const uint8_t byte = o.scales[static_cast<size_t>(r * kb + s)];
      int scale_top;  // |scale| < 2^scale_top
      if (o.format == BlockFormat::nvfp4) {
        const ScaleValue v = e4m3_decode(byte, semantics);
        if (v.nan || v.sig == 0) continue;
        scale_top = v.exp + 4;  // sig < 16
      } else {
        const E8m0Value v = e8m0_decode(byte);
        if (v.nan) continue;
        scale_top = v.exp + 1;
      }
      for (int64_t x = s * block; x < std::min(o.k, (s + 1) * block); ++x) {
        ElementValue e;
        if (packs_nibbles(o.format)) e = e2m1_element(e2m1_nibble(o.data.data() + r * (o.k / 2), x));
        else if (o.format == BlockFormat::mxfp8_e4m3) e = e4m3_element(o.data[static_cast<size_t>(r * o.k + x)]);
        else e = e5m2_element(o.data[static_cast<size_t>(r * o.k + x)]);
        if (e.nan || e.inf || e.sig == 0) continue;
        top = std::max(top, e.exp + 4 + scale_top);  // sig < 16 for every element format
      }
    }
  }
  return top == INT32_MIN ? 0.0L : std::ldexp(1.0L, top);
}

// |G| and |U| of a dual GEMM kept below 2^120 (SPEC section 3, rule 6: an FP32 epilogue's G and U
// must be finite; E8M0 scales reach 2^127): each bounded by its largest S, alpha and alpha2 moved
// down by powers of two until that bound times them is below 2^120. The largest S takes the
// whole exact reference, so it is computed only where a cheap bound on it (k times the largest
// |element * scale| of A times B's) does not already keep alpha's product below 2^120: alpha
// changes only where the exact S says so, as if S were always computed.
void keep_dual_in_fp32_range(Problem& p) {
  MxProblem g = mx_problem(p);
  const long double a_top = largest_scaled_element(g.a, g.semantics);
  const auto fit = [&g, a_top](float& alpha) {
    const long double bound = static_cast<long double>(g.k) * a_top * largest_scaled_element(g.b, g.semantics);
    if (std::fabs(static_cast<long double>(alpha)) * bound < 0x1p120L) return;  // S <= bound
    const long double top = std::fabs(static_cast<long double>(alpha)) * largest_abs_sum(g);
    if (top >= 0x1p120L) alpha = std::ldexp(alpha, -(std::ilogb(top) - 118));
  };
  fit(p.alpha);
  g.b.data = p.b2;
  g.b.scales = p.sfb2;
  fit(p.alpha2);
}

// A grouped problem: every non-empty group its own draw (own exponent window and permutation,
// own alpha, distinct from the previous group's when not all 1); empty groups draw an alpha
// only. nan_block puts its NaN scale into one group only, so that a kernel reading another
// group's scales, or writing one group's output from another's, shows it in the wrong group.
void draw_grouped_mx(Draws& d, const DataSpec& spec, Problem& p) {
  DataSpec each = spec;
  if (each.scales == ScaleDist::nan_block) each.scales = ScaleDist::narrow;
  std::optional<float> previous_alpha;
  int64_t non_empty = 0;
  for (Group& g : p.groups) {
    if (g.m == 0) {
      g.a.clear(), g.b.clear(), g.sfa.clear(), g.sfb.clear();
      g.alpha = alpha_from_raw(spec.alpha, static_cast<uint32_t>(d.below(uint64_t(1) << 32)));
      continue;
    }
    ++non_empty;
    Problem one;
    one.op = Op::gemm;
    one.m = g.m, one.n = g.n, one.k = g.k, one.l = 1;
    one.out_type = p.out_type;
    one.a_format = p.a_format, one.b_format = p.b_format;
    draw_dense_mx(d, each, one);
    g.a = std::move(one.a), g.b = std::move(one.b), g.sfa = std::move(one.sfa), g.sfb = std::move(one.sfb);
    g.alpha = one.alpha;
    if (spec.alpha != AlphaDist::one && previous_alpha && *previous_alpha == g.alpha) g.alpha = -g.alpha;
    previous_alpha = g.alpha;
  }
  if (spec.scales != ScaleDist::nan_block || non_empty == 0) return;
  int64_t pick = static_cast<int64_t>(d.below(static_cast<uint64_t>(non_empty)));
  for (size_t x = 0; x < p.groups.size(); ++x) {
    if (p.groups[x].m == 0 || pick-- != 0) continue;
    Problem one = group_problem(p, x);
    place_specials(d, spec, one);
    Group& g = p.groups[x];
    g.a = std::move(one.a), g.b = std::move(one.b), g.sfa = std::move(one.sfa), g.sfb = std::move(one.sfb);
    break;
  }
}

}  // namespace

void draw_mx_data(Draws& d, const DataSpec& spec, Problem& p) {
  if (op_is_grouped(p.op)) {
    draw_grouped_mx(d, spec, p);
    return;
  }
  draw_dense_mx(d, spec, p);
  if (op_is_dual(p.op)) keep_dual_in_fp32_range(p);
}

}  // namespace nvfp4
