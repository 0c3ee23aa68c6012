// The exact reference on the GPU. Products are summed as integers in units of 2^-20, like the CPU
// reference: E2M1 codes become small integers (doubled values, |v| <= 12), each 16-element block
// is an integer dot product (dp4a in the GEMV kernel, one integer tensor-core mma per 16 x 8
// outputs in the GEMM kernel), times the integer significands of its two scales, shifted into a
// 64-bit fixed-point accumulator. The final rounding is reference/scaled_round.h's, the same
// function the CPU reference uses.
#include "gpu_reference/exact_gemm_gpu.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_reference/device_array.h"
#include "gpu_reference/packed_elements.h"
#include "reference/formats.h"
#include "reference/scaled_round.h"

namespace nvfp4 {
namespace {

using gpu::check_cuda;
using gpu::DeviceArray;
using gpu::PackedElement;
using gpu::upload;

// Four int8 values' nonzero flags as 4 bits (bytes 0..3 -> bits 0..3): the multiply gathers the
// low bit of each byte into bits 24..27, and no two partial products overlap.
__device__ __forceinline__ uint32_t nonzero_bits4(uint32_t v) {
  return (((__vcmpne4(v, 0u) & 0x01010101u) * 0x01020408u) >> 24) & 0xFu;
}

// One block's scale, ready for the inner loop (uint2):
//  x: the signed integer multiplier sign * sig * 2^(exp + 9), so that a block's dot product of
//     doubled values times x_A times x_B is its exact contribution in units of 2^-20
//     ((a/2)(b/2) sig_a sig_b 2^(ea+eb) = dot * sig_a 2^(ea+9) * sig_b 2^(eb+9) * 2^-20);
//     |x| < 2^18, so dot * x_A fits 32 bits and one 32x32->64 multiply-add finishes the term.
//     0 for a zero or NaN scale (a NaN block contributes nothing to r, S, t, g).
//  y: bits 0-15 the block's nonzero values (cleared when x = 0), bits 16-23 tz(|x|),
//     bit 24 the scale is NaN.
__device__ __forceinline__ uint2 block_scale(uint8_t byte, ScaleSemantics semantics, uint32_t nonzero) {
  const ScaleValue v = e4m3_decode(byte, semantics);
  const int mult = v.nan ? 0 : v.sign * (v.sig << (v.exp + 9));
  const uint32_t tz = mult ? static_cast<uint32_t>(__ffs(mult) - 1) : 0u;
  return make_uint2(static_cast<uint32_t>(mult), (mult ? nonzero : 0u) | (tz << 16) | (v.nan ? 1u << 24 : 0u));
}

__device__ __forceinline__ uint32_t nonzero_bits16(const uint32_t* w) {
  return nonzero_bits4(w[0]) | (nonzero_bits4(w[1]) << 4) | (nonzero_bits4(w[2]) << 8) | (nonzero_bits4(w[3]) << 12);
}

// Doubled E2M1 magnitudes of codes 0..7 as bytes: {0, 1, 2, 3, 4, 6, 8, 12}.
constexpr uint32_t kMagLo = 0x03020100u, kMagHi = 0x0C080604u;

// Four E2M1 codes (the low 16 bits of w, element order) to four signed int8 values in one word:
// prmt looks the magnitudes up, a second prmt turns sign bits into 0xFF byte masks.
__device__ __forceinline__ uint32_t decode4(uint32_t w) {
  const uint32_t mag = __byte_perm(kMagLo, kMagHi, w & 0x7777u);
  const uint32_t neg = __byte_perm(0x0000FF00u, 0u, (w >> 3) & 0x1111u);
  return __vsub4(mag ^ neg, neg);
}

// Block s of a row of packed codes as 16 int8 values in four words, element order (zeros past k).
__device__ __forceinline__ void block_values(const uint8_t* __restrict__ packed, int64_t row, int64_t s, int64_t k,
                                             uint32_t (&w)[4]) {
  const uint8_t* src = packed + row * (k / 2) + s * 8;
  const int64_t nbytes = k / 2 - s * 8 < 8 ? k / 2 - s * 8 : 8;
  uint8_t bytes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < nbytes; ++i) bytes[i] = src[i];
  for (int q = 0; q < 4; ++q) w[q] = decode4(bytes[2 * q] | (uint32_t(bytes[2 * q + 1]) << 8));
}

// One thread per (row, block): the block's 16 codes as int8 and its packed scale (block_scale).
__global__ void decode_rows(const uint8_t* __restrict__ packed, const uint8_t* __restrict__ sf,
                            int64_t rows, int64_t k, int64_t kb, ScaleSemantics semantics,
                            uint4* __restrict__ vals, uint2* __restrict__ scales) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= rows * kb) return;
  const int64_t row = id / kb, s = id % kb;
  uint32_t w[4];
  block_values(packed, row, s, k, w);
  vals[id] = make_uint4(w[0], w[1], w[2], w[3]);
  scales[id] = block_scale(sf[id], semantics, nonzero_bits16(w));
}

// Running exact state of one output element (the fields of ExactElement, in 64 bits: enough for
// k <= 2^20, where every partial sum is below 2^63). NaN is the row's or column's, kept apart.
struct Acc {
  long long sum;
  unsigned long long abs_sum;
  int nonzero;
  int min_tz;  // 128: no nonzero product yet
};

__device__ __forceinline__ void acc_init(Acc& a) {
  a.sum = 0;
  a.abs_sum = 0;
  a.nonzero = 0;
  a.min_tz = 128;
}

