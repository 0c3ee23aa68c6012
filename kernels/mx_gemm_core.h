// The arithmetic of the naive MX GEMM (one output element: chunks of one scale block, each chunk's
// raw products summed in FP32 in element order and scaled once into a wide sum, see
// cuda/mx_gemm_naive.cuh), of its dual GEMM (G and U so) and of its grouped GEMM (each group's
// l = 1 GEMM, group_gemm), with
// the MX mutants' bugs (mx_bug.h) as a switch. Host and device: the CUDA kernel runs it, and the
// CPU tests run the same code against the exact reference where no GPU is.
#pragma once

#include <stdint.h>

#include "kernels/mx_block_decode.h"
#include "kernels/mx_bug.h"
#include "kernels/wide_sum.h"

namespace nvfp4::kern::mx {

// One operand as the kernel reads it: data and scales (in the problem's layout), its format and
// rows (m for A, n for B).
struct Operand {
  const uint8_t* data;
  const uint8_t* scales;
  uint32_t format;
  int64_t rows;
};

NVFP4_KERNEL_HD bool is_mx(uint32_t format) { return format_or_nvfp4(format) != NVFP4_FORMAT_NVFP4; }
NVFP4_KERNEL_HD bool is_mxfp8(uint32_t format) {
  return format == NVFP4_FORMAT_MXFP8_E4M3 || format == NVFP4_FORMAT_MXFP8_E5M2;
}

// Element x of row r of batch b, as the kernel (with its bug) reads it.
NVFP4_KERNEL_HD float read_element(const Operand& o, int64_t k, int64_t b, int64_t r, int64_t x, MxBug bug) {
  if (bug == MxBug::mxfp8_as_nibbles && is_mxfp8(o.format))
    return e2m1_to_float(e2m1_code(o.data + (b * o.rows + r) * (k / 2), x));
  const uint8_t* row = o.data + (b * o.rows + r) * format_row_bytes(o.format, k);
  if (bug == MxBug::e5m2_as_e4m3 && o.format == NVFP4_FORMAT_MXFP8_E5M2) return e4m3_element_to_float(row[x]);
  return format_element(o.format, row, x);
}

// The scale of element x of row r of batch b; *skip set when the kernel drops the block.
NVFP4_KERNEL_HD ScaleParts read_scale(const Operand& o, uint32_t layout, int64_t k, int64_t b, int64_t r, int64_t x,
                                      MxBug bug, bool* skip) {
  const int64_t block = format_block(o.format), kb = (k + block - 1) / block;
  int64_t s = x / block;
  if (is_mx(o.format)) {
    if (bug == MxBug::block32_as_16) s = x / 16 < kb ? x / 16 : kb - 1;  // clamped: the bug reads wrong scales, never past them
    if (bug == MxBug::neighbour_block_scale && (s ^ 1) < kb) s ^= 1;
  }
  const uint32_t byte = o.scales[scale_offset(layout, o.rows, kb, b, r, s)];
  ScaleParts sp = format_scale(o.format, byte);
  if (!is_mx(o.format)) return sp;
  if (bug == MxBug::e8m0_zero_as_zero && byte == 0) sp.mant = 0.0f;
  if (bug == MxBug::e8m0_bias_126) sp.exp += 1;
  if (bug == MxBug::nan_scale_ignored && byte == 0xFFu) *skip = true;
  return sp;
}

// The sum of output (b, i, j): chunks of the smaller of the two block sizes, each chunk's raw
// FP32 sum scaled once into a WideSum (kernels/wide_sum.h: E8M0 scales reach far outside FP32's
// exponent range). A whole MX block is one chunk, so a block whose scaled halves would overflow
// with opposite signs (Inf - Inf = NaN) is summed before its scale is applied.
NVFP4_KERNEL_HD WideSum output_sum(const nvfp4_problem& p, const Operand& a, const Operand& bo, int64_t b, int64_t i,
                                 int64_t j, MxBug bug) {
  const int64_t chunk = format_block(a.format) < format_block(bo.format) ? format_block(a.format) : format_block(bo.format);
  WideSum acc;
  for (int64_t x0 = 0; x0 < p.k; x0 += chunk) {
    const int64_t x1 = x0 + chunk < p.k ? x0 + chunk : p.k;
    float raw = 0.0f;
    for (int64_t x = x0; x < x1; ++x) raw += read_element(a, p.k, b, i, x, bug) * read_element(bo, p.k, b, j, x, bug);
    bool skip = false;
    const ScaleParts sa = read_scale(a, p.sf_layout, p.k, b, i, x0, bug, &skip);
    const ScaleParts sb = read_scale(bo, p.sf_layout, p.k, b, j, x0, bug, &skip);
    if (!skip) acc.add(raw * (sa.mant * sb.mant), sa.exp + sb.exp);  // never skipped when honest: NaN must reach C
  }
  return acc;
}

// G and U of a dual GEMM's output (b, i, j), each with its alpha: alpha * (A*B) and alpha2 * (A*B2),
// each summed as output_sum does and rounded once to FP32. The epilogue silu(G) * U is
// output_words.h's store_silu_product.
NVFP4_KERNEL_HD void dual_sums(const nvfp4_problem& p, const Operand& a, const Operand& b1, const Operand& b2, int64_t b,
                               int64_t i, int64_t j, MxBug bug, float* g, float* u) {
  *g = static_cast<float>(output_sum(p, a, b1, b, i, j, bug).scaled(p.alpha));
  *u = static_cast<float>(output_sum(p, a, b2, b, i, j, bug).scaled(p.alpha2));
}

// Group g of a grouped problem as the l = 1 GEMM the kernel runs: its shape and alpha, and its
// pointers: the group table's (separate arrangement) or the packed buffers' at SPEC section 2's
// offsets (packed: A and C rows from row0 = M_g, SFA linear rows from M_g or permuted tiles from
// tile0 = T_g, B and SFB the g-th of a batch of G), with A's and B's own row bytes and blocks.
NVFP4_KERNEL_HD nvfp4_problem group_gemm(const nvfp4_problem& p, const nvfp4_group& q, int64_t g, bool packed,
                                         int64_t row0, int64_t tile0) {
  nvfp4_problem one = p;
  one.op = NVFP4_OP_GEMM;
  one.m = q.m, one.n = q.n, one.k = q.k, one.l = 1;
  one.alpha = q.alpha;
  one.groups = 0;
  one.group = one.group_device = nullptr;
  const uint32_t fa = format_or_nvfp4(p.a_format), fb = format_or_nvfp4(p.b_format);
  if (!packed) {
    one.a = q.a, one.b = q.b, one.sfa = q.sfa, one.sfb = q.sfb;
    one.c = static_cast<uint16_t*>(q.c);
    return one;
  }
  const int64_t kba = (q.k + format_block(fa) - 1) / format_block(fa), kbb = (q.k + format_block(fb) - 1) / format_block(fb);
  const bool linear = p.sf_layout == NVFP4_SF_LINEAR;
  const int64_t sfb_batch = linear ? q.n * kbb : ((q.n + 127) / 128) * ((kbb + 3) / 4) * 512;
  one.a = p.a + row0 * format_row_bytes(fa, q.k);
  one.sfa = p.sfa + (linear ? row0 * kba : tile0 * ((kba + 3) / 4) * 512);
  one.b = p.b + g * q.n * format_row_bytes(fb, q.k);
  one.sfb = p.sfb + g * sfb_batch;
  const int64_t word = p.out_type == NVFP4_OUT_FP32 ? 4 : 2;
  one.c = reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(p.c) + row0 * q.n * word);
  return one;
}

}  // namespace nvfp4::kern::mx
