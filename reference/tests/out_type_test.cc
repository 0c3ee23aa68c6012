// The output types of SPEC.md section 1: out_round against independent roundings (fp16_round for
// FP16, the hardware's double -> float conversion for FP32, the round-half-even bit trick on
// FP32 bits for BF16), at every BF16 midpoint and its neighbours, exact decoding, ulps, overflow
// thresholds and the little-endian byte order of words.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "reference/out_type.h"
#include "reference/problem.h"
#include "reference/scaled_round.h"

namespace nvfp4 {
namespace {

uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// BF16 of a finite FP32 by the widely used round-half-even bit trick (Inf for overflow): an
// independent formula for the values that are FP32 values.
uint32_t bf16_of_float(float f) {
  const uint32_t b = float_bits(f);
  return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}

// An exact dyadic value (mag * 2^exp2) as a double when mag < 2^53.
double value_of(uint64_t mag, int exp2) { return std::ldexp(static_cast<double>(mag), exp2); }

TEST(OutRound, Fp16MatchesFp16Round) {
  const uint64_t seed = 20261201;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int n = 0; n < 2000000; ++n) {
    const int bits = 1 + static_cast<int>(rng() % 100);
    u128 mag = (static_cast<u128>(rng()) << 64 | rng()) >> (128 - bits);
    if (mag == 0) mag = 1;
    const int exp2 = -170 + static_cast<int>(rng() % 200) - bits;
    const bool neg = rng() & 1;
    ASSERT_EQ(out_round(OutType::fp16, neg, mag, exp2), fp16_round(neg, mag, exp2))
        << "bits " << bits << " exp2 " << exp2;
  }
}

TEST(OutRound, Fp32MatchesTheHardwareConversion) {
  const uint64_t seed = 77;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int n = 0; n < 2000000; ++n) {
    const int bits = 1 + static_cast<int>(rng() % 53);
    const uint64_t mag = (rng() >> (64 - bits)) | 1u;
    // Exponents from well below FP32's subnormals to beyond its overflow.
    const int exp2 = -200 + static_cast<int>(rng() % 340) - bits;
    const bool neg = rng() & 1;
    const double v = value_of(mag, exp2);  // exact: < 2^53 significant bits, in double's range
    const float f = static_cast<float>(neg ? -v : v);  // one IEEE rounding, ties to even
    ASSERT_EQ(out_round(OutType::fp32, neg, mag, exp2), float_bits(f)) << "mag " << mag << " exp2 " << exp2;
  }
}

TEST(OutRound, Bf16AtEveryMidpointAndItsNeighbours) {
  // For every positive finite BF16 word w: the value just below, at and just above the midpoint
  // to w + 1 (each an FP32 value), must round like the bit trick on those FP32 bits says.
  int64_t checked = 0;
  for (uint32_t w = 0; w < 0x7F80u; ++w) {
    const uint32_t mid = (w << 16) | 0x8000u;  // FP32 bits of the midpoint
    for (const uint32_t bits : {mid - 1, mid, mid + 1, w << 16, (w << 16) | 1u}) {
      float f;
      std::memcpy(&f, &bits, sizeof f);
      int e = 0;
      const double frac = std::frexp(static_cast<double>(f), &e);
      const uint64_t mag = static_cast<uint64_t>(std::ldexp(frac, 53));
      for (const bool neg : {false, true}) {
        const uint32_t want = bf16_of_float(neg ? -f : f) & 0xFFFFu;
        ASSERT_EQ(out_round(OutType::bf16, neg, mag, e - 53), mag == 0 ? 0u : want) << std::hex << bits;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300000);
  // Values beyond FP32's precision: just above a tie rounds up, a tie alone to even.
  const u128 tie = (static_cast<u128>(0x181) << 60);        // 1.0000001b * 2^68 scaled: 9 bits, a tie at bit 0
  EXPECT_EQ(out_round(OutType::bf16, false, tie, -68), 0x3FC0u);  // 1.5 + 2^-8 -> 1.5 (even)
  EXPECT_EQ(out_round(OutType::bf16, false, tie + 1, -68), 0x3FC1u);
}

TEST(OutRound, Bf16SubnormalsAndOverflow) {
  // Smallest subnormal 2^-133, half of it ties to 0, just above half rounds up.
  EXPECT_EQ(out_round(OutType::bf16, false, 1, -133), 0x0001u);
  EXPECT_EQ(out_round(OutType::bf16, false, 1, -134), 0x0000u);
  EXPECT_EQ(out_round(OutType::bf16, false, 3, -135), 0x0001u);  // 0.75 unit
  EXPECT_EQ(out_round(OutType::bf16, true, 3, -134), 0x8002u);   // 1.5 units -> 2 (even)
  EXPECT_EQ(out_round(OutType::bf16, false, 0x7F, -133), 0x007Fu);  // largest subnormal
  EXPECT_EQ(out_round(OutType::bf16, false, 0xFF, -134), 0x0080u);  // 127.5 units -> smallest normal
  // Overflow at (2 - 2^-8) * 2^127: just below rounds to the largest finite 0x7F7F.
  EXPECT_EQ(out_round(OutType::bf16, false, 0x1FF, 119), 0x7F80u);
  EXPECT_EQ(out_round(OutType::bf16, false, (u128(0x1FF) << 20) - 1, 99), 0x7F7Fu);
  EXPECT_EQ(out_round(OutType::bf16, true, 1, 128), 0xFF80u);
  EXPECT_DOUBLE_EQ(overflow_threshold(OutType::bf16), std::ldexp(2.0 - std::ldexp(1.0, -8), 127));
  EXPECT_DOUBLE_EQ(overflow_threshold(OutType::fp32), std::ldexp(2.0 - std::ldexp(1.0, -24), 127));
  EXPECT_DOUBLE_EQ(overflow_threshold(OutType::fp16), 65520.0);
}

TEST(OutRound, ScaledSumMatchesTheFp16Reference) {
  const uint64_t seed = 5;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int n = 0; n < 200000; ++n) {
    const i128 sum = static_cast<i128>(static_cast<int64_t>(rng()) >> (rng() % 64));
    float alpha;
    const uint32_t bits = static_cast<uint32_t>(rng()) & 0xFF7FFFFFu;  // finite
    std::memcpy(&alpha, &bits, sizeof alpha);
    ASSERT_EQ(round_scaled_sum_out(OutType::fp16, sum, alpha), round_scaled_sum(sum, alpha));
    // FP32: alpha * sum * 2^-20 rounded once; double holds sum * alpha_sig exactly when the sum
    // has at most 29 bits.
    if (sum > -(i128(1) << 29) && sum < (i128(1) << 29)) {
      const double exact = static_cast<double>(static_cast<int64_t>(sum)) * static_cast<double>(alpha) * 0x1p-20;
      if (std::isfinite(exact) && exact != 0 && std::fabs(exact) > 0x1p-1000) {
        ASSERT_EQ(round_scaled_sum_out(OutType::fp32, sum, alpha), float_bits(static_cast<float>(exact)));
      }
    }
  }
  EXPECT_EQ(round_scaled_sum_out(OutType::bf16, 0, -1.0f), 0u);  // an exact zero is +0
}

TEST(OutType, DecodeIsExactAndInvertsRounding) {
  for (const OutType t : {OutType::fp16, OutType::bf16}) {
    for (uint32_t w = 0; w < 0x10000u; ++w) {
      const double v = decode_out(t, w);
      if (is_nan_out(t, w)) {
        ASSERT_TRUE(std::isnan(v));
        continue;
      }
      if (std::isinf(v) || v == 0) continue;
      int e = 0;
      const double frac = std::frexp(std::fabs(v), &e);
      ASSERT_EQ(out_round(t, v < 0, static_cast<uint64_t>(std::ldexp(frac, 53)), e - 53), w) << std::hex << w;
    }
  }
  std::mt19937_64 rng(9);
  for (int n = 0; n < 100000; ++n) {
    const uint32_t w = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &w, sizeof f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan_out(OutType::fp32, w));
      continue;
    }
    ASSERT_EQ(decode_out(OutType::fp32, w), static_cast<double>(f));
  }
  EXPECT_TRUE(is_nan_out(OutType::bf16, 0xFFC1u));
  EXPECT_FALSE(is_nan_out(OutType::bf16, 0xFF80u));
  EXPECT_TRUE(same_result_out(OutType::fp32, 0x7FC00000u, 0xFF800001u));
  EXPECT_FALSE(same_result_out(OutType::fp32, 0x00000000u, 0x80000000u));
}

