// The NaN scale behind a number where NaN was due (see nan_scale_hint.h); for MX operands also
// E8M0's NaN scale, NaN elements and Inf elements whose products make NaN.
#include "harness/judge/nan_scale_hint.h"

#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "reference/formats.h"
#include "reference/mx_formats.h"
#include "reference/out_type.h"

namespace nvfp4 {
namespace {

// One output element's operands: the rows of A and B (and of U's B for a dual GEMM) it reads.
// kb is A's scale blocks per row, kb_b B's (they differ when one operand is NVFP4, the other MX).
struct Operands {
  int64_t k = 0, kb = 0, kb_b = 0;
  const uint8_t *a = nullptr, *b = nullptr, *b2 = nullptr, *sfa = nullptr, *sfb = nullptr, *sfb2 = nullptr;
  double alpha = 1;
  std::string where;  // "b=0" or "g=2"
};

std::optional<Operands> operands(const Problem& p, const OracleSummary& s) {
  Operands o;
  const int64_t i = s.first_i, j = s.first_j;
  if (op_is_grouped(p.op)) {
    if (s.first_g < 0 || s.first_g >= static_cast<int64_t>(p.groups.size())) return std::nullopt;
    const Group& g = p.groups[static_cast<size_t>(s.first_g)];
    if (g.a.empty() || g.sfa.empty()) return std::nullopt;
    o.k = g.k, o.kb = g.kb(p.a_format), o.kb_b = g.kb(p.b_format), o.alpha = g.alpha;
    o.where = fmt::format("g={}", s.first_g);
    o.a = g.a.data() + i * operand_row_bytes(p.a_format, g.k);
    o.b = g.b.data() + j * operand_row_bytes(p.b_format, g.k);
    o.sfa = g.sfa.data() + i * o.kb, o.sfb = g.sfb.data() + j * o.kb_b;
    return o;
  }
  if (p.a.empty() || p.sfa.empty()) return std::nullopt;
  const int64_t row_a = s.first_b * p.m + i, row_b = s.first_b * p.n + j;
  const int64_t bytes_a = operand_row_bytes(p.a_format, p.k), bytes_b = operand_row_bytes(p.b_format, p.k);
  o.k = p.k, o.kb = p.kb(), o.kb_b = p.kb_b(), o.alpha = p.alpha, o.where = fmt::format("b={}", s.first_b);
  o.a = p.a.data() + row_a * bytes_a, o.b = p.b.data() + row_b * bytes_b;
  o.sfa = p.sfa.data() + row_a * o.kb, o.sfb = p.sfb.data() + row_b * o.kb_b;
  if (op_is_dual(p.op) && !p.sfb2.empty()) o.sfb2 = p.sfb2.data() + row_b * o.kb_b;
  if (op_is_dual(p.op) && !p.b2.empty()) o.b2 = p.b2.data() + row_b * bytes_b;
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

// ---- MX operands: E8M0 NaN scales, NaN elements, and Inf elements whose products are NaN ----

// What the kernel's one unknown value stands for: a scale byte (block `index` of SFA or SFB), an
// element (k index `index` of A or B), or every Inf element of the two rows (its magnitude).
struct Unknown {
  enum Kind { scale_a, scale_b, element_a, element_b, inf } kind;
  int64_t index = 0;
};

ElementValue element_of(BlockFormat f, const uint8_t* row, int64_t x) {
  if (packs_nibbles(f)) return e2m1_element(e2m1_nibble(row, x));
  return f == BlockFormat::mxfp8_e4m3 ? e4m3_element(row[x]) : e5m2_element(row[x]);
}

// The code of element x as its tensor holds it: an E2M1 nibble or an E4M3/E5M2 byte.
uint8_t element_code(BlockFormat f, const uint8_t* row, int64_t x) {
  return packs_nibbles(f) ? e2m1_nibble(row, x) : row[x];
}

bool nan_scale(BlockFormat f, ScaleSemantics semantics, uint8_t byte) {
  return f == BlockFormat::nvfp4 ? e4m3_decode(byte, semantics).nan : e8m0_decode(byte).nan;
}

// A finite scale's value (E8M0, or an NVFP4 operand's E4M3).
long double mx_scale_value(BlockFormat f, ScaleSemantics semantics, uint8_t byte) {
  if (f != BlockFormat::nvfp4) return std::ldexp(1.0L, e8m0_decode(byte).exp);
  const ScaleValue v = e4m3_decode(byte, semantics);
  return v.sign * std::ldexp(static_cast<long double>(v.sig), v.exp);
}
// The sign a NaN scale byte carries into the value read for it (E4M3 semantics e4m3: its sign bit).
int nan_sign(BlockFormat f, ScaleSemantics semantics, uint8_t byte) {
  return f == BlockFormat::nvfp4 ? e4m3_decode(byte, semantics).sign : 1;
}

// alpha * sum over k of a_x * b_x * sa(x) * sb(x) with the unknown taken as v (an element or an
// Inf as its sign times v, a scale as its sign times v); nullopt where another factor is NaN or
// Inf, or v would enter squared (an Inf times an Inf).
std::optional<long double> output_with(const Problem& p, const Operands& o, const Unknown& u, long double v) {
  const int64_t bs_a = block_size(p.a_format), bs_b = block_size(p.b_format);
  long double sum = 0;
  for (int64_t x = 0; x < o.k; ++x) {
    const ElementValue ea = element_of(p.a_format, o.a, x), eb = element_of(p.b_format, o.b, x);
    const uint8_t ba = o.sfa[x / bs_a], bb = o.sfb[x / bs_b];
    int unknowns = 0;
    const auto element = [&](const ElementValue& e, bool is_unknown) -> std::optional<long double> {
      const long double sign = e.negative ? -1 : 1;
      if (is_unknown || (u.kind == Unknown::inf && e.inf)) {
        ++unknowns;
        return sign * v;
      }
      if (e.nan || e.inf) return std::nullopt;
      return sign * std::ldexp(static_cast<long double>(e.sig), e.exp);
    };
    const auto scale = [&](BlockFormat f, uint8_t byte, bool is_unknown) -> std::optional<long double> {
      if (is_unknown) {
        ++unknowns;
        return nan_sign(f, p.semantics, byte) * v;
      }
      if (nan_scale(f, p.semantics, byte)) return std::nullopt;
      return mx_scale_value(f, p.semantics, byte);
    };
    const auto fa = element(ea, u.kind == Unknown::element_a && u.index == x);
    const auto fb = element(eb, u.kind == Unknown::element_b && u.index == x);
    const auto sa = scale(p.a_format, ba, u.kind == Unknown::scale_a && u.index == x / bs_a);
    const auto sb = scale(p.b_format, bb, u.kind == Unknown::scale_b && u.index == x / bs_b);
    if (!fa || !fb || !sa || !sb || unknowns > 1) return std::nullopt;
    sum += *fa * *fb * *sa * *sb;
  }
  return o.alpha * sum;
}

struct Guess {
  long double value;
  std::string how;
};

// 2^e for large powers of two, else the shortest decimal.
std::string value_text(long double v) {
  if (v == 0) return "0";
  int e = 0;
  const long double frac = std::frexp(std::fabs(v), &e);
  if (v != 0 && frac == 0.5L && std::abs(e - 1) > 16) return fmt::format("{}2^{}", v < 0 ? "-" : "", e - 1);
  return fmt::format("{}", static_cast<double>(v));
}

// "; the kernel apparently used V for it (HOW)" for the first guess that gives the output, each
// checked by the output it would give (an Inf output by overflow); else the value solved from the
// output, or why the output shows none. Guesses are magnitudes: output_with applies the NaN
// byte's sign, and `sign` shows it in the text.
std::string mx_used_value_text(const Problem& p, const Operands& o, const Unknown& u, const std::vector<Guess>& guesses,
                               int sign, const std::string& code_text, double actual) {
  const std::optional<long double> at0 = output_with(p, o, u, 0), at1 = output_with(p, o, u, 1);
  if (!at0 || !at1) return "";
  const long double weight = *at1 - *at0;
  if (weight == 0)
    return "; the products it enters sum to zero, so the output shows no value for it (the kernel skipped "
           "them, or took 0 times it as 0)";
  const long double tolerance = 2 * ulp_out(p.out_type, std::fabs(actual)) + 1e-300;
  for (const Guess& g : guesses) {
    const std::optional<long double> out = output_with(p, o, u, g.value);
    if (!out) continue;
    const bool match = std::isinf(actual)
                           ? std::fabs(*out) >= overflow_threshold(p.out_type) &&
                                 std::signbit(*out) == std::signbit(actual)
                           : std::fabs(*out - actual) <= tolerance;
    if (match)
      return fmt::format("; the kernel apparently used {} for it ({}){}", value_text(sign * g.value), g.how,
                         std::isinf(actual) ? ", which takes the output to Inf" : "");
  }
  if (std::isinf(actual)) return "";
  return fmt::format("; the kernel apparently used about {:.6g} for it (no usual misdecoding of {} gives that)",
                     static_cast<double>(sign * (actual - *at0) / weight), code_text);
}

// The usual misdecodings of E5M2's Inf (exponent field 31, mantissa 0), magnitudes.
std::vector<Guess> inf_guesses() {
  return {{65536, "the byte read as a normal E5M2 number: exponent field 31, mantissa 0"},
          {57344, "the largest finite E5M2, as a saturating decode gives"},
          {0, "0, as a flushing decode gives"}};
}

// The usual misdecodings of a NaN element of format f (E4M3 0x7F/0xFF, E5M2 exponent field 31
// with a mantissa), magnitudes: the element's sign applies.
std::vector<Guess> nan_element_guesses(BlockFormat f, uint8_t code) {
  if (f == BlockFormat::mxfp8_e4m3)
    return {{480, "the byte read as a normal E4M3 number: exponent field 15, mantissa 7"},
            {448, "the largest finite E4M3, as a saturating decode gives"},
            {0, "0, as a flushing decode gives"}};
  const int m = code & 3;
  return {{std::ldexp(4.0L + m, 14),
           fmt::format("the byte read as a normal E5M2 number: exponent field 31, mantissa {}", m)},
          {HUGE_VALL, "Inf: the mantissa not looked at, as if it were E5M2's Inf"},
          {57344, "the largest finite E5M2, as a saturating decode gives"},
          {0, "0, as a flushing decode gives"}};
}

std::string code_hex(uint8_t code) { return fmt::format("0x{:02X}", code); }

// The phases of mx_hint, in the order it tries them; each says why NaN is due, or nothing. A NaN
// scale byte (E8M0's 0xFF, or an NVFP4 operand's E4M3 NaN): every block of a row is used.
// `solvable`: the value used shows in the output (not where G and U are mixed through SiLU).
std::optional<std::string> nan_scale_text(const Problem& p, const OracleSummary& s, const Operands& o, bool solvable,
                                          double actual) {
  const struct {
    const char* name;
    const uint8_t* row;
    int64_t index, kb;
    BlockFormat format;
    Unknown::Kind kind;
  } scales[] = {
      {"sfa", o.sfa, s.first_i, o.kb, p.a_format, Unknown::scale_a},
      {"sfb", o.sfb, s.first_j, o.kb_b, p.b_format, Unknown::scale_b},
      {"sfb2", o.sfb2, s.first_j, o.kb_b, p.b_format, Unknown::scale_b}};
  for (const auto& t : scales) {
    if (t.row == nullptr) continue;
    for (int64_t blk = 0; blk < t.kb; ++blk) {
      const uint8_t byte = t.row[blk];
      if (!nan_scale(t.format, p.semantics, byte)) continue;
      const bool e8m0 = t.format != BlockFormat::nvfp4;
      std::string text = fmt::format("NaN is due because scale byte {}[{}, row {}, block {}] is 0x{:02X}, {}'s NaN",
                                     t.name, o.where, t.index, blk, byte, e8m0 ? "E8M0" : "E4M3");
      if (!solvable || t.row == o.sfb2) return text;
      const int sign = nan_sign(t.format, p.semantics, byte);
      std::vector<Guess> guesses;
      if (e8m0)
        guesses = {{std::ldexp(1.0L, 128), "the byte read as a plain exponent, 2^(255 - 127), without its NaN check"},
                   {std::ldexp(1.0L, 127), "the largest E8M0 scale, 0xFE's, as a saturating decode gives"},
                   {1, "1, as if the scale were missing"},
                   {0, "0, as a flushing decode gives"}};
      else
        guesses = {{480, "the byte read as a normal E4M3 number: exponent field 15, mantissa 7"},
                   {448, "the largest finite E4M3, as a saturating decode gives"},
                   {1, "1, as if the scale were missing"},
                   {0, "0, as a flushing decode gives"}};
      return text + mx_used_value_text(p, o, Unknown{t.kind, blk}, guesses, sign, code_hex(byte), actual);
    }
  }
  return std::nullopt;
}

// A NaN element (E4M3 0x7F/0xFF, E5M2 exponent field 31 with a mantissa).
std::optional<std::string> nan_element_text(const Problem& p, const OracleSummary& s, const Operands& o,
                                            bool solvable, double actual) {
  const struct {
    const char* name;
    const uint8_t* row;
    int64_t index;
    BlockFormat format;
    Unknown::Kind kind;
  } elements[] = {
      {"a", o.a, s.first_i, p.a_format, Unknown::element_a},
      {"b", o.b, s.first_j, p.b_format, Unknown::element_b},
      {"b2", o.b2, s.first_j, p.b_format, Unknown::element_b}};
  for (const auto& t : elements) {
    if (t.row == nullptr) continue;
    for (int64_t x = 0; x < o.k; ++x) {
      if (!element_of(t.format, t.row, x).nan) continue;
      const uint8_t code = element_code(t.format, t.row, x);
      std::string text = fmt::format("NaN is due because element {}[{}, row {}, k {}] is 0x{:02X}, {} NaN", t.name,
                                     o.where, t.index, x, code,
                                     t.format == BlockFormat::mxfp8_e4m3 ? "E4M3's" : "an E5M2");
      if (!solvable || t.row == o.b2) return text;
      return text + mx_used_value_text(p, o, Unknown{t.kind, x}, nan_element_guesses(t.format, code),
                                       (code & 0x80) ? -1 : 1, code_hex(code), actual);
    }
  }
  return std::nullopt;
}

// Inf elements: Inf times a zero factor, Infs of both signs, or Inf times alpha = 0 (IEEE).
std::optional<std::string> inf_product_text(const Problem& p, const OracleSummary& s, const Operands& o,
                                            bool solvable, double actual) {
  const struct { const uint8_t *b, *sfb; const char *b_name, *sfb_name; double alpha; } pairs[] = {
      {o.b, o.sfb, "b", "sfb", o.alpha}, {o.b2, o.sfb2, "b2", "sfb2", p.alpha2}};
  for (const auto& q : pairs) {
    if (q.b == nullptr || q.sfb == nullptr) continue;
    const int64_t bs_a = block_size(p.a_format), bs_b = block_size(p.b_format);
    std::string first_pos, first_neg;  // an element making a +Inf / -Inf product
    for (int64_t x = 0; x < o.k; ++x) {
      const ElementValue ea = element_of(p.a_format, o.a, x), eb = element_of(p.b_format, q.b, x);
      if (!ea.inf && !eb.inf) continue;
      const bool a_inf = ea.inf;
      // "element a[b=0, row 3, k 5] is 0x00" for A's (a_side) or B's element x.
      const auto element_text = [&](bool a_side) {
        return fmt::format("element {}[{}, row {}, k {}] is 0x{:02X}", a_side ? "a" : q.b_name, o.where,
                           a_side ? s.first_i : s.first_j, x,
                           element_code(a_side ? p.a_format : p.b_format, a_side ? o.a : q.b, x));
      };
      const std::string inf_text =
          fmt::format("{}, E5M2's {}Inf", element_text(a_inf), (a_inf ? ea : eb).negative ? "-" : "+");
      const uint8_t ba = o.sfa[x / bs_a], bb = q.sfb[x / bs_b];
      std::string zero;
      const ElementValue& other = a_inf ? eb : ea;
      if (!other.inf && other.sig == 0)
        zero = element_text(!a_inf);
      else if (mx_scale_value(p.a_format, p.semantics, ba) == 0)
        zero = fmt::format("scale byte sfa[{}, row {}, block {}] is 0x{:02X}", o.where, s.first_i, x / bs_a, ba);
      else if (mx_scale_value(p.b_format, p.semantics, bb) == 0)
        zero = fmt::format("scale byte {}[{}, row {}, block {}] is 0x{:02X}", q.sfb_name, o.where, s.first_j, x / bs_b,
                           bb);
      if (!zero.empty()) {
        std::string text = fmt::format("NaN is due because {}, and its product is Inf times 0 ({})", inf_text, zero);
        if (!solvable || q.b == o.b2) return text;
        return text + mx_used_value_text(p, o, Unknown{Unknown::inf, 0}, inf_guesses(), 1, "E5M2's Inf", actual);
      }
      const bool negative = ((ea.negative != eb.negative) != (mx_scale_value(p.a_format, p.semantics, ba) < 0)) !=
                            (mx_scale_value(p.b_format, p.semantics, bb) < 0);
      std::string& slot = negative ? first_neg : first_pos;
      if (slot.empty()) slot = inf_text;
    }
    if (!first_pos.empty() && !first_neg.empty()) {
      std::string text = fmt::format("NaN is due because the products hold +Inf ({}) and -Inf ({}), whose sum is NaN",
                                     first_pos, first_neg);
      if (!solvable || q.b == o.b2) return text;
      return text + mx_used_value_text(p, o, Unknown{Unknown::inf, 0}, inf_guesses(), 1, "E5M2's Inf", actual);
    }
    if ((!first_pos.empty() || !first_neg.empty()) && q.alpha == 0)
      return fmt::format("NaN is due because {}, times alpha{} = 0", first_pos.empty() ? first_neg : first_pos,
                         q.b == o.b2 ? "2" : "");
  }
  return std::nullopt;
}

std::string mx_hint(const Problem& p, const OracleSummary& s, double actual) {
  const std::optional<Operands> found = operands(p, s);
  if (!found) return "";
  const bool solvable = !op_is_dual(p.op);
  for (const auto phase : {nan_scale_text, nan_element_text, inf_product_text})
    if (std::optional<std::string> text = phase(p, s, *found, solvable, actual)) return *text;
  return "";
}

}  // namespace

std::string nan_scale_hint(const Problem& p, const OracleSummary& s) {
  if (!s.any_failure() || !is_nan_out(p.out_type, s.first.expected_bits)) return "";
  const double actual = decode_out(p.out_type, s.first_actual);
  // An MX operand's misread NaN or Inf can overflow the output (0xFF read as 2^128).
  if (p.mx_operands()) return std::isnan(actual) ? "" : mx_hint(p, s, actual);
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
      if (!op_is_dual(p.op)) text += used_value_text(p, *o, blk, t.row == o->sfa, actual);
      return text;
    }
  }
  return "";
}

}  // namespace nvfp4
