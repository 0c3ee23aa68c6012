// The generators: deterministic from the seed, shapes inside (or, on request, outside) the
// declared constraints and weighted to tile edges, every distribution what its name promises,
// raw 0 the plainest case, and most narrow-scale outputs in the oracle's exact regime.
#include "harness/draw/generators.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "harness/draw/schedule.h"
#include "harness/judge/case_check.h"
#include "harness/ops/op_module.h"
#include "kernels/registry.h"
#include "reference/case_file.h"
#include "reference/stable_hash.h"
#include "reference/exact_gemm.h"
#include "reference/exact_mx.h"
#include "reference/formats.h"
#include "reference/oracle.h"

namespace nvfp4 {
namespace {

constexpr uint64_t kSeed = 20261130;  // fixed: these tests check distributions, not luck

nvfp4_kernel_info make_info(uint32_t m_mult, uint32_t n_mult, uint32_t k_mult, uint32_t flags = 0) {
  nvfp4_kernel_info info{};
  info.abi_version = NVFP4_ABI_VERSION;
  info.name = "test_info";
  info.memory = NVFP4_MEMORY_HOST;
  info.ops = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
  info.sf_layouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
  info.m_multiple = m_mult;
  info.n_multiple = n_mult;
  info.k_multiple = k_mult;
  info.flags = flags;
  return info;
}

// Value of an E4M3 byte as a double (NaN for NaN), with the ue4m3 or e4m3 sign rule.
double scale_value(uint8_t byte, ScaleSemantics sem) {
  const ScaleValue v = e4m3_decode(byte, sem);
  return v.nan ? std::nan("") : v.sign * std::ldexp(static_cast<double>(v.sig), v.exp);
}

std::vector<uint8_t> codes_of(const std::vector<uint8_t>& packed) {
  std::vector<uint8_t> codes;
  for (uint8_t byte : packed) {
    codes.push_back(byte & 15u);
    codes.push_back(byte >> 4);
  }
  return codes;
}

// Draws that are always 0: the plainest case.
class ZeroDraws final : public Draws {
 public:
  uint64_t below(uint64_t) override { return 0; }
  std::vector<uint8_t> bytes(std::size_t count) override { return std::vector<uint8_t>(count, 0); }
};

TEST(DataSpec, EveryCombinationHasANameThatParsesBack) {
  EXPECT_EQ(DataSpec::all().size(), 6u * 8u * 3u);
  std::set<std::string> names;
  for (const DataSpec& s : DataSpec::all()) {
    const DataSpec back = DataSpec::parse(s.name());
    EXPECT_EQ(back.name(), s.name());
    names.insert(s.name());
  }
  EXPECT_EQ(names.size(), DataSpec::all().size());
  EXPECT_EQ(DataSpec{}.name(), "uniform/narrow/one");
}

TEST(DataSpec, BadNamesAreRejectedWithTheKnownNames) {
  for (const char* bad : {"", "uniform", "uniform/narrow", "uniform/narrow/one/x", "unifrom/narrow/one",
                          "uniform/wide/one", "uniform/narrow/two"}) {
    try {
      DataSpec::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'"), std::string::npos) << e.what();
    }
  }
  try {
    DataSpec::parse("uniform/wide/one");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("narrow"), std::string::npos) << "lists the known names: " << e.what();
  }
}

TEST(Generators, SameSeedSameProblemOtherSeedOtherProblem) {
  const nvfp4_kernel_info info = make_info(1, 1, 1);
  for (const DataSpec& spec : DataSpec::all()) {
    Rng r1(kSeed), r2(kSeed), r3(kSeed + 1);
    const Problem p1 = generate_problem(r1, Op::gemm, info, spec, ShapeLimits{});
    const Problem p2 = generate_problem(r2, Op::gemm, info, spec, ShapeLimits{});
    const Problem p3 = generate_problem(r3, Op::gemm, info, spec, ShapeLimits{});
    EXPECT_EQ(write_case(p1), write_case(p2)) << spec.name();
    EXPECT_NE(write_case(p1), write_case(p3)) << spec.name();
  }
}

TEST(Generators, RngDrawsAreUniformAndInRange) {
  Rng rng(kSeed);
  RngDraws d(rng);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) counts[d.below(7)]++;
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
  EXPECT_EQ(d.below(1), 0u);
  std::vector<int> byte_counts(256, 0);
  for (uint8_t b : d.bytes(256 * 400 + 3)) byte_counts[b]++;
  for (int c : byte_counts) EXPECT_NEAR(c, 400, 100);
}

