// Host NVFP4 kernels (OpenMP) for GEMV, GEMM, grouped GEMM (both arrangements) and dual GEMM,
// written the way a GPU kernel computes: decode E2M1 and E4M3 through small tables, sum each
// 16-element block in FP32 (exact: at most 16 products of two E2M1 values), scale the block sum by
// sa*sb (exact), accumulate blocks in FP32, multiply by alpha at the end and round once to the
// output type (FP16, BF16 or FP32). They are the CI baseline: the whole pipeline runs and is
// tested with them where there is no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/block_scaled_decode.h"
#include "kernels/builtin.h"
#include "kernels/host/host_gemm_nvfp4_out.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

struct DecodeTables {
  float e2m1[16];
  float pair[256][2];         // a byte's two E2M1 values, low nibble first
  float scale_unsigned[256];  // ue4m3: sign bit ignored; NaN for 0x7F and 0xFF
  float scale_signed[256];    // e4m3: sign bit honoured
  DecodeTables() {
    for (uint32_t c = 0; c < 16; ++c) e2m1[c] = e2m1_to_float(c);
    for (uint32_t y = 0; y < 256; ++y) {
      pair[y][0] = e2m1[y & 0xF];
      pair[y][1] = e2m1[y >> 4];
    }
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

// One operand of one GEMM as a kernel reads it: `rows` rows of packed E2M1 (k/2 bytes each) and
// their scales in the problem's layout, batch b of a [l][rows] stack.
struct Operand {
  const uint8_t* data;
  const uint8_t* scales;
  int64_t rows, batch;
};

// Rows [r0, r0 + count) of an operand decoded once, as a kernel's registers hold them: each row's
// values as FP32, kb whole blocks of 16 (zeros past k), and its kb scales as FP32.
void decode_rows(const float* scale, uint32_t layout, int64_t k, const Operand& o, int64_t r0, int64_t count,
                 float* values, float* scales) {
  const DecodeTables& t = tables();
  const int64_t kb = (k + 15) / 16, row_bytes = k / 2;
  for (int64_t r = 0; r < count; ++r) {
    const uint8_t* src = o.data + (o.batch * o.rows + r0 + r) * row_bytes;
    float* v = values + r * kb * 16;
    for (int64_t y = 0; y < row_bytes; ++y) {
      v[2 * y] = t.e2m1[src[y] & 0xF];
      v[2 * y + 1] = t.e2m1[src[y] >> 4];
    }
    for (int64_t x = 2 * row_bytes; x < kb * 16; ++x) v[x] = 0.0f;
    for (int64_t b = 0; b < kb; ++b) scales[r * kb + b] = scale[o.scales[scale_offset(layout, o.rows, kb, o.batch, r0 + r, b)]];
  }
}

// A block's 16 products, paired into p, summed as a tree (exact: at most 16 products of two E2M1
// values, so the order does not matter, and a tree vectorizes); +0 for a block of -0 products,
// as a running sum from +0 would give.
float block_sum(float p[8]) {
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) p[e] += p[e + 4];
  return 0.0f + ((p[0] + p[2]) + (p[1] + p[3]));
}

// sum_x A[i][x]*SA * B[j][x]*SB the way a GPU kernel adds: each 16-element block summed in FP32
// (block_sum), times sa*sb (exact), blocks accumulated in FP32 in order.
float block_scaled_dot(const float* av, const float* as, const float* bv, const float* bs, int64_t kb) {
  float acc = 0.0f;
  for (int64_t s = 0; s < kb; ++s) {
    const float* x = av + 16 * s;
    const float* y = bv + 16 * s;
    float p[8];
#pragma GCC unroll 8
    for (int e = 0; e < 8; ++e) p[e] = x[e] * y[e] + x[e + 8] * y[e + 8];
    // Always multiplied, never skipped when the sum is 0: a NaN scale must give NaN.
    acc += block_sum(p) * (as[s] * bs[s]);
  }
  return acc;
}

// The same dot for an A row still packed, against one decoded B row: what a GEMV computes. A row
// that meets a single column is read once, so decoding it into a buffer first would cost a store
// and a reload per element for nothing; each byte gives its two values through one table lookup.
float block_scaled_dot_packed(const float* scale, uint32_t layout, int64_t k, const Operand& a, int64_t i,
                              const float* bv, const float* bs) {
  const DecodeTables& t = tables();
  const int64_t kb = (k + 15) / 16, row_bytes = k / 2, full = row_bytes / 8;
  const uint8_t* src = a.data + (a.batch * a.rows + i) * row_bytes;
  float acc = 0.0f;
  for (int64_t s = 0; s < kb; ++s) {
    const float* y = bv + 16 * s;
    float p[8];
    if (s < full) {
      const uint8_t* x = src + 8 * s;
#pragma GCC unroll 8
      for (int e = 0; e < 8; ++e) p[e] = t.pair[x[e]][0] * y[2 * e] + t.pair[x[e]][1] * y[2 * e + 1];
    } else {  // the last, partial block: zeros past k
      for (int e = 0; e < 8; ++e) {
        const int64_t at = 8 * s + e;
        p[e] = at < row_bytes ? t.pair[src[at]][0] * y[2 * e] + t.pair[src[at]][1] * y[2 * e + 1] : 0.0f;
      }
    }
    const float sa = scale[a.scales[scale_offset(layout, a.rows, kb, a.batch, i, s)]];
    acc += block_sum(p) * (sa * bs[s]);  // never skipped: a NaN scale must give NaN
  }
  return acc;
}

// Below about 2^18 multiply-adds a parallel region costs more than it saves (waking a team,
// worse when another process holds the other cores).
bool worth_a_team(int64_t products) { return products >= (int64_t(1) << 18); }

const float* scale_table(const nvfp4_kernel_info& info) {
  return (info.flags & NVFP4_FLAG_SIGNED_SCALES) ? tables().scale_signed : tables().scale_unsigned;
}

// C[i][j] = store(dot(A row i, B row j)) for one GEMM (batch b of a, b1 and, for a dual GEMM, b2).
// B's rows are decoded in tiles of at most 32 MB of FP32 values, each A row once per tile.
void gemm_rows(const float* scale, uint32_t layout, int64_t m, int64_t n, int64_t k, const Operand& a,
               const Operand& b1, const Operand* b2, void* c, int64_t c0, uint32_t out, float alpha, float alpha2) {
  const int64_t kb = (k + 15) / 16, width = kb * 16;
  const int64_t tile = width == 0 ? std::max<int64_t>(n, 1) : std::max<int64_t>(1, std::min<int64_t>(n, (int64_t(8) << 20) / width));
  const int sides = b2 ? 2 : 1;
  std::vector<float> bv(static_cast<size_t>(sides * tile * width)), bs(static_cast<size_t>(sides * tile * kb));
  for (int64_t j0 = 0; j0 < n; j0 += tile) {
    const int64_t cols = std::min(tile, n - j0);
    decode_rows(scale, layout, k, b1, j0, cols, bv.data(), bs.data());
    if (b2) decode_rows(scale, layout, k, *b2, j0, cols, bv.data() + tile * width, bs.data() + tile * kb);
#pragma omp parallel if (worth_a_team(m * cols * k * sides))
    {
      std::vector<float> av(static_cast<size_t>(width)), as(static_cast<size_t>(kb));
#pragma omp for schedule(static)
      for (int64_t i = 0; i < m; ++i) {
        if (cols == 1 && !b2) {
          store_scaled(c, c0 + i * n + j0, out, alpha, block_scaled_dot_packed(scale, layout, k, a, i, bv.data(), bs.data()));
          continue;
        }
        decode_rows(scale, layout, k, a, i, 1, av.data(), as.data());
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t at = c0 + i * n + j0 + j;
          const float acc = block_scaled_dot(av.data(), as.data(), bv.data() + j * width, bs.data() + j * kb, kb);
          if (!b2) {
            store_scaled(c, at, out, alpha, acc);
          } else {
            // G and U each in FP32 with its own alpha, then silu(G) * U in FP32 (output_words.h).
            const float u = alpha2 * block_scaled_dot(av.data(), as.data(), bv.data() + (tile + j) * width,
                                                      bs.data() + (tile + j) * kb, kb);
            store_silu_product(c, at, out, alpha * acc, u);
          }
        }
      }
    }
  }
}

