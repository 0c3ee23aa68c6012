// Case files: parse(write(p)) == p on random problems, every kind of bad file rejected with the
// right line, and the layout freedoms of the format (comments, spacing, key order) tolerated.
#include "reference/case_file.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>  // getpid

namespace nvfp4 {
namespace {

bool same_bits(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// Field-by-field equality, alpha by bits (so -0 and +0 differ, as they do in a file).
::testing::AssertionResult same_problem(const Problem& x, const Problem& y) {
  auto differ = [](const char* what) { return ::testing::AssertionFailure() << what << " differs"; };
  if (x.op != y.op) return differ("op");
  if (x.m != y.m || x.n != y.n || x.k != y.k || x.l != y.l) return differ("shape");
  if (x.sf_layout != y.sf_layout) return differ("sf_layout");
  if (x.semantics != y.semantics) return differ("scale_semantics");
  if (!same_bits(x.alpha, y.alpha)) return differ("alpha");
  if (x.a != y.a) return differ("a");
  if (x.b != y.b) return differ("b");
  if (x.sfa != y.sfa) return differ("sfa");
  if (x.sfb != y.sfb) return differ("sfb");
  if (x.expect != y.expect) return differ("expect");
  if (x.out_type != y.out_type) return differ("out_type");
  if (x.b2 != y.b2 || x.sfb2 != y.sfb2) return differ("b2/sfb2");
  if (!same_bits(x.alpha2, y.alpha2)) return differ("alpha2");
  if (x.packed != y.packed) return differ("packed");
  if (x.groups.size() != y.groups.size()) return differ("groups");
  for (size_t g = 0; g < x.groups.size(); ++g) {
    const Group &a = x.groups[g], &b = y.groups[g];
    if (a.m != b.m || a.n != b.n || a.k != b.k || !same_bits(a.alpha, b.alpha)) return differ("a group's shape or alpha");
    if (a.a != b.a || a.b != b.b || a.sfa != b.sfa || a.sfb != b.sfb) return differ("a group's data");
    if (a.expect != b.expect) return differ("a group's expect");
  }
  if (x.note != y.note) return differ("note");
  if (x.seed != y.seed) return differ("seed");
  if (x.generator != y.generator) return differ("generator");
  if (x.in_type != y.in_type || x.q_format != y.q_format || x.recipe != y.recipe) return differ("in_type/format/recipe");
  if (x.quant_2d != y.quant_2d || x.row_global_scale != y.row_global_scale) return differ("quant_2d/row_global_scale");
  if (x.stochastic_seed != y.stochastic_seed) return differ("stochastic_seed");
  if (x.x != y.x) return differ("x");
  if (x.expect_q != y.expect_q || x.expect_sfq != y.expect_sfq) return differ("expect_q/expect_sfq");
  return ::testing::AssertionSuccess();
}

std::vector<uint8_t> random_bytes(std::mt19937_64& rng, int64_t n) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Any finite float, from its bits: subnormals, -0 and the largest values included.
float random_alpha(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: return 1.0f;
    case 1: return std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    default: {
      float f;
      do {
        const uint32_t bits = static_cast<uint32_t>(rng());
        std::memcpy(&f, &bits, sizeof f);
      } while (!std::isfinite(f));
      return f;
    }
  }
}

std::string random_note(std::mt19937_64& rng) {
  // Printable text with the characters a note cannot hold ('#', newline, tab, CR) mixed in.
  static const char kChars[] = "abc XYZ 019 = # \n\t\r ~!,.;";
  std::string s;
  const int len = static_cast<int>(rng() % 30);
  for (int i = 0; i < len; ++i) s += kChars[rng() % (sizeof kChars - 1)];
  if (rng() % 4 == 0) s += " \xC3\xA9t\xC3\xA9 \xE2\x9C\x93";  // UTF-8 passes through
  return s;
}

std::vector<uint32_t> random_words(std::mt19937_64& rng, OutType t, int64_t n) {
  std::vector<uint32_t> words(static_cast<size_t>(n));
  for (auto& w : words) w = out_word_bytes(t) == 4 ? static_cast<uint32_t>(rng()) : static_cast<uint16_t>(rng());
  return words;
}

// A grouped problem: up to 6 groups, some empty, per-group or shared n and k, packed or not.
Problem random_grouped(std::mt19937_64& rng) {
  Problem p;
  p.op = Op::grouped_gemm;
  p.out_type = static_cast<OutType>(1 + rng() % 3);
  p.packed = rng() % 2;
  const size_t count = 1 + rng() % 6;
  const int64_t n = 1 + static_cast<int64_t>(rng() % 9), k = 2 * (1 + static_cast<int64_t>(rng() % 40));
  p.groups.resize(count);
  for (Group& g : p.groups) {
    g.m = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 140);
    g.n = p.packed || rng() % 2 ? n : 1 + static_cast<int64_t>(rng() % 9);
    g.k = p.packed || rng() % 2 ? k : 2 * (1 + static_cast<int64_t>(rng() % 40));
    g.alpha = rng() % 2 ? 1.0f : random_alpha(rng);
    if (g.m == 0) continue;
    g.a = random_bytes(rng, g.a_bytes(BlockFormat::nvfp4));
    g.b = random_bytes(rng, g.b_bytes(BlockFormat::nvfp4));
    g.sfa = random_bytes(rng, g.sfa_bytes(BlockFormat::nvfp4));
    g.sfb = random_bytes(rng, g.sfb_bytes(BlockFormat::nvfp4));
    if (rng() % 2) g.expect = random_words(rng, p.out_type, g.c_elems());
  }
  p.sf_layout = rng() % 2 ? SfLayout::linear : SfLayout::permuted;
  if (rng() % 4 == 0) p.seed = rng();
  p.note = random_note(rng);
  return p;
}

Problem random_problem(std::mt19937_64& rng) {
  if (rng() % 4 == 0) return random_grouped(rng);
  Problem p;
  const bool dual = rng() % 3 == 0;
  p.op = dual ? Op::dual_gemm : rng() % 2 ? Op::gemm : Op::gemv;
  p.out_type = rng() % 2 ? OutType::fp16 : static_cast<OutType>(1 + rng() % 3);
  p.m = 1 + static_cast<int64_t>(rng() % 140);
  p.n = p.op == Op::gemv ? 1 : 1 + static_cast<int64_t>(rng() % 9);
  p.k = 2 * (1 + static_cast<int64_t>(rng() % 70));
  p.l = 1 + static_cast<int64_t>(rng() % 3);
  p.sf_layout = rng() % 2 ? SfLayout::linear : SfLayout::permuted;
  p.semantics = rng() % 2 ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
  p.alpha = random_alpha(rng);
  if (dual) p.alpha2 = random_alpha(rng);
  const bool seeded_only = !dual && rng() % 5 == 0;
  if (seeded_only || rng() % 3 == 0) {
    p.seed = rng() >> (rng() % 64);
    if (rng() % 2) p.generator = "uniform/narrow/one";
  }
  if (!seeded_only) {
    p.a = random_bytes(rng, p.a_bytes());
    p.b = random_bytes(rng, p.b_bytes());
    p.sfa = random_bytes(rng, p.sfa_bytes());
    p.sfb = random_bytes(rng, p.sfb_bytes());
    p.b2 = random_bytes(rng, p.b2_bytes());
    p.sfb2 = random_bytes(rng, p.sfb2_bytes());
  }
  if (rng() % 2) p.expect = random_words(rng, p.out_type, p.c_elems());
  p.note = random_note(rng);
  return p;
}

TEST(CaseFile, RoundTripsRandomProblems) {
  const uint64_t seed = 20261130;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 2000; ++iter) {
    Problem p = random_problem(rng);
    const std::string text = write_case(p);
    Problem expected = p;
    expected.note = sanitize_note(p.note);
    Problem back;
    ASSERT_NO_THROW(back = parse_case(text, "roundtrip.case")) << "iteration " << iter << "\n" << text;
    ASSERT_TRUE(same_problem(back, expected)) << "iteration " << iter << "\n" << text;
    // Writing is canonical: the text of the parsed problem is the same text.
    ASSERT_EQ(write_case(back), text) << "iteration " << iter;
  }
}

