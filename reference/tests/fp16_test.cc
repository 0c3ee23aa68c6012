// fp16_round against an independent rounding (long double arithmetic, exact for every value
// tried) and, where the compiler has it, _Float16's own conversion from double: every FP16 value,
// every midpoint between neighbours, values one unit of a finer grid beside each, the overflow
// threshold 65520, subnormals and values far below the smallest one.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <vector>

#include "reference/fp16.h"
#include "reference/tests/fp16_formula.h"

namespace nvfp4 {
namespace {

using testing_formula::decode_formula;
using testing_formula::round_formula;


// The value mag * 2^exp2 as an integer significand with exponent, for small mags.
struct Exact {
  uint64_t mag;
  int exp2;
  long double value() const { return std::ldexp((long double)mag, exp2); }
};

void check(Exact x, const char* what, uint16_t h) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const uint16_t want = round_formula(x.value());
  ASSERT_EQ(fp16_round(false, x.mag, x.exp2), want)
      << what << " near bits 0x" << std::hex << h << ": mag " << std::dec << x.mag << " * 2^" << x.exp2;
  ASSERT_EQ(fp16_round(true, x.mag, x.exp2), x.mag == 0 ? 0 : (want | 0x8000))
      << what << " (negative) near bits 0x" << std::hex << h;
  // The same value with 70 more low bits (a wider u128 significand) rounds the same.
  ASSERT_EQ(fp16_round(false, static_cast<u128>(x.mag) << 70, x.exp2 - 70), want) << what << " widened";
#ifdef __FLT16_MAX__
  // _Float16's conversion from double (correctly rounded) where the value is a double.
  const double d = static_cast<double>(x.value());
  if (static_cast<long double>(d) == x.value()) {
    volatile double vd = d;
    const _Float16 f = static_cast<_Float16>(vd);
    uint16_t bits;
    std::memcpy(&bits, &f, 2);
    ASSERT_EQ(want, bits) << what << ": the formula disagrees with _Float16 at " << d;
  }
#endif
}

TEST(Fp16Round, EveryValueEveryMidpointAndTheirNeighbours) {
  int64_t checked = 0;
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const int e = (h >> 10) & 31, f = h & 1023;
    const uint64_t sig = e == 0 ? f : 1024 + f;
    const int exp = e == 0 ? -24 : e - 25;  // value = sig * 2^exp
    check({sig, exp}, "value", static_cast<uint16_t>(h));
    // The next value up is (sig + 1) * 2^exp in every binade (the binade's top carries into the
    // next one's bottom), up to 65504 + 32 = 65536, whose midpoint is 65520.
    const uint64_t mid2 = 2 * sig + 1;  // midpoint = mid2 * 2^(exp - 1)
    check({mid2, exp - 1}, "midpoint", static_cast<uint16_t>(h));
    for (int finer : {1, 20, 40}) {
      check({(mid2 << finer) - 1, exp - 1 - finer}, "just below a midpoint", static_cast<uint16_t>(h));
      check({(mid2 << finer) + 1, exp - 1 - finer}, "just above a midpoint", static_cast<uint16_t>(h));
      if (sig > 0) check({(sig << finer) - 1, exp - finer}, "just below a value", static_cast<uint16_t>(h));
      check({(sig << finer) + 1, exp - finer}, "just above a value", static_cast<uint16_t>(h));
    }
    checked += 14;
  }
  EXPECT_GT(checked, 31744 * 14 - 1);
}

TEST(Fp16Round, OverflowThresholdAndTies) {
  EXPECT_EQ(fp16_round(false, 65504, 0), 0x7BFF);
  EXPECT_EQ(fp16_round(false, 65519, 0), 0x7BFF);
  EXPECT_EQ(fp16_round(false, (u128(65520) << 60) - 1, -60), 0x7BFF);  // a hair below 65520
  EXPECT_EQ(fp16_round(false, 65520, 0), 0x7C00);                    // the tie goes to even: Inf
  EXPECT_EQ(fp16_round(true, 65520, 0), 0xFC00);
  EXPECT_EQ(fp16_round(false, 1, 16), 0x7C00);
  EXPECT_EQ(fp16_round(false, u128(1) << 127, 0), 0x7C00);
  // Ties to even in the normal range: 2049 * 2^-11 lies between 1 and 1 + 2^-10.
  EXPECT_EQ(fp16_round(false, 2049, -11), 0x3C00);
  EXPECT_EQ(fp16_round(false, 2051, -11), 0x3C02);
  // Exact zero is +0 whatever the sign.
  EXPECT_EQ(fp16_round(true, 0, 5), 0x0000);
}

