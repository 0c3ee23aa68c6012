// Fuzz target `reference`: small problems from the bytes (the suite's one draw, as the kernel
// fuzzer draws them, or a case file when the input is text), checked against
// code written here independently of reference/: the E2M1 and E4M3 decoders, both scale layouts
// and their round trips, and exact_gemm (every field the oracle uses, and the RN16 output) against
// a brute force that rounds by binary search over all FP16 values. Problems with MX operands (any
// pair of the four formats) are checked the same way: E8M0, E4M3 and E5M2 decoders against IEEE
// bit patterns, and exact_gemm's MX facts against per-digit integer sums that cannot round. The
// oracle must accept the reference's own output and reject it with one bit flipped.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "harness/draw/schedule.h"
#include "reference/exact_gemm.h"
#include "reference/exact_mx.h"
#include "reference/mx_formats.h"
#include "reference/oracle.h"
#include "reference/scale_layout.h"

namespace {

using nvfp4::i128;
using nvfp4::u128;

[[noreturn]] void fail(const nvfp4::Problem& p, const std::string& what) {
  std::fprintf(stderr,
               "reference fuzzer: %s\n  problem: %s m=%lld n=%lld k=%lld l=%lld layout=%s "
               "semantics=%s alpha=%a\n",
               what.c_str(), nvfp4::to_string(p.op), static_cast<long long>(p.m),
               static_cast<long long>(p.n), static_cast<long long>(p.k), static_cast<long long>(p.l),
               nvfp4::to_string(p.sf_layout), nvfp4::to_string(p.semantics),
               static_cast<double>(p.alpha));
  if (p.mx_operands())
    std::fprintf(stderr, "  formats: a %s, b %s\n", nvfp4::to_string(p.a_format), nvfp4::to_string(p.b_format));
  std::abort();
}

// ---- Decoders, from the bit fields as SPEC.md section 1 describes them ----

// Doubled E2M1 value: exponent field e (2 bits), mantissa m (1 bit); e == 0 is subnormal m/2,
// else 2^(e-1) * (1 + m/2); doubled that is m, or 2^(e-1) * (2 + m).
int e2m1_doubled(uint8_t code) {
  const int e = (code >> 1) & 3, m = code & 1;
  const int mag = e == 0 ? m : (1 << (e - 1)) * (2 + m);
  return (code & 8) ? -mag : mag;
}

struct Scale {
  bool nan;
  int64_t sig;  // signed significand
  int exp;      // value = sig * 2^exp
};

Scale e4m3(uint8_t byte, bool signed_semantics) {
  const int e = (byte >> 3) & 15, m = byte & 7;
  Scale s{e == 15 && m == 7, 0, 0};
  s.sig = e == 0 ? m : 8 + m;
  s.exp = e == 0 ? -9 : e - 10;
  if (signed_semantics && (byte & 0x80)) s.sig = -s.sig;
  return s;
}

void check_decoders(const nvfp4::Problem& p, const uint8_t* data, size_t size) {
  const bool signed_sem = p.semantics == nvfp4::ScaleSemantics::e4m3;
  for (size_t i = 0; i < size && i < 64; ++i) {
    const uint8_t byte = data[i];
    for (const uint8_t code : {uint8_t(byte & 0xF), uint8_t(byte >> 4)}) {
      if (nvfp4::e2m1_twice(code) != e2m1_doubled(code)) {
        fail(p, "e2m1_twice(" + std::to_string(code) + ") = " + std::to_string(nvfp4::e2m1_twice(code)) +
                    ", expected " + std::to_string(e2m1_doubled(code)));
      }
    }
    const Scale mine = e4m3(byte, signed_sem);
    const nvfp4::ScaleValue theirs = nvfp4::e4m3_decode(byte, p.semantics);
    const bool same = mine.nan == theirs.nan &&
                      (mine.nan || std::ldexp(double(mine.sig), mine.exp) ==
                                       std::ldexp(double(theirs.sign * theirs.sig), theirs.exp));
    if (!same) fail(p, "e4m3_decode(" + std::to_string(byte) + ") disagrees with the bit fields");
  }
}

// ---- Scale layouts ----

// The permuted layout as the physical tensor [l][Rt][Kt][32][4][4] of SPEC.md section 2.
int64_t permuted_index(int64_t rows, int64_t kb, int64_t b, int64_t i, int64_t s) {
  const int64_t rt = (rows + 127) / 128, kt = (kb + 3) / 4;
  return ((((b * rt + i / 128) * kt + s / 4) * 32 + i % 32) * 4 + (i % 128) / 32) * 4 + s % 4;
}

// kb: the operand's scale blocks per row (A's and B's differ when one is NVFP4 and the other MX).
void check_layout(const nvfp4::Problem& p, const std::vector<uint8_t>& linear, int64_t rows, int64_t kb,
                  uint8_t pad, const char* name) {
  const int64_t l = p.l;
  const std::vector<uint8_t> perm = nvfp4::sf_to_permuted(linear.data(), rows, kb, l, pad);
  const int64_t bytes = l * ((rows + 127) / 128) * ((kb + 3) / 4) * 512;
  if (static_cast<int64_t>(perm.size()) != bytes || nvfp4::sf_permuted_bytes(rows, kb, l) != bytes) {
    fail(p, std::string(name) + ": permuted size is not l*Rt*Kt*512 = " + std::to_string(bytes));
  }
  std::vector<bool> covered(static_cast<size_t>(bytes), false);
  for (int64_t b = 0; b < l; ++b) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t s = 0; s < kb; ++s) {
        const int64_t off = permuted_index(rows, kb, b, i, s);
        const int64_t lin = (b * rows + i) * kb + s;
        if (nvfp4::sf_permuted_offset(rows, kb, b, i, s) != off ||
            nvfp4::sf_linear_offset(rows, kb, b, i, s) != lin) {
          fail(p, std::string(name) + ": offset function wrong at b=" + std::to_string(b) +
                      " i=" + std::to_string(i) + " s=" + std::to_string(s));
        }
        if (covered[off]) fail(p, std::string(name) + ": two scales share permuted offset " + std::to_string(off));
        covered[off] = true;
        if (perm[off] != linear[lin]) fail(p, std::string(name) + ": sf_to_permuted misplaced a scale");
      }
    }
  }
  const std::vector<bool> mask = nvfp4::sf_permuted_padding_mask(rows, kb, l);
  if (static_cast<int64_t>(mask.size()) != bytes) fail(p, std::string(name) + ": padding mask has the wrong size");
  for (int64_t off = 0; off < bytes; ++off) {
    if (mask[off] == covered[off]) fail(p, std::string(name) + ": padding mask wrong at " + std::to_string(off));
    if (!covered[off] && perm[off] != pad) fail(p, std::string(name) + ": padding cell not filled with the pad byte");
  }
  if (nvfp4::sf_to_linear(perm.data(), rows, kb, l) != linear) {
    fail(p, std::string(name) + ": permuted -> linear does not give the linear scales back");
  }
}

