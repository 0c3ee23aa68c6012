// The built-in quantizers' arithmetic (SPEC.md section 2), written once for host and device as
// production kernels write it: FP32 operations, conversions to E4M3, E2M1, E5M2 and E8M0 as the
// PTX cvt instructions define them (round to nearest even, satfinite), NaN-suppressing block
// maxima. Kernels never include reference/: this is the kernels' own copy, and the suite checks
// it against the reference. A Bug value lets the mutation plugin build each known quantizer bug
// from the same code (Bug::none is the honest kernel).
#pragma once

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/block_scaled_decode.h"
#include "kernels/nvfp4_kernel_abi.h"

#if defined(__CUDACC__)
#define NVFP4_QHD __host__ __device__
#else
#define NVFP4_QHD
#endif

namespace nvfp4::kern::quant {

// The bugs of public quantizers the mutants reproduce (shared/evidence/field-study-2026-12.md).
enum class Bug : int {
  none,
  subnormal_scale_decode,  // E4M3 subnormal scales decoded with the normal formula (2^(e-7)*(1+m/8))
  zero_codes,              // codes all zero (a kernel whose conversion was compiled out)
  no_global_scale,         // the global scale ignored: blocks with amax > 2688 clip
  other_association,       // gs * (amax * c6) where te has amax * (gs * c6)
  scale_toward_zero,       // the E4M3 scale rounded toward zero
  os_from_unrounded,       // the encode factor from the scale before its E4M3 rounding
  decode_as_encode,        // the global scale used as a decode scale (multiplied where divided)
  padding_not_written,     // the permuted SFQ's padding cells left as they were
  linear_scales_declared_permuted,  // writes linear SFQ whatever the layout asked for
  tile_amax_16_columns,    // 2D: the tile's amax over its first row only
  row0_global_scale,       // per-row scales: every row quantized with row 0's
  group0_global_scale,     // grouped block-scaled output: every group encoded with group 0's global scale
  rceil_as_floor,          // E8M0 scale rounded down where the recipe rounds up
  sr_constant_source,      // stochastic rounding whose random source ignores the seed
  sr_biased_source,        // stochastic rounding up with probability p^2 instead of p
  row_offset_32bit,        // element offsets row * k + x formed in 32 bits: wrong past 2^31 elements
  // Not bugs: divergences between honest quantizers that rule 7 accepts (the honest variants).
  honest_rcp_jitter,       // `fast`: each reciprocal 1 ulp up or down (rcp.approx's error), by block
  honest_plus_zero,        // zero codes written +0 whatever the element's sign
  honest_nan_code_zero,    // a NaN element's code written 0 (not cvt's +6; 0 * Inf is no NaN element)
  honest_sr_other_generator,  // stochastic rounding from another counter-based generator
};

// An FP16 word as a float (exact).
NVFP4_QHD inline float fp16_value(uint16_t w) {
  // Selects, not branches, so that a loop of them vectorizes: a subnormal or zero is m * 2^-24
  // (exact in FP32), Inf and NaN keep their payload's top bits.
  const uint32_t sign = (w & 0x8000u) << 16, e = (w >> 10) & 0x1Fu, m = w & 0x3FFu;
  const uint32_t subnormal = float_bits(static_cast<float>(m) * 5.9604644775390625e-08f);
  const uint32_t normal = (e == 0x1F ? 0x7F800000u : (e + 112u) << 23) | (m << 13);
  return float_from_bits(sign | (e == 0 ? subnormal : normal));
}
NVFP4_QHD inline float bf16_value(uint16_t w) { return float_from_bits(static_cast<uint32_t>(w) << 16); }
// One input element as a float (every FP16, BF16 and FP32 word is exactly one).
NVFP4_QHD inline float input_value(const void* x, int64_t index, uint32_t in_type) {
  if (in_type == NVFP4_IN_FP32) return static_cast<const float*>(x)[index];
  const uint16_t w = static_cast<const uint16_t*>(x)[index];
  return in_type == NVFP4_IN_BF16 ? bf16_value(w) : fp16_value(w);
}

// |v| rounded to nearest even on the grid of `quantum` (a power of two), exactly: v / quantum is
// exact and rintf rounds ties to even.
NVFP4_QHD inline float grid_round(float a, float quantum) { return rintf(a / quantum) * quantum; }

// The largest power of two <= a (a a positive normal or subnormal float).
NVFP4_QHD inline float binade(float a) {
  const uint32_t b = float_bits(a);
  if ((b >> 23) == 0) {  // subnormal: its top set bit
    uint32_t top = 1u << 22;
    while (!(b & top)) top >>= 1;
    return float_from_bits(top);
  }
  return float_from_bits(b & 0x7F800000u);
}

// cvt.rn.satfinite.e4m3x2.f32: RN to E4M3FN, |v| > 448 and Inf to +-448, NaN to 0x7F.
NVFP4_QHD inline uint8_t e4m3_from_float(float v, bool toward_zero = false) {
  if (v != v) return 0x7F;
  const uint8_t sign = (float_bits(v) >> 31) ? 0x80 : 0x00;
  const float a = fabsf(v);
  if (a >= 448.0f) return sign | 0x7E;
  const float min_normal = 0.015625f;  // 2^-6
  const float quantum = a < min_normal ? 0.001953125f : binade(a) * 0.125f;
  const float r = toward_zero ? floorf(a / quantum) * quantum : grid_round(a, quantum);
  if (r >= 448.0f) return sign | 0x7E;
  if (r < min_normal) return sign | static_cast<uint8_t>(r / 0.001953125f);
  const float base = binade(r);
  const int e = static_cast<int>((float_bits(base) >> 23) & 0xFF) - 127 + 7;
  const int m = static_cast<int>(r / base * 8.0f) - 8;
  return sign | static_cast<uint8_t>((e << 3) | m);
}

// An E4M3FN byte's value, signed (NaN for 0x7F/0xFF): the kernels' one decoder. bug: the
// subnormal misdecode, a subnormal byte read with the implicit 1 of exponent field 1 (0 stays 0).
NVFP4_QHD inline float e4m3_to_float(uint8_t byte, Bug bug = Bug::none) {
  if ((byte & 0x7F) == 0x7F) return float_from_bits(0x7FC00000u);  // one NaN, whatever the sign bit
  const int e = (byte >> 3) & 0xF, m = byte & 7;
  if (bug != Bug::subnormal_scale_decode || e != 0) return kern::e4m3_to_float(byte, true);
  const float v = m == 0 ? 0.0f : ldexpf(1.0f + static_cast<float>(m) / 8.0f, -7);
  return (byte & 0x80) ? -v : v;
}

// cvt.rn.satfinite.e2m1x2.f32: RN (ties to even) onto {0, .5, 1, 1.5, 2, 3, 4, 6}, beyond 6
// and Inf to +-6, NaN to +6; the sign of zero kept.
NVFP4_QHD inline uint8_t e2m1_from_float(float v) {
  // The midpoints passed, counted (ties: .25, 1.25, 2.5 and 5 go down to the even code, .75,
  // 1.75 and 3.5 up). |v|'s bits compare as |v| does (Inf above every finite value); integer
  // compares and a select for NaN, because a float compare may trap and the compiler will then
  // neither vectorize the loop nor drop its branches.
  const uint32_t bits = float_bits(v), a = bits & 0x7FFFFFFFu;
  const uint32_t c = (a > 0x3E800000u) + (a >= 0x3F400000u) + (a > 0x3FA00000u) + (a >= 0x3FE00000u) +
                     (a > 0x40200000u) + (a >= 0x40600000u) + (a > 0x40A00000u);
  const uint32_t code = ((bits >> 28) & 0x8u) | c;
  return static_cast<uint8_t>(a > 0x7F800000u ? 0x7u : code);
}

// Stochastic rounding's random source: a counter-based hash of (seed, element index), so host
// and device give the same bytes for the same seed whatever the thread order. splitmix64's
// finaliser over the seed and the index's own mix; the other generator (an honest variant) is
// MurmurHash3's fmix64 over a different combination.
NVFP4_QHD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
NVFP4_QHD inline uint64_t fmix64(uint64_t k) {
  k = (k ^ (k >> 33)) * 0xFF51AFD7ED558CCDull;
  k = (k ^ (k >> 33)) * 0xC4CEB9FE1A85EC53ull;
  return k ^ (k >> 33);
}
// A uniform draw in [0, 1) on 2^-24 steps for element `index` under `seed`.
NVFP4_QHD inline float sr_uniform(uint64_t seed, int64_t index, Bug bug) {
  const uint64_t i = static_cast<uint64_t>(index);
  uint64_t h;
  if (bug == Bug::sr_constant_source) h = mix64(i + 0x9E3779B97F4A7C15ull);
  else if (bug == Bug::honest_sr_other_generator) h = fmix64(seed * 0xD6E8FEB86659FD93ull + fmix64(i ^ 0x5851F42D4C957F2Dull));
  else h = mix64(seed ^ mix64(i + 0x9E3779B97F4A7C15ull));
  // 24 bits: exact through int32, which converts to float in vectors where uint64 does not.
  const float u = static_cast<float>(static_cast<int32_t>(h >> 40)) * 5.9604644775390625e-08f;  // 2^-24
  return bug == Bug::sr_biased_source ? sqrtf(u) : u;  // P(sqrt(u) < p) = p^2
}

// E2M1 code of v rounded stochastically: |v|'s lower grid neighbour, or the upper one when
// |v| - lower > u * step, that is with probability (|v| - lower) / step for u uniform on [0, 1)
// (both differences exact: Sterbenz, and step a power of two). On the grid, |v| exactly; beyond
// 6 and Inf, 6; NaN, +6; the sign kept.
NVFP4_QHD inline uint8_t e2m1_stochastic(float v, float u) {
  // Without branches: random data mispredicts a loop's exit or a choice between neighbours (half
  // the time, by design, for the last), and integer compares of the bits, as in e2m1_from_float,
  // let a loop of them vectorize. c: the lower neighbour's index; its value is 0.5c up to c = 4,
  // then 3 and 4 (0.5 (c + (c - 4))); its step 0.5, 1 from c = 4 and 2 at c = 6. From 6 up (Inf
  // included) c = 6 and a - 4 >= 2 > 2u: code 7, the largest.
  const uint32_t bits = float_bits(v), ab = bits & 0x7FFFFFFFu;
  const float a = float_from_bits(ab);
  const uint32_t c = (ab >= 0x3F000000u) + (ab >= 0x3F800000u) + (ab >= 0x3FC00000u) + (ab >= 0x40000000u) +
                     (ab >= 0x40400000u) + (ab >= 0x40800000u);
  const uint32_t above4 = (c - 4u) & (0u - static_cast<uint32_t>(c > 4u));  // a mask: the compiler branches on a select
  const float lo = 0.5f * static_cast<float>(c + above4);
  const float step = float_from_bits(0x3F000000u + (((c >= 4u) + (c >= 6u)) << 23));
  // a - lo and u * step are >= 0 (and exact: Sterbenz, and step a power of two), so their bits
  // compare as their values do; NaN is the select below.
  const uint32_t code = ((bits >> 28) & 0x8u) | (c + (float_bits(a - lo) > float_bits(u * step)));
  const uint32_t nan = 0u - static_cast<uint32_t>(ab > 0x7F800000u);
  return static_cast<uint8_t>((code & ~nan) | (0x7u & nan));
}

// RN to E5M2 saturating to +-57344 (Inf included), NaN kept (0x7F), the sign of zero kept.
NVFP4_QHD inline uint8_t e5m2_from_float(float v) {
  if (v != v) return 0x7F;
  const uint8_t sign = (float_bits(v) >> 31) ? 0x80 : 0x00;
  const float a = fabsf(v);
  if (a >= 57344.0f) return sign | 0x7B;
  const float min_normal = 6.103515625e-05f;  // 2^-14
  const float quantum = a < min_normal ? 1.52587890625e-05f : binade(a) * 0.25f;
  const float r = grid_round(a, quantum);
  if (r >= 57344.0f) return sign | 0x7B;
  if (r < min_normal) return sign | static_cast<uint8_t>(r / 1.52587890625e-05f);
  const float base = binade(r);
  const int e = static_cast<int>((float_bits(base) >> 23) & 0xFF) - 127 + 15;
  const int m = static_cast<int>(r / base * 4.0f) - 4;
  return sign | static_cast<uint8_t>((e << 2) | m);
}

// RN to E4M3FN as an MXFP8 element: saturating to +-448 (Inf included), NaN kept.
NVFP4_QHD inline uint8_t e4m3_element(float v) {
  if (v != v) return 0x7F;
  return e4m3_from_float(v);
}

// cvt.rp.satfinite.ue8m0x2.f32: the biased exponent of v rounded up (any mantissa bit set adds
// one), 0 at or below 2^-127, 0xFE for Inf and above, 0xFF for NaN. floor: rounded down.
NVFP4_QHD inline uint8_t e8m0_from_float(float v, bool floor_instead) {
  if (v != v) return 0xFF;
  const uint32_t b = float_bits(fabsf(v));
  if (b >= 0x7F800000u) return 0xFE;
  const uint32_t e = b >> 23, m = b & 0x7FFFFFu;
  if (e == 0) return (m <= (1u << 22) || floor_instead) ? 0 : 1;  // at or below 2^-127 (m = 2^22): 0
  const uint32_t up = (m != 0 && !floor_instead) ? e + 1 : e;
  return static_cast<uint8_t>(up > 254 ? 254 : up);
}

// OCP MX's scale (mx_floor): the unbiased exponent of amax (>= 0) less the element format's
// emax, biased and clamped to 0..254; mx_even first rounds amax to `even_mbits` mantissa bits, ties
// up, by adding half a unit of the kept bits to its binary32 pattern (a carry raises the exponent).
// 0xFF for a non-finite amax. A subnormal amax (exponent field 0) is below 2^-126, and 2^-126 less
// any element format's emax (2 or more) clamps to -127: byte 0. even_mbits < 0 for mx_floor.
NVFP4_QHD inline uint8_t e8m0_floor_from_amax(float amax, int emax_elem, int even_mbits) {
  if (!(amax <= FLT_MAX)) return 0xFF;  // Inf and NaN
  uint32_t b = float_bits(amax);
  if ((b >> 23) == 0) return 0;
  if (even_mbits >= 0) b += 1u << (22 - even_mbits);
  const int e = static_cast<int>(b >> 23) - 127 - emax_elem;
  return static_cast<uint8_t>((e < -127 ? -127 : e > 127 ? 127 : e) + 127);
}

NVFP4_QHD inline float e8m0_encode_factor(uint8_t e) {
  // 2^(127 - e), exact for e = 0..254 (2^127 down to 2^-127, a subnormal); NaN for the NaN scale.
  if (e == 0xFF) return float_from_bits(0x7FC00000u);
  const int p = 127 - static_cast<int>(e);
  return ldexpf(1.0f, p);
}

// Offset of scale (row, block) in SFQ, linear or in the 128x4 tile layout (SPEC section 2).
NVFP4_QHD inline int64_t sf_offset(uint32_t layout, int64_t rows, int64_t kb, int64_t b, int64_t i, int64_t s) {
  if (layout == NVFP4_SF_LINEAR) return (b * rows + i) * kb + s;
  const int64_t mt = (rows + 127) / 128, kt = (kb + 3) / 4;
  return ((b * mt + i / 128) * kt + s / 4) * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 + s % 4;
}
NVFP4_QHD inline int64_t sf_bytes(uint32_t layout, int64_t rows, int64_t kb, int64_t l) {
  return layout == NVFP4_SF_LINEAR ? l * rows * kb : l * ((rows + 127) / 128) * ((kb + 3) / 4) * 512;
}

// The two reciprocals a recipe takes: exact (IEEE RN) or the kernel's own approximation.
struct Reciprocal {
  bool approx = false;
};

// One NVFP4 block's scale byte and encode factor from its amax, by recipe. `rcp` computes
// 1/v: exact on the host, rcp.approx.ftz for CUDA's fast recipe.
template <class Rcp>
NVFP4_QHD inline uint8_t nvfp4_block_scale(uint32_t recipe, float amax, float gs, Rcp rcp, Bug bug, float* os_out) {
  const float c6 = 1.0f / 6.0f;
  if (bug == Bug::no_global_scale) gs = 1.0f;
  if (bug == Bug::decode_as_encode) gs = 1.0f / gs;
  float scale;
  if (recipe == NVFP4_RECIPE_TORCHAO) {
    // gs is torchao's decode scale pts: RN(RN(amax / 6) / pts), clamped to [2^-6, 448].
    // torch.clamp keeps NaN (0 / 0 when the tensor is all zero: pts = 0); fminf/fmaxf would not.
    scale = (amax / 6.0f) / gs;
    if (scale == scale) scale = fminf(fmaxf(scale, 0.015625f), 448.0f);
  } else if (recipe == NVFP4_RECIPE_TE && bug != Bug::other_association) {
    scale = fminf(amax * (gs * c6), FLT_MAX);
  } else {
    scale = gs * (amax * c6);
  }
  const uint8_t sfq = e4m3_from_float(scale, bug == Bug::scale_toward_zero);
  const float sf = bug == Bug::os_from_unrounded ? scale : e4m3_to_float(sfq, bug);
  float os;
  if (recipe == NVFP4_RECIPE_TORCHAO) {
    os = (1.0f / gs) / sf;
  } else if (recipe == NVFP4_RECIPE_TE) {
    os = fminf(1.0f / (sf * (1.0f / gs)), FLT_MAX);
  } else if (recipe == NVFP4_RECIPE_FAST) {
    os = amax == 0.0f ? 0.0f : rcp(sf * rcp(gs));
  } else {
    os = sf != 0.0f ? 1.0f / (sf * (1.0f / gs)) : 0.0f;
  }
  *os_out = os;
  return sfq;
}

NVFP4_QHD inline int64_t block_elems(uint32_t format) { return format == NVFP4_FORMAT_NVFP4 ? 16 : 32; }
NVFP4_QHD inline bool packs_nibbles(uint32_t format) {
  return format == NVFP4_FORMAT_NVFP4 || format == NVFP4_FORMAT_MXFP4;
}

struct ExactRcp {
  NVFP4_QHD float operator()(float v) const { return 1.0f / v; }
};

// 1/v one ulp up or down (by `up`), as rcp.approx.ftz may be (within 1 ulp of RN, measured).
struct JitterRcp {
  bool up = false;
  NVFP4_QHD float operator()(float v) const {
    const float r = 1.0f / v;
    if (!(r > 0.0f) || r > FLT_MAX) return r;
    return float_from_bits(float_bits(r) + (up ? 1u : 0xFFFFFFFFu));
  }
};

// The offset of element x of row `row` of a k-wide matrix. bug row_offset_32bit: formed in 32
// bits as flashinfer's quantizer formed it (PR #4263, #2704: illegal addresses from m = 798,916
// at k = 2688): past 2^31 it wraps to a negative offset (modular, as the hardware's 32-bit
// multiply-add gives it).
NVFP4_QHD inline int64_t element_offset(int64_t row, int64_t k, int64_t x, Bug bug) {
  if (bug != Bug::row_offset_32bit) return row * k + x;
  return static_cast<int32_t>(static_cast<uint32_t>(row) * static_cast<uint32_t>(k) + static_cast<uint32_t>(x));
}

// The global scale of row `row` (b * m + i): one value, or one per row.
NVFP4_QHD inline float global_scale_of(const nvfp4_problem& p, uint32_t flags, int64_t row, Bug bug) {
  if (p.global_scale == nullptr) return 1.0f;
  const bool per_row = flags & NVFP4_FLAG_ROW_GLOBAL_SCALE;
  return per_row && bug != Bug::row0_global_scale ? p.global_scale[row] : p.global_scale[0];
}

// Elements [x0, x0 + n) of row `row` (b * m + i) as floats, n <= 32: the input type's loop chosen
// once, and over contiguous memory unless offsets wrap (bug row_offset_32bit).
NVFP4_QHD inline void row_inputs(const nvfp4_problem& p, Bug bug, int64_t row, int64_t x0, int n, float* in) {
  if (bug == Bug::row_offset_32bit) {
    for (int j = 0; j < n; ++j) in[j] = input_value(p.x, element_offset(row, p.k, x0 + j, bug), p.in_type);
    return;
  }
  const int64_t at = row * p.k + x0;
  if (p.in_type == NVFP4_IN_FP32) {
    const float* x = static_cast<const float*>(p.x) + at;
    for (int j = 0; j < n; ++j) in[j] = x[j];
  } else if (p.in_type == NVFP4_IN_BF16) {
    const uint16_t* x = static_cast<const uint16_t*>(p.x) + at;
    for (int j = 0; j < n; ++j) in[j] = bf16_value(x[j]);
  } else {
    const uint16_t* x = static_cast<const uint16_t*>(p.x) + at;
    for (int j = 0; j < n; ++j) in[j] = fp16_value(x[j]);
  }
}

// |x| with a NaN as 0, as bits: non-negative floats order as their bits do, so a block's amax
// (NaN-suppressing, as __hmax2 and fmaxf are) is an integer max, which vectorizes where a float
// max is a chain of dependent compares.
NVFP4_QHD inline uint32_t amax_bits_of(float x) {
  const uint32_t a = float_bits(x) & 0x7FFFFFFFu;
  return a > 0x7F800000u ? 0u : a;
}

// Row `row`'s codes of elements [x0, x1) in a format of nibbles, two to a byte, each byte written
// once (x0 and x1 are even: k is even for such a format, quantize_fits): element by element, as
// the device runs it.
NVFP4_QHD inline void nibble_codes_by_pairs(const nvfp4_problem& p, uint32_t flags, Bug bug, int64_t row, int64_t x0,
                                            int64_t x1, float os) {
  for (int64_t x = x0; x < x1; x += 2) {
    uint8_t pair = 0;
    for (int h = 0; h < 2; ++h) {
      const float in = input_value(p.x, element_offset(row, p.k, x + h, bug), p.in_type), v = in * os;
      uint8_t code = bug == Bug::zero_codes ? 0
                     : (flags & NVFP4_FLAG_STOCHASTIC)
                         ? e2m1_stochastic(v, sr_uniform(p.seed, row * p.k + x + h, bug))
                         : e2m1_from_float(v);
      if (bug == Bug::honest_plus_zero && (code & 7) == 0) code = 0;
      if (bug == Bug::honest_nan_code_zero && in != in) code = 0;
      pair = static_cast<uint8_t>(pair | code << (4 * h));
    }
    p.q[element_offset(row, p.k / 2, x / 2, bug)] = pair;
  }
}

// The same bytes step by step from the row's elements `in` (row_inputs; x1 - x0 <= 32): the
// draws, the codes, the bugs' changes and the packing, each a loop of its own, which the host's
// compiler vectorizes (the draws stay scalar: SSE2 has no 64-bit multiply). The draws' loop is
// written out for the honest kernel, so that its generator is not chosen per element.
NVFP4_QHD inline void nibble_codes_by_steps(const nvfp4_problem& p, uint32_t flags, Bug bug, int64_t row, int64_t x0,
                                            int64_t x1, float os, const float* in) {
  const int n = static_cast<int>(x1 - x0);
  float u[32];
  uint8_t code[32];
  if (flags & NVFP4_FLAG_STOCHASTIC) {
    const int64_t at = row * p.k + x0;
    if (bug == Bug::none) {
      for (int j = 0; j < n; ++j) u[j] = sr_uniform(p.seed, at + j, Bug::none);
    } else {
      for (int j = 0; j < n; ++j) u[j] = sr_uniform(p.seed, at + j, bug);
    }
    for (int j = 0; j < n; ++j) code[j] = e2m1_stochastic(in[j] * os, u[j]);
  } else {
    for (int j = 0; j < n; ++j) code[j] = e2m1_from_float(in[j] * os);
  }
  if (bug == Bug::zero_codes)
    for (int j = 0; j < n; ++j) code[j] = 0;
  if (bug == Bug::honest_plus_zero)
    for (int j = 0; j < n; ++j) code[j] = (code[j] & 7) == 0 ? uint8_t{0} : code[j];
  if (bug == Bug::honest_nan_code_zero)
    for (int j = 0; j < n; ++j) code[j] = in[j] != in[j] ? uint8_t{0} : code[j];
  for (int j = 0; j < n; j += 2)
    p.q[element_offset(row, p.k / 2, (x0 + j) / 2, bug)] = static_cast<uint8_t>(code[j] | code[j + 1] << 4);
}

// Quantizes rows [r0, r1) of batch b, block s (a 2D tile's rows together): its amax, scale byte
// and encode factor (per row: a per-row global scale differs by row), then its codes. The device
// goes element by element; the host loads each row's block into an array first, so that its loops
// vectorize (the same arithmetic: host_kernels_test compares the two forms).
template <class Rcp>
NVFP4_QHD inline void quantize_block(const nvfp4_problem& p, uint32_t flags, Bug bug, int64_t b, int64_t r0, int64_t r1,
                                     int64_t s, Rcp rcp) {
  const int64_t bs = block_elems(p.q_format), kb = (p.k + bs - 1) / bs;
  const int64_t x0 = s * bs, x1 = p.k < x0 + bs ? p.k : x0 + bs;
  uint32_t amax_bits = 0;
  const int64_t amax_rows = bug == Bug::tile_amax_16_columns ? r0 + 1 : r1;
#if !defined(__CUDA_ARCH__)
  float in[32];  // the last row the amax read; a one-row block codes from it again
  const int n = static_cast<int>(x1 - x0);
#endif
  for (int64_t i = r0; i < amax_rows; ++i) {
#if defined(__CUDA_ARCH__)
    for (int64_t x = x0; x < x1; ++x) {
      const uint32_t a = amax_bits_of(input_value(p.x, element_offset(b * p.m + i, p.k, x, bug), p.in_type));
      amax_bits = a > amax_bits ? a : amax_bits;
    }
#else
    row_inputs(p, bug, b * p.m + i, x0, n, in);
    for (int j = 0; j < n; ++j) {
      const uint32_t a = amax_bits_of(in[j]);
      amax_bits = a > amax_bits ? a : amax_bits;
    }
#endif
  }
  const float amax = float_from_bits(amax_bits);
  const uint32_t layout = bug == Bug::linear_scales_declared_permuted ? uint32_t{NVFP4_SF_LINEAR} : p.sf_layout;
  for (int64_t i = r0; i < r1; ++i) {
    float os;
    uint8_t sfq;
    if (p.q_format == NVFP4_FORMAT_NVFP4 && bug == Bug::honest_rcp_jitter) {
      const JitterRcp jitter{((b * 131 + i * 31 + s) & 1) != 0};
      sfq = nvfp4_block_scale(p.recipe, amax, global_scale_of(p, flags, b * p.m + i, bug), jitter, bug, &os);
    } else if (p.q_format == NVFP4_FORMAT_NVFP4) {
      sfq = nvfp4_block_scale(p.recipe, amax, global_scale_of(p, flags, b * p.m + i, bug), rcp, bug, &os);
    } else {
      const bool fp4 = p.q_format == NVFP4_FORMAT_MXFP4, e4m3 = p.q_format == NVFP4_FORMAT_MXFP8_E4M3;
      if (p.recipe == NVFP4_RECIPE_MX_RCEIL) {
        const float emax = fp4 ? 6.0f : e4m3 ? 448.0f : 57344.0f;
        sfq = e8m0_from_float(amax * (1.0f / emax), bug == Bug::rceil_as_floor);
      } else {
        const int emax_elem = fp4 ? 2 : e4m3 ? 8 : 15, mbits = fp4 ? 1 : e4m3 ? 3 : 2;
        sfq = e8m0_floor_from_amax(amax, emax_elem, p.recipe == NVFP4_RECIPE_MX_EVEN ? mbits : -1);
      }
      os = e8m0_encode_factor(sfq);
    }
    p.sfq[sf_offset(layout, p.m, kb, b, i, s)] = sfq;
    const int64_t row = b * p.m + i;
    if (!packs_nibbles(p.q_format)) {
      for (int64_t x = x0; x < x1; ++x) {
        const int64_t at = element_offset(row, p.k, x, bug);
        const float v = input_value(p.x, at, p.in_type) * os;
        p.q[at] = p.q_format == NVFP4_FORMAT_MXFP8_E4M3 ? e4m3_element(v) : e5m2_from_float(v);
      }
      continue;
    }
#if defined(__CUDA_ARCH__)
    nibble_codes_by_pairs(p, flags, bug, row, x0, x1, os);
#else
    if (r1 - r0 > 1) row_inputs(p, bug, row, x0, n, in);
    nibble_codes_by_steps(p, flags, bug, row, x0, x1, os, in);
#endif
  }
}

}  // namespace nvfp4::kern::quant
