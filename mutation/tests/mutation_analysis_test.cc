// Mutation analysis in ctest (label `mutants`): every mutant of one memory kind (host: cpu, CUDA:
// gpu, chosen at compile time) must be killed by the suite within the 200-case budget; every
// honest kernel and the unmutated controls must pass; the weaker checks' inputs are what
// mutation.h says they are, and they raise no false alarm on the control either.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "harness/process/worker.h"
#include "mutation/mutation_driver.h"
#include "mutation/honest/rounding.h"
#include "kernels/registry.h"
#include "reference/fp16.h"

#ifndef NVFP4_TEST_CUDA
#error "NVFP4_TEST_CUDA must be 0 (host kernels) or 1 (CUDA kernels)"
#endif

namespace nvfp4 {
namespace {

constexpr uint64_t kSeed = 20261130;  // fixed, so CI runs the same cases every time

const Registry& plugins() {
  static const Registry r = [] {
    Registry reg;
    reg.load_plugin(NVFP4_MUTANTS_PLUGIN);
    reg.load_plugin(NVFP4_HONEST_PLUGIN);
    return reg;
  }();
  return r;
}

std::vector<std::string> names(bool mutants) {
  std::vector<std::string> out;
  for (const Kernel& k : plugins().kernels()) {
    if (k.is_cuda() != (NVFP4_TEST_CUDA != 0)) continue;
    if (k.name().rfind("big_", 0) == 0) continue;  // killed only by a case past these budgets
    if ((k.name().rfind("mut_", 0) == 0) == mutants) out.push_back(k.name());
  }
  return out;
}

const Kernel& kernel(const std::string& name) {
  const Kernel* k = plugins().find(name);
  if (!k) throw std::runtime_error("no kernel " + name);
  return *k;
}

// Each kernel is called in a worker process of the nvfp4check program, as the analysis does.
WorkerExecutor executor_for(const Kernel& k) {
  setenv("NVFP4CHECK_PROGRAM", NVFP4CHECK_EXE, 1);
  return WorkerExecutor(kernel_worker_command(k.name(), {k.origin}, kDefaultCallTimeout), kDefaultCallTimeout);
}

MutationOptions options() {
  MutationOptions o;
  o.seed = kSeed;
  o.case_dir = "nvfp4check-cases/mutants-test";
  return o;
}

// A macro, not a function: GTEST_SKIP() has to return from the test body itself.
#define SKIP_UNLESS_RUNNABLE(k)                                                     \
  do {                                                                              \
    std::string why_not;                                                            \
    if (!kernel_runnable(k, &why_not)) GTEST_SKIP() << (k).name() << " cannot run here: " << why_not; \
    why_not = unschedulable(describe_kernel(k));                                    \
    if (!why_not.empty()) GTEST_SKIP() << (k).name() << ": " << why_not;           \
  } while (0)

std::string param_name(const testing::TestParamInfo<std::string>& info) { return info.param; }

class Mutant : public testing::TestWithParam<std::string> {};

TEST_P(Mutant, KilledBySuiteWithinBudget) {
  const Kernel& k = kernel(GetParam());
  SKIP_UNLESS_RUNNABLE(k);
  WorkerExecutor executor = executor_for(k);
  const CheckOutcome out = suite_check(executor, options(), 200);
  EXPECT_TRUE(out.failed) << k.name() << " survived " << out.cases << " suite cases (seed " << kSeed << ")";
  if (out.failed) {
    std::printf("%s: killed by %s after %lld case(s), %.2fs\n  %s\n", k.name().c_str(), out.check.c_str(),
                static_cast<long long>(out.cases), out.seconds, out.case_desc.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Plugin, Mutant, testing::ValuesIn(names(true)), param_name);

class Honest : public testing::TestWithParam<std::string> {};

// Small shapes: many cases through every distribution in little time.
TEST_P(Honest, NoFalseAlarm) {
  const Kernel& k = kernel(GetParam());
  SKIP_UNLESS_RUNNABLE(k);
  MutationOptions o = options();
  o.small_shapes = true;
  WorkerExecutor executor = executor_for(k);
  const CheckOutcome out = suite_check(executor, o, 60);
  EXPECT_FALSE(out.failed) << k.name() << ": " << out.check << ": " << out.message << "\n  " << out.case_desc
                           << "\n  " << out.case_file;
  EXPECT_EQ(out.cases, 60);
}

INSTANTIATE_TEST_SUITE_P(Plugin, Honest, testing::ValuesIn(names(false)), param_name);

// The output-type edges: a BF16 kernel clamping overflow to the largest finite value and an FP32
// one flushing subnormal outputs to zero die within 100 cases whatever the seed (the schedule puts
// outputs past BF16's and FP32's overflow threshold and among their subnormals).
TEST(OutputEdges, SatfiniteAndFlushToZeroDieWithin100CasesOnTenSeeds) {
  const std::string engine = NVFP4_TEST_CUDA ? "mut_cuda_" : "mut_host_";
  for (const std::string bug : {"bf16_satfinite", "fp32_ftz"}) {
    const Kernel& k = kernel(engine + bug);
    SKIP_UNLESS_RUNNABLE(k);
    WorkerExecutor executor = executor_for(k);
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      MutationOptions o = options();
      o.seed = seed;
      const CheckOutcome out = suite_check(executor, o, 100);
      EXPECT_TRUE(out.failed) << k.name() << " survived 100 cases with seed " << seed;
      if (out.failed) std::printf("%s, seed %llu: killed by %s at case %lld\n", k.name().c_str(),
                                  static_cast<unsigned long long>(seed), out.check.c_str(),
                                  static_cast<long long>(out.cases));
    }
  }
}

// The weaker checks are only a fair comparison if a correct kernel passes them.
TEST(WeakChecks, ControlPassesBoth) {
  const Kernel& k = kernel(NVFP4_TEST_CUDA ? "ctl_cuda_unmutated" : "ctl_host_unmutated");
  SKIP_UNLESS_RUNNABLE(k);
  WorkerExecutor executor = executor_for(k);
  const CheckOutcome gpu_mode = gpu_mode_check(executor, options(), 6);
  EXPECT_FALSE(gpu_mode.failed) << gpu_mode.check << ": " << gpu_mode.message;
  const CheckOutcome kernelbench = kernelbench_check(executor, options());
  EXPECT_FALSE(kernelbench.failed) << kernelbench.check << ": " << kernelbench.message;
  EXPECT_EQ(kernelbench.cases, 5);
}

#if !NVFP4_TEST_CUDA
TEST(WeakChecks, GpuModeInputsAreTheirs) {
  nvfp4_kernel_info info{};
  info.ops = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
  info.sf_layouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
  Rng rng(kSeed);
  std::set<uint8_t> scales;
  for (int c = 0; c < 20; ++c) {
    const Problem p = gpu_mode_problem(rng, c % 2 ? Op::gemm : Op::gemv, info);
    EXPECT_EQ(p.m % 128, 0);
    EXPECT_EQ(p.k % 64, 0);
    EXPECT_EQ(p.sf_layout, SfLayout::permuted);
    if (p.op == Op::gemm) {
      EXPECT_EQ(p.n % 128, 0);
    }
    for (uint8_t v : p.a) ASSERT_LT(v, 4);
    for (uint8_t v : p.b) ASSERT_LT(v, 4);
    scales.insert(p.sfa.begin(), p.sfa.end());
    scales.insert(p.sfb.begin(), p.sfb.end());
  }
  EXPECT_EQ(scales, (std::set<uint8_t>{0x00, 0x38, 0x40}));  // E4M3 0, 1, 2
}

TEST(WeakChecks, KernelBenchInputsAreFixedShapeRandomData) {
  nvfp4_kernel_info info{};
  info.ops = 1u << NVFP4_OP_GEMM;
  info.sf_layouts = 1u << NVFP4_SF_LINEAR;
  Rng rng(kSeed);
  const Problem p = kernelbench_problem(rng, Op::gemm, info);
  EXPECT_EQ(p.m, 256);
  EXPECT_EQ(p.n, 128);
  EXPECT_EQ(p.k, 512);
  std::set<uint8_t> codes;
  for (uint8_t v : p.a) {
    codes.insert(v & 0xF);
    codes.insert(v >> 4);
  }
  EXPECT_EQ(codes.size(), 16u);
  for (uint8_t s : p.sfa) {
    EXPECT_EQ(s & 0x80, 0);
    EXPECT_NE(s & 0x7F, 0x7F);
  }
}

// The honest kernels' FP16 conversion against the reference's single rounding.
TEST(Rounding, Fp16FromDoubleMatchesReference) {
  Rng rng(kSeed);
  for (int t = 0; t < 200000; ++t) {
    // Random significands over the whole FP16 range and beyond, both signs.
    const uint64_t sig = rng() >> 11;  // 53 bits
    if (sig == 0) continue;             // the reference's exact zero is +0 whatever the sign
    const int exp2 = static_cast<int>(rng() % 64) - 80;
    const bool negative = rng() & 1;
    const double v = std::ldexp(static_cast<double>(sig), exp2) * (negative ? -1 : 1);
    ASSERT_EQ(kern::fp16_from_double(v), fp16_round(negative, static_cast<u128>(sig), exp2))
        << "v = " << v;
    // Toward zero: never above |v| in magnitude, and within one ulp below.
    const uint16_t rz = kern::fp16_from_double(v, kern::Fp16Rounding::toward_zero);
    const double back = kern::float_from_fp16(rz);
    ASSERT_LE(std::fabs(back), std::fabs(v));
  }
}

TEST(Rounding, AddTowardZeroNeverRoundsAway) {
  Rng rng(kSeed);
  for (int t = 0; t < 200000; ++t) {
    const float a = std::ldexp(static_cast<float>(rng() % (1u << 24)), static_cast<int>(rng() % 20) - 10) *
                    ((rng() & 1) ? -1.0f : 1.0f);
    const float b = std::ldexp(static_cast<float>(rng() % (1u << 24)), static_cast<int>(rng() % 20) - 10) *
                    ((rng() & 1) ? -1.0f : 1.0f);
    // Exact in double: both operands span at most 24 + 20 bits together.
    const double exact = static_cast<double>(a) + static_cast<double>(b);
    const float s = kern::add_toward_zero(a, b);
    if (exact == 0) {
      ASSERT_EQ(s, 0.0f);
      continue;
    }
    ASSERT_LE(std::fabs(static_cast<double>(s)), std::fabs(exact)) << a << " + " << b;
    // Within one FP32 ulp of the exact sum.
    ASSERT_LT(std::fabs(exact - s), std::ldexp(1.0, std::ilogb(exact) - 23)) << a << " + " << b;
  }
}
#endif

}  // namespace
}  // namespace nvfp4
