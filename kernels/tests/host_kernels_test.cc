// The host kernels' own parts: the FP32 -> FP16 conversion (every half, every rounding midpoint
// and its neighbours, a seeded sample against independent conversions), the E2M1/E4M3 decoders,
// the refusal of problems outside a kernel's info, and small exact-regime cases whose answer is
// computed here independently. The full check against the reference is the runner's job.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "kernels/block_scaled_decode.h"
#include "kernels/block_scaled_epilogue.h"
#include "kernels/builtin.h"
#include "kernels/host/fp16_from_float.h"
#include "kernels/host/host_quantize.h"
#include "kernels/problem_fits.h"
#include "kernels/registry.h"
#include "kernels/tests/small_problems.h"
#include "reference/fp16.h"  // the reference's exact rounding: an independent oracle for the tests

#if defined(NVFP4_HAVE_CUDA) && __has_include(<cuda_fp16.h>)
#include <cuda_fp16.h>
#define HAVE_CUDA_HOST_HALF 1
#endif

namespace nvfp4 {
namespace {

using kern::fp16_from_float;

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The exact value of a finite half, from its fields.
double half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, f = h & 0x3FF;
  const double mag = e == 0 ? std::ldexp(f, -24) : std::ldexp(1024 + f, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// RN16 of a float through the reference's exact rounding of sign * integer * 2^exp.
uint16_t reference_round(float f) {
  const uint32_t u = float_to_bits(f);
  const uint32_t e = (u >> 23) & 0xFF, frac = u & 0x7FFFFF;
  const bool neg = u >> 31;
  const uint16_t sign = neg ? 0x8000 : 0;
  if (e == 0) return static_cast<uint16_t>(sign | fp16_round(false, frac, -149));  // float subnormal (or zero)
  return static_cast<uint16_t>(sign | fp16_round(false, static_cast<u128>(frac | 0x800000u), static_cast<int>(e) - 150));
}

bool is_nan16(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }

TEST(Fp16FromFloat, EveryFiniteHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00) continue;
    const float f = static_cast<float>(half_value(static_cast<uint16_t>(h)));
    ASSERT_EQ(fp16_from_float(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Fp16FromFloat, InfinityAndNaN) {
  EXPECT_EQ(fp16_from_float(INFINITY), 0x7C00);
  EXPECT_EQ(fp16_from_float(-INFINITY), 0xFC00);
  for (uint32_t payload : {0x7FC00000u, 0x7F800001u, 0x7F802000u, 0xFFFFFFFFu, 0x7FBFFFFFu})
    EXPECT_TRUE(is_nan16(fp16_from_float(bits_to_float(payload)))) << std::hex << payload;
}

// Between each pair of adjacent halves (including 65504 and the first value past it, and 0 and
// the smallest subnormal): the midpoint goes to the even one, one float ulp either side goes to
// the nearer one.
TEST(Fp16FromFloat, EveryMidpointAndItsNeighbours) {
  for (uint32_t h = 0; h < 0x7BFF + 1; ++h) {
    const double lo = half_value(static_cast<uint16_t>(h));
    const double hi = h == 0x7BFF ? 65536.0 : half_value(static_cast<uint16_t>(h + 1));
    const uint16_t up = h == 0x7BFF ? 0x7C00 : static_cast<uint16_t>(h + 1);
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: 12 significant bits
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const uint16_t even = (h & 1) ? up : static_cast<uint16_t>(h);
    for (int sign = 0; sign < 2; ++sign) {
      const float s = sign ? -1.0f : 1.0f;
      const uint16_t sb = sign ? 0x8000 : 0;
      ASSERT_EQ(fp16_from_float(s * mid), even | sb) << "midpoint above half 0x" << std::hex << h;
      ASSERT_EQ(fp16_from_float(s * std::nextafter(mid, 0.0f)), h | sb) << "below midpoint, 0x" << std::hex << h;
      ASSERT_EQ(fp16_from_float(s * std::nextafter(mid, INFINITY)), up | sb) << "above midpoint, 0x" << std::hex << h;
    }
  }
}

TEST(Fp16FromFloat, SeededSampleAgreesWithIndependentConversions) {
  const uint64_t seed = 0x5eed0f16;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  for (int t = 0; t < (1 << 22); ++t) {
    const uint32_t u = static_cast<uint32_t>(rng());
    const float f = bits_to_float(u);
    const uint16_t mine = fp16_from_float(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_nan16(mine)) << std::hex << u;
      continue;
    }
    ASSERT_EQ(mine, std::isinf(f) ? (u >> 31 ? 0xFC00 : 0x7C00) : reference_round(f)) << "float bits 0x" << std::hex << u;
#if defined(__FLT16_MANT_DIG__)
    const _Float16 g = static_cast<_Float16>(f);  // GCC's own IEEE conversion
    uint16_t gb;
    std::memcpy(&gb, &g, sizeof gb);
    ASSERT_EQ(mine, gb) << "vs _Float16, float bits 0x" << std::hex << u;
#endif
#if defined(HAVE_CUDA_HOST_HALF)
    ASSERT_EQ(mine, __half_as_ushort(__float2half_rn(f))) << "vs __float2half_rn, float bits 0x" << std::hex << u;
#endif
  }
}

TEST(BlockScaledDecode, E2M1AllSixteenCodes) {
  const float expected[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (uint32_t c = 0; c < 16; ++c) {
    EXPECT_EQ(kern::e2m1_to_float(c), expected[c]) << c;
    EXPECT_EQ(std::signbit(kern::e2m1_to_float(c)), c >= 8) << c;
  }
}

TEST(BlockScaledDecode, E4M3AllBytesBothSemantics) {
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const int e = (byte >> 3) & 0xF, m = byte & 7;
    const bool nan = (byte & 0x7F) == 0x7F;
    const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
    const float u = kern::e4m3_to_float(byte, false), s = kern::e4m3_to_float(byte, true);
    if (nan) {
      EXPECT_TRUE(std::isnan(u) && std::isnan(s)) << byte;
      continue;
    }
    EXPECT_EQ(u, mag) << byte;
    EXPECT_EQ(s, (byte & 0x80) ? -mag : mag) << byte;
  }
  EXPECT_EQ(kern::e4m3_to_float(0x7E, false), 448.0f);
  EXPECT_EQ(kern::e4m3_to_float(0x01, false), 0.001953125f);
}

TEST(BlockScaledDecode, PermutedOffsetsMatchTheSpecFormulaAndArePerBatchBijective) {
  const int64_t rows = 130, kb = 6, l = 2;
  const int64_t rt = (rows + 127) / 128, kt = (kb + 3) / 4;
  std::vector<int> hits(l * rt * kt * 512, 0);
  for (int64_t b = 0; b < l; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t s = 0; s < kb; ++s) {
        // SPEC section 2, written as the logical [32, 4, Rt, 4, Kt, l] tensor's strides.
        const int64_t expect = b * rt * kt * 512 + (i / 128) * kt * 512 + (s / 4) * 512 + (i % 32) * 16 +
                               ((i / 32) % 4) * 4 + s % 4;
        const int64_t got = kern::scale_offset(NVFP4_SF_PERMUTED, rows, kb, b, i, s);
        ASSERT_EQ(got, expect) << b << " " << i << " " << s;
        ++hits[got];
        ASSERT_EQ(kern::scale_offset(NVFP4_SF_LINEAR, rows, kb, b, i, s), (b * rows + i) * kb + s);
      }
  for (int h : hits) ASSERT_LE(h, 1);
}

// ---- The host kernels on small problems ------------------------------------------------------

// The answer computed independently: exact integer sum in units of 2^-20 (SPEC section 1), then
// the reference's RN16 (valid for alpha a power of two and no NaN scale).
std::vector<uint16_t> exact_answer(const SmallProblem& t, bool signed_scales) {
  static const int kTwice[8] = {0, 1, 2, 3, 4, 6, 8, 12};  // E2M1 magnitudes, doubled
  auto e2m1 = [](uint8_t c) { return (c & 8) ? -kTwice[c & 7] : kTwice[c & 7]; };
  auto scale_units = [&](uint8_t s) {  // scale in units of 2^-9
    const int e = (s >> 3) & 0xF, m = s & 7;
    const int64_t v = e == 0 ? m : int64_t{8 + m} << (e - 1);
    return (signed_scales && (s & 0x80)) ? -v : v;
  };
  int alpha_exp = 0;
  const double frac = std::frexp(t.alpha, &alpha_exp);  // alpha = 0.5 * 2^alpha_exp
  EXPECT_EQ(std::fabs(frac), 0.5) << "exact_answer needs alpha a power of two";
  std::vector<uint16_t> c(t.l * t.m * t.n);
  const int64_t kb = t.kb();
  for (int64_t b = 0; b < t.l; ++b)
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        int64_t sum = 0;  // units of 2^-20: (a*2)(b*2)/4 * sa*2^9 * sb*2^9 / 2^18 -> 2^-2 * 2^-18
        for (int64_t x = 0; x < t.k; ++x) {
          const uint8_t ab = t.a[((b * t.m + i) * t.k + x) / 2], bb = t.b[((b * t.n + j) * t.k + x) / 2];
          const int av = e2m1((x & 1) ? ab >> 4 : ab & 0xF), bv = e2m1((x & 1) ? bb >> 4 : bb & 0xF);
          sum += av * bv * scale_units(t.sfa[(b * t.m + i) * kb + x / 16]) * scale_units(t.sfb[(b * t.n + j) * kb + x / 16]);
        }
        const bool neg = sum < 0;
        // |alpha * sum| rounded, then the sign of alpha * sum (an exact zero stays +0).
        const bool negative = sum != 0 && (neg != (frac < 0));
        c[(b * t.m + i) * t.n + j] = static_cast<uint16_t>(
            fp16_round(false, static_cast<u128>(neg ? -sum : sum), -20 + alpha_exp - 1) | (negative ? 0x8000 : 0));
      }
  return c;
}

// Runs a kernel on t in the given layout; C starts as a NaN poison so unwritten outputs show.
std::vector<uint16_t> run(const Kernel& k, const SmallProblem& t, uint32_t layout, int* status = nullptr) {
  std::vector<uint8_t> sfa = t.sfa, sfb = t.sfb;
  if (layout == NVFP4_SF_PERMUTED) {
    sfa = to_permuted(t.sfa, t.m, t.kb(), t.l);
    sfb = to_permuted(t.sfb, t.n, t.kb(), t.l);
  }
  std::vector<uint16_t> c(t.l * t.m * t.n, 0x7E55);
  const nvfp4_problem p = t.abi(t.a.data(), t.b.data(), sfa.data(), sfb.data(), layout, c.data());
  const int rc = k.run(p);
  if (status) *status = rc;
  else EXPECT_EQ(rc, NVFP4_OK) << k.name();
  return c;
}

// The block-scaled output epilogue's padding cells (every CUDA and host kernel with out_type
// nvfp4 writes 0x00 exactly there) are the reference's padding of the permuted layout, across
// tile edges and batches; the linear layout has none; bug padding_not_written leaves them.
TEST(BlockScaledEpilogue, PaddingCellsAreTheReferencesPermutedPadding) {
  for (const int64_t rows : {1, 5, 127, 128, 129, 300})
    for (const int64_t nb : {1, 2, 4, 5, 9})
      for (const int64_t l : {1, 3}) {
        const std::vector<bool> mask = sf_permuted_padding_mask(rows, nb, l);
        ASSERT_EQ(static_cast<int64_t>(mask.size()), kern::quant::sf_bytes(NVFP4_SF_PERMUTED, rows, nb, l));
        std::vector<uint8_t> sfq(mask.size(), 0x7F), kept = sfq;
        kern::quant::write_sf_padding(NVFP4_SF_PERMUTED, rows, nb, l, sfq.data(), 0, 1, kern::quant::Bug::none);
        kern::quant::write_sf_padding(NVFP4_SF_PERMUTED, rows, nb, l, kept.data(), 0, 1,
                                      kern::quant::Bug::padding_not_written);
        for (size_t at = 0; at < mask.size(); ++at) {
          ASSERT_EQ(kern::quant::sf_padding_cell(NVFP4_SF_PERMUTED, rows, nb, static_cast<int64_t>(at)), mask[at])
              << "rows " << rows << " nb " << nb << " l " << l << " byte " << at;
          ASSERT_EQ(sfq[at], mask[at] ? 0x00 : 0x7F) << "rows " << rows << " nb " << nb << " byte " << at;
          ASSERT_EQ(kept[at], 0x7F);
          ASSERT_FALSE(kern::quant::sf_padding_cell(NVFP4_SF_LINEAR, rows, nb, static_cast<int64_t>(at)));
        }
      }
}

// Each group is encoded with its own global scale; bug group0_global_scale takes group 0's.
TEST(BlockScaledEpilogue, GroupGlobalScale) {
  const nvfp4_group_out table[3] = {{nullptr, nullptr, 2.0f}, {nullptr, nullptr, 3.0f}, {nullptr, nullptr, 5.0f}};
  EXPECT_EQ(kern::quant::group_out_scale(table, 2, kern::quant::Bug::none), 5.0f);
  EXPECT_EQ(kern::quant::group_out_scale(table, 2, kern::quant::Bug::group0_global_scale), 2.0f);
}

// The kernels' stochastic E2M1 rounding against the rule written out: the lower grid neighbour,
// or the upper one when |v| - lower > u * step; on the grid |v| itself; 6 from 6 up; the sign
// kept. Every 613th binary32 pattern below 7, and each grid point with its two neighbours.
TEST(HostKernels, StochasticE2m1RoundsToTheLowerOrUpperNeighbour) {
  const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  const auto expected = [&](float a, float u) {
    if (a >= 6) return 7;
    int c = 0;
    while (grid[c + 1] <= a) ++c;
    return a - grid[c] > u * (grid[c + 1] - grid[c]) ? c + 1 : c;
  };
  std::vector<float> values;
  for (uint32_t bits = 0; bits < 0x40E00000u; bits += 613) values.push_back(kern::float_from_bits(bits));
  for (float g : grid)
    for (float v : {std::nextafter(g, 0.0f), g, std::nextafter(g, 8.0f)}) values.push_back(v);
  const float us[] = {0, 0x1p-24f, 0.25f, 0.5f - 0x1p-24f, 0.5f, 0.75f, 1 - 0x1p-24f};
  for (float a : values)
    for (float u : us)
      for (float sign : {1.0f, -1.0f}) {
        const uint8_t got = kern::quant::e2m1_stochastic(sign * a, u);
        ASSERT_EQ(got, (sign < 0 ? 8 : 0) | expected(a, u)) << "v " << sign * a << " u " << u;
      }
  EXPECT_EQ(kern::quant::e2m1_stochastic(std::nanf(""), 0.5f), 7);
}

// The kernels' round-to-nearest E2M1 against the rule written out: the nearer grid neighbour, a
// tie to the even code (.25, 1.25, 2.5 and 5 down, .75, 1.75 and 3.5 up); 6 from 5 on and Inf;
// NaN +6; the sign kept. The same values as above, and every midpoint with its neighbours.
TEST(HostKernels, NearestE2m1IsTheMidpointRule) {
  const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  const auto expected = [&](float a) {
    if (a >= 6) return 7;
    int c = 0;
    while (grid[c + 1] <= a) ++c;
    const float mid = (grid[c] + grid[c + 1]) / 2;
    return a > mid || (a == mid && c % 2 == 1) ? c + 1 : c;
  };
  std::vector<float> values;
  for (uint32_t bits = 0; bits < 0x40E00000u; bits += 613) values.push_back(kern::float_from_bits(bits));
  for (int c = 0; c < 7; ++c)
    for (float g : {grid[c], (grid[c] + grid[c + 1]) / 2})
      for (float v : {std::nextafter(g, 0.0f), g, std::nextafter(g, 8.0f)}) values.push_back(v);
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(std::numeric_limits<float>::max());
  for (float a : values)
    for (float sign : {1.0f, -1.0f})
      ASSERT_EQ(kern::quant::e2m1_from_float(sign * a), (sign < 0 ? 8 : 0) | expected(a)) << "v " << sign * a;
  EXPECT_EQ(kern::quant::e2m1_from_float(std::nanf("")), 7);
  EXPECT_EQ(kern::quant::e2m1_from_float(-std::nanf("")), 7);
  EXPECT_EQ(kern::quant::e2m1_stochastic(-std::nanf(""), 0.5f), 7);
}

// The host quantizer computes a row's codes step by step (loops that vectorize), the device
// element by element; both must give the same bytes for every bug the mutants build, both
// formats of nibbles, every input type, both roundings, every block length a tail leaves and
// elements of every kind (zero, subnormal, NaN, Inf, past 6 after scaling). The device's form runs
// here on the host, so the CUDA quantizers' arithmetic is checked without a GPU.
TEST(HostKernels, QuantizerCodesStepByStepAreTheDevicesElementByElement) {
  const uint64_t seed = 20261205;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const int64_t k = 96, m = 3;
  std::vector<uint32_t> x32(static_cast<size_t>(m * k));
  std::vector<uint16_t> x16(x32.size());
  int compared = 0;
  for (int bug = 0; bug <= static_cast<int>(kern::quant::Bug::honest_sr_other_generator); ++bug)
    for (uint32_t format : {uint32_t{NVFP4_FORMAT_NVFP4}, uint32_t{NVFP4_FORMAT_MXFP4}})
      for (uint32_t in_type : {uint32_t{NVFP4_IN_FP16}, uint32_t{NVFP4_IN_BF16}, uint32_t{NVFP4_IN_FP32}})
        for (uint32_t flags : {0u, uint32_t{NVFP4_FLAG_STOCHASTIC}}) {
          for (size_t e = 0; e < x32.size(); ++e) {
            const uint64_t r = rng();
            // A quarter special (zeros, subnormals, NaN, Inf), the rest any finite pattern.
            const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu,
                                         0x7FC00000u, 0xFF800000u, 0x7F800000u, 0x7F7FFFFFu};
            x32[e] = (r & 3) == 0 ? specials[(r >> 2) & 7] : static_cast<uint32_t>(r >> 32);
            const uint16_t half_specials[] = {0x0000, 0x8000, 0x0001, 0x83FF, 0x7E00, 0xFC00, 0x7C00, 0x7BFF};
            x16[e] = (r & 3) == 0 ? half_specials[(r >> 2) & 7] : static_cast<uint16_t>(r >> 40);
          }
          nvfp4_problem p{};
          p.op = NVFP4_OP_QUANTIZE, p.m = m, p.n = 1, p.k = k, p.l = 1;
          p.in_type = in_type, p.q_format = format, p.seed = rng();
          p.x = in_type == NVFP4_IN_FP32 ? static_cast<const void*>(x32.data()) : static_cast<const void*>(x16.data());
          std::vector<uint8_t> by_steps(static_cast<size_t>(m * k / 2), 0xA5), by_pairs = by_steps;
          for (int64_t row = 0; row < m; ++row)
            for (int64_t x0 = 0; x0 < k; x0 += 32)
              for (int64_t x1 = x0 + 2; x1 <= x0 + 32; x1 += 2) {
                const float os = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024, static_cast<int>(rng() % 40) - 20);
                float in[32];
                kern::quant::row_inputs(p, static_cast<kern::quant::Bug>(bug), row, x0, static_cast<int>(x1 - x0), in);
                p.q = by_steps.data();
                kern::quant::nibble_codes_by_steps(p, flags, static_cast<kern::quant::Bug>(bug), row, x0, x1, os, in);
                p.q = by_pairs.data();
                kern::quant::nibble_codes_by_pairs(p, flags, static_cast<kern::quant::Bug>(bug), row, x0, x1, os);
                ASSERT_EQ(by_steps, by_pairs) << "bug " << bug << " format " << format << " input " << in_type
                                              << " flags " << flags << " row " << row << " elements [" << x0 << ", "
                                              << x1 << ") os " << os;
                ++compared;
              }
        }
  EXPECT_GT(compared, 0);
}

