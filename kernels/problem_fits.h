// Whether a problem lies inside what a kernel's info declares (SPEC.md section 5): a built-in
// kernel answers NVFP4_UNSUPPORTED, touching nothing, exactly when this is false.
#pragma once

#include <stdint.h>

#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4::kern {

// Also false for a problem that is not a valid NVFP4 problem at all (null pointers, k odd,
// sizes whose byte counts overflow int64), so a kernel never indexes out of what it was given.
inline bool problem_fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (p == nullptr) return false;
  if (p->op != NVFP4_OP_GEMV && p->op != NVFP4_OP_GEMM) return false;
  if (!((info.ops >> p->op) & 1u)) return false;
  if (p->sf_layout != NVFP4_SF_LINEAR && p->sf_layout != NVFP4_SF_PERMUTED) return false;
  if (!((info.sf_layouts >> p->sf_layout) & 1u)) return false;
  if (p->m < 1 || p->n < 1 || p->l < 1 || p->k < 2 || p->k % 2 != 0) return false;
  if (p->op == NVFP4_OP_GEMV && p->n != 1) return false;
  if (info.m_multiple > 1 && p->m % info.m_multiple != 0) return false;
  if (info.n_multiple > 1 && p->n % info.n_multiple != 0) return false;
  if (info.k_multiple > 1 && p->k % info.k_multiple != 0) return false;
  if ((info.flags & NVFP4_FLAG_UNIT_ALPHA) && p->alpha != 1.0f) return false;
  if (!p->a || !p->b || !p->sfa || !p->sfb || !p->c) return false;
  // Every offset a kernel forms is below l*max(m,n)*k, l*m*n*2 or the permuted scale bytes
  // (rows rounded up to 128, k up to 64 elements): refuse shapes where those overflow.
  const int64_t kHuge = int64_t{1} << 40;  // keeps the sums below from overflowing
  if (p->m > kHuge || p->n > kHuge || p->k > kHuge || p->l > kHuge) return false;
  const int64_t rows = p->m > p->n ? p->m : p->n;
  int64_t t;
  if (__builtin_mul_overflow(p->l, rows + 128, &t) || __builtin_mul_overflow(t, p->k + 64, &t))
    return false;
  if (__builtin_mul_overflow(p->l * p->m, p->n, &t) || __builtin_mul_overflow(t, int64_t{2}, &t))
    return false;
  return true;
}

}  // namespace nvfp4::kern
