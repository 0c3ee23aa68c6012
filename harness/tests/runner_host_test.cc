// Each runner check fires on a host kernel that has exactly that bug, and an honest kernel passes
// them all (googletest's "one interface, many implementations": a table of kernel -> check).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "harness/generators.h"
#include "harness/runner.h"
#include "harness/tests/wrong_host_kernels.h"
#include "kernels/registry.h"
#include "reference/case_file.h"

namespace nvfp4 {
namespace {

Registry& test_registry() {
  static Registry* registry = [] {
    auto* r = new Registry();
    r->add_provider(test::wrong_host_kernel_count, test::wrong_host_kernel_get, test::wrong_host_kernel_run,
                    "harness/tests/wrong_host_kernels.cc");
    return r;
  }();
  return *registry;
}

const Kernel& kernel(const std::string& name) {
  const Kernel* k = test_registry().find(name);
  if (!k) throw std::runtime_error("test kernel missing: " + name);
  return *k;
}

// A problem with generated data; rows 0 of A in batch 0 are zero so some outputs are exactly 0.
Problem make_problem(Op op, int64_t m, int64_t n, int64_t k, int64_t l, SfLayout layout, uint64_t seed) {
  Problem p;
  p.op = op;
  p.m = m;
  p.n = op == Op::gemv ? 1 : n;
  p.k = k;
  p.l = l;
  p.sf_layout = layout;
  Rng rng(seed);
  std::printf("problem %s %ldx%ldx%ldx%ld %s from seed %lu\n", to_string(op), (long)p.m, (long)p.n, (long)p.k,
              (long)p.l, to_string(layout), (unsigned long)seed);
  fill_data(rng, DataSpec{}, p);
  for (int64_t x = 0; x < k / 2; ++x) p.a[static_cast<size_t>(x)] = 0;
  return p;
}

RunOptions test_options() {
  RunOptions o;
  o.case_dir = (std::filesystem::path(::testing::TempDir()) / ("nvfp4-runner-host-test-" + std::to_string(getpid()))).string();
  o.data_spec = DataSpec{}.name();
  o.stale_seed = 99;
  return o;
}

struct Expectation {
  const char* kernel;
  const char* check;  // "" = pass, "unsupported" = correctly refused
  Op op;
  int64_t m, n, k, l;
  SfLayout layout;
};

void PrintTo(const Expectation& e, std::ostream* os) { *os << e.kernel << " -> " << (*e.check ? e.check : "pass"); }

class RunnerCheck : public ::testing::TestWithParam<Expectation> {};

TEST_P(RunnerCheck, FiresExactlyWhereTheBugIs) {
  const Expectation& e = GetParam();
  const Problem p = make_problem(e.op, e.m, e.n, e.k, e.l, e.layout, 12345);
  const CheckResult r = check_case(kernel(e.kernel), p, test_options());
  const std::string check = e.check;
  if (check.empty()) {
    EXPECT_EQ(r.verdict, CheckResult::Verdict::pass) << r.check << ": " << r.message;
    EXPECT_TRUE(r.case_file.empty()) << "a passing case's file is removed";
  } else if (check == "unsupported") {
    EXPECT_EQ(r.verdict, CheckResult::Verdict::unsupported) << r.check << ": " << r.message;
  } else {
    ASSERT_EQ(r.verdict, CheckResult::Verdict::fail) << "no check fired";
    EXPECT_EQ(r.check, check) << r.message;
    EXPECT_FALSE(r.message.empty());
    ASSERT_FALSE(r.case_file.empty());
    EXPECT_TRUE(std::filesystem::exists(r.case_file)) << "a failing case keeps its file: " << r.case_file;
    std::printf("%s: %s: %s\n  %s\n", e.kernel, r.check.c_str(), r.message.c_str(), r.case_file.c_str());
  }
}

constexpr Op G = Op::gemm;
constexpr SfLayout P = SfLayout::permuted, L = SfLayout::linear;

INSTANTIATE_TEST_SUITE_P(
    HostKernels, RunnerCheck,
    ::testing::Values(Expectation{"honest_host", "", G, 37, 5, 80, 2, P},
                      Expectation{"honest_host", "", G, 37, 5, 80, 2, L},
                      Expectation{"honest_host", "", Op::gemv, 129, 1, 34, 3, P},
                      Expectation{"honest_m4_host", "", G, 8, 3, 64, 1, P},
                      Expectation{"honest_m4_host", "unsupported", G, 5, 3, 64, 1, P},
                      Expectation{"unwritten_host", "unwritten-output", G, 37, 5, 80, 2, P},
                      Expectation{"write_past_end_host", "guard", G, 37, 5, 80, 2, P},
                      Expectation{"modifies_input_host", "inputs-modified", G, 37, 5, 80, 2, P},
                      Expectation{"stale_cache_host", "stale-state", G, 37, 5, 80, 2, P},
                      Expectation{"nondeterministic_host", "determinism", G, 37, 5, 80, 2, P},
                      Expectation{"ignores_unsupported_host", "ignored-unsupported", G, 5, 3, 64, 1, P},
                      Expectation{"touches_c_when_refusing_host", "unsupported-touched-output", G, 5, 3, 64, 1, P},
                      Expectation{"refuses_supported_host", "refused-supported", G, 37, 5, 80, 2, P},
                      Expectation{"wrong_answer_host", "oracle", G, 37, 5, 80, 2, L},
                      Expectation{"reads_padding_host", "nan-padding", G, 37, 5, 80, 2, P}),
    [](const ::testing::TestParamInfo<Expectation>& info) {
      std::string name = std::string(info.param.kernel) + "_" + (*info.param.check ? info.param.check : "passes") +
                         "_" + to_string(info.param.op) + "_" + to_string(info.param.layout);
      for (char& ch : name)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// The honest kernel passes on every distribution the generators have (NaN blocks, overflow,
// subnormal scales, arbitrary alpha), on generated shapes: no check may fire on a correct kernel.
TEST(RunnerHonest, PassesEveryDistribution) {
  const Kernel& honest = kernel("honest_host");
  const uint64_t seed = 20261130;
  std::printf("seed %lu\n", (unsigned long)seed);
  Rng rng(seed);
  ShapeLimits limits;
  limits.max_m = 140;
  limits.max_n = 9;
  limits.max_k = 300;
  limits.max_l = 3;
  int checked = 0;
  for (const DataSpec& spec : DataSpec::all()) {
    for (Op op : {Op::gemv, Op::gemm}) {
      const Problem p = generate_problem(rng, op, *honest.info, spec, limits);
      RunOptions o = test_options();
      o.data_spec = spec.name();
      o.stale_seed = rng();
      const CheckResult r = check_case(honest, p, o);
      EXPECT_EQ(r.verdict, CheckResult::Verdict::pass)
          << spec.name() << " " << to_string(op) << ": " << r.check << ": " << r.message << " (" << r.case_file << ")";
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

// The stale-state refill without a generator (a replayed file) still changes the data.
TEST(RunnerStale, ShuffleRefillCatchesACache) {
  const Problem p = make_problem(G, 19, 4, 96, 1, P, 777);
  RunOptions o = test_options();
  o.data_spec.clear();
  const CheckResult r = check_case(kernel("stale_cache_host"), p, o);
  ASSERT_EQ(r.verdict, CheckResult::Verdict::fail);
  EXPECT_EQ(r.check, "stale-state") << r.message;
}

// A large case drawn from a seed is saved as that seed (not megabytes of hex); loading the file
// gives back the same data, so the saved case reproduces the failure. A small one keeps its data.
TEST(RunnerSave, LargeSeededCaseIsSavedAsItsSeed) {
  for (const int64_t m : {int64_t(8), int64_t(2048)}) {
    Problem p;
    p.op = Op::gemv;
    p.m = m;
    p.k = 2048;  // m = 2048: 2 MiB of A, above the 1 MiB limit
    p.seed = 4242;
    p.generator = DataSpec{}.name();
    expand_seeded_case(p);
    ASSERT_TRUE(p.data_from_seed);
    const CheckResult r = check_case(kernel("wrong_answer_host"), p, test_options());
    ASSERT_EQ(r.verdict, CheckResult::Verdict::fail) << r.message;
    ASSERT_TRUE(std::filesystem::exists(r.case_file));
    Problem loaded = read_case_file(r.case_file);
    EXPECT_EQ(loaded.has_data(), m == 8) << "m = " << m << ": " << r.case_file;
    EXPECT_EQ(loaded.seed, p.seed);
    EXPECT_LT(std::filesystem::file_size(r.case_file), m == 8 ? 100000u : 20000u);
    expand_seeded_case(loaded);
    EXPECT_EQ(loaded.a, p.a);
    EXPECT_EQ(loaded.sfa, p.sfa);
    EXPECT_EQ(loaded.b, p.b);
    EXPECT_EQ(loaded.sfb, p.sfb);
    EXPECT_EQ(loaded.alpha, p.alpha);
    const CheckResult again = check_case(kernel("wrong_answer_host"), loaded, test_options());
    EXPECT_EQ(again.check, r.check);
    // Changed data is no longer its seed's expansion: it must be saved in full.
    Problem edited = p;
    edited.a[0] ^= 0x11;
    edited.data_from_seed = false;
    const CheckResult r2 = check_case(kernel("wrong_answer_host"), edited, test_options());
    ASSERT_EQ(r2.verdict, CheckResult::Verdict::fail);
    EXPECT_TRUE(read_case_file(r2.case_file).has_data());
  }
}

// The stale-state refill is drawn from a seed too, with the case's alpha kept.
TEST(RunnerStale, SeededRefillKeepsAlpha) {
  Problem p = make_problem(G, 19, 4, 96, 1, P, 778);
  p.alpha = 0.375f;
  RunOptions o = test_options();
  o.data_spec = "uniform/narrow/arbitrary";
  const CheckResult r = check_case(kernel("stale_cache_host"), p, o);
  ASSERT_EQ(r.verdict, CheckResult::Verdict::fail);
  EXPECT_EQ(r.check, "stale-state") << r.message;
  EXPECT_EQ(r.problem.alpha, 0.375f);
  EXPECT_TRUE(r.problem.data_from_seed);
  Problem loaded = read_case_file(r.case_file);
  expand_seeded_case(loaded);
  EXPECT_EQ(loaded.a, r.problem.a);
  EXPECT_EQ(loaded.alpha, 0.375f);
}

// run_kernel_once hands back what an honest kernel computed, and names a refusal.
TEST(RunnerOnce, ReturnsOutputAndNamesErrors) {
  const Problem p = make_problem(G, 7, 3, 32, 2, P, 5);
  const std::vector<uint16_t> c = run_kernel_once(kernel("honest_host"), p);
  EXPECT_EQ(static_cast<int64_t>(c.size()), p.c_elems());
  Problem refused = make_problem(G, 5, 3, 32, 1, P, 6);
  EXPECT_THROW(run_kernel_once(kernel("honest_m4_host"), refused), std::runtime_error);
}

TEST(RunnerUnsupportedReason, NamesTheConstraint) {
  const Kernel& k = kernel("honest_m4_host");
  Problem p = make_problem(G, 5, 3, 32, 1, P, 1);
  EXPECT_NE(unsupported_reason(*k.info, p).find("m_multiple"), std::string::npos);
  p = make_problem(G, 8, 3, 32, 1, P, 1);
  EXPECT_EQ(unsupported_reason(*k.info, p), "");
}

}  // namespace
}  // namespace nvfp4
