// Unit tests of the fuzz-input decoder (fuzz_problem.h): what every fuzz target and
// `nvfp4check replay` rely on when they turn bytes into a problem.
#include "fuzz/fuzz_problem.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

namespace nvfp4 {
namespace {

Problem random_problem(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Problem p;
  p.op = pick(0, 1) ? Op::gemm : Op::gemv;
  p.sf_layout = pick(0, 1) ? SfLayout::permuted : SfLayout::linear;
  p.semantics = pick(0, 1) ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
  p.m = pick(1, 40);
  p.n = p.op == Op::gemv ? 1 : pick(1, 20);
  // At most 40 * 20 * 100 * 3 = 240,000 products: under the decoder's cap of 2^18.
  p.k = 2 * pick(1, 50);
  p.l = pick(1, 3);
  const float alphas[] = {1.0f, -1.0f, 0.1f, 3.0e-5f, -7.5f};
  p.alpha = alphas[pick(0, 4)];
  for (auto* v : {&p.a, &p.b, &p.sfa, &p.sfb}) v->clear();
  p.a.resize(p.a_bytes());
  p.b.resize(p.b_bytes());
  p.sfa.resize(p.sfa_bytes());
  p.sfb.resize(p.sfb_bytes());
  for (auto* v : {&p.a, &p.b, &p.sfa, &p.sfb}) {
    for (auto& byte : *v) byte = static_cast<uint8_t>(pick(0, 255));
  }
  return p;
}

void expect_same(const Problem& x, const Problem& y) {
  EXPECT_EQ(x.op, y.op);
  EXPECT_EQ(x.m, y.m);
  EXPECT_EQ(x.n, y.n);
  EXPECT_EQ(x.k, y.k);
  EXPECT_EQ(x.l, y.l);
  EXPECT_EQ(x.sf_layout, y.sf_layout);
  EXPECT_EQ(x.semantics, y.semantics);
  EXPECT_EQ(x.alpha, y.alpha);
  EXPECT_EQ(x.a, y.a);
  EXPECT_EQ(x.b, y.b);
  EXPECT_EQ(x.sfa, y.sfa);
  EXPECT_EQ(x.sfb, y.sfb);
}

TEST(FuzzProblem, EncodeThenDecodeGivesTheProblemBack) {
  const uint64_t seed = 20261130;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 200; ++i) {
    const Problem p = random_problem(rng);
    const std::vector<uint8_t> bytes = encode_fuzz_input(p);
    Problem back;
    ASSERT_TRUE(decode_fuzz_input(bytes.data(), bytes.size(), &back)) << "case " << i;
    expect_same(p, back);
    EXPECT_FALSE(looks_like_case_text(bytes.data(), bytes.size()));
  }
}

TEST(FuzzProblem, EveryDataByteReachesExactlyOneTensorByte) {
  std::mt19937_64 rng(7);
  const Problem p = random_problem(rng);
  std::vector<uint8_t> bytes = encode_fuzz_input(p);
  const size_t header = bytes.size() - p.a.size() - p.b.size() - p.sfa.size() - p.sfb.size();
  for (size_t pos = header; pos < bytes.size(); pos += 7) {
    std::vector<uint8_t> mutated = bytes;
    mutated[pos] ^= 0x5A;
    Problem q;
    ASSERT_TRUE(decode_fuzz_input(mutated.data(), mutated.size(), &q));
    size_t changed = 0;
    for (auto [x, y] : {std::pair{&p.a, &q.a}, {&p.b, &q.b}, {&p.sfa, &q.sfa}, {&p.sfb, &q.sfb}}) {
      for (size_t i = 0; i < x->size(); ++i) changed += (*x)[i] != (*y)[i];
    }
    EXPECT_EQ(changed, 1u) << "input byte " << pos;
  }
}

TEST(FuzzProblem, ShortInputsAreFilledAndEmptyIsTheSmallestGemv) {
  Problem p;
  ASSERT_TRUE(decode_fuzz_input(nullptr, 0, &p));
  EXPECT_EQ(p.op, Op::gemv);
  EXPECT_EQ(p.m, 1);
  EXPECT_EQ(p.k, 2);
  EXPECT_TRUE(p.has_data());
  const uint8_t header[] = {0x03, 200, 0, 9, 0, 40, 0, 0};  // gemm, permuted, m 201, n 10, k 82, l 1
  ASSERT_TRUE(decode_fuzz_input(header, sizeof header, &p));
  EXPECT_EQ(p.m, 201);
  EXPECT_EQ(p.n, 10);
  EXPECT_EQ(p.k, 82);
  EXPECT_EQ(p.l, 1);
  EXPECT_TRUE(p.has_data());
  for (uint8_t s : p.sfa) EXPECT_TRUE(s >= 0x30 && s <= 0x3F) << "filler scales lie in [0.5, 2)";
}

TEST(FuzzProblem, ProblemsOverTheCapAreRejected) {
  const uint8_t big[] = {0x01, 0xFF, 0x00, 0x80, 0x00, 0xFF, 0x01, 0x03};  // 256 x 129 x 1024 x 4
  Problem p;
  EXPECT_FALSE(decode_fuzz_input(big, sizeof big, &p));
  std::string why;
  EXPECT_FALSE(decode_fuzz_case(std::string(big, big + sizeof big), nullptr, &why));
  EXPECT_NE(why.find("caps"), std::string::npos) << why;
}

TEST(FuzzProblem, ProblemsAreFittedToTheKernelUnlessAskedNotTo) {
  nvfp4_kernel_info info{NVFP4_ABI_VERSION, "fitted", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMM,
                         1u << NVFP4_SF_PERMUTED, 0, 128, 8, 64,
                         NVFP4_FLAG_SIGNED_SCALES | NVFP4_FLAG_UNIT_ALPHA};
  // gemv, linear, ue4m3, alpha kind 3 (-1), m 5, k 18.
  uint8_t bytes[] = {0x30, 4, 0, 0, 0, 8, 0, 0};
  FuzzDecodeOptions options;
  options.kernel = &info;
  Problem p;
  ASSERT_TRUE(decode_fuzz_input(bytes, sizeof bytes, options, &p));
  EXPECT_EQ(p.op, Op::gemm);
  EXPECT_EQ(p.sf_layout, SfLayout::permuted);
  EXPECT_EQ(p.semantics, ScaleSemantics::e4m3);
  EXPECT_EQ(p.alpha, 1.0f);
  EXPECT_EQ(p.m, 128);
  EXPECT_EQ(p.n, 8);
  EXPECT_EQ(p.k, 64);
  bytes[0] |= 0x08;  // keep the problem as the bytes say: the runner checks NVFP4_UNSUPPORTED
  ASSERT_TRUE(decode_fuzz_input(bytes, sizeof bytes, options, &p));
  EXPECT_EQ(p.op, Op::gemv);
  EXPECT_EQ(p.m, 5);
  EXPECT_EQ(p.k, 18);
  EXPECT_EQ(p.alpha, -1.0f);
  EXPECT_EQ(p.semantics, ScaleSemantics::e4m3) << "semantics always follow the kernel";
}

TEST(FuzzProblem, TextIsACaseFileAndContentHashesAreStable) {
  const std::string text = "op = gemv\r\n\tm = 1\n";
  EXPECT_TRUE(looks_like_case_text(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  const uint8_t binary[] = {'o', 'p', 0x01};
  EXPECT_FALSE(looks_like_case_text(binary, sizeof binary));
  EXPECT_EQ(content_hash_hex(nullptr, 0), "cbf29ce484222325");  // FNV-1a offset basis
  EXPECT_EQ(content_hash_hex(binary, sizeof binary).size(), 16u);
}

}  // namespace
}  // namespace nvfp4