TEST(HostKernels, ExactRegimeMatchesIndependentAnswerInBothLayouts) {
  const uint64_t seed = 20261130;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const int64_t shapes[][4] = {{1, 1, 2, 1}, {3, 5, 34, 2}, {129, 7, 80, 3}, {17, 1, 256, 2}, {2, 130, 18, 1}};
  for (const auto& s : shapes) {
    for (const char* name : {"host_gemm_fp32", "host_gemm_fp32_e4m3"}) {
      const bool signed_scales = std::string(name).find("e4m3") != std::string::npos;
      SmallProblem t = random_problem(rng, NVFP4_OP_GEMM, s[0], s[1], s[2], s[3]);
      for (float alpha : {1.0f, 0.25f, -2.0f}) {
        t.alpha = alpha;
        const std::vector<uint16_t> expect = exact_answer(t, signed_scales);
        for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED}) {
          const std::vector<uint16_t> got = run(builtin(name), t, layout);
          for (size_t e = 0; e < got.size(); ++e) {
            // +0 and -0 are equal (SPEC section 3).
            if ((got[e] | expect[e]) == 0x8000) continue;
            ASSERT_EQ(got[e], expect[e]) << name << " m" << t.m << " n" << t.n << " k" << t.k << " l" << t.l
                                         << " alpha " << alpha << " layout " << layout << " element " << e;
          }
        }
      }
    }
  }
}

