// The building blocks of gemm_tc's 128 x 128 tile, shared by gemm_tc and grouped_gemm_tc (which
// runs the same tiles per group): cp.async staging of raw E2M1 bytes and scale words, the
// decode into XOR-swizzled FP16 tiles, mma.sync m16n8k16 over a k-step, and the pipelined loop
// over a range of k-steps. gemm_tc.cu's opening comment says why each piece is as it is (normal
// FP16 operands, padding scales zeroed, the matrix-unit accumulation model). Device code only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/block_scaled_decode.h"
#include "kernels/cuda/fast_decode.cuh"

namespace nvfp4::kern::tc_tile {

using namespace fast;

constexpr int kThreads = 256;
constexpr int kTileM = 128, kTileN = 128, kTileK = 64;
constexpr int kRawStages = 3;
constexpr int kRawRowBytes = kTileK / 2;  // 32 bytes of E2M1 per row and step
constexpr int kRawBytes = (kTileM + kTileN) * (kRawRowBytes + 4);  // values + one scale word per row
constexpr int kHalfTileBytes = (kTileM + kTileN) * kTileK * 2;
constexpr size_t kSmemBytes = size_t{kRawStages} * kRawBytes + 2 * size_t{kHalfTileBytes};

// FP16 tile element (row, chunk of 8 halves) with the chunk XOR-swizzled by row % 8, so that
// ldmatrix's 8 rows of one chunk and the decoder's 16-byte stores hit 8 different bank groups.
__device__ __forceinline__ int swizzled(int row, int chunk) { return row * kTileK + ((chunk ^ (row & 7)) * 8); }

struct TileCoords {
  int64_t b, m0, n0, step_begin, step_end;
};

// Stage raw rows of one k-step: row r < 128 of A (rows m0 + r) and of B (rows n0 + r), 32
// bytes each, plus each row's scale word (blocks 4t .. 4t+3).
template <bool kVector>
__device__ __forceinline__ void stage_raw(const nvfp4_problem& p, const TileCoords& t, int64_t step,
                                          unsigned char* raw) {
  const int tid = threadIdx.x;
  const int64_t k = p.k, kb = (k + 15) / 16, row_bytes = k / 2;
  unsigned char* values = raw;                                          // [256 rows][32 bytes]
  uint32_t* scales = reinterpret_cast<uint32_t*>(raw + (kTileM + kTileN) * kRawRowBytes);  // [256]
  // Values: 512 chunks of 16 bytes, two per thread (A rows first, then B rows).
#pragma unroll
  for (int rep = 0; rep < 2; ++rep) {
    const int chunk = tid + rep * kThreads;
    const int row = chunk / 2, half = chunk % 2;
    const bool is_a = row < kTileM;
    const int64_t r = is_a ? t.m0 + row : t.n0 + (row - kTileM);
    const int64_t rows = is_a ? p.m : p.n;
    const uint8_t* base = is_a ? p.a : p.b;
    const int64_t byte0 = step * kRawRowBytes + half * 16;  // first byte of the chunk in the row
    unsigned char* dst = values + row * kRawRowBytes + half * 16;
    if (kVector) {
      const bool valid = r < rows && byte0 < row_bytes;  // k % 32 == 0: chunks are all in or all out
      cp_async_16(dst, valid ? base + (t.b * rows + r) * row_bytes + byte0 : base, valid ? 16 : 0);
    } else {
      uint32_t w[4] = {0, 0, 0, 0};
      if (r < rows) {
        const uint8_t* src = base + (t.b * rows + r) * row_bytes;
        for (int y = 0; y < 16; ++y)
          if (byte0 + y < row_bytes) w[y / 4] |= uint32_t{src[byte0 + y]} << (8 * (y % 4));
      }
      *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
  // Scale words: one per row, threads 0..127 for A, 128..255 for B.
  {
    const int row = tid;
    const bool is_a = row < kTileM;
    const int64_t r = is_a ? t.m0 + row : t.n0 + (row - kTileM);
    const int64_t rows = is_a ? p.m : p.n;
    const uint8_t* base = is_a ? p.sfa : p.sfb;
    const int64_t s0 = step * 4;
    const bool valid = r < rows;
    if (kVector) {
      // Word-aligned in both layouts (checked on the host): permuted blocks 4t..4t+3 of a row are
      // contiguous; linear needs kb % 4 == 0, else the byte path below is taken.
      const int64_t off = valid ? scale_offset(p.sf_layout, rows, kb, t.b, r, s0) : 0;
      cp_async_4(scales + row, base + off, valid ? 4 : 0);
    } else {
      uint32_t w = 0;
      if (valid)
        for (int j = 0; j < 4; ++j)
          if (s0 + j < kb) w |= uint32_t{base[scale_offset(p.sf_layout, rows, kb, t.b, r, s0 + j)]} << (8 * j);
      scales[row] = w;
    }
  }
}

// Decode one staged step into FP16 tiles: thread -> (row, half of the step) of A, then of B.
__device__ __forceinline__ void decode_step(const unsigned char* raw, __half* tiles, int64_t step, int64_t kb) {
  const int tid = threadIdx.x;
  const uint32_t* scales = reinterpret_cast<const uint32_t*>(raw + (kTileM + kTileN) * kRawRowBytes);
#pragma unroll
  for (int rep = 0; rep < 2; ++rep) {
    const int idx = tid + rep * kThreads;
    const int row = idx / 2, half = idx % 2;  // row < 128: A, else B (tiles are contiguous too)
    const uint4 v = *reinterpret_cast<const uint4*>(raw + row * kRawRowBytes + half * 16);
    uint32_t sw = (scales[row] >> (16 * half)) & 0xFFFFu;  // this half's two scale bytes
    // Blocks past kb are padding (NaN in the permuted layout): they must not reach a product.
    const int64_t s0 = step * 4 + 2 * half;
    if (s0 >= kb) sw = 0;
    else if (s0 + 1 >= kb) sw &= 0x00FFu;
    const __half2 s2 = ue4m3x2_to_half2(sw);
    const __half2 sa0 = __low2half2(s2), sa1 = __high2half2(s2);
    __half* tile_row_base = tiles;  // A rows 0..127 then B rows 0..127: row index continues
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int wi = 0; wi < 4; ++wi) {
      const __half2 s = wi < 2 ? sa0 : sa1;  // words 0,1: block 2*half; words 2,3: the next
      // True E2M1 values first, then the scale: a*sa is a normal FP16 number (or 0 or NaN), which
      // is what the tensor core must see. (a*2^-14)*sa would be subnormal whenever a*sa < 1.
      const uint4 v = word_to_pairs(words[wi]);
      uint4 out;
      out.x = bits_from_half2(__hmul2(half2_from_bits(v.x), s));
      out.y = bits_from_half2(__hmul2(half2_from_bits(v.y), s));
      out.z = bits_from_half2(__hmul2(half2_from_bits(v.z), s));
      out.w = bits_from_half2(__hmul2(half2_from_bits(v.w), s));
      *reinterpret_cast<uint4*>(tile_row_base + swizzled(row, 4 * half + wi)) = out;
    }
  }
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __half* addr) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(addr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Tensor-core work of one step: warp (wm, wn) computes rows 64wm.., columns 32wn.. of the tile.
__device__ __forceinline__ void mma_step(const __half* tiles, float (&acc)[4][4][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / 4, wn = warp % 4;
  const __half* a_tile = tiles;
  const __half* b_tile = tiles + kTileM * kTileK;
#pragma unroll
  for (int kk = 0; kk < kTileK / 16; ++kk) {
    uint32_t af[4][4], bf[2][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
      const int row = 64 * wm + 16 * mi + (lane % 16);
      ldmatrix_x4(af[mi], a_tile + swizzled(row, 2 * kk + lane / 16));
    }
#pragma unroll
    for (int nj = 0; nj < 2; ++nj) {
      const int row = 32 * wn + 16 * nj + (lane % 8) + (lane / 16) * 8;
      ldmatrix_x4(bf[nj], b_tile + swizzled(row, 2 * kk + (lane / 8) % 2));
    }
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni / 2][2 * (ni % 2)], bf[ni / 2][2 * (ni % 2) + 1]);
  }
}

// The accumulators of one block's tile over k-steps [t.step_begin, t.step_end) of problem p:
// three raw stages in flight, two FP16 tiles (decode one while the tensor cores use the other).
// smem is the block's dynamic shared memory (kSmemBytes).
template <bool kVector>
__device__ __forceinline__ void tile_mainloop(const nvfp4_problem& p, const TileCoords& t, unsigned char* smem,
                                              float (&acc)[4][4][4]) {
  // Addressed by arithmetic rather than pointer arrays, which would live in local memory.
  auto tiles = [&](int64_t s) { return reinterpret_cast<__half*>(smem + (s % 2) * kHalfTileBytes); };
  auto raw = [&](int64_t s) { return smem + 2 * kHalfTileBytes + (s % kRawStages) * kRawBytes; };
  const int64_t kb = (p.k + 15) / 16;
  const int64_t count = t.step_end - t.step_begin;
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;

  if (count > 0) {
    stage_raw<kVector>(p, t, t.step_begin, raw(0));
    cp_async_commit();
    if (count > 1) stage_raw<kVector>(p, t, t.step_begin + 1, raw(1));
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    decode_step(raw(0), tiles(0), t.step_begin, kb);
    for (int64_t s = 0; s < count; ++s) {
      // Raw stage (s+2)%3 was last read by the decode of step s-1, before the previous barrier.
      if (s + 2 < count) stage_raw<kVector>(p, t, t.step_begin + s + 2, raw(s + 2));
      cp_async_commit();
      cp_async_wait<1>();  // step s+1 has landed (this thread's part)
      // One barrier: tiles[s%2] is decoded, step s+1's raw bytes are visible, and every warp is
      // done with the mma of step s-1, so tiles[(s+1)%2] may be overwritten.
      __syncthreads();
      if (s + 1 < count) decode_step(raw(s + 1), tiles(s + 1), t.step_begin + s + 1, kb);
      mma_step(tiles(s), acc);
    }
    cp_async_wait<0>();
  }
}

}  // namespace nvfp4::kern::tc_tile
