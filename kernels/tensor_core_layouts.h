// Where the operands of Hopper's tensor-core instructions live, for the kernels that use them
// directly (honest variants, mutants): mma.sync m16n8k16 fragments per lane, wgmma m64nNk16
// accumulators per thread, and wgmma's no-swizzle K-major shared-memory layout with its matrix
// descriptor. Host and device, so kernels/tests/tensor_core_layouts_test.cc checks them on a CPU.
#pragma once

#include <stdint.h>

#include "kernels/block_scaled_decode.h"  // NVFP4_KERNEL_HD

namespace nvfp4::kern::tc {

struct RowCol {
  int row, col;
};

// ---- mma.sync.aligned.m16n8k16.row.col, .f16 / .bf16 operands, .f32 accumulators -----------
// PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point type". Lane = 4 * g + t.

// A (16 x 16, m x k): 32-bit register r (0..3) holds the two elements (row, col) and
// (row, col + 1), the lower one in the low half. Rows g, g+8, g, g+8; columns 2t, 2t, 2t+8, 2t+8.
NVFP4_KERNEL_HD RowCol mma_a_pair(int lane, int r) {
  return {lane / 4 + 8 * (r & 1), 2 * (lane % 4) + 8 * (r >> 1)};
}

// B (16 x 8, k x n): register r (0..1) holds (k, n) and (k + 1, n), returned as {row = k, col = n}.
NVFP4_KERNEL_HD RowCol mma_b_pair(int lane, int r) { return {2 * (lane % 4) + 8 * r, lane / 4}; }

// C and D (16 x 8, m x n): float i (0..3).
NVFP4_KERNEL_HD RowCol mma_c_element(int lane, int i) { return {lane / 4 + 8 * (i >> 1), 2 * (lane % 4) + (i & 1)}; }

// ---- wgmma.mma_async m64nNk16, .f32 accumulators ------------------------------------------
// A warpgroup of 128 threads; warp w owns rows 16w..16w+15, laid out like mma's C fragment,
// repeated for each 8 columns: float i (0..N/2-1) of `thread` (CUTLASS CLayout_64xN).
NVFP4_KERNEL_HD RowCol wgmma_d_element(int thread, int i) {
  const int lane = thread % 32;
  return {16 * (thread / 32) + lane / 4 + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * (lane % 4) + (i & 1)};
}

// The no-swizzle ("interleave") K-major layout of one k16 slab of an operand with `rows` rows (a
// multiple of 8), 16-bit elements: 8 x 8 core matrices of 8 rows x 16 contiguous bytes (8 k),
// the two k halves of an 8-row group kLeadingBytes apart, 8-row groups kStrideBytes apart. The
// PTX ISA calls these the leading dimension (k) and stride dimension (m or n) byte offsets.
constexpr uint32_t kLeadingBytes = 128;
constexpr uint32_t kStrideBytes = 256;

// Byte offset of element (row, kk), kk < 16, inside a slab.
NVFP4_KERNEL_HD uint32_t k_major_offset(int row, int kk) {
  return static_cast<uint32_t>((row / 8) * kStrideBytes + (kk / 8) * kLeadingBytes + (row % 8) * 16 + (kk % 8) * 2);
}

// Bytes of one slab (rows x 16 elements of 2 bytes): slab s of a k chunk starts s * this in.
NVFP4_KERNEL_HD uint32_t k_major_slab_bytes(int rows) { return static_cast<uint32_t>(rows) * 32u; }

// The 64-bit matrix descriptor of a slab at shared-memory address `smem_addr` (16-byte aligned):
// bits 0-13 address >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4,
// 49-51 base offset (0: no swizzle pattern to align), 62-63 layout type (0: no swizzle).
NVFP4_KERNEL_HD uint64_t wgmma_descriptor(uint32_t smem_addr) {
  return uint64_t{(smem_addr & 0x3FFFFu) >> 4} | (uint64_t{kLeadingBytes >> 4} << 16) |
         (uint64_t{kStrideBytes >> 4} << 32);
}

}  // namespace nvfp4::kern::tc
