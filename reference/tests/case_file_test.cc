// Case files: parse(write(p)) == p on random problems, every kind of bad file rejected with the
// right line, and the layout freedoms of the format (comments, spacing, key order) tolerated.
#include "reference/case_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

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
  if (x.note != y.note) return differ("note");
  if (x.seed != y.seed) return differ("seed");
  if (x.generator != y.generator) return differ("generator");
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

Problem random_problem(std::mt19937_64& rng) {
  Problem p;
  p.op = rng() % 2 ? Op::gemm : Op::gemv;
  p.m = 1 + static_cast<int64_t>(rng() % 140);
  p.n = p.op == Op::gemv ? 1 : 1 + static_cast<int64_t>(rng() % 9);
  p.k = 2 * (1 + static_cast<int64_t>(rng() % 70));
  p.l = 1 + static_cast<int64_t>(rng() % 3);
  p.sf_layout = rng() % 2 ? SfLayout::linear : SfLayout::permuted;
  p.semantics = rng() % 2 ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
  p.alpha = random_alpha(rng);
  const bool seeded_only = rng() % 5 == 0;
  if (seeded_only || rng() % 3 == 0) {
    p.seed = rng() >> (rng() % 64);
    if (rng() % 2) p.generator = "uniform/narrow/one";
  }
  if (!seeded_only) {
    p.a = random_bytes(rng, p.a_bytes());
    p.b = random_bytes(rng, p.b_bytes());
    p.sfa = random_bytes(rng, p.sfa_bytes());
    p.sfb = random_bytes(rng, p.sfb_bytes());
  }
  if (rng() % 2) {
    std::vector<uint16_t> expect(static_cast<size_t>(p.c_elems()));
    for (auto& w : expect) w = static_cast<uint16_t>(rng());
    p.expect = expect;
  }
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
  p.expect = std::vector<uint16_t>{0x3c00, 0x7e00};
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
  EXPECT_EQ(p.expect, (std::vector<uint16_t>{0x3c00, 0x0000}));
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
      {"BadOp", replace_line(1, "op = gemmm"), 1, "neither 'gemv' nor 'gemm'"},
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
      {"TooBig", "op = gemm\nm = 65536\nn = 65536\nk = 2\nl = 1\nseed = 1\n", 5, "the limit is 1073741824 bytes"},
      {"TooBigBatch", "op = gemv\nl = 1099511627776\nm = 1\nk = 2\nseed = 1\n", 4, "the limit is"},
      {"DimensionAbsurd", "op = gemv\nm = 18446744073709551615\nk = 2\nl = 1\nseed = 1\n", 2, "m = 18446744073709551615 is too large"},
  };
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
  bad_expect.expect = std::vector<uint16_t>{1, 2};
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

}  // namespace
}  // namespace nvfp4