TEST(OutType, UlpsAndOrder) {
  EXPECT_EQ(ulp_out(OutType::fp16, 0), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp_out(OutType::bf16, 1e-39), std::ldexp(1.0, -133));
  EXPECT_EQ(ulp_out(OutType::fp32, 1e-39), std::ldexp(1.0, -149));
  EXPECT_EQ(ulp_out(OutType::bf16, 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp_out(OutType::fp32, 1.5), std::ldexp(1.0, -23));
  EXPECT_EQ(out_ordered(OutType::fp32, 0x80000000u), 0);
  EXPECT_EQ(out_ordered(OutType::bf16, 0x8001u), -1);
}

TEST(OutType, WordsAreLittleEndianInCOrder) {
  const std::vector<uint32_t> words = {0x3F800000u, 0x12345678u};
  const std::vector<uint8_t> bytes = words_to_bytes(OutType::fp32, words);
  ASSERT_EQ(bytes, (std::vector<uint8_t>{0x00, 0x00, 0x80, 0x3F, 0x78, 0x56, 0x34, 0x12}));
  EXPECT_EQ(bytes_to_words(OutType::fp32, bytes.data(), bytes.size()), words);
  const std::vector<uint8_t> half = words_to_bytes(OutType::bf16, {0x3F80u, 0xBF80u});
  EXPECT_EQ(half, (std::vector<uint8_t>{0x80, 0x3F, 0x80, 0xBF}));
  EXPECT_THROW(bytes_to_words(OutType::fp32, bytes.data(), 3), std::invalid_argument);
  EXPECT_EQ(word_text(OutType::bf16, 0x3FC0u), "1.5 (0x3fc0)");
  EXPECT_EQ(word_hex(OutType::fp32, 0x1u), "00000001");
}

TEST(OutType, NamesRoundTrip) {
  for (const OutType t : {OutType::fp16, OutType::bf16, OutType::fp32}) {
    OutType back = OutType::fp16;
    ASSERT_TRUE(parse_out_type(to_string(t), &back));
    EXPECT_EQ(back, t);
  }
  OutType t;
  EXPECT_FALSE(parse_out_type("FP16", &t));
  EXPECT_EQ(static_cast<uint32_t>(OutType::bf16), 2u);  // NVFP4_OUT_BF16
  for (const Op op : {Op::gemv, Op::gemm, Op::grouped_gemm, Op::dual_gemm}) {
    Op back = Op::gemv;
    ASSERT_TRUE(parse_op(to_string(op), &back));
    EXPECT_EQ(back, op);
  }
}

}  // namespace
}  // namespace nvfp4
