// The exact reference. Every product a*sa*b*sb is an integer number of 2^-20 units, so each
// output is an integer sum, computed here with small integers that vectorize:
//  - each A row and B column is decoded once to int16 doubled E2M1 values (the scale's sign
//    folded in) in a block-interleaved layout: for a chunk of 16 scale blocks, the pair of
//    elements (2q, 2q+1) of block s sits at [q][s][0..1], so one packed byte becomes one 32-bit
//    store and a 16-lane vector holds one element pair of 8 blocks;
//  - per chunk, 16 vector steps (8 where at most 8 of its blocks are live) give per lane the
//    dot product, the sum of |products|, their OR (for g: tz(x|y) = min(tz x, tz y)) and the
//    count of nonzero ones; two adjacent lanes make one block;
//  - each block is then scaled by sigA*sigB * 2^(expA+expB+18) in int64 (the product of the two
//    scales' weights sig * 2^(exp+9), decoded once per row) and the chunk's int64 sum is added to
//    128-bit accumulators, so any k is exact (see the bounds below).
#include "reference/exact_gemm.h"
#include "reference/exact_mx.h"
#include "reference/long_double_bits.h"
#include "reference/long_double_exp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "reference/block_scaled_output.h"
#include "reference/scale_layout.h"  // ceil_div
#include "reference/scaled_round.h"  // fp32_parts

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
  // Per block: the scale's weight sig * 2^(exp + 9) (exp in [-9, 5], so below 2^18), 0 for zero,
  // NaN and padding blocks. weight_a * weight_b = sigA*sigB * 2^(expA+expB+18), a block's unit.
  std::vector<int32_t> weight;
  bool nan = false;  // some scale of the row is NaN
};

// Every scale byte decoded once: weight (as DecodedRow's), whether its sign is negative and
// whether it is NaN, under either semantics.
struct ScaleTable {
  int32_t weight[256];
  bool negative[2][256];  // [semantics == e4m3]
  bool nan[256];
  // The three in one word, for one lookup a block: the weight (below 2^18), kNegativeBit, kNanBit.
  static constexpr uint32_t kNegativeBit = 1u << 30, kNanBit = 1u << 31;
  uint32_t word[2][256];  // [semantics == e4m3]
  ScaleTable() {
    for (int byte = 0; byte < 256; ++byte) {
      const ScaleValue v = e4m3_decode(static_cast<uint8_t>(byte), ScaleSemantics::ue4m3);
      weight[byte] = v.nan ? 0 : v.sig << (v.exp + 9);  // a NaN block contributes nothing to r, S, t, g
      nan[byte] = v.nan;
      for (ScaleSemantics sem : {ScaleSemantics::ue4m3, ScaleSemantics::e4m3}) {
        const int e4m3 = sem == ScaleSemantics::e4m3;
        negative[e4m3][byte] = e4m3_decode(static_cast<uint8_t>(byte), sem).sign < 0;
        word[e4m3][byte] = static_cast<uint32_t>(weight[byte]) | (negative[e4m3][byte] ? kNegativeBit : 0u) |
                           (nan[byte] ? kNanBit : 0u);
      }
    }
  }
};
const ScaleTable kScaleTable;

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

// 16 lanes of 32 bits (a chunk's blocks side by side), GCC/clang vector extensions as Lanes.
using U32x16 = uint32_t __attribute__((vector_size(16 * sizeof(uint32_t))));
using I32x16 = int32_t __attribute__((vector_size(16 * sizeof(int32_t))));

// e2m1_twice of 16 nibbles (0..15) at once, negated in the lanes where neg is -1: each lane's
// magnitude is its field of formats.h's table, shifted out lane by lane. (Vectors go by
// reference: by value, the baseline clone's 64-byte vectors would change the calling convention,
// which GCC warns of even where the function is inlined.)
inline __attribute__((always_inline)) void e2m1_twice_lanes(const U32x16& nibbles, const I32x16& neg, I32x16& out) {
  const U32x16 table = U32x16{} + kE2m1TwiceNibbles;
  const I32x16 mag = reinterpret_cast<I32x16>((table >> ((nibbles & 7u) << 2)) & 0xFu);
  const I32x16 sign = -reinterpret_cast<I32x16>(nibbles >> 3) ^ neg;
  out = (mag ^ sign) - sign;
}

