// Exact accumulation of block-scaled products (SPEC.md section 1, revision 4) as host/device code:
// the wide fixed-point (Kulisch) accumulator and the per-output facts of exact_mx.h, and the GPU
// reference's algorithm for one output element over decoded rows (mx_dot). The CPU tests run
// mx_dot against exact_mx, so the arithmetic the device runs is the arithmetic tested; exact_mx.cc
// keeps its own decoding and segment sums as the independent side.
#pragma once

#include <cstdint>

#include "reference/fp16.h"  // u128, i128, NVFP4_HD
#include "reference/mx_formats.h"
#include "reference/problem.h"  // BlockFormat (the enum only is used on the device)

// Fully unrolled loops over the limbs on the device (host compilers decide for themselves).
#if defined(__CUDACC__)
#define NVFP4_UNROLL_LIMBS _Pragma("unroll")
#else
#define NVFP4_UNROLL_LIMBS
#endif

namespace nvfp4 {

// Count of trailing / leading zero bits of a nonzero word.
NVFP4_HD inline int ctz64(uint64_t v) {
#if defined(__CUDA_ARCH__)
  return __ffsll(static_cast<long long>(v)) - 1;
#else
  return __builtin_ctzll(v);
#endif
}
NVFP4_HD inline int clz64(uint64_t v) {
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(v));
#else
  return __builtin_clzll(v);
#endif
}
NVFP4_HD inline int ctz_u128(u128 v) {
  const uint64_t lo = static_cast<uint64_t>(v);
  return lo ? ctz64(lo) : 64 + ctz64(static_cast<uint64_t>(v >> 64));
}

// A signed fixed-point number with its least significant bit at 2^kLsbExp, in two's complement
// over kLimbs 64-bit limbs. Covers every sum of MX products: products lie in [2^-286, 2^286)
// (E5M2 and E8M0 at their extremes), and 2^40 of them stay below 2^326 < 2^(kLsbExp + 64*kLimbs - 1).
struct Kulisch {
  static constexpr int kLimbs = 11;
  static constexpr int kLsbExp = -320;
  uint64_t limb[kLimbs] = {};

  // Adds v * 2^exp; exp >= kLsbExp and the result in range (both hold for MX products). Every
  // limb is visited with a compile-time index, so on the device the accumulator stays in
  // registers (a limb picked by a run-time index would live in local memory).
  NVFP4_HD void add(i128 v, int exp) {
    if (v == 0) return;
    bool neg;
    int word;
    uint64_t p0, p1, p2;
    parts(v, exp, &neg, &word, &p0, &p1, &p2);
    uint64_t carry = 0;  // carry (add) or borrow (subtract)
NVFP4_UNROLL_LIMBS
    for (int x = 0; x < kLimbs; ++x) {
      const int d = x - word;
      const uint64_t p = d == 0 ? p0 : d == 1 ? p1 : d == 2 ? p2 : 0;
      const uint64_t old = limb[x];
      if (!neg) {
        const uint64_t s = old + p;
        const uint64_t s2 = s + carry;
        carry = (s < old) + (s2 < s);
        limb[x] = s2;
      } else {
        const uint64_t diff = old - p;
        const uint64_t d2 = diff - carry;
        carry = (old < p) + (diff < carry);
        limb[x] = d2;
      }
    }
  }
#if !defined(__CUDA_ARCH__)
  // The same sum as add(), for the host's exact reference: the three limbs the value covers,
  // then the carry or borrow only as far as it goes (add() visits every limb, as the device
  // needs). Tested against add() limb for limb.
  void add_host(i128 v, int exp) {
    if (v == 0) return;
    bool neg;
    int word;
    uint64_t part[3];
    parts(v, exp, &neg, &word, &part[0], &part[1], &part[2]);
    uint64_t carry = 0;  // 0 or 1
    int x = word;
    for (int d = 0; d < 3 && x < kLimbs; ++d, ++x) {
      const uint64_t old = limb[x], p = part[d];
      if (!neg) {
        const uint64_t s = old + p, s2 = s + carry;
        carry = (s < old) + (s2 < s);
        limb[x] = s2;
      } else {
        const uint64_t diff = old - p, d2 = diff - carry;
        carry = (old < p) + (diff < carry);
        limb[x] = d2;
      }
    }
    for (; carry != 0 && x < kLimbs; ++x) {
      const uint64_t old = limb[x];
      limb[x] = neg ? old - 1 : old + 1;
      carry = neg ? old == 0 : limb[x] == 0;
    }
  }
#endif
  // |v| << (exp - kLsbExp) % 64 over three limbs, p0 going to limb `word`; neg: v < 0.
  NVFP4_HD static void parts(i128 v, int exp, bool* neg, int* word, uint64_t* p0, uint64_t* p1, uint64_t* p2) {
    const int shift = exp - kLsbExp;
    *neg = v < 0;
    const u128 mag = *neg ? static_cast<u128>(0) - static_cast<u128>(v) : static_cast<u128>(v);
    const int bit = shift % 64;
    *word = shift / 64;
    const uint64_t lo = static_cast<uint64_t>(mag), hi = static_cast<uint64_t>(mag >> 64);
    *p0 = lo << bit;
    *p1 = bit ? (hi << bit) | (lo >> (64 - bit)) : hi;
    *p2 = bit ? hi >> (64 - bit) : 0;
  }
  NVFP4_HD bool negative() const { return (limb[kLimbs - 1] >> 63) != 0; }
  NVFP4_HD bool zero() const {
    uint64_t any = 0;
NVFP4_UNROLL_LIMBS
    for (int x = 0; x < kLimbs; ++x) any |= limb[x];
    return any == 0;
  }
  // Host only (exact_mx.cc), for the rounding and the oracle:
  // |value| = mag * 2^exp2 with mag below 2^103 (lower bits folded into a sticky bit, far below
  // what rounding to FP32 looks at); mag = 0 for zero.
  void magnitude(u128* mag, int* exp2) const;
  // The value's exponent range: 2^(top_exp() - 1) <= |value| < 2^top_exp(); kLsbExp for zero.
  int top_exp() const;
  // The value in long double: one rounding (2^-64 relative), for the oracle's rounding regime.
  long double to_long_double() const;
};