// The suite's engine draws std::mt19937_64's sequence, one word or a block at a time, across
// the state's twists, after discards, from any seed: every seed keeps drawing the cases it drew.
TEST(Generators, RngIsMt19937_64WordForWord) {
  for (uint64_t seed : {uint64_t(0), uint64_t(5489), kSeed, ~uint64_t(0), uint64_t(20261204)}) {
    Rng mine(seed);
    std::mt19937_64 std_engine(seed);
    std::vector<uint64_t> words;
    // Single words, then fills that start and end anywhere in a 312-word state, then discards.
    for (size_t count : {size_t(1), size_t(7), size_t(311), size_t(312), size_t(313), size_t(1000), size_t(4096)}) {
      words.assign(count, 0);
      mine.fill(words.data(), count);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(words[i], std_engine()) << "seed " << seed << ", fill of " << count;
      ASSERT_EQ(mine(), std_engine()) << "seed " << seed;
      mine.discard(count);
      std_engine.discard(count);
    }
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(mine(), std_engine()) << "seed " << seed;
    Rng again(seed), other(seed + 1);
    EXPECT_NE(again, mine);
    EXPECT_NE(again, other);
    EXPECT_EQ(again, Rng(seed));
  }
}

TEST(Generators, ShapesRespectDeclaredMultiplesAndLimits) {
  const ShapeLimits limits;
  const nvfp4_kernel_info infos[] = {make_info(1, 1, 1), make_info(128, 8, 64), make_info(16, 1, 32),
                                     make_info(1, 4, 3), make_info(512, 512, 2048)};
  Rng rng(kSeed);
  for (const nvfp4_kernel_info& info : infos) {
    for (Op op : {Op::gemv, Op::gemm}) {
      for (int i = 0; i < 2000; ++i) {
        const Shape s = generate_shape(rng, op, info, limits);
        SCOPED_TRACE(testing::Message() << "m=" << s.m << " n=" << s.n << " k=" << s.k << " l=" << s.l
                                        << " multiples " << info.m_multiple << "/" << info.n_multiple
                                        << "/" << info.k_multiple);
        ASSERT_GE(s.m, 1);
        ASSERT_GE(s.n, 1);
        ASSERT_GE(s.k, 2);
        ASSERT_GE(s.l, 1);
        ASSERT_LE(s.l, 9);
        ASSERT_EQ(s.k % 2, 0);
        ASSERT_EQ(s.m % info.m_multiple, 0);
        ASSERT_EQ(s.k % info.k_multiple, 0);
        if (op == Op::gemv) {
          ASSERT_EQ(s.n, 1);
        } else {
          ASSERT_EQ(s.n % info.n_multiple, 0);
        }
        // The cost limits hold whenever the multiples allow it at all.
        if (info.m_multiple <= limits.max_m && info.k_multiple <= limits.max_k) {
          ASSERT_LE(s.l * s.m * s.n, limits.max_outputs);
          ASSERT_LE(s.l * s.m * s.n * s.k, limits.max_products);
          ASSERT_LE(s.l * s.m * s.k, limits.max_elements);
        }
      }
    }
  }
}

TEST(Generators, ShapesAreWeightedTowardTileEdges) {
  const nvfp4_kernel_info info = make_info(1, 1, 1);
  Rng rng(kSeed);
  std::map<std::string, int> seen;
  std::set<int64_t> batches, ms;
  const int kDraws = 4000;
  for (int i = 0; i < kDraws; ++i) {
    const Shape s = generate_shape(rng, Op::gemm, info, ShapeLimits{});
    batches.insert(s.l);
    ms.insert(s.m);
    seen["k=2"] += s.k == 2;
    seen["k%16!=0"] += s.k % 16 != 0;
    seen["k%16==0,k%64!=0"] += s.k % 16 == 0 && s.k % 64 != 0;
    seen["k%64==0"] += s.k % 64 == 0;
    seen["m on an edge"] += on_tile_edge(Shape{Op::gemv, s.m, 1, 64, 1});
    seen["m=1"] += s.m == 1;
    seen["l=1"] += s.l == 1;
  }
  for (const auto& [what, count] : seen) {
    std::printf("%-18s %5.1f%%\n", what.c_str(), 100.0 * count / kDraws);
    EXPECT_GE(count, kDraws / 25) << what << " is too rare";
  }
  EXPECT_GE(seen["m on an edge"], kDraws / 2) << "edges dominate";
  EXPECT_EQ(batches.size(), 9u) << "every batch count 1-9 occurs";
  for (int64_t e : {1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257}) {
    EXPECT_TRUE(ms.count(e)) << "m = " << e << " never drawn";
  }
  EXPECT_GT(ms.size(), 60u) << "plus uniform values";
}

