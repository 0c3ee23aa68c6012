// The epilogue of a GEMM with block-scaled output (SPEC.md section 2, out_type nvfp4), for host
// and device: a row's FP32 results quantized along n, in blocks of 16, with the problem's recipe
// and global scale, by kernels/quantize_core.h's arithmetic. Codes go to Q (row-major like A with
// n in place of k), scale bytes to SFQ (the problem's layout with n in place of k), 0x00 to the
// permuted SFQ's padding cells. The host kernels, the CUDA kernels and their mutants all compute
// here, so a Bug of quantize_core.h is the same arithmetic on either side: the host mutants' kill
// table shows what the CUDA mutants' bugs do.
#pragma once

#include "kernels/quantize_core.h"

namespace nvfp4::kern::quant {

// One m x n x k GEMM's operands (a batch of l, or one group with l = 1).
struct OutOperands {
  const uint8_t *a, *sfa, *b, *sfb;
  int64_t m, n, k;
  uint32_t layout;
};

// sum_x A[b][i][x]*SA * B[b][j][x]*SB (ue4m3 scales) as a plain CUDA-core kernel adds it: each
// 16-element block in FP32, times sa*sb, the blocks in order (never skipped: a NaN scale must
// reach the output).
NVFP4_QHD inline float out_dot(const OutOperands& o, int64_t b, int64_t i, int64_t j) {
  const int64_t kb = (o.k + 15) / 16;
  const uint8_t* a_row = o.a + (b * o.m + i) * (o.k / 2);
  const uint8_t* b_row = o.b + (b * o.n + j) * (o.k / 2);
  float acc = 0.0f;
  for (int64_t s = 0; s < kb; ++s) {
    const float sa = kern::e4m3_to_float(o.sfa[kern::scale_offset(o.layout, o.m, kb, b, i, s)], false);
    const float sb = kern::e4m3_to_float(o.sfb[kern::scale_offset(o.layout, o.n, kb, b, j, s)], false);
    acc += kern::block_products(a_row, b_row, s, o.k) * (sa * sb);
  }
  return acc;
}

// The values of block s of a row (columns [16s, 16s + count), count = min(16, n - 16s)) into v,
// each from dot(j, second): G's sum for column j (second false) or U's (second true); alpha * G,
// or for dual GEMM silu(alpha * G) * alpha2 * U with an accurate expf and an IEEE division.
// Returns count.
template <class Dot>
NVFP4_QHD inline int64_t block_values(int64_t n, bool dual, float alpha, float alpha2, int64_t s, const Dot& dot,
                                      float* v) {
  const int64_t count = n - 16 * s < 16 ? n - 16 * s : 16;
  for (int64_t c = 0; c < count; ++c) {
    const int64_t j = 16 * s + c;
    const float x = alpha * dot(j, false);
    if (!dual) {
      v[c] = x;
      continue;
    }
    const float up = alpha2 * dot(j, true);
    const float silu = x / (1.0f + expf(-x));
    v[c] = silu * up;
  }
  return count;
}

// out_dot of row i of batch b with G's operands, or with U's (u).
struct OperandDot {
  const OutOperands *g, *u;
  int64_t b, i;
  NVFP4_QHD float operator()(int64_t j, bool second) const { return out_dot(second ? *u : *g, b, i, j); }
};

// block_values of row i of batch b, straight from the operands (u non-null: U's, dual GEMM).
NVFP4_QHD inline int64_t out_block_values(const OutOperands& g, const OutOperands* u, float alpha, float alpha2,
                                          int64_t b, int64_t i, int64_t s, float* v) {
  return block_values(g.n, u != nullptr, alpha, alpha2, s, OperandDot{&g, u, b, i}, v);
}

// Block s (columns [16s, 16s + count)) of row i of batch b, its values v[0..count): the block's
// amax (NaN-suppressing), scale byte and encode factor, then its codes into q_row (the row's
// n/2 bytes). rows and nb: SFQ's rows per batch and blocks per row.
template <class Rcp>
NVFP4_QHD inline void quantize_out_block(const float* v, int64_t count, uint32_t recipe, float gs, uint32_t layout,
                                         int64_t rows, int64_t nb, int64_t b, int64_t i, int64_t s, uint8_t* q_row,
                                         uint8_t* sfq, Rcp rcp, Bug bug) {
  float amax = 0.0f;
  for (int64_t c = 0; c < count; ++c) {
    const float a = fabsf(v[c]);
    if (a > amax) amax = a;
  }
  float os;
  sfq[sf_offset(layout, rows, nb, b, i, s)] = nvfp4_block_scale(recipe, amax, gs, rcp, bug, &os);
  for (int64_t c = 0; c < count; ++c) {
    const int64_t x = 16 * s + c;
    const uint8_t code = e2m1_from_float(v[c] * os);
    uint8_t& byte = q_row[x / 2];
    byte = (x & 1) ? static_cast<uint8_t>((byte & 0x0F) | (code << 4)) : static_cast<uint8_t>((byte & 0xF0) | code);
  }
}

// The global scale group g of a grouped GEMM is encoded with: its own from the group_out table
// (bug group0_global_scale: group 0's for every group, cutlass PR #3392).
NVFP4_QHD inline float group_out_scale(const nvfp4_group_out* table, int64_t g, Bug bug) {
  return table[bug == Bug::group0_global_scale ? 0 : g].global_scale;
}

// Whether byte `at` of an SFQ of l batches of rows x nb scales in `layout` is a padding cell: in
// the permuted layout, a cell of the last 128 x 4 tiles whose row is past `rows` or whose block
// is past nb (the inverse of sf_offset: a tile's byte r holds row (r/16) + 32*((r%16)/4) and
// block r%4 of the tile). The linear layout has none.
NVFP4_QHD inline bool sf_padding_cell(uint32_t layout, int64_t rows, int64_t nb, int64_t at) {
  if (layout == NVFP4_SF_LINEAR) return false;
  const int64_t mt = (rows + 127) / 128, kt = (nb + 3) / 4, tile = at / 512, r = at % 512;
  const int64_t i = (tile / kt) % mt * 128 + (r % 16) / 4 * 32 + r / 16, s = tile % kt * 4 + r % 4;
  return i >= rows || s >= nb;
}

// Writes 0x00 into SFQ's padding cells among bytes first, first + stride, ... (a thread's share;
// the host passes 0 and 1); bug padding_not_written leaves them as they were (the vLLM#45741
// class: a consumer that reads the padding reads garbage).
NVFP4_QHD inline void write_sf_padding(uint32_t layout, int64_t rows, int64_t nb, int64_t l, uint8_t* sfq,
                                       int64_t first, int64_t stride, Bug bug) {
  if (layout == NVFP4_SF_LINEAR || bug == Bug::padding_not_written) return;
  const int64_t cells = sf_bytes(layout, rows, nb, l);
  for (int64_t at = first; at < cells; at += stride)
    if (sf_padding_cell(layout, rows, nb, at)) sfq[at] = 0x00;
}

}  // namespace nvfp4::kern::quant
