// The exact reference. Every product a*sa*b*sb is an integer number of 2^-20 units, so each
// output is an integer sum, computed here with small integers that vectorize:
//  - each A row and B column is decoded once to int16 doubled E2M1 values (the scale's sign
//    folded in) in a block-interleaved layout: for a chunk of 16 scale blocks, the pair of
//    elements (2q, 2q+1) of block s sits at [q][s][0..1], so one packed byte becomes one 32-bit
//    store and a 16-lane vector holds one element pair of 8 blocks;
//  - per chunk, 16 vector steps give per lane the dot product, the sum of |products|, their OR
//    (for g: tz(x|y) = min(tz x, tz y)) and the count of nonzero ones; two adjacent lanes make
//    one block;
//  - each block is then scaled by sigA*sigB * 2^(expA+expB+18) in int64 and the chunk's int64
//    sum is added to 128-bit accumulators, so any k is exact (see the bounds below).
#include "reference/exact_gemm.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "reference/scale_layout.h"  // ceil_div

namespace nvfp4 {

namespace {

constexpr int kBlock = 16;           // elements per scale block (SPEC section 2)
constexpr int kChunk = 16;           // scale blocks per chunk
constexpr int kPairs = kBlock / 2;   // element pairs (packed bytes) per block
constexpr int kChunkValues = kChunk * kBlock;

// 16 int16 lanes: one element pair of 8 blocks. GCC/clang vector extensions: SSE2 pairs on
// plain x86-64, one register with AVX2, NEON elsewhere; no intrinsics, so it builds for every
// host compiler of the project.
constexpr int kLanes = 16;
using Lanes = int16_t __attribute__((vector_size(kLanes * sizeof(int16_t))));

// One A row or B column, decoded.
struct DecodedRow {
  // [chunk][pair q][block s][2]: doubled E2M1 value (in -12..12) times the scale's sign, 0 in
  // padding (elements >= k, blocks >= kb).
  std::vector<int16_t> values;
  std::vector<int32_t> sig;  // per block: scale significand, 0 for zero, NaN and padding blocks
  std::vector<int32_t> exp;  // per block: scale exponent in [-9, 5]
  bool nan = false;          // some scale of the row is NaN
};

// Doubled E2M1 values of both nibbles of a byte as two int16 in memory order (low nibble, the
// even element, first), for positive and negated scales.
struct ByteTable {
  uint32_t pair[2][256];
  ByteTable() {
    for (int byte = 0; byte < 256; ++byte) {
      for (int neg = 0; neg < 2; ++neg) {
        const int sign = neg ? -1 : 1;
        const int16_t v[2] = {static_cast<int16_t>(sign * e2m1_twice(static_cast<uint8_t>(byte & 0xF))),
                              static_cast<int16_t>(sign * e2m1_twice(static_cast<uint8_t>(byte >> 4)))};
        std::memcpy(&pair[neg][byte], v, sizeof v);
      }
    }
  }
};
const ByteTable kByteTable;

int64_t chunk_count(int64_t kb) { return (kb + kChunk - 1) / kChunk; }

void decode_row(const uint8_t* packed, const uint8_t* scales, int64_t k, ScaleSemantics semantics,
                DecodedRow& row) {
  const int64_t kb = (k + kBlock - 1) / kBlock;
  const int64_t blocks = chunk_count(kb) * kChunk;
  // Rows of one problem all have the same k, so every row writes the same cells and the rest
  // (the tail of a partial last block, the blocks beyond kb) keeps the zeros of the first
  // allocation: reused buffers need no clearing.
  if (row.values.size() != static_cast<size_t>(blocks * kBlock)) {
    row.values.assign(static_cast<size_t>(blocks * kBlock), 0);
    row.sig.assign(static_cast<size_t>(blocks), 0);
    row.exp.assign(static_cast<size_t>(blocks), -9);
  }
  row.nan = false;
  for (int64_t s = 0; s < kb; ++s) {
    const ScaleValue sv = e4m3_decode(scales[s], semantics);
    row.nan |= sv.nan;
    row.sig[s] = sv.nan ? 0 : sv.sig;  // a NaN block contributes nothing to r, S, t, g
    row.exp[s] = sv.exp;
    const uint32_t* table = kByteTable.pair[sv.sign < 0];
    int16_t* out = row.values.data() + (s / kChunk) * kChunkValues + (s % kChunk) * 2;
    const uint8_t* bytes = packed + s * kPairs;
    const int64_t nbytes = std::min<int64_t>(kPairs, (k - s * kBlock) / 2);  // k is even
    for (int64_t q = 0; q < nbytes; ++q) std::memcpy(out + q * (2 * kChunk), &table[bytes[q]], 4);
  }
}

// Bounds that make the int64 chunk sums safe: |a*b| <= 12*12 = 144 (doubled values), so a lane's
// (half a block's) dot and |dot| are <= 8*144 = 1152 (int16 is exact); sigA*sigB <= 15*15 = 225
// and expA+expB+18 <= 28, so a block contributes < 2304*225*2^28 < 2^48 and a chunk of 16
// blocks < 2^52 to the int64 chunk sum. The 128-bit totals hold any k (|sum| < k*2^43).
constexpr int64_t kRowGroup = 8;  // output rows per work item, see exact_gemm
constexpr int kNoNonzero = 62;  // sentinel bit, above any real trailing-zero count (<= 47)

inline __attribute__((always_inline)) void dot_element(const DecodedRow& a, const DecodedRow& b,
                                                        int64_t kb, ExactElement& out) {
  const int64_t chunks = chunk_count(kb);
  i128 sum = 0;
  u128 abs_sum = 0;
  int64_t nonzero = 0;
  int min_tz = kNoNonzero;
  for (int64_t c = 0; c < chunks; ++c) {
    const int16_t* av = a.values.data() + c * kChunkValues;
    const int16_t* bv = b.values.data() + c * kChunkValues;
    // [h]: blocks 8h .. 8h+7 of the chunk; lane 2s+e holds the pair element e of block 8h+s.
    Lanes dot[2] = {}, abs[2] = {}, bits[2] = {}, count[2] = {};
    for (int q = 0; q < kPairs; ++q) {
      for (int h = 0; h < 2; ++h) {
        Lanes x, y;
        std::memcpy(&x, av + (2 * q + h) * kLanes, sizeof x);
        std::memcpy(&y, bv + (2 * q + h) * kLanes, sizeof y);
        const Lanes p = x * y;
        const Lanes sign = p >> 15;
        const Lanes mag = (p ^ sign) - sign;
        dot[h] += p;
        abs[h] += mag;
        bits[h] |= mag;
        count[h] -= (p != 0);  // a true comparison lane is -1
      }
    }
    // Fold lane pairs: lane s of the results is block s of the chunk.
#define NVFP4_EVEN 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define NVFP4_ODD 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
    const Lanes block_dot = __builtin_shufflevector(dot[0], dot[1], NVFP4_EVEN) +
                            __builtin_shufflevector(dot[0], dot[1], NVFP4_ODD);
    const Lanes block_abs = __builtin_shufflevector(abs[0], abs[1], NVFP4_EVEN) +
                            __builtin_shufflevector(abs[0], abs[1], NVFP4_ODD);
    const Lanes block_bits = __builtin_shufflevector(bits[0], bits[1], NVFP4_EVEN) |
                             __builtin_shufflevector(bits[0], bits[1], NVFP4_ODD);
    const Lanes block_count = __builtin_shufflevector(count[0], count[1], NVFP4_EVEN) +
                              __builtin_shufflevector(count[0], count[1], NVFP4_ODD);
#undef NVFP4_EVEN
#undef NVFP4_ODD
    int64_t chunk_sum = 0, chunk_abs = 0;
    const int32_t* sa = a.sig.data() + c * kChunk;
    const int32_t* sb = b.sig.data() + c * kChunk;
    const int32_t* ea = a.exp.data() + c * kChunk;
    const int32_t* eb = b.exp.data() + c * kChunk;
    // Blocks beyond kb are zero: small k skips their scalar work.
    const int live = static_cast<int>(std::min<int64_t>(kChunk, kb - c * kChunk));
    for (int s = 0; s < live; ++s) {
      const int64_t sp = sa[s] * sb[s];
      const int64_t unit = int64_t(1) << (ea[s] + eb[s] + 18);  // 2^-2 * 2^(ea+eb) in 2^-20 units
      chunk_sum += block_dot[s] * sp * unit;
      chunk_abs += block_abs[s] * sp * unit;
      nonzero += sp != 0 ? block_count[s] : 0;
      const uint64_t any = static_cast<uint64_t>(block_bits[s] * sp * unit) | (uint64_t(1) << kNoNonzero);
      min_tz = std::min(min_tz, __builtin_ctzll(any));
    }
    sum += chunk_sum;
    abs_sum += static_cast<u128>(chunk_abs);
  }
  out.sum = sum;
  out.abs_sum = abs_sum;
  out.nonzero = nonzero;
  out.min_tz = min_tz == kNoNonzero ? 128 : min_tz;
  out.nan = a.nan || b.nan;
}

// A group of output rows: A rows `rows` against every decoded B column, columns outermost so
// that a column is read from memory once per group, not once per row. Compiled twice on x86-64
// (AVX2 and the baseline) and picked at load time, so one binary runs everywhere and is fast
// where it can.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void dot_rows(const DecodedRow* rows, int64_t nrows, const DecodedRow* cols, int64_t n,
              int64_t kb, ExactElement* out) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t r = 0; r < nrows; ++r) dot_element(rows[r], cols[j], kb, out[r * n + j]);
}

}  // namespace