TEST(Generators, UnsupportedShapesBreakADeclaredMultiple) {
  Rng rng(kSeed);
  for (const nvfp4_kernel_info& info : {make_info(128, 8, 64), make_info(1, 1, 32), make_info(16, 1, 1),
                                        make_info(1, 4, 3), make_info(1, 1, 4)}) {
    for (Op op : {Op::gemv, Op::gemm}) {
      for (int i = 0; i < 500; ++i) {
        const Shape s = generate_unsupported_shape(rng, op, info, ShapeLimits{});
        if (op == Op::gemv && info.m_multiple == 1 && info.k_multiple <= 2) {
          ASSERT_EQ(s.m, 0) << "nothing to violate";
          continue;
        }
        ASSERT_GE(s.m, 1);
        ASSERT_GE(s.k, 2);
        ASSERT_EQ(s.k % 2, 0) << "still a valid NVFP4 shape";
        if (op == Op::gemv) {
          ASSERT_EQ(s.n, 1);
        }
        const bool breaks = s.m % info.m_multiple != 0 || s.n % info.n_multiple != 0 ||
                            s.k % info.k_multiple != 0;
        ASSERT_TRUE(breaks) << "m=" << s.m << " n=" << s.n << " k=" << s.k;
      }
    }
  }
  Rng rng2(kSeed);
  EXPECT_EQ(generate_unsupported_shape(rng2, Op::gemm, make_info(1, 1, 2), ShapeLimits{}).m, 0);
}

TEST(Generators, RawZeroIsThePlainestCase) {
  ZeroDraws zero;
  const nvfp4_kernel_info info = make_info(1, 1, 1);
  const Shape s = draw_shape(zero, Op::gemm, info, ShapeLimits{});
  EXPECT_EQ(s.m, 1);
  EXPECT_EQ(s.n, 1);
  EXPECT_EQ(s.k, 2);
  EXPECT_EQ(s.l, 1);
  const DataSpec spec = draw_spec(zero);
  EXPECT_EQ(spec.name(), "uniform/narrow/one");
  for (const DataSpec& each : DataSpec::all()) {
    // fine_cancel's pair blocks are its structure, not a draw: not part of this property.
    if (each.values == ValueDist::fine_cancel || each.scales == ScaleDist::fine_cancel) continue;
    // Signs (one_sign, alternating) apply to nonzero magnitudes only: raw 0 is code 0 everywhere.
    Problem p;
    p.m = 3;
    p.n = 2;
    p.k = 34;
    p.l = 2;
    draw_data(zero, each, p);
    for (uint8_t byte : p.a) ASSERT_EQ(byte, 0) << each.name();
    for (uint8_t byte : p.b) ASSERT_EQ(byte, 0) << each.name();
    EXPECT_EQ(p.alpha, 1.0f) << each.name();
    if (each.scales == ScaleDist::narrow || each.scales == ScaleDist::full) {
      for (uint8_t byte : p.sfa) ASSERT_EQ(byte, 0x38) << each.name() << ": scale 1.0";
    }
  }
}

TEST(Generators, ValueDistributionsKeepTheirPromises) {
  Rng rng(kSeed);
  Problem p;
  p.m = 64;
  p.n = 64;
  p.k = 256;
  p.l = 2;
  auto fill = [&](ValueDist v) {
    DataSpec spec;
    spec.values = v;
    fill_data(rng, spec, p);
  };

  fill(ValueDist::uniform);
  std::vector<int> counts(16, 0);
  for (uint8_t c : codes_of(p.a)) counts[c]++;
  const double expect = p.l * p.m * p.k / 16.0;
  for (int c = 0; c < 16; ++c) EXPECT_NEAR(counts[c], expect, expect * 0.1) << "code " << c;

  fill(ValueDist::edge);
  int edges = 0, all = 0;
  for (uint8_t c : codes_of(p.b)) {
    edges += c == 0 || c == 8 || c == 1 || c == 9 || c == 7 || c == 15;
    ++all;
  }
  EXPECT_GT(edges, all * 7 / 10);

  fill(ValueDist::sparse);
  int zeros = 0;
  all = 0;
  for (uint8_t c : codes_of(p.a)) {
    zeros += (c & 7) == 0;
    ++all;
  }
  EXPECT_GT(zeros, all * 8 / 10);
  EXPECT_LT(zeros, all * 97 / 100);

  for (int trial = 0; trial < 8; ++trial) {
    fill(ValueDist::one_sign);
    for (const auto* t : {&p.a, &p.b}) {
      std::set<int> signs;
      for (uint8_t c : codes_of(*t)) {
        if (c & 7) signs.insert(c >> 3);
      }
      EXPECT_EQ(signs.size(), 1u) << "one sign per tensor";
    }
  }

  fill(ValueDist::alternating);
  const std::vector<uint8_t> a = codes_of(p.a), b = codes_of(p.b);
  int64_t positive_products = 0, negative_products = 0;
  for (size_t e = 0; e < a.size(); ++e) {
    const int64_t x = static_cast<int64_t>(e) % p.k;
    if (a[e] & 7) {
      EXPECT_EQ(a[e] >> 3, x & 1) << "A alternates every element";
    }
    if (b[e] & 7) {
      EXPECT_EQ(b[e] >> 3, (x >> 1) & 1) << "B every two";
    }
    const int prod = e2m1_twice(a[e]) * e2m1_twice(b[e]);
    positive_products += prod > 0;
    negative_products += prod < 0;
  }
  EXPECT_NEAR(double(positive_products), double(negative_products), 0.05 * (positive_products + negative_products))
      << "products cancel";
}