TEST(HostKernels, GemvKernelAgreesWithGemmKernelOnGemv) {
  std::mt19937_64 rng(7);
  const SmallProblem t = random_problem(rng, NVFP4_OP_GEMV, 45, 1, 98, 3);
  for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED})
    EXPECT_EQ(run(builtin("host_gemv_fp32"), t, layout), run(builtin("host_gemm_fp32"), t, layout));
}

TEST(HostKernels, SignBitOfScaleIgnoredByUe4m3HonouredByE4m3) {
  std::mt19937_64 rng(11);
  SmallProblem t = random_problem(rng, NVFP4_OP_GEMM, 4, 4, 32, 1);
  for (auto& s : t.sfa) s = 0x38;
  for (auto& s : t.sfb) s = 0x38;
  SmallProblem neg = t;
  for (auto& s : neg.sfa) s = 0xB8;  // -1.0 under e4m3
  EXPECT_EQ(run(builtin("host_gemm_fp32"), t, NVFP4_SF_LINEAR), run(builtin("host_gemm_fp32"), neg, NVFP4_SF_LINEAR));
  const auto pos = run(builtin("host_gemm_fp32_e4m3"), t, NVFP4_SF_LINEAR);
  const auto flipped = run(builtin("host_gemm_fp32_e4m3"), neg, NVFP4_SF_LINEAR);
  for (size_t e = 0; e < pos.size(); ++e)
    if (pos[e] & 0x7FFF) {
      EXPECT_EQ(flipped[e], pos[e] ^ 0x8000) << e;
    }
}

