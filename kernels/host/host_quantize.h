// The host quantizer: one pass over X per block (1 x 16, 1 x 32 or a 16 x 16 tile), the
// recipe's arithmetic from kernels/quantize_core.h, codes packed two to a byte (element 2i in the
// low nibble) or one per byte, scales in the problem's layout with the permuted layout's padding
// written 0x00. Shared by the built-in host kernels and the mutants (a Bug builds each one).
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/quantize_core.h"

namespace nvfp4::kern::quant {


// Whether p is a quantize problem inside what info declares (the kernel refuses it otherwise,
// touching nothing).
inline bool quantize_fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  const uint32_t formats = info.q_formats ? info.q_formats : (1u << NVFP4_FORMAT_NVFP4);
  if (p == nullptr) return false;
  if (p->op != NVFP4_OP_QUANTIZE || !((info.ops >> NVFP4_OP_QUANTIZE) & 1u)) return false;
  if (p->q_format < 1 || p->q_format > 4 || !((formats >> p->q_format) & 1u)) return false;
  if (p->in_type < 1 || p->in_type > 3 || !((info.in_types >> p->in_type) & 1u)) return false;
  if (p->recipe < 1 || p->recipe > 7 || !((info.recipes >> p->recipe) & 1u)) return false;
  if (p->sf_layout < 1 || p->sf_layout > 2 || !((info.sf_layouts >> p->sf_layout) & 1u)) return false;
  if (p->m < 1 || p->l < 1 || p->n != 1 || p->k < 2 || (packs_nibbles(p->q_format) && p->k % 2 != 0)) return false;
  // Every tensor the call needs (the MX recipes have no global scale).
  if (p->x == nullptr || p->q == nullptr || p->sfq == nullptr) return false;
  if (p->q_format == NVFP4_FORMAT_NVFP4 && p->global_scale == nullptr) return false;
  if (info.m_multiple > 1 && p->m % info.m_multiple != 0) return false;
  if (info.k_multiple > 1 && p->k % info.k_multiple != 0) return false;
  const int64_t huge = int64_t{1} << 40;
  if (p->m > huge || p->k > huge || p->l > huge) return false;
  int64_t t;
  if (__builtin_mul_overflow(p->l, p->m + 128, &t) || __builtin_mul_overflow(t, (p->k + 64) * 4, &t)) return false;
  return true;
}

// The whole quantization of p on the host (p inside info: quantize_fits).
inline int quantize_on_host(const nvfp4_problem* p, const nvfp4_kernel_info& info, Bug bug) {
  if (!quantize_fits(info, p)) return NVFP4_UNSUPPORTED;
  const int64_t bs = block_elems(p->q_format), kb = (p->k + bs - 1) / bs;
  // The permuted layout's padding cells are written 0x00, as production quantizers write them.
  if (p->sf_layout == NVFP4_SF_PERMUTED && bug != Bug::padding_not_written && bug != Bug::linear_scales_declared_permuted)
    std::fill(p->sfq, p->sfq + sf_bytes(NVFP4_SF_PERMUTED, p->m, kb, p->l), uint8_t{0});
  const int64_t tile = (info.flags & NVFP4_FLAG_QUANT_2D) ? 16 : 1;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < p->l; ++b)
    for (int64_t r0 = 0; r0 < p->m; r0 += tile)
      for (int64_t s = 0; s < kb; ++s) quantize_block(*p, info.flags, bug, b, r0, std::min(p->m, r0 + tile), s, ExactRcp{});
  return NVFP4_OK;
}

}  // namespace nvfp4::kern::quant