TEST(Generators, ScaleDistributionsKeepTheirPromises) {
  Rng rng(kSeed);
  Problem p;
  p.m = 40;
  p.n = 40;
  p.k = 512;
  p.l = 2;
  for (int s = 0; s < 8; ++s) {
    const ScaleDist dist = static_cast<ScaleDist>(s);
    DataSpec spec;
    spec.scales = dist;
    fill_data(rng, spec, p);
    SCOPED_TRACE(spec.name());
    std::vector<uint8_t> all = p.sfa;
    all.insert(all.end(), p.sfb.begin(), p.sfb.end());
    std::set<uint8_t> distinct(all.begin(), all.end());
    int nan = 0, sign = 0;
    for (uint8_t byte : all) {
      nan += (byte & 0x7F) == 0x7F;
      sign += byte >> 7;
      const double v = scale_value(byte, ScaleSemantics::ue4m3);
      switch (dist) {
        case ScaleDist::narrow:
        case ScaleDist::sign_bit:
          if (!std::isnan(v)) {
            ASSERT_GE(v, 0.5);
            ASSERT_LT(v, 2.0);
          }
          break;
        case ScaleDist::nan_block:
          if (!std::isnan(v)) {
            ASSERT_TRUE(v >= 0.5 && v < 2.0);
          }
          break;
        case ScaleDist::subnormal: ASSERT_TRUE(byte >= 1 && byte <= 7); break;
        case ScaleDist::near_max: ASSERT_TRUE(v >= 128 && v <= 448); break;
        case ScaleDist::zero: ASSERT_EQ(v, 0.0); break;
        case ScaleDist::full: ASSERT_FALSE(std::isnan(v)); break;
        case ScaleDist::fine_cancel: ASSERT_TRUE((byte >= 1 && byte <= 7) || byte == 0x6B); break;
      }
    }
    EXPECT_EQ(nan, dist == ScaleDist::nan_block ? 1 : 0) << "exactly one NaN in nan_block";
    if (dist == ScaleDist::sign_bit) {
      EXPECT_NEAR(sign, all.size() / 2.0, all.size() * 0.1);
    } else if (dist != ScaleDist::zero && dist != ScaleDist::nan_block) {
      EXPECT_EQ(sign, 0);
    }
    const size_t want_distinct[8] = {16, 127, 7, 15, 32, 17, 2, 8};  // in ScaleDist order
    EXPECT_EQ(distinct.size(), want_distinct[s]) << "every byte the distribution allows occurs";
  }
}

TEST(Generators, AlphaDistributionsKeepTheirPromises) {
  Rng rng(kSeed);
  RngDraws d(rng);
  int non_pow2 = 0, negative = 0;
  for (int i = 0; i < 2000; ++i) {
    const uint32_t raw = static_cast<uint32_t>(d.below(uint64_t(1) << 32));
    EXPECT_EQ(alpha_from_raw(AlphaDist::one, raw), 1.0f);
    const float p2 = alpha_from_raw(AlphaDist::pow2, raw);
    int e = 0;
    EXPECT_EQ(std::fabs(std::frexp(p2, &e)), 0.5f) << p2;
    EXPECT_TRUE(e - 1 >= -6 && e - 1 <= 6) << p2;
    const float a = alpha_from_raw(AlphaDist::arbitrary, raw);
    EXPECT_TRUE(std::isfinite(a) && a != 0.0f);
    non_pow2 += std::fabs(std::frexp(a, &e)) != 0.5f;
    negative += a < 0;
  }
  EXPECT_GT(non_pow2, 1900);
  EXPECT_NEAR(negative, 1000, 150);
}

TEST(Generators, ScaleDoublingIsExactOrRefused) {
  for (int byte = 0; byte < 256; ++byte) {
    const int doubled = e4m3_doubled(static_cast<uint8_t>(byte));
    for (ScaleSemantics sem : {ScaleSemantics::ue4m3, ScaleSemantics::e4m3}) {
      const double v = scale_value(static_cast<uint8_t>(byte), sem);
      if (doubled < 0) {
        EXPECT_TRUE(std::isnan(v) || std::fabs(2 * v) > 448) << "byte 0x" << std::hex << byte;
      } else {
        EXPECT_EQ(scale_value(static_cast<uint8_t>(doubled), sem), 2 * v) << "byte 0x" << std::hex << byte;
        EXPECT_EQ(doubled & 0x80, byte & 0x80) << "sign bit kept";
      }
    }
  }
}