// Adds one 16-element block to an accumulator: dot = sum a*b and adot = sum |a*b| over doubled
// values, sa/sb the blocks' block_scale(). av/bv are the block's values, read only on the rare
// path that can lower min_tz.
__device__ __forceinline__ void acc_block(Acc& acc, int dot, int adot, uint2 sa, uint2 sb, const uint32_t* av,
                                          const uint32_t* bv) {
  const int ma = static_cast<int>(sa.x), mb = static_cast<int>(sb.x);
  acc.sum += static_cast<long long>(dot * ma) * mb;
  acc.abs_sum += static_cast<unsigned long long>(static_cast<unsigned>(adot * abs(ma))) * static_cast<unsigned>(abs(mb));
  const int cnt = __popc(sa.y & sb.y & 0xFFFFu);  // nonzero products (0 when either scale is 0)
  acc.nonzero += cnt;
  // Every product of this block is a multiple of 2^(tz(ma) + tz(mb)); only when that is below the
  // running minimum can the block lower it, and then the exact minimum needs the products.
  const int base = static_cast<int>(((sa.y >> 16) & 0xFFu) + ((sb.y >> 16) & 0xFFu));
  if (cnt != 0 && base < acc.min_tz) {
    uint32_t bits = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
#pragma unroll
      for (int byte = 0; byte < 4; ++byte) {
        const int x = static_cast<int8_t>(av[w] >> (8 * byte));
        const int y = static_cast<int8_t>(bv[w] >> (8 * byte));
        bits |= static_cast<uint32_t>(abs(x * y));
      }
    }
    acc.min_tz = min(acc.min_tz, __ffs(bits) - 1 + base);
  }
}

__device__ __forceinline__ void acc_store(const Acc& acc, bool nan, float alpha, PackedElement* out) {
  PackedElement e;
  e.sum = acc.sum;
  e.abs_sum = acc.abs_sum;
  e.nonzero = static_cast<uint32_t>(acc.nonzero);
  e.min_tz = static_cast<uint8_t>(acc.min_tz);
  e.nan = nan ? 1 : 0;
  e.c = nan ? uint16_t(0x7E00) : round_scaled_sum(acc.sum, alpha);
  *out = e;
}

__device__ __forceinline__ uint32_t abs4(uint32_t v) { return __vabsss4(v); }

// ---------------------------------------------------------------------------------------------
// GEMM on the integer tensor cores. One mma.m16n8k16 (s8 x s8 -> s32) is exactly one scale
// block's dot products for a 16 x 8 tile of outputs, so three of them per block and tile give
// what the exact state needs: dot = sum a*b, adot = sum |a*b| (on |A| and |B|), and the count of
// nonzero products (on 0/1 indicators, accumulated across k inside the tensor core). What is
// left per output and block is the scaling: two 32x32->64 multiply-adds. min_tz needs the
// block only when its scales could lower it, which a compare per output (no branch) rules out
// most of the time; then the block's smallest product tz comes from both sides' trailing-zero
// masks (block_min_tz), without reading the values.
//
// Fragments (PTX ISA, mma.m16n8k16 with 8-bit types): lane = 4 g + t; A's registers hold row g
// and row g + 8, bytes 4t..4t+3 of the block; B's register holds column g, bytes 4t..4t+3; the
// accumulators hold rows g and g + 8, columns 2t and 2t + 1.
__device__ __forceinline__ void mma_s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b, const int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(b), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

// Four int8 values in [-12, 12]: their magnitudes, and 0/1 nonzero indicators. No carry crosses a
// byte: (v ^ sign) is at most 11 and gains 1; |v| + 0x7F is at most 0x8B.
__device__ __forceinline__ uint32_t abs4_small(uint32_t v) {
  uint32_t sign;  // 0xFF in each negative byte: prmt's selector bit 3 replicates a byte's sign
                  // (__byte_perm ignores that bit)
  asm("prmt.b32 %0, %1, 0, 0xBA98;\n" : "=r"(sign) : "r"(v));
  return (v ^ sign) + (sign & 0x01010101u);
}
__device__ __forceinline__ uint32_t nonzero4_small(uint32_t magnitudes) {
  return ((magnitudes + 0x7F7F7F7Fu) >> 7) & 0x01010101u;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Copies 16 bytes to shared memory asynchronously; when !valid it writes zeros instead.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending)); }

// The block's 16 int8 values as cumulative trailing-zero masks: bit e of mask p is set when value
// e is nonzero and tz(|value|) <= p (doubled E2M1 magnitudes have tz 0 to 3), masks 0 and 1 in
// the low and high half of *m01, 2 and 3 in *m23. Mask 3 is the nonzero values.
__device__ __forceinline__ void tz_masks(const uint32_t (&w)[4], uint32_t* m01, uint32_t* m23) {
  uint32_t mask[4] = {0, 0, 0, 0};
#pragma unroll
  for (int e = 0; e < 16; ++e) {
    const int v = abs(static_cast<int8_t>(w[e / 4] >> (8 * (e % 4))));
    if (v == 0) continue;
    const int tz = __ffs(v) - 1;
#pragma unroll
    for (int q = 0; q < 4; ++q) mask[q] |= q >= tz ? 1u << e : 0u;
  }
  *m01 = mask[0] | (mask[1] << 16);
  *m23 = mask[2] | (mask[3] << 16);
}

