// The property suite finds and shrinks real bugs: deliberately broken host kernels (test-only, not
// in the registry) must fail the properties they break, and the shrunk case RapidCheck leaves
// must be a few dozen bytes of data. An honest twin of the same code passes every property, so
// the failures come from the bugs and not from the harness.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>  // getpid

#include "harness/judge/case_check.h"
#include "kernels/block_scaled_decode.h"
#include "kernels/host/fp16_from_float.h"
#include "property_tests/properties.h"
#include "reference/case_file.h"

namespace nvfp4::prop {
namespace {

enum class Bug { none, drops_last_partial_block, ignores_k_multiple, reads_batch_zero_of_b };

constexpr uint32_t kBothOps = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
constexpr uint32_t kLinear = 1u << NVFP4_SF_LINEAR;

const nvfp4_kernel_info kInfos[] = {
    {NVFP4_ABI_VERSION, "honest_linear_test", NVFP4_MEMORY_HOST, kBothOps, kLinear, 0, 1, 1, 1, 0, 0, 0},
    {NVFP4_ABI_VERSION, "drops_last_partial_block", NVFP4_MEMORY_HOST, kBothOps, kLinear, 0, 1, 1, 1, 0, 0, 0},
    // Declares k % 32 == 0 but computes every k anyway instead of answering UNSUPPORTED.
    {NVFP4_ABI_VERSION, "ignores_k_multiple", NVFP4_MEMORY_HOST, kBothOps, kLinear, 0, 1, 1, 32, 0, 0, 0},
    {NVFP4_ABI_VERSION, "reads_batch_zero_of_b", NVFP4_MEMORY_HOST, kBothOps, kLinear, 0, 1, 1, 1, 0, 0, 0},
};
const Bug kBugs[] = {Bug::none, Bug::drops_last_partial_block, Bug::ignores_k_multiple,
                     Bug::reads_batch_zero_of_b};

int count() { return 4; }
const nvfp4_kernel_info* get(int i) { return i >= 0 && i < 4 ? &kInfos[i] : nullptr; }

// A plain FP32-accumulating NVFP4 GEMM over the linear scale layout, with one bug switched in.
int run(int index, const nvfp4_problem* p) {
  const nvfp4_kernel_info& info = kInfos[index];
  const Bug bug = kBugs[index];
  if (!((info.ops >> p->op) & 1u) || p->sf_layout != NVFP4_SF_LINEAR) return NVFP4_UNSUPPORTED;
  if (p->op == NVFP4_OP_GEMV && p->n != 1) return NVFP4_UNSUPPORTED;
  if (bug != Bug::ignores_k_multiple && p->k % info.k_multiple != 0) return NVFP4_UNSUPPORTED;
  const int64_t m = p->m, n = p->n, k = p->k, l = p->l, kb = (k + 15) / 16;
  int64_t blocks = kb;
  if (bug == Bug::drops_last_partial_block && k % 16 != 0) blocks = kb - 1;
  for (int64_t b = 0; b < l; ++b) {
    const int64_t bb = bug == Bug::reads_batch_zero_of_b ? 0 : b;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t* arow = p->a + (b * m + i) * (k / 2);
        const uint8_t* brow = p->b + (bb * n + j) * (k / 2);
        float acc = 0.0f;
        for (int64_t s = 0; s < blocks; ++s) {
          float block = 0.0f;
          for (int64_t x = 16 * s; x < std::min<int64_t>(16 * s + 16, k); ++x) {
            block += kern::e2m1_to_float(kern::e2m1_code(arow, x)) * kern::e2m1_to_float(kern::e2m1_code(brow, x));
          }
          const float sa = kern::e4m3_to_float(p->sfa[(b * m + i) * kb + s], false);
          const float sb = kern::e4m3_to_float(p->sfb[(bb * n + j) * kb + s], false);
          acc += block * (sa * sb);
        }
        p->c[(b * m + i) * n + j] = kern::fp16_from_float(p->alpha * acc);
      }
    }
  }
  return NVFP4_OK;
}

const Registry& test_kernels() {
  static const Registry reg = [] {
    Registry r;
    r.add_provider(count, get, run, "shrinking_test");
    return r;
  }();
  return reg;
}

