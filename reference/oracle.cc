// The oracle of SPEC.md section 3, for the three output types.
//
// Arithmetic: the expected RN_out value and the exact-regime test are exact (integers). The
// rounding-regime test |c - alpha*r| <= bound mixes an exact dyadic value with the rational
// gamma, so it is done in long double (>= 64-bit significand) with every error pushed toward
// ACCEPTING: alpha*r carries at most 2^-62 relative error, the subtraction and the half dozen
// operations of the bound at most 2^-64 each, and the argument of ulp_out is rounded up before
// the ulp is taken. The slack added below, 2^-56 * (|alpha*r| + bound), covers all of that, so a
// correct output is never rejected; a wrong one escapes only if it exceeds the bound by less
// than that slack, about 2^-44 of an FP16 ulp (2^-32 of an FP32 one). Dual GEMM's v carries
// 2^-60 relative error (exact_gemm.h), also far inside the slack.
#include "reference/oracle.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "reference/exact_mx.h"
#include "reference/long_double_bits.h"
#include "reference/oracle_facts.h"

namespace nvfp4 {

static_assert(std::numeric_limits<long double>::digits >= 64,
              "the oracle's error analysis assumes long double has at least 64 significand bits");

namespace {

// SPEC.md section 5's flag bits (reference/ does not include kernels/; the values are the contract).
constexpr uint32_t kFlagFp16Accumulate = 1u << 2;
constexpr uint32_t kFlagSaturates = 1u << 3;
constexpr uint32_t kFlagExact = 1u << 4;
constexpr uint32_t kFlagMmaAccumulate = 1u << 6;

// Powers of two 2^kPow2Min .. 2^kPow2Max, to spare libm's slow long double ldexp in the hot path
// (every output type's values and ulps lie in this range).
constexpr int kPow2Min = -160, kPow2Max = 160;
struct Pow2Table {
  long double v[kPow2Max - kPow2Min + 1];
  Pow2Table() {
    for (int e = kPow2Min; e <= kPow2Max; ++e) v[e - kPow2Min] = std::ldexp(1.0L, e);
  }
  long double operator[](int i) const { return v[i]; }
};
const Pow2Table kPow2;

// A word's exact value (every value of the three types is a long double).
long double out_value(OutType t, uint32_t word) {
  const OutParts q = out_parts(t, word);
  if (q.nan) return std::numeric_limits<long double>::quiet_NaN();
  const long double mag = q.inf ? std::numeric_limits<long double>::infinity()
                                : static_cast<long double>(q.sig) * kPow2[q.exp - kPow2Min];
  return q.negative ? -mag : mag;
}

// ulp_out at magnitude v: the subnormal unit below the smallest normal, else
// 2^(floor(log2 v) - precision + 1), continued beyond the largest binade so that it stays
// monotone.
// floor(log2 v) of a finite normal v > 0: std::ilogb, which for x87's 80-bit long double is its
// biased exponent field (the libm call was a quarter of judging an output).
int exponent_of(long double v) { return kX87LongDouble ? x87_bits(v).exponent() - 16383 : std::ilogb(v); }

// log2 of ulp_of(f, v).
int ulp_exponent(const OutFormat& f, long double v) {
  if (!(v >= kPow2[f.emin - kPow2Min])) return f.emin - f.precision + 1;
  if (std::isinf(v)) return f.emax + 2 - f.precision;
  return exponent_of(v) - f.precision + 1;
}

long double pow2(int e) { return e >= kPow2Min && e <= kPow2Max ? kPow2[e - kPow2Min] : std::ldexp(1.0L, e); }

long double ulp_of(const OutFormat& f, long double v) { return pow2(ulp_exponent(f, v)); }

// x / ulp_of(f, v), as a multiplication by the inverse power of two: the same number (both are
// exact in long double's range), without an x87 division's latency in every judged output.
long double in_ulps(long double x, const OutFormat& f, long double v) { return x * pow2(-ulp_exponent(f, v)); }

long double overflow_of(const OutFormat& f) {
  return (2 - kPow2[-f.precision - kPow2Min]) * kPow2[f.emax - kPow2Min];
}

// alpha = +-2^e exactly? Magnitude only: multiplying by -1 is exact in every format, so the
// exactness argument of rule 2 is the same for -2^e as for 2^e. Sets *exp to e.
bool alpha_power_of_two(float alpha, int* exp) {
  uint32_t bits;
  std::memcpy(&bits, &alpha, sizeof bits);
  const int field = static_cast<int>((bits >> 23) & 0xFF);
  const uint32_t frac = bits & 0x7FFFFFu;
  if (field == 0xFF) return false;
  if (field != 0) {
    if (frac != 0) return false;
    *exp = field - 127;
    return true;
  }
  if (frac == 0 || (frac & (frac - 1)) != 0) return false;  // zero is not a power of two
  *exp = -149 + __builtin_ctz(frac);
  return true;
}

// An accumulator with `precision` significand bits whose finite values lie in
// [2^min_exp, 2^max_exp) (normal range, to stay clear of underflow).
struct Accumulator {
  int precision, min_exp, max_exp;
};

// What rules 2 and 3 ask of alpha: whether it is +-2^exp exactly (alpha_power_of_two).
struct AlphaShape {
  bool power_of_two = false;
  int exp = 0;
};
AlphaShape alpha_shape(float alpha) {
  AlphaShape a;
  a.power_of_two = alpha_power_of_two(alpha, &a.exp);
  return a;
}

// Rule 2 for accumulator acc. Every partial sum in any order is a multiple of g (or of
// |alpha|*g when alpha is folded into a factor) of magnitude <= S (or |alpha|*S), hence exact
// when S < 2^precision * g and all of these are in range.
bool exact_regime_for(const SumFacts& e, AlphaShape alpha, const Accumulator& acc) {
  if (e.nan || e.inf || !alpha.power_of_two) return false;
  if (!e.any_nonzero) return true;  // every product is zero: any order sums to +-0
  if (e.s_exp > acc.precision + e.g_exp) return false;
  return std::min(e.g_exp, e.g_exp + alpha.exp) >= acc.min_exp &&
         std::max(e.s_exp, e.s_exp + alpha.exp) <= acc.max_exp;
}

// The accumulator of a policy's rule 2.
Accumulator accumulator_of(const Policy& policy) {
  if (policy.kind == Policy::Kind::fp16_accum) {
    // FP16: 11 significand bits, normal from 2^-14, largest finite 65504 < 2^16; partial sums
    // below 2^15 keep clear of it. Matrix units keep as many bits fewer as they do for FP32.
    const int lost = kIeeeFp32Rule.exact_bits - policy.rule().exact_bits;
    return {11 - lost, -14, 15};
  }
  return {policy.rule().exact_bits, -126, 127};
}

bool exact_regime_for_policy(const SumFacts& e, float alpha, const Policy& policy) {
  return exact_regime_for(e, alpha_shape(alpha), accumulator_of(policy));
}

// The rest of "matrix-unit[:SM]" after its name: "" or ":SM" (a compute capability, e.g. 90).
bool parse_matrix_unit(const std::string& rest, Policy* p) {
  p->accumulation = Accumulation::matrix_unit;
  if (rest.empty()) return true;
  if (rest[0] != ':' || rest.size() < 2 || rest.size() > 4) return false;
  int sm = 0;
  for (size_t x = 1; x < rest.size(); ++x) {
    if (rest[x] < '0' || rest[x] > '9') return false;
    sm = sm * 10 + (rest[x] - '0');
  }
  p->device_sm = sm;
  return sm > 0;
}

std::string format_double(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

double parse_double(const std::string& text, const std::string& what) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto res = std::from_chars(text.data(), end, v);
  if (text.empty() || res.ec != std::errc() || res.ptr != end || !std::isfinite(v) || v < 0)
    throw std::invalid_argument("policy: " + what + " '" + text + "' is not a finite number >= 0");
  return v;
}

// What rule 2's exact-regime test and the count of products need: integers only.
SumFacts integer_facts(const ExactElement& e) {
  SumFacts f;
  f.nan = e.nan;
  f.any_nonzero = e.abs_sum != 0;
  f.nonzero = e.nonzero;
  f.g_exp = e.min_tz - 20;
  f.s_exp = bit_width_u128(e.abs_sum) - 20;  // S < 2^(width - 20)
  return f;
}

// Everything but the expected word (the exact-regime test needs no rounding).
SumFacts facts_of(const ExactElement& e) {
  SumFacts f = integer_facts(e);
  f.r = static_cast<long double>(e.sum) * 0x1p-20L;  // one rounding, then exact scaling
  f.abs_sum = static_cast<long double>(e.abs_sum) * 0x1p-20L;
  return f;
}

}  // namespace

SumFacts sum_facts(const ExactElement& e, float alpha, OutType type) {
  SumFacts f = facts_of(e);
  f.expected = round_result(e, alpha, type);
  return f;
}

bool exact_regime(const ExactElement& e, float alpha, const AccumulationRule& rule) {
  // FP32: normal from 2^-126, largest finite below 2^128; IEEE adders keep all 24 significand
  // bits, matrix units their rule's exact_bits of them.
  return exact_regime_for(facts_of(e), alpha_shape(alpha), Accumulator{rule.exact_bits, -126, 127});
}

Policy Policy::parse(const std::string& text) {
  Policy p;
  if (text == "fp32") {
    p.kind = Kind::fp32;
  } else if (text.rfind("matrix-unit", 0) == 0 && parse_matrix_unit(text.substr(11), &p)) {
    p.kind = Kind::fp32;
  } else if (text == "exact") {
    p.kind = Kind::exact;
  } else if (text == "fp16-accum") {
    p.kind = Kind::fp16_accum;
  } else if (text.rfind("fp16-accum/matrix-unit", 0) == 0 && parse_matrix_unit(text.substr(22), &p)) {
    p.kind = Kind::fp16_accum;
  } else if (text.rfind("allclose:", 0) == 0) {
    const std::string rest = text.substr(9);
    const size_t colon = rest.find(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("policy '" + text + "': expected allclose:RTOL:ATOL");
    p.kind = Kind::allclose;
    p.rtol = parse_double(rest.substr(0, colon), "RTOL");
    p.atol = parse_double(rest.substr(colon + 1), "ATOL");
  } else if (text.rfind("ulp:", 0) == 0) {
    const std::string n = text.substr(4);
    int64_t v = -1;
    const auto res = std::from_chars(n.data(), n.data() + n.size(), v);
    if (n.empty() || res.ec != std::errc() || res.ptr != n.data() + n.size() || v < 0)
      throw std::invalid_argument("policy '" + text + "': N of ulp:N must be an integer >= 0");
    p.kind = Kind::ulp;
    p.ulps = v;
  } else {
    throw std::invalid_argument("unknown policy '" + text +
                                "' (expected fp32, matrix-unit[:SM], exact, fp16-accum, fp16-accum/matrix-unit[:SM], "
                                "allclose:RTOL:ATOL or ulp:N)");
  }
  return p;
}

Policy Policy::for_flags(uint32_t flags) {
  Policy p;
  if (flags & kFlagExact) {
    p.kind = Kind::exact;
  } else if (flags & kFlagFp16Accumulate) {
    p.kind = Kind::fp16_accum;
  }
  p.saturates = (flags & kFlagSaturates) != 0;
  if (flags & kFlagMmaAccumulate) p.accumulation = Accumulation::matrix_unit;
  return p;
}

Policy Policy::with_accumulation(Accumulation a) const {
  Policy p = *this;
  p.accumulation = a;
  return p;
}

std::string Policy::name() const {
  std::string s;
  const bool mma = accumulation == Accumulation::matrix_unit;
  const std::string unit = device_sm > 0 ? "matrix-unit:" + std::to_string(device_sm) : "matrix-unit";
  switch (kind) {
    case Kind::fp32: s = mma ? unit : "fp32"; break;
    case Kind::exact: s = "exact"; break;
    case Kind::fp16_accum: s = mma ? "fp16-accum/" + unit : "fp16-accum"; break;
    case Kind::allclose: s = "allclose:" + format_double(rtol) + ":" + format_double(atol); break;
    case Kind::ulp: s = "ulp:" + std::to_string(ulps); break;
  }
  return saturates ? s + " (saturating)" : s;
}

namespace {

// What an element's exact value allows, before the policy looks at the kernel's word.
struct Target {
  bool nan = false;        // rule 1: the output must be NaN
  uint32_t expected = 0;   // RN_out of the exact value
  long double x = 0;       // the exact value (alpha * r, or v = silu(G) * U), to 2^-60 relative
  bool exact = false;      // only RN_out is acceptable (rule 2, or the `exact` policy)
  long double spread = 0;  // rules 3 and 6: the error allowed before the final rounding (Inf:
                           // no bound), computed only for the policies that use it
  bool unjudged = false;   // rule 6: G or U at FP32's overflow threshold, where no bound exists
};

// The verdict for `actual` without the saturation allowance.
ElementVerdict judge_target(const Target& t, uint32_t actual, const Policy& policy, OutType type) {
  const OutFormat f = out_format(type);
  ElementVerdict v;
  v.expected_bits = t.expected;
  const long double inf = std::numeric_limits<long double>::infinity();
  const bool actual_nan = is_nan_out(type, actual);

  // Rule 6: where an FP32 epilogue's G or U is Inf, any word (NaN too) is what some honest
  // kernel writes. dual_target never sets it with a NaN scale, whose rule 1 still holds.
  if (t.unjudged) {
    v.unjudged = true;
    v.expected = static_cast<double>(out_value(type, t.expected));
    return v;
  }
  // Rule 1, shared by every policy: NaN exactly where a used scale is NaN.
  if (t.nan || actual_nan) {
    v.expected = t.nan ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(out_value(type, t.expected));
    v.ok = t.nan && actual_nan;
    v.exact_regime = t.nan;
    v.error = v.ok ? 0.0 : static_cast<double>(inf);
    v.error_ulps = v.error;
    v.error_over_bound = v.error;
    return v;
  }

  const long double expected = out_value(type, t.expected);
  const long double c = out_value(type, actual);
  v.expected = static_cast<double>(expected);
  const long double abs_x = std::fabs(t.x);

  if (policy.kind == Policy::Kind::allclose) {
    // Against the rounded reference, as torch.allclose(c, reference) does: values of the type,
    // so c - ref is exact in long double; Inf matches only the same Inf.
    const bool any_inf = std::isinf(c) || std::isinf(expected);
    const long double allowed = any_inf ? 0 : policy.atol + policy.rtol * std::fabs(expected);
    const long double err = any_inf ? (c == expected ? 0 : inf) : std::fabs(c - expected);
    v.ok = err <= allowed;
    v.bound = static_cast<double>(allowed);
    v.error = static_cast<double>(err);
    v.error_ulps = static_cast<double>(in_ulps(err, f, std::fabs(expected)));
    v.error_over_bound = allowed > 0 ? static_cast<double>(err / allowed) : (err > 0 ? INFINITY : 0.0);
    return v;
  }
  if (policy.kind == Policy::Kind::ulp) {
    const int64_t dist = std::llabs(out_ordered(type, actual) - out_ordered(type, t.expected));
    v.ok = dist <= policy.ulps;
    v.bound = static_cast<double>(policy.ulps * ulp_of(f, std::fabs(expected)));
    v.error = static_cast<double>(std::isinf(c) || std::isinf(expected) ? (c == expected ? 0 : inf) : std::fabs(c - expected));
    v.error_ulps = static_cast<double>(dist);
    v.error_over_bound = policy.ulps > 0 ? double(dist) / double(policy.ulps) : (dist > 0 ? INFINITY : 0.0);
    return v;
  }

  const long double err = std::isinf(c) ? inf : std::fabs(c - t.x);
  v.error = static_cast<double>(err);
  v.error_ulps = static_cast<double>(in_ulps(err, f, std::fabs(expected)));

  // Rule 2 (and the `exact` policy): only RN_out is acceptable, +0 == -0. `bound` is then the
  // half ulp that separates RN_out from the exact value at most.
  if (t.exact) {
    v.exact_regime = true;
    v.ok = actual == t.expected || (is_zero_out(type, actual) && is_zero_out(type, t.expected));
    v.bound = static_cast<double>(ulp_of(f, abs_x) / 2);
    v.error_over_bound = v.ok ? std::min(1.0, v.error / v.bound) : std::max(v.error / v.bound, 1.0);
    return v;
  }

  // Rules 3 and 6: the spread allowed before rounding, then one rounding to the output type.
  long double bound = inf;
  if (!std::isinf(t.spread)) {
    const long double ulp_arg = (abs_x + t.spread) * (1 + 0x1p-58L);  // rounded up
    bound = t.spread + ulp_of(f, ulp_arg) / 2;
  }
  const long double slack = (abs_x + bound) * 0x1p-56L;
  v.bound = static_cast<double>(bound);
  if (std::isinf(c)) {
    // Rule 4: Inf of a sign is acceptable where the allowed interval reaches the type's
    // overflow threshold that way.
    const long double reach = (c > 0 ? t.x : -t.x) + bound + slack;
    v.ok = reach >= overflow_of(f);
  } else {
    v.ok = err <= bound + slack;
  }
  v.error_over_bound = bound > 0 ? static_cast<double>(err / bound) : (err > 0 ? INFINITY : 0.0);
  if (std::isinf(bound)) v.error_over_bound = 0;
  return v;
}

// The saturation allowance and the accepted-Inf bookkeeping around judge_target.
ElementVerdict judge_with_saturation(const Target& t, uint32_t actual, const Policy& policy, OutType type) {
  const OutFormat f = out_format(type);
  ElementVerdict v = judge_target(t, actual, policy, type);
  if (v.ok && is_inf_out(type, actual)) {
    // An accepted Inf is the overflow itself, not an error of infinite size.
    v.error = v.error_ulps = v.error_over_bound = 0;
  }
  const uint32_t neg_max = f.sign_bit | f.max_finite;
  if (!v.ok && policy.saturates && (actual == f.max_finite || actual == neg_max)) {
    // A saturating kernel writes the largest finite value where Inf would be right: judge it
    // as that Inf.
    const ElementVerdict as_inf =
        judge_target(t, actual == f.max_finite ? f.inf : (f.sign_bit | f.inf), policy, type);
    if (as_inf.ok) {
      v.ok = true;
      v.error_over_bound = std::min(v.error_over_bound, 1.0);
    }
  }
  return v;
}

// u of rule 3 for the policy (FP16 accumulation: 2^-10).
long double unit_roundoff(const Policy& policy) { return policy.kind == Policy::Kind::fp16_accum ? 0x1p-10L : 0x1p-23L; }

// t' of rule 3 for a sum of `nonzero` products (two roundings more where alpha is not a power
// of two).
int64_t rounding_terms(int64_t nonzero, int t_factor, AlphaShape alpha) {
  return nonzero * t_factor + (alpha.power_of_two ? 0 : 2);
}
int64_t rounding_terms(int64_t nonzero, float alpha, const Policy& policy) {
  return rounding_terms(nonzero, policy.rule().t_factor, alpha_shape(alpha));
}

// |alpha| * gamma_t' * S of rule 3 from t' u < 1 (the exact judgement in long double, the
// oracle's screen in double).
template <class T>
T gamma_spread(T tu, float alpha, T abs_sum) {
  return std::fabs(static_cast<T>(alpha)) * (tu / (1 - tu)) * abs_sum;
}

// |alpha| * gamma_t' * S of rule 3 (Inf when t' u >= 1).
long double rounding_spread(const SumFacts& e, float alpha, const Policy& policy) {
  const long double tu = static_cast<long double>(rounding_terms(e.nonzero, alpha, policy)) * unit_roundoff(policy);
  if (tu >= 1) return std::numeric_limits<long double>::infinity();
  return gamma_spread(tu, alpha, e.abs_sum);
}

bool uses_spread(const Policy& policy) { return policy.kind == Policy::Kind::fp32 || policy.kind == Policy::Kind::fp16_accum; }

Target gemm_target(const SumFacts& e, float alpha, const Policy& policy) {
  Target t;
  t.nan = e.nan;
  t.expected = e.expected;
  if (e.nan) return t;
  if (e.inf) {  // an Inf product: IEEE gives that Inf whatever the order
    t.x = std::numeric_limits<long double>::infinity();
    t.exact = true;
    return t;
  }
  // alpha * r: r's conversion to long double and the multiply each round once (2^-64).
  t.x = e.r * alpha;
  if (!uses_spread(policy) && policy.kind != Policy::Kind::exact) return t;
  t.exact = policy.kind == Policy::Kind::exact || exact_regime_for_policy(e, alpha, policy);
  if (!t.exact) t.spread = rounding_spread(e, alpha, policy);
  return t;
}

// Rule 6's bound B from E1, E2 (what rules 2-3 allow for G and U), |silu(G)|, |U| and alpha * G
// (the exact judgement in long double, the oracle's screen in double).
constexpr long double kSiluSlope = 1.1L;   // the largest slope of silu is 1.0998
constexpr long double kDualEta = 0x1p-16L;  // the kernel's own FP32 silu and product
constexpr long double kFp32Overflow = (2 - 0x1p-24L) * 0x1p127L;
template <class T>
T rule6_bound(T e1, T e2, T s, T abs_u, T gv) {
  const T l = static_cast<T>(kSiluSlope), eta = static_cast<T>(kDualEta);
  T b = l * e1 * (abs_u + e2) + (s + l * e1) * e2 + eta * (s + l * e1) * (abs_u + e2);
  // Below G = -87, 1 + exp(-G) overflows FP32 (or a fast divide returns 0): an FP32 silu may
  // give -0 there.
  if (gv < -87) b += s * (abs_u + e2);
  // Below 2^-126 an FP32 epilogue rounds G, U, silu(G) and the product with an absolute error of
  // up to 2^-150 each, which eta's relative allowance does not cover.
  b += static_cast<T>(0x1p-148L) * (l * (abs_u + e2) + s + l * e1 + 1);
  return b;
}

// Rule 6's B over G's and U's facts. E1, E2: what rules 2-3 allow for G and U (0 in the exact
// regime, and under the `exact` policy, whose kernels accumulate exactly). g_value: alpha * G;
// `expected`: RN_out(v), or the type's NaN where G or U is NaN.
Target dual_target_facts(const SumFacts& g, const SumFacts& u, long double g_value, const DualValue& d, float alpha,
                         float alpha2, uint32_t expected, const Policy& policy) {
  Target t;
  t.nan = g.nan || u.nan;
  t.expected = expected;
  if (t.nan) return t;
  // An Inf G or U (an MX operand's Inf element) lies beyond FP32's overflow threshold, where
  // rule 6 has no bound.
  if (g.inf || u.inf) {
    t.unjudged = true;
    return t;
  }
  t.x = d.v;
  const bool spread = uses_spread(policy) || policy.kind == Policy::Kind::exact;
  auto allowed = [&policy, spread](const SumFacts& f, float a) -> long double {
    if (!spread || policy.kind == Policy::Kind::exact || exact_regime_for_policy(f, a, policy)) return 0;
    return rounding_spread(f, a, policy);
  };
  const long double e1 = allowed(g, alpha), e2 = allowed(u, alpha2);
  const long double gv = g_value;
  const long double s = std::fabs(d.silu_g), abs_u = std::fabs(d.u);
  // FP32's range: where G or U (within what rules 2-3 allow) reaches FP32's overflow threshold,
  // an FP32 G or U is Inf and silu(G) * U may be NaN or Inf: no bound of this form exists, under
  // any policy.
  if (std::fabs(gv) + e1 >= kFp32Overflow || abs_u + e2 >= kFp32Overflow) {
    t.unjudged = true;
    return t;
  }
  if (!spread) return t;
  t.spread = rule6_bound(e1, e2, s, abs_u, gv);
  return t;
}

Target dual_target(const ExactElement& g, const ExactElement& u, const DualValue& d, float alpha, float alpha2,
                   const Policy& policy, OutType type) {
  const long double gv = static_cast<long double>(g.sum) * alpha * 0x1p-20L;
  return dual_target_facts(facts_of(g), facts_of(u), gv, d, alpha, alpha2, round_dual(d, g.nan || u.nan, type), policy);
}

}  // namespace

ElementVerdict judge_sum(const SumFacts& f, float alpha, uint32_t actual, const Policy& policy, OutType type) {
  return judge_with_saturation(gemm_target(f, alpha, policy), actual, policy, type);
}

ElementVerdict judge_dual_sum(const SumFacts& g, const SumFacts& u, long double g_value, const DualValue& d, float alpha,
                              float alpha2, uint32_t expected, uint32_t actual, const Policy& policy, OutType type) {
  return judge_with_saturation(dual_target_facts(g, u, g_value, d, alpha, alpha2, expected, policy), actual, policy,
                               type);
}

ElementVerdict judge_element(const ExactElement& e, float alpha, uint32_t actual, const Policy& policy, OutType type) {
  return judge_sum(sum_facts(e, alpha, type), alpha, actual, policy, type);
}

ElementVerdict judge_element(const ExactElement& e, float alpha, uint16_t actual, const Policy& policy) {
  return judge_element(e, alpha, static_cast<uint32_t>(actual), policy, OutType::fp16);
}

ElementVerdict judge_dual_element(const ExactElement& g, const ExactElement& u, const DualValue& d, float alpha,
                                  float alpha2, uint32_t actual, const Policy& policy, OutType type) {
  return judge_with_saturation(dual_target(g, u, d, alpha, alpha2, policy, type), actual, policy, type);
}

namespace {

// What the screen needs of one alpha, taken once per problem or group rather than per element
// (the policy's rule and alpha's shape were a fifth of the screen's time). scale = alpha * 2^-20
// is exact in double, so sum * scale is the one rounding of sum * 2^-20 * alpha.
struct ScreenAlpha {
  float value = 0;
  AlphaShape shape;
  double scale = 0;
};
ScreenAlpha screen_alpha(float alpha) { return ScreenAlpha{alpha, alpha_shape(alpha), static_cast<double>(alpha) * 0x1p-20}; }

// A screen in double precision in front of the exact judgement of a GEMM element under the
// policies with a rounding allowance (fp32, fp16-accum): most outputs are plainly inside their
// bound and add nothing to a chunk's largest error, and for those the long double work (the
// bound, the error in ulps and over the bound, two divisions) is three quarters of judging. An
// element passes the screen only when an upper bound of its error is within a lower bound of its
// allowance AND neither error statistic can exceed the chunk's largest so far; every other
// element (a failure, a NaN or Inf, a new largest error, anything near a binade edge) is judged
// exactly as before, so the verdicts, the counts and the statistics are those of the exact
// judgement alone. The double values carry at most a few 2^-53 of relative error; the margins
// below are 2^-40.
//
// T is the words' format (fp16, bf16 or fp32; an nvfp4 output's words are FP32): fixed at compile
// time, the decoding and ulp arithmetic fold to constants (they were a third of the screen).
template <OutType T>
class QuickScreen {
 public:
  using Alpha = ScreenAlpha;
  explicit QuickScreen(const Policy& policy)
      : on_(uses_spread(policy)), u_(static_cast<double>(unit_roundoff(policy))), t_factor_(policy.rule().t_factor),
        accumulator_(accumulator_of(policy)) {}
  bool on() const { return on_; }

  // True where a GEMM element is certainly accepted, its exact-regime flag in *exact, and its
  // errors at most max_ulps and max_over_bound.
  bool passes(const ExactElement& e, const Alpha& alpha, uint32_t actual, double max_ulps, double max_over_bound,
              bool* exact) const {
    if (e.nan) return false;
    const double x = to_double(e.sum) * alpha.scale;
    // x is exact in double when the sum's significant bits and alpha's 24 fit in 53.
    const u128 mag = e.sum < 0 ? static_cast<u128>(-e.sum) : static_cast<u128>(e.sum);
    const bool x_exact = (mag >> 53) == 0 && (mag == 0 || bit_width_u128(mag >> __builtin_ctzll(static_cast<uint64_t>(mag))) <= 29);
    *exact = exact_regime(e, alpha);
    double spread = 0;
    if (!*exact && !spread_below(e, alpha, &spread)) return false;
    return within(x, x_exact, actual, *exact, spread * (1 - kE), max_ulps, max_over_bound);
  }

  // The same for a dual GEMM element (rule 6: never the exact regime), from G's and U's sums and
  // the reference's silu(G), U and v.
  bool passes_dual(const ExactElement& g, const ExactElement& u, const DualValue& d, const Alpha& alpha,
                   const Alpha& alpha2, uint32_t actual, double max_ulps, double max_over_bound) const {
    if (g.nan || u.nan) return false;
    // E1, E2: what rules 2-3 allow for G and U.
    double e1 = 0, e2 = 0;
    if (!exact_regime(g, alpha) && !spread_of(g, alpha, &e1)) return false;
    if (!exact_regime(u, alpha2) && !spread_of(u, alpha2, &e2)) return false;
    const double gv = to_double(g.sum) * alpha.scale;
    const double s = std::fabs(static_cast<double>(d.silu_g)), abs_u = std::fabs(static_cast<double>(d.u));
    // Clear of FP32's overflow threshold (where rule 6 leaves the element unjudged) and of the
    // G = -87 edge, each by far more than the double values' error.
    const double overflow = static_cast<double>(kFp32Overflow);
    if (!((std::fabs(gv) + e1) * (1 + kE) < overflow * (1 - kE) && (abs_u + e2) * (1 + kE) < overflow * (1 - kE)))
      return false;
    if (std::fabs(gv + 87) <= 87 * kE) return false;
    const double b = rule6_bound(e1, e2, s, abs_u, gv);
    return within(static_cast<double>(d.v), false, actual, false, b * (1 - kE), max_ulps, max_over_bound);
  }

 private:
  static constexpr double kE = 0x1p-40;

  // The nearest double, as static_cast<double> gives it, through one instruction where the
  // integer fits 64 bits (the 128-bit conversion is a libgcc call).
  static double to_double(i128 v) {
    const int64_t low = static_cast<int64_t>(v);
    return low == v ? static_cast<double>(low) : static_cast<double>(v);
  }
  static double to_double(u128 v) {
    return v >> 63 == 0 ? static_cast<double>(static_cast<int64_t>(v)) : static_cast<double>(v);
  }

  // exact_regime_for_policy(integer_facts(e), alpha, policy). Rule 2 wants alpha a power of two:
  // without one the element's facts are not looked at.
  bool exact_regime(const ExactElement& e, const Alpha& alpha) const {
    return alpha.shape.power_of_two && exact_regime_for(integer_facts(e), alpha.shape, accumulator_);
  }

  // Rule 3's t'u in double; false where it is not well below 1.
  bool rounding_tu(const ExactElement& e, const Alpha& alpha, double* tu) const {
    *tu = static_cast<double>(rounding_terms(e.nonzero, t_factor_, alpha.shape)) * u_;
    return *tu < 0.5;
  }

  // Rule 3's spread |alpha| * gamma_t' * S in double; false where t'u is not well below 1.
  bool spread_of(const ExactElement& e, const Alpha& alpha, double* spread) const {
    double tu = 0;
    if (!rounding_tu(e, alpha, &tu)) return false;
    *spread = gamma_spread(tu, alpha.value, to_double(e.abs_sum) * 0x1p-20);
    return true;
  }

  // A lower bound of the same without its division (a seventh of the screen): t'u / (1 - t'u) >=
  // t'u + (t'u)^2, and the few roundings here lie inside the 2^-40 the caller takes off. Only a
  // lower bound will do: passes_dual also needs the spread from above, so it keeps spread_of.
  bool spread_below(const ExactElement& e, const Alpha& alpha, double* spread) const {
    double tu = 0;
    if (!rounding_tu(e, alpha, &tu)) return false;
    *spread = std::fabs(static_cast<double>(alpha.value)) * (tu + tu * tu) * (to_double(e.abs_sum) * 0x1p-20);
    return true;
  }

  // The kernel's word against x (the exact value, exact in double where x_exact, else within
  // 2^-52 of it): accepted with certainty, and the errors no larger than the maxima? In the exact
  // regime only RN_out(x) is acceptable (+0 == -0): a word nearer x than half the gap to its
  // neighbours is RN_out(x) whatever the ties, so the expected word is never rounded here.
  // Otherwise an error within spread_lo (a lower bound of the allowed spread) plus half an ulp at
  // |x| + spread. error_ulps is in ulps of the expected word, which lie at or above |x|'s binade.
  // An Inf word is accepted past the overflow threshold as the exact judgement accepts it (an
  // output that overflows was 4% of a medium GEMM's elements, and each went the exact way).
  bool within(double x, bool x_exact, uint32_t actual, bool exact, double spread_lo, double max_ulps,
              double max_over_bound) const {
    // Integers and a power of two, not a float conversion: a process whose MXCSR flushes
    // subnormal inputs (a library in the same process may set it) would read a subnormal word as 0.
    const OutParts q = out_parts(T, actual);
    if (q.nan) return false;
    const double abs_x = std::fabs(x);
    if (q.inf) {
      // An Inf is accepted where RN_out(x) is that Inf (the exact regime: x at or past the
      // overflow threshold on its side), or where the allowed interval reaches the threshold
      // that way (rule 4); accepted, it adds nothing to the error statistics. A lower bound of
      // the exact judgement's reach: x toward the Inf's side less its error, plus bound_lo.
      const double toward = (q.negative ? -x : x) - abs_x * kE;
      const double reach = exact ? toward : toward + spread_lo + pow2d(ulp_exp((abs_x + spread_lo) * (1 - kE)) - 1);
      return reach >= static_cast<double>(overflow_of(kF)) * (1 + kE);  // exact in double
    }
    const double c = static_cast<double>(q.sig) * pow2d(q.exp) * (q.negative ? -1 : 1);
    const double abs_c = std::fabs(c);
    // One rounding of |c - x| (0 where the kernel wrote x itself), or also x's own.
    const double err_hi = x_exact ? std::fabs(c - x) * (1 + kE) : std::fabs(c - x) + (abs_x + abs_c) * kE;
    double bound_lo, ulps_hi;
    if (exact) {
      if (!(err_hi < pow2d(ulp_exp(abs_c * (1 - kE)) - 1))) {
        // x exactly halfway between two words (a tie, common where few bits reach the output):
        // RN_out(x) is the one with the even significand. The exact judgement's statistics are
        // then exact here too: the error is half the gap on x's side, its bound that same half
        // gap (the error over the bound is 1), and in ulps of c it is err / ulp(c).
        if (!x_exact || (q.sig & 1) != 0) return false;
        const double err = std::fabs(c - x);  // exact: c and x are within a factor of two, or c = 0
        if (err != pow2d(ulp_exp(abs_x > abs_c ? abs_c : abs_c * (1 - kE)) - 1)) return false;
        return err * pow2d(-ulp_exp(abs_c)) <= max_ulps && 1.0 <= max_over_bound;
      }
      ulps_hi = err_hi * pow2d(-ulp_exp(abs_c));  // the expected word is c (or a zero, as c is)
      bound_lo = pow2d(ulp_exp(abs_x * (1 - kE)) - 1);
    } else {
      bound_lo = spread_lo + pow2d(ulp_exp((abs_x + spread_lo) * (1 - kE)) - 1);
      if (!(err_hi <= bound_lo)) return false;
      ulps_hi = err_hi * pow2d(-std::min(ulp_exp(abs_x * (1 - kE)), kF.emax - kF.precision + 1));
    }
    // err_hi / bound_lo * (1 + kE) <= max_over_bound without the division: the two products'
    // roundings are far inside the extra kE.
    return ulps_hi <= max_ulps && err_hi * (1 + 2 * kE) <= max_over_bound * bound_lo * (1 - kE);
  }

  // 2^e for a normal double's exponent (libm's ldexp was a third of the screen's time).
  static double pow2d(int e) {
    const uint64_t bits = static_cast<uint64_t>(e + 1023) << 52;
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  // log2 of ulp_of(kF, v) for a finite v >= 0 (v >= 2^emin is a normal double: its exponent field).
  static int ulp_exp(double v) {
    if (!(v >= pow2d(kF.emin))) return kF.emin - kF.precision + 1;
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return static_cast<int>((bits >> 52) & 0x7FF) - 1023 - kF.precision + 1;
  }
  static constexpr OutFormat kF = out_format(T);
  bool on_;
  double u_;
  int t_factor_;
  Accumulator accumulator_;
};

// Judges every element, reading the kernel's words (of format T) through `word(index)`.
template <OutType T, class Word>
OracleSummary judge_all_as(const Problem& p, const ExactResult& ref, const Word& word, const Policy& policy) {
  const int64_t count = p.c_elems();
  if (static_cast<int64_t>(ref.elems.size()) != count)
    throw std::invalid_argument("judge: the reference has " + std::to_string(ref.elems.size()) +
                                " elements, the problem " + std::to_string(count));
  if (ref.out_type != p.out_type) throw std::invalid_argument("judge: the reference is of another output type");
  const bool dual = op_is_dual(p.op);
  if (dual && (static_cast<int64_t>(ref.elems2.size()) != count || static_cast<int64_t>(ref.dual.size()) != count))
    throw std::invalid_argument("judge: the reference of a dual GEMM lacks U or v");
  const bool grouped = op_is_grouped(p.op);
  // Each element's alpha: the problem's, or its group's (rule 5).
  std::vector<int64_t> group_end;
  if (grouped) {
    const std::vector<int64_t> offsets = group_output_offsets(p);
    group_end.assign(offsets.begin() + 1, offsets.end());
  }
  // Chunks of outputs judged in parallel (a 4096^2 GEMM has 16M outputs), then merged in chunk
  // order: the totals and the first failure do not depend on the thread count. A chunk is a few
  // hundred microseconds of work, so a medium GEMM's 16,384 outputs are shared too.
  constexpr int64_t kChunk = int64_t(1) << 12;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  std::vector<OracleSummary> parts(static_cast<size_t>(chunks));
  const QuickScreen<T> screen(policy);
  const bool screened = screen.on() && !ref.mx;
#pragma omp parallel for schedule(dynamic, 1) if (chunks > 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    // A local, stored once at the end: through a reference into `parts` every element reloaded the
    // largest errors from memory.
    OracleSummary part;
    const int64_t end = std::min(count, (ch + 1) * kChunk);
    size_t g = grouped ? static_cast<size_t>(std::upper_bound(group_end.begin(), group_end.end(), ch * kChunk) -
                                             group_end.begin())
                       : 0;
    // The element's alpha, kept current as idx enters each group.
    ScreenAlpha alpha = screen_alpha(grouped ? p.groups[g].alpha : p.alpha);
    const ScreenAlpha alpha2 = screen_alpha(p.alpha2);
    for (int64_t idx = ch * kChunk; idx < end; ++idx) {
      if (grouped && idx >= group_end[g]) {
        while (idx >= group_end[g]) ++g;
        alpha = screen_alpha(p.groups[g].alpha);
      }
      // The reference's elements (48 bytes each; a dual GEMM's U and v beside them) come from
      // memory, megabytes a case: fetched 16 elements ahead, judging took 8-10% less time.
      const int64_t ahead = std::min(idx + 16, count - 1);
      __builtin_prefetch(ref.elems.data() + ahead);
      if (dual) {
        __builtin_prefetch(ref.elems2.data() + ahead);
        __builtin_prefetch(ref.dual.data() + ahead);
      }
      const uint32_t actual = word(idx);
      bool exact = false;
      if (screened && (dual ? screen.passes_dual(ref.elems[idx], ref.elems2[idx], ref.dual[idx], alpha, alpha2, actual,
                                                 part.max_error_ulps, part.max_error_over_bound)
                            : screen.passes(ref.elems[idx], alpha, actual, part.max_error_ulps,
                                            part.max_error_over_bound, &exact))) {
        part.exact_regime += exact;
        continue;
      }
      const ElementVerdict v =
          ref.mx ? judge_mx_output(p, ref, idx, alpha.value, actual, policy)
          : dual ? judge_dual_element(ref.elems[idx], ref.elems2[idx], ref.dual[idx], p.alpha, p.alpha2, actual, policy,
                                    p.out_type)
               : judge_element(ref.elems[idx], alpha.value, actual, policy, p.out_type);
      part.exact_regime += v.exact_regime;
      part.unjudged += v.unjudged;
      if (v.error_ulps > part.max_error_ulps) part.max_error_ulps = v.error_ulps;
      if (v.error_over_bound > part.max_error_over_bound) part.max_error_over_bound = v.error_over_bound;
      if (v.ok) continue;
      if (part.failing++ == 0) {
        const OutputPosition pos = output_position(p, idx);
        part.first_g = pos.g;
        part.first_b = pos.b;
        part.first_i = pos.i;
        part.first_j = pos.j;
        part.first_index = idx;
        part.first = v;
        part.first_actual = actual;
      }
    }
    parts[static_cast<size_t>(ch)] = part;
  }
  OracleSummary sum;
  sum.elements = count;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const OracleSummary& part = parts[static_cast<size_t>(ch)];
    sum.exact_regime += part.exact_regime;
    sum.unjudged += part.unjudged;
    sum.max_error_ulps = std::max(sum.max_error_ulps, part.max_error_ulps);
    sum.max_error_over_bound = std::max(sum.max_error_over_bound, part.max_error_over_bound);
    if (part.failing == 0) continue;
    if (sum.failing == 0) {  // the first chunk with a failure holds the first failure
      sum.first_g = part.first_g;
      sum.first_b = part.first_b;
      sum.first_i = part.first_i;
      sum.first_j = part.first_j;
      sum.first_index = part.first_index;
      sum.first = part.first;
      sum.first_actual = part.first_actual;
    }
    sum.failing += part.failing;
  }
  return sum;
}

template <class Word>
OracleSummary judge_all(const Problem& p, const ExactResult& ref, const Word& word, const Policy& policy) {
  switch (p.out_type) {
    case OutType::bf16: return judge_all_as<OutType::bf16>(p, ref, word, policy);
    case OutType::fp32:
    case OutType::nvfp4: return judge_all_as<OutType::fp32>(p, ref, word, policy);
    case OutType::fp16: break;
  }
  return judge_all_as<OutType::fp16>(p, ref, word, policy);
}

}  // namespace

OracleSummary judge(const Problem& p, const ExactResult& ref, const uint16_t* c, const Policy& policy) {
  if (p.out_type == OutType::fp32) throw std::invalid_argument("judge: FP32 outputs are 32-bit words: use judge_words");
  return judge_all(p, ref, [c](int64_t idx) { return static_cast<uint32_t>(c[idx]); }, policy);
}

float output_alpha(const Problem& p, int64_t index) {
  return op_is_grouped(p.op) ? p.groups[static_cast<size_t>(output_position(p, index).g)].alpha : p.alpha;
}

ElementVerdict judge_output(const Problem& p, const ExactResult& ref, int64_t index, uint32_t actual,
                            const Policy& policy) {
  const size_t x = static_cast<size_t>(index);
  if (ref.mx) return judge_mx_output(p, ref, index, output_alpha(p, index), actual, policy);
  if (op_is_dual(p.op))
    return judge_dual_element(ref.elems[x], ref.elems2[x], ref.dual[x], p.alpha, p.alpha2, actual, policy, p.out_type);
  return judge_element(ref.elems[x], output_alpha(p, index), actual, policy, p.out_type);
}

OutputInterval output_interval(const Problem& p, const ExactResult& ref, int64_t index, const Policy& policy) {
  return output_interval(p, ref, index, policy, output_alpha(p, index));
}

OutputInterval output_interval(const Problem& p, const ExactResult& ref, int64_t index, const Policy& policy,
                               float alpha) {
  const size_t x = static_cast<size_t>(index);
  Policy used = policy;
  if (!uses_spread(policy) && policy.kind != Policy::Kind::exact) used = Policy{}.with_accumulation(policy.accumulation);
  used.device_sm = policy.device_sm;
  Target t;
  if (op_is_dual(p.op)) {
    t = dual_target(ref.elems[x], ref.elems2[x], ref.dual[x], p.alpha, p.alpha2, used, OutType::fp32);
  } else {
    t = gemm_target(sum_facts(ref.elems[x], alpha, OutType::fp32), alpha, used);
  }
  OutputInterval out;
  out.nan = t.nan;
  out.exact = t.exact && !t.unjudged;
  out.fp32 = t.expected;
  out.x = t.x;
  out.spread = t.unjudged ? std::numeric_limits<long double>::infinity() : t.spread;
  return out;
}

OracleSummary judge_words(const Problem& p, const ExactResult& ref, const uint32_t* words, const Policy& policy) {
  return judge_all(p, ref, [words](int64_t idx) { return words[idx]; }, policy);
}

}  // namespace nvfp4