// A chunk of 16 whole blocks (128 bytes) into its 256 values, as the scalar loop of decode_row
// writes them ([pair q][block s][2]): the bytes of one pair position across the 16 blocks are the
// same byte of 16 words, so each q is a few vector steps and one 64-byte store, where the table
// lookups cost a load and a 4-byte store each (GEMV's reference spent 2.6x its dot products in
// them). neg: -1 in the lanes of blocks whose scale is negative.
inline __attribute__((always_inline)) void decode_chunk(const uint8_t* bytes, const I32x16& neg, int16_t* out) {
  U32x16 first, second;  // blocks 0-7 and 8-15, two words each
  std::memcpy(&first, bytes, sizeof first);
  std::memcpy(&second, bytes + sizeof first, sizeof second);
  const U32x16 low = __builtin_shufflevector(first, second, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const U32x16 high = __builtin_shufflevector(first, second, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int q = 0; q < kPairs; ++q) {
    const U32x16 byte = ((q < 4 ? low : high) >> (8 * (q & 3))) & 0xFFu;
    I32x16 even, odd;
    e2m1_twice_lanes(byte & 0xFu, neg, even);
    e2m1_twice_lanes(byte >> 4, neg, odd);
    const U32x16 pair = (reinterpret_cast<U32x16>(even) & 0xFFFFu) | (reinterpret_cast<U32x16>(odd) << 16);
    std::memcpy(out + q * (2 * kChunk), &pair, sizeof pair);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define NVFP4_DECODE_AVX512 1
// The word permutes of decode_chunks_avx512: word 8q + p of permute h is block pair p's byte 4h + q
// (pairs 0-3 from the first 64-byte load, 4-7 from the second).
struct PairIndex {
  alignas(64) int16_t word[2][32];
  constexpr PairIndex() : word{} {
    for (int h = 0; h < 2; ++h)
      for (int q = 0; q < 4; ++q)
        for (int p = 0; p < 8; ++p)
          word[h][8 * q + p] = static_cast<int16_t>(p < 4 ? 8 * p + (4 * h + q) : 32 + 8 * (p - 4) + (4 * h + q));
  }
};
constexpr PairIndex kPairIndex;

#if !defined(__clang__)
#pragma GCC diagnostic push
// GCC 12's AVX-512 header functions read _mm512_undefined_epi32() and warn of it, inlined here
// (GCC bug 105593): not this code's reads.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Every whole chunk of a row at the start of it (chunks of 16 whole blocks), as decode_chunk and
// decode_row's scale loop write them, with AVX-512BW byte shuffles: a chunk's 128 bytes are put
// in pair-position order by two word permutes, and each nibble becomes its doubled value by one
// 16-entry table lookup, 64 at a time (decode_chunk's 32-bit lanes take a shift per nibble: with
// decode_row it was 30% of a medium GEMV's runner). A block's scale is one lookup of
// ScaleTable::word (a 16-lane gather of them was slower: bench/reference_bench). Returns whether a
// scale was NaN.
__attribute__((target("avx512f,avx512bw"))) bool decode_chunks_avx512(const uint8_t* packed, const uint8_t* scales,
                                                                     int64_t chunks, const uint32_t* words,
                                                                     int16_t* values, int32_t* weight) {
  // Lane j of a 64-byte load holds blocks 2j and 2j+1 (8 bytes each); this makes its 16-bit word
  // q the two blocks' byte q.
  const __m512i pair_bytes = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
  // Lane q of permute h then holds byte 4h + q of blocks 0..15.
  const __m512i by_pair[2] = {_mm512_load_si512(kPairIndex.word[0]), _mm512_load_si512(kPairIndex.word[1])};
  // Doubled E2M1 values of the 16 codes (formats.h's e2m1_twice, negative codes negated).
  const __m512i twice = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  // Each bit of a byte twice: a block's sign covers its two bytes of a pair position.
  static const struct Spread {
    uint16_t of[256];
    Spread() {
      for (int b = 0; b < 256; ++b) {
        of[b] = 0;
        for (int i = 0; i < 8; ++i) of[b] |= static_cast<uint16_t>(((b >> i) & 1) * (3u << (2 * i)));
      }
    }
  } spread;
  bool nan = false;
  for (int64_t c = 0; c < chunks; ++c) {
    const uint8_t* bytes = packed + c * kChunk * kPairs;
    int16_t* out = values + c * kChunkValues;
    // The scales: weights stored, signs as a mask of 16 blocks.
    unsigned neg = 0;
    uint32_t flags = 0;
    for (int s = 0; s < kChunk; ++s) {
      const uint32_t w = words[scales[c * kChunk + s]];
      weight[c * kChunk + s] = static_cast<int32_t>(w & ~(ScaleTable::kNegativeBit | ScaleTable::kNanBit));
      neg |= ((w & ScaleTable::kNegativeBit) != 0 ? 1u : 0u) << s;
      flags |= w;
    }
    nan |= (flags & ScaleTable::kNanBit) != 0;
    const __mmask64 neg_low = 0x0001000100010001ull * spread.of[neg & 0xFF];
    const __mmask64 neg_high = 0x0001000100010001ull * spread.of[neg >> 8];
    const __m512i first = _mm512_shuffle_epi8(_mm512_loadu_si512(bytes), pair_bytes);
    const __m512i second = _mm512_shuffle_epi8(_mm512_loadu_si512(bytes + 64), pair_bytes);
    for (int h = 0; h < 2; ++h) {
      const __m512i t = _mm512_permutex2var_epi16(first, by_pair[h], second);
      const __m512i even = _mm512_shuffle_epi8(twice, _mm512_and_si512(t, nibble));
      const __m512i odd = _mm512_shuffle_epi8(twice, _mm512_and_si512(_mm512_srli_epi16(t, 4), nibble));
      // Lane q: blocks 0-7 (low) and 8-15 (high) as [block][even, odd] bytes, signs applied.
      __m512i low = _mm512_unpacklo_epi8(even, odd), high = _mm512_unpackhi_epi8(even, odd);
      low = _mm512_mask_sub_epi8(low, neg_low, _mm512_setzero_si512(), low);
      high = _mm512_mask_sub_epi8(high, neg_high, _mm512_setzero_si512(), high);
      // Lanes (0, 1) and (2, 3) of both, as [low q, high q, low q+1, high q+1]: pair positions
      // 4h + 2g and 4h + 2g + 1, each 32 values widened to int16 (the shuffles' selectors are
      // immediates, hence no loop).
      const __m512i lanes01 = _mm512_shuffle_i64x2(low, high, 0x44), lanes23 = _mm512_shuffle_i64x2(low, high, 0xEE);
      const __m512i pairs[2] = {_mm512_shuffle_i64x2(lanes01, lanes01, 0xD8), _mm512_shuffle_i64x2(lanes23, lanes23, 0xD8)};
      for (int g = 0; g < 2; ++g) {
        const int q = 4 * h + 2 * g;
        _mm512_storeu_si512(out + q * (2 * kChunk), _mm512_cvtepi8_epi16(_mm512_castsi512_si256(pairs[g])));
        _mm512_storeu_si512(out + (q + 1) * (2 * kChunk), _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(pairs[g], 1)));
      }
    }
  }
  return nan;
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool has_avx512bw() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return yes;
}
#endif

// Compiled as dot_rows is (below), for the vector steps of decode_chunk.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
void decode_row(const uint8_t* packed, const uint8_t* scales, int64_t k, ScaleSemantics semantics,
                DecodedRow& row) {
  const int64_t kb = (k + kBlock - 1) / kBlock, full = k / kBlock;
  const int64_t blocks = chunk_count(kb) * kChunk;
  // Rows of one problem all have the same k, so every row writes the same cells and the rest
  // (the tail of a partial last block, the blocks beyond kb) keeps the zeros of the first
  // allocation: reused buffers need no clearing.
  if (row.values.size() != static_cast<size_t>(blocks * kBlock)) {
    row.values.assign(static_cast<size_t>(blocks * kBlock), 0);
    row.weight.assign(static_cast<size_t>(blocks), 0);
  }
  const bool* negative = kScaleTable.negative[semantics == ScaleSemantics::e4m3];
  bool nan = false;
  int64_t whole = 0;  // chunks decoded already
#ifdef NVFP4_DECODE_AVX512
  if (full >= kChunk && has_avx512bw()) {
    whole = full / kChunk;
    nan = decode_chunks_avx512(packed, scales, whole, kScaleTable.word[semantics == ScaleSemantics::e4m3],
                               row.values.data(), row.weight.data());
  }
#endif
  for (int64_t s0 = whole * kChunk; s0 < kb; s0 += kChunk) {
    const int64_t s1 = std::min(kb, s0 + kChunk);
    int32_t neg[kChunk] = {};
    for (int64_t s = s0; s < s1; ++s) {
      const uint8_t scale = scales[s];
      nan |= kScaleTable.nan[scale];
      row.weight[s] = kScaleTable.weight[scale];
      neg[s - s0] = negative[scale] ? -1 : 0;
    }
    int16_t* chunk = row.values.data() + (s0 / kChunk) * kChunkValues;
    if (s0 + kChunk <= full) {
      I32x16 lanes;
      std::memcpy(&lanes, neg, sizeof lanes);
      decode_chunk(packed + s0 * kPairs, lanes, chunk);
      continue;
    }
    // The last chunk when it is short or ends in a partial block: a block at a time.
    for (int64_t s = s0; s < s1; ++s) {
      const uint32_t* table = kByteTable.pair[neg[s - s0] != 0];
      int16_t* out = chunk + (s - s0) * 2;
      const uint8_t* bytes = packed + s * kPairs;
      if (s < full) {  // a whole block: one 8-byte load, 8 stores the compiler unrolls
        uint64_t word;
        std::memcpy(&word, bytes, sizeof word);
        for (int q = 0; q < kPairs; ++q, word >>= 8) std::memcpy(out + q * (2 * kChunk), &table[word & 0xFF], 4);
      } else {
        const int64_t nbytes = (k - s * kBlock) / 2;  // k is even
        for (int64_t q = 0; q < nbytes; ++q) std::memcpy(out + q * (2 * kChunk), &table[bytes[q]], 4);
      }
    }
  }
  row.nan = nan;
}

// Bounds that make the int64 chunk sums safe: |a*b| <= 12*12 = 144 (doubled values), so a lane's
// (half a block's) dot and |dot| are <= 8*144 = 1152 (int16 is exact); sigA*sigB <= 15*15 = 225
// and expA+expB+18 <= 28, so a block contributes < 2304*225*2^28 < 2^48 to its int64 lane. The
// 128-bit totals hold any k (|sum| < k*2^43).
constexpr int64_t kRowGroup = 8;  // output rows per work item, see exact_gemm

// A chunk's blocks' running sums, one int64 lane a block position (blocks 8h .. 8h+7 of every
// chunk in the lanes of half h): the signed and absolute sums in 2^-20 units, the nonzero
// products' count and the OR of every block term (for g). A block term is below 2^48 (the bounds
// above), so a lane holds 2^10 chunks below 2^58 and the sixteen lanes' total stays below 2^62;
// dot_element adds that into its 128-bit totals every 2^10 chunks.
using Wide = int64_t __attribute__((vector_size(8 * sizeof(int64_t))));
using Weights = int32_t __attribute__((vector_size(8 * sizeof(int32_t))));
using HalfLanes = int16_t __attribute__((vector_size(8 * sizeof(int16_t))));
constexpr int64_t kChunksPerFold = int64_t(1) << 10;
struct BlockSums {
  Wide sum[2] = {}, abs[2] = {}, count[2] = {}, any[2] = {};
};

// By reference: a 512-bit vector passed by value changes the calling convention on builds
// without AVX-512 (clang warns).
inline __attribute__((always_inline)) int64_t lane_total(const Wide& lanes) {
  Wide v = lanes;
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
  v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
  return v[0];
}
inline __attribute__((always_inline)) int64_t lane_or(const Wide& lanes) {
  Wide v = lanes;
  v |= __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
  v |= __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
  v |= __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
  return v[0];
}

// A chunk's products: [h] holds blocks 8h .. 8h+7, lane 2s+e the pair element e of block 8h+s.
struct ChunkLanes {
  Lanes dot[2] = {}, abs[2] = {}, bits[2] = {}, count[2] = {};
};
// kHalves: how many of the chunk's two halves (blocks 0-7, 8-15) hold live blocks; a chunk of at
// most 8 live blocks (k <= 128, or a short last chunk) leaves the second half's vector steps out,
// since its lanes are padding zeros that add nothing.
template <int kHalves>
inline __attribute__((always_inline)) void chunk_products(const int16_t* av, const int16_t* bv, ChunkLanes& l) {
  for (int q = 0; q < kPairs; ++q) {
    for (int h = 0; h < kHalves; ++h) {
      Lanes x, y;
      std::memcpy(&x, av + (2 * q + h) * kLanes, sizeof x);
      std::memcpy(&y, bv + (2 * q + h) * kLanes, sizeof y);
      const Lanes p = x * y;
      const Lanes sign = p >> 15;
      const Lanes mag = (p ^ sign) - sign;
      l.dot[h] += p;
      l.abs[h] += mag;
      l.bits[h] |= mag;
      l.count[h] -= (p != 0);  // a true comparison lane is -1
    }
  }
}

// Half h's lane pairs folded: lane s is block 8h + s of the chunk.
struct HalfBlocks {
  HalfLanes dot, abs, bits, count;
};
inline __attribute__((always_inline)) HalfBlocks fold_half(const ChunkLanes& l, int h) {
#define NVFP4_EVEN 0, 2, 4, 6, 8, 10, 12, 14
#define NVFP4_ODD 1, 3, 5, 7, 9, 11, 13, 15
  return {__builtin_shufflevector(l.dot[h], l.dot[h], NVFP4_EVEN) + __builtin_shufflevector(l.dot[h], l.dot[h], NVFP4_ODD),
          __builtin_shufflevector(l.abs[h], l.abs[h], NVFP4_EVEN) + __builtin_shufflevector(l.abs[h], l.abs[h], NVFP4_ODD),
          __builtin_shufflevector(l.bits[h], l.bits[h], NVFP4_EVEN) | __builtin_shufflevector(l.bits[h], l.bits[h], NVFP4_ODD),
          __builtin_shufflevector(l.count[h], l.count[h], NVFP4_EVEN) +
              __builtin_shufflevector(l.count[h], l.count[h], NVFP4_ODD)};
#undef NVFP4_EVEN
#undef NVFP4_ODD
}

// One chunk's block sums into `acc`. Blocks past kb weigh 0 (DecodedRow), so their terms and
// counts are 0 in every lane.
template <int kHalves>
inline __attribute__((always_inline)) void dot_chunk(const int16_t* av, const int16_t* bv, const int32_t* wa,
                                                      const int32_t* wb, BlockSums& acc) {
  ChunkLanes l;
  chunk_products<kHalves>(av, bv, l);
  for (int h = 0; h < kHalves; ++h) {
    const HalfBlocks f = fold_half(l, h);
    Weights a, b;
    std::memcpy(&a, wa + 8 * h, sizeof a);
    std::memcpy(&b, wb + 8 * h, sizeof b);
    // 2^-2 * sa * sb in 2^-20 units, below 2^36: the products of sign-extended 32-bit weights.
    const Wide unit = __builtin_convertvector(a, Wide) * __builtin_convertvector(b, Wide);
    acc.sum[h] += __builtin_convertvector(f.dot, Wide) * unit;
    acc.abs[h] += __builtin_convertvector(f.abs, Wide) * unit;
    acc.any[h] |= __builtin_convertvector(f.bits, Wide) * unit;
    acc.count[h] += __builtin_convertvector(f.count, Wide) & (unit != 0);
  }
}

// Up to this many blocks (k <= 64), one scalar step a live block costs less than the vector
// terms and their folds (256x256x16 ran 7% slower with the vectors alone).
constexpr int64_t kScalarBlocks = 4;

inline __attribute__((always_inline)) void dot_element(const DecodedRow& a, const DecodedRow& b,
                                                        int64_t kb, ExactElement& out) {
  // g: the lowest set bit of any block term bits * unit is the smallest trailing-zero count of
  // them (tz(x|y) = min(tz x, tz y)), so the terms are ORed and counted once at the end.
  uint64_t any = 0;
  out.nan = a.nan || b.nan;
  if (kb <= kScalarBlocks) {
    ChunkLanes l;
    chunk_products<1>(a.values.data(), b.values.data(), l);
    const HalfBlocks f = fold_half(l, 0);
    int64_t sum = 0, abs_sum = 0, nonzero = 0;
    for (int64_t s = 0; s < kb; ++s) {
      const int64_t unit = int64_t{a.weight[s]} * b.weight[s];  // 2^-2 * sa * sb in 2^-20 units
      sum += f.dot[s] * unit;
      abs_sum += f.abs[s] * unit;
      nonzero += unit != 0 ? f.count[s] : 0;
      any |= static_cast<uint64_t>(f.bits[s] * unit);
    }
    out.sum = sum;
    out.abs_sum = static_cast<u128>(abs_sum);
    out.nonzero = nonzero;
    out.min_tz = any == 0 ? 128 : __builtin_ctzll(any);
    return;
  }
  const int64_t chunks = chunk_count(kb);
  i128 sum = 0;
  u128 abs_sum = 0;
  int64_t nonzero = 0;
  for (int64_t c0 = 0; c0 < chunks; c0 += kChunksPerFold) {
    const int64_t c1 = std::min(chunks, c0 + kChunksPerFold);
    BlockSums acc;
    for (int64_t c = c0; c < c1; ++c) {
      const int16_t* av = a.values.data() + c * kChunkValues;
      const int16_t* bv = b.values.data() + c * kChunkValues;
      const int32_t* wa = a.weight.data() + c * kChunk;
      const int32_t* wb = b.weight.data() + c * kChunk;
      if (kb - c * kChunk > kChunk / 2) {
        dot_chunk<2>(av, bv, wa, wb, acc);
      } else {
        dot_chunk<1>(av, bv, wa, wb, acc);
      }
    }
    sum += lane_total(acc.sum[0] + acc.sum[1]);
    abs_sum += static_cast<u128>(lane_total(acc.abs[0] + acc.abs[1]));
    nonzero += lane_total(acc.count[0] + acc.count[1]);
    any |= static_cast<uint64_t>(lane_or(acc.any[0] | acc.any[1]));
  }
  out.sum = sum;
  out.abs_sum = abs_sum;
  out.nonzero = nonzero;
  out.min_tz = any == 0 ? 128 : __builtin_ctzll(any);
}

// A group of output rows: A rows `rows` against every decoded B column, columns outermost so
// that a column is read from memory once per group, not once per row. Compiled three times on
// x86-64 (AVX-512 as x86-64-v4 has it, AVX2, the baseline) and picked at load time, so one binary
// runs everywhere and is fast where it can. The same 16-lane code with AVX-512's registers and
// mask compares: grouped_gemm_tc's schedule reference 8% faster on one core than the AVX2 clone
// (bench/case_work_bench; x86-64-v3 alone gains nothing; 32-lane steps were slower).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
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

namespace {

// The operands of one (batched) GEMM: l batches of m x k A against n x k B, linear scales; a
// dual GEMM's second B (the same shape) in b2 and sfb2, else null.
struct Operands {
  const uint8_t *a, *sfa, *b, *sfb;
  int64_t m, n, k, l;
  ScaleSemantics semantics;
  const uint8_t *b2 = nullptr, *sfb2 = nullptr;
};

// Decoded columns of several batches are kept at once up to this size (a batch's own are kept
// whatever their size).
constexpr int64_t kBatchColumnBytes = int64_t(64) << 20;

// Every element of one GEMM into elems[(b*m + i)*n + j], and with x.b2 every element against the
// second B into elems2 at the same place (each A row decoded once for both); finish(base, count)
// runs on each block of finished elements inside the parallel region (the final rounding, while
// they are in cache). The columns of every batch are decoded first, then row groups of all batches
// are shared out: one parallel region for the whole GEMM, where a region a batch (and one for
// each of a dual GEMM's two) cost a wake-up of every thread at each start, worksharing loop and
// end, as much as a small batch's products (threads wait passively: cli/main.cc). Past
// kBatchColumnBytes of decoded columns, a region for each batch.
// may_share: whether the GEMM may start a team of threads (false: this thread alone).
template <class Finish>
void exact_elements(const Operands& x, ExactElement* elems, ExactElement* elems2, const Finish& finish,
                    bool may_share = true) {
  const int64_t m = x.m, n = x.n, k = x.k, kb = (k + 15) / 16, l = x.l;
  const int64_t operands = x.b2 ? 2 : 1;  // B and B2: decoded columns per output column
  const int64_t column_bytes = chunk_count(kb) * (kChunkValues * int64_t{sizeof(int16_t)} + kChunk * int64_t{sizeof(int32_t)});
  const int64_t batch_bytes = std::max<int64_t>(1, operands * n * column_bytes);
  // Rows per work item: enough to reuse each decoded column from cache, few enough that
  // GEMV (n = 1, where nothing is reused) still splits into many items.
  const int64_t groups = ceil_div(m, kRowGroup);
  // Below about 2^18 multiply-adds (~0.1 ms) starting threads costs more than it saves; a GEMM
  // on one thread decodes a batch at a time into the same columns.
  const auto shared = [&](int64_t batches) {
    return may_share && batches * operands * m * n * k >= (int64_t(1) << 18) && batches * groups > 1;
  };
  const int64_t per_region =
      shared(l) ? std::max<int64_t>(1, std::min<int64_t>(l, kBatchColumnBytes / batch_bytes)) : 1;
  std::vector<DecodedRow> cols(static_cast<size_t>(per_region * operands * n));
  for (int64_t b0 = 0; b0 < l; b0 += per_region) {
    const int64_t batches = std::min(per_region, l - b0);
    const bool parallel = shared(batches);
    // Each output element is computed by one thread from the same decoded data, in a fixed
    // order, with exact integer sums: nothing depends on the thread count or schedule.
#pragma omp parallel if (parallel)
    {
      // Column c: batch b0 + c / (operands * n), operand (c / n) % operands, column c % n.
#pragma omp for schedule(static)
      for (int64_t c = 0; c < batches * operands * n; ++c) {
        const int64_t row = (b0 + c / (operands * n)) * n + c % n;
        const bool second = (c / n) % operands == 1;
        decode_row((second ? x.b2 : x.b) + row * (k / 2), (second ? x.sfb2 : x.sfb) + row * kb, k, x.semantics,
                   cols[static_cast<size_t>(c)]);
      }
      DecodedRow rows[kRowGroup];
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = 0; item < batches * groups; ++item) {
        const int64_t b = b0 + item / groups, first = (item % groups) * kRowGroup;
        const int64_t count = std::min<int64_t>(kRowGroup, m - first);
        for (int64_t r = 0; r < count; ++r)
          decode_row(x.a + (b * m + first + r) * (k / 2), x.sfa + (b * m + first + r) * kb, k, x.semantics,
                     rows[r]);
        const int64_t base = (b * m + first) * n;
        const DecodedRow* batch_cols = cols.data() + (b - b0) * operands * n;
        dot_rows(rows, count, batch_cols, n, kb, elems + base);
        if (x.b2) dot_rows(rows, count, batch_cols + n, n, kb, elems2 + base);
        finish(base, count * n);
      }
    }
  }
}

// Rounds elems[base, base + count) with alpha into the result's words from `offset` on.
struct RoundInto {
  ExactResult* result;
  const ExactElement* elems;
  int64_t offset;
  float alpha;
  void operator()(int64_t base, int64_t count) const {
    const ExactElement* e = elems + base;
    switch (result->out_type) {
      case OutType::fp16: {
        uint16_t* c = result->c.data() + offset + base;
        for (int64_t x = 0; x < count; ++x) c[x] = round_result(e[x], alpha);
        break;
      }
      case OutType::bf16: {
        uint16_t* c = result->c.data() + offset + base;
        for (int64_t x = 0; x < count; ++x) c[x] = static_cast<uint16_t>(round_result(e[x], alpha, OutType::bf16));
        break;
      }
      case OutType::fp32:
      case OutType::nvfp4: {  // the FP32 values the block-scaled output quantizes
        uint32_t* c = result->c32.data() + offset + base;
        for (int64_t x = 0; x < count; ++x) c[x] = round_result(e[x], alpha, OutType::fp32);
        break;
      }
    }
  }
};

// A dual GEMM's elements [base, base + count) from G's and U's sums in the result: silu(G) * U
// and its word.
struct DualInto {
  ExactResult* result;
  float alpha, alpha2;
  void operator()(int64_t base, int64_t count) const {
    const bool wide = out_word_bytes(result->out_type) == 4;
    for (int64_t e = base; e < base + count; ++e) {
      const ExactElement &g = result->elems[static_cast<size_t>(e)], &u = result->elems2[static_cast<size_t>(e)];
      const DualValue d = dual_value(g, alpha, u, alpha2);
      result->dual[static_cast<size_t>(e)] = d;
      const uint32_t w = round_dual(d, g.nan || u.nan, result->out_type);
      if (wide) {
        result->c32[static_cast<size_t>(e)] = w;
      } else {
        result->c[static_cast<size_t>(e)] = static_cast<uint16_t>(w);
      }
    }
  }
};

// mag rounded to 64 significant bits, ties to even: the integer (long double)mag holds.
u128 round_to_64_bits(u128 mag) {
  const int width = bit_width_u128(mag);
  if (width <= 64) return mag;
  const int shift = width - 64;
  const u128 q = mag >> shift, rem = mag & ((u128(1) << shift) - 1), half = u128(1) << (shift - 1);
  const bool up = rem > half || (rem == half && (q & 1));
  return (q + (up ? 1 : 0)) << shift;
}

// G's exact value as hi + lo (hi = G rounded to long double, lo = G - hi to 2^-64 of itself):
// silu's exp(-G) needs G to better than long double's 2^-64 relative once |G| is large (an
// error d in G is a relative error d in exp(-G), and |G| reaches 2^14 before exp overflows).
void exact_split(bool sum_negative, u128 mag, int exp2, float alpha, long double* hi, long double* lo) {
  const Fp32Parts a = fp32_parts(alpha);
  exp2 += a.exp;
  while (bit_width_u128(mag) > 103) {  // mag * sig < 2^127: its long double rounding fits u128
    mag = (mag >> 1) | (mag & 1);
    ++exp2;
  }
  mag *= a.sig;
  long double h = 0, r = 0;
  if (mag >> 64 == 0) {
    h = static_cast<long double>(static_cast<uint64_t>(mag));  // exact; libgcc's 128-bit conversion is not needed
  } else {
    h = static_cast<long double>(mag);          // rounded to nearest, 64 bits
    const u128 h_int = round_to_64_bits(mag);   // the same integer
    r = h_int >= mag ? -static_cast<long double>(h_int - mag) : static_cast<long double>(mag - h_int);
  }
  const bool negative = sum_negative != a.negative;
  // Scaling by 2^exp2 is exact: |exp2| stays far inside long double's exponent range.
  const long double scale = pow2l(exp2);
  *hi = (negative ? -h : h) * scale;
  *lo = (negative ? -r : r) * scale;
}

// A grouped problem's GEMMs into result (sized, its group offsets set). A GEMM of at least
// kSharedWork products (about 2 ms on a core) is shared by the team as any GEMM is; the smaller
// ones, most of a mixture-of-experts case, go one thread each, the largest first, in one parallel
// region. Threads wait passively (cli/main.cc), so a region costs wake-ups at its start, its
// worksharing loops and its end: a region for each of twenty-odd groups made grouped_gemm_tc's
// schedule 3.6 ms a case on 2 threads, against 2.4 ms now (bench/case_work_bench.cc; 2^21 and
// 2^24 as the threshold: 2.5 ms).
void exact_groups(const Problem& p, ExactResult& result) {
  constexpr int64_t kSharedWork = int64_t(1) << 22;
  std::vector<std::pair<int64_t, size_t>> alone;  // (products, group)
  int64_t alone_work = 0;
  const auto gemm = [&](size_t g, bool may_share) {
    const Group& q = p.groups[g];
    const Operands group{q.a.data(), q.sfa.data(), q.b.data(), q.sfb.data(), q.m, q.n, q.k, 1, p.semantics};
    ExactElement* elems = result.elems.data() + result.group_offset[g];
    exact_elements(group, elems, nullptr, RoundInto{&result, elems, result.group_offset[g], q.alpha}, may_share);
  };
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const Group& q = p.groups[g];
    if (q.m == 0) continue;  // an empty group has no output
    const int64_t work = q.m * q.n * q.k;
    if (work >= kSharedWork) {
      gemm(g, true);
    } else {
      alone.emplace_back(work, g);
      alone_work += work;
    }
  }
  std::sort(alone.begin(), alone.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  const int64_t count = static_cast<int64_t>(alone.size());
#pragma omp parallel for schedule(dynamic, 1) if (alone_work >= (int64_t(1) << 18) && count > 1)
  for (int64_t x = 0; x < count; ++x) gemm(alone[static_cast<size_t>(x)].second, false);
}

}  // namespace

uint32_t round_result(const ExactElement& e, float alpha, OutType type) {
  if (type == OutType::fp16) return round_result(e, alpha);
  if (e.nan) return out_format(type).quiet_nan;
  return round_scaled_sum_out(type, e.sum, alpha);
}

DualValue dual_value(const ExactElement& g, float alpha, const ExactElement& u, float alpha2) {
  const auto mag = [](i128 v) { return v < 0 ? static_cast<u128>(-v) : static_cast<u128>(v); };
  return dual_value(DualSum{g.sum < 0, mag(g.sum), -20}, alpha, DualSum{u.sum < 0, mag(u.sum), -20}, alpha2);
}

DualValue dual_value(const DualSum& g, float alpha, const DualSum& u, float alpha2) {
  long double gh = 0, gl = 0, uh = 0, ul = 0;
  exact_split(g.negative, g.mag, g.exp2, alpha, &gh, &gl);
  exact_split(u.negative, u.mag, u.exp2, alpha2, &uh, &ul);
  // exp(-G) = exp(-hi) * exp(-lo), the same bits on every host (long_double_exp.h). Past G =
  // 44.5, exp(-G) < 2^-64 and 1 + exp(-G) rounds to 1 whatever its value: silu(G) = G without it.
  // Otherwise only a nonzero, finite exp(-hi) needs the low part: then |G| < 11400 and |lo| <=
  // 2^-51, so exp(-lo) - 1 = -lo + lo^2/2 to far below 2^-64 of itself.
  long double e = gh > 44.5L ? 0.0L : exp_ld(-gh);
  if (e != 0 && ld_is_finite(e) && gl != 0) e += e * (gl * gl * 0.5L - gl);
  DualValue d{};
  d.silu_g = gh / (1 + e);  // -0 when exp(-G) overflows (G < -11356): v underflows every type
  d.u = uh;
  d.v = d.silu_g * d.u;
  return d;
}

uint32_t round_dual(const DualValue& d, bool nan, OutType type) {
  const OutFormat f = out_format(type);
  if (nan) return f.quiet_nan;
  // The values' signs and zeros from their bytes (long_double_bits.h): x87 loads and compares of
  // the stored values were most of this function's time.
  if (dual_word_is_plus_zero(d)) return 0;  // an exact zero is +0
  const bool negative = ld_signbit(d.silu_g) != ld_signbit(d.u);
  if (ld_is_zero(d.v)) return negative ? f.sign_bit : 0u;  // nonzero, below long double's range
  if (kX87LongDouble && ld_is_finite(d.v)) {
    // |v| = significand * 2^(exponent - 16383 - 63); a subnormal (exponent 0) has no integer bit.
    // (libm's frexpl and ldexpl here were a fifth of a dual GEMM's reference.)
    const X87Bits v = x87_bits(d.v);
    return out_round(type, negative, v.significand, (v.exponent() == 0 ? 1 : v.exponent()) - 16383 - 63);
  }
  int e = 0;
  const long double frac = std::frexp(std::fabs(d.v), &e);  // in [0.5, 1)
  const uint64_t mag = static_cast<uint64_t>(std::ldexp(frac, 64));  // exact: 64 bits
  return out_round(type, negative, mag, e - 64);
}

std::vector<uint32_t> ExactResult::words() const {
  if (out_word_bytes(out_type) == 4) return c32;
  return std::vector<uint32_t>(c.begin(), c.end());
}

namespace {

// A dual GEMM's result around G's and U's sums, its silu values and words to be written.
ExactResult dual_frame(const Problem& p, ExactElements g_sums, ExactElements u_sums) {
  const size_t count = static_cast<size_t>(p.c_elems());
  ExactResult result;
  result.out_type = p.out_type;
  result.group_offset = group_output_offsets(p);
  if (out_word_bytes(p.out_type) == 4) {
    result.c32.resize(count);
  } else {
    result.c.resize(count);
  }
  result.elems = std::move(g_sums);
  result.elems2 = std::move(u_sums);
  result.dual.resize(count);
  return result;
}

void check_reference_input(const Problem& p, const char* who) {
  const std::string error = problem_error(p);
  if (!error.empty()) throw std::invalid_argument(std::string(who) + ": " + error);
  if (!p.has_data())
    throw std::invalid_argument(std::string(who) + ": the problem has no data (a seed-only case not expanded?)");
}

}  // namespace

ExactResult exact_quantize(const Problem& p) {
  check_reference_input(p, "exact_quantize");
  if (!op_quantizes(p.op)) throw std::invalid_argument(std::string("exact_quantize: op ") + to_string(p.op) + " is not a quantizer");
  ExactResult result;
  result.quant = std::make_shared<const QuantResult>(quantize_reference(p));
  result.group_offset = {0, 0};
  return result;
}

ExactResult exact_gemm(const Problem& p) {
  check_reference_input(p, "exact_gemm");
  // The GEMM family's reference: another op's lives with its module (an op this code does not
  // know would otherwise be computed as the GEMM it resembles).
  if (p.op != Op::gemv && p.op != Op::gemm && !op_is_grouped(p.op) && !op_is_dual(p.op))
    throw std::invalid_argument(std::string("exact_gemm: op ") + to_string(p.op) +
                                " is not of the GEMM family (its module has its reference)");
  if (p.mx_operands()) return exact_mx_result(p);
  const size_t count = static_cast<size_t>(p.c_elems());
  const Operands x{p.a.data(), p.sfa.data(), p.b.data(), p.sfb.data(), p.m, p.n, p.k, p.l, p.semantics};
  if (op_is_dual(p.op)) {  // G's and U's sums side by side, then silu and the word of each element
    Operands both = x;
    both.b2 = p.b2.data();
    both.sfb2 = p.sfb2.data();
    ExactResult result = dual_frame(p, ExactElements(count), ExactElements(count));
    exact_elements(both, result.elems.data(), result.elems2.data(), DualInto{&result, p.alpha, p.alpha2});
    return result;
  }
  ExactResult result;
  result.out_type = p.out_type;
  result.elems.resize(count);
  if (out_word_bytes(p.out_type) == 4) {
    result.c32.resize(count);
  } else {
    result.c.resize(count);
  }
  result.group_offset = group_output_offsets(p);

  if (op_is_grouped(p.op)) {
    exact_groups(p, result);
    return result;
  }

  exact_elements(x, result.elems.data(), nullptr, RoundInto{&result, result.elems.data(), 0, p.alpha});
  return result;
}

ExactResult dual_from_sums(const Problem& p, ExactElements g_sums, ExactElements u_sums) {
  const size_t count = static_cast<size_t>(p.c_elems());
  if (!op_is_dual(p.op) || g_sums.size() != count || u_sums.size() != count)
    throw std::invalid_argument("dual_from_sums: not a dual GEMM, or sums of another size");
  ExactResult result = dual_frame(p, std::move(g_sums), std::move(u_sums));
  const DualInto finish{&result, p.alpha, p.alpha2};
  constexpr int64_t kPiece = 1024;
  const int64_t total = static_cast<int64_t>(count), pieces = ceil_div(total, kPiece);
#pragma omp parallel for schedule(static) if (total >= 4096)
  for (int64_t x = 0; x < pieces; ++x) finish(x * kPiece, std::min(kPiece, total - x * kPiece));
  return result;
}

uint32_t expect_word(const Problem& p, int64_t index) {
  if (op_quantizes(p.op) || p.out_type == OutType::nvfp4) {
    const int64_t q = static_cast<int64_t>(p.expect_q ? p.expect_q->size() : 0);
    return index < q ? (*p.expect_q)[static_cast<size_t>(index)] : (*p.expect_sfq)[static_cast<size_t>(index - q)];
  }
  if (!op_is_grouped(p.op)) return (*p.expect)[static_cast<size_t>(index)];
  const OutputPosition pos = output_position(p, index);
  const Group& g = p.groups[static_cast<size_t>(pos.g)];
  return (*g.expect)[static_cast<size_t>(pos.i * g.n + pos.j)];
}

void set_expect(Problem& p, const ExactResult& ref) {
  clear_expect(p);
  if (!op_quantizes(p.op) && p.out_type == OutType::nvfp4) {
    set_block_scaled_expect(p, ref);
    return;
  }
  if (op_quantizes(p.op)) {
    p.expect_q = ref.quant->q;
    p.expect_sfq = ref.quant->sfq;
    return;
  }
  if (!op_is_grouped(p.op)) {
    p.expect = ref.words();
    return;
  }
  for (size_t g = 0; g < p.groups.size(); ++g) {
    Group& q = p.groups[g];
    if (q.m == 0) continue;
    std::vector<uint32_t> words(static_cast<size_t>(q.c_elems()));
    for (size_t x = 0; x < words.size(); ++x) words[x] = ref.word(static_cast<size_t>(ref.group_offset[g]) + x);
    q.expect = std::move(words);
  }
}

ExpectComparison compare_expect(const Problem& p, const ExactResult& ref, size_t max_listed) {
  ExpectComparison out;
  if (op_quantizes(p.op) || p.out_type == OutType::nvfp4) {
    // Bytes of Q, then of SFQ (linear): every byte equal. A recorded expect_q of a stochastic
    // case is what the reference's own random source gave, so it compares the same way.
    const auto compare_bytes = [&](const std::optional<std::vector<uint8_t>>& expect, const std::vector<uint8_t>& got,
                                   int64_t base) {
      if (!expect) return;
      out.any_expect = true;
      for (size_t x = 0; x < expect->size() && x < got.size(); ++x) {
        ++out.compared;
        if ((*expect)[x] != got[x] && out.differing++ < static_cast<int64_t>(max_listed))
          out.first.push_back(base + static_cast<int64_t>(x));
      }
    };
    if (op_quantizes(p.op)) {
      compare_bytes(p.expect_q, ref.quant->q, 0);
      compare_bytes(p.expect_sfq, ref.quant->sfq, static_cast<int64_t>(ref.quant->q.size()));
      return out;
    }
    // Block-scaled output: the reference's Q and SFQ (linear), as set_block_scaled_expect records them.
    if (!p.expect_q && !p.expect_sfq) return out;
    const std::vector<uint8_t> bytes = block_scaled_expect_bytes(p, ref);
    const auto q = static_cast<std::ptrdiff_t>(out_q_bytes(p));
    compare_bytes(p.expect_q, std::vector<uint8_t>(bytes.begin(), bytes.begin() + q), 0);
    compare_bytes(p.expect_sfq, std::vector<uint8_t>(bytes.begin() + q, bytes.end()), q);
    return out;
  }
  auto compare = [&](const std::vector<uint32_t>& expect, int64_t base) {
    out.any_expect = true;
    for (size_t x = 0; x < expect.size(); ++x) {
      const int64_t index = base + static_cast<int64_t>(x);
      ++out.compared;
      if (same_result_out(p.out_type, expect[x], ref.word(static_cast<size_t>(index)))) continue;
      if (out.differing++ < static_cast<int64_t>(max_listed)) out.first.push_back(index);
    }
  };
  if (op_is_grouped(p.op)) {
    const std::vector<int64_t> offsets = group_output_offsets(p);
    for (size_t g = 0; g < p.groups.size(); ++g) {
      if (p.groups[g].expect) compare(*p.groups[g].expect, offsets[g]);
    }
  } else if (p.expect) {
    compare(*p.expect, 0);
  }
  return out;
}

}  // namespace nvfp4
