// nan_scale_hint on hand-built problems: for each NaN cause (an NVFP4 E4M3 NaN scale, E8M0's 0xFF,
// NaN elements, E5M2 Inf elements times zero or of both signs, Inf times alpha = 0) a kernel
// output made with one usual misdecoding must be named as that misdecoding, checked by the value
// it gives; mixed NVFP4/MX operands must read each operand's own blocks.
#include "harness/judge/nan_scale_hint.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference/exact_gemm.h"
#include "reference/oracle.h"

namespace nvfp4 {
namespace {

// Codes of small values: E2M1 nibbles, E4M3 and E5M2 bytes, scale bytes.
constexpr uint8_t kE2m1One = 0x2, kE2m1OneHalf = 0x3;
constexpr uint8_t kE4m3One = 0x38, kE4m3Two = 0x40;
constexpr uint8_t kE5m2One = 0x3C;
constexpr uint8_t kE8m0One = 0x7F, kE8m0Two = 0x80, kE8m0Half = 0x7E, kE8m0Nan = 0xFF;

uint8_t unit_scale(BlockFormat f) { return f == BlockFormat::nvfp4 ? kE4m3One : kE8m0One; }

// A 1x1 GEMV of k elements, all zero, every scale 1.
Problem gemv(BlockFormat fa, BlockFormat fb, int64_t k, OutType out = OutType::fp32) {
  Problem p;
  p.op = Op::gemv;
  p.m = p.n = p.l = 1;
  p.k = k;
  p.sf_layout = SfLayout::linear;
  p.out_type = out;
  p.a_format = fa, p.b_format = fb;
  p.a.assign(static_cast<size_t>(operand_row_bytes(fa, k)), 0);
  p.b.assign(static_cast<size_t>(operand_row_bytes(fb, k)), 0);
  p.sfa.assign(static_cast<size_t>(p.kb()), unit_scale(fa));
  p.sfb.assign(static_cast<size_t>(p.kb_b()), unit_scale(fb));
  return p;
}

// Element x of a row of format f set to code (a nibble for E2M1).
void put(std::vector<uint8_t>& row, BlockFormat f, int64_t x, uint8_t code) {
  if (!packs_nibbles(f)) {
    row[static_cast<size_t>(x)] = code;
    return;
  }
  uint8_t& byte = row[static_cast<size_t>(x / 2)];
  byte = static_cast<uint8_t>((x & 1) ? (byte & 0x0F) | (code << 4) : (byte & 0xF0) | code);
}

uint32_t word(OutType t, double v) {
  if (t == OutType::fp16) return std::isinf(v) ? (v < 0 ? 0xFC00u : 0x7C00u) : 0xFFFFFFFFu;  // only Inf needed
  const float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// The hint for a kernel that wrote `value` into every output (all of which the reference makes NaN).
std::string hint(const Problem& p, double value) {
  const ExactResult ref = exact_gemm(p);
  const std::vector<uint32_t> c(static_cast<size_t>(p.c_elems()), word(p.out_type, value));
  const OracleSummary s = judge_words(p, ref, c.data(), Policy::parse("fp32"));
  EXPECT_TRUE(s.any_failure()) << "the reference does not make the output NaN";
  return nan_scale_hint(p, s);
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << "hint: " << (text)

// E4M3 A x E2M1 B, k = 64: rest (block 0) = 1 * 1 * 1 * 2 = 2, block 1 (SFA's 0xFF) weighs
// 2 * 1.5 * 0.5 = 1.5, so the output is 2 + 1.5 v for the value v used for the NaN scale.
Problem e8m0_nan_scale_problem(OutType out) {
  Problem p = gemv(BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4, 64, out);
  put(p.a, p.a_format, 0, kE4m3One);
  put(p.b, p.b_format, 0, kE2m1One);
  put(p.a, p.a_format, 40, kE4m3Two);
  put(p.b, p.b_format, 40, kE2m1OneHalf);
  p.sfa = {kE8m0One, kE8m0Nan};
  p.sfb = {kE8m0Two, kE8m0Half};
  return p;
}

TEST(NanScaleHintMx, NamesTheE8m0NanScaleAndEachUsualMisdecoding) {
  const Problem p = e8m0_nan_scale_problem(OutType::fp32);
  const std::string cause = "NaN is due because scale byte sfa[b=0, row 0, block 1] is 0xFF, E8M0's NaN";
  const struct { double output; const char* used; } cases[] = {
      {2 + 1.5, "; the kernel apparently used 1 for it (1, as if the scale were missing)"},
      {2, "; the kernel apparently used 0 for it (0, as a flushing decode gives)"},
      {2 + 1.5 * std::ldexp(1.0, 127), "; the kernel apparently used 2^127 for it (the largest E8M0 scale"},
      {HUGE_VAL, "; the kernel apparently used 2^128 for it (the byte read as a plain exponent, 2^(255 - 127), "
                 "without its NaN check), which takes the output to Inf"},
      {2 + 1.5 * 3, "; the kernel apparently used about 3 for it (no usual misdecoding of 0xFF gives that)"},
  };
  for (const auto& c : cases) {
    const std::string text = hint(p, c.output);
    EXPECT_EQ(text.rfind(cause, 0), 0u) << text;
    EXPECT_HAS(text, c.used);
  }
}

// FP16's overflow: 2^128 and 2^127 both give Inf there; the plain exponent is named first.
TEST(NanScaleHintMx, AnInfOutputFromAnE8m0NanScaleInFp16) {
  const std::string text = hint(e8m0_nan_scale_problem(OutType::fp16), HUGE_VAL);
  EXPECT_HAS(text, "used 2^128 for it (the byte read as a plain exponent");
  EXPECT_HAS(text, "which takes the output to Inf");
  EXPECT_EQ(hint(e8m0_nan_scale_problem(OutType::fp16), -HUGE_VAL).find("apparently"), std::string::npos)
      << "a -Inf output is no positive scale's doing";
}

// NVFP4 A (blocks of 16, scales 1, 1, 1, 2) against MXFP8 E5M2 B (blocks of 32): SFB's NaN block 1
// covers A's blocks 2 and 3, whose scales differ. Rest 1, weight 1 * 1 + 1 * 2 = 3.
Problem mixed_problem() {
  Problem p = gemv(BlockFormat::nvfp4, BlockFormat::mxfp8_e5m2, 64);
  for (const int64_t x : {0, 32, 48}) {
    put(p.a, p.a_format, x, kE2m1One);
    put(p.b, p.b_format, x, kE5m2One);
  }
  p.sfa = {kE4m3One, kE4m3One, kE4m3One, kE4m3Two};
  return p;
}

TEST(NanScaleHintMx, MixedOperandsReadEachOperandsOwnBlocks) {
  Problem p = mixed_problem();
  p.sfb = {kE8m0One, kE8m0Nan};
  std::string text = hint(p, 1 + 3 * 1);
  EXPECT_HAS(text, "scale byte sfb[b=0, row 0, block 1] is 0xFF, E8M0's NaN; the kernel apparently used 1 for it "
                   "(1, as if the scale were missing)");

  // The NVFP4 operand's E4M3 NaN in a mixed problem: block 3 of SFA weighs 1.
  p = mixed_problem();
  p.sfa[3] = 0x7F;
  text = hint(p, 2 + 480);
  EXPECT_HAS(text, "scale byte sfa[b=0, row 0, block 3] is 0x7F, E4M3's NaN; the kernel apparently used 480 for it "
                   "(the byte read as a normal E4M3 number");
}

TEST(NanScaleHintMx, NamesAnE4m3NanElement) {
  Problem p = gemv(BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e4m3, 32);
  put(p.a, p.a_format, 0, kE4m3One);
  put(p.b, p.b_format, 0, kE4m3One);
  put(p.a, p.a_format, 5, 0xFF);  // -NaN: the sign carries into the value read
  put(p.b, p.b_format, 5, kE4m3One);
  const std::string cause = "NaN is due because element a[b=0, row 0, k 5] is 0xFF, E4M3's NaN";
  std::string text = hint(p, 1 - 448);
  EXPECT_EQ(text.rfind(cause, 0), 0u) << text;
  EXPECT_HAS(text, "used -448 for it (the largest finite E4M3, as a saturating decode gives)");
  text = hint(p, 1 - 480);
  EXPECT_HAS(text, "used -480 for it (the byte read as a normal E4M3 number: exponent field 15, mantissa 7)");
  text = hint(p, 1);
  EXPECT_HAS(text, "used 0 for it (0, as a flushing decode gives)");
}

TEST(NanScaleHintMx, NamesAnE5m2NanElement) {
  Problem p = gemv(BlockFormat::mxfp4, BlockFormat::mxfp8_e5m2, 32);
  put(p.a, p.a_format, 7, kE2m1One);
  put(p.b, p.b_format, 7, 0x7E);
  const std::string cause = "NaN is due because element b[b=0, row 0, k 7] is 0x7E, an E5M2 NaN";
  std::string text = hint(p, 98304);
  EXPECT_EQ(text.rfind(cause, 0), 0u) << text;
  EXPECT_HAS(text, "used 98304 for it (the byte read as a normal E5M2 number: exponent field 31, mantissa 2)");
  text = hint(p, HUGE_VAL);
  EXPECT_HAS(text, "(Inf: the mantissa not looked at, as if it were E5M2's Inf), which takes the output to Inf");
  text = hint(p, 57344);
  EXPECT_HAS(text, "used 57344 for it (the largest finite E5M2, as a saturating decode gives)");
}

TEST(NanScaleHintMx, NamesInfTimesZero) {
  Problem p = gemv(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e4m3, 32);
  put(p.a, p.a_format, 0, kE5m2One);
  put(p.b, p.b_format, 0, kE4m3One);
  put(p.a, p.a_format, 3, 0x7C);  // +Inf times B's zero element 3
  std::string text = hint(p, 1);
  EXPECT_EQ(text.rfind("NaN is due because element a[b=0, row 0, k 3] is 0x7C, E5M2's +Inf, and its product is Inf "
                       "times 0 (element b[b=0, row 0, k 3] is 0x00); the products it enters sum to zero",
                       0),
            0u)
      << text;

  // The zero is an NVFP4 operand's E4M3 scale.
  p = gemv(BlockFormat::mxfp8_e5m2, BlockFormat::nvfp4, 32);
  put(p.a, p.a_format, 20, 0xFC);
  put(p.b, p.b_format, 20, kE2m1One);
  p.sfb[1] = 0x00;
  text = hint(p, 0);
  EXPECT_HAS(text, "element a[b=0, row 0, k 20] is 0xFC, E5M2's -Inf, and its product is Inf times 0 (scale byte "
                   "sfb[b=0, row 0, block 1] is 0x00)");
}

// +Inf * 1 and -Inf * 2 beside a finite 1: the output is 1 + v - 2 v = 1 - v for Inf read as v.
TEST(NanScaleHintMx, NamesInfsOfBothSignsAndTheValueReadForInf) {
  Problem p = gemv(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e4m3, 32);
  put(p.a, p.a_format, 0, 0x7C);
  put(p.b, p.b_format, 0, kE4m3One);
  put(p.a, p.a_format, 1, 0xFC);
  put(p.b, p.b_format, 1, kE4m3Two);
  put(p.a, p.a_format, 2, kE5m2One);
  put(p.b, p.b_format, 2, kE4m3One);
  const std::string cause =
      "NaN is due because the products hold +Inf (element a[b=0, row 0, k 0] is 0x7C, E5M2's +Inf) and -Inf "
      "(element a[b=0, row 0, k 1] is 0xFC, E5M2's -Inf), whose sum is NaN";
  std::string text = hint(p, 1 - 65536);
  EXPECT_EQ(text.rfind(cause, 0), 0u) << text;
  EXPECT_HAS(text, "used 65536 for it (the byte read as a normal E5M2 number: exponent field 31, mantissa 0)");
  text = hint(p, 1 - 57344);
  EXPECT_HAS(text, "used 57344 for it (the largest finite E5M2, as a saturating decode gives)");
}

TEST(NanScaleHintMx, NamesInfTimesAlphaZero) {
  Problem p = gemv(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp4, 32);
  p.alpha = 0;
  put(p.a, p.a_format, 9, 0x7C);
  put(p.b, p.b_format, 9, kE2m1One);
  EXPECT_EQ(hint(p, 0), "NaN is due because element a[b=0, row 0, k 9] is 0x7C, E5M2's +Inf, times alpha = 0");
}

// A grouped problem's group 1, E4M3 rows of k bytes (not k/2): the row and block are group 1's.
TEST(NanScaleHintMx, GroupedProblemsNameTheGroup) {
  Problem p;
  p.op = Op::grouped_gemm;
  p.sf_layout = SfLayout::linear;
  p.out_type = OutType::fp32;
  p.a_format = BlockFormat::mxfp8_e4m3, p.b_format = BlockFormat::mxfp4;
  for (int g = 0; g < 2; ++g) {
    Group gr;
    gr.m = 2, gr.n = 1, gr.k = 32;
    gr.a.assign(static_cast<size_t>(gr.a_bytes(p.a_format)), kE4m3One);
    gr.b.assign(static_cast<size_t>(gr.b_bytes(p.b_format)), kE2m1One | (kE2m1One << 4));
    gr.sfa.assign(static_cast<size_t>(gr.sfa_bytes(p.a_format)), kE8m0One);
    gr.sfb.assign(static_cast<size_t>(gr.sfb_bytes(p.b_format)), kE8m0One);
    p.groups.push_back(gr);
  }
  p.groups[1].sfa[1] = kE8m0Nan;  // row 1 of group 1
  const ExactResult ref = exact_gemm(p);
  std::vector<uint32_t> c(static_cast<size_t>(p.c_elems()), word(OutType::fp32, 32));
  c[3] = word(OutType::fp32, 32);  // group 1 row 1: 32 products of 1, the NaN scale read as 1
  const OracleSummary s = judge_words(p, ref, c.data(), Policy::parse("fp32"));
  ASSERT_TRUE(s.any_failure());
  EXPECT_EQ(nan_scale_hint(p, s), "NaN is due because scale byte sfa[g=1, row 1, block 0] is 0xFF, E8M0's NaN; the "
                                  "kernel apparently used 1 for it (1, as if the scale were missing)");
}

// A dual problem mixes G and U through SiLU: the cause is named, no value.
TEST(NanScaleHintMx, DualProblemsNameTheCauseOnly) {
  Problem p = gemv(BlockFormat::mxfp4, BlockFormat::mxfp8_e4m3, 32);
  p.op = Op::dual_gemm;
  put(p.a, p.a_format, 0, kE2m1One);
  put(p.b, p.b_format, 0, kE4m3One);
  p.b2 = p.b;
  p.sfb2 = p.sfb;
  p.sfb2[0] = kE8m0Nan;
  EXPECT_EQ(hint(p, 1), "NaN is due because scale byte sfb2[b=0, row 0, block 0] is 0xFF, E8M0's NaN");
}

// The NVFP4 path as it was: E4M3's NaN read as 480.
TEST(NanScaleHintNvfp4, NamesTheE4m3NanScaleReadAs480) {
  Problem p = gemv(BlockFormat::nvfp4, BlockFormat::nvfp4, 32);
  put(p.a, p.a_format, 17, kE2m1One);
  put(p.b, p.b_format, 17, kE2m1One);
  p.sfb[1] = 0x7F;
  EXPECT_EQ(hint(p, 480), "NaN is due because scale byte sfb[b=0, row 0, block 1] is 0x7F, E4M3's NaN; the kernel "
                          "apparently used 480 for it (the byte read as a normal E4M3 number: exponent field 15, "
                          "mantissa 7)");
}

}  // namespace
}  // namespace nvfp4
