// The exact block-scaled reference for any pair of formats. Each run of elements along k over
// which both operands' scales stay the same (16 or 32 elements; blocks start at multiples of
// their size, so one block boundary list serves both) is summed exactly in a 128-bit integer in
// units of its smallest possible product, then shifted into the Kulisch accumulators once. Each
// row is decoded once into such integers (B per batch, A per row).
#include "reference/exact_mx.h"

#include <memory>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "reference/long_double_bits.h"
#include "reference/long_double_exp.h"
#include "reference/mx_formats.h"
#include "reference/oracle_facts.h"

namespace nvfp4 {

namespace {

// |k| as limbs (two's complement negation when negative).
void abs_limbs(const Kulisch& k, uint64_t* out) {
  const bool neg = k.negative();
  uint64_t carry = 1;
  for (int x = 0; x < Kulisch::kLimbs; ++x) {
    if (!neg) {
      out[x] = k.limb[x];
      continue;
    }
    const uint64_t inv = ~k.limb[x];
    out[x] = inv + carry;
    carry = carry && out[x] == 0;
  }
}

// top_exp() of the limbs of |k|.
int top_of(const uint64_t* a) {
  for (int x = Kulisch::kLimbs - 1; x >= 0; --x)
    if (a[x]) return Kulisch::kLsbExp + 64 * x + 64 - __builtin_clzll(a[x]);
  return Kulisch::kLsbExp;
}

// (-1)^negative * mag * 2^exp2 as magnitude() gives them, in long double.
long double magnitude_value(u128 mag, int exp2, bool negative) {
  // mag < 2^104: hi * 2^64 and lo are exact, so their sum is mag rounded once, as converting mag
  // rounds it; the power of two is exact in range (libgcc's 128-bit conversion and libm's ldexpl
  // were a twentieth of an MX case's judging).
  const uint64_t hi = static_cast<uint64_t>(mag >> 64), lo = static_cast<uint64_t>(mag);
  const long double m = hi ? static_cast<long double>(hi) * 0x1p64L + static_cast<long double>(lo)
                           : static_cast<long double>(lo);
  const long double v = m * pow2l(exp2);
  return negative ? -v : v;
}

}  // namespace

int Kulisch::top_exp() const {
  uint64_t a[kLimbs];
  abs_limbs(*this, a);
  return top_of(a);
}

void Kulisch::magnitude(u128* mag, int* exp2) const {
  uint64_t a[kLimbs];
  abs_limbs(*this, a);
  const int top = top_of(a) - kLsbExp;  // bits in |value|
  *exp2 = kLsbExp;
  if (top <= 103) {
    *mag = (static_cast<u128>(a[1]) << 64) | a[0];
    return;
  }
  // Keep bits [drop, top) (103 of them, so within limbs w..w+2), fold the rest into a sticky bit.
  const int drop = top - 103, w = drop / 64, b = drop % 64;
  const auto limb_at = [&a](int x) { return x < kLimbs ? a[x] : uint64_t{0}; };
  const uint64_t lo = b ? (a[w] >> b) | (limb_at(w + 1) << (64 - b)) : a[w];
  const uint64_t hi = b ? (limb_at(w + 1) >> b) | (limb_at(w + 2) << (64 - b)) : limb_at(w + 1);
  const u128 m = (static_cast<u128>(hi) << 64) | lo;  // bits past top are zero in a
  bool sticky = b && (a[w] & ((uint64_t{1} << b) - 1)) != 0;
  for (int x = 0; x < w && !sticky; ++x) sticky = a[x] != 0;
  *mag = m | (sticky ? 1u : 0u);
  *exp2 = kLsbExp + drop;
}

long double Kulisch::to_long_double() const {
  u128 mag;
  int exp2;
  magnitude(&mag, &exp2);
  return magnitude_value(mag, exp2, negative());
}

namespace {

// A scale as sign * sig * 2^exp: E8M0 (sig 1) or an NVFP4 operand's E4M3.
ScaleValue scale_at(const MxOperand& op, ScaleSemantics semantics, int64_t row, int64_t s) {
  const uint8_t byte = op.scales[static_cast<size_t>(row * op.kb() + s)];
  if (op.format == BlockFormat::nvfp4) return e4m3_decode(byte, semantics);
  const E8m0Value v = e8m0_decode(byte);
  return ScaleValue{v.nan, 1, 1, v.exp};
}

// Element x of a row (row counted over batches: b * rows + i).
ElementValue element_at(const MxOperand& op, int64_t row, int64_t x) {
  switch (op.format) {
    case BlockFormat::nvfp4:
    case BlockFormat::mxfp4:
      return e2m1_element(e2m1_nibble(op.data.data() + row * (op.k / 2), x));
    case BlockFormat::mxfp8_e4m3: return e4m3_element(op.data[static_cast<size_t>(row * op.k + x)]);
    case BlockFormat::mxfp8_e5m2: return e5m2_element(op.data[static_cast<size_t>(row * op.k + x)]);
  }
  return ElementValue{true, false, false, 0, 0};
}

// The smallest exponent of an element's significand (the unit of a segment's integer sum).
int element_unit(BlockFormat f) {
  switch (f) {
    case BlockFormat::nvfp4:
    case BlockFormat::mxfp4: return -1;
    case BlockFormat::mxfp8_e4m3: return -9;
    case BlockFormat::mxfp8_e5m2: return -16;
  }
  return 0;
}

// One row decoded once: each element as a signed integer in units of its format's smallest
// significand step (element_unit), Inf/NaN kept aside, and the row's scales.
struct DecodedRow {
  BlockFormat format;
  int unit;                       // element_unit(format)
  std::vector<int64_t> value;     // below 2^32 in magnitude (E5M2's 57344 in units of 2^-16)
  std::vector<uint8_t> special;   // kFinite, kNan, kPosInf, kNegInf
  std::vector<ScaleValue> scales;
  bool nan_scale = false;         // every block of a row is used: SPEC rule 1
  bool any_special = false;
  int max_bits = 0;               // every |value| < 2^max_bits
  int block_shift = 4;            // element x's scale is scales[x >> block_shift] (16 or 32)
};
constexpr uint8_t kFinite = 0, kNan = 1, kPosInf = 2, kNegInf = 3;

DecodedRow decode_row(const MxOperand& op, ScaleSemantics semantics, int64_t row) {
  DecodedRow r;
  r.format = op.format;
  r.unit = element_unit(op.format);
  r.block_shift = __builtin_ctzll(static_cast<uint64_t>(block_size(op.format)));
  r.value.resize(static_cast<size_t>(op.k));
  r.special.resize(static_cast<size_t>(op.k));
  for (int64_t x = 0; x < op.k; ++x) {
    const ElementValue e = element_at(op, row, x);
    const int64_t mag = e.nan || e.inf ? 0 : static_cast<int64_t>(e.sig) << (e.exp - r.unit);
    r.value[static_cast<size_t>(x)] = e.negative ? -mag : mag;
    if (mag != 0) r.max_bits = std::max(r.max_bits, 64 - __builtin_clzll(static_cast<uint64_t>(mag)));
    const uint8_t sp = e.nan ? kNan : e.inf ? (e.negative ? kNegInf : kPosInf) : kFinite;
    r.special[static_cast<size_t>(x)] = sp;
    r.any_special |= sp != kFinite;
  }
  for (int64_t s = 0; s < op.kb(); ++s) {
    r.scales.push_back(scale_at(op, semantics, row, s));
    r.nan_scale |= r.scales.back().nan;
  }
  return r;
}

// An Inf element times the other factors (IEEE): NaN where a factor is zero or NaN.
void add_special_product(MxElement& e, const DecodedRow& ra, const DecodedRow& rb, int64_t x, const ScaleValue& sa,
                         const ScaleValue& sb) {
  const size_t i = static_cast<size_t>(x);
  const uint8_t a = ra.special[i], b = rb.special[i];
  if (a == kNan || b == kNan) {
    e.nan = true;
    return;
  }
  const bool zero = (a == kFinite && ra.value[i] == 0) || (b == kFinite && rb.value[i] == 0) || sa.sig == 0 || sb.sig == 0;
  if (zero) {
    e.nan = true;
    return;
  }
  const bool a_neg = a == kNegInf || (a == kFinite && ra.value[i] < 0);
  const bool b_neg = b == kNegInf || (b == kFinite && rb.value[i] < 0);
  const bool neg = ((a_neg != b_neg) != (sa.sign < 0)) != (sb.sign < 0);
  (neg ? e.neg_inf : e.pos_inf) = true;
}

// The sums of consecutive segments kept in 128-bit integers at a common unit (the smallest seen)
// while they fit, and only then added to the wide accumulators: a segment's sums are below 2^78,
// so with scales that change little from block to block most segments never touch them. The
// value reaching the accumulators is the same exact sum, so their limbs are the same.
struct PendingSums {
  i128 sum = 0, abs_sum = 0;  // |sum| <= abs_sum < 2^125
  int unit = 0;
  bool any = false;