// The smallest tz(|x * y|) over the block's nonzero products x * y, from the two sides' tz_masks:
// the first s in 0..6 for which some p + q = s has value positions in both mask p of A and mask
// q of B (if tz(x) + tz(y) <= s, p = max(tz(x), s - 3) and q = s - p are such a pair). The block
// has at least one nonzero product.
__device__ __forceinline__ int block_min_tz(uint32_t a01, uint32_t a23, uint32_t b01, uint32_t b23) {
  const uint32_t a0 = a01 & 0xFFFFu, a1 = a01 >> 16, a2 = a23 & 0xFFFFu, a3 = a23 >> 16;
  const uint32_t b0 = b01 & 0xFFFFu, b1 = b01 >> 16, b2 = b23 & 0xFFFFu, b3 = b23 >> 16;
  if (a0 & b0) return 0;
  if ((a0 & b1) | (a1 & b0)) return 1;
  if ((a0 & b2) | (a1 & b1) | (a2 & b0)) return 2;
  if ((a0 & b3) | (a1 & b2) | (a2 & b1) | (a3 & b0)) return 3;
  if ((a1 & b3) | (a2 & b2) | (a3 & b1)) return 4;
  if ((a2 & b3) | (a3 & b2)) return 5;
  return 6;
}

// One block's scale for the GEMM: x the signed multiplier (as block_scale); y its magnitude in
// bits 0-23 and in bits 24-31 tz(|x|), or 64 when x = 0 so that an empty block never looks as if
// it could lower min_tz; z and w the values' tz_masks. NaN goes to a per-row flag instead of
// travelling with each block.
__global__ void decode_rows_mma(const uint8_t* __restrict__ packed, const uint8_t* __restrict__ sf, int64_t rows,
                                int64_t k, int64_t kb, ScaleSemantics semantics, uint4* __restrict__ vals,
                                uint4* __restrict__ scales, uint32_t* __restrict__ row_nan) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= rows * kb) return;
  const int64_t row = id / kb, s = id % kb;
  uint32_t w[4];
  block_values(packed, row, s, k, w);
  const ScaleValue v = e4m3_decode(sf[id], semantics);
  const int mult = v.nan ? 0 : v.sign * (v.sig << (v.exp + 9));
  // A zero or NaN scale's block contributes nothing: its values become zeros, so the tensor
  // cores' dot, |dot| and nonzero count leave it out without a test per block.
  if (!mult) w[0] = w[1] = w[2] = w[3] = 0;
  vals[id] = make_uint4(w[0], w[1], w[2], w[3]);
  uint32_t m01, m23;
  tz_masks(w, &m01, &m23);
  const uint32_t tz = mult ? static_cast<uint32_t>(__ffs(mult) - 1) : 64u;
  scales[id] = make_uint4(static_cast<uint32_t>(mult), static_cast<uint32_t>(abs(mult)) | (tz << 24), m01, m23);
  if (v.nan) row_nan[row] = 1u;  // racing stores of the same value
}

// kWarpsM x kWarpsN warps, each kTilesM x kTilesN mma tiles (16 x 8 outputs each); kStep scale
// blocks per shared-memory stage, kStages stages in flight.
template <int kWarpsM, int kWarpsN, int kTilesM, int kTilesN, int kStep, int kStages>
struct MmaGemm {
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kBM = kWarpsM * 16 * kTilesM, kBN = kWarpsN * 8 * kTilesN;
  // Four arrays of 16-byte entries per stage: A values, B values, A scales, B scales. Rows are 16
  // bytes apart, so the fragment reads of a warp hit 32 different banks.
  static constexpr int kEntries = kStep * 2 * (kBM + kBN);
  static constexpr int kPerThread = (kEntries + kThreads - 1) / kThreads;
  struct Stage {
    uint4 a[kStep][kBM];
    uint4 b[kStep][kBN];
    uint4 as[kStep][kBM];
    uint4 bs[kStep][kBN];
  };
  static constexpr int kSmemBytes = static_cast<int>(sizeof(Stage)) * kStages;
};

