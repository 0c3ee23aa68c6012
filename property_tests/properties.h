// The properties, each a check of ONE kernel on one drawn case. The property tests
// run each over every kernel under test; the shrinking test runs them on deliberately broken
// kernels. A check fails the current RapidCheck case through fail_case (which keeps the case).
#pragma once

#include <string>
#include <vector>

#include "property_tests/property_support.h"

namespace nvfp4::prop {

struct Property {
  const char* name;                      // as in notes and messages, e.g. "agrees-with-reference"
  bool (*applies)(const Kernel& k);      // whether the property says anything about k
  void (*check)(const Kernel& k, Draws& d, CaseTags& tags);
};

extern const Property kAgreesWithReference;        // 1
extern const Property kDoublingRowScalesDoublesRow;  // 2
extern const Property kPermutingBlocksKeepsC;      // 3
extern const Property kBatchesAreIndependent;      // 4
extern const Property kRowsAndColumnsIndependent;  // 5
extern const Property kNegatingBNegatesC;          // 6
extern const Property kLayoutsAgree;               // 7
extern const Property kGemmWithNOneIsGemv;         // 8
extern const Property kNanPaddingNeverReachesC;    // 9
extern const Property kUnsupportedIsRefused;       // 10
extern const Property kRunnerChecksHold;           // 11
extern const Property kEveryProblemAgreesWithReference;  // 12: grouped, dual, BF16, FP32, quantize too
extern const Property kQuantizedWithinHalfStep;          // 13: quantizers
extern const Property kPowerOfTwoMovesOnlyScales;        // 14: quantizers

// One RapidCheck case of a property: every kernel it applies to gets its own drawn case.
void check_all_kernels(const Property& property, const std::vector<const Kernel*>& ks);

}  // namespace nvfp4::prop