// GEMV, GEMM and dual GEMM: C[b][i][j] for every b, i, j.
int run_block_scaled(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (!problem_fits(info, p)) return NVFP4_UNSUPPORTED;
  if (p->op == NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;  // run_grouped's
  const float* scale = scale_table(info);
  const int64_t m = p->m, n = p->n, k = p->k, l = p->l;
  const bool dual = p->op == NVFP4_OP_DUAL_GEMM;
  for (int64_t b = 0; b < l; ++b) {
    const Operand a{p->a, p->sfa, m, b}, b1{p->b, p->sfb, n, b}, b2{p->b2, p->sfb2, n, b};
    gemm_rows(scale, p->sf_layout, m, n, k, a, b1, dual ? &b2 : nullptr, p->c, b * m * n, problem_out_type(p),
              p->alpha, p->alpha2);
  }
  return NVFP4_OK;
}

// Grouped GEMM, every group an l = 1 GEMM of its own. Separate arrangement: each group's own
// pointers. Packed (the kernel declares NVFP4_FLAG_GROUPS_PACKED): only the packed buffers and
// the offsets of SPEC section 2, all in 64 bits (a packed B passes 2^31 bytes at realistic
// expert counts): A and C rows from M_g = m_0 + ... + m_(g-1), B and SFB as a batch of G, SFA
// linear rows from M_g or permuted tiles from T_g = ceil(m_0/128) + ... + ceil(m_(g-1)/128).
int run_grouped(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (!problem_fits(info, p) || p->op != NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const float* scale = scale_table(info);
  const uint32_t layout = p->sf_layout, out = problem_out_type(p);
  const bool packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  int64_t row0 = 0, tile0 = 0;  // M_g and T_g
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    const int64_t m = q.m, n = q.n, k = q.k, kb = (k + 15) / 16;
    Operand a{q.a, q.sfa, m, 0}, b{q.b, q.sfb, n, 0};
    void* c = q.c;
    int64_t c0 = 0;
    if (packed) {
      const int64_t sfa0 = layout == NVFP4_SF_LINEAR ? row0 * kb : tile0 * ((kb + 3) / 4) * 512;
      a = {p->a + row0 * (k / 2), p->sfa + sfa0, m, 0};
      b = {p->b, p->sfb, n, g};
      c = p->c;
      c0 = row0 * n;
    }
    row0 += m;
    tile0 += (m + 127) / 128;
    if (m > 0 && n > 0) gemm_rows(scale, layout, m, n, k, a, b, nullptr, c, c0, out, q.alpha, 0.0f);
  }
  return NVFP4_OK;
}

constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kGemvGemm = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
constexpr uint32_t kAllOutTypes = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);