// kMinBlocks blocks per multiprocessor at least: the registers a thread may take follow from it
// (256 threads, three blocks: 80 at most).
template <int kWarpsM, int kWarpsN, int kTilesM, int kTilesN, int kStep, int kStages, int kMinBlocks>
__global__ void __launch_bounds__(32 * kWarpsM * kWarpsN, kMinBlocks)
    gemm_exact_mma(const uint4* __restrict__ av, const uint4* __restrict__ as, const uint4* __restrict__ bv,
                   const uint4* __restrict__ bs, const uint32_t* __restrict__ a_nan,
                   const uint32_t* __restrict__ b_nan, int64_t m, int64_t n, int64_t kb, float alpha,
                   PackedElement* __restrict__ out) {
  using G = MmaGemm<kWarpsM, kWarpsN, kTilesM, kTilesN, kStep, kStages>;
  constexpr int kBM = G::kBM, kBN = G::kBN, kThreads = G::kThreads;
  // Dynamic shared memory: more than the 48 KB a static array may take (G::kSmemBytes).
  extern __shared__ uint4 smem[];
  typename G::Stage* stages = reinterpret_cast<typename G::Stage*>(smem);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int wm0 = (warp / kWarpsN) * 16 * kTilesM, wn0 = (warp % kWarpsN) * 8 * kTilesN;
  const int64_t batch = blockIdx.z;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kBM, col0 = static_cast<int64_t>(blockIdx.x) * kBN;

  // This thread's entries of every stage, fixed for the whole loop: where from (the row's first
  // block, plus the entry's block within the step), where to (offset in a stage), and whether
  // its row exists.
  const uint4* src[G::kPerThread];
  uint32_t dst[G::kPerThread];
  int blk_of[G::kPerThread];
  bool live[G::kPerThread], active[G::kPerThread];  // active: the entry exists (kEntries may not
                                                     // fill the last round of threads)
#pragma unroll
  for (int e = 0; e < G::kPerThread; ++e) {
    const int x = threadIdx.x + e * kThreads;
    int which = 0, r = 0, blk = 0;
    if (x < kStep * kBM) {
      which = 0, r = x / kStep, blk = x % kStep;
    } else if (x < kStep * (kBM + kBN)) {
      which = 1, r = (x - kStep * kBM) / kStep, blk = (x - kStep * kBM) % kStep;
    } else if (x < kStep * (2 * kBM + kBN)) {
      which = 2, r = (x - kStep * (kBM + kBN)) / kStep, blk = (x - kStep * (kBM + kBN)) % kStep;
    } else {
      which = 3, r = (x - kStep * (2 * kBM + kBN)) / kStep, blk = (x - kStep * (2 * kBM + kBN)) % kStep;
    }
    const bool is_a = which == 0 || which == 2;
    const int64_t row = (is_a ? row0 : col0) + r;
    active[e] = x < G::kEntries;
    live[e] = active[e] && row < (is_a ? m : n);
    const uint4* base = which == 0 ? av : which == 1 ? bv : which == 2 ? as : bs;
    src[e] = base + ((batch * (is_a ? m : n)) + (live[e] ? row : 0)) * kb + blk;
    blk_of[e] = blk;
    typename G::Stage& s0 = stages[0];
    const uint4* slot = which == 0 ? &s0.a[blk][r] : which == 1 ? &s0.b[blk][r] : which == 2 ? &s0.as[blk][r] : &s0.bs[blk][r];
    dst[e] = smem_addr(slot);
  }
  const uint32_t stage_bytes = static_cast<uint32_t>(sizeof(typename G::Stage));
  auto load = [&](int stage, int64_t s0) {
#pragma unroll
    for (int e = 0; e < G::kPerThread; ++e) {
      const bool ok = live[e] && s0 + blk_of[e] < kb;
      if (active[e]) cp_async16(dst[e] + stage * stage_bytes, ok ? src[e] + s0 : av, ok);
    }
    cp_async_commit();
  };

  long long sum[kTilesM][kTilesN][4];
  unsigned long long abs_sum[kTilesM][kTilesN][4];
  int min_tz[kTilesM][kTilesN][4];
  int count[kTilesM][kTilesN][4];
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        sum[mt][nt][i] = 0;
        abs_sum[mt][nt][i] = 0;
        min_tz[mt][nt][i] = 128;
        count[mt][nt][i] = 0;
      }

  // Stage s holds blocks s*kStep.. of step s; kStages - 1 steps are in flight ahead of the one in
  // use, one commit group each (empty past the end, so the counting stays uniform).
  const int64_t steps = (kb + kStep - 1) / kStep;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) {
      load(s, static_cast<int64_t>(s) * kStep);
    } else {
      cp_async_commit();
    }
  }
  for (int64_t step = 0; step < steps; ++step) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // step's stage is in; every warp is done with the stage loaded next
    const int64_t ahead = step + kStages - 1;
    if (ahead < steps) {
      load(static_cast<int>(ahead % kStages), ahead * kStep);
    } else {
      cp_async_commit();
    }
    const typename G::Stage& st = stages[step % kStages];
#pragma unroll
    for (int blk = 0; blk < kStep; ++blk) {
      uint32_t a[kTilesM][2], a_abs[kTilesM][2], a_one[kTilesM][2];
      int a_mult[kTilesM][2], a_tz[kTilesM][2];
      unsigned a_mag[kTilesM][2];
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = wm0 + 16 * mt + g + 8 * h;
          a[mt][h] = reinterpret_cast<const uint32_t*>(&st.a[blk][r])[t];
          a_abs[mt][h] = abs4_small(a[mt][h]);
          a_one[mt][h] = nonzero4_small(a_abs[mt][h]);
          const uint4 sc = st.as[blk][r];
          a_mult[mt][h] = static_cast<int>(sc.x);
          a_mag[mt][h] = sc.y & 0xFFFFFFu;
          a_tz[mt][h] = static_cast<int>(sc.y >> 24);
        }
      }
      uint32_t b[kTilesN], b_abs[kTilesN], b_one[kTilesN];
      int b_mult[kTilesN][2], b_tz[kTilesN][2];
      unsigned b_mag[kTilesN][2];
#pragma unroll
      for (int nt = 0; nt < kTilesN; ++nt) {
        b[nt] = reinterpret_cast<const uint32_t*>(&st.b[blk][wn0 + 8 * nt + g])[t];
        b_abs[nt] = abs4_small(b[nt]);
        b_one[nt] = nonzero4_small(b_abs[nt]);
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const uint4 sc = st.bs[blk][wn0 + 8 * nt + 2 * t + q];
          b_mult[nt][q] = static_cast<int>(sc.x);
          b_mag[nt][q] = sc.y & 0xFFFFFFu;
          b_tz[nt][q] = static_cast<int>(sc.y >> 24);
        }
      }
      int adot[kTilesM][kTilesN][4];
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kTilesN; ++nt) {
          const int zero[4] = {0, 0, 0, 0};
          int dot[4];
          mma_s8(dot, a[mt][0], a[mt][1], b[nt], zero);
          mma_s8(adot[mt][nt], a_abs[mt][0], a_abs[mt][1], b_abs[nt], zero);
          mma_s8(count[mt][nt], a_one[mt][0], a_one[mt][1], b_one[nt], count[mt][nt]);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int h = i / 2, q = i % 2;
            sum[mt][nt][i] += static_cast<long long>(dot[i] * a_mult[mt][h]) * b_mult[nt][q];
            abs_sum[mt][nt][i] +=
                static_cast<unsigned long long>(static_cast<unsigned>(adot[mt][nt][i]) * a_mag[mt][h]) * b_mag[nt][q];
          }
        }
      }
      // Whether this block's scales could lower some output's min_tz: a compare per output, no
      // branch each; then, for the outputs it can lower (with a nonzero product), the block's
      // exact smallest tz. Rare once the first blocks have set each output's minimum.
      bool need = false;