// ---- Rounding to FP16 by search: the binary16 patterns 0..0x7C00 are ordered by value ----

int width(u128 v) {
  const uint64_t hi = static_cast<uint64_t>(v >> 64), lo = static_cast<uint64_t>(v);
  return hi ? 128 - __builtin_clzll(hi) : lo ? 64 - __builtin_clzll(lo) : 0;
}

// Sign of x1*2^e1 - x2*2^e2, exactly.
int compare(u128 x1, int e1, u128 x2, int e2) {
  if (x1 == 0 || x2 == 0) return (x1 != 0) - (x2 != 0);
  const int top1 = width(x1) + e1, top2 = width(x2) + e2;
  if (top1 != top2) return top1 < top2 ? -1 : 1;
  // Same top bit: shifting the one with the larger exponent down to the other's fits in 128 bits.
  if (e1 > e2) x1 <<= (e1 - e2);
  else x2 <<= (e2 - e1);
  return (x1 > x2) - (x1 < x2);
}

// Positive finite binary16 h (and 0x7C00 read as 2^16) as sig * 2^exp.
void fp16_value(uint16_t h, u128* sig, int* exp) {
  const int e = h >> 10, f = h & 0x3FF;
  *sig = e == 0 ? f : (f | 0x400);
  *exp = e == 0 ? -24 : e - 25;
}

