// Writing one output element in the problem's output type (SPEC.md section 1: FP16, BF16 or
// FP32, round to nearest even, subnormals kept), host and device: the built-in kernels' own copy
// of the output formats (kernels never include reference/).
//
// Why not simply RN_out(alpha * acc) with the product in FP32: for BF16 that rounds twice, and
// the first rounding can land on a BF16 midpoint where BF16's subnormals overlap FP32's
// (below 2^-126): alpha * acc = 2^-134 + 2^-150 is exact, rounds to 2^-134 in FP32 (a tie at
// FP32's 2^-149 steps), then to 0 in BF16 (tie to even), though the exact value rounds up to
// 2^-133. The product of two floats is exact in double; rounding that to float toward zero and
// setting the last bit when inexact ("round to odd") keeps enough to round once more correctly
// to any format at least two bits narrower, which FP16 and BF16 are.
#pragma once

#include <stdint.h>
#include <string.h>

#include "kernels/block_scaled_decode.h"  // NVFP4_KERNEL_HD, float_bits, float_from_bits
#include "kernels/nvfp4_kernel_abi.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif
#if !defined(__CUDA_ARCH__)
#include <cmath>

#include "kernels/host/fp16_from_float.h"
#endif

namespace nvfp4::kern {

// FP32 -> BF16 (8 significant bits, FP32's exponent range), round to nearest even on the bits:
// a carry out of the mantissa moves into the exponent, and out of the largest finite value onto
// Inf, exactly as the format requires; subnormals are FP32's own, cut at 2^-133. NaN is quieted.
// The same as CUDA's __float2bfloat16_rn.
NVFP4_KERNEL_HD uint16_t bf16_from_float(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// FP32 -> FP16, round to nearest even (__float2half_rn).
NVFP4_KERNEL_HD uint16_t fp16_bits_from_float(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  return fp16_from_float(f);
#endif
}

// d rounded to float toward zero, with the last bit set when that was inexact ("round to odd").
NVFP4_KERNEL_HD float float_round_to_odd(double d) {
#if defined(__CUDA_ARCH__)
  const float f = __double2float_rz(d);
#else
  float f = static_cast<float>(d);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
#endif
  if (d != d || static_cast<double>(f) == d) return f;  // NaN, or exact
  return float_from_bits(float_bits(f) | 1u);
}

// Element `index` of C (words of `out_type`: 2 bytes for FP16 and BF16, 4 for FP32) set to v
// rounded once.
NVFP4_KERNEL_HD void store_output(void* c, int64_t index, uint32_t out_type, double v) {
  if (out_type == NVFP4_OUT_FP32) {
    static_cast<float*>(c)[index] = static_cast<float>(v);  // one rounding, to nearest even
  } else if (out_type == NVFP4_OUT_BF16) {
    static_cast<uint16_t*>(c)[index] = bf16_from_float(float_round_to_odd(v));
  } else {
    static_cast<uint16_t*>(c)[index] = fp16_bits_from_float(float_round_to_odd(v));
  }
}

// The epilogue of an FP32 accumulator: alpha * acc (exact in double), rounded once to out_type.
NVFP4_KERNEL_HD void store_scaled(void* c, int64_t index, uint32_t out_type, float alpha, float acc) {
  store_output(c, index, out_type, static_cast<double>(alpha) * static_cast<double>(acc));
}

// silu(g) * u for the dual GEMM, all in FP32 as a CUDA epilogue computes it: g = alpha * (FP32
// sum) and u = alpha2 * (FP32 sum) rounded to FP32 by the caller, silu(g) = g / (1 + e^-g) with
// the accurate expf and an IEEE division, the product rounded to FP32 and then once more to
// out_type. SPEC section 3 rule 6 allows each of those roundings, FP32's subnormals included.
NVFP4_KERNEL_HD void store_silu_product(void* c, int64_t index, uint32_t out_type, float g, float u) {
#if defined(__CUDA_ARCH__)
  const float silu = g / (1.0f + expf(-g));
#else
  const float silu = g / (1.0f + std::exp(-g));
#endif
  store_output(c, index, out_type, static_cast<double>(silu * u));
}

}  // namespace nvfp4::kern