#pragma unroll
      for (int mt = 0; mt < kTilesM; ++mt)
#pragma unroll
        for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) need |= a_tz[mt][i / 2] + b_tz[nt][i % 2] < min_tz[mt][nt][i];
      if (need) {
#pragma unroll
        for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
          for (int nt = 0; nt < kTilesN; ++nt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int h = i / 2, q = i % 2;
              if (adot[mt][nt][i] != 0 && a_tz[mt][h] + b_tz[nt][q] < min_tz[mt][nt][i]) {
                const uint4 xa = st.as[blk][wm0 + 16 * mt + g + 8 * h];
                const uint4 yb = st.bs[blk][wn0 + 8 * nt + 2 * t + q];
                min_tz[mt][nt][i] = min(min_tz[mt][nt][i], block_min_tz(xa.z, xa.w, yb.z, yb.w) + a_tz[mt][h] + b_tz[nt][q]);
              }
            }
          }
        }
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < kTilesM; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kTilesN; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = i / 2, q = i % 2;
        const int64_t row = row0 + wm0 + 16 * mt + g + 8 * h, col = col0 + wn0 + 8 * nt + 2 * t + q;
        if (row < m && col < n) {
          Acc acc;
          acc.sum = sum[mt][nt][i];
          acc.abs_sum = abs_sum[mt][nt][i];
          acc.nonzero = count[mt][nt][i];
          acc.min_tz = min_tz[mt][nt][i];
          const bool nan = (a_nan[batch * m + row] | b_nan[batch * n + col]) != 0;
          const int64_t idx = (batch * m + row) * n + col;
          acc_store(acc, nan, alpha, out + idx);
        }
      }
    }
  }
}

__device__ __forceinline__ void acc_merge(Acc& a, const Acc& b) {
  a.sum += b.sum;
  a.abs_sum += b.abs_sum;
  a.nonzero += b.nonzero;
  a.min_tz = min(a.min_tz, b.min_tz);
}

__device__ __forceinline__ Acc acc_shfl_down(const Acc& a, int offset) {
  Acc b;
  b.sum = __shfl_down_sync(0xFFFFFFFFu, a.sum, offset);
  b.abs_sum = __shfl_down_sync(0xFFFFFFFFu, a.abs_sum, offset);
  b.nonzero = __shfl_down_sync(0xFFFFFFFFu, a.nonzero, offset);
  b.min_tz = __shfl_down_sync(0xFFFFFFFFu, a.min_tz, offset);
  return b;
}

// GEMV: a warp per output row reads the packed A row directly (decoding in registers, so A is
// read once, as a memory-bound kernel would) against B's decoded column; lanes split the blocks
// and meet in a shuffle reduction.
template <bool kAligned>
__global__ void gemv_exact(const uint8_t* __restrict__ a, const uint8_t* __restrict__ sfa,
                           const uint4* __restrict__ bv, const uint2* __restrict__ bs, int64_t m, int64_t k,
                           int64_t kb, ScaleSemantics semantics, float alpha, PackedElement* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t batch = blockIdx.y;
  if (row >= m) return;  // whole warps leave together
  const uint8_t* a_row = a + (batch * m + row) * (k / 2);
  const uint8_t* sf_row = sfa + (batch * m + row) * kb;
  const uint4* b_col = bv + batch * kb;
  const uint2* b_sc = bs + batch * kb;
  Acc acc;
  acc_init(acc);
  uint32_t nan = 0;
  for (int64_t s = lane; s < kb; s += 32) {
    uint32_t lo, hi;
    if (kAligned) {  // k % 16 == 0: every row starts 8-byte aligned and every block is whole
      const uint2 raw = __ldg(reinterpret_cast<const uint2*>(a_row) + s);
      lo = raw.x;
      hi = raw.y;
    } else {
      uint8_t bytes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const int64_t nbytes = k / 2 - s * 8 < 8 ? k / 2 - s * 8 : 8;
      for (int64_t i = 0; i < nbytes; ++i) bytes[i] = a_row[s * 8 + i];
      lo = bytes[0] | (uint32_t(bytes[1]) << 8) | (uint32_t(bytes[2]) << 16) | (uint32_t(bytes[3]) << 24);
      hi = bytes[4] | (uint32_t(bytes[5]) << 8) | (uint32_t(bytes[6]) << 16) | (uint32_t(bytes[7]) << 24);
    }
    const uint32_t av[4] = {decode4(lo & 0xFFFFu), decode4(lo >> 16), decode4(hi & 0xFFFFu), decode4(hi >> 16)};
    const uint4 b4 = __ldg(b_col + s);
    const uint32_t bw[4] = {b4.x, b4.y, b4.z, b4.w};
    int dot = 0;
    unsigned adot = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      dot = __dp4a(static_cast<int>(av[w]), static_cast<int>(bw[w]), dot);
      adot = __dp4a(abs4(av[w]), abs4(bw[w]), adot);
    }
    const uint2 sa = block_scale(sf_row[s], semantics, nonzero_bits16(av));
    const uint2 sb = __ldg(b_sc + s);
    nan |= (sa.y | sb.y) >> 24;
    acc_block(acc, dot, static_cast<int>(adot), sa, sb, av, bw);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    acc_merge(acc, acc_shfl_down(acc, offset));
    nan |= __shfl_down_sync(0xFFFFFFFFu, nan, offset);
  }
  if (lane == 0) acc_store(acc, (nan & 1u) != 0, alpha, out + batch * m + row);
}

