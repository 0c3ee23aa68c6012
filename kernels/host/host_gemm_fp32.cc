// Host NVFP4 GEMV/GEMM kernels (OpenMP), written the way a GPU kernel computes: decode E2M1 and
// E4M3 through small tables, sum each 16-element block in FP32 (exact: at most 16 products of
// two E2M1 values), scale the block sum by sa*sb (exact), accumulate blocks in FP32, multiply by
// alpha at the end and round once to FP16. They are the CI baseline: the whole pipeline runs
// and is tested with them where there is no GPU.
#include <cmath>
#include <cstdint>

#include "kernels/block_scaled_decode.h"
#include "kernels/builtin.h"
#include "kernels/host/fp16_from_float.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

struct DecodeTables {
  float e2m1[16];
  float scale_unsigned[256];  // ue4m3: sign bit ignored; NaN for 0x7F and 0xFF
  float scale_signed[256];    // e4m3: sign bit honoured
  DecodeTables() {
    for (uint32_t c = 0; c < 16; ++c) e2m1[c] = e2m1_to_float(c);
    for (uint32_t s = 0; s < 256; ++s) {
      scale_unsigned[s] = e4m3_to_float(s, false);
      scale_signed[s] = e4m3_to_float(s, true);
    }
  }
};

const DecodeTables& tables() {
  static const DecodeTables t;  // thread-safe initialisation (C++11 magic statics)
  return t;
}

// C[b][i][j] for every b, i, j. Rows of C are independent, so OpenMP splits (b, i).
int run_block_scaled(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (!problem_fits(info, p)) return NVFP4_UNSUPPORTED;
  const DecodeTables& t = tables();
  const float* scale = (info.flags & NVFP4_FLAG_SIGNED_SCALES) ? t.scale_signed : t.scale_unsigned;
  const int64_t m = p->m, n = p->n, k = p->k, l = p->l, kb = (k + 15) / 16;
  const int64_t row_bytes = k / 2;
  const uint32_t layout = p->sf_layout;
  const float alpha = p->alpha;

  // Below about 2^18 multiply-adds a parallel region costs more than it saves (waking a team,
  // worse when another process holds the other cores).
  const bool parallel = l * m * n * k >= (int64_t(1) << 18);
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
  for (int64_t b = 0; b < l; ++b) {
    for (int64_t i = 0; i < m; ++i) {
      const uint8_t* a_row = p->a + (b * m + i) * row_bytes;
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t* b_row = p->b + (b * n + j) * row_bytes;
        float acc = 0.0f;
        for (int64_t s = 0; s < kb; ++s) {
          // Block s covers elements [16s, min(16s+16, k)): bytes [8s, min(8s+8, k/2)).
          const int64_t byte_end = (16 * s + 16 < k ? 16 * s + 16 : k) / 2;
          float block_sum = 0.0f;
          for (int64_t y = 8 * s; y < byte_end; ++y) {
            const uint8_t av = a_row[y], bv = b_row[y];
            block_sum += t.e2m1[av & 0xF] * t.e2m1[bv & 0xF];
            block_sum += t.e2m1[av >> 4] * t.e2m1[bv >> 4];
          }
          const float sa = scale[p->sfa[scale_offset(layout, m, kb, b, i, s)]];
          const float sb = scale[p->sfb[scale_offset(layout, n, kb, b, j, s)]];
          // Always multiplied, never skipped when block_sum == 0: a NaN scale must give NaN.
          acc += block_sum * (sa * sb);
        }
        p->c[(b * m + i) * n + j] = fp16_from_float(alpha * acc);
      }
    }
  }
  return NVFP4_OK;
}

constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kGemvGemm = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);

int run_host_gemv_fp32(const nvfp4_problem* p);
int run_host_gemm_fp32(const nvfp4_problem* p);
int run_host_gemm_fp32_e4m3(const nvfp4_problem* p);

}  // namespace

// info: abi, name, memory, ops, sf_layouts, min_sm, m/n/k multiples, flags.
NVFP4_DEFINE_BUILTIN(host_gemv_fp32) = {
    {NVFP4_ABI_VERSION, "host_gemv_fp32", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMV, kBothLayouts, 0, 1, 1, 1, 0},
    run_host_gemv_fp32};
NVFP4_DEFINE_BUILTIN(host_gemm_fp32) = {
    {NVFP4_ABI_VERSION, "host_gemm_fp32", NVFP4_MEMORY_HOST, kGemvGemm, kBothLayouts, 0, 1, 1, 1, 0},
    run_host_gemm_fp32};
NVFP4_DEFINE_BUILTIN(host_gemm_fp32_e4m3) = {
    {NVFP4_ABI_VERSION, "host_gemm_fp32_e4m3", NVFP4_MEMORY_HOST, kGemvGemm, kBothLayouts, 0, 1, 1, 1,
     NVFP4_FLAG_SIGNED_SCALES},
    run_host_gemm_fp32_e4m3};

namespace {
int run_host_gemv_fp32(const nvfp4_problem* p) { return run_block_scaled(builtin_host_gemv_fp32.info, p); }
int run_host_gemm_fp32(const nvfp4_problem* p) { return run_block_scaled(builtin_host_gemm_fp32.info, p); }
int run_host_gemm_fp32_e4m3(const nvfp4_problem* p) {
  return run_block_scaled(builtin_host_gemm_fp32_e4m3.info, p);
}
}  // namespace

}  // namespace nvfp4::kern