uint16_t round_by_search(bool negative, u128 mag, int exp) {
  if (mag == 0) return 0;  // an exact zero is +0
  int lo = 0, hi = 0x7C00;  // invariant: value(lo) <= x, and x < value(hi + 1) or hi == 0x7C00
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    u128 s;
    int e;
    fp16_value(static_cast<uint16_t>(mid), &s, &e);
    if (compare(s, e, mag, exp) <= 0) lo = mid;
    else hi = mid - 1;
  }
  int h = lo;
  if (h < 0x7C00) {
    u128 s1, s2;
    int e1, e2;
    fp16_value(static_cast<uint16_t>(h), &s1, &e1);
    fp16_value(static_cast<uint16_t>(h + 1), &s2, &e2);
    const u128 twice_mid = s1 + (s2 << (e2 - e1));  // midpoint = twice_mid * 2^(e1-1)
    const int c = compare(mag, exp, twice_mid, e1 - 1);
    if (c > 0 || (c == 0 && (h & 1))) ++h;  // ties to even
  }
  return static_cast<uint16_t>((negative ? 0x8000 : 0) | h);  // h == 0x7C00 is Inf
}

// ---- The oracle on the exact output ----

// The oracle accepts the exact output under every policy that can judge it, and rejects it
// under `exact` with the last bit of one element flipped (unless that element must be NaN).
void check_oracle(const nvfp4::Problem& p, const nvfp4::ExactResult& ref) {
  for (const char* policy : {"fp32", "exact", "fp16-accum"}) {
    const nvfp4::OracleSummary s = nvfp4::judge(p, ref, ref.c.data(), nvfp4::Policy::parse(policy));
    if (s.any_failure()) fail(p, std::string("the oracle (") + policy + ") rejects the exact output");
  }
  std::vector<uint16_t> flipped = ref.c;
  const size_t victim = static_cast<size_t>(p.c_elems() / 2);
  flipped[victim] ^= 1;
  const nvfp4::OracleSummary s = nvfp4::judge(p, ref, flipped.data(), nvfp4::Policy::parse("exact"));
  // NaN however its payload reads; an MX element's Inf does not stay Inf with its last bit flipped.
  const bool must_fail = !nvfp4::is_nan_out(p.out_type, ref.c[victim]);
  if (s.any_failure() != must_fail) {
    fail(p, std::string("the exact policy ") + (must_fail ? "accepts" : "rejects") +
                " a flipped bit at element " + std::to_string(victim));
  }
}

// ---- Brute-force exact GEMM ----