// Regressions of this test go to a scratch directory, never into the corpus.
class Shrinking : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("nvfp4_shrinking_" + std::to_string(getpid()));
    setenv("NVFP4_REGRESSIONS_DIR", dir_.c_str(), 1);
    clear_pending_regression();
  }
  void TearDown() override {
    unsetenv("NVFP4_REGRESSIONS_DIR");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Runs one property on one kernel through RapidCheck with a fixed budget (the seed is the
  // configured one, printed); returns whether it passed.
  static bool check(const Property& property, const std::string& kernel, int cases) {
    const Kernel* k = test_kernels().find(kernel);
    EXPECT_NE(k, nullptr);
    rc::detail::TestParams params = rc::detail::configuration().testParams;
    params.maxSuccess = cases;
    params.maxSize = 100;
    rc::detail::TestMetadata metadata;
    metadata.id = std::string(property.name) + "/" + kernel;
    metadata.description = metadata.id;
    std::cout << "checking " << metadata.id << " (RapidCheck seed " << params.seed << ")\n";
    const auto result = rc::detail::checkTestable([&] { check_all_kernels(property, {k}); }, metadata, params);
    rc::detail::printResultMessage(result, std::cout);
    std::cout << "\n";
    return result.template is<rc::detail::SuccessResult>();
  }

  // The saved shrunk case: its path, text and data size in bytes.
  static Problem saved_case(std::string* text) {
    const std::optional<std::string> path = save_pending_regression();
    EXPECT_TRUE(path.has_value()) << "a failing property leaves its shrunk case";
    if (!path) return Problem{};
    Problem p = read_case_file(*path);
    *text = write_case(p);
    std::cout << "shrunk case " << *path << ":\n" << *text;
    return p;
  }

  static int64_t data_bytes(const Problem& p) {
    return static_cast<int64_t>(p.a.size() + p.b.size() + p.sfa.size() + p.sfb.size());
  }

  std::filesystem::path dir_;
};

// The draws behind every property are uniform at every RapidCheck size (its own integer
// generators are not: they grow with size and skew small) and shrink straight toward 0.
TEST(RcDraws, UniformAtEverySizeAndShrinkTowardZero) {
  for (int size : {0, 1, 10, 50, 100}) {
    std::vector<int> counts(256, 0);
    rc::Random random(0x5eed + size);
    for (int i = 0; i < 256 * 200; ++i) counts[uniform_byte()(random.split(), size).value()]++;
    for (int c = 0; c < 256; ++c) ASSERT_NEAR(counts[c], 200, 70) << "byte " << c << " at size " << size;
    std::vector<int> below(7, 0);
    for (int i = 0; i < 7000; ++i) below[uniform_below(7)(random.split(), size).value()]++;
    for (int v : below) ASSERT_NEAR(v, 1000, 150) << "size " << size;
  }
  rc::Random random(7);
  for (int i = 0; i < 50; ++i) {
    const auto shrinkable = uniform_byte()(random.split(), 0);
    if (shrinkable.value() == 0) continue;
    const auto first = shrinkable.shrinks().next();
    ASSERT_TRUE(static_cast<bool>(first));
    EXPECT_EQ(first->value(), 0) << "the first shrink of any byte is 0";
  }
}

TEST_F(Shrinking, DroppedPartialBlockIsCaughtAndShrunkToAFewBytes) {
  EXPECT_FALSE(check(kAgreesWithReference, "drops_last_partial_block", 300));
  std::string text;
  const Problem p = saved_case(&text);
  EXPECT_LE(data_bytes(p), 36) << "shrinks to a few dozen bytes of data";
  EXPECT_NE(p.k % 16, 0) << "the shrunk case has a partial last block: the bug's trigger";
  EXPECT_NE(text.find("RapidCheck seed"), std::string::npos) << "the note carries the seed";
  // The shrunk case is a real reproducer: the runner fails the broken kernel on it and passes
  // its honest twin.
  InProcessExecutor broken(*test_kernels().find("drops_last_partial_block"), kDefaultCallTimeout);
  InProcessExecutor honest(*test_kernels().find("honest_linear_test"), kDefaultCallTimeout);
  EXPECT_EQ(check_case(broken, p, {}).verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_case(honest, p, {}).verdict, CaseOutcome::Verdict::pass);
}

TEST_F(Shrinking, IgnoredUnsupportedShapeIsCaughtAndShrunk) {
  EXPECT_FALSE(check(kUnsupportedIsRefused, "ignores_k_multiple", 100));
  std::string text;
  const Problem p = saved_case(&text);
  EXPECT_NE(p.k % 32, 0) << "a k off the declared multiple";
  EXPECT_LE(data_bytes(p), 36);
}

TEST_F(Shrinking, BatchIndexBugIsCaughtByBatchIndependence) {
  EXPECT_FALSE(check(kBatchesAreIndependent, "reads_batch_zero_of_b", 200));
  std::string text;
  const Problem p = saved_case(&text);
  EXPECT_GE(p.l, 2);
  EXPECT_LE(data_bytes(p), 48);
}

// The control: the same code without a bug passes every property that applies to it (it offers
// the linear layout only, so the layout and padding properties do not).
TEST_F(Shrinking, HonestTwinPassesEveryProperty) {
  for (const Property* property :
       {&kAgreesWithReference, &kDoublingRowScalesDoublesRow, &kPermutingBlocksKeepsC, &kBatchesAreIndependent,
        &kRowsAndColumnsIndependent, &kNegatingBNegatesC, &kGemmWithNOneIsGemv, &kRunnerChecksHold}) {
    EXPECT_TRUE(check(*property, "honest_linear_test", 40)) << property->name;
    EXPECT_FALSE(save_pending_regression().has_value()) << property->name;
  }
}

}  // namespace
}  // namespace nvfp4::prop
