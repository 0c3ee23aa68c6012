// The GPU's matrix units against reference/matrix_unit_model, bit for bit, on the probe's targeted
// families and a fixed seeded random set per instruction, and the instruction's accumulation rule
// on every vector in the rule's domain. Skipped, with the reason, where the instruction cannot run.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <string>

#include "probe/matrix_unit_judge.h"
#include "probe/matrix_unit_probe.h"

namespace nvfp4 {

// The instruction's name where gtest and ctest print the parameter (not the pointer).
void PrintTo(const InstructionInfo* info, std::ostream* os) { *os << info->name; }

namespace {

constexpr uint64_t kSeed = 1212;
constexpr int64_t kRandomVectors = 100000;

struct ProbeRun {
  Judgement targeted, random;
};

// One GPU run per instruction, shared by the tests below.
const ProbeRun& run_once(const InstructionInfo& in) {
  static std::map<std::string, ProbeRun> runs;
  auto it = runs.find(in.name);
  if (it != runs.end()) return it->second;
  const ProbeTiles targeted = targeted_tiles(in);
  const ProbeTiles random = random_tiles(in, kSeed, kRandomVectors);
  ProbeRun r;
  r.targeted = judge(targeted, run_on_device(targeted), *in.model, in.single_instruction_rule, 5);
  r.random = judge(random, run_on_device(random), *in.model, in.single_instruction_rule, 5);
  return runs.emplace(in.name, std::move(r)).first->second;
}

std::string listing(const std::vector<ProbeVector>& vs) {
  std::string s;
  char buf[160];
  for (const ProbeVector& v : vs) {
    std::snprintf(buf, sizeof buf, "\n  %s tile %lld (%d,%d): c=%08x hardware=%08x model=%08x exact=%.17g",
                  v.family.c_str(), static_cast<long long>(v.tile), v.i, v.j, v.c, v.hardware, v.model, v.exact);
    s += buf;
  }
  return s;
}

class MatrixUnitProbe : public ::testing::TestWithParam<const InstructionInfo*> {
 protected:
  void SetUp() override {
    std::string why;
    if (!instruction_available(*GetParam(), &why)) GTEST_SKIP() << why;
  }
};

TEST_P(MatrixUnitProbe, HardwareEqualsModelBitForBit) {
  const InstructionInfo& in = *GetParam();
  const ProbeRun& r = run_once(in);
  EXPECT_GT(r.random.vectors, kRandomVectors - 1);
  EXPECT_EQ(r.targeted.mismatches, 0) << in.name << " (" << describe(*in.model) << "), targeted:"
                                      << listing(r.targeted.listed);
  EXPECT_EQ(r.random.mismatches, 0) << in.name << " (" << describe(*in.model) << "), seed " << kSeed << ":"
                                    << listing(r.random.listed);
}

TEST_P(MatrixUnitProbe, AccumulationRuleHoldsForEveryVector) {
  const InstructionInfo& in = *GetParam();
  const ProbeRun& r = run_once(in);
  for (const Judgement* j : {&r.targeted, &r.random}) {
    const RuleTally& t = j->instruction_rule;
    EXPECT_GT(t.applies, 0);
    EXPECT_EQ(t.violations, 0) << in.name << ": rule {" << t.rule.exact_bits << ", " << t.rule.t_factor
                               << "}, seed " << kSeed << listing(t.first);
  }
}

std::vector<const InstructionInfo*> all_instructions() {
  std::vector<const InstructionInfo*> v;
  for (const InstructionInfo& in : probe_instructions()) v.push_back(&in);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Instructions, MatrixUnitProbe, ::testing::ValuesIn(all_instructions()),
                         [](const ::testing::TestParamInfo<const InstructionInfo*>& info) {
                           return std::string(info.param->name);
                         });

}  // namespace
}  // namespace nvfp4