void check_exact_gemm(const nvfp4::Problem& p) {
  const nvfp4::ExactResult ref = nvfp4::exact_gemm(p);
  if (static_cast<int64_t>(ref.elems.size()) != p.c_elems() || static_cast<int64_t>(ref.c.size()) != p.c_elems()) {
    fail(p, "exact_gemm returned the wrong number of elements");
  }
  const bool signed_sem = p.semantics == nvfp4::ScaleSemantics::e4m3;
  const int64_t kb = p.kb();
  int alpha_exp = 0;
  const double alpha_frac = std::frexp(static_cast<double>(p.alpha), &alpha_exp);
  const int64_t alpha_sig = static_cast<int64_t>(std::ldexp(alpha_frac, 24));  // exact: FP32 has 24 bits
  alpha_exp -= 24;
  for (int64_t b = 0; b < p.l; ++b) {
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        i128 sum = 0;
        u128 abs_sum = 0;
        int64_t nonzero = 0;
        int min_tz = 128;
        bool nan = false;
        for (int64_t x = 0; x < p.k; ++x) {
          const Scale sa = e4m3(p.sfa[(b * p.m + i) * kb + x / 16], signed_sem);
          const Scale sb = e4m3(p.sfb[(b * p.n + j) * kb + x / 16], signed_sem);
          if (sa.nan || sb.nan) {
            nan = true;  // the element must be NaN; its NaN blocks add nothing to r, S, t, g
            continue;
          }
          const uint8_t abyte = p.a[(b * p.m + i) * (p.k / 2) + x / 2];
          const uint8_t bbyte = p.b[(b * p.n + j) * (p.k / 2) + x / 2];
          const int av = e2m1_doubled((x & 1) ? abyte >> 4 : abyte & 0xF);
          const int bv = e2m1_doubled((x & 1) ? bbyte >> 4 : bbyte & 0xF);
          // (av/2)(bv/2) sa sb in units of 2^-20: the exponent below is >= -9-9-2+20 = 0.
          const i128 units = i128(av * bv) * sa.sig * sb.sig * (i128(1) << (sa.exp + sb.exp + 18));
          if (units == 0) continue;
          const u128 mag = units < 0 ? u128(-units) : u128(units);
          sum += units;
          abs_sum += mag;
          ++nonzero;
          int tz = 0;
          while (!((mag >> tz) & 1)) ++tz;
          if (tz < min_tz) min_tz = tz;
        }
        const int64_t idx = (b * p.m + i) * p.n + j;
        const nvfp4::ExactElement& e = ref.elems[idx];
        const std::string at = " at b=" + std::to_string(b) + " i=" + std::to_string(i) + " j=" + std::to_string(j);
        if (e.nan != nan) fail(p, "NaN flag wrong" + at);
        if (e.sum != sum) fail(p, "exact sum wrong" + at);
        if (e.abs_sum != abs_sum) fail(p, "sum of |products| wrong" + at);
        if (e.nonzero != nonzero) fail(p, "count of nonzero products wrong" + at);
        if (e.min_tz != min_tz) fail(p, "power of two dividing the products wrong" + at);
        uint16_t expected;
        if (nan) {
          expected = 0x7E00;
        } else {
          const u128 sum_mag = sum < 0 ? u128(-sum) : u128(sum);
          const u128 alpha_mag = static_cast<u128>(alpha_sig < 0 ? -alpha_sig : alpha_sig);
          expected = round_by_search((sum < 0) != (alpha_sig < 0), sum_mag * alpha_mag, alpha_exp - 20);
        }
        if (ref.c[idx] != expected) {
          char buf[96];
          std::snprintf(buf, sizeof buf, "RN16 output 0x%04x, brute force 0x%04x", ref.c[idx], expected);
          fail(p, buf + at);
        }
        if (nvfp4::round_result(e, p.alpha) != expected) fail(p, "round_result disagrees with exact_gemm's c" + at);
      }
    }
  }

  check_oracle(p, ref);
}

// ---- MX operands: decoders against IEEE bit patterns, the exact GEMM by per-digit sums ----

