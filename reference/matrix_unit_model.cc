// The matrix-unit model of matrix_unit_model.h: operand decoding, the fused windowed addition,
// the final rounding to FP32, and an exact fixed-point sum for the rule check.
#include "reference/matrix_unit_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "reference/fp16.h"

namespace nvfp4 {
namespace {

constexpr uint32_t kNaN32 = 0x7FFFFFFFu;

// A finite value sig * 2^vexp with the exponent it aligns at (aexp), or a special.
struct Term {
  bool neg = false;
  bool nan = false, inf = false;
  uint64_t sig = 0;  // 0: the value is zero
  int vexp = 0;
  int aexp = 0;
};

struct Format {
  int exp_bits, man_bits, bias;
  bool has_inf;  // IEEE-style Inf/NaN at the top exponent; E4M3FN has only NaN = S.1111.111
};

Format format_of(MmaOperand op) {
  switch (op) {
    case MmaOperand::fp16: return {5, 10, 15, true};
    case MmaOperand::bf16: return {8, 7, 127, true};
    case MmaOperand::e4m3: return {4, 3, 7, false};
    case MmaOperand::s8: break;
  }
  return {0, 0, 0, false};
}

// A floating-point bit pattern of format f; subnormals align per `sub`.
Term decode(const Format& f, uint32_t bits, SubnormalOperands sub) {
  Term t;
  const int total = 1 + f.exp_bits + f.man_bits;
  t.neg = (bits >> (total - 1)) & 1u;
  const uint32_t e = (bits >> f.man_bits) & ((1u << f.exp_bits) - 1u);
  const uint32_t m = bits & ((1u << f.man_bits) - 1u);
  const uint32_t e_top = (1u << f.exp_bits) - 1u;
  if (f.has_inf && e == e_top) {
    (m ? t.nan : t.inf) = true;
    return t;
  }
  if (!f.has_inf && e == e_top && m == (1u << f.man_bits) - 1u) {
    t.nan = true;
    return t;
  }
  const int emin = 1 - f.bias;
  if (e == 0) {
    if (m == 0 || sub == SubnormalOperands::flush_to_zero) return t;  // zero
    t.sig = m;
    t.vexp = emin - f.man_bits;
    t.aexp = sub == SubnormalOperands::minimum_exponent ? emin : emin - f.man_bits + bit_width_u128(m) - 1;
    return t;
  }
  t.sig = (1u << f.man_bits) | m;
  t.vexp = static_cast<int>(e) - f.bias - f.man_bits;
  t.aexp = static_cast<int>(e) - f.bias;
  return t;
}

Term decode_fp32(uint32_t bits) {
  static const Format kFp32{8, 23, 127, true};
  return decode(kFp32, bits, SubnormalOperands::minimum_exponent);  // C's exponent: -126 when subnormal
}

// A signed exact value mag * 2^exp.
struct Exact {
  bool neg = false;
  u128 mag = 0;
  int exp = 0;
};

// sig * 2^vexp cut to a multiple of 2^unit; returns the multiple's magnitude.
u128 cut(uint64_t sig, int vexp, int unit, bool neg, WindowRounding r) {
  const int shift = vexp - unit;
  if (shift >= 0) return static_cast<u128>(sig) << shift;  // callers keep this below 2^100
  const int drop = -shift;
  if (drop >= 64) {
    // The whole value lies below 2^(unit - 1) (sig < 2^64): nothing is kept, except one unit
    // when a negative value is truncated toward minus infinity.
    return (r == WindowRounding::toward_minus_inf && neg) ? 1 : 0;
  }
  const uint64_t q = sig >> drop;
  const uint64_t rem = sig - (q << drop);
  switch (r) {
    case WindowRounding::toward_zero: return q;
    case WindowRounding::toward_minus_inf: return q + ((neg && rem) ? 1 : 0);
    case WindowRounding::nearest_even: {
      const uint64_t half = uint64_t{1} << (drop - 1);
      return q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
    }
  }
  return q;
}

// One fused addition: every nonzero term aligned to the largest aexp E (at least `floor`), cut to
// multiples of 2^(E - p), summed exactly. The result is exact (not yet rounded to FP32).
Exact fused_add(const std::vector<Term>& terms, int kept_bits, WindowRounding r, int floor) {
  int e_ref = std::numeric_limits<int>::min();
  for (const Term& t : terms)
    if (t.sig) e_ref = std::max(e_ref, t.aexp);
  Exact out;
  if (e_ref == std::numeric_limits<int>::min()) return out;
  e_ref = std::max(e_ref, floor);
  const int unit = e_ref - kept_bits;
  i128 sum = 0;
  for (const Term& t : terms) {
    if (!t.sig) continue;
    const u128 q = cut(t.sig, t.vexp, unit, t.neg, r);
    sum += t.neg ? -static_cast<i128>(q) : static_cast<i128>(q);
  }
  out.neg = sum < 0;
  out.mag = static_cast<u128>(out.neg ? -sum : sum);
  out.exp = unit;
  return out;
}

// The exact value x rounded to FP32 with `frac_bits` fraction bits (23: FP32 itself), subnormals
// on FP32's grid of 2^-149. A zero magnitude gives a zero of sign `zero_neg`.
uint32_t round_to_fp32(const Exact& x, int frac_bits, ResultRounding r, bool overflow_to_inf, bool zero_neg) {
  const uint32_t sign = x.neg ? 0x80000000u : 0u;
  if (x.mag == 0) return zero_neg ? 0x80000000u : 0u;
  const int width = bit_width_u128(x.mag);
  const int top = width - 1 + x.exp;  // x in [2^top, 2^(top + 1))
  const int unit = std::max(top - frac_bits, -149);
  const int shift = unit - x.exp;
  u128 q;
  if (shift <= 0) {
    q = x.mag << (-shift);
  } else if (shift >= 128) {
    q = 0;  // below 2^(unit - 1): RZ and RN both give zero (x.mag < 2^127 < half a unit here)
  } else {
    q = x.mag >> shift;
    if (r == ResultRounding::nearest_even) {
      const u128 rem = x.mag - (q << shift);
      const u128 half = static_cast<u128>(1) << (shift - 1);
      if (rem > half || (rem == half && (q & 1))) ++q;
    }
  }
  if (q == 0) return sign;  // underflow to a zero of the sum's sign
  // q * 2^unit is on the target grid; encode it (a carry may have moved it up one binade).
  const int qw = bit_width_u128(q);
  const int qtop = qw - 1 + unit;
  if (qtop >= 128) return sign | (overflow_to_inf ? 0x7F800000u : 0x7F7FFFFFu);
  if (qtop < -126) return sign | static_cast<uint32_t>(q << (unit + 149));  // subnormal
  // Normal: 24-bit significand; q has at most frac_bits + 2 <= 25 bits, the extra one zero.
  const u128 sig24 = qw <= 24 ? q << (24 - qw) : q >> (qw - 24);
  const uint32_t biased = static_cast<uint32_t>(qtop + 127);
  return sign | (biased << 23) | (static_cast<uint32_t>(sig24) & 0x7FFFFFu);
}

uint32_t s8_dot(const MatrixUnitModel& m, const uint32_t* a, const uint32_t* b, uint32_t c) {
  int64_t sum = static_cast<int32_t>(c);
  for (int i = 0; i < m.k; ++i)
    sum += static_cast<int64_t>(static_cast<int8_t>(a[i] & 0xFFu)) * static_cast<int8_t>(b[i] & 0xFFu);
  return static_cast<uint32_t>(sum);  // modulo 2^32
}

// An exact fixed-point number, two's complement over kLimbs 64-bit limbs, lowest bit 2^kLsb.
// Covers every product of two bf16 values (down to 2^-266, below 2^256) and every FP32 value.
class WideFixed {
 public:
  static constexpr int kLimbs = 10;
  static constexpr int kLsb = -300;