// Most outputs of narrow-scale cases must land in the oracle's exact regime: that is where every
// bug shows bit for bit. Measured over the default limits the run command uses.
TEST(Generators, NarrowScalesKeepMostOutputsInTheExactRegime) {
  const nvfp4_kernel_info info = make_info(1, 1, 1);
  const Policy policy = Policy::for_flags(0);
  for (ValueDist v : {ValueDist::uniform, ValueDist::edge, ValueDist::sparse, ValueDist::one_sign,
                      ValueDist::alternating}) {
    for (AlphaDist a : {AlphaDist::one, AlphaDist::pow2}) {
      DataSpec spec{v, ScaleDist::narrow, a};
      Rng rng(kSeed);
      int64_t elements = 0, exact = 0, cases_all_exact = 0;
      const int kCases = 30;
      for (int i = 0; i < kCases; ++i) {
        const Problem p = generate_problem(rng, Op::gemm, info, spec, ShapeLimits{});
        const ExactResult ref = exact_gemm(p);
        const OracleSummary sum = judge(p, ref, ref.c.data(), policy);
        ASSERT_FALSE(sum.any_failure()) << "the reference's own output passes";
        elements += sum.elements;
        exact += sum.exact_regime;
        cases_all_exact += sum.exact_regime == sum.elements;
      }
      const double share = double(exact) / double(elements);
      std::printf("%-28s exact-regime outputs %5.1f%%, cases wholly exact %d/%d\n", spec.name().c_str(),
                  100 * share, int(cases_all_exact), kCases);
      EXPECT_GE(share, 0.9) << spec.name();
    }
  }
}

TEST(Generators, EveryGeneratedCaseIsAValidCaseFile) {
  Rng rng(kSeed);
  for (const DataSpec& spec : DataSpec::all()) {
    for (Op op : {Op::gemv, Op::gemm}) {
      const Problem p = generate_problem(rng, op, make_info(1, 1, 1, NVFP4_FLAG_SIGNED_SCALES), spec,
                                         ShapeLimits{});
      ASSERT_EQ(problem_error(p), "") << spec.name();
      EXPECT_EQ(p.semantics, ScaleSemantics::e4m3);
      const Problem back = parse_case(write_case(p), "generated.case");
      EXPECT_EQ(back.a, p.a);
      EXPECT_EQ(back.sfb, p.sfb);
      EXPECT_EQ(std::memcmp(&back.alpha, &p.alpha, sizeof(float)), 0);
    }
  }
  Rng rng2(kSeed);
  const Problem unit =
      generate_problem(rng2, Op::gemm, make_info(1, 1, 1, NVFP4_FLAG_UNIT_ALPHA),
                       DataSpec{ValueDist::uniform, ScaleDist::narrow, AlphaDist::arbitrary}, ShapeLimits{});
  EXPECT_EQ(unit.alpha, 1.0f) << "UNIT_ALPHA kernels get alpha = 1";
}

TEST(Generators, SeededCasesExpandLikeFillData) {
  Problem p;
  p.op = Op::gemm;
  p.m = 5;
  p.n = 3;
  p.k = 40;
  p.l = 2;
  p.seed = 77;
  p.generator = "edge/near_max/pow2";
  Problem q = p;
  expand_seeded_case(q);
  ASSERT_TRUE(q.has_data());
  Problem r = p;
  Rng rng(77);
  fill_data(rng, DataSpec::parse(p.generator), r);
  EXPECT_EQ(q.a, r.a);
  EXPECT_EQ(q.b, r.b);
  EXPECT_EQ(q.sfa, r.sfa);
  EXPECT_EQ(q.sfb, r.sfb);
  EXPECT_EQ(q.alpha, r.alpha) << "pow2 draws alpha";

  // A tensor given explicitly is kept; alpha stays when the generator says "one".
  Problem explicit_a = p;
  explicit_a.generator = "";
  explicit_a.alpha = 0.75f;
  explicit_a.a.assign(static_cast<size_t>(p.a_bytes()), 0x21);
  expand_seeded_case(explicit_a);
  EXPECT_EQ(explicit_a.a, std::vector<uint8_t>(static_cast<size_t>(p.a_bytes()), 0x21));
  EXPECT_EQ(explicit_a.alpha, 0.75f);
  EXPECT_TRUE(explicit_a.has_data());

  Problem no_seed = p;
  no_seed.seed.reset();
  EXPECT_THROW(expand_seeded_case(no_seed), std::invalid_argument);
  Problem bad_gen = p;
  bad_gen.generator = "edge/near_max";
  EXPECT_THROW(expand_seeded_case(bad_gen), std::invalid_argument);
}