  static int bits(i128 v) { return v == 0 ? 0 : 128 - clz_u128(static_cast<u128>(v)); }
  static int clz_u128(u128 v) {
    const uint64_t hi = static_cast<uint64_t>(v >> 64);
    return hi ? __builtin_clzll(hi) : 64 + __builtin_clzll(static_cast<uint64_t>(v));
  }
  static i128 shifted(i128 v, int d) { return static_cast<i128>(static_cast<u128>(v) << d); }

  void flush(MxElement& e) {
    if (!any) return;
    e.sum.add_host(sum, unit);
    e.abs_sum.add_host(abs_sum, unit);
    sum = abs_sum = 0;
    any = false;
  }
  // Adds s * 2^u and a * 2^u (|s| <= a < 2^125).
  void add(MxElement& e, i128 s, i128 a, int u) {
    if (any) {
      const int lo = u < unit ? u : unit;
      const int ours = bits(abs_sum) + (unit - lo), theirs = bits(a) + (u - lo);
      if (ours > 123 || theirs > 123) {
        flush(e);
      } else {
        sum = shifted(sum, unit - lo) + shifted(s, u - lo);
        abs_sum = shifted(abs_sum, unit - lo) + shifted(a, u - lo);
        unit = lo;
        return;
      }
    }
    sum = s, abs_sum = a, unit = u, any = true;
  }
};

// Elements [x0, x1) of the pair, under one scale each: exact integer sums of the element
// products, scaled once by the two scales' significands.
void add_segment(MxElement& e, PendingSums& pending, const DecodedRow& ra, const DecodedRow& rb, int64_t x0,
                 int64_t x1) {
  // Shifts, not a division by a run-time block size: two of those a segment cost as much as
  // the segment's sums.
  const ScaleValue& sa = ra.scales[static_cast<size_t>(x0 >> ra.block_shift)];
  const ScaleValue& sb = rb.scales[static_cast<size_t>(x0 >> rb.block_shift)];
  if (sa.nan || sb.nan) return;  // already NaN; the other blocks still give r, S, t, g
  const bool specials = ra.any_special || rb.any_special;
  i128 sum = 0, abs_sum = 0;
  u128 bits = 0;  // OR of the nonzero |products|: its lowest set bit is their smallest ctz
  int64_t nonzero = 0;
  if (!specials && ra.max_bits + rb.max_bits <= 57) {  // a row's elements are below 2^32
    // Every product below 2^57 and a segment's at most 32 of them below 2^62: the same sums in
    // 64-bit integers.
    int64_t sum64 = 0;
    uint64_t abs64 = 0, bits64 = 0;
    const int64_t *va = ra.value.data(), *vb = rb.value.data();
    for (int64_t x = x0; x < x1; ++x) {
      const int64_t p = va[x] * vb[x];
      const uint64_t mag = static_cast<uint64_t>(p < 0 ? -p : p);
      sum64 += p;
      abs64 += mag;
      bits64 |= mag;
      nonzero += mag != 0;
    }
    sum = sum64, abs_sum = static_cast<i128>(abs64), bits = bits64;
  } else {
    for (int64_t x = x0; x < x1; ++x) {
      const size_t i = static_cast<size_t>(x);
      if (specials && (ra.special[i] != kFinite || rb.special[i] != kFinite)) {
        add_special_product(e, ra, rb, x, sa, sb);
        continue;
      }
      const i128 p = static_cast<i128>(ra.value[i]) * rb.value[i];
      const u128 mag = static_cast<u128>(p < 0 ? -p : p);
      sum += p;
      abs_sum += static_cast<i128>(mag);
      bits |= mag;
      nonzero += mag != 0;
    }
  }
  const int64_t scale_sig = static_cast<int64_t>(sa.sig) * sb.sig;
  if (bits == 0 || scale_sig == 0) return;
  const int unit = ra.unit + rb.unit + sa.exp + sb.exp;
  const i128 scale = sa.sign * sb.sign < 0 ? -scale_sig : scale_sig;
  pending.add(e, sum * scale, abs_sum * scale_sig, unit);
  e.nonzero += nonzero;
  e.g_exp = std::min(e.g_exp, unit + ctz_u128(bits) + __builtin_ctzll(static_cast<uint64_t>(scale_sig)));
}

MxElement element(const DecodedRow& ra, const DecodedRow& rb, int64_t k) {
  MxElement e;
  PendingSums pending;
  e.nan = ra.nan_scale || rb.nan_scale;
  const int64_t seg = std::min(block_size(ra.format), block_size(rb.format));
  for (int64_t x0 = 0; x0 < k; x0 += seg) add_segment(e, pending, ra, rb, x0, std::min(k, x0 + seg));
  pending.flush(e);
  if (e.pos_inf && e.neg_inf) e.nan = true;
  return e;
}

void check_operand(const MxOperand& op, const char* name, int64_t rows, int64_t k, int64_t l) {
  const std::string n = name;
  if (op.rows != rows || op.k != k || op.l != l)
    throw std::invalid_argument("MX problem: operand " + n + "'s shape is not the problem's");
  if (packs_nibbles(op.format) && k % 2 != 0)
    throw std::invalid_argument("MX problem: k must be even for the E2M1 operand " + n);
  if (static_cast<int64_t>(op.data.size()) != op.data_bytes())
    throw std::invalid_argument("MX problem: " + n + " holds " + std::to_string(op.data.size()) + " bytes, expected " +
                                std::to_string(op.data_bytes()));
  if (static_cast<int64_t>(op.scales.size()) != op.scale_bytes())
    throw std::invalid_argument("MX problem: sf" + n + " holds " + std::to_string(op.scales.size()) +
                                " bytes, expected " + std::to_string(op.scale_bytes()));
}

}  // namespace

void validate(const MxProblem& p) {
  if (p.op != Op::gemv && p.op != Op::gemm) throw std::invalid_argument("MX problem: op must be gemv or gemm");
  if (p.m < 1 || p.n < 1 || p.l < 1 || p.k < 1) throw std::invalid_argument("MX problem: m, n, k, l must be >= 1");
  if (op_n_is_one(p.op) && p.n != 1) throw std::invalid_argument("MX problem: n must be 1 for gemv");
  if (!std::isfinite(p.alpha)) throw std::invalid_argument("MX problem: alpha must be finite");
  check_operand(p.a, "a", p.m, p.k, p.l);
  check_operand(p.b, "b", p.n, p.k, p.l);
  if (p.expect && static_cast<int64_t>(p.expect->size()) != p.l * p.m * p.n)
    throw std::invalid_argument("MX problem: expect holds the wrong number of words");
}

std::vector<MxElement> exact_mx(const MxProblem& p) {
  validate(p);
  std::vector<MxElement> out(static_cast<size_t>(p.l * p.m * p.n));
  for (int64_t b = 0; b < p.l; ++b) {
    // B's rows of the batch decoded once (n * k * 9 bytes), A's row by row.
    std::vector<DecodedRow> cols(static_cast<size_t>(p.n));
#pragma omp parallel for schedule(dynamic, 1) if (p.n > 1)
    for (int64_t j = 0; j < p.n; ++j) cols[static_cast<size_t>(j)] = decode_row(p.b, p.semantics, b * p.n + j);
#pragma omp parallel for schedule(dynamic, 1) if (p.m > 1)
    for (int64_t i = 0; i < p.m; ++i) {
      const DecodedRow row = decode_row(p.a, p.semantics, b * p.m + i);
      for (int64_t j = 0; j < p.n; ++j)
        out[static_cast<size_t>((b * p.m + i) * p.n + j)] = element(row, cols[static_cast<size_t>(j)], p.k);
    }
  }
  return out;
}

bool same_mx_facts(const MxElement& x, const MxElement& y) {
  for (int w = 0; w < Kulisch::kLimbs; ++w)
    if (x.sum.limb[w] != y.sum.limb[w] || x.abs_sum.limb[w] != y.abs_sum.limb[w]) return false;
  return x.nonzero == y.nonzero && x.g_exp == y.g_exp && x.nan == y.nan && x.pos_inf == y.pos_inf &&
         x.neg_inf == y.neg_inf;
}

std::string describe_mx_facts(const MxElement& e) {
  const auto limbs = [](const Kulisch& k) {
    std::string s;
    char buf[20];
    for (int w = Kulisch::kLimbs - 1; w >= 0; --w) {
      std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(k.limb[w]));
      s += buf;
      if (w) s += ' ';
    }
    return s;
  };
  return "r=[" + limbs(e.sum) + "] S=[" + limbs(e.abs_sum) + "] t=" + std::to_string(e.nonzero) +
         " g_exp=" + std::to_string(e.g_exp) + " nan=" + std::to_string(e.nan) + " +inf=" + std::to_string(e.pos_inf) +
         " -inf=" + std::to_string(e.neg_inf);
}