  void add(bool neg, uint64_t sig, int exp) {
    if (!sig) return;
    const int pos = exp - kLsb;  // bit position of sig's lowest bit
    std::array<uint64_t, kLimbs> v{};
    const int limb = pos / 64, off = pos % 64;
    v[limb] = sig << off;
    if (off && limb + 1 < kLimbs) v[limb + 1] = sig >> (64 - off);
    if (neg) negate(v);
    add_limbs(v);
  }
  void add(const WideFixed& o) { add_limbs(o.limbs_); }
  void negate() { negate(limbs_); }
  bool negative() const { return limbs_[kLimbs - 1] >> 63; }
  bool zero() const {
    for (uint64_t l : limbs_)
      if (l) return false;
    return true;
  }
  // Bit index (from kLsb) of the lowest set bit of |x|; -1 for zero.
  int lowest_bit() const {
    for (int i = 0; i < kLimbs; ++i)
      if (limbs_[i]) return i * 64 + __builtin_ctzll(limbs_[i]);  // two's complement keeps it
    return -1;
  }
  // Bit width of |x|.
  int width() const {
    std::array<uint64_t, kLimbs> v = limbs_;
    if (negative()) negate(v);
    for (int i = kLimbs - 1; i >= 0; --i)
      if (v[i]) return i * 64 + 64 - __builtin_clzll(v[i]);
    return 0;
  }
  double to_double() const {  // nearest double is not needed: accumulating limbs in long double
    std::array<uint64_t, kLimbs> v = limbs_;
    const bool neg = negative();
    if (neg) negate(v);
    long double s = 0;
    for (int i = kLimbs - 1; i >= 0; --i) s = s * 18446744073709551616.0L + static_cast<long double>(v[i]);
    const double d = static_cast<double>(std::ldexp(s, kLsb));
    return neg ? -d : d;
  }

