// Shape and data checks of a Problem (SPEC.md section 2) and the names of its enums.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reference/problem.h"

namespace nvfp4 {
namespace {

Problem shaped(Op op, int64_t m, int64_t n, int64_t k, int64_t l) {
  Problem p;
  p.op = op;
  p.m = m;
  p.n = n;
  p.k = k;
  p.l = l;
  return p;
}

Problem with_data(Problem p) {
  p.a.assign(static_cast<size_t>(p.a_bytes()), 0);
  p.b.assign(static_cast<size_t>(p.b_bytes()), 0);
  p.sfa.assign(static_cast<size_t>(p.sfa_bytes()), 0x38);
  p.sfb.assign(static_cast<size_t>(p.sfb_bytes()), 0x38);
  return p;
}

TEST(Problem, Names) {
  EXPECT_STREQ(to_string(Op::gemv), "gemv");
  EXPECT_STREQ(to_string(Op::gemm), "gemm");
  EXPECT_STREQ(to_string(SfLayout::linear), "linear");
  EXPECT_STREQ(to_string(SfLayout::permuted), "permuted");
  EXPECT_STREQ(to_string(ScaleSemantics::ue4m3), "ue4m3");
  EXPECT_STREQ(to_string(ScaleSemantics::e4m3), "e4m3");
}

TEST(Problem, SizesFollowTheSpecTable) {
  const Problem p = shaped(Op::gemm, 129, 7, 80, 3);
  EXPECT_EQ(p.kb(), 5);
  EXPECT_EQ(p.a_bytes(), 3 * 129 * 40);
  EXPECT_EQ(p.b_bytes(), 3 * 7 * 40);
  EXPECT_EQ(p.sfa_bytes(), 3 * 129 * 5);
  EXPECT_EQ(p.sfb_bytes(), 3 * 7 * 5);
  EXPECT_EQ(p.c_elems(), 3 * 129 * 7);
  EXPECT_EQ(shaped(Op::gemm, 1, 1, 2, 1).kb(), 1);
  EXPECT_EQ(shaped(Op::gemm, 1, 1, 18, 1).kb(), 2);
}

TEST(Problem, ValidShapesPass) {
  EXPECT_EQ(shape_error(shaped(Op::gemm, 1, 1, 2, 1)), "");
  EXPECT_EQ(shape_error(shaped(Op::gemv, 7168, 1, 16384, 1)), "");
  EXPECT_EQ(shape_error(shaped(Op::gemm, 129, 7, 80, 3)), "");
}

TEST(Problem, BadShapesAreNamed) {
  EXPECT_NE(shape_error(shaped(Op::gemm, 0, 1, 2, 1)).find("m = 0"), std::string::npos);
  EXPECT_NE(shape_error(shaped(Op::gemm, 1, -3, 2, 1)).find("n = -3"), std::string::npos);
  EXPECT_NE(shape_error(shaped(Op::gemm, 1, 1, 2, 0)).find("l = 0"), std::string::npos);
  EXPECT_NE(shape_error(shaped(Op::gemm, 1, 1, 3, 1)).find("k = 3"), std::string::npos);
  EXPECT_NE(shape_error(shaped(Op::gemm, 1, 1, 0, 1)).find("k = 0"), std::string::npos);
  EXPECT_NE(shape_error(shaped(Op::gemv, 4, 2, 32, 1)).find("gemv"), std::string::npos);
  Problem bad_op = shaped(Op::gemm, 1, 1, 2, 1);
  bad_op.op = static_cast<Op>(7);
  EXPECT_NE(shape_error(bad_op), "");
}

TEST(Problem, HugeShapesAreRejectedWithoutOverflow) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_NE(shape_error(shaped(Op::gemm, big, 1, 2, 1)).find("2^40"), std::string::npos);
  EXPECT_NE(shape_error(shaped(Op::gemm, 1, 1, big - 1, 1)), "");
  EXPECT_NE(shape_error(shaped(Op::gemm, 1 << 20, 1 << 20, 2, 1)).find("C"), std::string::npos);
  EXPECT_NE(shape_error(shaped(Op::gemm, 1 << 30, 1 << 30, 1 << 30, 1 << 30)), "");
  EXPECT_NE(shape_error(shaped(Op::gemv, int64_t(1) << 21, 1, int64_t(1) << 20, 1)), "");  // 2^41 bytes of A
}

TEST(Problem, DataLengthsAreChecked) {
  Problem p = with_data(shaped(Op::gemm, 3, 2, 34, 2));
  EXPECT_TRUE(p.has_data());
  EXPECT_EQ(problem_error(p), "");
  p.sfb.pop_back();
  EXPECT_FALSE(p.has_data());
  EXPECT_NE(problem_error(p).find("sfb"), std::string::npos);
  p = with_data(shaped(Op::gemm, 3, 2, 34, 2));
  p.a.push_back(0);
  EXPECT_NE(problem_error(p).find("a has"), std::string::npos);
  p = with_data(shaped(Op::gemm, 3, 2, 34, 2));
  p.expect = std::vector<uint32_t>(11);
  EXPECT_NE(problem_error(p).find("expect"), std::string::npos);
  p.expect = std::vector<uint32_t>(12);
  EXPECT_EQ(problem_error(p), "");
  p.alpha = std::numeric_limits<float>::infinity();
  EXPECT_NE(problem_error(p).find("alpha"), std::string::npos);
  p.alpha = NAN;
  EXPECT_NE(problem_error(p).find("alpha"), std::string::npos);
}

}  // namespace
}  // namespace nvfp4