TEST(CaseFile, WritesAlphaInTheFewestDigitsThatRoundTrip) {
  Problem p;
  p.seed = 1;
  const std::pair<float, const char*> cases[] = {
      {1.0f, "alpha = 1\n"}, {0.1f, "alpha = 0.1\n"}, {-0.0f, "alpha = -0\n"},
      {1.0f / 3.0f, "alpha = 0.33333334\n"}, {1e-45f, "alpha = 1e-45\n"},
      {3.40282347e38f, "alpha = 3.4028235e+38\n"}};
  for (const auto& [alpha, line] : cases) {
    p.alpha = alpha;
    const std::string text = write_case(p);
    EXPECT_NE(text.find(line), std::string::npos) << text;
    EXPECT_TRUE(same_bits(parse_case(text, "x").alpha, alpha)) << line;
  }
}

TEST(CaseFile, WritesTheHeaderAndOneLinePerTensor) {
  Problem p;
  p.m = 2, p.n = 1, p.k = 4, p.l = 1;
  p.a = {0x12, 0x34, 0xab, 0xcd};
  p.b = {0x01, 0x02};
  p.sfa = {0x38, 0x7f};
  p.sfb = {0x00};
  p.expect = std::vector<uint32_t>{0x3c00, 0x7e00};
  p.note = "line one\nline # two";
  EXPECT_EQ(write_case(p),
            "# nvfp4check case v1\nop = gemm\nm = 2\nn = 1\nk = 4\nl = 1\nsf_layout = permuted\n"
            "scale_semantics = ue4m3\nalpha = 1\nnote = line one line   two\na = 1234abcd\n"
            "b = 0102\nsfa = 387f\nsfb = 00\nexpect = 3c00 7e00\n");
}

// The example of SPEC.md section 4 with real data, odd spacing, tabs, CRLF and comments.
TEST(CaseFile, ToleratesCommentsSpacingAndKeyOrder) {
  const std::string text =
      "\xEF\xBB\xBF# nvfp4check case v1\r\n"
      "\n"
      "   # a comment line, then keys in no particular order\n"
      "expect=3c00 0000   # two outputs\n"
      "  op   =   gemv\t# gemv | gemm\n"
      "m=2\n"
      "\t\tk =\t4   \r\n"
      "l = 1#no space before the comment\n"
      "sf_layout = linear\n"
      "scale_semantics = e4m3\n"
      "alpha = 0x1.8p1   # C99 hex float: 3\n"
      "a = 12 34\tab cd\n"
      "b = 0102\n"
      "sfa = 38 38\n"
      "sfb = B8\n"
      "note =   spaces   inside are kept = and so is this   \n"
      "\n";
  const Problem p = parse_case(text, "spacing.case");
  EXPECT_EQ(p.op, Op::gemv);
  EXPECT_EQ(p.m, 2);
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.k, 4);
  EXPECT_EQ(p.l, 1);
  EXPECT_EQ(p.sf_layout, SfLayout::linear);
  EXPECT_EQ(p.semantics, ScaleSemantics::e4m3);
  EXPECT_EQ(p.alpha, 3.0f);
  EXPECT_EQ(p.a, (std::vector<uint8_t>{0x12, 0x34, 0xab, 0xcd}));
  EXPECT_EQ(p.sfb, (std::vector<uint8_t>{0xb8}));
  EXPECT_EQ(p.expect, (std::vector<uint32_t>{0x3c00, 0x0000}));
  EXPECT_EQ(p.note, "spaces   inside are kept = and so is this");
  EXPECT_FALSE(p.seed.has_value());
}

TEST(CaseFile, DefaultsAndSeededCases) {
  const Problem p = parse_case("op = gemm\nm = 3\nn = 5\nk = 34\nl = 2\nseed = 18446744073709551615\n"
                               "generator = edge/full/pow2\n", "seeded.case");
  EXPECT_EQ(p.sf_layout, SfLayout::permuted);
  EXPECT_EQ(p.semantics, ScaleSemantics::ue4m3);
  EXPECT_EQ(p.alpha, 1.0f);
  ASSERT_TRUE(p.seed.has_value());
  EXPECT_EQ(*p.seed, 18446744073709551615ull);
  EXPECT_EQ(p.generator, "edge/full/pow2");
  EXPECT_TRUE(p.a.empty() && p.b.empty() && p.sfa.empty() && p.sfb.empty());
  EXPECT_EQ(p.kb(), 3);
}

