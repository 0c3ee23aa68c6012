// The host mutant engine of ABI version 2's problems: GEMV/GEMM in any output type, dual GEMM
// with SiLU and grouped GEMM (separate or packed arrangement), each element an FP32 dot product
// (element by element), alpha and one rounding at the end, with the bugs of mutant_bugs.h's
// "Output types", "Dual GEMM" and "Grouped GEMM" sections behind a switch. With Bug::none it is
// a correct kernel (the controls ctl_host_*_unmutated).
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/output_words.h"
#include "kernels/problem_fits.h"
#include "mutation/mutants/host_row_dots.h"
#include "mutation/mutants/mutant_engines.h"

namespace nvfp4::mutants {
namespace {

// sum_x A[i][x]*SA * B[j][x]*SB in FP32, element order. Rows are given by their start; scales by
// their buffer, row count and batch (the scale layouts' own arithmetic).
float dot(const uint8_t* a_row, const uint8_t* sfa, int64_t a_rows, int64_t a_batch, int64_t i, const uint8_t* b_row,
          const uint8_t* sfb, int64_t b_rows, int64_t b_batch, int64_t j, int64_t k, uint32_t layout) {
  const int64_t kb = (k + 15) / 16;
  float acc = 0.0f;
  for (int64_t x = 0; x < k; ++x) {
    const float sa = kern::e4m3_to_float(sfa[kern::scale_offset(layout, a_rows, kb, a_batch, i, x / 16)], false);
    const float sb = kern::e4m3_to_float(sfb[kern::scale_offset(layout, b_rows, kb, b_batch, j, x / 16)], false);
    acc += (kern::e2m1_to_float(kern::e2m1_code(a_row, x)) * sa) * (kern::e2m1_to_float(kern::e2m1_code(b_row, x)) * sb);
  }
  return acc;
}

// Row r's factors as dot() forms them (decode_row without a bug), once per row instead of once
// per output.
void decode_plain(const uint8_t* row, const uint8_t* sf, int64_t rows, int64_t batch, int64_t r, int64_t k,
                  uint32_t layout, float* out) {
  decode_row(row, sf, layout, rows, (k + 15) / 16, batch, r, k, false, Bug::none, out);
}

// Decoded B matrices past this many floats: dot() element by element instead.
constexpr int64_t kMaxDecoded = int64_t(1) << 26;

float through_fp16(double v) { return kern::float_from_fp16(kern::fp16_from_double(v)); }

// v rounded once to the output type, with the output-type bugs.
void store(void* c, int64_t index, uint32_t out, double v, Bug bug) {
  if (bug == Bug::bf16_truncated && out == NVFP4_OUT_BF16) {
    static_cast<uint16_t*>(c)[index] = static_cast<uint16_t>(kern::float_bits(static_cast<float>(v)) >> 16);
    return;
  }
  if (bug == Bug::fp32_through_fp16 && out == NVFP4_OUT_FP32) {
    static_cast<float*>(c)[index] = through_fp16(v);
    return;
  }
  kern::store_output(c, index, out, v);
  mutant_output_word(c, index, out, bug);
}

// silu(g) * u in double (g and u formed in double: see kernels/output_words.h), with the
// dual-GEMM bugs that live in the epilogue.
double silu_product(double g, double u, Bug bug) {
  if (bug == Bug::dual_gate_up_swapped) std::swap(g, u);
  if (bug == Bug::dual_silu_fp16) {
    const float gh = through_fp16(static_cast<float>(g));
    const float e = through_fp16(std::exp(-gh));
    return static_cast<double>(through_fp16(gh / through_fp16(1.0f + e))) * u;
  }
  return g / (1.0 + std::exp(-g)) * u;
}

int run_dense(Bug bug, const nvfp4_problem* p) {
  const int64_t m = p->m, n = p->n, k = p->k, l = p->l, row_bytes = k / 2;
  const uint32_t out = kern::problem_out_type(p), layout = p->sf_layout;
  const bool dual = p->op == NVFP4_OP_DUAL_GEMM;
  const float alpha2 = bug == Bug::dual_alpha2_ignored ? 1.0f : p->alpha2;
  if (l * n * k <= kMaxDecoded) {
    // B (and B2) decoded once, each row of A once: the products and sums of dot(), bit for bit.
    std::vector<float> bdec(static_cast<size_t>(l * n * k)), b2dec(dual ? bdec.size() : 0);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < l; ++b)
      for (int64_t j = 0; j < n; ++j) {
        decode_plain(p->b + (b * n + j) * row_bytes, p->sfb, n, b, j, k, layout, &bdec[(b * n + j) * k]);
        if (dual) decode_plain(p->b2 + (b * n + j) * row_bytes, p->sfb2, n, b, j, k, layout, &b2dec[(b * n + j) * k]);
      }
#pragma omp parallel
    {
      std::vector<float> arow(static_cast<size_t>(k)), g(static_cast<size_t>(n)), u(dual ? g.size() : 0);
#pragma omp for collapse(2) schedule(static)
      for (int64_t b = 0; b < l; ++b)
        for (int64_t i = 0; i < m; ++i) {
          decode_plain(p->a + (b * m + i) * row_bytes, p->sfa, m, b, i, k, layout, arow.data());
          row_dots(arow.data(), bdec.data() + b * n * k, n, k, g.data());
          if (dual) row_dots(arow.data(), b2dec.data() + b * n * k, n, k, u.data());
          for (int64_t j = 0; j < n; ++j) {
            const int64_t at = (b * m + i) * n + j;
            if (!dual) {
              store(p->c, at, out, static_cast<double>(p->alpha) * g[j], bug);
            } else {
              store(p->c, at, out,
                    silu_product(static_cast<double>(p->alpha) * g[j], static_cast<double>(alpha2) * u[j], bug), bug);
            }
          }
        }
    }
    return NVFP4_OK;
  }
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < l; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t* a_row = p->a + (b * m + i) * row_bytes;
        const int64_t at = (b * m + i) * n + j;
        const float acc =
            dot(a_row, p->sfa, m, b, i, p->b + (b * n + j) * row_bytes, p->sfb, n, b, j, k, layout);
        if (!dual) {
          store(p->c, at, out, static_cast<double>(p->alpha) * acc, bug);
          continue;
        }
        const double u =
            static_cast<double>(alpha2) * dot(a_row, p->sfa, m, b, i, p->b2 + (b * n + j) * row_bytes, p->sfb2, n, b, j, k, layout);
        store(p->c, at, out, silu_product(static_cast<double>(p->alpha) * acc, u, bug), bug);
      }
  return NVFP4_OK;
}

