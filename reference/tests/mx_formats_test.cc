// Every E8M0 scale byte and every E4M3FN and E5M2 element byte against an independent formula
// (SPEC.md section 1, revision 4): the value from the bit fields by the textbook definition, in
// double (every value of the three formats is a double).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "reference/mx_formats.h"

namespace nvfp4 {
namespace {

double element_double(const ElementValue& v) {
  if (v.nan) return NAN;
  const double mag = v.inf ? INFINITY : std::ldexp(static_cast<double>(v.sig), v.exp);
  return v.negative ? -mag : mag;
}

// E5M2 by definition: bias 15, 2 mantissa bits, IEEE-style Inf and NaN at exponent 31.
double e5m2_formula(int byte) {
  const int s = byte >> 7, e = (byte >> 2) & 31, m = byte & 3;
  double mag;
  if (e == 31) {
    mag = m == 0 ? INFINITY : NAN;
  } else {
    mag = e == 0 ? (m / 4.0) * std::pow(2.0, -14) : (1.0 + m / 4.0) * std::pow(2.0, e - 15);
  }
  return s ? -mag : mag;
}

// E4M3FN by definition: bias 7, 3 mantissa bits, NaN at S.1111.111 only, no Inf.
double e4m3_formula(int byte) {
  const int s = byte >> 7, e = (byte >> 3) & 15, m = byte & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? (m / 8.0) * std::pow(2.0, -6) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

// Same value, NaN equal to NaN, and the sign of zeros and Infs compared too.
void expect_same(double got, double want) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got));
    return;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(std::signbit(got), std::signbit(want));
}

TEST(MxFormats, E8m0EveryByteMatchesTheFormula) {
  for (int byte = 0; byte < 256; ++byte) {
    SCOPED_TRACE(byte);
    const E8m0Value v = e8m0_decode(static_cast<uint8_t>(byte));
    EXPECT_EQ(v.nan, byte == 0xFF);
    if (v.nan) continue;
    EXPECT_EQ(std::ldexp(1.0, v.exp), std::pow(2.0, byte - 127));
  }
  EXPECT_EQ(e8m0_decode(0x00).exp, -127);  // 2^-127, not zero
  EXPECT_EQ(e8m0_decode(0x7F).exp, 0);
  EXPECT_EQ(e8m0_decode(0xFE).exp, 127);
}

TEST(MxFormats, E4m3ElementEveryByteMatchesTheFormula) {
  int nans = 0;
  for (int byte = 0; byte < 256; ++byte) {
    SCOPED_TRACE(byte);
    const ElementValue v = e4m3_element(static_cast<uint8_t>(byte));
    EXPECT_FALSE(v.inf);
    nans += v.nan;
    expect_same(element_double(v), e4m3_formula(byte));
  }
  EXPECT_EQ(nans, 2);  // 0x7F and 0xFF
  EXPECT_EQ(element_double(e4m3_element(0x7E)), 448.0);
  EXPECT_EQ(element_double(e4m3_element(0xFE)), -448.0);
  EXPECT_EQ(element_double(e4m3_element(0x01)), std::ldexp(1.0, -9));
}

TEST(MxFormats, E5m2ElementEveryByteMatchesTheFormula) {
  int nans = 0, infs = 0;
  for (int byte = 0; byte < 256; ++byte) {
    SCOPED_TRACE(byte);
    const ElementValue v = e5m2_element(static_cast<uint8_t>(byte));
    nans += v.nan;
    infs += v.inf;
    expect_same(element_double(v), e5m2_formula(byte));
  }
  EXPECT_EQ(nans, 6);
  EXPECT_EQ(infs, 2);
  EXPECT_EQ(element_double(e5m2_element(0x7B)), 57344.0);
  EXPECT_EQ(element_double(e5m2_element(0x01)), std::ldexp(1.0, -16));
  EXPECT_EQ(element_double(e5m2_element(0xFC)), -INFINITY);
}

// E5M2 is the top byte of IEEE binary16: a second, independent formulation of every byte.
TEST(MxFormats, E5m2IsTheHighByteOfBinary16) {
  for (int byte = 0; byte < 256; ++byte) {
    SCOPED_TRACE(byte);
    const int h = byte << 8;
    const int e = (h >> 10) & 31, f = h & 1023;
    double mag = e == 31 ? (f ? NAN : INFINITY) : e == 0 ? std::ldexp(f, -24) : std::ldexp(1024 + f, e - 25);
    expect_same(element_double(e5m2_element(static_cast<uint8_t>(byte))), (h & 0x8000) ? -mag : mag);
  }
}

TEST(MxFormats, E2m1ElementIsTheDoubledCodeHalved) {
  for (int code = 0; code < 16; ++code) {
    SCOPED_TRACE(code);
    const ElementValue v = e2m1_element(static_cast<uint8_t>(code));
    EXPECT_FALSE(v.nan || v.inf);
    EXPECT_EQ((v.negative ? -1 : 1) * std::ldexp(v.sig, v.exp), e2m1_twice(static_cast<uint8_t>(code)) / 2.0);
  }
}

}  // namespace
}  // namespace nvfp4