// The exact sums of p's GEMV or GEMM (A against p.b, linear scales) into elems, with each
// element's RN16(alpha * r) into *c when c is given; with `second`, also A against p.b2 into
// *elems2 (a dual problem's G and U: A is uploaded and decoded once, both GEMMs share one stream,
// its allocations and one synchronisation). Checks p's op-independent limits.
void device_sums(const Problem& p, bool second, ExactElements& elems_out, ExactElements* elems2_out,
                 std::vector<uint16_t>* c_out, GpuReferenceTiming* timing) {
  if (p.k > kGpuReferenceMaxK) {
    throw std::invalid_argument("GPU reference: k = " + std::to_string(p.k) + " exceeds 2^20");
  }
  const int64_t kb = p.kb();
  gpu::Stream owner;
  const cudaStream_t stream = owner.s;
  DeviceArray<uint8_t> d_a(p.a.size(), stream), d_sfa(p.sfa.size(), stream), d_b(p.b.size(), stream),
      d_sfb(p.sfb.size(), stream), d_b2(second ? p.b2.size() : 0, stream), d_sfb2(second ? p.sfb2.size() : 0, stream);
  upload(d_a, p.a, stream);
  upload(d_sfa, p.sfa, stream);
  upload(d_b, p.b, stream);
  upload(d_sfb, p.sfb, stream);
  if (second) {
    upload(d_b2, p.b2, stream);
    upload(d_sfb2, p.sfb2, stream);
  }
  const int64_t elems = p.c_elems();
  DeviceArray<PackedElement> d_out(static_cast<size_t>(elems), stream);
  DeviceArray<PackedElement> d_out2(second ? static_cast<size_t>(elems) : 0, stream);

  cudaEvent_t events[3];
  for (cudaEvent_t& e : events) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  struct EventGuard {
    cudaEvent_t* e;
    ~EventGuard() {
      for (int i = 0; i < 3; ++i) cudaEventDestroy(e[i]);
    }
  } event_guard{events};
  // The host's arrays are made while the kernels run (a large one's pages are faulted first).
  const auto make_room = [&] {
    elems_out.resize(static_cast<size_t>(elems));
    if (c_out) c_out->resize(static_cast<size_t>(elems));
    if (second) elems2_out->resize(static_cast<size_t>(elems));
  };
  check_cuda(cudaEventRecord(events[0], stream), "cudaEventRecord");
  if (p.n == 1) {
    auto decode = [&](const DeviceArray<uint8_t>& packed, const DeviceArray<uint8_t>& sf, DeviceArray<uint4>& vals,
                      DeviceArray<uint2>& scales) {
      const int64_t count = p.l * kb;
      const int threads = 256;
      decode_rows<<<static_cast<unsigned>((count + threads - 1) / threads), threads, 0, stream>>>(
          packed.ptr, sf.ptr, p.l, p.k, kb, p.semantics, vals.ptr, scales.ptr);
      check_cuda(cudaGetLastError(), "decode_rows launch");
    };
    DeviceArray<uint4> d_bv(p.l * kb, stream), d_bv2(second ? p.l * kb : 0, stream);
    DeviceArray<uint2> d_bs(p.l * kb, stream), d_bs2(second ? p.l * kb : 0, stream);
    decode(d_b, d_sfb, d_bv, d_bs);
    if (second) decode(d_b2, d_sfb2, d_bv2, d_bs2);
    check_cuda(cudaEventRecord(events[1], stream), "cudaEventRecord");
    const int warps = 8;
    const dim3 grid(static_cast<unsigned>((p.m + warps - 1) / warps), static_cast<unsigned>(p.l));
    auto gemv = [&](const DeviceArray<uint4>& bv, const DeviceArray<uint2>& bs, PackedElement* out) {
      if (p.k % 16 == 0) {
        gemv_exact<true><<<grid, warps * 32, 0, stream>>>(d_a.ptr, d_sfa.ptr, bv.ptr, bs.ptr, p.m, p.k, kb,
                                                          p.semantics, p.alpha, out);
      } else {
        gemv_exact<false><<<grid, warps * 32, 0, stream>>>(d_a.ptr, d_sfa.ptr, bv.ptr, bs.ptr, p.m, p.k, kb,
                                                           p.semantics, p.alpha, out);
      }
      check_cuda(cudaGetLastError(), "gemv_exact launch");
    };
    gemv(d_bv, d_bs, d_out.ptr);
    if (second) gemv(d_bv2, d_bs2, d_out2.ptr);
    check_cuda(cudaEventRecord(events[2], stream), "cudaEventRecord");
    make_room();
    check_cuda(cudaStreamSynchronize(stream), "gemv_exact");
  } else {
    // The operands decoded for the tensor cores, with per-row NaN flags.
    DeviceArray<uint4> d_av(p.l * p.m * kb, stream), d_as(p.l * p.m * kb, stream);
    DeviceArray<uint4> d_bv(p.l * p.n * kb, stream), d_bs(p.l * p.n * kb, stream);
    DeviceArray<uint4> d_bv2(second ? p.l * p.n * kb : 0, stream), d_bs2(second ? p.l * p.n * kb : 0, stream);
    DeviceArray<uint32_t> d_a_nan(p.l * p.m, stream), d_b_nan(p.l * p.n, stream),
        d_b2_nan(second ? p.l * p.n : 0, stream);
    check_cuda(cudaMemsetAsync(d_a_nan.ptr, 0, p.l * p.m * sizeof(uint32_t), stream), "cudaMemset");
    check_cuda(cudaMemsetAsync(d_b_nan.ptr, 0, p.l * p.n * sizeof(uint32_t), stream), "cudaMemset");
    if (second) check_cuda(cudaMemsetAsync(d_b2_nan.ptr, 0, p.l * p.n * sizeof(uint32_t), stream), "cudaMemset");
    auto decode_mma = [&](const DeviceArray<uint8_t>& packed, const DeviceArray<uint8_t>& sf, int64_t rows,
                          DeviceArray<uint4>& vals, DeviceArray<uint4>& scales, DeviceArray<uint32_t>& nan) {
      const int64_t count = rows * kb;
      const int threads = 256;
      decode_rows_mma<<<static_cast<unsigned>((count + threads - 1) / threads), threads, 0, stream>>>(
          packed.ptr, sf.ptr, rows, p.k, kb, p.semantics, vals.ptr, scales.ptr, nan.ptr);
      check_cuda(cudaGetLastError(), "decode_rows_mma launch");
    };
    decode_mma(d_a, d_sfa, p.l * p.m, d_av, d_as, d_a_nan);
    decode_mma(d_b, d_sfb, p.l * p.n, d_bv, d_bs, d_b_nan);
    if (second) decode_mma(d_b2, d_sfb2, p.l * p.n, d_bv2, d_bs2, d_b2_nan);
    check_cuda(cudaEventRecord(events[1], stream), "cudaEventRecord");
    // 8 warps of 16 x 8 outputs (32 x 32 per thread block), three blocks per multiprocessor (80
    // registers a thread: 24 warps, where 16 x 16 outputs a warp took 120 and left room for 16), 8
    // scale blocks per stage, 2 stages: the fastest of the shapes tried on an H100
    // (bench/THROUGHPUT.md, session 38; 8192^3 47.1-47.4 ms against 50.3 for 16 x 16 outputs a
    // warp, two blocks, 4 scale blocks a stage).
    using Shape = MmaGemm<2, 4, 1, 1, 8, 2>;
    const auto kernel = gemm_exact_mma<2, 4, 1, 1, 8, 2, 3>;
    if ((p.m + Shape::kBM - 1) / Shape::kBM > 65535 || p.l > 65535) {
      throw std::invalid_argument("GPU reference: m or l too large for one launch");
    }
    const dim3 grid(static_cast<unsigned>((p.n + Shape::kBN - 1) / Shape::kBN),
                    static_cast<unsigned>((p.m + Shape::kBM - 1) / Shape::kBM), static_cast<unsigned>(p.l));
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes),
               "cudaFuncSetAttribute");
    auto gemm = [&](const DeviceArray<uint4>& bv, const DeviceArray<uint4>& bs, const DeviceArray<uint32_t>& b_nan,
                    PackedElement* out) {
      kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(d_av.ptr, d_as.ptr, bv.ptr, bs.ptr, d_a_nan.ptr,
                                                                    b_nan.ptr, p.m, p.n, kb, p.alpha, out);
      check_cuda(cudaGetLastError(), "gemm_exact_mma launch");
    };
    gemm(d_bv, d_bs, d_b_nan, d_out.ptr);
    if (second) gemm(d_bv2, d_bs2, d_b2_nan, d_out2.ptr);
    check_cuda(cudaEventRecord(events[2], stream), "cudaEventRecord");
    make_room();
    check_cuda(cudaStreamSynchronize(stream), "gemm_exact_mma");
  }
  gpu::fetch_packed(d_out.ptr, elems, stream, elems_out.data(), c_out ? c_out->data() : nullptr);
  if (second) gpu::fetch_packed(d_out2.ptr, elems, stream, elems2_out->data(), nullptr);
  if (timing) {
    check_cuda(cudaEventElapsedTime(&timing->decode_ms, events[0], events[1]), "cudaEventElapsedTime");
    check_cuda(cudaEventElapsedTime(&timing->compute_ms, events[1], events[2]), "cudaEventElapsedTime");
  }
}

}  // namespace

