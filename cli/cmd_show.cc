// `nvfp4check show CASE [--kernel NAME]`: what a case holds, for a person deciding whether it is
// the case they want: shape, layout, semantics, alpha, sizes, histograms of E2M1 codes and scale
// exponents, how many outputs the oracle can demand bit for bit, and the first reference outputs
// (a block-scaled output: the recipe, global scales and the first blocks' scale bytes and codes).
// With --kernel, the case is checked on that kernel and its output described against the
// reference.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/ops/op_module.h"
#include "cli/commands.h"
#include "harness/draw/generators.h"
#include "harness/engine/suite.h"
#include "harness/judge/case_check.h"
#include "harness/judge/checks.h"
#include "harness/ops/block_scaled_output.h"
#include "harness/process/worker.h"
#include "reference/block_scaled_output.h"
#include "reference/case_file.h"
#include "reference/block_scale.h"
#include "reference/exact_gemm.h"
#include "reference/oracle.h"
#include "reference/quantize.h"
#include "reference/scale_layout.h"

namespace nvfp4::cli {
namespace {

struct ShowOptions {
  std::string case_path;
  int64_t outputs = 8;
  std::string kernel;                // --kernel: check the case on it and describe its output
  std::vector<std::string> plugins;  // where --kernel comes from (default: the built-ins)
  double timeout_s = kDefaultCallTimeout;
};

std::array<int64_t, 16> code_histogram(const std::vector<uint8_t>& packed) {
  std::array<int64_t, 16> h{};
  for (const uint8_t byte : packed) {
    ++h[byte & 0xF];
    ++h[byte >> 4];
  }
  return h;
}

struct ScaleStats {
  std::array<int64_t, 16> exponent{};  // by exponent field (bits 6..3), NaN bytes excluded
  int64_t zero = 0, subnormal = 0, nan = 0, sign = 0;
};

ScaleStats scale_stats(const std::vector<uint8_t>& scales) {
  ScaleStats s;
  for (const uint8_t byte : scales) {
    if ((byte & 0x7F) == 0x7F) {
      ++s.nan;
      continue;
    }
    const int e = (byte >> 3) & 0xF;
    ++s.exponent[e];
    if ((byte & 0x7F) == 0) ++s.zero;
    else if (e == 0) ++s.subnormal;
    if (byte & 0x80) ++s.sign;
  }
  return s;
}

double percent(int64_t part, int64_t whole) { return whole ? 100.0 * part / whole : 0.0; }

void add_histogram(std::array<int64_t, 16>& total, const std::vector<uint8_t>& packed) {
  const auto h = code_histogram(packed);
  for (int c = 0; c < 16; ++c) total[c] += h[c];
}

void add_stats(ScaleStats& total, const std::vector<uint8_t>& scales) {
  const ScaleStats s = scale_stats(scales);
  for (int e = 0; e < 16; ++e) total.exponent[e] += s.exponent[e];
  total.zero += s.zero;
  total.subnormal += s.subnormal;
  total.nan += s.nan;
  total.sign += s.sign;
}

// The output element's alpha (its group's for grouped problems).
float element_alpha(const Problem& p, const OutputPosition& pos) {
  return pos.g >= 0 ? p.groups[static_cast<size_t>(pos.g)].alpha : p.alpha;
}

// Whether the oracle demands RN_out bit for bit (rule 2 under fp32); dual GEMM never does, so
// there it says whether G and U are both in the exact regime.
bool element_exact(const Problem& p, const ExactResult& ref, int64_t idx) {
  const OutputPosition pos = output_position(p, idx);
  // MX operands: the rule-9 judge says whether only the bit-exact result passes.
  if (ref.mx) return op_module(p.op).judge_word(p, ref, idx, ref.word(static_cast<size_t>(idx)), Policy{}).exact_regime;
  if (op_is_dual(p.op)) return exact_regime(ref.elems[idx], p.alpha) && exact_regime(ref.elems2[idx], p.alpha2);
  return exact_regime(ref.elems[idx], element_alpha(p, pos));
}

// NVFP4 operands: histograms of E2M1 codes and E4M3 scale exponents.
void show_nvfp4_histograms(const Problem& p) {
  const bool grouped = op_is_grouped(p.op), dual = op_is_dual(p.op);
  std::array<int64_t, 16> ha{}, hb{};
  ScaleStats sa, sb;
  if (grouped) {
    for (const Group& g : p.groups) {
      add_histogram(ha, g.a), add_histogram(hb, g.b);
      add_stats(sa, g.sfa), add_stats(sb, g.sfb);
    }
  } else {
    add_histogram(ha, p.a), add_histogram(hb, p.b), add_histogram(hb, p.b2);
    add_stats(sa, p.sfa), add_stats(sb, p.sfb), add_stats(sb, p.sfb2);
  }
  int64_t na = 0, nb = 0;
  for (int c = 0; c < 16; ++c) na += ha[c], nb += hb[c];
  fmt::print("\nE2M1 codes     value         A      %       B{}      %\n", dual ? ",B2" : "  ");
  for (int c = 0; c < 16; ++c) {
    // Code 8 is -0: print its sign, which the integer value loses.
    const std::string value = fmt::format("{}{}", c == 8 ? "-" : "", e2m1_twice(static_cast<uint8_t>(c)) / 2.0);
    fmt::print("  0x{:x}        {:>5}  {:>8} {:>6.2f}  {:>8} {:>6.2f}\n", c, value, ha[c], percent(ha[c], na), hb[c],
               percent(hb[c], nb));
  }

  fmt::print("\nscale exponent field (bias 7)   SFA      SFB{}\n", dual ? ",SFB2" : "");
  for (int e = 0; e < 16; ++e) {
    if (sa.exponent[e] == 0 && sb.exponent[e] == 0) continue;
    const std::string range = e == 0 ? "zero or subnormal" : fmt::format("[2^{}, 2^{})", e - 7, e - 6);
    fmt::print("  e={:<2} {:<18} {:>8} {:>8}\n", e, range, sa.exponent[e], sb.exponent[e]);
  }
  fmt::print("  zero (0x00, 0x80)         {:>8} {:>8}\n", sa.zero, sb.zero);
  fmt::print("  subnormal                 {:>8} {:>8}\n", sa.subnormal, sb.subnormal);
  fmt::print("  NaN (0x7f, 0xff)          {:>8} {:>8}\n", sa.nan, sb.nan);
  fmt::print("  sign bit set              {:>8} {:>8}  ({})\n", sa.sign, sb.sign,
             p.semantics == ScaleSemantics::e4m3 ? "negates the block under e4m3" : "ignored under ue4m3");
}

// MX operands: each operand's format, and its scales' E8M0 exponents (range, extremes, NaNs, and
// how many exponents differ along a row: 1 means a misplaced scale read could cancel out).
void show_mx_operands(const Problem& p) {
  // Every row of scales of an operand (a grouped problem's groups one after another).
  const auto rows_of = [&p](bool b_side) {
    const BlockFormat f = b_side ? p.b_format : p.a_format;
    std::vector<std::vector<uint8_t>> rows;
    const auto split = [&rows](const std::vector<uint8_t>& sf, int64_t kb) {
      for (size_t at = 0; kb > 0 && at + static_cast<size_t>(kb) <= sf.size(); at += static_cast<size_t>(kb))
        rows.emplace_back(sf.begin() + static_cast<std::ptrdiff_t>(at), sf.begin() + static_cast<std::ptrdiff_t>(at + kb));
    };
    if (!op_is_grouped(p.op)) {
      split(b_side ? p.sfb : p.sfa, operand_kb(f, p.k));
      if (b_side && op_is_dual(p.op)) split(p.sfb2, operand_kb(f, p.k));
    }
    for (const Group& g : p.groups) split(b_side ? g.sfb : g.sfa, g.kb(f));
    return rows;
  };
  const auto operand = [&](const char* name, BlockFormat f, bool b_side) {
    int64_t kb = 0;
    if (!op_is_grouped(p.op)) kb = operand_kb(f, p.k);
    for (const Group& g : p.groups) kb = std::max(kb, g.kb(f));
    fmt::print("{}          {} ({} blocks of {} per row{})\n", name, to_string(f), kb, block_size(f),
               op_is_grouped(p.op) ? ", at most" : "");
    if (f == BlockFormat::nvfp4) return;
    int lo = 255, hi = -1;
    int64_t low = 0, high = 0, nan = 0, rows_distinct = 0;
    std::vector<std::vector<uint8_t>> rows = rows_of(b_side);
    for (std::vector<uint8_t>& row : rows) {
      for (const uint8_t e : row) {
        if (e == 0xFF) { ++nan; continue; }
        lo = std::min<int>(lo, e), hi = std::max<int>(hi, e);
        low += e == 0x00, high += e == 0xFE;
      }
      std::sort(row.begin(), row.end());
      rows_distinct += std::unique(row.begin(), row.end()) == row.end();
    }
    fmt::print("  E8M0     2^{} .. 2^{}  0x00 {}  0xfe {}  NaN (0xff) {}  rows with pairwise-distinct exponents {} of {}\n",
               lo - 127, hi - 127, low, high, nan, rows_distinct, rows.size());
  };
  operand("\nA", p.a_format, false);
  operand("B", p.b_format, true);
}

// A scale byte in words: E4M3 (NVFP4) or E8M0 (the MX formats).
std::string scale_words(BlockFormat f, uint8_t byte) {
  const double v = block_scale_value(f, byte, ScaleSemantics::e4m3);
  if (std::isnan(v)) return fmt::format("0x{:02x} (NaN)", byte);
  if (f != BlockFormat::nvfp4) return fmt::format("0x{:02x} (2^{})", byte, std::ilogb(v));
  return fmt::format("0x{:02x} ({})", byte, v);
}

// A quantize case: its declaration, the global scales handed over, the first blocks' maxima,
// scale bytes, encode factors and codes, and the expect lines against the reference.
int show_quantize(const ShowOptions& opts, const Problem& p, bool generated) {
  const QuantResult ref = quantize_reference(p);
  fmt::print("case       {}\n", opts.case_path);
  if (!p.note.empty()) fmt::print("note       {}\n", p.note);
  fmt::print("op         quantize  m={} k={} l={}  ({} scale blocks of {} per row)\n", p.m, p.k, p.l, p.qkb(),
             block_size(p.q_format));
  fmt::print("recipe     {} -> {} by {}{}{}{}\n", to_string(p.in_type), to_string(p.q_format), to_string(p.recipe),
             p.quant_2d ? ", 16 x 16 tiles" : "", p.row_global_scale ? ", one global scale per row" : "",
             p.stochastic_seed ? fmt::format(", stochastic (seed {})", *p.stochastic_seed) : "");
  fmt::print("sf_layout  {} (the layout SFQ is written in; the file and `reference` use linear order)\n",
             to_string(p.sf_layout));
  if (p.seed)
    fmt::print("seed       {}  generator {}{}\n", *p.seed, p.generator, generated ? "  (X drawn from it)" : "  (explicit X wins)");
  fmt::print("bytes      x {}  q {}  sfq {} (permuted {})\n", p.x_bytes(), p.q_bytes(), p.sfq_bytes(),
             sf_permuted_bytes(p.m, p.qkb(), p.l));
  if (ref.global_scale.empty()) fmt::print("global     none (the MX recipes have no global scale)\n");
  else
    fmt::print("global     {} value(s), the first {} ({:a})\n", ref.global_scale.size(), ref.global_scale.front(),
               ref.global_scale.front());
  const int64_t bs = block_size(p.q_format), shown = std::min<int64_t>(8, p.l * p.m * p.qkb());
  for (int64_t b = 0; b < shown; ++b) {
    const int64_t row = b / p.qkb(), s = b % p.qkb();
    std::string codes;
    for (int64_t x = s * bs; x < std::min(p.k, (s + 1) * bs); ++x) {
      const int64_t e = row * p.k + x;
      const uint8_t code = packs_nibbles(p.q_format) ? ((ref.q[e / 2] >> (4 * (e % 2))) & 0xF) : ref.q[e];
      codes += fmt::format(packs_nibbles(p.q_format) ? "{:x}" : "{:02x} ", code);
    }
    fmt::print("block      row {} block {}: scale {}, os {:a}, codes {}\n", row, s, scale_words(p.q_format, ref.sfq[b]),
               ref.os[b], codes);
  }
  const ExactResult result = op_reference(p);
  const ExpectComparison cmp = compare_expect(p, result, 1);
  if (!cmp.any_expect) fmt::print("expect     none recorded\n");
  else if (cmp.differing == 0) fmt::print("expect     all {} bytes match the reference\n", cmp.compared);
  else
    fmt::print("expect     {} of {} bytes differ from the reference; the first: {}\n", cmp.differing, cmp.compared,
               expect_mismatch(p, result));
  return cmp.differing == 0 ? 0 : 1;
}

// A block-scaled output case (out_type nvfp4): its recipe and global scales, how many blocks the
// oracle judges bit for bit, the first blocks of the reference (scale byte and codes, hex and
// value) and, where the expect lines differ from it, the first differing block in words.
int show_block_scaled(const ShowOptions& opts, const Problem& p, const ExactResult& ref) {
  const std::vector<OutUnit> units = out_units(p);
  fmt::print("\nrecipe     {} (the output quantized along n in blocks of 16)\n", to_string(p.out_recipe));
  if (op_is_grouped(p.op) && p.out_global_scale.size() > 1) {
    fmt::print("global     one per group:");
    for (size_t g = 0; g < units.size(); ++g) fmt::print(" g{} {} ({:a})", g, units[g].global_scale, units[g].global_scale);
    fmt::print("\n");
  } else {
    fmt::print("global     {} ({:a}){}\n", units.front().global_scale, units.front().global_scale,
               op_is_grouped(p.op) ? ", every group" : "");
  }
  fmt::print("bytes      q {}  sfq {} (linear order here and in `reference`; {} in the kernel's buffers)\n",
             out_q_bytes(p), out_sfq_bytes(p), to_string(p.sf_layout));
  int64_t blocks = 0, exact_blocks = 0;
  for (const OutUnit& u : units) {
    for (int64_t at = 0; at < u.l * u.m * u.nb(); ++at) {
      const int64_t row = at / u.nb(), s = at % u.nb();
      bool exact = true;
      for (int64_t j = 16 * s; j < std::min(u.n, 16 * s + 16) && exact; ++j)
        exact = element_exact(p, ref, u.first + row * u.n + j);
      ++blocks;
      exact_blocks += exact;
    }
  }
  fmt::print("blocks     {}  exact regime {} ({:.1f}%: scale byte and codes must match bit for bit, rule 8)\n", blocks,
             exact_blocks, percent(exact_blocks, blocks));
  const std::vector<uint8_t> expected = block_scaled_expect_bytes(p, ref);
  const std::vector<OutBlock> first = first_out_blocks(p, opts.outputs);
  if (!first.empty()) fmt::print("\nfirst reference blocks\n");
  for (const OutBlock& blk : first) fmt::print("  {}: {}\n", out_block_place(p, blk), out_block_words(p, expected, blk));
  const ExpectComparison cmp = compare_expect(p, ref, 1);
  if (!cmp.any_expect) return 0;
  if (cmp.differing == 0) {
    fmt::print("\nexpect     all {} bytes of expect_q and expect_sfq match the reference\n", cmp.compared);
    return 0;
  }
  // The expect lines as a whole output (a missing one taken from the reference).
  std::vector<uint8_t> recorded = expected;
  const size_t q = static_cast<size_t>(out_q_bytes(p));
  if (p.expect_q) std::copy(p.expect_q->begin(), p.expect_q->end(), recorded.begin());
  if (p.expect_sfq) std::copy(p.expect_sfq->begin(), p.expect_sfq->end(), recorded.begin() + static_cast<std::ptrdiff_t>(q));
  const OutBlockDiff d = compare_out_blocks(p, expected, recorded);
  fmt::print("\nexpect     {} of {} bytes DIFFER from the reference ({} of {} blocks); first at {}\n", cmp.differing,
             cmp.compared, d.differing, d.blocks, out_block_place(p, *d.first));
  fmt::print("  reference  {}\n  expect     {}\n", out_block_words(p, expected, *d.first), out_block_words(p, recorded, *d.first));
  return 1;
}

// --kernel: the case checked on the kernel (every check of `replay`), its verdict, and for a
// block-scaled output the first block where its output differs from the reference, in words.
int show_kernel_output(const ShowOptions& opts, const Problem& case_problem) {
  Problem p = case_problem;
  clear_expect(p);  // an expect line was judged above; the kernel is judged against the reference
  std::vector<SuiteKernel> kernels = find_kernels(opts.plugins, {opts.kernel}, opts.timeout_s);
  const SuiteKernel& k = kernels.front();
  fmt::print("\nkernel     {}", k.desc.name);
  if (!k.desc.runnable) {
    fmt::print(": cannot run here: {}\n", k.desc.why_not);
    return 2;
  }
  WorkerExecutor executor(k.command, opts.timeout_s);
  CaseOptions o;
  const CaseOutcome r = check_case(executor, p, o);
  fmt::print(": {}", verdict_name(r.verdict));
  if (r.finding) fmt::print(" ({}, {}): {}", check_name(r.finding->check), to_string(r.call), r.finding->message);
  else if (!r.message.empty()) fmt::print(": {}", r.message);
  fmt::print("\n");
  if (r.problem.out_type == OutType::nvfp4 && !r.c.empty() && r.reference.out_type == OutType::nvfp4) {
    const std::vector<uint8_t> expected = block_scaled_expect_bytes(r.problem, r.reference);
    std::vector<uint8_t> actual;
    try {
      actual = block_scaled_out::reference_order_bytes(r.problem, r.c.words());
    } catch (const std::invalid_argument& e) {
      fmt::print("output     not described: {}\n", e.what());
    }
    if (!actual.empty()) {
      const OutBlockDiff d = compare_out_blocks(r.problem, expected, actual);
      const std::string which = r.call == CaseCall::stale ? " (the stale-state call's new data)" : "";
      if (d.differing == 0) {
        fmt::print("output     every block{} is the reference's, byte for byte\n", which);
      } else {
        fmt::print("output     {} of {} blocks{} differ from the reference (outside the exact regime rule 8 allows some); "
                   "first at {}\n", d.differing, d.blocks, which, out_block_place(r.problem, *d.first));
        fmt::print("  reference  {}\n  kernel     {}\n", out_block_words(r.problem, expected, *d.first),
                   out_block_words(r.problem, actual, *d.first));
      }
    }
  }
  return r.verdict == CaseOutcome::Verdict::fail ? 1 : 0;
}

// The case's shape, layout, types and byte counts (every op but quantize).
void show_header(const ShowOptions& opts, const Problem& p, bool generated) {
  const bool grouped = op_is_grouped(p.op), dual = op_is_dual(p.op);
  const OutType type = p.out_type;

  fmt::print("case       {}\n", opts.case_path);
  if (!p.note.empty()) fmt::print("note       {}\n", p.note);
  if (grouped) {
    int64_t empty = 0;
    for (const Group& g : p.groups) empty += g.m == 0;
    fmt::print("op         grouped_gemm  {} groups ({} empty), {} arrangement\n", p.groups.size(), empty,
               p.packed ? "packed" : "separate");
    for (size_t g = 0; g < p.groups.size(); ++g) {
      const Group& q = p.groups[g];
      fmt::print("  group {:<4} m={} n={} k={} ({} scale blocks per row)  alpha {} ({:a})\n", g, q.m, q.n, q.k, q.kb(p.a_format),
                 q.alpha, q.alpha);
    }
  } else {
    fmt::print("op         {}  m={} n={} k={} l={}  ({} scale blocks per row)\n", to_string(p.op), p.m, p.n, p.k, p.l,
               p.kb());
  }
  fmt::print("sf_layout  {} (handed to kernels; the file holds scales in linear order)\n",
             to_string(p.sf_layout));
  fmt::print("semantics  {}\n", to_string(p.semantics));
  if (type == OutType::nvfp4) fmt::print("out_type   nvfp4 (block-scaled output: codes Q and scales SFQ, no C)\n");
  else fmt::print("out_type   {} ({} bytes per output)\n", to_string(type), out_word_bytes(type));
  if (!grouped) fmt::print("alpha      {} ({:a})\n", p.alpha, p.alpha);
  if (dual) fmt::print("alpha2     {} ({:a})  (U's global scale; C = silu(G) * U)\n", p.alpha2, p.alpha2);
  if (p.seed) {
    fmt::print("seed       {}  generator {}{}\n", *p.seed, p.generator.empty() ? "(default)" : p.generator,
               generated ? "  (data drawn from it: the case gives none)" : "  (explicit data wins)");
  }
  // A block-scaled output has no C: its Q and SFQ are described below.
  const std::string c_words = type == OutType::nvfp4 ? "" : fmt::format("  c {}", p.c_bytes());
  if (grouped) {
    const PackedLayout L = p.packed ? packed_layout(p) : PackedLayout{};
    int64_t a = 0, b = 0, sfa = 0, sfb = 0;
    for (const Group& g : p.groups)
      a += g.a_bytes(p.a_format), b += g.b_bytes(p.b_format), sfa += g.sfa_bytes(p.a_format), sfb += g.sfb_bytes(p.b_format);
    fmt::print("bytes      a {}  b {}  sfa {}  sfb {}{}\n", a, b, sfa, sfb, c_words);
    if (p.packed)
      fmt::print("packed     a {}  b {}  sfa {} (permuted {}, {} tiles)  sfb {} (permuted {})  c {} rows\n", L.a_bytes(),
                 L.b_bytes(), L.sfa_linear_bytes(), L.sfa_permuted_bytes(), L.tile_offset.back(), L.sfb_linear_bytes(),
                 L.sfb_permuted_bytes(), L.total_m());
  } else {
    fmt::print("bytes      a {}  b {}  sfa {}  sfb {}  (permuted: sfa {}  sfb {}){}\n", p.a_bytes(), p.b_bytes(),
               p.sfa_bytes(), p.sfb_bytes(), sf_permuted_bytes(p.m, p.kb(), p.l), sf_permuted_bytes(p.n, p.kb_b(), p.l),
               c_words);
    if (dual) fmt::print("           b2 {}  sfb2 {}\n", p.b2_bytes(), p.sfb2_bytes());
  }

}

// A words output's reference (FP16/BF16/FP32): its exact regime, special values, first outputs
// and the case's expect lines against it. 1 when an expect line differs.
int show_word_outputs(const ShowOptions& opts, const Problem& p, const ExactResult& ref) {
  const bool grouped = op_is_grouped(p.op), dual = op_is_dual(p.op);
  const OutType type = p.out_type;
  int64_t exact = 0, nan = 0, inf = 0, zero = 0;
  const int64_t total = static_cast<int64_t>(ref.size());
  for (int64_t idx = 0; idx < total; ++idx) {
    if (element_exact(p, ref, idx)) ++exact;
    const uint32_t w = ref.word(static_cast<size_t>(idx));
    if (is_nan_out(type, w)) ++nan;
    else if (is_inf_out(type, w)) ++inf;
    else if (is_zero_out(type, w)) ++zero;
  }
  if (dual) {
    fmt::print("\noutputs    {}  G and U both exact {} ({:.1f}%; dual GEMM has no exact regime: rule 6 bounds every output)\n",
               total, exact, percent(exact, total));
  } else {
    fmt::print("\noutputs    {}  exact regime {} ({:.1f}%: must match RN_{} bit for bit under fp32)\n", total, exact,
               percent(exact, total), to_string(type));
  }
  fmt::print("           NaN {}  Inf {}  zero {}\n", nan, inf, zero);

  const int64_t shown = std::min<int64_t>(opts.outputs, total);
  if (shown > 0) fmt::print("\nfirst reference outputs\n  {:>4} {:>6} {:>6}  value\n", grouped ? "g" : "b", "i", "j");
  for (int64_t idx = 0; idx < shown; ++idx) {
    const OutputPosition pos = output_position(p, idx);
    fmt::print("  {:>4} {:>6} {:>6}  {}{}\n", grouped ? pos.g : pos.b, pos.i, pos.j,
               word_text(type, ref.word(static_cast<size_t>(idx))),
               dual || element_exact(p, ref, idx) ? "" : "  (rounding regime)");
  }

  const ExpectComparison cmp = compare_expect(p, ref, 1);
  int code = 0;
  if (cmp.any_expect && cmp.differing == 0) fmt::print("\nexpect     all {} outputs match the reference\n", cmp.compared);
  if (cmp.differing > 0) {
    const int64_t first = cmp.first.front();
    fmt::print("\nexpect     {} of {} outputs DIFFER from the reference; first at index {}: expect {}, reference {}\n",
               cmp.differing, cmp.compared, first, word_text(type, expect_word(p, first)),
               word_text(type, ref.word(static_cast<size_t>(first))));
    code = 1;
  }
  return code;
}

int run_show(const ShowOptions& opts) {
  Problem p;
  bool generated = false;
  try {
    p = read_case_file(opts.case_path);
    if (!p.has_data()) {
      expand_seeded_case(p);
      generated = true;
    }
  } catch (const CaseError& e) {
    fmt::print(stderr, "nvfp4check show: {}\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "nvfp4check show: {}: {}\n", opts.case_path, e.what());
    return 2;
  }
  if (op_quantizes(p.op)) {
    const int code = show_quantize(opts, p, generated);
    return std::max(code, opts.kernel.empty() ? 0 : show_kernel_output(opts, p));
  }
  show_header(opts, p, generated);
  if (p.mx_operands()) show_mx_operands(p);
  else show_nvfp4_histograms(p);

  const ExactResult ref = op_reference(p);
  if (p.out_type == OutType::nvfp4) {
    const int code = show_block_scaled(opts, p, ref);
    const int kernel_code = opts.kernel.empty() ? 0 : show_kernel_output(opts, p);
    return std::max(code, kernel_code);
  }

  int code = show_word_outputs(opts, p, ref);
  if (!opts.kernel.empty()) code = std::max(code, show_kernel_output(opts, p));
  return code;
}

}  // namespace

void add_show_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ShowOptions>();
  CLI::App* cmd = app.add_subcommand(
      "show",
      "Describe a case: shape, layout, histograms of codes and scales, the exact-regime share and the first "
      "reference outputs (block-scaled output: recipe, global scales, the first blocks' scale bytes and codes). "
      "With --kernel, check the case on that kernel and describe its output. Exits 1 when the case's expect line "
      "disagrees with the reference or the kernel fails the case.");
  cmd->add_option("CASE", opts->case_path, "case file (SPEC.md section 4)")->required();
  cmd->add_option("--outputs", opts->outputs, "how many reference outputs (block-scaled output: blocks) to list")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--kernel", opts->kernel,
                  "Check the case on this kernel (every check of `replay`) and describe its output against the reference");
  cmd->add_option("--plugin", opts->plugins, "Shared library exporting the nvfp4 kernel ABI, where --kernel is (repeatable)");
  cmd->add_option("--timeout", opts->timeout_s, "Watchdog: seconds one kernel call may take (default 30)")
      ->check(CLI::Range(0.001, 86400.0));
  cmd->callback([opts, &exit_code] {
    try {
      exit_code = run_show(*opts);
    } catch (const std::exception& e) {
      // An unknown kernel, a plugin that cannot be loaded.
      fmt::print(stderr, "nvfp4check show: {}\n", e.what());
      exit_code = 2;
    }
  });
}

}  // namespace nvfp4::cli
