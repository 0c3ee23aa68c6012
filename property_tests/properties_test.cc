// The property suite: one test per property, each run by RapidCheck over every kernel under test
// that the property applies to (the built-ins that can run here and any plugins). Adding a
// kernel adds no code here.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "property_tests/properties.h"

namespace nvfp4::prop {
namespace {

// "; left out: gemv_naive: no CUDA device, ..." when kernels were left out, else "".
std::string left_out_summary() {
  std::string text;
  for (const std::string& why : kernels_left_out()) text += (text.empty() ? "; left out: " : ", ") + why;
  return text;
}

// What RC_GTEST_PROP expands to (rc::detail::checkGTest on the property body), with one line in
// front: a property that applies to no kernel under test (a GPU run without a device, a layout no
// kernel offers) is skipped with the reason instead of passing on nothing.
#define NVFP4_PROPERTY(TestName, property)                                                  \
  TEST(Property, TestName) {                                                                \
    std::vector<const Kernel*> applicable;                                                  \
    for (const Kernel* k : kernels()) {                                                     \
      if ((property).applies(*k)) applicable.push_back(k);                                  \
    }                                                                                       \
    if (applicable.empty()) {                                                               \
      GTEST_SKIP() << "no kernel under test that property " << (property).name              \
                   << " applies to (" << kernels().size() << " kernels under test"          \
                   << left_out_summary() << ")";                                            \
    }                                                                                       \
    ::rc::detail::checkGTest([&] { check_all_kernels(property, applicable); });             \
  }

NVFP4_PROPERTY(AgreesWithExactReference, kAgreesWithReference)
NVFP4_PROPERTY(DoublingScalesOfARowDoublesThatRow, kDoublingRowScalesDoublesRow)
NVFP4_PROPERTY(PermutingBlocksConsistentlyKeepsC, kPermutingBlocksKeepsC)
NVFP4_PROPERTY(BatchesAreIndependent, kBatchesAreIndependent)
NVFP4_PROPERTY(RowsAndColumnsAreIndependent, kRowsAndColumnsIndependent)
NVFP4_PROPERTY(NegatingBNegatesC, kNegatingBNegatesC)
NVFP4_PROPERTY(LinearAndPermutedLayoutsAgree, kLayoutsAgree)
NVFP4_PROPERTY(GemmWithNOneEqualsGemv, kGemmWithNOneIsGemv)
NVFP4_PROPERTY(NanInPaddingNeverReachesC, kNanPaddingNeverReachesC)
NVFP4_PROPERTY(UnsupportedShapesAreRefusedUntouched, kUnsupportedIsRefused)
NVFP4_PROPERTY(RunnerChecksHoldOnEveryCase, kRunnerChecksHold)
NVFP4_PROPERTY(EveryDeclaredProblemAgreesWithExactReference, kEveryProblemAgreesWithReference)
NVFP4_PROPERTY(QuantizedCodesWithinHalfAGridStep, kQuantizedWithinHalfStep)
NVFP4_PROPERTY(PowerOfTwoScalingMovesOnlyTheScales, kPowerOfTwoMovesOnlyScales)

}  // namespace
}  // namespace nvfp4::prop
