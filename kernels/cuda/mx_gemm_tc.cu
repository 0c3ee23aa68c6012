// mx_gemm_tc: an MX GEMV/GEMM (MXFP4, MXFP8 E4M3, MXFP8 E5M2 operands, any pair) on BF16 tensor
// cores (mma.sync m16n8k16, FP32 accumulators), as Hopper kernels run MX data: Hopper has no MX
// tensor cores, so elements are decoded in software to BF16.
//
// Why the scale stays out of the tensor core: dequantizing a*sa to BF16 is exact only inside
// BF16's range, and E8M0 scales reach 2^-127 and 2^127 (448 * 2^127 overflows BF16; 2^-16 *
// 2^-127 is a BF16 subnormal, which Hopper's MMA aligns badly, SPEC section 3 condition A; the
// products of two small scales fall below 2^-126, condition B). So each warp feeds the tensor
// core the raw elements of one 32-element block (E2M1, E4M3 and E5M2 values are all exact and
// NORMAL in BF16; their products lie in [2^-32, 2^32), never subnormal in FP32), gets the block's
// dot products from C = 0 after two k16 steps, and adds them on the CUDA cores, scaled by the
// block's two E8M0 scales, into a WideSum (kernels/wide_sum.h: an FP32 mantissa with an exponent
// of its own, since the scaled sums reach far outside FP32's exponent range; its output rounded
// once). The MMA's adds follow the matrix-unit model (Hopper BF16: {24, 1} under conditions A and
// B, both met), so the kernel declares NVFP4_FLAG_MMA_ACCUMULATE; the CUDA-core adds are IEEE
// FP32 on the mantissa, inside that model.
// NaN scales are NaN factors; NaN and Inf elements reach the MMA as BF16 NaN and Inf.
//
// One warp per 16 x 8 output tile, operands read straight from global memory into fragments:
// simple, not fast. Any shape (m, n and k tails zero-filled; elements past k and rows past m or n
// never read, nor their scales, so padding cells never reach a product).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/builtin.h"
#include "kernels/mx_block_decode.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"
#include "kernels/tensor_core_layouts.h"
#include "kernels/wide_sum.h"

namespace nvfp4::kern {
namespace {

constexpr int kWarps = 4;
constexpr uint32_t kMxFormats =
    (1u << NVFP4_FORMAT_MXFP4) | (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);

struct TcOperand {
  const uint8_t* data;
  const uint8_t* scales;
  uint32_t format;
  int64_t rows;
};

// Elements x and x+1 of row r (zero past the operand) as a BF16 pair, x in the low half.
__device__ __forceinline__ uint32_t element_pair(const TcOperand& o, int64_t k, int64_t b, int64_t r, int64_t x) {
  if (r >= o.rows || x >= k) return 0;  // k is even: x and x+1 are in or out together
  const uint8_t* row = o.data + (b * o.rows + r) * format_row_bytes(o.format, k);
  const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(format_element(o.format, row, x)));
  const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(format_element(o.format, row, x + 1)));
  return lo | (hi << 16);
}

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The E8M0 scale of row r, block s; 2^0 for a row past the operand (its products are 0).
__device__ __forceinline__ ScaleParts row_scale(const TcOperand& o, uint32_t layout, int64_t kb, int64_t b, int64_t r,
                                                int64_t s) {
  if (r >= o.rows) return ScaleParts{1.0f, 0};
  return e8m0_parts(o.scales[scale_offset(layout, o.rows, kb, b, r, s)]);
}

// Fragments of m16n8k16 where kernels/tensor_core_layouts.h puts them (tested against the PTX ISA).
__global__ void mx_gemm_tc_kernel(nvfp4_problem p, uint32_t out_type) {
  const TcOperand a{p.a, p.sfa, p.a_format, p.m}, bo{p.b, p.sfb, p.b_format, p.n};
  const int64_t k = p.k, kb = (k + 31) / 32;
  const int64_t tiles_m = (p.m + 15) / 16, tiles_n = (p.n + 7) / 8, tiles = p.l * tiles_m * tiles_n;
  const int lane = threadIdx.x % 32;
  for (int64_t t = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32; t < tiles; t += int64_t{gridDim.x} * kWarps) {
    const int64_t b = t / (tiles_m * tiles_n), i0 = (t / tiles_n % tiles_m) * 16, j0 = t % tiles_n * 8;
    int64_t rows[4], cols[4];  // C element c of this lane
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const tc::RowCol rc = tc::mma_c_element(lane, c);
      rows[c] = i0 + rc.row, cols[c] = j0 + rc.col;
    }
    WideSum acc[4];
    for (int64_t s = 0; s < kb; ++s) {
      float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int64_t x = 32 * s; x < 32 * s + 32; x += 16) {
        uint32_t af[4], bf[2];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const tc::RowCol rc = tc::mma_a_pair(lane, r);  // row: m, col: k
          af[r] = element_pair(a, k, b, i0 + rc.row, x + rc.col);
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const tc::RowCol rc = tc::mma_b_pair(lane, r);  // row: k, col: n
          bf[r] = element_pair(bo, k, b, j0 + rc.col, x + rc.row);
        }
        mma_bf16_16816(part, af, bf[0], bf[1]);
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const ScaleParts sa = row_scale(a, p.sf_layout, kb, b, rows[c], s);
        const ScaleParts sb = row_scale(bo, p.sf_layout, kb, b, cols[c], s);
        acc[c].add(part[c] * (sa.mant * sb.mant), sa.exp + sb.exp);
      }
    }
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (rows[c] < p.m && cols[c] < p.n) store_wide(p.c, (b * p.m + rows[c]) * p.n + cols[c], out_type, p.alpha, acc[c]);
  }
}

int run_mx_gemm_tc(const nvfp4_problem* p);

}  // namespace

NVFP4_DEFINE_BUILTIN(mx_gemm_tc) = {
    {NVFP4_ABI_VERSION, "mx_gemm_tc", NVFP4_MEMORY_CUDA, (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM),
     (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 90, 1, 1, 1, NVFP4_FLAG_MMA_ACCUMULATE,
     (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32), 0, kMxFormats, kMxFormats, 0, 0, 0},
    run_mx_gemm_tc};

namespace {

int run_mx_gemm_tc(const nvfp4_problem* p) {
  if (!mx_problem_fits(builtin_mx_gemm_tc.info, p) || !formats_declared(builtin_mx_gemm_tc.info, *p)) return NVFP4_UNSUPPORTED;
  const int64_t tiles = p->l * ((p->m + 15) / 16) * ((p->n + 7) / 8);
  const int64_t blocks = std::min<int64_t>((tiles + kWarps - 1) / kWarps, int64_t{1} << 20);  // grid-stride beyond
  mx_gemm_tc_kernel<<<static_cast<unsigned>(blocks), 32 * kWarps, 0, static_cast<cudaStream_t>(p->stream)>>>(
      *p, problem_out_type(p));
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "mx_gemm_tc: launch failed: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

}  // namespace
}  // namespace nvfp4::kern