// Everything the oracle knows about one output element of a block-scaled product (SPEC section
// 3 and rule 9), exact. Trivially copyable: the GPU reference copies an array of them back.
struct MxElement {
  Kulisch sum;              // r (before alpha), the finite products only
  Kulisch abs_sum;          // S = sum of |product|
  int64_t nonzero = 0;      // t
  int g_exp = kNoProducts;  // g = 2^g_exp divides every nonzero product (kNoProducts: none)
  bool nan = false;         // a used scale or element is NaN, or Inf * 0, or Infs of both signs
  bool pos_inf = false, neg_inf = false;  // some product is +Inf / -Inf (IEEE)
  static constexpr int kNoProducts = 1 << 20;
};

// ---- the device algorithm ---------------------------------------------------------------------
//
// An element decoded for mx_dot: a signed integer in units of 2^mx_element_unit(format), below
// 2^32 in magnitude (E5M2's 57344 is 7 * 2^29 units of 2^-16), or one of three sentinels far
// outside that range for NaN and +-Inf.
constexpr int64_t kMxNan = INT64_MIN, kMxPosInf = INT64_MIN + 1, kMxNegInf = INT64_MIN + 2;
NVFP4_HD inline bool mx_special(int64_t v) { return v <= kMxNegInf; }

// Elements per scale.
NVFP4_HD inline int mx_block(BlockFormat f) { return f == BlockFormat::nvfp4 ? 16 : 32; }
NVFP4_HD inline bool mx_packs_nibbles(BlockFormat f) { return f == BlockFormat::nvfp4 || f == BlockFormat::mxfp4; }

// The smallest exponent of an element's significand: E2M1 2^-1, E4M3 2^-9, E5M2 2^-16.
NVFP4_HD inline int mx_element_unit(BlockFormat f) {
  return f == BlockFormat::mxfp8_e4m3 ? -9 : f == BlockFormat::mxfp8_e5m2 ? -16 : -1;
}

// Element x of a row of format f (row: the row's first byte; E2M1 packed two to a byte).
NVFP4_HD inline int64_t mx_element_int(BlockFormat f, const uint8_t* row, int64_t x) {
  ElementValue e;
  if (mx_packs_nibbles(f)) e = e2m1_element(e2m1_nibble(row, x));
  else if (f == BlockFormat::mxfp8_e4m3) e = e4m3_element(row[x]);
  else e = e5m2_element(row[x]);
  if (e.nan) return kMxNan;
  if (e.inf) return e.negative ? kMxNegInf : kMxPosInf;
  const int64_t mag = static_cast<int64_t>(e.sig) << (e.exp - mx_element_unit(f));
  return e.negative ? -mag : mag;
}

// A scale byte of format f: E8M0 as (sig 1, exp), an NVFP4 operand's E4M3 under `semantics`.
NVFP4_HD inline ScaleValue mx_scale(BlockFormat f, uint8_t byte, ScaleSemantics semantics) {
  if (f == BlockFormat::nvfp4) return e4m3_decode(byte, semantics);
  const E8m0Value v = e8m0_decode(byte);
  return ScaleValue{v.nan, 1, 1, v.exp};
}

// An Inf element times the other factors (IEEE): NaN where a factor is zero or NaN.
NVFP4_HD inline void mx_special_product(MxElement& e, int64_t a, int64_t b, const ScaleValue& sa, const ScaleValue& sb) {
  if (a == kMxNan || b == kMxNan || a == 0 || b == 0 || sa.sig == 0 || sb.sig == 0) {
    e.nan = true;
    return;
  }
  const bool a_neg = a == kMxNegInf || (!mx_special(a) && a < 0);
  const bool b_neg = b == kMxNegInf || (!mx_special(b) && b < 0);
  const bool neg = ((a_neg != b_neg) != (sa.sign < 0)) != (sb.sign < 0);
  if (neg) e.neg_inf = true;
  else e.pos_inf = true;
}