// E8M0 byte e is 2^(e - 127): the binary64 whose exponent field is e + 896 and fraction zero
// (0x00's 2^-127 is a normal double).
double e8m0_by_bits(uint8_t byte) {
  const uint64_t bits = static_cast<uint64_t>(byte + 896) << 52;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// E5M2 is the upper byte of IEEE binary16: byte b is the binary16 b << 8, decoded from its fields.
double e5m2_by_binary16(uint8_t byte) {
  const int h = byte << 8, e = (h >> 10) & 31, f = h & 0x3FF;
  const double mag = e == 31 ? (f ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL)
                     : e == 0 ? std::ldexp(f, -24)
                              : std::ldexp(1024 + f, e - 25);
  return (byte & 0x80) ? -mag : mag;
}

// E4M3FN element: the (unsigned) scale byte's fields of e4m3() above under the sign bit.
double e4m3_element_by_fields(uint8_t byte) {
  const Scale s = e4m3(byte & 0x7F, false);
  const double mag = s.nan ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(double(s.sig), s.exp);
  return (byte & 0x80) ? -mag : mag;
}

double e2m1_by_fields(uint8_t code) {
  return std::copysign(std::abs(e2m1_doubled(code)) / 2.0, (code & 8) ? -1.0 : 1.0);
}

// A decoded MX element as one double (exact: at most 4 significant bits).
double as_double(const nvfp4::ElementValue& v) {
  if (v.nan) return std::numeric_limits<double>::quiet_NaN();
  const double mag = v.inf ? HUGE_VAL : std::ldexp(double(v.sig), v.exp);
  return v.negative ? -mag : mag;
}

// Same value, NaN-ness and sign (zeros keep theirs; -0 is a distinct code in every format).
bool same_double(double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return x == y && std::signbit(x) == std::signbit(y);
}

void check_mx_decoders(const nvfp4::Problem& p, const uint8_t* data, size_t size) {
  for (size_t i = 0; i < size && i < 64; ++i) {
    const uint8_t byte = data[i];
    char at[8];
    std::snprintf(at, sizeof at, "(0x%02X)", byte);
    const nvfp4::E8m0Value s = nvfp4::e8m0_decode(byte);
    if (s.nan != (byte == 0xFF) || (!s.nan && std::ldexp(1.0, s.exp) != e8m0_by_bits(byte)))
      fail(p, std::string("e8m0_decode") + at + " disagrees with the binary64 exponent field");
    if (!same_double(as_double(nvfp4::e4m3_element(byte)), e4m3_element_by_fields(byte)) ||
        nvfp4::e4m3_element(byte).inf)
      fail(p, std::string("e4m3_element") + at + " disagrees with the bit fields");
    if (!same_double(as_double(nvfp4::e5m2_element(byte)), e5m2_by_binary16(byte)))
      fail(p, std::string("e5m2_element") + at + " disagrees with binary16");
    for (const uint8_t code : {uint8_t(byte & 0xF), uint8_t(byte >> 4)})
      if (!same_double(as_double(nvfp4::e2m1_element(code)), e2m1_by_fields(code)))
        fail(p, "e2m1_element(" + std::to_string(code) + ") disagrees with the bit fields");
  }
}

// An exact sum of terms sig * 2^exp: one int64 counter per binary digit, each term added to the
// counter of its exponent, carries propagated only when the sum is read. Nothing rounds, and
// nothing is shared with the reference's Kulisch accumulator. Terms stay below 2^40 in magnitude
// (2^16 times alpha's 24 bits) and an output element has at most 2^16 of them (the products cap,
// which a case file's k meets too), so a counter stays below 2^56.
class DigitSum {
 public:
  bool add(int64_t sig, int exp) {
    if (sig == 0) return true;
    const int at = exp - kLow;
    if (at < 0 || at >= kDigits) return false;
    digit_[static_cast<size_t>(at)] += sig;
    lo_ = std::min(lo_, at);
    hi_ = std::max(hi_, at);
    return true;
  }
  void clear() {
    if (hi_ >= lo_) std::fill(digit_.begin() + lo_, digit_.begin() + hi_ + 1, 0);
    lo_ = kDigits, hi_ = -1;
  }
  // The exponent of bits()[0].
  int low() const { return hi_ < lo_ ? 0 : lo_ + kLow; }
  // The sum in two's complement: bit x at 2^(low() + x); every bit above the last equals the last.
  std::vector<uint8_t> bits() const {
    if (hi_ < lo_) return {0};
    std::vector<uint8_t> out;
    int64_t carry = 0;
    for (int at = lo_;; ++at) {
      const int64_t v = (at <= hi_ ? digit_[static_cast<size_t>(at)] : 0) + carry;
      out.push_back(static_cast<uint8_t>(v & 1));
      carry = v >> 1;  // floor(v / 2), also for negative v
      if (at >= hi_ && (carry == 0 || carry == -1)) {
        out.push_back(static_cast<uint8_t>(carry & 1));
        return out;
      }
    }
  }

 private:
  // Exponents of MX products with alpha span about 2^-460 .. 2^390.
  static constexpr int kLow = -704, kDigits = 1408;
  std::vector<int64_t> digit_ = std::vector<int64_t>(kDigits, 0);
  int lo_ = kDigits, hi_ = -1;
};

// Whether two's complement `bits` (bit x at 2^(low + x)) is the Kulisch accumulator's value,
// limb for limb: the accumulator is documented as two's complement with LSB 2^kLsbExp.
bool same_as_kulisch(const std::vector<uint8_t>& bits, int low, const nvfp4::Kulisch& k) {
  constexpr int kBits = 64 * nvfp4::Kulisch::kLimbs;
  const int first = low - nvfp4::Kulisch::kLsbExp;
  if (first < 0) return false;  // below the accumulator's last bit
  uint64_t mine[nvfp4::Kulisch::kLimbs] = {};
  const int top = first + static_cast<int>(bits.size());  // sign extension from here on
  if (top > kBits) return false;
  for (size_t x = 0; x < bits.size(); ++x) {
    const int pos = first + static_cast<int>(x);
    if (bits[x]) mine[pos / 64] |= uint64_t(1) << (pos % 64);
  }
  if (bits.back())
    for (int pos = top; pos < kBits; ++pos) mine[pos / 64] |= uint64_t(1) << (pos % 64);
  return std::memcmp(mine, k.limb, sizeof mine) == 0;
}

// RN16 of a two's complement number (bit x at 2^(low + x)): the last place q of the result is
// 2^(top - 10) for a normal, 2^-24 below 2^-14; the bits below q round to nearest, ties to even.
uint16_t round_bits_to_fp16(std::vector<uint8_t> bits, int low) {
  const bool negative = bits.back() != 0;
  if (negative) {  // magnitude: invert and add one, over one more bit so that -2^t fits
    bits.push_back(1);
    for (uint8_t& b : bits) b ^= 1;
    for (uint8_t& b : bits) {
      b ^= 1;
      if (b) break;
    }
  }
  int t = static_cast<int>(bits.size()) - 1;
  while (t >= 0 && !bits[static_cast<size_t>(t)]) --t;
  if (t < 0) return 0;  // an exact zero is +0
  const uint16_t sign = negative ? 0x8000 : 0;
  const int top = low + t;  // |x| in [2^top, 2^(top+1))
  if (top > 15) return sign | 0x7C00;
  const int q = std::max(top - 10, -24);
  const auto bit = [&](int e) { return e >= low && e <= low + t ? bits[static_cast<size_t>(e - low)] != 0 : false; };
  int64_t n = 0;
  for (int e = top; e >= q; --e) n = n * 2 + bit(e);
  const bool half = bit(q - 1);
  bool sticky = false;
  for (int e = q - 2; e >= low && !sticky; --e) sticky = bit(e);
  if (half && (sticky || (n & 1))) ++n;
  // A normal's exponent field is q + 25; n == 2^11 (or 2^10 from a subnormal) carries into it.
  const int64_t h = n >= 1024 ? ((q + 25) << 10) + (n - 1024) : n;
  return static_cast<uint16_t>(sign | std::min<int64_t>(h, 0x7C00));
}

// One element or scale as (-1)^negative * sig * 2^exp with sig odd or zero, or Inf / NaN.
struct Term {
  bool nan = false, inf = false, negative = false;
  int64_t sig = 0;
  int exp = 0;
};

Term term(bool negative, int64_t sig, int exp) {
  Term t;
  t.negative = negative;
  while (sig != 0 && sig % 2 == 0) sig /= 2, ++exp;
  t.sig = sig, t.exp = sig == 0 ? 0 : exp;
  return t;
}

// Element x of row `row` (counted over batches) of an operand, from the formulas above.
Term mx_element(nvfp4::BlockFormat f, const std::vector<uint8_t>& data, int64_t k, int64_t row, int64_t x) {
  if (nvfp4::packs_nibbles(f)) {
    const uint8_t byte = data[static_cast<size_t>(row * (k / 2) + x / 2)];
    const uint8_t code = (x & 1) ? byte >> 4 : byte & 0xF;
    return term((code & 8) != 0, std::abs(e2m1_doubled(code)), -1);
  }
  const uint8_t byte = data[static_cast<size_t>(row * k + x)];
  if (f == nvfp4::BlockFormat::mxfp8_e4m3) {
    const Scale s = e4m3(byte & 0x7F, false);
    Term t = term((byte & 0x80) != 0, s.sig, s.exp);
    t.nan = s.nan;
    return t;
  }
  const int h = byte << 8, e = (h >> 10) & 31, frac = h & 0x3FF;  // E5M2 as binary16
  Term t = term((byte & 0x80) != 0, e == 0 ? frac : 1024 + frac, e == 0 ? -24 : e - 25);
  t.nan = e == 31 && frac != 0;
  t.inf = e == 31 && frac == 0;
  return t;
}

// The scale of element x: E8M0 2^(byte - 127) or NaN, or an NVFP4 operand's E4M3 (semantics).
Term mx_scale(nvfp4::BlockFormat f, const std::vector<uint8_t>& scales, int64_t kb, int64_t row, int64_t x,
              bool signed_sem) {
  const uint8_t byte = scales[static_cast<size_t>(row * kb + x / nvfp4::block_size(f))];
  if (f != nvfp4::BlockFormat::nvfp4) {
    Term t = term(false, 1, byte - 127);
    t.nan = byte == 0xFF;
    return t;
  }
  const Scale s = e4m3(byte, signed_sem);
  Term t = term(s.sig < 0, std::abs(s.sig), s.exp);
  t.nan = s.nan;
  return t;
}

// exact_gemm of a problem with an MX operand against a brute force over every product: NaN from
// any NaN scale of either row (SPEC rule 1: every block of a row is used), a NaN element, Inf
// times zero or Infs of both signs; r and S (the finite products of blocks with no NaN scale,
// before alpha) bit for bit against the Kulisch accumulators; t and g; the RN16 word.
void check_exact_mx(const nvfp4::Problem& p) {
  const nvfp4::ExactResult ref = nvfp4::exact_gemm(p);
  if (!ref.mx || static_cast<int64_t>(ref.mx->size()) != p.c_elems() ||
      static_cast<int64_t>(ref.c.size()) != p.c_elems() || static_cast<int64_t>(ref.elems.size()) != p.c_elems())
    fail(p, "exact_gemm of an MX problem returned no MX facts, or the wrong number of elements");
  const bool signed_sem = p.semantics == nvfp4::ScaleSemantics::e4m3;
  const int64_t kb_a = p.kb(), kb_b = p.kb_b();
  int alpha_exp = 0;
  const double alpha_frac = std::frexp(static_cast<double>(p.alpha), &alpha_exp);
  const int64_t alpha_sig = static_cast<int64_t>(std::ldexp(alpha_frac, 24));  // exact: FP32 has 24 bits
  alpha_exp -= 24;
  DigitSum r, s, scaled;  // r, S, and alpha * r
  for (int64_t b = 0; b < p.l; ++b) {
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        const int64_t row_a = b * p.m + i, row_b = b * p.n + j;
        const int64_t idx = (b * p.m + i) * p.n + j;
        const std::string at = " at b=" + std::to_string(b) + " i=" + std::to_string(i) + " j=" + std::to_string(j);
        bool nan = false, pos_inf = false, neg_inf = false;
        for (int64_t x = 0; x < p.k; ++x)  // every block of either row, used or not
          nan |= mx_scale(p.a_format, p.sfa, kb_a, row_a, x, signed_sem).nan ||
                 mx_scale(p.b_format, p.sfb, kb_b, row_b, x, signed_sem).nan;
        r.clear(), s.clear(), scaled.clear();
        int64_t nonzero = 0;
        int g_exp = nvfp4::MxElement::kNoProducts;
        for (int64_t x = 0; x < p.k; ++x) {
          const Term ea = mx_element(p.a_format, p.a, p.k, row_a, x), eb = mx_element(p.b_format, p.b, p.k, row_b, x);
          const Term sa = mx_scale(p.a_format, p.sfa, kb_a, row_a, x, signed_sem);
          const Term sb = mx_scale(p.b_format, p.sfb, kb_b, row_b, x, signed_sem);
          if (sa.nan || sb.nan) continue;  // NaN already; such a block adds nothing to r, S, t, g
          const bool negative = ((ea.negative != eb.negative) != sa.negative) != sb.negative;
          if (ea.nan || eb.nan) {
            nan = true;
            continue;
          }
          if (ea.inf || eb.inf) {  // IEEE: Inf times any zero factor is NaN
            const bool zero = (!ea.inf && ea.sig == 0) || (!eb.inf && eb.sig == 0) || sa.sig == 0 || sb.sig == 0;
            if (zero) nan = true;
            else (negative ? neg_inf : pos_inf) = true;
            continue;
          }
          const int64_t mag = ea.sig * eb.sig * sa.sig * sb.sig;  // below 2^16
          if (mag == 0) continue;
          const int exp = ea.exp + eb.exp + sa.exp + sb.exp;
          if (!r.add(negative ? -mag : mag, exp) || !s.add(mag, exp) ||
              !scaled.add(negative ? -mag * alpha_sig : mag * alpha_sig, exp + alpha_exp))
            fail(p, "a product lies outside the brute force's digits" + at);
          ++nonzero;
          g_exp = std::min(g_exp, exp);  // mag is odd: a product of odd significands
        }
        nan |= pos_inf && neg_inf;
        const nvfp4::MxElement& e = (*ref.mx)[static_cast<size_t>(idx)];
        if (e.nan != nan || ref.elems[static_cast<size_t>(idx)].nan != nan) fail(p, "MX NaN flag wrong" + at);
        if (!nan && (e.pos_inf != pos_inf || e.neg_inf != neg_inf)) fail(p, "MX Inf flags wrong" + at);
        if (!same_as_kulisch(r.bits(), r.low(), e.sum)) fail(p, "MX exact sum r wrong" + at);
        if (!same_as_kulisch(s.bits(), s.low(), e.abs_sum)) fail(p, "MX sum of |products| S wrong" + at);
        if (e.nonzero != nonzero) fail(p, "MX count of nonzero products wrong" + at);
        if (e.g_exp != g_exp) fail(p, "MX power of two dividing the products wrong" + at);
        uint16_t expected;
        if (nan || ((pos_inf || neg_inf) && alpha_sig == 0)) expected = 0x7E00;
        else if (pos_inf || neg_inf) expected = (neg_inf != (alpha_sig < 0)) ? 0xFC00 : 0x7C00;
        else expected = round_bits_to_fp16(scaled.bits(), scaled.low());
        if (ref.c[static_cast<size_t>(idx)] != expected) {
          char buf[96];
          std::snprintf(buf, sizeof buf, "MX RN16 output 0x%04x, brute force 0x%04x", ref.c[static_cast<size_t>(idx)],
                        expected);
          fail(p, buf + at);
        }
      }
    }
  }
  check_oracle(p, ref);
}