TEST(Fp16Round, SubnormalsAndFarBelowTheSmallest) {
  EXPECT_EQ(fp16_round(false, 1, -24), 0x0001);
  EXPECT_EQ(fp16_round(false, 1, -25), 0x0000);  // half the smallest: tie to even 0
  EXPECT_EQ(fp16_round(false, 3, -26), 0x0001);  // 0.75 of the smallest
  EXPECT_EQ(fp16_round(false, 3, -25), 0x0002);  // 1.5 of it: tie to even 2
  EXPECT_EQ(fp16_round(false, 1023, -24), 0x03FF);
  EXPECT_EQ(fp16_round(false, 2047, -25), 0x0400);  // largest subnormal + half: even is 0x400
  EXPECT_EQ(fp16_round(false, 1, -14), 0x0400);
  // Drops of 128 bits and more (the shift >= 128 branch).
  const u128 top = u128(1) << 127;
  EXPECT_EQ(fp16_round(false, top, -152), 0x0000);      // exactly 2^-25: tie to 0
  EXPECT_EQ(fp16_round(false, top + 1, -152), 0x0001);  // a hair above
  EXPECT_EQ(fp16_round(false, ~u128(0), -153), 0x0000); // just below 2^-25
  EXPECT_EQ(fp16_round(false, ~u128(0), -300), 0x0000);
  EXPECT_EQ(fp16_round(true, top + 1, -152), 0x8001);
  EXPECT_EQ(fp16_round(true, 1, -200), 0x8000);  // rounds to -0: a nonzero value keeps its sign
}

TEST(Fp16Round, BitWidth) {
  EXPECT_EQ(bit_width_u128(0), 0);
  for (int b = 0; b < 128; ++b) {
    EXPECT_EQ(bit_width_u128(u128(1) << b), b + 1);
    EXPECT_EQ(bit_width_u128((u128(1) << b) | 1), b + 1);
  }
  EXPECT_EQ(bit_width_u128(~u128(0)), 128);
}

TEST(Fp16Parts, EveryBitPatternMatchesTheFormula) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const Fp16Parts p = fp16_parts(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    const bool inf = (h & 0x7FFF) == 0x7C00;
    ASSERT_EQ(p.nan, nan) << h;
    ASSERT_EQ(fp16_is_nan(static_cast<uint16_t>(h)), nan) << h;
    ASSERT_EQ(p.inf, inf) << h;
    ASSERT_EQ(p.negative, (h & 0x8000) != 0) << h;
    if (nan || inf) continue;
    ASSERT_EQ(std::ldexp((long double)p.sig, p.exp), decode_formula(static_cast<uint16_t>(h & 0x7FFF))) << h;
  }
}

// Every bit pattern's double: the formula's value (with the sign of zero), NaN for NaNs.
TEST(Fp16ToDouble, EveryBitPatternIsTheFormulasValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const double d = fp16_to_double(static_cast<uint16_t>(h));
    const bool negative = (h & 0x8000) != 0;
    if ((h & 0x7C00) == 0x7C00) {
      if (h & 0x3FF) ASSERT_TRUE(std::isnan(d)) << h;
      else ASSERT_EQ(d, negative ? -HUGE_VAL : HUGE_VAL) << h;
      continue;
    }
    const long double want = decode_formula(static_cast<uint16_t>(h & 0x7FFF));
    ASSERT_EQ(static_cast<long double>(d), negative ? -want : want) << h;
    ASSERT_EQ(std::signbit(d), negative) << h;
  }
}

}  // namespace
}  // namespace nvfp4