// Elements [0, len) of a segment over which both operands' scales stay sa and sb: the products
// summed exactly as integers in units of 2^unit_ab (the two element units), then scaled once by
// the scales' significands and shifted by their exponents into the accumulators. A NaN scale
// makes the element NaN and its segment adds nothing to r, S, t or g.
NVFP4_HD inline void mx_add_segment(MxElement& e, const int64_t* a, const int64_t* b, int len, int unit_ab,
                                    const ScaleValue& sa, const ScaleValue& sb) {
  if (sa.nan || sb.nan) {
    e.nan = true;
    return;
  }
  i128 sum = 0;
  u128 abs_sum = 0, bits = 0;  // bits: OR of the nonzero |products|, its lowest set bit their smallest
  int nonzero = 0;
  for (int x = 0; x < len; ++x) {
    const int64_t va = a[x], vb = b[x];
    if (mx_special(va) || mx_special(vb)) {
      mx_special_product(e, va, vb, sa, sb);
      continue;
    }
    const i128 p = static_cast<i128>(va) * vb;
    const u128 mag = p < 0 ? static_cast<u128>(0) - static_cast<u128>(p) : static_cast<u128>(p);
    sum += p;
    abs_sum += mag;
    bits |= mag;
    nonzero += mag != 0;
  }
  const int64_t scale_sig = static_cast<int64_t>(sa.sig) * sb.sig;
  if (bits == 0 || scale_sig == 0) return;
  const int unit = unit_ab + sa.exp + sb.exp;
  e.sum.add(sum * (sa.sign * sb.sign < 0 ? -scale_sig : scale_sig), unit);
  e.abs_sum.add(static_cast<i128>(abs_sum) * scale_sig, unit);
  e.nonzero += nonzero;
  const int g = unit + ctz_u128(bits) + ctz64(static_cast<uint64_t>(scale_sig));
  if (g < e.g_exp) e.g_exp = g;
}

// The segments of one output element from element x0 on (x0 a multiple of both blocks): those
// starting before x1 and before k, each the elements of A's and B's block that hold it (blocks
// start at multiples of their size, so the smaller block is the segment). a and b point at
// element x0 of their rows, sa and sb at the scale of the block holding x0.
NVFP4_HD inline void mx_add_segments(MxElement& e, BlockFormat fa, const int64_t* a, const ScaleValue* sa, BlockFormat fb,
                                     const int64_t* b, const ScaleValue* sb, int64_t x0, int64_t x1, int64_t k) {
  const int ba = mx_block(fa), bb = mx_block(fb);
  const int seg = ba < bb ? ba : bb;
  const int unit_ab = mx_element_unit(fa) + mx_element_unit(fb);
  const int64_t end = x1 < k ? x1 : k;
  for (int64_t x = x0; x < end; x += seg) {
    const int len = static_cast<int>(end - x < seg ? end - x : seg);
    mx_add_segment(e, a + (x - x0), b + (x - x0), len, unit_ab, sa[(x - x0) / ba], sb[(x - x0) / bb]);
  }
}

// The GPU reference's tiles hold a chunk of kMxChunk elements of each row at a time: a multiple
// of both block sizes, so a chunk starts a block of each operand and holds at most
// kMxChunkScales scales of a row. What a tile holds of row `data` (its first byte) and `scales`
// (its kb scales) for the chunk at c0:
constexpr int kMxChunk = 32;
constexpr int kMxChunkScales = kMxChunk / 16;
// entry x: element c0 + x, 0 past k (a zero adds nothing and meets no Inf: past k both are zero);
NVFP4_HD inline int64_t mx_chunk_element(BlockFormat f, const uint8_t* data, int64_t c0, int x, int64_t k) {
  return c0 + x < k ? mx_element_int(f, data, c0 + x) : 0;
}
// scale s: the block starting at c0 + s * block, a placeholder 1 where no block of the row starts
// there (mx_add_segments never reads it).
NVFP4_HD inline ScaleValue mx_chunk_scale(BlockFormat f, const uint8_t* scales, int64_t kb, int64_t c0, int s,
                                          ScaleSemantics semantics) {
  const int block = mx_block(f);
  const int64_t blk = c0 / block + s;
  return s * block < kMxChunk && blk < kb ? mx_scale(f, scales[blk], semantics) : ScaleValue{false, 1, 1, 0};
}

// The element's last step: Infs of both signs are NaN (IEEE).
NVFP4_HD inline void mx_finish(MxElement& e) {
  if (e.pos_inf && e.neg_inf) e.nan = true;
}

// One output element from whole decoded rows: a and b hold k elements (mx_element_int), sa and
// sb the rows' scales (mx_scale).
NVFP4_HD inline MxElement mx_dot(BlockFormat fa, const int64_t* a, const ScaleValue* sa, BlockFormat fb, const int64_t* b,
                                 const ScaleValue* sb, int64_t k) {
  MxElement e;
  mx_add_segments(e, fa, a, sa, fb, b, sb, 0, k, k);
  mx_finish(e);
  return e;
}

}  // namespace nvfp4
