// The naive CUDA GEMV/GEMM for operands of any pair of block formats (kernels/mx_block_decode.h),
// FP32 accumulation, shared by the built-in mx_gemm_naive (MxBug::none) and the MX mutants, which
// carry one decode bug each (mutation/mutants/mutant_mx_cuda.cu).
//
// One thread per output element. k is walked in chunks of 16 elements (the largest run that
// shares one scale in every format: NVFP4 blocks are 16, MX blocks 32); a chunk's raw element
// products are summed in FP32 in element order, then scaled once: raw * (ma * mb) * 2^(ea + eb).
// For two MX operands ma * mb is 1, so the scale is one exact ldexpf and never forms 2^+-254
// (the product of two extreme E8M0 scales, outside FP32); with an NVFP4 operand it is its E4M3
// value, one rounded multiply. A NaN scale is a NaN mant and reaches the sum; an Inf E5M2
// element follows IEEE (Inf * 0 and Infs of both signs give NaN).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/cuda/mx_bug.h"
#include "kernels/mx_block_decode.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern::mx {

struct Operand {
  const uint8_t* data;
  const uint8_t* scales;
  uint32_t format;
  int64_t rows;
};

__device__ __forceinline__ bool is_mx(uint32_t format) { return format_or_nvfp4(format) != NVFP4_FORMAT_NVFP4; }
__device__ __forceinline__ bool is_mxfp8(uint32_t format) {
  return format == NVFP4_FORMAT_MXFP8_E4M3 || format == NVFP4_FORMAT_MXFP8_E5M2;
}

// Element x of row r of batch b, as the kernel (with its bug) reads it.
__device__ __forceinline__ float read_element(const Operand& o, int64_t k, int64_t b, int64_t r, int64_t x, MxBug bug) {
  if (bug == MxBug::mxfp8_as_nibbles && is_mxfp8(o.format))
    return e2m1_to_float(e2m1_code(o.data + (b * o.rows + r) * (k / 2), x));
  const uint8_t* row = o.data + (b * o.rows + r) * format_row_bytes(o.format, k);
  if (bug == MxBug::e5m2_as_e4m3 && o.format == NVFP4_FORMAT_MXFP8_E5M2) return e4m3_element_to_float(row[x]);
  return format_element(o.format, row, x);
}

// The scale of element x of row r of batch b; *skip set when the kernel drops the block.
__device__ __forceinline__ ScaleParts read_scale(const Operand& o, uint32_t layout, int64_t k, int64_t b, int64_t r,
                                                 int64_t x, MxBug bug, bool* skip) {
  const int64_t block = format_block(o.format), kb = (k + block - 1) / block;
  int64_t s = x / block;
  if (is_mx(o.format)) {
    if (bug == MxBug::block32_as_16) s = x / 16 < kb ? x / 16 : kb - 1;  // clamped: the bug reads wrong scales, never past them
    if (bug == MxBug::neighbour_block_scale && (s ^ 1) < kb) s ^= 1;
  }
  const uint32_t byte = o.scales[scale_offset(layout, o.rows, kb, b, r, s)];
  ScaleParts sp = format_scale(o.format, byte);
  if (!is_mx(o.format)) return sp;
  if (bug == MxBug::e8m0_zero_as_zero && byte == 0) sp.mant = 0.0f;
  if (bug == MxBug::e8m0_bias_126) sp.exp += 1;
  if (bug == MxBug::nan_scale_ignored && byte == 0xFFu) *skip = true;
  return sp;
}

// The FP32 sum of output (b, i, j): chunks of 16 elements, each scaled once.
__device__ __forceinline__ float output_sum(const nvfp4_problem& p, const Operand& a, const Operand& bo, int64_t b,
                                            int64_t i, int64_t j, MxBug bug) {
  float acc = 0.0f;
  for (int64_t x0 = 0; x0 < p.k; x0 += 16) {
    const int64_t x1 = x0 + 16 < p.k ? x0 + 16 : p.k;
    float raw = 0.0f;
    for (int64_t x = x0; x < x1; ++x) raw += read_element(a, p.k, b, i, x, bug) * read_element(bo, p.k, b, j, x, bug);
    bool skip = false;
    const ScaleParts sa = read_scale(a, p.sf_layout, p.k, b, i, x0, bug, &skip);
    const ScaleParts sb = read_scale(bo, p.sf_layout, p.k, b, j, x0, bug, &skip);
    if (!skip) acc += ldexpf(raw * (sa.mant * sb.mant), sa.exp + sb.exp);  // never skipped when honest: NaN must reach C
  }
  return acc;
}

__global__ void mx_gemm_naive_kernel(nvfp4_problem p, uint32_t out_type, MxBug bug) {
  const Operand a{p.a, p.sfa, format_or_nvfp4(p.a_format), p.m};
  const Operand bo{p.b, p.sfb, format_or_nvfp4(p.b_format), p.n};
  const int64_t count = p.l * p.m * p.n;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < count; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = e % p.n, i = (e / p.n) % p.m, b = e / (p.n * p.m);
    store_scaled(p.c, e, out_type, p.alpha, output_sum(p, a, bo, b, i, j, bug));
  }
}

// Runs the kernel with `bug` on p's stream, or refuses (touching nothing) a problem outside info.
inline int launch_naive(const nvfp4_kernel_info& info, const nvfp4_problem* p, MxBug bug) {
  if (!problem_fits(info, p) || !formats_declared(info, *p)) return NVFP4_UNSUPPORTED;
  const int64_t count = p->l * p->m * p->n;
  const int64_t blocks = std::min<int64_t>((count + 255) / 256, int64_t{1} << 20);  // grid-stride beyond
  mx_gemm_naive_kernel<<<static_cast<unsigned>(blocks), 256, 0, static_cast<cudaStream_t>(p->stream)>>>(
      *p, problem_out_type(p), bug);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: launch failed: %s: %s\n", info.name, cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::kern::mx
