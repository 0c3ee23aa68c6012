// Whether a problem lies inside what a kernel's info declares (SPEC.md section 5): a built-in
// kernel answers NVFP4_UNSUPPORTED, touching nothing, exactly when this is false.
#pragma once

#include <vector>

#include <stdint.h>

#include "kernels/mx_block_decode.h"  // packs_nibbles
#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4::kern {

// The output type a problem asks for. 0 (a zero-filled problem built by version-1 code, which
// has no out_type field) means FP16, the only type there was.
inline uint32_t problem_out_type(const nvfp4_problem* p) {
  return p->out_type == 0 ? static_cast<uint32_t>(NVFP4_OUT_FP16) : p->out_type;
}

// Bytes of one output word.
inline int64_t out_word_bytes(uint32_t out_type) { return out_type == NVFP4_OUT_FP32 ? 4 : 2; }

namespace detail {

// Shape and size checks common to every GEMM of a problem (one group of a grouped call, or the
// whole problem otherwise): every offset a kernel forms is below l*max(m,n)*k, l*m*n*4 or the
// permuted scale bytes (rows rounded up to 128, k up to 64 elements); refuse shapes where those
// overflow int64.
inline bool shape_fits(const nvfp4_kernel_info& info, int64_t m, int64_t n, int64_t k, int64_t l, int64_t min_m) {
  if (m < min_m || n < 1 || l < 1 || k < 2 || k % 2 != 0) return false;
  if (info.m_multiple > 1 && m % info.m_multiple != 0) return false;
  if (info.n_multiple > 1 && n % info.n_multiple != 0) return false;
  if (info.k_multiple > 1 && k % info.k_multiple != 0) return false;
  const int64_t kHuge = int64_t{1} << 40;  // keeps the sums below from overflowing
  if (m > kHuge || n > kHuge || k > kHuge || l > kHuge) return false;
  const int64_t rows = m > n ? m : n;
  int64_t t;
  if (__builtin_mul_overflow(l, rows + 128, &t) || __builtin_mul_overflow(t, k + 64, &t)) return false;
  if (__builtin_mul_overflow(l * m, n, &t) || __builtin_mul_overflow(t, int64_t{4}, &t)) return false;
  return true;
}

inline bool alpha_fits(const nvfp4_kernel_info& info, float alpha) {
  return !(info.flags & NVFP4_FLAG_UNIT_ALPHA) || alpha == 1.0f;
}

// A grouped call: G groups, each a valid l = 1 GEMM inside the declared multiples; m, n, k of
// the problem are the sum of m_g and the largest n_g and k_g. The packed arrangement is handed
// only to a kernel declaring NVFP4_FLAG_GROUPS_PACKED, and then all of it: one n, one k, the
// packed buffers present (A, SFA and C may be absent only when every group is empty).
inline bool grouped_fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (p->groups < 1 || p->group == nullptr || p->l != 1) return false;
  if (info.max_groups != 0 && p->groups > int64_t{info.max_groups}) return false;
  if (p->groups > (int64_t{1} << 24)) return false;  // far beyond any MoE layer; keeps sums small
  if ((info.memory == NVFP4_MEMORY_CUDA) && p->group_device == nullptr) return false;
  int64_t sum_m = 0, max_n = 0, max_k = 0;
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    if (!shape_fits(info, q.m, q.n, q.k, 1, 0) || !alpha_fits(info, q.alpha)) return false;
    const bool writes_c = problem_out_type(p) != NVFP4_OUT_NVFP4;  // else group_out's Q and SFQ
    if (q.m > 0 && (!q.a || !q.b || !q.sfa || !q.sfb || (writes_c && !q.c))) return false;
    sum_m += q.m;  // each m_g <= 2^40 (shape_fits): the sum stays far from overflow
    if (sum_m > (int64_t{1} << 40)) return false;
    if (q.n > max_n) max_n = q.n;
    if (q.k > max_k) max_k = q.k;
  }
  if (sum_m != p->m || max_n != p->n || max_k != p->k) return false;
  if (!(info.flags & NVFP4_FLAG_GROUPS_PACKED)) return true;
  for (int64_t g = 0; g < p->groups; ++g)
    if (p->group[g].n != p->n || p->group[g].k != p->k) return false;
  if (!shape_fits(info, p->m, p->n * p->groups, p->k, 1, 0)) return false;  // packed B and C offsets
  if (!p->b || !p->sfb) return false;
  if (p->m > 0 && (!p->a || !p->sfa || !p->c)) return false;
  return true;
}