bool gpu_reference_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why) *why = err != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorName(err) : "no CUDA device";
    return false;
  }
  return true;
}

ExactResult exact_gemm_gpu(const Problem& p, GpuReferenceTiming* timing) {
  const auto start = std::chrono::steady_clock::now();
  if (const std::string err = problem_error(p); !err.empty()) throw std::invalid_argument(err);
  if (p.mx_operands() && p.op != Op::quantize) {
    // Each GEMM of the problem (the problem, each group, a dual problem's G and U) on the device,
    // assembled and rounded as the CPU reference does.
    GpuReferenceTiming sum;
    ExactResult r = exact_mx_result(p, [&](const MxProblem& x) {
      GpuReferenceTiming one;
      std::vector<MxElement> e = exact_mx_gpu(x, &one);
      sum.compute_ms += one.compute_ms;
      return e;
    });
    if (timing) {
      *timing = sum;
      timing->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    return r;
  }
  if (p.op != Op::gemv && p.op != Op::gemm)
    throw std::invalid_argument(std::string("GPU reference: ") + to_string(p.op) + " is computed on the CPU");
  ExactResult result;
  device_sums(p, false, result.elems, nullptr, &result.c, timing);
  const int64_t elems = p.c_elems();
  result.out_type = p.out_type;
  result.group_offset = {0, elems};
  if (p.out_type != OutType::fp16) {
    // The kernels round to FP16; other output types are rounded here from the exact elements,
    // by the CPU reference's own function.
    std::vector<uint32_t> words(static_cast<size_t>(elems));
    for (int64_t e = 0; e < elems; ++e) words[e] = round_result(result.elems[e], p.alpha, p.out_type);
    if (out_word_bytes(p.out_type) == 4) {  // fp32, and nvfp4's FP32 values
      result.c32 = std::move(words);
      result.c.clear();
    } else {
      for (int64_t e = 0; e < elems; ++e) result.c[e] = static_cast<uint16_t>(words[e]);
    }
  }
  if (timing) {
    timing->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return result;
}

namespace {

// A grouped problem on the GPU: each group is an l = 1 GEMM with its own alpha, checked by the
// GEMM reference one group at a time and stitched into the groups' output order. Groups too
// small to be worth a launch (or too deep for the GPU kernel) take the CPU path.
ExactResult grouped_gpu(const Problem& p, double threshold) {
  ExactResult out;
  out.out_type = p.out_type;
  out.group_offset = group_output_offsets(p);
  const int64_t total = out.group_offset.back();
  out.elems.resize(static_cast<size_t>(total));
  if (out_word_bytes(p.out_type) == 4) out.c32.resize(static_cast<size_t>(total));
  else out.c.resize(static_cast<size_t>(total));
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const Group& q = p.groups[g];
    if (q.m == 0) continue;
    const Problem one = group_problem(p, g);
    const double work = static_cast<double>(q.m) * q.n * q.k;
    const ExactResult r = work >= threshold / 4 && q.k <= kGpuReferenceMaxK ? exact_gemm_gpu(one) : exact_gemm(one);
    const size_t at = static_cast<size_t>(out.group_offset[g]);
    std::copy(r.elems.begin(), r.elems.end(), out.elems.begin() + static_cast<std::ptrdiff_t>(at));
    if (out_word_bytes(p.out_type) == 4)
      std::copy(r.c32.begin(), r.c32.end(), out.c32.begin() + static_cast<std::ptrdiff_t>(at));
    else std::copy(r.c.begin(), r.c.end(), out.c.begin() + static_cast<std::ptrdiff_t>(at));
  }
  return out;
}

// A dual problem's two exact GEMMs on the device (A decoded once); silu, U, v and the words on
// the host from their sums, as the CPU reference makes them.
ExactResult dual_gpu(const Problem& p) {
  // The device reads each tensor as far as the shape says: a problem whose tensors are shorter is
  // refused here, as exact_gemm_gpu and the CPU reference refuse it.
  if (const std::string err = problem_error(p); !err.empty()) throw std::invalid_argument(err);
  ExactElements g, u;
  device_sums(p, true, g, &u, nullptr, nullptr);
  return dual_from_sums(p, std::move(g), std::move(u));
}

}  // namespace

ExactResult exact_gemm_auto(const Problem& p, double threshold) {
  if (threshold < 0) {
    const char* env = std::getenv("NVFP4_GPU_REFERENCE_THRESHOLD");
    threshold = env ? std::strtod(env, nullptr) : static_cast<double>(int64_t(1) << 26);
  }
  if (p.mx_operands() && p.op != Op::quantize) {
    // The NVFP4 rule, GEMM by GEMM, at a sixteenth of the threshold: the problem on the GPU from
    // there, and then each group of a grouped problem from a quarter of that (smaller ones on the
    // CPU, not worth a launch). The CPU's Kulisch sums cost 5 to 15 times NVFP4's 64-bit ones per
    // product (2 cores: 1040 x 1040 x 62, 3.7 s against 0.7 s; a 4096 x 16384 GEMV, 2.1 s against
    // 0.14 s), and the schedule's large class stops at 2^26 products, the default threshold: at
    // 2^22 its MX cases are judged on the GPU.
    threshold /= 16;
    double work = static_cast<double>(p.l) * p.m * p.n * p.k;
    if (p.op == Op::grouped_gemm) {
      work = 0;
      for (const Group& g : p.groups) work += static_cast<double>(g.m) * g.n * g.k;
    }
    if (work < threshold || !gpu_reference_available(nullptr)) return exact_gemm(p);
    const double per_gemm = p.op == Op::grouped_gemm ? threshold / 4 : threshold;
    return exact_mx_result(p, [per_gemm](const MxProblem& x) {
      const double one = static_cast<double>(x.l) * x.m * x.n * x.k;
      return one >= per_gemm ? exact_mx_gpu(x) : exact_mx(x);
    });
  }
  if (p.op == Op::grouped_gemm) {
    double work = 0;
    for (const Group& g : p.groups) work += static_cast<double>(g.m) * g.n * g.k;
    if (work >= threshold && gpu_reference_available(nullptr)) return grouped_gpu(p, threshold);
    return exact_gemm(p);
  }
  // A GEMV, GEMM or dual GEMM (its G and U; silu and the words stay the host's) past a sixteenth
  // of the threshold, 2^22 by default: the schedule's large class. Below it the host's exact sums
  // beat a launch and its copies (a 2^22 GEMM's reference on the H200 took 2.5 ms a case on the
  // device), above it they do not: 12 s runs on the H200 (docs/runs/2026-12-04-s24-d-h200.txt),
  // gemm_tc's schedule 1,465 cases/s against 1,162 with the large class on the host, dual_gemm_naive's
  // 503-525 against 450-474.
  const double work = static_cast<double>(p.l) * p.m * p.n * p.k;
  const bool large = work > threshold / 16 && p.k <= kGpuReferenceMaxK;
  if (op_is_dual(p.op)) return large && gpu_reference_available(nullptr) ? dual_gpu(p) : exact_gemm(p);
  const bool gpu_op = p.op == Op::gemv || p.op == Op::gemm;
  if (gpu_op && large && gpu_reference_available(nullptr)) return exact_gemm_gpu(p);
  return exact_gemm(p);
}

}  // namespace nvfp4
