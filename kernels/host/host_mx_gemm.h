// The host MX engine for GEMV, GEMM, grouped and dual GEMM (SPEC.md section 1's block formats:
// NVFP4, MXFP4, MXFP8 E4M3 and E5M2, A and B each its own): elements and scales decoded from their bit fields, each product
// a*sa*b*sb formed in double (exact: at most 8 significant bits, exponents within +-300), summed
// in double block by block in k order (FP32 could not hold a block sum of E8M0 2^127 scales, whose
// cancellation to an ordinary number a correct kernel must still get), alpha and one rounding at
// the end to the output type. Kernels know only the ABI, so this is the kernels' own copy of the formats.
// `MxBug` plants one bug at a time for the mutants (mutation/mutants); MxBug::none is the
// built-in kernels' arithmetic.
#pragma once

#include <stdint.h>

#include <cmath>
#include <vector>

#include "kernels/block_scaled_decode.h"
#include "kernels/mx_bug.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern::mx {

// The ABI's operand format, 0 (a problem of an older version) being NVFP4.
inline uint32_t operand_format(uint32_t f) { return f == 0 ? uint32_t{NVFP4_FORMAT_NVFP4} : f; }
inline bool byte_elements(uint32_t f) { return f == NVFP4_FORMAT_MXFP8_E4M3 || f == NVFP4_FORMAT_MXFP8_E5M2; }
inline int64_t block_of(uint32_t f, MxBug bug) {
  return f == NVFP4_FORMAT_NVFP4 || bug == MxBug::block32_as_16 ? 16 : 32;
}
inline int64_t row_bytes(uint32_t f, int64_t k, MxBug bug) {
  return byte_elements(f) && bug != MxBug::mxfp8_as_nibbles ? k : k / 2;
}

// E8M0: 2^(e - 127) for e = 0..254 (0x00 is 2^-127, a float subnormal), 0xFF NaN.
inline double e8m0_to_double(uint32_t e, MxBug bug) {
  if (e == 0xFF) return bug == MxBug::nan_scale_ignored ? 1.0 : NAN;
  if (e == 0 && bug == MxBug::e8m0_zero_as_zero) return 0.0;
  return std::ldexp(1.0, static_cast<int>(e) - (bug == MxBug::e8m0_bias_126 ? 126 : 127));
}

// E5M2 `s eeeee mm`, bias 15: field 0 subnormal m * 2^-16, field 31 Inf (m = 0) or NaN.
inline double e5m2_to_double(uint32_t byte) {
  const uint32_t e = (byte >> 2) & 31u, m = byte & 3u;
  const double sign = (byte & 0x80u) ? -1.0 : 1.0;
  if (e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), -16);
  return sign * std::ldexp(4.0 + m, static_cast<int>(e) - 17);
}

// Element x of a row of format f.
inline double element(uint32_t f, const uint8_t* row, int64_t x, MxBug bug) {
  if (!byte_elements(f) || bug == MxBug::mxfp8_as_nibbles) return e2m1_to_float(e2m1_code(row, x));
  if (f == NVFP4_FORMAT_MXFP8_E4M3 || bug == MxBug::e5m2_as_e4m3) return e4m3_to_float(row[x], true);
  return e5m2_to_double(row[x]);
}

// One operand of the problem: its format, data and scales in the problem's layout.
struct MxOperand {
  uint32_t format;
  const uint8_t *data, *scales;
  int64_t rows;
};

inline double scale(const MxOperand& o, uint32_t layout, int64_t k, int64_t b, int64_t i, int64_t s, MxBug bug) {
  const int64_t block = block_of(o.format, bug), kb = (k + block - 1) / block;
  if (bug == MxBug::neighbour_block_scale && s + 1 < kb) ++s;
  const uint8_t byte = o.scales[scale_offset(layout, o.rows, kb, b, i, s)];
  if (o.format == NVFP4_FORMAT_NVFP4) return e4m3_to_float(byte, false);
  return e8m0_to_double(byte, bug);
}

// C[b][i][j] before alpha: block sums (blocks of A's format; B's scale looked up per element)
// in double, accumulated in double. ba and bb: the batch of A and of B (a packed grouped call's
// B and SFB are a batch of G); sbb: the batch B's scales are read from (bb unless a bug says).
inline double dot(const MxOperand& a, const MxOperand& bo, uint32_t layout, int64_t k, int64_t ba, int64_t bb, int64_t sbb,
                  int64_t i, int64_t j, MxBug bug) {
  const uint8_t* a_row = a.data + (ba * a.rows + i) * row_bytes(a.format, k, bug);
  const uint8_t* b_row = bo.data + (bb * bo.rows + j) * row_bytes(bo.format, k, bug);
  const int64_t block = block_of(a.format, bug), kb = (k + block - 1) / block, b_block = block_of(bo.format, bug);
  double acc = 0.0;
  for (int64_t t = 0; t < kb; ++t) {
    const int64_t s = bug == MxBug::blocks_reversed ? kb - 1 - t : t;
    const double sa = scale(a, layout, k, ba, i, s, bug);
    double sum = 0.0;
    for (int64_t x = s * block; x < k && x < (s + 1) * block; ++x) {
      const double sb = scale(bo, layout, k, sbb, j, x / b_block, bug);
      // Always multiplied: a NaN scale or element, or Inf * 0, gives NaN.
      sum += (element(a.format, a_row, x, bug) * sa) * (element(bo.format, b_row, x, bug) * sb);
    }
    acc += sum;
  }
  return acc;
}
inline double dot(const MxOperand& a, const MxOperand& bo, uint32_t layout, int64_t k, int64_t b, int64_t i, int64_t j,
                  MxBug bug) {
  return dot(a, bo, layout, k, b, b, b, i, j, bug);
}

