// The oracle of SPEC.md section 3.
//
// Arithmetic: the expected RN16 value and the exact-regime test are exact (integers). The
// rounding-regime test |c - alpha*r| <= bound mixes an exact dyadic value with the rational
// gamma, so it is done in long double (>= 64-bit significand) with every error pushed toward
// ACCEPTING: alpha*r carries at most 2^-62 relative error, the subtraction and the half dozen
// operations of the bound at most 2^-64 each, and the argument of ulp16 is rounded up before
// the ulp is taken. The slack added below, 2^-56 * (|alpha*r| + bound), covers all of that, so a
// correct output is never rejected; a wrong one escapes only if it exceeds the bound by less
// than that slack, about 2^-44 of an FP16 ulp.
#include "reference/oracle.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace nvfp4 {

static_assert(std::numeric_limits<long double>::digits >= 64,
              "the oracle's error analysis assumes long double has at least 64 significand bits");

namespace {

// SPEC.md section 5's flag bits (reference/ does not include kernels/; the values are the contract).
constexpr uint32_t kFlagFp16Accumulate = 1u << 2;
constexpr uint32_t kFlagSaturates = 1u << 3;
constexpr uint32_t kFlagExact = 1u << 4;
constexpr uint32_t kFlagMmaAccumulate = 1u << 6;

// Powers of two 2^kPow2Min .. 2^kPow2Max, to spare libm's slow long double ldexp in the hot path.
constexpr int kPow2Min = -40, kPow2Max = 40;
struct Pow2Table {
  long double v[kPow2Max - kPow2Min + 1];
  Pow2Table() {
    for (int e = kPow2Min; e <= kPow2Max; ++e) v[e - kPow2Min] = std::ldexp(1.0L, e);
  }
  long double operator[](int i) const { return v[i]; }
};
const Pow2Table kPow2;

constexpr uint16_t kPosInf = 0x7C00u, kNegInf = 0xFC00u, kPosMax = 0x7BFFu, kNegMax = 0xFBFFu;

long double fp16_value(uint16_t h) {
  const Fp16Parts q = fp16_parts(h);
  if (q.nan) return std::numeric_limits<long double>::quiet_NaN();
  const long double mag = q.inf ? std::numeric_limits<long double>::infinity() : static_cast<long double>(q.sig) * kPow2[q.exp - kPow2Min];
  return q.negative ? -mag : mag;
}

// ulp of binary16 at magnitude v: 2^-24 below 2^-14, else 2^(floor(log2 v) - 10), continued
// beyond the largest binade so that it stays monotone.
long double ulp16(long double v) {
  if (!(v >= 0x1p-14L)) return 0x1p-24L;
  if (std::isinf(v)) return 0x1p5L;
  const int e = std::ilogb(v) - 10;
  return e <= kPow2Max ? kPow2[e - kPow2Min] : std::ldexp(1.0L, e);
}

// FP16 bits mapped to integers in value order (+0 and -0 both 0), for ulp distances.
int32_t ordered(uint16_t h) {
  const int32_t mag = h & 0x7FFF;
  return (h & 0x8000u) ? -mag : mag;
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

// Rule 2 for an accumulator with `precision` significand bits whose finite values lie in
// [2^min_exp, 2^max_exp) (normal range, to stay clear of underflow). Every partial sum in any
// order is a multiple of g (or of |alpha|*g when alpha is folded into a factor) of magnitude
// <= S (or |alpha|*S), hence exact when S < 2^precision * g and all of these are in range.
bool exact_regime_for(const ExactElement& e, float alpha, int precision, int min_exp, int max_exp) {
  int alpha_exp = 0;
  if (e.nan || !alpha_power_of_two(alpha, &alpha_exp)) return false;
  if (e.abs_sum == 0) return true;  // every product is zero: any order sums to +-0
  const int width = bit_width_u128(e.abs_sum);  // S < 2^(width - 20)
  if (width > precision + e.min_tz) return false;
  const int g_exp = e.min_tz - 20;
  const int s_exp = width - 20;
  return std::min(g_exp, g_exp + alpha_exp) >= min_exp && std::max(s_exp, s_exp + alpha_exp) <= max_exp;
}

bool exact_regime_for_policy(const ExactElement& e, float alpha, const Policy& policy) {
  if (policy.kind == Policy::Kind::fp16_accum) {
    // FP16: 11 significand bits, normal from 2^-14, largest finite 65504 < 2^16; partial sums
    // below 2^15 keep clear of it. Matrix units keep as many bits fewer as they do for FP32.
    const int lost = kIeeeFp32Rule.exact_bits - policy.rule().exact_bits;
    return exact_regime_for(e, alpha, 11 - lost, -14, 15);
  }
  return exact_regime(e, alpha, policy.rule());
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

}  // namespace

bool exact_regime(const ExactElement& e, float alpha, const AccumulationRule& rule) {
  // FP32: normal from 2^-126, largest finite below 2^128; IEEE adders keep all 24 significand
  // bits, matrix units their rule's exact_bits of them.
  return exact_regime_for(e, alpha, rule.exact_bits, -126, 127);
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

// The verdict for `actual` without the saturation allowance.
ElementVerdict judge_plain(const ExactElement& e, float alpha, uint16_t actual, const Policy& policy,
                           uint16_t expected_bits) {
  ElementVerdict v;
  v.expected_bits = expected_bits;
  const long double inf = std::numeric_limits<long double>::infinity();
  const bool actual_nan = fp16_is_nan(actual);

  // Rule 1, shared by every policy: NaN exactly where a used scale is NaN.
  if (e.nan || actual_nan) {
    v.expected = e.nan ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(fp16_value(expected_bits));
    v.ok = e.nan && actual_nan;
    v.exact_regime = e.nan;
    v.error = v.ok ? 0.0 : static_cast<double>(inf);
    v.error_ulps = v.error;
    v.error_over_bound = v.error;
    return v;
  }

  const long double expected = fp16_value(expected_bits);
  const long double c = fp16_value(actual);
  v.expected = static_cast<double>(expected);
  // alpha * r: the i128 -> long double conversion and the multiply each round once (2^-64).
  const long double x = static_cast<long double>(e.sum) * alpha * 0x1p-20L;  // exact scaling
  const long double abs_x = std::fabs(x);
  const long double ulp_expected = ulp16(std::fabs(expected));

  if (policy.kind == Policy::Kind::allclose) {
    // Against the RN16 reference, as torch.allclose(c, reference) does: FP16 values, so c - ref
    // is exact in long double; Inf matches only the same Inf.
    const bool any_inf = std::isinf(c) || std::isinf(expected);
    const long double allowed = any_inf ? 0 : policy.atol + policy.rtol * std::fabs(expected);
    const long double err = any_inf ? (c == expected ? 0 : inf) : std::fabs(c - expected);
    v.ok = err <= allowed;
    v.bound = static_cast<double>(allowed);
    v.error = static_cast<double>(err);
    v.error_ulps = static_cast<double>(err / ulp_expected);
    v.error_over_bound = allowed > 0 ? static_cast<double>(err / allowed) : (err > 0 ? INFINITY : 0.0);
    return v;
  }
  if (policy.kind == Policy::Kind::ulp) {
    const int64_t dist = std::llabs(static_cast<int64_t>(ordered(actual)) - ordered(expected_bits));
    v.ok = dist <= policy.ulps;
    v.bound = static_cast<double>(policy.ulps * ulp_expected);
    v.error = static_cast<double>(std::isinf(c) || std::isinf(expected) ? (c == expected ? 0 : inf) : std::fabs(c - expected));
    v.error_ulps = static_cast<double>(dist);
    v.error_over_bound = policy.ulps > 0 ? double(dist) / double(policy.ulps) : (dist > 0 ? INFINITY : 0.0);
    return v;
  }

  const long double err = std::isinf(c) ? inf : std::fabs(c - x);
  v.error = static_cast<double>(err);
  v.error_ulps = static_cast<double>(err / ulp_expected);

  // Rule 2 (and the `exact` policy): only RN16(alpha*r) is acceptable, +0 == -0. `bound` is then
  // the half ulp that separates RN16 from the exact value at most.
  if (policy.kind == Policy::Kind::exact || exact_regime_for_policy(e, alpha, policy)) {
    v.exact_regime = true;
    v.ok = actual == expected_bits || ((actual | expected_bits) & 0x7FFFu) == 0;
    v.bound = static_cast<double>(ulp16(abs_x) / 2);
    v.error_over_bound = v.ok ? std::min(1.0, v.error / v.bound) : std::max(v.error / v.bound, 1.0);
    return v;
  }

  // Rule 3: Higham's bound for any FP accumulation order with t' = t_factor * t, then one FP16
  // rounding.
  const long double u = policy.kind == Policy::Kind::fp16_accum ? 0x1p-10L : 0x1p-23L;
  int alpha_exp = 0;
  const long double terms = static_cast<long double>(e.nonzero) * policy.rule().t_factor +
                            (alpha_power_of_two(alpha, &alpha_exp) ? 0 : 2);
  const long double tu = terms * u;
  const long double abs_alpha = std::fabs(static_cast<long double>(alpha));
  const long double s = static_cast<long double>(e.abs_sum) * 0x1p-20L;
  long double bound = inf;
  if (tu < 1) {
    const long double gamma = tu / (1 - tu);
    const long double spread = abs_alpha * gamma * s;
    const long double ulp_arg = (abs_x + spread) * (1 + 0x1p-58L);  // rounded up
    bound = spread + ulp16(ulp_arg) / 2;
  }
  const long double slack = (abs_x + bound) * 0x1p-56L;
  v.bound = static_cast<double>(bound);
  if (std::isinf(c)) {
    // Rule 4: Inf of a sign is acceptable where the allowed interval reaches 65520 that way.
    const long double reach = (c > 0 ? x : -x) + bound + slack;
    v.ok = reach >= 65520;
  } else {
    v.ok = err <= bound + slack;
  }
  v.error_over_bound = bound > 0 ? static_cast<double>(err / bound) : (err > 0 ? INFINITY : 0.0);
  if (std::isinf(bound)) v.error_over_bound = 0;
  return v;
}

}  // namespace

ElementVerdict judge_element(const ExactElement& e, float alpha, uint16_t actual, const Policy& policy) {
  const uint16_t expected_bits = round_result(e, alpha);
  ElementVerdict v = judge_plain(e, alpha, actual, policy, expected_bits);
  if (v.ok && (actual & 0x7FFFu) == kPosInf) {
    // An accepted Inf is the overflow itself, not an error of infinite size.
    v.error = v.error_ulps = v.error_over_bound = 0;
  }
  if (!v.ok && policy.saturates && (actual == kPosMax || actual == kNegMax)) {
    // A saturating kernel writes +-65504 where Inf would be right: judge it as that Inf.
    const ElementVerdict as_inf =
        judge_plain(e, alpha, actual == kPosMax ? kPosInf : kNegInf, policy, expected_bits);
    if (as_inf.ok) {
      v.ok = true;
      v.error_over_bound = std::min(v.error_over_bound, 1.0);
    }
  }
  return v;
}

OracleSummary judge(const Problem& p, const ExactResult& ref, const uint16_t* c, const Policy& policy) {
  const int64_t count = p.c_elems();
  if (static_cast<int64_t>(ref.elems.size()) != count)
    throw std::invalid_argument("judge: the reference has " + std::to_string(ref.elems.size()) +
                                " elements, the problem " + std::to_string(count));
  // Chunks of outputs judged in parallel (a 4096^2 GEMM has 16M outputs), then merged in chunk
  // order: the totals and the first failure do not depend on the thread count.
  constexpr int64_t kChunk = int64_t(1) << 16;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  std::vector<OracleSummary> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(dynamic, 1) if (chunks > 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    OracleSummary& part = parts[static_cast<size_t>(ch)];
    const int64_t end = std::min(count, (ch + 1) * kChunk);
    for (int64_t idx = ch * kChunk; idx < end; ++idx) {
      const ElementVerdict v = judge_element(ref.elems[idx], p.alpha, c[idx], policy);
      part.exact_regime += v.exact_regime;
      if (v.error_ulps > part.max_error_ulps) part.max_error_ulps = v.error_ulps;
      if (v.error_over_bound > part.max_error_over_bound) part.max_error_over_bound = v.error_over_bound;
      if (v.ok) continue;
      if (part.failing++ == 0) {
        part.first_b = idx / (p.m * p.n);
        part.first_i = (idx / p.n) % p.m;
        part.first_j = idx % p.n;
        part.first = v;
        part.first_actual = c[idx];
      }
    }
  }
  OracleSummary sum;
  sum.elements = count;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const OracleSummary& part = parts[static_cast<size_t>(ch)];
    sum.exact_regime += part.exact_regime;
    sum.max_error_ulps = std::max(sum.max_error_ulps, part.max_error_ulps);
    sum.max_error_over_bound = std::max(sum.max_error_over_bound, part.max_error_over_bound);
    if (part.failing == 0) continue;
    if (sum.failing == 0) {  // the first chunk with a failure holds the first failure
      sum.first_b = part.first_b;
      sum.first_i = part.first_i;
      sum.first_j = part.first_j;
      sum.first = part.first;
      sum.first_actual = part.first_actual;
    }
    sum.failing += part.failing;
  }
  return sum;
}

}  // namespace nvfp4