namespace {

// round_mx with e.sum's magnitude() given (mag, exp2), where the sum is finite and not zero.
uint32_t round_mx_magnitude(const MxElement& e, float alpha, OutType type, u128 mag, int exp2) {
  uint32_t bits;
  std::memcpy(&bits, &alpha, sizeof bits);
  const bool alpha_negative = (bits >> 31) != 0;
  const int field = static_cast<int>((bits >> 23) & 0xFF);
  const uint32_t frac = bits & 0x7FFFFFu;
  // mag is below 2^103: the product with alpha's 24 bits fits.
  const uint64_t alpha_sig = field == 0 ? frac : (frac | 0x800000u);
  exp2 += (field == 0 ? 1 : field) - 150;
  return out_round(type, e.sum.negative() != alpha_negative, mag * alpha_sig, exp2);
}

}  // namespace

uint32_t round_mx(const MxElement& e, float alpha, OutType type) {
  const OutFormat f = out_format(type);
  if (e.nan) return f.quiet_nan;
  uint32_t bits;
  std::memcpy(&bits, &alpha, sizeof bits);
  const bool alpha_negative = (bits >> 31) != 0;
  const int field = static_cast<int>((bits >> 23) & 0xFF);
  const uint32_t frac = bits & 0x7FFFFFu;
  if (e.pos_inf || e.neg_inf) {
    if ((field == 0 && frac == 0) || (field == 0xFF && frac != 0)) return f.quiet_nan;  // Inf * 0
    return (e.neg_inf != alpha_negative ? f.sign_bit : 0u) | f.inf;
  }
  if (e.sum.zero()) return 0;
  if (field == 0xFF) return frac != 0 ? f.quiet_nan : ((e.sum.negative() != alpha_negative ? f.sign_bit : 0u) | f.inf);
  u128 mag;
  int exp2;
  e.sum.magnitude(&mag, &exp2);
  return round_mx_magnitude(e, alpha, type, mag, exp2);
}

