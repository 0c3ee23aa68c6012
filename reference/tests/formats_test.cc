// Every E2M1 code and every E4M3 scale byte against an independent formula (SPEC.md section 1).
#include <gtest/gtest.h>

#include <cmath>

#include "reference/formats.h"

namespace nvfp4 {
namespace {

// E2M1 from its definition: sign, 2 exponent bits with bias 1, 1 mantissa bit.
double e2m1_formula(int code) {
  const int s = (code >> 3) & 1, e = (code >> 1) & 3, m = code & 1;
  const double mag = e == 0 ? std::ldexp(m * 0.5, 0) : std::ldexp(1.0 + m * 0.5, e - 1);
  return s ? -mag : mag;
}

// E4M3FN from its definition: bias 7, subnormal m/8 * 2^-6, NaN for S.1111.111.
double e4m3_formula(int byte, bool honour_sign) {
  const int s = (byte >> 7) & 1, e = (byte >> 3) & 15, m = byte & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? (m / 8.0) * std::pow(2.0, -6) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
  return (s && honour_sign) ? -mag : mag;
}

TEST(Formats, E2M1EveryCodeMatchesTheFormula) {
  const double table[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};  // SPEC.md's V
  for (int code = 0; code < 16; ++code) {
    SCOPED_TRACE(code);
    EXPECT_EQ(e2m1_twice(static_cast<uint8_t>(code)) / 2.0, e2m1_formula(code));
    EXPECT_EQ(std::fabs(e2m1_formula(code)), table[code & 7]);
    // Only the low nibble matters.
    EXPECT_EQ(e2m1_twice(static_cast<uint8_t>(code | 0xA0)), e2m1_twice(static_cast<uint8_t>(code)));
  }
  EXPECT_TRUE(std::signbit(e2m1_formula(8)));  // 0x8 is -0: decodes to 0, and 0 is what counts
  EXPECT_EQ(e2m1_twice(8), 0);
}

TEST(Formats, E2M1NibbleOrderIsLowFirst) {
  const uint8_t row[3] = {0x21, 0x7F, 0x0C};
  const uint8_t want[6] = {0x1, 0x2, 0xF, 0x7, 0xC, 0x0};
  for (int x = 0; x < 6; ++x) EXPECT_EQ(e2m1_nibble(row, x), want[x]) << "element " << x;
}

TEST(Formats, E4M3EveryByteBothSemanticsMatchesTheFormula) {
  for (int byte = 0; byte < 256; ++byte) {
    for (ScaleSemantics sem : {ScaleSemantics::ue4m3, ScaleSemantics::e4m3}) {
      SCOPED_TRACE(testing::Message() << "byte 0x" << std::hex << byte << " semantics " << int(sem));
      const ScaleValue v = e4m3_decode(static_cast<uint8_t>(byte), sem);
      const double want = e4m3_formula(byte, sem == ScaleSemantics::e4m3);
      EXPECT_EQ(v.nan, std::isnan(want));
      if (v.nan) continue;
      EXPECT_GE(v.sig, 0);
      EXPECT_LE(v.sig, 15);
      EXPECT_TRUE(v.sign == 1 || v.sign == -1);
      EXPECT_EQ(v.sign * std::ldexp(double(v.sig), v.exp), want);
      if (sem == ScaleSemantics::ue4m3) {
        EXPECT_EQ(v.sign, 1);
      }
    }
  }
}

TEST(Formats, E4M3LandmarksOfTheSpec) {
  auto value = [](int byte, ScaleSemantics sem) {
    const ScaleValue v = e4m3_decode(static_cast<uint8_t>(byte), sem);
    return v.sign * std::ldexp(double(v.sig), v.exp);
  };
  EXPECT_EQ(value(0x01, ScaleSemantics::ue4m3), 0.001953125);  // 2^-9, smallest subnormal
  EXPECT_EQ(value(0x08, ScaleSemantics::ue4m3), 0.015625);     // 2^-6, smallest normal
  EXPECT_EQ(value(0x38, ScaleSemantics::ue4m3), 1.0);
  EXPECT_EQ(value(0x7E, ScaleSemantics::ue4m3), 448.0);        // largest finite
  EXPECT_EQ(value(0xFE, ScaleSemantics::ue4m3), 448.0);        // sign ignored
  EXPECT_EQ(value(0xFE, ScaleSemantics::e4m3), -448.0);        // sign honoured
  EXPECT_EQ(value(0x80, ScaleSemantics::e4m3), 0.0);           // -0
  EXPECT_TRUE(e4m3_decode(0x7F, ScaleSemantics::ue4m3).nan);
  EXPECT_TRUE(e4m3_decode(0xFF, ScaleSemantics::e4m3).nan);
  EXPECT_FALSE(e4m3_decode(0x7E, ScaleSemantics::e4m3).nan);
  EXPECT_FALSE(e4m3_decode(0x78, ScaleSemantics::e4m3).nan);   // 256: no Inf in E4M3FN
}

}  // namespace
}  // namespace nvfp4