// Grouped GEMM with block-scaled output (separate arrangement only): the group_out table in the
// kernel's memory (and on the host), every group's n even, a non-empty group's Q and SFQ given.
inline bool grouped_out_fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if ((info.flags & NVFP4_FLAG_GROUPS_PACKED) || p->group == nullptr || p->group_out == nullptr) return false;
  if (info.memory == NVFP4_MEMORY_CUDA && p->group_out_device == nullptr) return false;
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group_out& o = p->group_out[g];
    if (p->group[g].n % 2 != 0 || !(o.global_scale > 0)) return false;
    if (p->group[g].m > 0 && (o.q == nullptr || o.sfq == nullptr)) return false;
  }
  return true;
}

// Block-scaled output (out_type nvfp4): a declared NVFP4 recipe, Q, SFQ and the global scale
// given, n even (Q packs two codes a byte); grouped GEMM: per group, in the group_out table.
inline bool block_scaled_out_fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (info.abi_version < 3 || p->op == NVFP4_OP_GEMV) return false;
  if (p->recipe < NVFP4_RECIPE_TE || p->recipe > NVFP4_RECIPE_TORCHAO || !((info.recipes >> p->recipe) & 1u)) return false;
  if (p->op == NVFP4_OP_GROUPED_GEMM) return p->groups >= 1 && grouped_out_fits(info, p);
  return p->n % 2 == 0 && p->q != nullptr && p->sfq != nullptr && p->global_scale != nullptr;
}

}  // namespace detail

// Also false for a problem that is not a valid NVFP4 problem at all (null pointers, k odd,
// sizes whose byte counts overflow int64), so a kernel never indexes out of what it was given.
inline bool problem_fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (p == nullptr) return false;
  if (p->op < NVFP4_OP_GEMV || p->op > NVFP4_OP_DUAL_GEMM) return false;
  if (!((info.ops >> p->op) & 1u)) return false;
  if (p->sf_layout != NVFP4_SF_LINEAR && p->sf_layout != NVFP4_SF_PERMUTED) return false;
  if (!((info.sf_layouts >> p->sf_layout) & 1u)) return false;
  const uint32_t out = problem_out_type(p);
  const uint32_t out_types = info.out_types == 0 ? (1u << NVFP4_OUT_FP16) : info.out_types;
  if (out > NVFP4_OUT_NVFP4 || !((out_types >> out) & 1u)) return false;
  const bool block_scaled_out = out == NVFP4_OUT_NVFP4;
  if (block_scaled_out && !detail::block_scaled_out_fits(info, p)) return false;
  if (p->op == NVFP4_OP_GROUPED_GEMM) return detail::grouped_fits(info, p);
  if (p->groups != 0 || p->group != nullptr) return false;
  if (!detail::shape_fits(info, p->m, p->n, p->k, p->l, 1)) return false;
  if (p->op == NVFP4_OP_GEMV && p->n != 1) return false;
  if (!detail::alpha_fits(info, p->alpha)) return false;
  if (!p->a || !p->b || !p->sfa || !p->sfb || (!p->c && !block_scaled_out)) return false;
  if (p->op == NVFP4_OP_DUAL_GEMM && (!p->b2 || !p->sfb2 || !detail::alpha_fits(info, p->alpha2))) return false;
  return true;
}

// problem_fits for kernels of MX operands: with two MXFP8 operands (a byte an element) any
// k >= 1 is valid (SPEC section 1), which problem_fits, written for operands packing two E2M1
// elements a byte, refuses when odd. Checked as the problem with each k rounded up to even.
inline bool mx_problem_fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (p == nullptr) return false;
  if (packs_nibbles(p->a_format) || packs_nibbles(p->b_format)) return problem_fits(info, p);
  nvfp4_problem q = *p;
  if (q.k < 1) return false;
  q.k += q.k % 2;
  std::vector<nvfp4_group> groups;
  if (p->op == NVFP4_OP_GROUPED_GEMM && p->group != nullptr && p->groups > 0 && p->groups <= (int64_t{1} << 20)) {
    groups.assign(p->group, p->group + p->groups);
    for (nvfp4_group& g : groups) {
      if (g.k < 1) return false;
      g.k += g.k % 2;
    }
    q.group = groups.data();
  }
  return problem_fits(info, &q);
}

}  // namespace nvfp4::kern