std::vector<uint32_t> exact_mx_words(const MxProblem& p) {
  const std::vector<MxElement> elems = exact_mx(p);
  std::vector<uint32_t> words(elems.size());
  for (size_t x = 0; x < elems.size(); ++x) words[x] = round_mx(elems[x], p.alpha, p.out_type);
  return words;
}

MxProblem mx_problem(const Problem& p) {
  MxProblem x;
  x.op = p.op == Op::gemv ? Op::gemv : Op::gemm;  // a dual problem's G (mx_dual_u gives U)
  x.m = p.m;
  x.n = p.n;
  x.k = p.k;
  x.l = p.l;
  x.alpha = p.alpha;
  x.out_type = p.out_type;
  x.semantics = p.semantics;
  x.a = MxOperand{p.a_format, p.m, p.k, p.l, p.a, p.sfa};
  x.b = MxOperand{p.b_format, p.n, p.k, p.l, p.b, p.sfb};
  if (p.op == Op::gemv || p.op == Op::gemm) x.expect = p.expect;
  x.note = p.note;
  return x;
}

MxProblem mx_problem(Problem&& p) {
  Problem shell;  // p without its tensors, copied as above; then the tensors moved in
  std::swap(shell.a, p.a), std::swap(shell.b, p.b), std::swap(shell.sfa, p.sfa), std::swap(shell.sfb, p.sfb);
  MxProblem x = mx_problem(p);
  x.a.data = std::move(shell.a), x.a.scales = std::move(shell.sfa);
  x.b.data = std::move(shell.b), x.b.scales = std::move(shell.sfb);
  return x;
}

