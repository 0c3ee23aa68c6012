// The tensor-core index math of kernels/tensor_core_layouts.h, checked on the CPU against the
// formulas as the PTX ISA and CUTLASS state them (written out here independently), plus the fact
// the tensor-core kernels rely on: every dequantized factor a*sa is 0, NaN or a normal FP16 number.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <utility>

#include "kernels/block_scaled_decode.h"
#include "mutation/honest/rounding.h"
#include "kernels/tensor_core_layouts.h"

namespace nvfp4::kern::tc {
namespace {

// PTX ISA, mma.m16n8k16 .f16/.bf16, multiplicand A element a_i (i = 0..7) of a lane.
std::pair<int, int> ptx_a(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  const int row = (i < 2 || (4 <= i && i < 6)) ? group : group + 8;
  const int col = i < 4 ? tig * 2 + (i & 0x1) : tig * 2 + (i & 0x1) + 8;
  return {row, col};
}
// Multiplicand B element b_i (i = 0..3): {row (k), col (n)}.
std::pair<int, int> ptx_b(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  const int row = i < 2 ? tig * 2 + (i & 0x1) : tig * 2 + (i & 0x1) + 8;
  return {row, group};
}
// Accumulator element c_i (i = 0..3).
std::pair<int, int> ptx_c(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  return {i < 2 ? group : group + 8, tig * 2 + (i & 0x1)};
}

TEST(MmaFragments, MatchPtxIsaFormulas) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const RowCol p = mma_a_pair(lane, i / 2);
      EXPECT_EQ(std::make_pair(p.row, p.col + (i & 1)), ptx_a(lane, i)) << "A lane " << lane << " a" << i;
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol p = mma_b_pair(lane, i / 2);
      EXPECT_EQ(std::make_pair(p.row + (i & 1), p.col), ptx_b(lane, i)) << "B lane " << lane << " b" << i;
      const RowCol c = mma_c_element(lane, i);
      EXPECT_EQ(std::make_pair(c.row, c.col), ptx_c(lane, i)) << "C lane " << lane << " c" << i;
    }
  }
  // Two entries worked by hand: lane 5 (group 1, thread 1) holds A (1,2), (1,3) in its first
  // register and (9,10), (9,11) in its last; lane 31 holds B (14,7), (15,7) in its last.
  EXPECT_EQ(mma_a_pair(5, 0).row, 1);
  EXPECT_EQ(mma_a_pair(5, 0).col, 2);
  EXPECT_EQ(mma_a_pair(5, 3).row, 9);
  EXPECT_EQ(mma_a_pair(5, 3).col, 10);
  EXPECT_EQ(mma_b_pair(31, 1).row, 14);
  EXPECT_EQ(mma_b_pair(31, 1).col, 7);
}

TEST(MmaFragments, EveryElementHeldByExactlyOneLane) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r) {
      const RowCol p = mma_a_pair(lane, r);
      EXPECT_TRUE(a.insert({p.row, p.col}).second);
      EXPECT_TRUE(a.insert({p.row, p.col + 1}).second);
      const RowCol q = mma_c_element(lane, r);
      EXPECT_TRUE(c.insert({q.row, q.col}).second);
    }
    for (int r = 0; r < 2; ++r) {
      const RowCol p = mma_b_pair(lane, r);
      EXPECT_TRUE(b.insert({p.row, p.col}).second);
      EXPECT_TRUE(b.insert({p.row + 1, p.col}).second);
    }
  }
  EXPECT_EQ(a.size(), 256u);
  EXPECT_EQ(b.size(), 128u);
  EXPECT_EQ(c.size(), 128u);
  for (const auto& [row, col] : a) EXPECT_TRUE(row < 16 && col < 16);
  for (const auto& [row, col] : b) EXPECT_TRUE(row < 16 && col < 8);
  for (const auto& [row, col] : c) EXPECT_TRUE(row < 16 && col < 8);
}

