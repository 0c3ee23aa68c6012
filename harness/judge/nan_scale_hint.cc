// The NaN scale behind a number where NaN was due (see nan_scale_hint.h).
#include "harness/judge/nan_scale_hint.h"

#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "reference/formats.h"
#include "reference/out_type.h"

namespace nvfp4 {
namespace {

// One output element's operands: the rows of A and B (and of U's B for a dual GEMM) it reads.
struct Operands {
  int64_t k = 0, kb = 0;
  const uint8_t *a = nullptr, *b = nullptr, *sfa = nullptr, *sfb = nullptr, *sfb2 = nullptr;
  double alpha = 1;
  std::string where;  // "b=0" or "g=2"
};

std::optional<Operands> operands(const Problem& p, const OracleSummary& s) {
  Operands o;
  const int64_t i = s.first_i, j = s.first_j;
  if (p.op == Op::grouped_gemm) {
    if (s.first_g < 0 || s.first_g >= static_cast<int64_t>(p.groups.size())) return std::nullopt;
    const Group& g = p.groups[static_cast<size_t>(s.first_g)];
    if (g.a.empty() || g.sfa.empty()) return std::nullopt;
    o.k = g.k, o.kb = g.kb(p.a_format), o.alpha = g.alpha, o.where = fmt::format("g={}", s.first_g);
    o.a = g.a.data() + i * g.k / 2, o.b = g.b.data() + j * g.k / 2;
    o.sfa = g.sfa.data() + i * o.kb, o.sfb = g.sfb.data() + j * o.kb;
    return o;
  }
  if (p.a.empty() || p.sfa.empty()) return std::nullopt;
  const int64_t row_a = s.first_b * p.m + i, row_b = s.first_b * p.n + j;
  o.k = p.k, o.kb = p.kb(), o.alpha = p.alpha, o.where = fmt::format("b={}", s.first_b);
  o.a = p.a.data() + row_a * p.k / 2, o.b = p.b.data() + row_b * p.k / 2;
  o.sfa = p.sfa.data() + row_a * o.kb, o.sfb = p.sfb.data() + row_b * o.kb;
  if (p.op == Op::dual_gemm && !p.sfb2.empty()) o.sfb2 = p.sfb2.data() + row_b * o.kb;
  return o;
}

double scale_value(uint8_t byte, ScaleSemantics semantics) {
  const ScaleValue v = e4m3_decode(byte, semantics);
  return v.sign * std::ldexp(static_cast<double>(v.sig), v.exp);
}

// The dot product of block s of the two rows, exactly (in quarters it is an integer).
double block_dot(const Operands& o, int64_t s) {
  double sum = 0;
  for (int64_t x = s * 16; x < std::min(o.k, (s + 1) * 16); ++x)
    sum += e2m1_twice(e2m1_nibble(o.a, x)) * e2m1_twice(e2m1_nibble(o.b, x)) / 4.0;
  return sum;
}

// What the kernel apparently used for the NaN scale of block s (nan_in_a: A's scale was NaN), from
// the output it gave; "" where the block's products are zero or other scales are NaN too.
std::string used_value_text(const Problem& p, const Operands& o, int64_t s, bool nan_in_a, double actual) {
  double rest = 0;
  for (int64_t t = 0; t < o.kb; ++t) {
    if (t == s) continue;
    if (e4m3_decode(o.sfa[t], p.semantics).nan || e4m3_decode(o.sfb[t], p.semantics).nan) return "";
    rest += scale_value(o.sfa[t], p.semantics) * scale_value(o.sfb[t], p.semantics) * block_dot(o, t);
  }
  const double other = scale_value(nan_in_a ? o.sfb[s] : o.sfa[s], p.semantics);
  const double weight = o.alpha * other * block_dot(o, s);
  if (weight == 0) return "; its block's products are all zero, so the output shows no value for it (the kernel "
                          "skipped the block, or took 0 times the scale as 0)";
  const uint8_t byte = nan_in_a ? o.sfa[s] : o.sfb[s];
  const double sign = e4m3_decode(byte, p.semantics).sign;
  const double tolerance = 2 * ulp_out(p.out_type, std::fabs(actual)) + 1e-300;
  // The usual misdecodings of E4M3's NaN; each checked by the output it would give.
  const struct { double value; const char* how; } guesses[] = {
      {480, "the byte read as a normal E4M3 number: exponent field 15, mantissa 7"},
      {448, "the largest finite E4M3, as a saturating decode gives"},
      {1, "1, as if the scale were missing"},
      {0, "0, as a flushing decode gives"},
  };
  for (const auto& g : guesses)
    if (std::fabs(o.alpha * rest + weight * sign * g.value - actual) <= tolerance)
      return fmt::format("; the kernel apparently used {} for it ({})", sign * g.value, g.how);
  return fmt::format("; the kernel apparently used about {:.6g} for it (no usual misdecoding of 0x{:02X} gives that)",
                     (actual - o.alpha * rest) / weight, byte);
}

}  // namespace

std::string nan_scale_hint(const Problem& p, const OracleSummary& s) {
  if (!s.any_failure() || !is_nan_out(p.out_type, s.first.expected_bits)) return "";
  if (p.mx_operands()) return "";  // the hint reads NVFP4's E4M3 scales in blocks of 16
  const double actual = decode_out(p.out_type, s.first_actual);
  if (!std::isfinite(actual)) return "";
  const std::optional<Operands> o = operands(p, s);
  if (!o) return "";
  const struct { const char* name; const uint8_t* row; int64_t index; } tensors[] = {
      {"sfa", o->sfa, s.first_i}, {"sfb", o->sfb, s.first_j}, {"sfb2", o->sfb2, s.first_j}};
  for (const auto& t : tensors) {
    if (t.row == nullptr) continue;
    for (int64_t blk = 0; blk < o->kb; ++blk) {
      if (!e4m3_decode(t.row[blk], p.semantics).nan) continue;
      std::string text = fmt::format("NaN is due because scale byte {}[{}, row {}, block {}] is 0x{:02X}, E4M3's NaN",
                                     t.name, o->where, t.index, blk, t.row[blk]);
      // The value used shows in the output only where G and U are not mixed through SiLU.
      if (p.op != Op::dual_gemm) text += used_value_text(p, *o, blk, t.row == o->sfa, actual);
      return text;
    }
  }
  return "";
}

}  // namespace nvfp4