// Whether p lies inside what info declares for an MX problem of the GEMM family (GEMV, GEMM,
// grouped and dual GEMM): problem_fits' checks with the declared formats, every k >= 1 and even
// where an operand packs E2M1 nibbles.
inline bool mx_problem_fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (p == nullptr || p->op < NVFP4_OP_GEMV || p->op > NVFP4_OP_DUAL_GEMM) return false;
  const uint32_t fa = operand_format(p->a_format), fb = operand_format(p->b_format);
  if (fa < NVFP4_FORMAT_NVFP4 || fa > NVFP4_FORMAT_MXFP8_E5M2 || fb < NVFP4_FORMAT_NVFP4 || fb > NVFP4_FORMAT_MXFP8_E5M2)
    return false;
  if (!((info.a_formats >> fa) & 1u) || !((info.b_formats >> fb) & 1u)) return false;
  if (problem_out_type(p) == NVFP4_OUT_NVFP4) return false;  // NVFP4 output quantizes NVFP4 results only
  const bool nibbles = !byte_elements(fa) || !byte_elements(fb);
  const auto k_ok = [nibbles](int64_t k) { return k >= 1 && (!nibbles || k % 2 == 0); };
  // problem_fits checks everything else for an even k (a row of odd k is at most k + 1 bytes).
  nvfp4_problem even = *p;
  even.k += even.k % 2;
  if (p->op != NVFP4_OP_GROUPED_GEMM) return k_ok(p->k) && problem_fits(info, &even);
  if (p->groups < 1 || p->group == nullptr || p->groups > (int64_t{1} << 24)) return false;
  std::vector<nvfp4_group> groups(p->group, p->group + p->groups);
  for (nvfp4_group& q : groups) {
    if (!k_ok(q.k)) return false;
    q.k += q.k % 2;
  }
  even.group = groups.data();
  return problem_fits(info, &even);
}

// The whole GEMV, GEMM or dual GEMM with one bug (none for the built-in kernels). Dual GEMM: G
// and U each in double with its own alpha, then silu(G) * U in FP32 (output_words.h).
inline int run_mx(const nvfp4_kernel_info& info, const nvfp4_problem* p, MxBug bug) {
  if (!mx_problem_fits(info, p) || p->op == NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const MxOperand a{operand_format(p->a_format), p->a, p->sfa, p->m};
  const MxOperand b{operand_format(p->b_format), p->b, p->sfb, p->n};
  const MxOperand b2{operand_format(p->b_format), p->b2, p->sfb2, p->n};
  const int64_t m = p->m, n = p->n, k = p->k, l = p->l;
  const uint32_t out = problem_out_type(p), layout = p->sf_layout;
  const bool dual = p->op == NVFP4_OP_DUAL_GEMM;
#pragma omp parallel for collapse(2) schedule(static) if (l * m * n * k >= (int64_t(1) << 18))
  for (int64_t bt = 0; bt < l; ++bt)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = (bt * m + i) * n + j;
        const double g = static_cast<double>(p->alpha) * dot(a, b, layout, k, bt, i, j, bug);
        if (!dual) {
          store_output(p->c, at, out, g);
        } else {
          const double u = static_cast<double>(p->alpha2) * dot(a, b2, layout, k, bt, i, j, bug);
          store_silu_product(p->c, at, out, static_cast<float>(g), static_cast<float>(u));
        }
      }
  return NVFP4_OK;
}

// Grouped GEMM, every group an l = 1 GEMM of the problem's formats with its own alpha. Separate
// arrangement: each group's own pointers. Packed (NVFP4_FLAG_GROUPS_PACKED, SPEC section 2): A
// and C rows from M_g = m_0 + ... + m_(g-1) (rows of the format's bytes), B and SFB a batch of G,
// SFA linear rows from M_g or permuted tiles from T_g = ceil(m_0/128) + ... + ceil(m_(g-1)/128),
// with A's kb = ceil(k / block of A's format). MxBug::group0_scales (packed) reads every group's
// scales without its offset, as group 0's.
inline int run_mx_grouped(const nvfp4_kernel_info& info, const nvfp4_problem* p, MxBug bug) {
  if (!mx_problem_fits(info, p) || p->op != NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const uint32_t fa = operand_format(p->a_format), fb = operand_format(p->b_format);
  const uint32_t out = problem_out_type(p), layout = p->sf_layout;
  const bool packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  const bool group0 = bug == MxBug::group0_scales;
  int64_t row0 = 0, tile0 = 0;  // M_g and T_g
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    const int64_t m = q.m, n = q.n, k = q.k, kba = (k + block_of(fa, bug) - 1) / block_of(fa, bug);
    MxOperand a{fa, q.a, q.sfa, m}, b{fb, q.b, q.sfb, n};
    int64_t b_batch = 0, c0 = 0;
    void* c = q.c;
    if (packed) {
      const int64_t sfa0 = layout == NVFP4_SF_LINEAR ? row0 * kba : tile0 * ((kba + 3) / 4) * 512;
      a = {fa, p->a + row0 * row_bytes(fa, k, bug), p->sfa + (group0 ? 0 : sfa0), m};
      b = {fb, p->b, p->sfb, n};
      b_batch = g;
      c = p->c;
      c0 = row0 * n;
    }
    row0 += m;
    tile0 += (m + 127) / 128;
    const int64_t sfb_batch = group0 ? 0 : b_batch;  // the bug: SFB's batch 0 (B's data stay group g's)
#pragma omp parallel for collapse(2) schedule(static) if (m * n * k >= (int64_t(1) << 18))
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        store_output(c, c0 + i * n + j, out, static_cast<double>(q.alpha) * dot(a, b, layout, k, 0, b_batch, sfb_batch, i, j, bug));
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::kern::mx