 private:
  static void negate(std::array<uint64_t, kLimbs>& v) {
    uint64_t carry = 1;
    for (uint64_t& l : v) {
      const u128 s = static_cast<u128>(~l) + carry;
      l = static_cast<uint64_t>(s);
      carry = static_cast<uint64_t>(s >> 64);
    }
  }
  void add_limbs(const std::array<uint64_t, kLimbs>& v) {
    uint64_t carry = 0;
    for (int i = 0; i < kLimbs; ++i) {
      const u128 s = static_cast<u128>(limbs_[i]) + v[i] + carry;
      limbs_[i] = static_cast<uint64_t>(s);
      carry = static_cast<uint64_t>(s >> 64);
    }
  }
  std::array<uint64_t, kLimbs> limbs_{};
};

bool is_nan32(uint32_t x) { return (x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu); }

}  // namespace

uint32_t matrix_unit_dot(const MatrixUnitModel& m, const uint32_t* a, const uint32_t* b, uint32_t c) {
  if (m.operand == MmaOperand::s8) return s8_dot(m, a, b, c);
  const Format f = format_of(m.operand);
  const Term ct = decode_fp32(c);

  // Specials first: NaN anywhere, Inf * 0, or Infs of both signs give NaN; else an Inf wins.
  bool nan = ct.nan, pos_inf = ct.inf && !ct.neg, neg_inf = ct.inf && ct.neg;
  std::vector<Term> products(m.k);
  bool all_neg_zero = ct.sig == 0 && ct.neg && !ct.inf && !ct.nan;
  for (int i = 0; i < m.k; ++i) {
    const Term x = decode(f, a[i], m.subnormal_operands), y = decode(f, b[i], m.subnormal_operands);
    Term& p = products[i];
    p.neg = x.neg != y.neg;
    if (x.nan || y.nan) {
      nan = true;
      continue;
    }
    if (x.inf || y.inf) {
      const bool other_zero = (x.inf ? y : x).sig == 0 && !(x.inf ? y : x).inf;
      if (other_zero) nan = true;
      (p.neg ? neg_inf : pos_inf) = true;
      continue;
    }
    p.sig = x.sig * y.sig;
    p.vexp = x.vexp + y.vexp;
    p.aexp = x.aexp + y.aexp;
    if (p.sig && m.product_bits > 0) {
      const int w = bit_width_u128(p.sig);
      if (w > m.product_bits) {
        const int drop = w - m.product_bits;
        p.sig >>= drop;
        p.vexp += drop;
      }
    }
    if (p.sig || !p.neg) all_neg_zero = false;
  }
  if (nan || (pos_inf && neg_inf)) return kNaN32;
  if (pos_inf || neg_inf) return neg_inf ? 0xFF800000u : 0x7F800000u;

  const bool zero_neg = m.zero_sign == ZeroSign::ieee && all_neg_zero;
  Term acc = ct;
  uint32_t acc_bits = c;
  for (int start = 0; start < m.k; start += m.block) {
    std::vector<Term> terms(products.begin() + start, products.begin() + std::min(m.k, start + m.block));
    Exact sum;
    if (m.c_entry == CEntry::with_products) {
      terms.push_back(acc);
      sum = fused_add(terms, m.kept_bits, m.window_rounding, m.alignment_floor);
    } else {
      const Exact ps = fused_add(terms, m.kept_bits, m.window_rounding, m.alignment_floor);
      // The products' exact sum as one term, aligned at its own leading exponent.
      std::vector<Term> two{acc};
      if (ps.mag) {
        Term t;
        t.neg = ps.neg;
        const int w = bit_width_u128(ps.mag);
        const int drop = std::max(0, w - 64);  // keep it in 64 bits: those bits are below any window
        t.sig = static_cast<uint64_t>(ps.mag >> drop);
        t.vexp = ps.exp + drop;
        t.aexp = ps.exp + w - 1;
        two.push_back(t);
      }
      sum = fused_add(two, m.kept_bits, m.window_rounding, m.alignment_floor);
    }
    acc_bits = round_to_fp32(sum, m.result_fraction_bits, m.result_rounding, m.overflow_to_inf, zero_neg);
    if ((acc_bits & 0x7FFFFFFFu) == 0x7F800000u) return acc_bits;  // overflowed: Inf propagates
    acc = decode_fp32(acc_bits);
  }
  return acc_bits;
}

bool same_result(MmaOperand operand, uint32_t x, uint32_t y) {
  if (x == y) return true;
  return operand != MmaOperand::s8 && is_nan32(x) && is_nan32(y);
}

DotFacts dot_facts(MmaOperand operand, int k, const uint32_t* a, const uint32_t* b, uint32_t c) {
  DotFacts facts;
  WideFixed exact, abs_sum;
  int lowest_exp = std::numeric_limits<int>::max();
  bool domain = true;
  auto add = [&](bool neg, uint64_t sig, int vexp) {
    if (!sig) return;
    exact.add(neg, sig, vexp);
    abs_sum.add(false, sig, vexp);
    ++facts.addends;
    lowest_exp = std::min(lowest_exp, vexp + __builtin_ctzll(sig));
    // Nonzero addends must lie in FP32's normal range (>= 2^-126, < 2^128).
    const int top = vexp + 63 - __builtin_clzll(sig);
    if (top < -126 || top > 127) domain = false;
  };
  if (operand == MmaOperand::s8) {
    int64_t sum = static_cast<int32_t>(c);
    int64_t s = std::llabs(sum);
    facts.addends = c ? 1 : 0;
    for (int i = 0; i < k; ++i) {
      const int64_t p = static_cast<int64_t>(static_cast<int8_t>(a[i] & 0xFFu)) * static_cast<int8_t>(b[i] & 0xFFu);
      sum += p;
      s += std::llabs(p);
      facts.addends += p != 0;
    }
    facts.exact = static_cast<double>(sum);
    facts.abs_sum = static_cast<double>(s);
    facts.in_domain = sum >= INT32_MIN && sum <= INT32_MAX;
    return facts;
  }
  const Format f = format_of(operand);
  const Term ct = decode_fp32(c);
  if (ct.nan || ct.inf) facts.special = true;
  add(ct.neg, ct.sig, ct.vexp);
  for (int i = 0; i < k; ++i) {
    const Term x = decode(f, a[i], SubnormalOperands::normalized), y = decode(f, b[i], SubnormalOperands::normalized);
    if (x.nan || y.nan || x.inf || y.inf) {
      facts.special = true;
      continue;
    }
    // A subnormal operand is outside the rule's domain even where its product is zero-free.
    const int e_field_zero_mask = (1 << (f.exp_bits + f.man_bits)) - (1 << f.man_bits);
    if ((x.sig && !(a[i] & e_field_zero_mask)) || (y.sig && !(b[i] & e_field_zero_mask))) domain = false;
    add(x.neg != y.neg, x.sig * y.sig, x.vexp + y.vexp);
  }
  if (facts.special) return facts;
  facts.exact = exact.to_double();
  facts.abs_sum = abs_sum.to_double();
  facts.g_exp = facts.addends ? lowest_exp : 0;
  if (!exact.zero()) {
    const int top = exact.width() - 1 + WideFixed::kLsb;
    if (top < -126 || top > 127) domain = false;
  }
  facts.in_domain = domain;
  return facts;
}

RuleVerdict check_rule(const AccumulationRule& rule, MmaOperand operand, int k, const uint32_t* a,
                       const uint32_t* b, uint32_t c, uint32_t d) {
  RuleVerdict v;
  const DotFacts facts = dot_facts(operand, k, a, b, c);
  if (facts.special || !facts.in_domain) return v;
  v.applies = true;
  if (operand == MmaOperand::s8) {
    v.exact_regime = true;
    v.error = std::fabs(static_cast<double>(static_cast<int32_t>(d)) - facts.exact);
    v.holds = v.error == 0;
    return v;
  }
  // The exact difference d - exact, from the same fixed point as the facts.
  const Format f = format_of(operand);
  WideFixed diff;
  const Term dt = decode_fp32(d);
  if (dt.nan || dt.inf) return v;  // holds stays false
  diff.add(dt.neg, dt.sig, dt.vexp);
  const Term ct = decode_fp32(c);
  diff.add(!ct.neg, ct.sig, ct.vexp);
  for (int i = 0; i < k; ++i) {
    const Term x = decode(f, a[i], SubnormalOperands::normalized), y = decode(f, b[i], SubnormalOperands::normalized);
    diff.add(x.neg == y.neg, x.sig * y.sig, x.vexp + y.vexp);  // subtract the product
  }
  v.error = std::fabs(diff.to_double());
  // Exact regime: S < 2^exact_bits * g, decided exactly on S's leading bit and g's exponent.
  if (facts.addends == 0) {
    v.exact_regime = true;
  } else {
    WideFixed s;
    for (int i = 0; i < k; ++i) {
      const Term x = decode(f, a[i], SubnormalOperands::normalized), y = decode(f, b[i], SubnormalOperands::normalized);
      s.add(false, x.sig * y.sig, x.vexp + y.vexp);
    }
    s.add(false, ct.sig, ct.vexp);
    const int s_top = s.width() - 1 + WideFixed::kLsb;  // S in [2^s_top, 2^(s_top + 1))
    v.exact_regime = s_top < facts.g_exp + rule.exact_bits;
  }
  if (v.exact_regime) {
    v.holds = diff.zero();
    return v;
  }
  const double tu = static_cast<double>(rule.t_factor) * facts.addends * std::ldexp(1.0, -23);
  v.bound = tu / (1 - tu) * facts.abs_sum;
  v.holds = v.error <= v.bound;
  return v;
}

const char* to_string(MmaOperand operand) {
  switch (operand) {
    case MmaOperand::fp16: return "fp16";
    case MmaOperand::bf16: return "bf16";
    case MmaOperand::e4m3: return "e4m3";
    case MmaOperand::s8: return "s8";
  }
  return "?";
}

std::string describe(const MatrixUnitModel& m) {
  static const char* const kWindow[] = {"toward_zero", "toward_minus_inf", "nearest_even"};
  static const char* const kResult[] = {"toward_zero", "nearest_even"};
  static const char* const kC[] = {"with_products", "after_products"};
  static const char* const kSub[] = {"minimum_exponent", "normalized", "flush_to_zero"};
  static const char* const kZero[] = {"ieee", "always_positive"};
  char buf[512];
  if (m.operand == MmaOperand::s8) {
    std::snprintf(buf, sizeof buf, "operand=s8 k=%d exact modulo 2^32", m.k);
    return buf;
  }
  std::snprintf(buf, sizeof buf,
                "operand=%s k=%d block=%d kept_bits=%d window_rounding=%s result_rounding=%s c_entry=%s "
                "subnormal_operands=%s zero_sign=%s product_bits=%d result_fraction_bits=%d overflow=%s "
                "alignment_floor=%d",
                to_string(m.operand), m.k, m.block, m.kept_bits, kWindow[static_cast<int>(m.window_rounding)],
                kResult[static_cast<int>(m.result_rounding)], kC[static_cast<int>(m.c_entry)],
                kSub[static_cast<int>(m.subnormal_operands)], kZero[static_cast<int>(m.zero_sign)], m.product_bits,
                m.result_fraction_bits, m.overflow_to_inf ? "inf" : "max_finite", m.alignment_floor);
  return buf;
}

double operand_value(MmaOperand operand, uint32_t bits) {
  if (operand == MmaOperand::s8) return static_cast<int8_t>(bits & 0xFFu);
  const Term t = decode(format_of(operand), bits, SubnormalOperands::normalized);
  if (t.nan) return std::numeric_limits<double>::quiet_NaN();
  if (t.inf) return t.neg ? -HUGE_VAL : HUGE_VAL;
  const double v = std::ldexp(static_cast<double>(t.sig), t.vexp);
  return t.neg ? -v : v;
}

double fp32_value(uint32_t bits) {
  float f;
  static_assert(sizeof f == sizeof bits);
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace nvfp4
