// The statistical part of rule 7 on observations built here: codes drawn with a known random
// source (honest, biased toward the lower neighbour, independent of the seed, all zero) from the
// reference's own scales, so each verdict is checked against a known cause; and the built-in and
// mutant stochastic quantizers through the whole case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "harness/draw/generators.h"
#include "harness/ops/quantize_stochastic.h"
#include "harness/tests/check_in_process.h"
#include "kernels/registry.h"
#include "reference/exact_gemm.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

using quantize_op::SeedRun;

Problem stochastic_case(uint64_t seed) {
  Problem p;
  p.op = Op::quantize;
  p.m = 8, p.k = 64, p.l = 1;
  p.sf_layout = SfLayout::linear;
  p.in_type = InType::bf16;
  p.recipe = Recipe::te;
  p.stochastic_seed = 7;
  p.x.clear();
  p.seed = seed;
  p.generator = "quantize/plain";
  expand_seeded_case(p);
  return p;
}

enum class Source { honest, squared, constant, zero };

// The E2M1 code of y rounded up when `draw` < the fraction of y between its neighbours.
uint8_t code_of(float y, double draw) {
  static const double grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const double a = std::fabs(static_cast<double>(y));
  int c = 7;
  if (a < 6) {
    c = 0;
    while (grid[c + 1] <= a) ++c;
    if (grid[c] != a && draw < (a - grid[c]) / (grid[c + 1] - grid[c])) ++c;
  }
  return static_cast<uint8_t>((std::signbit(y) ? 8 : 0) | c);
}

std::vector<SeedRun> runs_of(const Problem& p, const QuantResult& ref, Source source, int seeds, uint64_t rng_seed) {
  std::mt19937_64 rng(rng_seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> fixed(static_cast<size_t>(p.l * p.m * p.k));
  for (double& d : fixed) d = u(rng);
  std::vector<SeedRun> runs;
  for (int r = 0; r < seeds; ++r) {
    SeedRun run{static_cast<uint64_t>(100 + r), std::vector<uint8_t>(static_cast<size_t>(p.q_bytes()), 0), ref.sfq};
    for (int64_t e = 0; e < p.l * p.m * p.k; ++e) {
      const int64_t row = e / p.k, x = e % p.k;
      const float os = ref.os[static_cast<size_t>(sf_linear_offset(p.m, p.qkb(), row / p.m, row % p.m, x / 16))];
      const float y = static_cast<float>(static_cast<double>(quantize_input(p, e)) * os);
      double draw = source == Source::constant ? fixed[static_cast<size_t>(e)] : u(rng);
      if (source == Source::squared) draw = std::sqrt(draw);  // up with probability f^2
      const uint8_t c = source == Source::zero ? 0 : code_of(y, draw);
      run.q[static_cast<size_t>(e / 2)] |= static_cast<uint8_t>(x & 1 ? c << 4 : c);
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

std::string verdict(Source source, uint64_t rng_seed, uint64_t data_seed = 3) {
  const Problem p = stochastic_case(data_seed);
  const QuantResult ref = quantize_reference(p);
  return quantize_op::stochastic_failure(p, ref, runs_of(p, ref, source, quantize_op::kStochasticSeeds, rng_seed), 0);
}

TEST(QuantizeStochastic, AnHonestSourcePasses) {
  for (uint64_t s = 0; s < 20; ++s) EXPECT_EQ(verdict(Source::honest, s, s), "") << "random source " << s;
}

TEST(QuantizeStochastic, ABiasedSourceIsNamedBiased) {
  const std::string why = verdict(Source::squared, 1);
  EXPECT_NE(why.find("biased"), std::string::npos) << why;
  EXPECT_NE(why.find("block (batch"), std::string::npos) << why;
}

TEST(QuantizeStochastic, ASourceIgnoringTheSeedIsNamedConstant) {
  const std::string why = verdict(Source::constant, 1);
  EXPECT_NE(why.find("constant: block (batch 0, row"), std::string::npos) << why;
}

TEST(QuantizeStochastic, AllZeroCodesFail) {
  const std::string why = verdict(Source::zero, 1);
  EXPECT_NE(why.find("with seed 100"), std::string::npos) << why;
}

TEST(QuantizeStochastic, OtherSeedsDifferFromTheCasesAndEachOther) {
  std::vector<uint64_t> seen{7};
  for (int i = 0; i < quantize_op::kStochasticSeeds; ++i) {
    const uint64_t s = quantize_op::other_seed(7, i);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), s), 0) << i;
    seen.push_back(s);
  }
}

const Kernel& kernel(const Registry& r, const std::string& name) {
  const Kernel* k = r.find(name);
  if (!k) throw std::runtime_error("no kernel " + name);
  return *k;
}

TEST(QuantizeStochastic, TheBuiltInHostQuantizerPassesAndKeepsItsBytesPerSeed) {
  const Registry r = Registry::with_builtins();
  const Kernel& k = kernel(r, "host_quantize_nvfp4_sr");
  for (uint64_t s = 0; s < 6; ++s) {
    Problem p = stochastic_case(s);
    const CaseOutcome o = check_in_process(k, p, CaseOptions{});
    EXPECT_EQ(o.verdict, CaseOutcome::Verdict::pass) << (o.finding ? o.finding->message : "");
  }
}

}  // namespace
}  // namespace nvfp4