int run_host_gemv_fp32(const nvfp4_problem* p);
int run_host_gemm_fp32(const nvfp4_problem* p);
int run_host_gemm_fp32_e4m3(const nvfp4_problem* p);
int run_host_grouped_gemm_fp32(const nvfp4_problem* p);
int run_host_grouped_gemm_fp32_packed(const nvfp4_problem* p);
int run_host_dual_gemm_fp32(const nvfp4_problem* p);
int run_host_gemm_nvfp4_out(const nvfp4_problem* p);
int run_host_dual_gemm_nvfp4_out(const nvfp4_problem* p);
int run_host_grouped_gemm_nvfp4_out(const nvfp4_problem* p);

constexpr uint32_t kNvfp4Recipes =
    (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_REF) | (1u << NVFP4_RECIPE_FAST) | (1u << NVFP4_RECIPE_TORCHAO);

}  // namespace

// info: abi, name, memory, ops, sf_layouts, min_sm, m/n/k multiples, flags, out_types, max_groups.
NVFP4_DEFINE_BUILTIN(host_gemv_fp32) = {
    {NVFP4_ABI_VERSION, "host_gemv_fp32", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMV, kBothLayouts, 0, 1, 1, 1, 0,
     kAllOutTypes, 0},
    run_host_gemv_fp32};
NVFP4_DEFINE_BUILTIN(host_gemm_fp32) = {
    {NVFP4_ABI_VERSION, "host_gemm_fp32", NVFP4_MEMORY_HOST, kGemvGemm, kBothLayouts, 0, 1, 1, 1, 0, kAllOutTypes, 0},
    run_host_gemm_fp32};
NVFP4_DEFINE_BUILTIN(host_gemm_fp32_e4m3) = {
    {NVFP4_ABI_VERSION, "host_gemm_fp32_e4m3", NVFP4_MEMORY_HOST, kGemvGemm, kBothLayouts, 0, 1, 1, 1,
     NVFP4_FLAG_SIGNED_SCALES, kAllOutTypes, 0},
    run_host_gemm_fp32_e4m3};