namespace {

// U = A * B2 of a dual problem, with alpha2.
MxProblem mx_dual_u(const Problem& p) {
  MxProblem x = mx_problem(p);
  x.b.data = p.b2;
  x.b.scales = p.sfb2;
  x.alpha = p.alpha2;
  return x;
}

DualSum dual_sum(const MxElement& e) {
  DualSum s;
  s.negative = e.sum.negative();
  e.sum.magnitude(&s.mag, &s.exp2);
  return s;
}

// Rule 6's word where G or U holds an Inf product (IEEE, taking silu's limits: silu(+Inf) = +Inf,
// silu(-Inf) = -0): only NaN, +-Inf and +-0 arise. Such an element is judged by rule 1 alone.
uint32_t dual_inf_word(const MxElement& g, float alpha, const MxElement& u, float alpha2, OutType type) {
  const OutFormat f = out_format(type);
  const auto value = [](const MxElement& e, float a) -> long double {
    const long double inf = std::numeric_limits<long double>::infinity();
    const long double v = e.pos_inf ? inf : e.neg_inf ? -inf : e.sum.to_long_double();
    return v * static_cast<long double>(a);
  };
  const long double gv = value(g, alpha), uv = value(u, alpha2);
  const long double silu = std::isinf(gv) ? (gv > 0 ? gv : -0.0L) : gv / (1 + exp_ld(-gv));
  const long double v = silu * uv;
  if (std::isnan(v)) return f.quiet_nan;
  if (std::isinf(v)) return (v < 0 ? f.sign_bit : 0u) | f.inf;
  if (v == 0) return std::signbit(v) ? f.sign_bit : 0u;
  int e = 0;
  const long double frac = std::frexp(std::fabs(v), &e);
  return out_round(type, v < 0, static_cast<uint64_t>(std::ldexp(frac, 64)), e - 64);
}

SumFacts mx_facts(const MxElement& e, float alpha, OutType type) {
  SumFacts s;
  s.nan = e.nan;
  s.inf = e.pos_inf || e.neg_inf;
  // Each accumulator's magnitude once: the word, r, S and S's exponent follow from them.
  u128 mag = 0;
  int exp2 = Kulisch::kLsbExp;
  const bool counted = !e.nan && !s.inf && !e.sum.zero();
  if (counted) e.sum.magnitude(&mag, &exp2);
  s.expected = counted && std::isfinite(alpha) ? round_mx_magnitude(e, alpha, type, mag, exp2) : round_mx(e, alpha, type);
  s.nan = s.nan || is_nan_out(type, s.expected);  // Inf * alpha = 0
  if (!s.nan && !s.inf) {
    s.r = magnitude_value(mag, exp2, e.sum.negative());  // +0 for a zero sum, as to_long_double()
    u128 abs_mag;
    int abs_exp2;
    e.abs_sum.magnitude(&abs_mag, &abs_exp2);
    s.abs_sum = magnitude_value(abs_mag, abs_exp2, false);
    s.any_nonzero = e.nonzero > 0;
    s.nonzero = e.nonzero;
    s.g_exp = e.g_exp;
    // S < 2^s_exp, top_exp(): magnitude() keeps S's top bit as mag's top bit.
    s.s_exp = abs_exp2 + bit_width_u128(abs_mag);
  }
  return s;
}

void put_word(ExactResult& r, size_t x, uint32_t w) {
  if (out_word_bytes(r.out_type) == 4) r.c32[x] = w;
  else r.c[x] = static_cast<uint16_t>(w);
}

}  // namespace

