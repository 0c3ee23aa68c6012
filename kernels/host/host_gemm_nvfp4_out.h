// The host GEMM, dual GEMM and grouped GEMM with block-scaled output (out_type nvfp4, SPEC.md
// section 2): the arithmetic of kernels/block_scaled_epilogue.h (FP32 accumulation as a plain
// CUDA-core kernel adds, alpha * acc or silu(G) * U rounded to FP32, each row's blocks of 16
// quantized by the recipe with the global scale handed over, 0x00 in the permuted SFQ's padding),
// the CUDA kernels' too. Shared by the built-in kernels and the mutants (a Bug builds each one).
#pragma once

#include <stdint.h>

#include <vector>

#include "kernels/block_scaled_epilogue.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern::quant {

// out_dot decodes every element and scale of its two rows again for each output element. The
// host decodes a run of rows once per call: each E2M1 element as twice its value (an integer in
// [-12, 12]) and each block's scale as a float. A block's sum of products is then an integer sum
// over int8 values divided by 4: block_products' float sum is exact (each partial sum a multiple
// of 1/4 of magnitude at most 16 * 36, within 12 bits), so the two agree to the bit, +0 included.
struct DecodedOutRows {
  int64_t k = 0, kb = 0;
  std::vector<int8_t> twice;  // rows * k
  std::vector<float> scales;  // rows * kb

  // Rows [r0, r0 + count) of batch b of an operand with `rows` rows.
  void decode(const uint8_t* data, const uint8_t* sf, uint32_t layout, int64_t rows, int64_t k_, int64_t b, int64_t r0,
              int64_t count, bool parallel) {
    k = k_, kb = (k + 15) / 16;
    twice.resize(static_cast<size_t>(count * k));
    scales.resize(static_cast<size_t>(count * kb));
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < count; ++r) {
      const uint8_t* row = data + (b * rows + r0 + r) * (k / 2);
      for (int64_t x = 0; x < k; ++x)
        twice[static_cast<size_t>(r * k + x)] = static_cast<int8_t>(2.0f * kern::e2m1_to_float(kern::e2m1_code(row, x)));
      for (int64_t s = 0; s < kb; ++s)
        scales[static_cast<size_t>(r * kb + s)] = kern::e4m3_to_float(sf[kern::scale_offset(layout, rows, kb, b, r0 + r, s)], false);
    }
  }
};

// out_dot over decoded rows: row ra of A and row rb of B, the same float operations in the same
// order (block_products as the integer sum / 4, exact).
inline float out_dot_decoded(const DecodedOutRows& a, int64_t ra, const DecodedOutRows& b, int64_t rb) {
  const int8_t *av = a.twice.data() + ra * a.k, *bv = b.twice.data() + rb * b.k;
  const float *sas = a.scales.data() + ra * a.kb, *sbs = b.scales.data() + rb * b.kb;
  float acc = 0.0f;
  for (int64_t s = 0; s < a.kb; ++s) {
    const int64_t x1 = 16 * s + 16 < a.k ? 16 * s + 16 : a.k;
    int32_t sum = 0;
    for (int64_t x = 16 * s; x < x1; ++x) sum += av[x] * bv[x];
    acc += static_cast<float>(sum) * 0.25f * (sas[s] * sbs[s]);
  }
  return acc;
}

// Rows of A (and of B, a multiple of 16: whole output blocks) decoded at a time: about 2^24
// elements (16 MiB), so a large problem is never decoded whole.
inline int64_t out_tile_rows(int64_t k) {
  const int64_t rows = (int64_t{1} << 24) / (k > 0 ? k : 1);
  return rows < 16 ? 16 : rows / 16 * 16;
}

// One batch (or group, l = 1) of a GEMM with block-scaled output from decoded rows: G's operands
// g, U's u for dual GEMM (else nullptr), every block of every row quantized into q (row i at
// q + i * (n / 2)) and sfq. rows: rows decoded at a time, a multiple of 16 (0: out_tile_rows).
inline void gemm_out_decoded(const OutOperands& g, const OutOperands* u, int64_t b, float alpha, float alpha2,
                             uint32_t recipe, float gs, uint8_t* q, uint8_t* sfq, bool parallel, Bug bug,
                             int64_t rows = 0) {
  const int64_t m = g.m, n = g.n, k = g.k, nb = (n + 15) / 16;
  if (rows <= 0) rows = out_tile_rows(k);
  DecodedOutRows da, db, du;
  for (int64_t i0 = 0; i0 < m; i0 += rows) {
    const int64_t mi = m - i0 < rows ? m - i0 : rows;
    da.decode(g.a, g.sfa, g.layout, m, k, b, i0, mi, parallel);
    for (int64_t j0 = 0; j0 < n; j0 += rows) {
      const int64_t nj = n - j0 < rows ? n - j0 : rows;
      db.decode(g.b, g.sfb, g.layout, n, k, b, j0, nj, parallel);
      if (u != nullptr) du.decode(u->b, u->sfb, u->layout, n, k, b, j0, nj, parallel);
      const int64_t s0 = j0 / 16, s1 = (j0 + nj + 15) / 16;
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
      for (int64_t i = 0; i < mi; ++i) {
        for (int64_t s = s0; s < s1; ++s) {
          const auto dot = [&](int64_t j, bool second) {
            return out_dot_decoded(da, i, second ? du : db, j - j0);
          };
          float v[16];
          const int64_t count = block_values(n, u != nullptr, alpha, alpha2, s, dot, v);
          quantize_out_block(v, count, recipe, gs, g.layout, m, nb, b, i0 + i, s, q + (b * m + i0 + i) * (n / 2), sfq,
                             ExactRcp{}, bug);
        }
      }
    }
  }
}

inline int run_gemm_nvfp4_out(const nvfp4_kernel_info& info, const nvfp4_problem* p, Bug bug) {
  if (!problem_fits(info, p) || p->op == NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const int64_t m = p->m, n = p->n, l = p->l, nb = (n + 15) / 16;
  const OutOperands g{p->a, p->sfa, p->b, p->sfb, m, n, p->k, p->sf_layout};
  const OutOperands u{p->a, p->sfa, p->b2, p->sfb2, m, n, p->k, p->sf_layout};
  const OutOperands* up = p->op == NVFP4_OP_DUAL_GEMM ? &u : nullptr;
  write_sf_padding(p->sf_layout, m, nb, l, p->sfq, 0, 1, bug);
  for (int64_t b = 0; b < l; ++b)
    gemm_out_decoded(g, up, b, p->alpha, p->alpha2, p->recipe, p->global_scale[0], p->q, p->sfq,
                     l * m * n * p->k >= (int64_t(1) << 18), bug);
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
    gemm_out_decoded(o, nullptr, 0, q.alpha, 1.0f, p->recipe, gs, out.q, out.sfq, q.m * q.n * q.k >= (int64_t(1) << 18),
                     bug);
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::kern::quant