// ---------------------------------------------------------------------------------------------
// Seeds mean the same cases as ever: the data a seed draws (Rng and fuzz input), its exact
// reference and its stale-state variant, hashed, against hashes taken before the draw, the
// rotations and the reference were made faster. A mutant kill table or a saved seed-only case
// is only comparable across builds while these hold.

// FNV-1a over everything added, in order.
class GoldenHash {
 public:
  void bytes(const void* data, size_t size) { text_.append(static_cast<const char*>(data), size); }
  template <class T>
  void value(const T& v) { bytes(&v, sizeof v); }
  template <class T>
  void vec(const std::vector<T>& v) {
    value(v.size());
    if (!v.empty()) bytes(v.data(), v.size() * sizeof(T));
  }
  void text(const std::string& t) { vec(std::vector<char>(t.begin(), t.end())); }
  void problem(const Problem& p) {
    try {
      text(write_case(p));  // every input, alpha and shape field a case file holds
    } catch (const std::invalid_argument& e) {
      text(std::string("unwritable: ") + e.what());
    }
  }
  void reference(const ExactResult& r) {
    value(r.out_type);
    for (const auto* elems : {&r.elems, &r.elems2}) {
      value(elems->size());
      for (const ExactElement& e : *elems) {
        value(e.sum), value(e.abs_sum), value(e.nonzero), value(e.min_tz), value(e.nan);
      }
    }
    vec(r.c), vec(r.c32), vec(r.group_offset);
    value(r.dual.size());
    // The 80 bits of each long double, not its padding (silu from long_double_exp.h: the same on
    // every host, where libm's expl differed between AMD and Intel processors).
    for (const DualValue& d : r.dual)
      for (const long double* x : {&d.silu_g, &d.u, &d.v}) bytes(x, 10);
    if (r.quant) vec(r.quant->q), vec(r.quant->sfq), vec(r.quant->os), vec(r.quant->global_scale);
    for (const auto& mx : {r.mx, r.mx2})
      if (mx)
        for (const MxElement& e : *mx) {
          vec(std::vector<uint64_t>(std::begin(e.sum.limb), std::end(e.sum.limb)));
          vec(std::vector<uint64_t>(std::begin(e.abs_sum.limb), std::end(e.abs_sum.limb)));
          value(e.nonzero), value(e.g_exp), value(e.nan), value(e.pos_inf), value(e.neg_inf);
        }
  }
  // The case, its reference and its stale variant (with the variant's reference).
  void checked_case(const Problem& p, uint64_t stale_seed) {
    problem(p);
    const ExactResult ref = op_reference(p);
    reference(ref);
    const StaleVariant v = stale_variant(p, ref, stale_seed);
    problem(v.problem);
    reference(v.reference);
    if (const auto in_place = op_module(p.op).stale_in_place) {
      Problem q = p;
      in_place(q, stale_seed, false);
      if (op_quantizes(p.op)) {
        vec(q.x);
      } else {
        // The GEMM family's in-place data are stale_variant's, already in the hash.
        bool same = q.a == v.problem.a && q.b == v.problem.b && q.sfa == v.problem.sfa && q.sfb == v.problem.sfb &&
                    q.b2 == v.problem.b2 && q.sfb2 == v.problem.sfb2 && q.groups.size() == v.problem.groups.size();
        for (size_t g = 0; same && g < q.groups.size(); ++g)
          same = q.groups[g].a == v.problem.groups[g].a && q.groups[g].b == v.problem.groups[g].b &&
                 q.groups[g].sfa == v.problem.groups[g].sfa && q.groups[g].sfb == v.problem.groups[g].sfb;
        EXPECT_TRUE(same) << "stale_in_place differs from stale_variant: " << p.note;
      }
    }
  }
  uint64_t hash() const { return fnv1a(text_); }

 private:
  std::string text_;
};

const Registry& builtins() {
  static const Registry r = Registry::with_builtins();
  return r;
}

// `cases` cases of a host kernel's schedule (its every op, shape class, data class and output
// type, as `run` and `mutants` draw them), or of one shape.
uint64_t schedule_hash(const std::string& kernel, int cases, uint64_t seed, std::optional<Shape> shape = std::nullopt) {
  const Kernel* k = builtins().find(kernel);
  if (k == nullptr) throw std::runtime_error("no kernel " + kernel);
  ScheduleOptions options;
  options.seed = seed;
  options.shape = shape;
  const Schedule schedule(*k->info, kernel, options);
  GoldenHash h;
  for (int i = 0; i < cases; ++i) {
    const ScheduledCase c = schedule.at(i);
    h.checked_case(c.problem, c.stale_seed);
  }
  return h.hash();
}