ExactResult exact_mx_result(const Problem& p) { return exact_mx_result(p, exact_mx); }

ExactResult exact_mx_result(const Problem& p, const MxElementsFn& elements) {
  const std::string error = problem_error(p);
  if (!error.empty()) throw std::invalid_argument("exact_mx_result: " + error);
  ExactResult r;
  r.out_type = p.out_type;
  r.group_offset = group_output_offsets(p);
  const size_t count = static_cast<size_t>(p.c_elems());
  r.elems.resize(count);
  if (out_word_bytes(p.out_type) == 4) r.c32.resize(count);
  else r.c.resize(count);
  auto facts = std::make_shared<std::vector<MxElement>>();
  facts->reserve(count);
  if (op_is_grouped(p.op)) {
    // Each non-empty group an l = 1 GEMM of the problem's formats with its own alpha (rule 5).
    for (size_t g = 0; g < p.groups.size(); ++g) {
      if (p.groups[g].m == 0) continue;
      const std::vector<MxElement> one = elements(mx_problem(group_problem(p, g)));
      const size_t base = static_cast<size_t>(r.group_offset[g]);
      for (size_t x = 0; x < one.size(); ++x) put_word(r, base + x, round_mx(one[x], p.groups[g].alpha, p.out_type));
      facts->insert(facts->end(), one.begin(), one.end());
    }
  } else {
    *facts = elements(mx_problem(p));
  }
  if (facts->size() != count) throw std::runtime_error("exact_mx_result: the elements' source gave the wrong count");
  for (size_t x = 0; x < count; ++x) r.elems[x].nan = (*facts)[x].nan;
  if (op_is_dual(p.op)) {
    // G = A*B (alpha), U = A*B2 (alpha2), v = silu(G) * U once rounded, as for NVFP4 operands.
    auto u = std::make_shared<std::vector<MxElement>>(elements(mx_dual_u(p)));
    if (u->size() != count) throw std::runtime_error("exact_mx_result: the elements' source gave the wrong count");
    r.elems2.resize(count);
    r.dual.resize(count);
    for (size_t x = 0; x < count; ++x) {
      const MxElement &g = (*facts)[x], &v = (*u)[x];
      r.elems2[x].nan = v.nan;
      const bool nan = g.nan || v.nan;
      const bool inf = g.pos_inf || g.neg_inf || v.pos_inf || v.neg_inf;
      if (!nan && !inf) r.dual[x] = dual_value(dual_sum(g), p.alpha, dual_sum(v), p.alpha2);
      put_word(r, x, nan ? out_format(p.out_type).quiet_nan
                     : inf ? dual_inf_word(g, p.alpha, v, p.alpha2, p.out_type)
                           : round_dual(r.dual[x], false, p.out_type));
    }
    r.mx2 = std::move(u);
  } else if (!op_is_grouped(p.op)) {
    // Each word its own rounding (a GPU source hands back millions of elements at once).
    const int64_t words = static_cast<int64_t>(count);
#pragma omp parallel for schedule(static) if (words > 4096)
    for (int64_t x = 0; x < words; ++x)
      put_word(r, static_cast<size_t>(x), round_mx((*facts)[static_cast<size_t>(x)], p.alpha, p.out_type));
  }
  r.mx = std::move(facts);
  return r;
}