TEST(CaseFile, AlphaRoundsOnceToTheNearestFloat) {
  auto alpha = [](const std::string& v) {
    return parse_case("op = gemv\nm = 1\nk = 2\nl = 1\nseed = 1\nalpha = " + v + "\n", "alpha.case").alpha;
  };
  EXPECT_EQ(alpha("0.1"), 0.1f);
  EXPECT_EQ(alpha("-2.5e-3"), -2.5e-3f);
  EXPECT_EQ(alpha("0x1p-149"), std::ldexp(1.0f, -149));
  EXPECT_TRUE(same_bits(alpha("-0"), -0.0f));
  EXPECT_EQ(alpha("0"), 0.0f);
  EXPECT_EQ(alpha("1e-45"), std::ldexp(1.0f, -149));  // rounds to the smallest subnormal
  // Halfway between 1 and the next float: ties to even (1), which a round via double also gives;
  // just above halfway must round up, which a double rounding would miss.
  EXPECT_EQ(alpha("1.000000059604644775390625"), 1.0f);
  EXPECT_EQ(alpha("1.00000005960464477539062500000000001"), std::nextafter(1.0f, 2.0f));
}

struct BadCase {
  const char* name;
  std::string text;
  int line;
  const char* says;  // a piece of the message
};

// A valid gemm case, 2x1x4 with one batch; each bad case below breaks it in one way.
const char* const kValid =
    "op = gemm\n"         // 1
    "m = 2\n"             // 2
    "n = 1\n"             // 3
    "k = 4\n"             // 4
    "l = 1\n"             // 5
    "a = 00112233\n"      // 6
    "b = 4455\n"          // 7
    "sfa = 3838\n"        // 8
    "sfb = 38\n";         // 9

std::string replace_line(int line, const std::string& with) {
  std::string text = kValid, out;
  int n = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    ++n;
    out += (n == line ? with : text.substr(pos, eol - pos)) + "\n";
    pos = eol + 1;
  }
  return out;
}

std::vector<BadCase> bad_cases() {
  const std::string v = kValid;
  return {
      {"UnknownKey", v + "colour = red\n", 10, "unknown key 'colour'"},
      {"KeyCase", replace_line(2, "M = 2"), 2, "unknown key 'M'"},
      {"DuplicateKey", v + "# again\nk = 4\n", 11, "duplicate key 'k' (first given on line 4)"},
      {"NoEquals", replace_line(3, "n 1"), 3, "expected 'key = value'"},
      {"NoKey", replace_line(3, " = 1"), 3, "missing key"},
      {"MissingOp", replace_line(1, "# op = gemm"), 9, "missing required key 'op'"},
      {"MissingK", replace_line(4, ""), 9, "missing required key 'k'"},
      {"MissingNForGemm", replace_line(3, "# n = 1"), 9, "missing required key 'n'"},
      {"EmptyFile", "", 0, "missing required key 'op'"},
      {"OnlyComments", "# nothing\n\n# here\n", 3, "missing required key 'op'"},
      {"BadOp", replace_line(1, "op = gemmm"), 1, "is not one of 'gemv', 'gemm'"},
      {"NotANumber", replace_line(2, "m = 2x"), 2, "m: '2x' is not a decimal integer"},
      {"NegativeNumber", replace_line(2, "m = -2"), 2, "not a decimal integer"},
      {"HexNumber", replace_line(5, "l = 0x1"), 5, "not a decimal integer"},
      {"SpaceInNumber", replace_line(2, "m = 1 2"), 2, "not a decimal integer"},
      {"EmptyNumber", replace_line(5, "l ="), 5, "l: missing value"},
      {"ZeroDim", replace_line(3, "n = 0"), 3, "n must be at least 1"},
      {"HugeNumber", replace_line(2, "m = 99999999999999999999999"), 2, "too large"},
      {"OddK", replace_line(4, "k = 5"), 4, "k must be even"},
      {"ZeroK", replace_line(4, "k = 0"), 4, "k must be at least 2, got 0"},
      {"ShortA", replace_line(6, "a = 001122"), 6, "a: 3 bytes, expected l*m*k/2 = 4"},
      {"LongB", replace_line(7, "b = 445566"), 7, "b: more than 2 bytes"},
      {"NonHexData", replace_line(8, "sfa = 38zz"), 8, "sfa: byte 1 'zz' is not two hex digits"},
      {"SplitByte", replace_line(8, "sfa = 3 838"), 8, "sfa: byte 0"},
      {"OddDigits", replace_line(9, "sfb = 380"), 9, "sfb: byte 1"},
      {"PartialData", replace_line(7, "# b = 4455"), 9, "data given for a, sfa, sfb but not for b"},
      {"GemvWithTwoColumns", "op = gemv\nm = 2\nn = 2\nk = 4\nl = 1\nseed = 1\n", 3, "n must be 1 for gemv, got 2"},
      {"NoDataNoSeed", "op = gemv\nm = 2\nk = 4\nl = 1\n", 4, "no data"},
      {"GeneratorWithoutSeed", v + "generator = uniform/narrow/one\n", 10, "generator given without seed"},
      {"GeneratorWithSpace", v + "seed = 1\ngenerator = a b\n", 11, "contains a space"},
      {"BadSeed", v + "seed = -1\n", 10, "seed: '-1' is not a decimal integer"},
      {"ExpectShort", v + "expect = 3c00\n", 10, "expect: 1 words, expected l*m*n = 2"},
      {"ExpectLong", v + "expect = 3c00 3c00 3c00\n", 10, "expect: more than 2 words"},
      {"ExpectThreeDigits", v + "expect = 3c00 c00\n", 10, "expect: word 1 'c00'"},
      {"ExpectNotHex", v + "expect = 3c00 3g00\n", 10, "not four hex digits"},
      {"BadLayout", v + "sf_layout = tiled\n", 10, "neither 'linear' nor 'permuted'"},
      {"BadSemantics", v + "scale_semantics = E4M3\n", 10, "neither 'ue4m3' nor 'e4m3'"},
      {"AlphaTrailing", v + "alpha = 1.0f\n", 10, "alpha: '1.0f'"},
      {"AlphaTwoNumbers", v + "alpha = 1 2\n", 10, "alpha"},
      {"AlphaInf", v + "alpha = inf\n", 10, "not a finite"},
      {"AlphaNan", v + "alpha = nan\n", 10, "not a finite"},
      {"AlphaOverflow", v + "alpha = 1e39\n", 10, "out of FP32 range"},
      {"AlphaHexOverflow", v + "alpha = 0x1p128\n", 10, "out of FP32 range"},
      {"AlphaUnderflow", v + "alpha = 1e-50\n", 10, "underflows to 0"},
      {"AlphaEmpty", v + "alpha =\n", 10, "alpha: missing value"},
      {"AlphaDots", v + "alpha = 1..0\n", 10, "alpha"},
      {"NotUtf8", replace_line(3, "n = 1 # caf\xE9"), 3, "not valid UTF-8 (byte 0xE9)"},
      {"OverlongUtf8", v + "note = \xC0\xAF\n", 10, "not valid UTF-8 (byte 0xC0)"},
      {"Surrogate", v + "note = \xED\xA0\x80\n", 10, "not valid UTF-8"},
      {"TruncatedUtf8", v + "note = \xE2\x9C", 10, "not valid UTF-8"},
      {"NulByte", std::string(kValid, 20) + std::string(1, '\0') + "x\n", 3, "NUL byte"},
      {"TooBig", "op = gemm\nm = 65536\nn = 65536\nk = 2\nl = 1\nseed = 1\n", 5, "the limit is 4294967296 bytes"},
      {"TooBigBatch", "op = gemv\nl = 1099511627776\nm = 1\nk = 2\nseed = 1\n", 4, "the limit is"},
      {"DimensionAbsurd", "op = gemv\nm = 18446744073709551615\nk = 2\nl = 1\nseed = 1\n", 2, "m = 18446744073709551615 is too large"},
  };
}

