// The statistical part of rule 7 (SPEC.md section 3) for quantizers that declare
// NVFP4_FLAG_STOCHASTIC: the kernel is called again with other seeds, and the codes over those
// seeds must vary where an honest random source varies them, never be all zero for a nonzero
// block, and average to x * os within a Hoeffding bound (quantize_stochastic.cc writes it out).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/judge/checks.h"
#include "harness/process/kernel_call.h"
#include "reference/quantize.h"

namespace nvfp4::quantize_op {

// How many other seeds a stochastic case is called with, and the case's false-alarm probability
// for an honest kernel (all of its statistical tests together).
constexpr int kStochasticSeeds = 32;
constexpr double kStochasticFalseAlarm = 1e-9;
// Each draw's probability of rounding up may differ from the exact fraction by this much (a
// generator with 8 random bits; the `fast` window's os moves x * os by far less).
constexpr double kStochasticSlack = 1.0 / 256;

// The i-th other seed of a case (never the case's own; the same for every run of the case).
uint64_t other_seed(uint64_t case_seed, int i);

// One call's output bytes under `seed`.
struct SeedRun {
  uint64_t seed = 0;
  std::vector<uint8_t> q, sfq;
};

// "" when every run passes rule 7 and the runs together pass its statistical part; else what
// was wrong (a run's wrong code or scale, or the block and what its codes did over the seeds:
// constant, all zero, biased).
std::string stochastic_failure(const Problem& p, const QuantResult& ref, const std::vector<SeedRun>& runs,
                               uint8_t padding);

// The calls' observations (in `seeds`' order) judged: how each call ended, then
// stochastic_failure. No finding when every check holds.
std::optional<Finding> stochastic_finding(const Problem& p, const QuantResult& ref, const std::vector<uint64_t>& seeds,
                                          const std::vector<CallObservation>& obs, uint8_t padding);

}  // namespace nvfp4::quantize_op