uint16_t round_result(const ExactElement& e, float alpha) {
  if (e.nan) return 0x7E00u;
  uint32_t bits;
  std::memcpy(&bits, &alpha, sizeof bits);
  const bool alpha_negative = (bits >> 31) != 0;
  const int field = static_cast<int>((bits >> 23) & 0xFF);
  const uint32_t frac = bits & 0x7FFFFFu;
  if (field == 0xFF) {  // not reachable through a valid Problem; IEEE's answer anyway
    if (frac != 0 || e.sum == 0) return 0x7E00u;
    return static_cast<uint16_t>(((e.sum < 0) != alpha_negative ? 0x8000u : 0u) | 0x7C00u);
  }
  // alpha = alpha_sig * 2^alpha_exp exactly, alpha_sig < 2^24.
  const uint64_t alpha_sig = field == 0 ? frac : (frac | 0x800000u);
  const int alpha_exp = (field == 0 ? 1 : field) - 150;
  u128 mag = e.sum < 0 ? static_cast<u128>(-e.sum) : static_cast<u128>(e.sum);
  int exp2 = alpha_exp - 20;
  // |sum| < k * 2^43 never comes near 2^104 for a problem that fits in memory, but keep the
  // product in 128 bits regardless: drop low bits into a sticky bit, which leaves far more than
  // the 11 + 2 bits that rounding to FP16 looks at.
  while (bit_width_u128(mag) > 104) {
    mag = (mag >> 1) | (mag & 1);
    ++exp2;
  }
  mag *= alpha_sig;
  return fp16_round((e.sum < 0) != alpha_negative, mag, exp2);
}

