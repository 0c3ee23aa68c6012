// The host GEMM, dual GEMM and grouped GEMM with block-scaled output (out_type nvfp4, SPEC.md
// section 2): the arithmetic of kernels/block_scaled_epilogue.h (FP32 accumulation as a plain
// CUDA-core kernel adds, alpha * acc or silu(G) * U rounded to FP32, each row's blocks of 16
// quantized by the recipe with the global scale handed over, 0x00 in the permuted SFQ's padding),
// the CUDA kernels' too. Shared by the built-in kernels and the mutants (a Bug builds each one).
#pragma once

#include "kernels/block_scaled_epilogue.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern::quant {

inline int run_gemm_nvfp4_out(const nvfp4_kernel_info& info, const nvfp4_problem* p, Bug bug) {
  if (!problem_fits(info, p) || p->op == NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const int64_t m = p->m, n = p->n, l = p->l, nb = (n + 15) / 16;
  const OutOperands g{p->a, p->sfa, p->b, p->sfb, m, n, p->k, p->sf_layout};
  const OutOperands u{p->a, p->sfa, p->b2, p->sfb2, m, n, p->k, p->sf_layout};
  const OutOperands* up = p->op == NVFP4_OP_DUAL_GEMM ? &u : nullptr;
  write_sf_padding(p->sf_layout, m, nb, l, p->sfq, 0, 1, bug);
#pragma omp parallel for collapse(2) schedule(static) if (l * m * n * p->k >= (int64_t(1) << 18))
  for (int64_t b = 0; b < l; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t s = 0; s < nb; ++s) {
        float v[16];
        const int64_t count = out_block_values(g, up, p->alpha, p->alpha2, b, i, s, v);
        quantize_out_block(v, count, p->recipe, p->global_scale[0], p->sf_layout, m, nb, b, i, s,
                           p->q + (b * m + i) * (n / 2), p->sfq, ExactRcp{}, bug);
      }
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
    const float gs = group_out_scale(p->group_out, g, bug);
    const OutOperands o{q.a, q.sfa, q.b, q.sfb, q.m, q.n, q.k, p->sf_layout};
    const int64_t nb = (q.n + 15) / 16;
    write_sf_padding(p->sf_layout, q.m, nb, 1, out.sfq, 0, 1, bug);
#pragma omp parallel for schedule(static) if (q.m * q.n * q.k >= (int64_t(1) << 18))
    for (int64_t i = 0; i < q.m; ++i) {
      for (int64_t s = 0; s < nb; ++s) {
        float v[16];
        const int64_t count = out_block_values(o, nullptr, q.alpha, 1.0f, 0, i, s, v);
        quantize_out_block(v, count, p->recipe, gs, p->sf_layout, q.m, nb, 0, i, s, out.q + i * (q.n / 2), out.sfq,
                           ExactRcp{}, bug);
      }
    }
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::kern::quant
