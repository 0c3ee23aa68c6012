// The quantizers of SPEC section 2 against computations that share no code with them: the hand
// cases of corpus/quantize/ (expect lines from scripts/make_quantize_cases.py, exact Fraction
// arithmetic), an exhaustive pass over every BF16 value against a formulation in double with
// explicit rounding, and rule 7's judge with the failure text's variant names.
#include "reference/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "reference/case_file.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

std::string hex(const std::vector<uint8_t>& v) {
  static const char d[] = "0123456789abcdef";
  std::string s;
  for (const uint8_t b : v) s += std::string{d[b >> 4], d[b & 15]};
  return s;
}

std::vector<std::string> quantize_corpus() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(NVFP4_SOURCE_DIR) + "/corpus/quantize"))
    if (e.path().extension() == ".case") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(QuantizeCorpus, EveryHandCaseMatchesItsIndependentExpectLines) {
  const std::vector<std::string> files = quantize_corpus();
  ASSERT_GE(files.size(), 80u);
  int recipes_seen[8] = {};
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    const Problem p = read_case_file(f);
    ASSERT_TRUE(p.expect_q && p.expect_sfq);
    const QuantResult r = quantize_reference(p);
    EXPECT_EQ(hex(r.q), hex(*p.expect_q));
    EXPECT_EQ(hex(r.sfq), hex(*p.expect_sfq));
    ++recipes_seen[static_cast<int>(p.recipe)];
    // The reference's own bytes pass rule 7, in the case's layout, padding written 0x00.
    std::vector<uint8_t> sfq = r.sfq;
    if (p.sf_layout == SfLayout::permuted) sfq = sf_to_permuted(r.sfq.data(), p.m, p.qkb(), p.l, 0x00);
    EXPECT_TRUE(judge_quantize(p, r, r.q, sfq, 0x00).pass());
  }
  for (int recipe = 1; recipe <= 7; ++recipe) EXPECT_GE(recipes_seen[recipe], 4) << to_string(static_cast<Recipe>(recipe));
}

}  // namespace
}  // namespace nvfp4
