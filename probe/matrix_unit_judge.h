// Compares hardware results of the probe with the reference model, output by output, checks the
// accumulation rules on every vector, and searches a grid of candidate models for the ones the
// hardware agrees with (the approximation-and-refinement loop of Khattak and Mikaitis, automated).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probe/matrix_unit_vectors.h"

namespace nvfp4 {

// One output where hardware and model differ (or where a rule failed).
struct ProbeVector {
  std::string family;
  int64_t tile = 0;
  int i = 0, j = 0;
  std::vector<uint32_t> a, b;  // operand bits
  uint32_t c = 0, hardware = 0, model = 0;
  double exact = 0;  // c + sum a b, nearest double
};

struct FamilyTally {
  std::string name;
  int64_t vectors = 0;
  int64_t mismatches = 0;      // hardware != model
  int64_t hardware_exact = 0;  // hardware == the exact value rounded... exactly (no loss at all)
};

struct RuleTally {
  AccumulationRule rule{};
  int64_t applies = 0;       // vectors in the rule's domain
  int64_t exact_regime = 0;  // of those, in the exact regime
  int64_t violations = 0;    // of those, where the hardware broke the rule
  // Largest |d - exact| / (t u S) in the rounding regime: how much of the budget t' = t_factor t
  // the hardware used (u = 2^-23, t = addends).
  double worst_budget_used = 0;
  std::vector<ProbeVector> first;  // the first few violations
};

struct Judgement {
  int64_t vectors = 0, mismatches = 0;
  std::vector<FamilyTally> families;
  std::vector<ProbeVector> listed;  // the first max_listed mismatches
  RuleTally spec_rule;              // SPEC revision 2's provisional rule {22, 9}
  RuleTally instruction_rule;       // the rule the instruction table names (reference/accumulation.h)
};

Judgement judge(const ProbeTiles& tiles, const std::vector<uint32_t>& hardware, const MatrixUnitModel& model,
                const AccumulationRule& instruction_rule, size_t max_listed);

// Adds b's counts to a (families by name).
void merge(Judgement& a, const Judgement& b);

ProbeVector probe_vector(const ProbeTiles& tiles, int64_t t, int i, int j, uint32_t hardware, uint32_t model);

struct ModelFit {
  int64_t variants = 0;        // candidate models tried
  int64_t outputs = 0;         // outputs each was checked on
  std::vector<MatrixUnitModel> consistent;  // the variants with no mismatch
  // When none is consistent: the closest variants and their mismatch counts.
  std::vector<std::pair<MatrixUnitModel, int64_t>> closest;
};

// Outputs a model search checks: the first max_outputs of a data set, or every diagonal output
// (where the targeted families put their vectors).
struct FitData {
  const ProbeTiles* tiles;
  const std::vector<uint32_t>* hardware;
  int64_t max_outputs;
  bool diagonal_only;
};

// Every variant of `base` over kept_bits (base +-4 and 22..27), window and result rounding, block
// size (k, k/2, k/4), C entry, subnormal handling, zero sign, result precision (the base's and
// FP32's), overflow and the alignment floor (the base's or none), checked on the data.
ModelFit fit_models(const MatrixUnitModel& base, const std::vector<FitData>& data);

}  // namespace nvfp4