TEST(HostKernels, NaNScaleOfAUsedBlockGivesNaNEvenWhenItsDataIsZero) {
  SmallProblem t;
  t.m = 2, t.n = 2, t.k = 32, t.l = 1;
  t.a.assign(t.m * t.k / 2, 0x22);  // all 1.0
  t.b.assign(t.n * t.k / 2, 0x22);
  t.sfa.assign(t.m * t.kb(), 0x38);
  t.sfb.assign(t.n * t.kb(), 0x38);
  std::fill(t.a.begin(), t.a.begin() + 8, 0);  // row 0, block 0: all zeros
  t.sfa[0] = 0x7F;                              // ... with a NaN scale
  for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED}) {
    const auto c = run(builtin("host_gemm_fp32"), t, layout);
    EXPECT_TRUE(is_nan16(c[0]) && is_nan16(c[1])) << "row 0 uses the NaN scale";
    EXPECT_EQ(c[2], 0x5000) << "row 1: 32 * 1 * 1 = 32";
    EXPECT_EQ(c[3], 0x5000);
  }
}

TEST(HostKernels, OverflowGivesInfinityOfTheRightSign) {
  SmallProblem t;
  t.m = 1, t.n = 2, t.k = 16, t.l = 1;
  t.a.assign(8, 0x77);  // 6.0
  t.b = {0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  t.sfa.assign(1, 0x7E);  // 448
  t.sfb.assign(2, 0x7E);
  const auto c = run(builtin("host_gemm_fp32"), t, NVFP4_SF_LINEAR);
  EXPECT_EQ(c[0], 0x7C00);
  EXPECT_EQ(c[1], 0xFC00);
}

// Every way a problem can lie outside a host kernel's info: NVFP4_UNSUPPORTED and C untouched.
TEST(HostKernels, RefuseProblemsOutsideTheirInfoTouchingNothing) {
  std::mt19937_64 rng(3);
  const SmallProblem base = random_problem(rng, NVFP4_OP_GEMM, 3, 5, 34, 2);
  std::vector<uint8_t> sfa = base.sfa, sfb = base.sfb;
  std::vector<uint16_t> c(base.l * base.m * base.n, 0x1234);
  auto make = [&] {
    SmallProblem unit = base;
    unit.alpha = 1.0f;
    return unit.abi(base.a.data(), base.b.data(), sfa.data(), sfb.data(), NVFP4_SF_LINEAR, c.data());
  };
  struct Bad {
    const char* what;
    void (*mutate)(nvfp4_problem&);
  };
  const Bad bad[] = {
      {"op 0", [](nvfp4_problem& p) { p.op = 0; }},
      {"op 3", [](nvfp4_problem& p) { p.op = 3; }},
      {"gemv with n != 1", [](nvfp4_problem& p) { p.op = NVFP4_OP_GEMV; }},
      {"layout 0", [](nvfp4_problem& p) { p.sf_layout = 0; }},
      {"layout 3", [](nvfp4_problem& p) { p.sf_layout = 3; }},
      {"k odd", [](nvfp4_problem& p) { p.k = 33; }},
      {"k 0", [](nvfp4_problem& p) { p.k = 0; }},
      {"m 0", [](nvfp4_problem& p) { p.m = 0; }},
      {"n negative", [](nvfp4_problem& p) { p.n = -1; }},
      {"l 0", [](nvfp4_problem& p) { p.l = 0; }},
      {"huge shape", [](nvfp4_problem& p) { p.m = int64_t{1} << 50; }},
      {"null a", [](nvfp4_problem& p) { p.a = nullptr; }},
      {"null b", [](nvfp4_problem& p) { p.b = nullptr; }},
      {"null sfa", [](nvfp4_problem& p) { p.sfa = nullptr; }},
      {"null sfb", [](nvfp4_problem& p) { p.sfb = nullptr; }},
  };
  for (const char* name : {"host_gemm_fp32", "host_gemm_fp32_e4m3", "host_gemv_fp32"}) {
    const Kernel& k = builtin(name);
    EXPECT_EQ(k.run_fn(k.index, nullptr), NVFP4_UNSUPPORTED) << name << ": null problem";
    nvfp4_problem no_c = make();
    no_c.c = nullptr;
    EXPECT_EQ(k.run(no_c), NVFP4_UNSUPPORTED) << name << ": null c";
    for (const Bad& b : bad) {
      nvfp4_problem p = make();
      b.mutate(p);
      EXPECT_EQ(k.run(p), NVFP4_UNSUPPORTED) << name << ": " << b.what;
      for (uint16_t v : c) ASSERT_EQ(v, 0x1234) << name << " wrote C on " << b.what;
    }
  }
  // host_gemv_fp32 declares GEMV only: a GEMM problem (n = 5) is outside it.
  nvfp4_problem gemm = make();
  EXPECT_EQ(builtin("host_gemv_fp32").run(gemm), NVFP4_UNSUPPORTED);
  // ... and the valid problem is accepted by the GEMM kernels.
  EXPECT_EQ(builtin("host_gemm_fp32").run(gemm), NVFP4_OK);
}

TEST(ProblemFits, HonoursMultiplesLayoutsAndUnitAlpha) {
  nvfp4_kernel_info info = {NVFP4_ABI_VERSION, "x", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMM,
                            1u << NVFP4_SF_PERMUTED, 0, 128, 8, 64, NVFP4_FLAG_UNIT_ALPHA};
  uint8_t byte = 0;
  uint16_t half = 0;
  nvfp4_problem p{};
  p.op = NVFP4_OP_GEMM;
  p.m = 256, p.n = 16, p.k = 128, p.l = 1;
  p.a = p.b = p.sfa = p.sfb = &byte;
  p.c = &half;
  p.sf_layout = NVFP4_SF_PERMUTED;
  p.alpha = 1.0f;
  EXPECT_TRUE(kern::problem_fits(info, &p));
  nvfp4_problem q = p;
  q.m = 200;
  EXPECT_FALSE(kern::problem_fits(info, &q));
  q = p;
  q.n = 12;
  EXPECT_FALSE(kern::problem_fits(info, &q));
  q = p;
  q.k = 96;
  EXPECT_FALSE(kern::problem_fits(info, &q));
  q = p;
  q.alpha = 2.0f;
  EXPECT_FALSE(kern::problem_fits(info, &q));
  q = p;
  q.sf_layout = NVFP4_SF_LINEAR;
  EXPECT_FALSE(kern::problem_fits(info, &q));
  info.flags = 0;
  q = p;
  q.alpha = 2.0f;
  EXPECT_TRUE(kern::problem_fits(info, &q));
}

}  // namespace
}  // namespace nvfp4
