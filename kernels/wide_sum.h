// An FP32 accumulator with an exponent of its own, for sums of MX blocks (host and device).
//
// Why: E8M0 scales put a block's scaled sum anywhere from about 2^-300 to 2^300, far outside
// FP32's exponent range. Accumulated in a plain float, a sum below 2^-126 is rounded to FP32's
// subnormal grid (an absolute error of up to 2^-150 on each addition, which no relative bound
// covers) and rounded again when alpha is applied and the result stored: on the H200,
// mx_gemm_tc wrote an FP32 output 1.25 times the oracle's bound away (alpha -0.25, sums near
// 2^-140: 2^-150 from the float sum's rounding times 0.25 plus 2^-150 from the output's). Here
// the mantissa m stays in [0.5, 1) and the exponent e in an int, so every addition loses at most
// FP32's relative u, as the IEEE FP32 model allows, and the output is rounded once:
// RN_out(alpha * m * 2^e), the product and the power of two exact in double.
#pragma once

#include "kernels/output_words.h"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace nvfp4::kern {

struct WideSum {
  float m = 0.0f;  // 0, NaN, +-Inf, or of magnitude in [0.5, 1)
  int e = 0;       // the value is m * 2^e

  // Adds v * 2^exp (v a finite FP32 block sum, or NaN or Inf, which the sum takes on).
  NVFP4_KERNEL_HD void add(float v, int exp) {
    if (!finite(m) || !finite(v)) {  // NaN and Inf propagate as IEEE additions would
      m += v;
      return;
    }
    if (v == 0.0f) return;
    // Both terms in the frame of the larger exponent: only the smaller term can underflow there,
    // losing less than 2^-149 where the larger one is at least 2^-50 (m's 0.5, or a nonzero block
    // sum: element products of at least 2^-32 times scale mantissas of at least 2^-18).
    const int frame = m == 0.0f || exp > e ? exp : e;
    const float sum = ldexp_float(m, e - frame) + ldexp_float(v, exp - frame);
    int k = 0;
    m = frexp_float(sum, &k);
    e = sum == 0.0f ? 0 : frame + k;
  }

  // alpha * m * 2^e, exact in double (24 + 24 significant bits; a power of two), beyond FP32's
  // range where it lies there.
  NVFP4_KERNEL_HD double scaled(float alpha) const {
    return ldexp_double(static_cast<double>(alpha) * static_cast<double>(m), e);
  }

 private:
  NVFP4_KERNEL_HD static bool finite(float x) { return x - x == 0.0f; }
#if defined(__CUDA_ARCH__)
  NVFP4_KERNEL_HD static float ldexp_float(float x, int n) { return ldexpf(x, n); }
  NVFP4_KERNEL_HD static float frexp_float(float x, int* n) { return frexpf(x, n); }
  NVFP4_KERNEL_HD static double ldexp_double(double x, int n) { return ldexp(x, n); }
#else
  static float ldexp_float(float x, int n) { return std::ldexp(x, n); }
  static float frexp_float(float x, int* n) { return std::frexp(x, n); }
  static double ldexp_double(double x, int n) { return std::ldexp(x, n); }
#endif
};

// Element `index` of C: alpha * sum rounded once to out_type.
NVFP4_KERNEL_HD void store_wide(void* c, int64_t index, uint32_t out_type, float alpha, const WideSum& sum) {
  store_output(c, index, out_type, sum.scaled(alpha));
}

}  // namespace nvfp4::kern