TEST(Generators, SeedsDrawTheSameCasesReferencesAndStaleDataAsEver) {
  struct Expect {
    const char* kernel;
    uint64_t hash;
    int cases = 40;  // fewer for MX: its Kulisch reference is slow on small shapes
  };
  const Expect kernels[] = {
      {"host_gemv_fp32", 0xd23636fc3bbeee3b},
      {"host_gemm_fp32", 0xb05833701da75a7f},
      {"host_gemm_fp32_e4m3", 0x01f41918824245d9},
      {"host_grouped_gemm_fp32", 0x360f4f05c7c1c365},
      {"host_grouped_gemm_fp32_packed", 0x7cf771aa51921e03},
      {"host_dual_gemm_fp32", 0x2c8ba6d511aaeabf},
      {"host_gemm_nvfp4_out", 0x08de4c3c402ed039},
      {"host_dual_gemm_nvfp4_out", 0xcdc443be7b1cf4de},
      {"host_grouped_gemm_nvfp4_out", 0xdb347439a1b8b1ce, 12},
      {"host_mx_gemv_fp32", 0x65c7aa65eb880bf4},
      {"host_mx_gemm_fp32", 0x965bc23284e29e4e},
      {"host_mx_grouped_gemm_fp32", 0xc8254592b4d01dd2, 12},
      {"host_mx_grouped_gemm_fp32_packed", 0xe8a5daba348ef2aa, 12},
      {"host_mx_dual_gemm_fp32", 0xf89b5a5671414b05, 12},
      {"host_quantize_nvfp4", 0x8b68b398ef80b725},
      {"host_quantize_nvfp4_2d", 0xa9d98f8068e982d3},
      {"host_quantize_nvfp4_rows", 0x8a01c7614d646611},
      {"host_quantize_mx", 0xb75ccc0cf31e4208},
  };
  for (const Expect& e : kernels) {
    const auto start = std::chrono::steady_clock::now();
    const uint64_t h = schedule_hash(e.kernel, e.cases, 20261204);
    std::printf("      {\"%s\", 0x%016llx},  // %.2f s\n", e.kernel, (unsigned long long)h,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_EQ(h, e.hash) << e.kernel;
  }
  // The throughput benchmark's medium class: GEMV and GEMM, a few cases of one shape each.
  const uint64_t gemv = schedule_hash("host_gemv_fp32", 3, 7, Shape{Op::gemv, 1024, 1, 4096, 1});
  const uint64_t gemm = schedule_hash("host_gemm_fp32", 3, 7, Shape{Op::gemm, 128, 128, 256, 1});
  std::printf("medium gemv 0x%016llx, gemm 0x%016llx\n", (unsigned long long)gemv, (unsigned long long)gemm);
  EXPECT_EQ(gemv, 0x3117228409c7fc36u);
  EXPECT_EQ(gemm, 0x611ebcccc9fae2acu);
}

// Every distribution of every GEMM-family op, seed-only cases expanded as a case file's are, with
// partial last blocks, batches and an empty group.
TEST(Generators, EveryDistributionDrawsTheSameDataAsEver) {
  struct Expect {
    Op op;
    uint64_t hash;
  };
  const Expect ops[] = {{Op::gemv, 0x999bfbbe1c3ef6d9}, {Op::gemm, 0x6d9871151d06348c},
                       {Op::grouped_gemm, 0x63cc27bcc49f19aa}, {Op::dual_gemm, 0xa3160cdc8670eb55}};
  for (const Expect& e : ops) {
    GoldenHash h;
    uint64_t seed = 1;
    for (const DataSpec& spec : DataSpec::all()) {
      for (OutType out : {OutType::fp16, OutType::bf16, OutType::fp32}) {
        Problem p;
        p.op = e.op;
        p.out_type = out;
        p.seed = seed;
        p.generator = spec.name();
        if (e.op == Op::gemv) p.m = 19, p.n = 1, p.k = 278;
        if (e.op == Op::gemm) p.m = 5, p.n = 7, p.k = 96, p.l = 2;
        if (e.op == Op::dual_gemm) p.m = 6, p.n = 5, p.k = 80, p.l = 2;
        if (e.op == Op::grouped_gemm) {
          p.groups.resize(3);
          p.groups[0].m = 3, p.groups[0].n = 4, p.groups[0].k = 66;
          p.groups[1].m = 0, p.groups[1].n = 4, p.groups[1].k = 64;
          p.groups[2].m = 2, p.groups[2].n = 3, p.groups[2].k = 32;
        }
        expand_seeded_case(p);
        h.checked_case(p, splitmix64(seed++));
      }
    }
    std::printf("%s: 0x%016llx\n", to_string(e.op), (unsigned long long)h.hash());
    EXPECT_EQ(h.hash(), e.hash) << to_string(e.op);
  }
}

// The kernel fuzzer's draws (ByteDraws: the input's bytes, then an Rng of its hash).
TEST(Generators, FuzzInputsDrawTheSameCasesAsEver) {
  GoldenHash h;
  Rng rng(20261203);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> input(static_cast<size_t>(i * 13 % 1500));
    for (uint8_t& byte : input) byte = static_cast<uint8_t>(rng());
    h.problem(draw_fuzz_case(input.data(), input.size(), nullptr, fuzz_shape_limits()).problem);
  }
  std::printf("fuzz inputs: 0x%016llx\n", (unsigned long long)h.hash());
  EXPECT_EQ(h.hash(), 0x5198a1018432a7cdu);
}

}  // namespace
// A seed-only grouped case of n-row groups, expanded; the hash of every group's scales.
Problem many_groups(int64_t groups, int64_t m, int64_t n, int64_t k, const std::string& generator, uint64_t seed) {
  Problem p;
  p.op = Op::grouped_gemm;
  p.groups.resize(static_cast<size_t>(groups));
  for (Group& g : p.groups) g.m = m, g.n = n, g.k = k;
  p.seed = seed;
  p.generator = generator;
  expand_seeded_case(p);
  return p;
}