// CUTLASS's CLayout_64xN, ((4,8,4),(2,2,N/8)) : ((128,1,16),(64,8,512)), maps (thread, value)
// to the column-major index m + 64 n of the 64 x N accumulator tile.
std::pair<int, int> cutlass_c_64xn(int thread, int value) {
  const int t0 = thread % 4, t1 = (thread / 4) % 8, t2 = thread / 32;
  const int v0 = value % 2, v1 = (value / 2) % 2, v2 = value / 4;
  const int index = 128 * t0 + 1 * t1 + 16 * t2 + 64 * v0 + 8 * v1 + 512 * v2;
  return {index % 64, index / 64};
}

TEST(Wgmma, AccumulatorLayoutIsCutlassCLayout) {
  for (int n : {8, 16, 32, 64, 256}) {
    std::set<std::pair<int, int>> seen;
    for (int thread = 0; thread < 128; ++thread) {
      for (int i = 0; i < n / 2; ++i) {
        const RowCol d = wgmma_d_element(thread, i);
        EXPECT_EQ(std::make_pair(d.row, d.col), cutlass_c_64xn(thread, i)) << "N " << n << " thread " << thread;
        EXPECT_TRUE(d.row < 64 && d.col < n);
        EXPECT_TRUE(seen.insert({d.row, d.col}).second);
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(64 * n));
  }
}

// CUTLASS's canonical K-major INTERLEAVE layout (make_gmma_desc<Major::K>), in elements with
// T = 8 of them per 16 bytes: ((8, m), (T, 2)) : ((T, SBO), (1, LBO)), LBO and SBO in elements.
TEST(Wgmma, KMajorLayoutIsCanonicalInterleave) {
  const int lbo = static_cast<int>(kLeadingBytes / 2), sbo = static_cast<int>(kStrideBytes / 2);
  for (int rows : {8, 32, 64}) {
    std::set<uint32_t> offsets;
    for (int row = 0; row < rows; ++row) {
      for (int kk = 0; kk < 16; ++kk) {
        const int element = (row % 8) * 8 + (row / 8) * sbo + (kk % 8) * 1 + (kk / 8) * lbo;
        const uint32_t offset = k_major_offset(row, kk);
        EXPECT_EQ(offset, static_cast<uint32_t>(2 * element)) << "row " << row << " k " << kk;
        EXPECT_TRUE(offsets.insert(offset).second);
        EXPECT_LT(offset, k_major_slab_bytes(rows));  // a slab is dense: slabs do not overlap
      }
    }
  }
  // A core matrix (8 rows x 8 k) is 128 contiguous bytes: what the no-swizzle mode reads.
  std::set<uint32_t> core;
  for (int row = 0; row < 8; ++row)
    for (int kk = 0; kk < 8; ++kk) core.insert(k_major_offset(row, kk));
  EXPECT_EQ(*core.begin(), 0u);
  EXPECT_EQ(*core.rbegin(), 126u);
  EXPECT_EQ(core.size(), 64u);
}

TEST(Wgmma, DescriptorFields) {
  const uint64_t d = wgmma_descriptor(0x1230);
  EXPECT_EQ(d & 0x3FFF, 0x123u);               // start address >> 4
  EXPECT_EQ((d >> 16) & 0x3FFF, 128u >> 4);    // leading dimension byte offset >> 4
  EXPECT_EQ((d >> 32) & 0x3FFF, 256u >> 4);    // stride dimension byte offset >> 4
  EXPECT_EQ((d >> 49) & 0x7, 0u);              // base offset
  EXPECT_EQ(d >> 62, 0u);                      // layout type: no swizzle
  EXPECT_EQ(wgmma_descriptor(0x400), 0x0000001000080040ull);
  // Shared-memory addresses reach 228 KiB < 2^18: the 14 encoded bits hold all of them.
  EXPECT_EQ(wgmma_descriptor(0x38FF0) & 0x3FFF, 0x38FFu);
}

// SPEC section 1: a*sa is exact in FP16 and lies in [2^-10, 2688]. The tensor-core kernels need
// more: a NORMAL FP16 number (Hopper's mma.sync drops bits of products of subnormal operands,
// docs/MATRIX_UNITS.md), and exact in BF16 too for the BF16 variant. Every E2M1 code with every scale byte.
TEST(Operands, EveryDequantizedFactorIsANormalHalf) {
  int scaled_subnormal = 0;
  for (uint32_t code = 0; code < 16; ++code) {
    for (uint32_t byte = 0; byte < 256; ++byte) {
      const float v = e2m1_to_float(code) * e4m3_to_float(byte, false);
      if (std::isnan(v)) {
        EXPECT_EQ(byte & 0x7F, 0x7Fu);
        EXPECT_TRUE(std::isnan(float_from_fp16(fp16_from_double(v))));
        continue;
      }
      if (v == 0) continue;
      const double mag = std::fabs(static_cast<double>(v));
      EXPECT_GE(mag, std::ldexp(1.0, -10)) << code << " " << byte;
      EXPECT_LE(mag, 2688.0) << code << " " << byte;
      const uint16_t h = fp16_from_double(v);
      EXPECT_EQ(float_from_fp16(h), v) << "not exact in FP16: code " << code << " scale " << byte;
      EXPECT_NE(h & 0x7C00u, 0u) << "FP16 subnormal: code " << code << " scale " << byte;
      EXPECT_EQ(float_bits(v) & 0xFFFFu, 0u) << "not exact in BF16: code " << code << " scale " << byte;
      // The old gemm_tc tiles, v * 2^-14: subnormal for every |v| < 1.
      if ((fp16_from_double(std::ldexp(static_cast<double>(v), -14)) & 0x7C00u) == 0) ++scaled_subnormal;
    }
  }
  EXPECT_GT(scaled_subnormal, 0);
}

// dequantized_pair, which every tensor-core kernel gathers its operands with, against the
// element-wise decode: batch and row offsets, nibble order, the scale block, both layouts, and
// zeros (read from nowhere) past the rows and past k.
TEST(Operands, DequantizedPairIsTheElementwiseDecode) {
  const int64_t rows = 130, k = 50, l = 2, kb = (k + 15) / 16;  // 130 rows: two permuted row tiles
  uint8_t data[l * rows * k / 2];
  for (size_t i = 0; i < sizeof data; ++i) data[i] = static_cast<uint8_t>(i * 37 + 11);
  for (uint32_t layout : {uint32_t{NVFP4_SF_LINEAR}, uint32_t{NVFP4_SF_PERMUTED}}) {
    uint8_t scales[l * 256 * 4 * 4 * 4] = {};  // covers both layouts' sizes
    for (int64_t b = 0; b < l; ++b)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t s = 0; s < kb; ++s)
          scales[scale_offset(layout, rows, kb, b, r, s)] = static_cast<uint8_t>(0x20 + (b * 7 + r * 3 + s) % 0x50);
    for (int64_t b = 0; b < l; ++b) {
      for (int64_t r = 0; r < rows + 2; ++r) {
        for (int64_t x = 0; x < k + 16; x += 2) {
          const FactorPair f = dequantized_pair(data, scales, layout, rows, k, b, r, x);
          if (r >= rows || x >= k) {
            EXPECT_EQ(f.lo, 0.0f);
            EXPECT_EQ(f.hi, 0.0f);
            continue;
          }
          const uint8_t* row = data + (b * rows + r) * (k / 2);
          const float s = e4m3_to_float(scales[scale_offset(layout, rows, kb, b, r, x / 16)], false);
          EXPECT_EQ(f.lo, e2m1_to_float(e2m1_code(row, x)) * s) << layout << " " << b << " " << r << " " << x;
          EXPECT_EQ(f.hi, e2m1_to_float(e2m1_code(row, x + 1)) * s) << layout << " " << b << " " << r << " " << x;
        }
      }
    }
  }
}

}  // namespace
}  // namespace nvfp4::kern::tc