NVFP4_DEFINE_BUILTIN(host_grouped_gemm_fp32) = {
    {NVFP4_ABI_VERSION, "host_grouped_gemm_fp32", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GROUPED_GEMM, kBothLayouts, 0,
     1, 1, 1, 0, kAllOutTypes, 0},
    run_host_grouped_gemm_fp32};
NVFP4_DEFINE_BUILTIN(host_grouped_gemm_fp32_packed) = {
    {NVFP4_ABI_VERSION, "host_grouped_gemm_fp32_packed", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GROUPED_GEMM,
     kBothLayouts, 0, 1, 1, 1, NVFP4_FLAG_GROUPS_PACKED, kAllOutTypes, 0},
    run_host_grouped_gemm_fp32_packed};
NVFP4_DEFINE_BUILTIN(host_dual_gemm_fp32) = {
    {NVFP4_ABI_VERSION, "host_dual_gemm_fp32", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_DUAL_GEMM, kBothLayouts, 0, 1, 1,
     1, 0, kAllOutTypes, 0},
    run_host_dual_gemm_fp32};

// Block-scaled output (kernels/host/host_gemm_nvfp4_out.h); info as above, then a_formats,
// b_formats, in_types, q_formats, recipes.
NVFP4_DEFINE_BUILTIN(host_gemm_nvfp4_out) = {
    {NVFP4_ABI_VERSION, "host_gemm_nvfp4_out", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMM, kBothLayouts, 0, 1, 1, 1, 0,
     1u << NVFP4_OUT_NVFP4, 0, 0, 0, 0, 0, kNvfp4Recipes},
    run_host_gemm_nvfp4_out};
NVFP4_DEFINE_BUILTIN(host_dual_gemm_nvfp4_out) = {
    {NVFP4_ABI_VERSION, "host_dual_gemm_nvfp4_out", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_DUAL_GEMM, kBothLayouts, 0, 1,
     1, 1, 0, 1u << NVFP4_OUT_NVFP4, 0, 0, 0, 0, 0, kNvfp4Recipes},
    run_host_dual_gemm_nvfp4_out};
NVFP4_DEFINE_BUILTIN(host_grouped_gemm_nvfp4_out) = {
    {NVFP4_ABI_VERSION, "host_grouped_gemm_nvfp4_out", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GROUPED_GEMM, kBothLayouts,
     0, 1, 1, 1, 0, 1u << NVFP4_OUT_NVFP4, 0, 0, 0, 0, 0, kNvfp4Recipes},
    run_host_grouped_gemm_nvfp4_out};

namespace {
int run_host_gemm_nvfp4_out(const nvfp4_problem* p) {
  return quant::run_gemm_nvfp4_out(builtin_host_gemm_nvfp4_out.info, p, quant::Bug::none);
}
int run_host_dual_gemm_nvfp4_out(const nvfp4_problem* p) {
  return quant::run_gemm_nvfp4_out(builtin_host_dual_gemm_nvfp4_out.info, p, quant::Bug::none);
}
int run_host_grouped_gemm_nvfp4_out(const nvfp4_problem* p) {
  return quant::run_grouped_gemm_nvfp4_out(builtin_host_grouped_gemm_nvfp4_out.info, p, quant::Bug::none);
}
int run_host_gemv_fp32(const nvfp4_problem* p) { return run_block_scaled(builtin_host_gemv_fp32.info, p); }
int run_host_gemm_fp32(const nvfp4_problem* p) { return run_block_scaled(builtin_host_gemm_fp32.info, p); }
int run_host_gemm_fp32_e4m3(const nvfp4_problem* p) {
  return run_block_scaled(builtin_host_gemm_fp32_e4m3.info, p);
}
int run_host_grouped_gemm_fp32(const nvfp4_problem* p) { return run_grouped(builtin_host_grouped_gemm_fp32.info, p); }
int run_host_grouped_gemm_fp32_packed(const nvfp4_problem* p) {
  return run_grouped(builtin_host_grouped_gemm_fp32_packed.info, p);
}
int run_host_dual_gemm_fp32(const nvfp4_problem* p) { return run_block_scaled(builtin_host_dual_gemm_fp32.info, p); }
}  // namespace

}  // namespace nvfp4::kern