// The problems the brute force above covers: GEMV and GEMM with FP16 output, in either layout and
// either scale semantics (the first draw picks), any operand formats, within
// reference_fuzz_shape_limits. Binary input
// is the draws of the suite's one draw (ByteDraws), so this fuzzer meets every data class the
// schedule has; text is a case file, so the kernel fuzzer's seeds and saved cases are inputs too.
std::optional<nvfp4::Problem> reference_problem(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const nvfp4::ShapeLimits limits = nvfp4::reference_fuzz_shape_limits();
  std::optional<nvfp4::Problem> p;
  if (nvfp4::is_case_text(bytes)) {
    p = nvfp4::fuzz_input_problem(bytes, nullptr, limits);
  } else {
    nvfp4::ByteDraws d(data, size);
    nvfp4_kernel_info info{};
    info.abi_version = NVFP4_ABI_VERSION;
    info.ops = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
    info.out_types = 1u << NVFP4_OUT_FP16;
    info.sf_layouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
    info.m_multiple = info.n_multiple = info.k_multiple = 1;
    // Every operand format on either side, so the draw picks MX pairs, mixed ones and NVFP4 with
    // MX included, with the data classes it aims at them (E8M0 extremes, NaN scales, E5M2 Inf).
    info.a_formats = info.b_formats = (1u << NVFP4_FORMAT_NVFP4) | (1u << NVFP4_FORMAT_MXFP4) |
                                      (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);
    if (d.below(2)) info.flags |= NVFP4_FLAG_SIGNED_SCALES;
    p = nvfp4::draw_case(d, info, nvfp4::CaseConstraints{}, limits).problem;
  }
  const bool covered = p && (p->op == nvfp4::Op::gemv || p->op == nvfp4::Op::gemm) &&
                       p->out_type == nvfp4::OutType::fp16 && p->l * p->m * p->n * p->k <= limits.max_products;
  return covered ? p : std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::optional<nvfp4::Problem> problem = reference_problem(data, size);
  if (!problem) return 0;
  const nvfp4::Problem& p = *problem;
  check_decoders(p, data, size);
  if (p.mx_operands()) check_mx_decoders(p, data, size);
  check_layout(p, p.sfa, p.m, p.kb(), p.sfb.empty() ? 0x7F : p.sfb[0], "sfa");
  check_layout(p, p.sfb, p.n, p.kb_b(), p.sfa[0], "sfb");
  if (p.mx_operands()) check_exact_mx(p);
  else check_exact_gemm(p);
  return 0;
}
