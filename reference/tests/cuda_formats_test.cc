// Our decoders against CUDA's own host conversions (cuda_fp4.h / cuda_fp8.h, plain host code
// compiled by the C++ compiler with the CUDA include directory): the formats mean what NVIDIA's
// hardware and libraries mean.
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "reference/formats.h"
#include "reference/fp16.h"

namespace nvfp4 {
namespace {

double half_raw_value(__half_raw h) {
  const Fp16Parts p = fp16_parts(h.x);
  if (p.nan) return NAN;
  const double mag = p.inf ? INFINITY : std::ldexp(double(p.sig), p.exp);
  return p.negative ? -mag : mag;
}

TEST(CudaFormats, E2M1EveryCodeMatchesCudaFp4) {
  for (int code = 0; code < 16; ++code) {
    SCOPED_TRACE(code);
    const __half_raw h = __nv_cvt_fp4_to_halfraw(static_cast<__nv_fp4_storage_t>(code), __NV_E2M1);
    EXPECT_EQ(e2m1_twice(static_cast<uint8_t>(code)) / 2.0, half_raw_value(h));
    __nv_fp4_e2m1 q;
    q.__x = static_cast<__nv_fp4_storage_t>(code);
    EXPECT_EQ(e2m1_twice(static_cast<uint8_t>(code)) / 2.0, static_cast<double>(static_cast<float>(q)));
  }
}

TEST(CudaFormats, E2M1PackedPairMatchesCudaFp4x2) {
  // __nv_fp4x2_e2m1: element 0 is the low nibble.
  for (int byte = 0; byte < 256; ++byte) {
    const __half2_raw h2 = __nv_cvt_fp4x2_to_halfraw2(static_cast<__nv_fp4x2_storage_t>(byte), __NV_E2M1);
    const uint8_t row[1] = {static_cast<uint8_t>(byte)};
    __half_raw lo, hi;
    lo.x = h2.x;
    hi.x = h2.y;
    EXPECT_EQ(e2m1_twice(e2m1_nibble(row, 0)) / 2.0, half_raw_value(lo)) << byte;
    EXPECT_EQ(e2m1_twice(e2m1_nibble(row, 1)) / 2.0, half_raw_value(hi)) << byte;
  }
}

TEST(CudaFormats, E4M3EveryByteMatchesCudaFp8) {
  for (int byte = 0; byte < 256; ++byte) {
    SCOPED_TRACE(testing::Message() << "byte 0x" << std::hex << byte);
    const double cuda = half_raw_value(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(byte), __NV_E4M3));
    __nv_fp8_e4m3 q;
    q.__x = static_cast<__nv_fp8_storage_t>(byte);
    const double cuda_class = static_cast<float>(q);
    for (ScaleSemantics sem : {ScaleSemantics::ue4m3, ScaleSemantics::e4m3}) {
      const ScaleValue v = e4m3_decode(static_cast<uint8_t>(byte), sem);
      EXPECT_EQ(v.nan, std::isnan(cuda));
      EXPECT_EQ(v.nan, std::isnan(cuda_class));
      if (v.nan) continue;
      const double ours = v.sign * std::ldexp(double(v.sig), v.exp);
      // CUDA's E4M3 is signed; ue4m3 is its magnitude.
      EXPECT_EQ(ours, sem == ScaleSemantics::e4m3 ? cuda : std::fabs(cuda));
      EXPECT_EQ(ours, sem == ScaleSemantics::e4m3 ? cuda_class : std::fabs(cuda_class));
    }
  }
}

TEST(CudaFormats, Fp16RoundingMatchesCudaFloatToHalf) {
  // fp16_round of every float that is a multiple of 2^-40 on a coarse sweep of binades,
  // against CUDA's host float -> half conversion (round to nearest even).
  for (int e = -30; e <= 17; ++e) {
    for (uint32_t f = 0; f < (1u << 23); f += 977) {  // a prime stride through the mantissas
      const float x = std::ldexp(1.0f + float(f) / float(1u << 23), e);
      const __half_raw want = __half_raw(__float2half_rn(x));
      const uint32_t mant = (1u << 23) | f;  // x = mant * 2^(e - 23)
      ASSERT_EQ(fp16_round(false, mant, e - 23), want.x) << "x = " << x;
      ASSERT_EQ(fp16_round(true, mant, e - 23), static_cast<uint16_t>(want.x | 0x8000u)) << "x = " << -x;
    }
  }
}

}  // namespace
}  // namespace nvfp4