uint64_t scales_hash(const Problem& p) {
  std::string all;
  for (const Group& g : p.groups) {
    all.append(g.sfa.begin(), g.sfa.end());
    all.append(g.sfb.begin(), g.sfb.end());
  }
  return fnv1a(all);
}

// Groups get scales distinct from every earlier group's while the distribution has combinations
// left, and after that the same scales as before this was made fast: seeds and saved seed-only
// cases mean the same data. The hashes were taken from the first (quadratic) version; the cases
// run past the combinations of one- and two-byte scales.
TEST(Generators, DistinctGroupScalesAreTheSameDrawAsEver) {
  struct Expect {
    int64_t groups, m, n, k;
    const char* generator;
    uint64_t hash;
  };
  const Expect cases[] = {
      {400, 1, 1, 16, "uniform/narrow/one", 0xce64c756acca5175},
      {400, 1, 2, 16, "uniform/zero/one", 0x4ca6306245a21be5},
      {300, 1, 1, 16, "uniform/fine_cancel/one", 0xefcac629c3ab0603},
      {300, 2, 1, 16, "uniform/sign_bit/one", 0x7ca9028231e8e06c},
      {600, 1, 1, 32, "uniform/subnormal/one", 0xe621f26873dd6a56},
      {300, 1, 1, 16, "uniform/nan_block/pow2", 0x44470b2614798133},
      {300, 1, 3, 48, "uniform/near_max/one", 0x062a1bf565e188f8},
      {2000, 1, 1, 32, "uniform/narrow/one", 0x0b25feab5e11605a},
  };
  for (const Expect& e : cases) {
    const uint64_t h = scales_hash(many_groups(e.groups, e.m, e.n, e.k, e.generator, 7));
    std::printf("%lld x %lldx%lldx%lld %s: 0x%016llx\n", (long long)e.groups, (long long)e.m, (long long)e.n,
                (long long)e.k, e.generator, (unsigned long long)h);
    EXPECT_EQ(h, e.hash) << e.groups << " groups, " << e.generator;
  }
  // Groups of one scale length but two block counts (2 rows of 16, 1 row of 32) share scale
  // values without sharing a counter.
  Problem mixed = many_groups(3000, 2, 1, 16, "uniform/narrow/one", 9);
  for (size_t g = 1; g < mixed.groups.size(); g += 2) mixed.groups[g].m = 1, mixed.groups[g].k = 32;
  for (Group& g : mixed.groups) g.a.clear(), g.b.clear(), g.sfa.clear(), g.sfb.clear();
  mixed.seed = 9;
  expand_seeded_case(mixed);
  std::printf("mixed: 0x%016llx\n", (unsigned long long)scales_hash(mixed));
  EXPECT_EQ(scales_hash(mixed), 0x20f79969345c1df2u);
}

// The review's case: 70,000 one-row groups of two scale bytes, more groups than the distribution
// has combinations, took over 300 s; each group stepped through every earlier one.
TEST(Generators, ManyGroupsExpandInSeconds) {
  const auto start = std::chrono::steady_clock::now();
  const Problem p = many_groups(70000, 1, 2, 32, "uniform/narrow/one", 1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("70000 groups expanded in %.1f s\n", seconds);
  EXPECT_EQ(p.groups.size(), 70000u);
  EXPECT_LT(seconds, 20.0);
}

}  // namespace nvfp4