ExactResult exact_gemm(const Problem& p) {
  const std::string error = problem_error(p);
  if (!error.empty()) throw std::invalid_argument("exact_gemm: " + error);
  const int64_t m = p.m, n = p.n, k = p.k, l = p.l, kb = p.kb();
  ExactResult result;
  result.elems.resize(static_cast<size_t>(p.c_elems()));
  result.c.resize(static_cast<size_t>(p.c_elems()));
  std::vector<DecodedRow> cols(static_cast<size_t>(n));
  // Below about 2^18 multiply-adds per batch (~0.1 ms) starting threads costs more than it saves.
  const bool parallel = m * n * k >= (int64_t(1) << 18) && m > 1;
  // Rows per work item: enough to reuse each decoded column from cache, few enough that
  // GEMV (n = 1, where nothing is reused) still splits into many items.
  const int64_t groups = ceil_div(m, kRowGroup);
  for (int64_t b = 0; b < l; ++b) {
    // Each output element is computed by one thread from the same decoded data, in a fixed
    // order, with exact integer sums: nothing depends on the thread count or schedule.
#pragma omp parallel if (parallel)
    {
#pragma omp for schedule(static)
      for (int64_t j = 0; j < n; ++j)
        decode_row(p.b.data() + (b * n + j) * (k / 2), p.sfb.data() + (b * n + j) * kb, k,
                   p.semantics, cols[j]);
      DecodedRow rows[kRowGroup];
#pragma omp for schedule(dynamic, 1)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t first = g * kRowGroup, count = std::min<int64_t>(kRowGroup, m - first);
        for (int64_t r = 0; r < count; ++r)
          decode_row(p.a.data() + (b * m + first + r) * (k / 2), p.sfa.data() + (b * m + first + r) * kb,
                     k, p.semantics, rows[r]);
        const int64_t base = (b * m + first) * n;
        ExactElement* out = result.elems.data() + base;
        dot_rows(rows, count, cols.data(), n, kb, out);
        for (int64_t x = 0; x < count * n; ++x) result.c[base + x] = round_result(out[x], p.alpha);
      }
    }
  }
  return result;
}

}  // namespace nvfp4