// A valid grouped case: group 1 is empty, group 2 has an expect line.
constexpr const char* kGrouped =
    "op = grouped_gemm\n"     // 1
    "groups = 3\n"            // 2
    "group_m = 2 0 1\n"       // 3
    "group_n = 1\n"           // 4
    "group_k = 2 4 2\n"       // 5
    "group_alpha = 1 2 0.5\n" // 6
    "out_type = bf16\n"       // 7
    "a.0 = 2233\n"            // 8
    "b.0 = 44\n"              // 9
    "sfa.0 = 3838\n"          // 10
    "sfb.0 = 38\n"            // 11
    "a.2 = 22\n"              // 12
    "b.2 = 22\n"              // 13
    "sfa.2 = 38\n"            // 14
    "sfb.2 = 38\n"            // 15
    "expect.2 = 3f80\n";      // 16

// A valid dual GEMM case with FP32 outputs.
constexpr const char* kDual =
    "op = dual_gemm\n"        // 1
    "m = 1\nn = 2\nk = 2\nl = 1\n"  // 2-5
    "out_type = fp32\n"       // 6
    "alpha2 = 0.5\n"          // 7
    "a = 22\n"                // 8
    "b = 2222\n"              // 9
    "b2 = 2222\n"             // 10
    "sfa = 38\n"              // 11
    "sfb = 3838\n"            // 12
    "sfb2 = 3838\n";          // 13

std::string with_line(const std::string& text, int line, const std::string& with) {
  std::string out;
  int n = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    ++n;
    out += (n == line ? with : text.substr(pos, eol - pos)) + "\n";
    pos = eol + 1;
  }
  return out;
}

std::vector<BadCase> bad_new_cases() {
  const std::string g = kGrouped, d = kDual;
  return {
      {"GroupedWithM", g + "m = 2\n", 17, "key 'm' is not used by op = grouped_gemm (give group_m)"},
      {"GroupedWithAlpha", g + "alpha = 2\n", 17, "(give group_alpha)"},
      {"GroupedWithExpect", g + "expect = 3f80\n", 17, "(give expect.G for group G)"},
      {"DataInEmptyGroup", g + "a.1 = 00\n", 17, "a.1: group 1 is empty (m = 0) and has no a"},
      {"ExpectInEmptyGroup", g + "expect.1 =\n", 17, "group 1 is empty"},
      {"GroupIndexTooLarge", g + "sfb.3 = 00\n", 17, "there are only 3 groups"},
      {"GroupKeyLeadingZero", g + "a.02 = 22\n", 17, "unknown key 'a.02'"},
      {"GroupKeyUnknownTensor", g + "c.0 = 22\n", 17, "unknown key 'c.0'"},
      {"GroupMCount", with_line(g, 3, "group_m = 2 0"), 3, "group_m: 2 values for 3 groups (one per group)"},
      {"GroupNCount", with_line(g, 4, "group_n = 1 1"), 4, "group_n: 2 values for 3 groups"},
      {"GroupMNotANumber", with_line(g, 3, "group_m = 2 x 1"), 3, "group_m of group 1: 'x' is not a decimal integer"},
      {"GroupNZero", with_line(g, 4, "group_n = 0"), 4, "group_n of group 0 must be at least 1"},
      {"GroupKOdd", with_line(g, 5, "group_k = 2 3 2"), 5, "group_k of group 1 must be even"},
      {"GroupAlphaBad", with_line(g, 6, "group_alpha = 1 x 1"), 6, "group_alpha of group 1: 'x'"},
      {"GroupAlphaInf", with_line(g, 6, "group_alpha = 1e39"), 6, "out of FP32 range"},
      {"PackedNeedsOneK", g + "packed = true\n", 5, "packed = true needs one n and one k for all groups; group 1"},
      {"PackedBadValue", g + "packed = yes\n", 17, "packed: 'yes' is neither 'true' nor 'false'"},
      {"MissingGroups", with_line(g, 2, "# no groups"), 16, "missing required key 'groups'"},
      {"MissingGroupK", with_line(g, 5, ""), 16, "missing required key 'group_k'"},
      {"ZeroGroups", with_line(g, 2, "groups = 0"), 2, "groups must be at least 1"},
      {"TooManyGroups", with_line(g, 2, "groups = 99999999"), 2, "is more than 1048576"},
      {"GroupedPartialData", with_line(g, 9, "# b.0"), 16, "but not for b.0"},
      {"GroupedShortData", with_line(g, 8, "a.0 = 22"), 8, "a.0: 1 bytes, expected m_g*k_g/2 = 2"},
      {"GroupedExpectWidth", with_line(g, 16, "expect.2 = 3f800000"), 16, "expect.2: word 0 '3f800000' is not four hex digits"},
      {"GroupedExpectCount", with_line(g, 16, "expect.2 = 3f80 3f80"), 16, "expect.2: more than 1 words, expected exactly m_g*n_g = 1"},
      {"GroupedTooBig", "op = grouped_gemm\ngroups = 2\ngroup_m = 65536 1\ngroup_n = 65536\ngroup_k = 2\n", 5,
       "the limit is 4294967296 bytes"},
      {"GroupKeysInGemm", std::string(kValid) + "group_m = 1\n", 10, "key 'group_m' is only for op = grouped_gemm"},
      {"GroupDataInGemm", std::string(kValid) + "a.0 = 22\n", 10, "key 'a.0' is only for op = grouped_gemm"},
      {"PackedInGemm", std::string(kValid) + "packed = true\n", 10, "only for op = grouped_gemm"},
      {"B2InGemm", std::string(kValid) + "b2 = 4455\n", 10, "key 'b2' is only for op = dual_gemm"},
      {"Alpha2InGemm", std::string(kValid) + "alpha2 = 1\n", 10, "key 'alpha2' is only for op = dual_gemm"},
      {"DualMissingB2", with_line(d, 10, "# no b2"), 13, "data given for a, b, sfa, sfb, sfb2 but not for b2"},
      {"DualShortSfb2", with_line(d, 13, "sfb2 = 38"), 13, "sfb2: 1 bytes, expected l*n*ceil(k/16) = 2"},
      {"DualBadAlpha2", with_line(d, 7, "alpha2 = nan"), 7, "alpha2: 'nan' is not a finite"},
      {"GroupedNoDataNoSeed", "op = grouped_gemm\ngroups = 1\ngroup_m = 4\ngroup_n = 2\ngroup_k = 32\n", 5,
       "no data: give a.G, b.G, sfa.G and sfb.G of every non-empty group, or a seed"},
      {"DualNoDataNoSeed", "op = dual_gemm\nm = 4\nn = 2\nk = 32\nl = 1\n", 5,
       "no data: give a, b, b2, sfa, sfb and sfb2, or a seed"},
      {"DualNeedsN", with_line(d, 3, ""), 13, "missing required key 'n' (required for dual_gemm)"},
      {"BadOutType", with_line(d, 6, "out_type = float"), 6, "out_type: 'float' is not one of 'fp16', 'bf16', 'fp32'"},
      {"Fp32ExpectFourDigits", d + "expect = 3c00 3c00\n", 14, "expect: word 0 '3c00' is not eight hex digits"},
      {"Fp32ExpectCount", d + "expect = 3f800000\n", 14, "expect: 1 words, expected l*m*n = 2"},
  };
}