int run_grouped(Bug bug, bool packed, const nvfp4_problem* p) {
  const uint32_t out = kern::problem_out_type(p), layout = p->sf_layout;
  int64_t row0 = 0, tile0 = 0;  // M_g and T_g of the packed arrangement
  std::vector<int64_t> empty_rows;  // M_g of the empty groups (grouped_empty_writes_row)
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    const int64_t m = q.m, n = q.n, k = q.k, kb = (k + 15) / 16, row_bytes = k / 2;
    if (m == 0) {
      if (bug == Bug::grouped_stops_at_empty) break;
      empty_rows.push_back(row0);
    }
    const float alpha = bug == Bug::grouped_alpha_of_first ? p->group[0].alpha : q.alpha;
    const uint8_t *a = q.a, *sfa = q.sfa, *bdata = q.b, *sfb = q.sfb;
    int64_t b_batch = 0, c0 = 0;
    void* c = q.c;
    if (packed) {
      a = p->a + row0 * row_bytes;
      sfa = p->sfa + (layout == NVFP4_SF_LINEAR ? row0 * kb : tile0 * ((kb + 3) / 4) * 512);
      if (bug == Bug::grouped_offsets_32bit) {
        // int offset = g * n * k / 2: wraps (negative) once the packed B passes 2^31 bytes.
        bdata = p->b + static_cast<int32_t>(static_cast<uint32_t>(g) * static_cast<uint32_t>(n * row_bytes));
      } else {
        bdata = p->b + g * n * row_bytes;
      }
      sfb = p->sfb;
      b_batch = bug == Bug::grouped_next_expert_scales && g + 1 < p->groups ? g + 1 : g;
      c = p->c;
      c0 = row0 * n;
    }
    row0 += m;
    tile0 += (m + 127) / 128;
    if (m > 0 && n * k <= kMaxDecoded) {
      // B_g decoded once, each row of A_g once: dot()'s products and sums, bit for bit.
      std::vector<float> bdec(static_cast<size_t>(n * k));
#pragma omp parallel for schedule(static)
      for (int64_t j = 0; j < n; ++j)
        decode_plain(bdata + j * row_bytes, sfb, n, b_batch, j, k, layout, &bdec[j * k]);
#pragma omp parallel
      {
        std::vector<float> arow(static_cast<size_t>(k)), acc(static_cast<size_t>(n));
#pragma omp for schedule(static)
        for (int64_t i = 0; i < m; ++i) {
          decode_plain(a + i * row_bytes, sfa, m, 0, i, k, layout, arow.data());
          row_dots(arow.data(), bdec.data(), n, k, acc.data());
          for (int64_t j = 0; j < n; ++j) store(c, c0 + i * n + j, out, static_cast<double>(alpha) * acc[j], bug);
        }
      }
      continue;
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        // B_g is addressed as batch 0 from its own start, its scales as batch b_batch of SFB.
        const float acc = dot(a + i * row_bytes, sfa, m, 0, i, bdata + j * row_bytes, sfb, n, b_batch, j, k, layout);
        store(c, c0 + i * n + j, out, static_cast<double>(alpha) * acc, bug);
      }
  }
  // The empty group's stray tile, run last as a GPU's scheduler may: a row of zeros at its
  // offset, the next group's first row (or past the last row when no group follows).
  if (bug == Bug::grouped_empty_writes_row && packed)
    for (int64_t r : empty_rows)
      for (int64_t j = 0; j < p->n; ++j) kern::store_output(p->c, r * p->n + j, out, 0.0);
  return NVFP4_OK;
}

}  // namespace

int run_host_v2_mutant(Bug bug, bool packed, const nvfp4_problem* p) {
  if (p->op == NVFP4_OP_GROUPED_GEMM) return run_grouped(bug, packed, p);
  return run_dense(bug, p);
}

}  // namespace nvfp4::mutants
