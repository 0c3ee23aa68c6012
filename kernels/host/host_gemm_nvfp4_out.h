// The host GEMM and dual GEMM with block-scaled output (out_type nvfp4, SPEC.md section 2): FP32
// accumulation as a plain CUDA-core kernel adds (each 16-element block in FP32, times sa*sb,
// blocks in order), alpha * acc (or silu(G) * U) rounded to FP32, then each row's blocks of 16
// quantized by the recipe with the global scale handed over (kernels/block_scaled_epilogue.h).
// SFQ is zeroed first, which writes the permuted layout's padding cells 0x00. Shared by the
// built-in kernels and the mutants (a Bug builds each one).
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/block_scaled_decode.h"
#include "kernels/block_scaled_epilogue.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern::quant {

// One m x n x k GEMM's operands (a batch of l, or one group with l = 1).
struct OutOperands {
  const uint8_t *a, *sfa, *b, *sfb;
  int64_t m, n, k;
  uint32_t layout;
};

// sum_x A[b][i][x]*SA * B[b][j][x]*SB (ue4m3 scales).
inline float out_dot(const OutOperands& o, int64_t b, int64_t i, int64_t j) {
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

// The same with B = (data, scales) of the problem (B, or dual GEMM's B2).
inline float nvfp4_out_dot(const nvfp4_problem* p, const uint8_t* b_data, const uint8_t* b_scales, int64_t b, int64_t i,
                           int64_t j) {
  return out_dot(OutOperands{p->a, p->sfa, b_data, b_scales, p->m, p->n, p->k, p->sf_layout}, b, i, j);
}

inline int run_gemm_nvfp4_out(const nvfp4_kernel_info& info, const nvfp4_problem* p, Bug bug) {
  if (!problem_fits(info, p) || p->op == NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const int64_t m = p->m, n = p->n, l = p->l, nb = (n + 15) / 16;
  const bool dual = p->op == NVFP4_OP_DUAL_GEMM;
  if (bug != Bug::padding_not_written) std::memset(p->sfq, 0, static_cast<size_t>(sf_bytes(p->sf_layout, m, nb, l)));
#pragma omp parallel for collapse(2) schedule(static) if (l * m * n * p->k >= (int64_t(1) << 18))
  for (int64_t b = 0; b < l; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      std::vector<float> row(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        const float g = p->alpha * nvfp4_out_dot(p, p->b, p->sfb, b, i, j);
        if (!dual) {
          row[static_cast<size_t>(j)] = g;
          continue;
        }
        const float u = p->alpha2 * nvfp4_out_dot(p, p->b2, p->sfb2, b, i, j);
        const float silu = g / (1.0f + std::exp(-g));
        row[static_cast<size_t>(j)] = silu * u;
      }
      for (int64_t s = 0; s < nb; ++s)
        quantize_out_block(row.data() + 16 * s, n - 16 * s < 16 ? n - 16 * s : 16, p->recipe, p->global_scale[0],
                           p->sf_layout, m, nb, b, i, s, p->q + (b * m + i) * (n / 2), p->sfq, ExactRcp{}, bug);
    }
  }
  return NVFP4_OK;
}

// Grouped GEMM with block-scaled output (separate arrangement): each non-empty group an l = 1
// GEMM of its own, alpha_g * acc quantized into that group's Q and SFQ of problem->group_out
// with that group's own global scale.
inline int run_grouped_gemm_nvfp4_out(const nvfp4_kernel_info& info, const nvfp4_problem* p, Bug bug) {
  if (!problem_fits(info, p) || p->op != NVFP4_OP_GROUPED_GEMM || p->group_out == nullptr) return NVFP4_UNSUPPORTED;
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    const nvfp4_group_out& out = p->group_out[g];
    if (q.m == 0) continue;
    const float gs = bug == Bug::group0_global_scale ? p->group_out[0].global_scale : out.global_scale;
    const OutOperands o{q.a, q.sfa, q.b, q.sfb, q.m, q.n, q.k, p->sf_layout};
    const int64_t nb = (q.n + 15) / 16;
    if (bug != Bug::padding_not_written) std::memset(out.sfq, 0, static_cast<size_t>(sf_bytes(p->sf_layout, q.m, nb, 1)));
#pragma omp parallel for schedule(static) if (q.m * q.n * q.k >= (int64_t(1) << 18))
    for (int64_t i = 0; i < q.m; ++i) {
      std::vector<float> row(static_cast<size_t>(q.n));
      for (int64_t j = 0; j < q.n; ++j) row[static_cast<size_t>(j)] = q.alpha * out_dot(o, 0, i, j);
      for (int64_t s = 0; s < nb; ++s)
        quantize_out_block(row.data() + 16 * s, q.n - 16 * s < 16 ? q.n - 16 * s : 16, p->recipe, gs, p->sf_layout,
                           q.m, nb, 0, i, s, out.q + i * (q.n / 2), out.sfq, ExactRcp{}, bug);
    }
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::kern::quant
