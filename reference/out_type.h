// The three output types of SPEC.md section 1 (fp16, bf16, fp32): their encodings, the one
// rounding of an exact value to each, exact decoding, and the ulp the oracle uses. Header-only
// and usable from CUDA device code, like fp16.h.
//
// Representation of outputs across the suite: one uint32_t WORD per output element, the
// output type's bits in the low 16 (fp16, bf16) or all 32 (fp32) bits. Memory and files hold
// little-endian words of out_word_bytes() bytes in C order (SPEC section 1). FP16 keeps its
// own fast fp16_round (fp16.h), which out_round reproduces bit for bit (tested).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reference/fp16.h"  // u128, i128, bit_width_u128, fp16_round

namespace nvfp4 {

// Values of NVFP4_OUT_*. nvfp4 is the block-scaled output of SPEC section 2 (codes and scales,
// C not written): its words, where the suite holds any, are the FP32 values it quantizes.
enum class OutType : uint32_t { fp16 = 1, bf16 = 2, fp32 = 3, nvfp4 = 4 };

// An IEEE-style binary format with `precision` significand bits (the implicit one included),
// normal exponents emin..emax, subnormals, Inf and NaN.
struct OutFormat {
  int precision;
  int emin, emax;
  uint32_t sign_bit, inf, quiet_nan, max_finite;
  int bytes;
};

NVFP4_HD constexpr OutFormat out_format(OutType t) {
  switch (t) {
    case OutType::bf16: return OutFormat{8, -126, 127, 0x8000u, 0x7F80u, 0x7FC0u, 0x7F7Fu, 2};
    case OutType::fp32:
    case OutType::nvfp4: return OutFormat{24, -126, 127, 0x80000000u, 0x7F800000u, 0x7FC00000u, 0x7F7FFFFFu, 4};
    case OutType::fp16: break;
  }
  return OutFormat{11, -14, 15, 0x8000u, 0x7C00u, 0x7E00u, 0x7BFFu, 2};
}

NVFP4_HD inline int out_word_bytes(OutType t) { return out_format(t).bytes; }

// The word nearest to (-1)^negative * mag * 2^exp2, ties to even, subnormals kept, overflow to
// Inf at (2 - 2^-precision) * 2^emax. A zero magnitude gives +0.
// A magnitude below 2^64 (nearly every sum) is rounded in 64-bit arithmetic, the same steps
// (round_to_unit, fp16.h).
NVFP4_HD inline uint32_t out_round(OutType t, bool negative, u128 mag, int exp2) {
  if (mag == 0) return 0;
  const OutFormat f = out_format(t);
  const uint32_t sign = negative ? f.sign_bit : 0u;
  const int frac_bits = f.precision - 1;
  const bool narrow = static_cast<uint64_t>(mag >> 64) == 0;
  const int width = narrow ? bit_width_u64(static_cast<uint64_t>(mag)) : bit_width_u128(mag);
  const int top = width - 1 + exp2;  // value in [2^top, 2^(top+1))
  if (top > f.emax) return sign | f.inf;
  const int unit = (top < f.emin ? f.emin : top) - frac_bits;  // the result's last place
  const int shift = unit - exp2;
  // q < 2^precision + 1 whichever way it is rounded.
  const uint64_t q = narrow ? round_to_unit<uint64_t, 64>(static_cast<uint64_t>(mag), shift)
                            : static_cast<uint64_t>(round_to_unit<u128, 128>(mag, shift));
  // Subnormals (top < emin) are q itself; a normal of exponent top is ((top - emin) << frac) + q,
  // which also encodes a carry of q to 2^precision as the next binade, and 2^(emax+1) as Inf.
  const int binade = top < f.emin ? 0 : top - f.emin;
  const uint32_t bits = (static_cast<uint32_t>(binade) << frac_bits) + static_cast<uint32_t>(q);
  return sign | (bits >= f.inf ? f.inf : bits);
}

// RN_out(alpha * sum * 2^-20) for an exact integer sum (every exact reference sum; see
// scaled_round.h, whose FP16 form this generalizes). An exact zero is +0 whatever alpha's sign.
NVFP4_HD inline uint32_t round_scaled_sum_out(OutType t, i128 sum, float alpha) {
  uint32_t bits;
  memcpy(&bits, &alpha, sizeof bits);
  const bool alpha_negative = (bits >> 31) != 0;
  const int field = static_cast<int>((bits >> 23) & 0xFF);
  const uint32_t frac = bits & 0x7FFFFFu;
  const OutFormat f = out_format(t);
  if (field == 0xFF) {  // not reachable through a valid Problem; IEEE's answer anyway
    if (frac != 0 || sum == 0) return f.quiet_nan;
    return ((sum < 0) != alpha_negative ? f.sign_bit : 0u) | f.inf;
  }
  const uint64_t alpha_sig = field == 0 ? frac : (frac | 0x800000u);
  int exp2 = (field == 0 ? 1 : field) - 150 - 20;
  u128 mag = sum < 0 ? static_cast<u128>(-sum) : static_cast<u128>(sum);
  // Keep the product in 128 bits: low bits fold into a sticky bit, far below the 24 + 2 bits
  // that rounding to FP32 looks at.
  while (bit_width_u128(mag) > 103) {
    mag = (mag >> 1) | (mag & 1);
    ++exp2;
  }
  return out_round(t, (sum < 0) != alpha_negative, mag * alpha_sig, exp2);
}

// Exact decoding: (-1)^negative * sig * 2^exp, or Inf / NaN.
struct OutParts {
  bool negative, inf, nan;
  uint32_t sig;
  int exp;
};

NVFP4_HD inline OutParts out_parts(OutType t, uint32_t word) {
  const OutFormat f = out_format(t);
  const int frac_bits = f.precision - 1;
  const uint32_t mag = word & (f.sign_bit - 1u);
  const uint32_t frac = mag & ((1u << frac_bits) - 1u);
  const int field = static_cast<int>(mag >> frac_bits);
  OutParts p{};
  p.negative = (word & f.sign_bit) != 0;
  p.inf = mag == f.inf;
  p.nan = mag > f.inf;
  p.sig = field == 0 ? frac : (frac | (1u << frac_bits));
  p.exp = (field == 0 ? 1 : field) + f.emin - 1 - frac_bits;
  return p;
}

NVFP4_HD inline bool is_nan_out(OutType t, uint32_t word) {
  const OutFormat f = out_format(t);
  return (word & (f.sign_bit - 1u)) > f.inf;
}
NVFP4_HD inline bool is_inf_out(OutType t, uint32_t word) {
  const OutFormat f = out_format(t);
  return (word & (f.sign_bit - 1u)) == f.inf;
}
NVFP4_HD inline bool is_zero_out(OutType t, uint32_t word) {
  return (word & (out_format(t).sign_bit - 1u)) == 0;
}
// The same result: equal bits, or both NaN (SPEC rule 1: any payload and sign).
NVFP4_HD inline bool same_result_out(OutType t, uint32_t x, uint32_t y) {
  return x == y || (is_nan_out(t, x) && is_nan_out(t, y));
}

// The value of a word as a double: exact for all three types. Host only.
inline double decode_out(OutType t, uint32_t word) {
  const OutParts q = out_parts(t, word);
  if (q.nan) return std::numeric_limits<double>::quiet_NaN();
  const double mag = q.inf ? std::numeric_limits<double>::infinity() : std::ldexp(static_cast<double>(q.sig), q.exp);
  return q.negative ? -mag : mag;
}

// The ulp of the type at magnitude v >= 0 (SPEC's ulp_out): 2^(emin - precision + 1) below the
// smallest normal (2^-24 fp16, 2^-133 bf16, 2^-149 fp32), else 2^(floor(log2 v) - precision + 1),
// continued beyond the largest binade so that it stays monotone. Host only.
inline double ulp_out(OutType t, double v) {
  const OutFormat f = out_format(t);
  if (!(v >= std::ldexp(1.0, f.emin))) return std::ldexp(1.0, f.emin - f.precision + 1);
  if (std::isinf(v)) return std::ldexp(1.0, f.emax + 1 - f.precision + 1);
  return std::ldexp(1.0, std::ilogb(v) - f.precision + 1);
}

// The magnitude from which values round to Inf: (2 - 2^-precision) * 2^emax (65520 for fp16).
inline double overflow_threshold(OutType t) {
  const OutFormat f = out_format(t);
  return std::ldexp(2.0 - std::ldexp(1.0, -f.precision), f.emax);
}

// Words in value order (+0 and -0 both 0), for distances in ulps.
NVFP4_HD inline int64_t out_ordered(OutType t, uint32_t word) {
  const OutFormat f = out_format(t);
  const int64_t mag = word & (f.sign_bit - 1u);
  return (word & f.sign_bit) ? -mag : mag;
}

}  // namespace nvfp4

namespace nvfp4 {

// Words <-> little-endian bytes of the type, C order (SPEC section 1). bytes_to_words throws
// std::invalid_argument when the length is not a multiple of the word size.
std::vector<uint8_t> words_to_bytes(OutType t, const std::vector<uint32_t>& words);
std::vector<uint32_t> bytes_to_words(OutType t, const uint8_t* bytes, size_t size);
// FP16 words as a kernel writes them (uint16_t) widened to words, and back (fp16 and bf16).
std::vector<uint32_t> widen_words(const uint16_t* c, size_t count);
std::vector<uint16_t> narrow_words(const std::vector<uint32_t>& words);

// "1.5 (0x3e00)": the shortest decimal that reads back to the same double, and the bits
// (4 hex digits for fp16/bf16, 8 for fp32).
std::string word_text(OutType t, uint32_t word);
// The word as a case file's expect line holds it: "3e00", "3fc00000".
std::string word_hex(OutType t, uint32_t word);

}  // namespace nvfp4