// A grouped or dual case may name a seed instead of its data, like GEMV and GEMM (the harness
// draws the data): it parses with empty data and writes back to the same text.
TEST(CaseFile, SeedOnlyGroupedAndDualCasesRoundTrip) {
  const std::string grouped =
      "op = grouped_gemm\ngroups = 3\ngroup_m = 4 0 129\ngroup_n = 2 2 3\ngroup_k = 32 32 18\nseed = 3\n"
      "generator = uniform/narrow/pow2\n";
  const Problem g = parse_case(grouped, "grouped.case");
  ASSERT_EQ(g.groups.size(), 3u);
  EXPECT_EQ(g.seed, 3u);
  EXPECT_EQ(g.generator, "uniform/narrow/pow2");
  for (const Group& q : g.groups) EXPECT_TRUE(q.a.empty() && q.sfa.empty());
  EXPECT_EQ(write_case(parse_case(write_case(g), "again.case")), write_case(g));
  const Problem d = parse_case("op = dual_gemm\nm = 4\nn = 2\nk = 32\nl = 1\nalpha2 = 0.5\nseed = 3\n", "dual.case");
  EXPECT_EQ(d.seed, 3u);
  EXPECT_TRUE(d.b2.empty());
  EXPECT_EQ(d.alpha2, 0.5f);
  EXPECT_EQ(write_case(parse_case(write_case(d), "again.case")), write_case(d));
}

TEST(CaseFile, ReadsGroupedCases) {
  const Problem p = parse_case(kGrouped, "grouped.case");
  EXPECT_EQ(p.op, Op::grouped_gemm);
  EXPECT_EQ(p.out_type, OutType::bf16);
  ASSERT_EQ(p.groups.size(), 3u);
  EXPECT_EQ(p.groups[0].m, 2);
  EXPECT_EQ(p.groups[1].m, 0);
  EXPECT_EQ(p.groups[1].k, 4);
  EXPECT_EQ(p.groups[1].alpha, 2.0f);
  EXPECT_EQ(p.groups[2].alpha, 0.5f);
  EXPECT_TRUE(p.groups[1].a.empty() && !p.groups[1].expect);
  ASSERT_TRUE(p.groups[2].expect.has_value());
  EXPECT_EQ(*p.groups[2].expect, (std::vector<uint32_t>{0x3f80}));
  EXPECT_FALSE(p.packed);
  EXPECT_EQ(p.c_elems(), 3);
  EXPECT_EQ(problem_error(p), "");
  // Written canonically and read back the same; an empty group writes none of its keys.
  const std::string text = write_case(p);
  EXPECT_EQ(text.find("a.1"), std::string::npos) << text;
  EXPECT_NE(text.find("group_m = 2 0 1\ngroup_n = 1\ngroup_k = 2 4 2\ngroup_alpha = 1 2 0.5\n"), std::string::npos) << text;
  EXPECT_TRUE(same_problem(parse_case(text, "again.case"), p));
  // Every group empty: nothing to give, nothing to compute.
  const Problem none = parse_case("op = grouped_gemm\ngroups = 2\ngroup_m = 0 0\ngroup_n = 3\ngroup_k = 2\npacked = true\n", "none.case");
  EXPECT_TRUE(none.packed);
  EXPECT_EQ(none.c_elems(), 0);
  EXPECT_TRUE(none.has_data());
}

TEST(CaseFile, ReadsDualCases) {
  const Problem p = parse_case(kDual, "dual.case");
  EXPECT_EQ(p.op, Op::dual_gemm);
  EXPECT_EQ(p.out_type, OutType::fp32);
  EXPECT_EQ(p.alpha2, 0.5f);
  EXPECT_EQ(p.b2, (std::vector<uint8_t>{0x22, 0x22}));
  EXPECT_EQ(p.sfb2, (std::vector<uint8_t>{0x38, 0x38}));
  EXPECT_TRUE(p.has_data());
  const std::string text = write_case(p);
  EXPECT_NE(text.find("out_type = fp32\nalpha = 1\nalpha2 = 0.5\n"), std::string::npos) << text;
  EXPECT_TRUE(same_problem(parse_case(text, "again.case"), p));
  Problem with_expect = p;
  with_expect.expect = std::vector<uint32_t>{0x3f800000u, 0xffc00000u};
  EXPECT_NE(write_case(with_expect).find("expect = 3f800000 ffc00000\n"), std::string::npos);
  // An FP16 case writes no out_type line: it reads as it always did.
  EXPECT_EQ(write_case(parse_case(kValid, "v.case")).find("out_type"), std::string::npos);
}

class CaseFileRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(CaseFileRejects, WithFileLineAndReason) {
  const BadCase& c = GetParam();
  try {
    parse_case(c.text, "bad.case");
    FAIL() << "accepted:\n" << c.text;
  } catch (const CaseError& e) {
    const std::string what = e.what();
    const std::string prefix = "bad.case:" + std::to_string(c.line) + ": ";
    EXPECT_EQ(what.rfind(prefix, 0), 0u) << "message: " << what << "\nwanted prefix: " << prefix;
    EXPECT_NE(what.find(c.says), std::string::npos) << "message: " << what << "\nwanted: " << c.says;
  }
}

INSTANTIATE_TEST_SUITE_P(All, CaseFileRejects, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(NewKeys, CaseFileRejects, ::testing::ValuesIn(bad_new_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });


// An op's declared tensor (op_table.h) is written and read from its declaration alone: FP32
// values in the fewest digits that read back, decimal or C99 hex floats on the way in (each
// rounded once), as many as its extent gives. No op of SPEC revision 4 declares one, so to them
// the key is unknown and a tensor is refused.
TEST(CaseFile, DeclaredTensorsAreWrittenAndReadFromTheirDeclaration) {
  const TensorDecl bias{"bias", TensorType::f32, TensorExtent::l_m};
  Problem p = parse_case(replace_line(1, "op = gemv"), "gemv.case");
  p.m = 3, p.l = 2;
  ASSERT_EQ(tensor_elements(p, bias), 6);
  const float values[] = {0.1f, -0.0f, std::ldexp(1.0f, -149), 3.4028235e38f, -2.5f, 65504.0f};
  NamedTensor t{"bias", {}};
  for (const float f : values) {
    const auto* b = reinterpret_cast<const uint8_t*>(&f);
    t.bytes.insert(t.bytes.end(), b, b + 4);
  }
  const std::string text = tensor_text(t);
  EXPECT_EQ(text, "0.1 -0 1e-45 3.4028235e+38 -2.5 65504");
  EXPECT_EQ(parse_tensor_text(bias, text, 6), t);  // -0 and the subnormal by their bits
  // Hex floats round once: just above the tie between 1 and its successor is the successor.
  const NamedTensor hex = parse_tensor_text(bias, "0x1.0000011p0 -0x1p-149", 2);
  float first, second;
  std::memcpy(&first, hex.bytes.data(), 4);
  std::memcpy(&second, hex.bytes.data() + 4, 4);
  EXPECT_EQ(first, std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(second, -std::ldexp(1.0f, -149));
  const auto message = [&](const std::string& value, int64_t count) -> std::string {
    try {
      parse_tensor_text(bias, value, count);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(message("1 2 3", 4), "bias: 3 values, expected l*m = 4");
  EXPECT_EQ(message("1 2 3", 2), "bias: more than 2 values, expected exactly l*m = 2");
  EXPECT_EQ(message("1 inf", 2), "bias value 1: 'inf' is not a finite decimal or hex float");
  EXPECT_EQ(message("1e39", 1), "bias value 0: '1e39' is out of FP32 range");
  // A GEMV declares none: the key is refused (unknown, or another op's), and so is a tensor on
  // the problem.
  try {
    parse_case(replace_line(1, "op = gemv") + "bias = 1\n", "gemv.case");
    ADD_FAILURE() << "bias accepted by gemv";
  } catch (const CaseError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'bias'"), std::string::npos) << e.what();
  }
  Problem with = p;
  with.tensors.push_back(t);
  EXPECT_EQ(tensors_error(with, false), "gemv has 1 declared tensors, expected 0");
  EXPECT_THROW(write_case(with), std::invalid_argument);
}

TEST(CaseFile, GemvAcceptsNOne) {
  const std::string text = replace_line(1, "op = gemv");
  const Problem p = parse_case(text, "gemv.case");
  EXPECT_EQ(p.op, Op::gemv);
  EXPECT_EQ(p.n, 1);
}

TEST(CaseFile, WriteRejectsProblemsNoFileCanHold) {
  Problem p;
  p.seed = 1;
  EXPECT_NO_THROW(write_case(p));
  Problem odd_k = p;
  odd_k.k = 3;
  EXPECT_THROW(write_case(odd_k), std::invalid_argument);
  Problem gemv = p;
  gemv.op = Op::gemv;
  gemv.n = 2;
  EXPECT_THROW(write_case(gemv), std::invalid_argument);
  Problem no_data = p;
  no_data.seed.reset();
  EXPECT_THROW(write_case(no_data), std::invalid_argument);
  Problem short_a = p;
  short_a.a = {1};
  short_a.b = {1};
  short_a.sfa = {1};
  short_a.sfb = {1};
  short_a.a.clear();  // a missing, others present
  EXPECT_THROW(write_case(short_a), std::invalid_argument);
  Problem inf_alpha = p;
  inf_alpha.alpha = INFINITY;
  EXPECT_THROW(write_case(inf_alpha), std::invalid_argument);
  Problem bad_expect = p;
  bad_expect.expect = std::vector<uint32_t>{1, 2};
  EXPECT_THROW(write_case(bad_expect), std::invalid_argument);
}

TEST(CaseFile, FilesRoundTripAndUnreadableFilesSayWhy) {
  const auto dir = std::filesystem::temp_directory_path() / ("case_file_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(7);
  const Problem p = random_problem(rng);
  const std::string path = (dir / "one.case").string();
  write_case_file(p, path);
  Problem expected = p;
  expected.note = sanitize_note(p.note);
  EXPECT_TRUE(same_problem(read_case_file(path), expected));

  const std::string missing = (dir / "missing.case").string();
  try {
    read_case_file(missing);
    FAIL() << "read a missing file";
  } catch (const CaseError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(missing + ":0: cannot open", 0), 0u) << e.what();
  }
  try {
    read_case_file(dir.string());
    FAIL() << "read a directory";
  } catch (const CaseError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_case_file(p, (dir / "no" / "such" / "dir.case").string()), std::runtime_error);
  std::filesystem::remove_all(dir);
}

// A case file whose writing fails part way (a full disk; a file size limit stands in for it, as
// root too) is removed, not left truncated; a device is never removed.
TEST(CaseFile, AWriteThatFailsLeavesNoPartialFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("case_file_partial_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "big.case").string();
  const std::string text(1 << 20, 'x');
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 65536;
  void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    write_case_text(text, path);
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find("error writing case file " + path), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(path)) << "the truncated file is removed";
  if (std::filesystem::exists("/dev/full")) {
    EXPECT_THROW(write_case_text(text, "/dev/full"), std::runtime_error);
    EXPECT_TRUE(std::filesystem::exists("/dev/full"));
  }
  std::filesystem::remove_all(dir);
}

// Inputs are read so that nothing hangs or grows without bound: a FIFO with no writer is refused
// at once, a NUL byte ends the reading where it is, and the limit is checked as bytes come.
TEST(CaseFile, InputsAreReadWithinBounds) {
  const auto dir = std::filesystem::temp_directory_path() / ("case_file_inputs_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "p.case").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    read_case_file(fifo);
    FAIL() << "read a FIFO without a writer";
  } catch (const CaseError& e) {
    EXPECT_NE(std::string(e.what()).find("no writer"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);

  const std::string nul = (dir / "nul.case").string();
  std::ofstream(nul, std::ios::binary) << "op = gemm\nm = 1\n" << std::string(1, '\0') << "\n";
  try {
    read_case_file(nul);
    FAIL() << "read a NUL byte";
  } catch (const CaseError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(nul + ":3: NUL byte", 0), 0u) << e.what();
  }
  const InputLimit tiny{10, "a test input", "for the test"};
  try {
    read_input_file(nul, tiny, false);
    FAIL() << "read past the limit";
  } catch (const CaseError& e) {
    EXPECT_NE(std::string(e.what()).find("larger than 10 bytes, the limit of a test input (for the test)"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(read_input_file(nul, InputLimit{100, "a test input", ""}, false).size(), 18u);
  EXPECT_NE(case_file_limit().why.find(std::to_string(kMaxCaseBytes)), std::string::npos)
      << "the limit says where it comes from";
  std::filesystem::remove_all(dir);
}

// Random bytes and mangled valid files never crash the parser: they parse or throw CaseError.
TEST(CaseFile, GarbageIsRejectedNotCrashedOn) {
  const uint64_t seed = 99;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = write_case(random_problem(rng));
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[pos] = static_cast<char>(rng()); break;
        case 1: text.erase(pos, 1 + rng() % 8); break;
        default: text.insert(pos, 1, "=#\n 0x\xFF"[rng() % 7]); break;
      }
    }
    try {
      const Problem p = parse_case(text, "mangled.case");
      // Whatever parses must be writable and read back the same.
      Problem expected = p;
      expected.note = sanitize_note(p.note);
      ASSERT_TRUE(same_problem(parse_case(write_case(p), "again.case"), expected)) << text;
    } catch (const CaseError& e) {
      ASSERT_EQ(std::string(e.what()).rfind("mangled.case:", 0), 0u) << e.what();
    }
  }
}


// ---- quantize cases (SPEC section 4, revision 4 keys) -----------------------------------------

// A quantize problem of any format, recipe and option the format allows; x or a seed.
Problem random_quantize(std::mt19937_64& rng) {
  Problem p;
  p.op = Op::quantize;
  p.q_format = static_cast<BlockFormat>(1 + rng() % 4);
  p.recipe = p.q_format == BlockFormat::nvfp4 ? static_cast<Recipe>(1 + rng() % 4) : static_cast<Recipe>(5 + rng() % 3);
  p.in_type = static_cast<InType>(1 + rng() % 3);
  p.m = 1 + static_cast<int64_t>(rng() % 40);
  p.k = packs_nibbles(p.q_format) ? 2 * (1 + static_cast<int64_t>(rng() % 50)) : 2 + static_cast<int64_t>(rng() % 100);
  p.l = 1 + static_cast<int64_t>(rng() % 3);
  p.sf_layout = rng() % 2 ? SfLayout::linear : SfLayout::permuted;
  if (p.q_format == BlockFormat::nvfp4) {
    p.quant_2d = rng() % 3 == 0;
    p.row_global_scale = !p.quant_2d && rng() % 2;
    if (rng() % 3 == 0) p.stochastic_seed = rng();
  }
  if (rng() % 4 == 0) p.seed = rng();
  if (!p.seed || rng() % 2) p.x = random_bytes(rng, p.x_bytes());
  if (rng() % 2) p.expect_q = random_bytes(rng, p.q_bytes());
  if (rng() % 2) p.expect_sfq = random_bytes(rng, p.sfq_bytes());
  p.note = random_note(rng);
  return p;
}

TEST(CaseFileQuantize, RoundTripsRandomProblems) {
  std::mt19937_64 rng(20261202);
  for (int iter = 0; iter < 1000; ++iter) {
    const Problem p = random_quantize(rng);
    const std::string text = write_case(p);
    Problem expected = p;
    expected.note = sanitize_note(p.note);
    Problem back;
    ASSERT_NO_THROW(back = parse_case(text, "q.case")) << "iteration " << iter << "\n" << text;
    ASSERT_TRUE(same_problem(back, expected)) << "iteration " << iter << "\n" << text;
    ASSERT_EQ(write_case(back), text) << "iteration " << iter;
  }
}

// The example of SPEC section 4, with the x words' byte order made explicit.
const char* const kQuantize =
    "op = quantize\n"        // 1
    "m = 1\n"                // 2
    "k = 4\n"                // 3
    "l = 1\n"                // 4
    "in_type = bf16\n"       // 5
    "format = nvfp4\n"       // 6
    "recipe = te\n"          // 7
    "quant_2d = false\n"     // 8
    "x = 3f80 c000 0000 8000\n"  // 9
    "expect_q = 0f 80\n"     // 10
    "expect_sfq = 38\n";     // 11

TEST(CaseFileQuantize, ReadsTheKeysAndWordsLittleEndian) {
  const Problem p = parse_case(kQuantize, "q.case");
  EXPECT_EQ(p.op, Op::quantize);
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.in_type, InType::bf16);
  EXPECT_EQ(p.recipe, Recipe::te);
  EXPECT_EQ(p.x, (std::vector<uint8_t>{0x80, 0x3f, 0x00, 0xc0, 0x00, 0x00, 0x00, 0x80}));
  EXPECT_EQ(p.expect_q, (std::vector<uint8_t>{0x0f, 0x80}));
  EXPECT_EQ(p.expect_sfq, (std::vector<uint8_t>{0x38}));
  EXPECT_EQ(problem_error(p), "");
  const Problem f = parse_case(with_line(with_line(kQuantize, 5, "in_type = fp32"), 9, "x = 3f800000 c0000000 00000000 80000000"),
                               "f.case");
  EXPECT_EQ(f.x.size(), 16u);
  EXPECT_EQ(f.x[4 * 3 + 3], 0x80);
  // MXFP8 codes take a byte each: k may be odd.
  const std::string e4 = with_line(with_line(with_line(with_line(kQuantize, 6, "format = mxfp8_e4m3"), 7, "recipe = mx_even"),
                                             3, "k = 3"), 9, "x = 3f80 c000 0000");
  const Problem m = parse_case(with_line(with_line(e4, 10, ""), 11, ""), "m.case");
  EXPECT_EQ(m.k, 3);
  EXPECT_EQ(m.q_bytes(), 3);
}

std::vector<BadCase> bad_quantize_cases() {
  const std::string q = kQuantize;
  return {
      {"QuantizeWithA", q + "a = 00\n", 12, "key 'a' is not used by op = quantize"},
      {"QuantizeWithAlpha", q + "alpha = 2\n", 12, "key 'alpha' is not used by op = quantize"},
      {"QuantizeWithExpect", q + "expect = 3c00\n", 12, "key 'expect' is not used by op = quantize"},
      {"QuantizeWithOutType", q + "out_type = bf16\n", 12, "key 'out_type' is not used by op = quantize"},
      {"QuantizeWithGroups", q + "groups = 2\n", 12, "key 'groups' is not used by op = quantize"},
      {"QuantizeWithB2", q + "b2 = 00\n", 12, "key 'b2' is not used by op = quantize"},
      {"GemmWithX", std::string(kValid) + "x = 3f80\n", 10, "key 'x' is only for op = quantize"},
      {"GemmWithRecipe", std::string(kValid) + "recipe = te\n", 10, "key 'recipe' is only for op = quantize"},
      {"GemmWithExpectQ", std::string(kValid) + "expect_q = 00\n", 10, "key 'expect_q' is only for op = quantize"},
      {"QuantizeUnknownKey", q + "global_scale = 1\n", 12, "unknown key 'global_scale'"},
      {"QuantizeBadInType", with_line(q, 5, "in_type = fp8"), 5, "in_type: 'fp8' is not one of"},
      {"QuantizeBadFormat", with_line(q, 6, "format = nvfp8"), 6, "format: 'nvfp8' is not one of"},
      {"QuantizeBadRecipe", with_line(q, 7, "recipe = rtn"), 7, "recipe: 'rtn' is not one of"},
      {"QuantizeRecipeNotFormats", with_line(q, 7, "recipe = mx_floor"), 7, "recipe mx_floor does not quantize to nvfp4"},
      {"QuantizeMissingRecipe", with_line(q, 7, ""), 11, "missing required key 'recipe'"},
      {"Quantize2dBadValue", with_line(q, 8, "quant_2d = yes"), 8, "quant_2d: 'yes' is neither 'true' nor 'false'"},
      {"Quantize2dWithRowScale", with_line(q, 8, "quant_2d = true") + "row_global_scale = true\n", 12,
       "cannot have one global scale per row"},
      {"QuantizeMx2d", with_line(with_line(with_line(q, 6, "format = mxfp4"), 7, "recipe = mx_rceil"), 8, "quant_2d = true"),
       8, "16 x 16 tiles and per-row global scales are NVFP4's"},
      {"QuantizeMxStochastic",
       with_line(with_line(q, 6, "format = mxfp4"), 7, "recipe = mx_rceil") + "stochastic_seed = 3\n", 12,
       "stochastic rounding is for NVFP4 codes"},
      {"QuantizeNTwo", q + "n = 2\n", 12, "n must be 1 for quantize"},
      {"QuantizeOddKNvfp4", with_line(with_line(q, 3, "k = 3"), 9, "x = 3f80 c000 0000"), 3, "k must be even"},
      {"QuantizeShortX", with_line(q, 9, "x = 3f80 c000 0000"), 9, "x: 3 words, expected l*m*k = 4"},
      {"QuantizeXWordWidth", with_line(q, 9, "x = 3f80 c000 0000 80000000"), 9, "x: word 3 '80000000' is not four hex digits"},
      {"QuantizeFp32XWidth", with_line(q, 5, "in_type = fp32"), 9, "x: word 0 '3f80' is not eight hex digits"},
      {"QuantizeNoX", with_line(q, 9, ""), 11, "no data: give x"},
      {"QuantizeLongExpectQ", with_line(q, 10, "expect_q = 0f 80 00"), 10, "expect_q: more than 2 bytes"},
      {"QuantizeShortExpectSfq", with_line(q, 11, "expect_sfq ="), 11, "expect_sfq: 0 bytes, expected l*m*ceil(k/16) = 1"},
      {"QuantizeHugeShape", with_line(with_line(q, 2, "m = 1000000"), 3, "k = 1000000"), 4, "bytes of tensors (x, q, both scale layouts)"},
  };
}

INSTANTIATE_TEST_SUITE_P(Quantize, CaseFileRejects, ::testing::ValuesIn(bad_quantize_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(CaseFileQuantize, WriteRejectsProblemsNoFileCanHold) {
  Problem p = parse_case(kQuantize, "q.case");
  p.x.pop_back();
  EXPECT_THROW(write_case(p), std::invalid_argument);
  p = parse_case(kQuantize, "q.case");
  p.expect_sfq->push_back(0);
  EXPECT_THROW(write_case(p), std::invalid_argument);
  p = parse_case(kQuantize, "q.case");
  p.x.clear();
  EXPECT_THROW(write_case(p), std::invalid_argument);  // neither data nor a seed
  p.seed = 5;
  EXPECT_NO_THROW(write_case(p));
}

}  // namespace
}  // namespace nvfp4