ElementVerdict judge_mx_output(const Problem& p, const ExactResult& ref, int64_t index, float alpha, uint32_t actual,
                               const Policy& policy) {
  const size_t x = static_cast<size_t>(index);
  const MxElement& e = (*ref.mx)[x];
  if (!op_is_dual(p.op) || !ref.mx2) return judge_mx_element(e, alpha, actual, policy, p.out_type);
  const MxElement& u = (*ref.mx2)[x];
  SumFacts gf = mx_facts(e, p.alpha, OutType::fp32), uf = mx_facts(u, p.alpha2, OutType::fp32);
  // Rule 6's NaN is rule 1's: a NaN scale or element (or Inf * 0 inside G or U), not alpha's.
  gf.nan = e.nan;
  uf.nan = u.nan;
  const long double g_value = gf.inf ? 0 : e.sum.to_long_double() * p.alpha;
  return judge_dual_sum(gf, uf, g_value, ref.dual[x], p.alpha, p.alpha2, ref.word(x), actual, policy, p.out_type);
}

ElementVerdict judge_mx_element(const MxElement& e, float alpha, uint32_t actual, const Policy& policy,
                                OutType type) {
  return judge_sum(mx_facts(e, alpha, type), alpha, actual, policy, type);
}

}  // namespace nvfp4
