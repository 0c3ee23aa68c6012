// The probe's judge and model search (matrix_unit_judge.h).
#include "probe/matrix_unit_judge.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace nvfp4 {
namespace {

constexpr size_t kRuleExamples = 5;

void tally_rule(RuleTally& tally, const RuleVerdict& v, const DotFacts& facts, const ProbeTiles& tiles, int64_t t,
                int i, int j, uint32_t hw, uint32_t model) {
  if (!v.applies) return;
  ++tally.applies;
  if (v.exact_regime) ++tally.exact_regime;
  if (!v.holds) {
    ++tally.violations;
    if (tally.first.size() < kRuleExamples) tally.first.push_back(probe_vector(tiles, t, i, j, hw, model));
  }
  if (!v.exact_regime && facts.addends > 0 && facts.abs_sum > 0) {
    const double budget = v.error / (facts.addends * std::ldexp(1.0, -23) * facts.abs_sum);
    tally.worst_budget_used = std::max(tally.worst_budget_used, budget);
  }
}

void merge_rule(RuleTally& a, const RuleTally& b) {
  a.rule = b.rule;
  a.applies += b.applies;
  a.exact_regime += b.exact_regime;
  a.violations += b.violations;
  a.worst_budget_used = std::max(a.worst_budget_used, b.worst_budget_used);
  for (const ProbeVector& v : b.first)
    if (a.first.size() < kRuleExamples) a.first.push_back(v);
}

}  // namespace

ProbeVector probe_vector(const ProbeTiles& tiles, int64_t t, int i, int j, uint32_t hardware, uint32_t model) {
  const InstructionInfo& in = *tiles.instr;
  ProbeVector v;
  v.family = tiles.family_names[tiles.family[t]];
  v.tile = t;
  v.i = i;
  v.j = j;
  v.a.assign(tiles.row(t, i), tiles.row(t, i) + in.k);
  v.b.assign(tiles.col(t, j), tiles.col(t, j) + in.k);
  v.c = tiles.c_at(t, i, j);
  v.hardware = hardware;
  v.model = model;
  v.exact = dot_facts(in.model->operand, in.k, v.a.data(), v.b.data(), v.c).exact;
  return v;
}

Judgement judge(const ProbeTiles& tiles, const std::vector<uint32_t>& hardware, const MatrixUnitModel& model,
                const AccumulationRule& instruction_rule, size_t max_listed) {
  const InstructionInfo& in = *tiles.instr;
  const int nthreads = omp_get_max_threads();
  std::vector<Judgement> part(nthreads);
  for (Judgement& p : part) {
    p.families.resize(tiles.family_names.size());
    for (size_t f = 0; f < p.families.size(); ++f) p.families[f].name = tiles.family_names[f];
    p.spec_rule.rule = kMatrixUnitProvisionalRule;
    p.instruction_rule.rule = instruction_rule;
  }
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t t = 0; t < tiles.count; ++t) {
    Judgement& p = part[omp_get_thread_num()];
    FamilyTally& fam = p.families[tiles.family[t]];
    for (int i = 0; i < in.m; ++i)
      for (int j = 0; j < in.n; ++j) {
        const uint32_t* a = tiles.row(t, i);
        const uint32_t* b = tiles.col(t, j);
        const uint32_t c = tiles.c_at(t, i, j);
        const uint32_t hw = hardware[(t * in.m + i) * in.n + j];
        const uint32_t md = matrix_unit_dot(model, a, b, c);
        ++p.vectors;
        ++fam.vectors;
        if (!same_result(model.operand, hw, md)) {
          ++p.mismatches;
          ++fam.mismatches;
          if (p.listed.size() < max_listed) p.listed.push_back(probe_vector(tiles, t, i, j, hw, md));
        }
        const DotFacts facts = dot_facts(model.operand, in.k, a, b, c);
        if (!facts.special && facts.exact == (model.operand == MmaOperand::s8 ? static_cast<int32_t>(hw)
                                                                               : fp32_value(hw)))
          ++fam.hardware_exact;
        tally_rule(p.spec_rule, check_rule(kMatrixUnitProvisionalRule, model.operand, in.k, a, b, c, hw), facts, tiles, t, i, j,
                   hw, md);
        tally_rule(p.instruction_rule, check_rule(instruction_rule, model.operand, in.k, a, b, c, hw), facts, tiles, t,
                   i, j, hw, md);
      }
  }
  Judgement out = std::move(part[0]);
  for (int p = 1; p < nthreads; ++p) merge(out, part[p]);
  // Threads list mismatches in their own order: keep the earliest tiles.
  std::sort(out.listed.begin(), out.listed.end(), [](const ProbeVector& x, const ProbeVector& y) {
    return std::tie(x.tile, x.i, x.j) < std::tie(y.tile, y.i, y.j);
  });
  if (out.listed.size() > max_listed) out.listed.resize(max_listed);
  return out;
}

void merge(Judgement& a, const Judgement& b) {
  a.vectors += b.vectors;
  a.mismatches += b.mismatches;
  for (const FamilyTally& f : b.families) {
    auto it = std::find_if(a.families.begin(), a.families.end(), [&](const FamilyTally& x) { return x.name == f.name; });
    if (it == a.families.end()) {
      a.families.push_back(f);
    } else {
      it->vectors += f.vectors;
      it->mismatches += f.mismatches;
      it->hardware_exact += f.hardware_exact;
    }
  }
  a.listed.insert(a.listed.end(), b.listed.begin(), b.listed.end());
  merge_rule(a.spec_rule, b.spec_rule);
  merge_rule(a.instruction_rule, b.instruction_rule);
}

ModelFit fit_models(const MatrixUnitModel& base, const std::vector<FitData>& data) {
  // The grid, one axis at a time: every variant so far times every value of the next axis.
  std::vector<MatrixUnitModel> variants{base};
  auto axis = [&variants](const auto& values, auto set) {
    std::vector<MatrixUnitModel> next;
    for (const MatrixUnitModel& m : variants)
      for (const auto& v : values) {
        MatrixUnitModel x = m;
        set(x, v);
        next.push_back(x);
      }
    variants.swap(next);
  };
  std::set<int> kept{22, 23, 24, 25, 26, 27};  // the SPEC's assumption and around FP32's 24 bits
  for (int p = std::max(8, base.kept_bits - 4); p <= base.kept_bits + 4; ++p) kept.insert(p);
  axis(kept, [](MatrixUnitModel& m, int v) { m.kept_bits = v; });
  axis(std::vector<int>{0, 1, 2}, [](MatrixUnitModel& m, int v) { m.window_rounding = static_cast<WindowRounding>(v); });
  axis(std::vector<int>{0, 1}, [](MatrixUnitModel& m, int v) { m.result_rounding = static_cast<ResultRounding>(v); });
  axis(std::vector<int>{base.k, base.k / 2, base.k / 4}, [](MatrixUnitModel& m, int v) { m.block = v; });
  axis(std::vector<int>{0, 1}, [](MatrixUnitModel& m, int v) { m.c_entry = static_cast<CEntry>(v); });
  axis(std::vector<int>{0, 1, 2},
       [](MatrixUnitModel& m, int v) { m.subnormal_operands = static_cast<SubnormalOperands>(v); });
  axis(std::vector<int>{0, 1}, [](MatrixUnitModel& m, int v) { m.zero_sign = static_cast<ZeroSign>(v); });
  // Result precision: the base's, and FP32's where the base has fewer bits (Hopper's FP8 path).
  std::set<int> result_bits{base.result_fraction_bits, 23};
  axis(result_bits, [](MatrixUnitModel& m, int v) { m.result_fraction_bits = v; });
  axis(std::vector<bool>{true, false}, [](MatrixUnitModel& m, bool v) { m.overflow_to_inf = v; });
  axis(std::set<int>{base.alignment_floor, kNoAlignmentFloor}, [](MatrixUnitModel& m, int v) { m.alignment_floor = v; });
  // The outputs to check, as (tiles, tile, i, j, hardware).
  struct Output {
    const ProbeTiles* tiles;
    int64_t t;
    int i, j;
    uint32_t hw;
  };
  std::vector<Output> outputs;
  for (const FitData& d : data) {
    const InstructionInfo& in = *d.tiles->instr;
    int64_t taken = 0;
    for (int64_t t = 0; t < d.tiles->count && taken < d.max_outputs; ++t)
      for (int i = 0; i < in.m; ++i)
        for (int j = 0; j < in.n; ++j) {
          if (d.diagonal_only && i != j) continue;
          outputs.push_back({d.tiles, t, i, j, (*d.hardware)[(t * in.m + i) * in.n + j]});
          ++taken;
        }
  }
  ModelFit fit;
  fit.variants = static_cast<int64_t>(variants.size());
  fit.outputs = static_cast<int64_t>(outputs.size());
  std::vector<int64_t> first_miss(variants.size(), -1);
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t v = 0; v < variants.size(); ++v) {
    for (size_t o = 0; o < outputs.size(); ++o) {
      const Output& x = outputs[o];
      const uint32_t md =
          matrix_unit_dot(variants[v], x.tiles->row(x.t, x.i), x.tiles->col(x.t, x.j), x.tiles->c_at(x.t, x.i, x.j));
      if (!same_result(base.operand, x.hw, md)) {
        first_miss[v] = static_cast<int64_t>(o);
        break;
      }
    }
  }
  for (size_t v = 0; v < variants.size(); ++v)
    if (first_miss[v] < 0) fit.consistent.push_back(variants[v]);
  if (fit.consistent.empty()) {
    // Rank by mismatch count on a prefix (the variants that survived longest first).
    std::vector<size_t> order(variants.size());
    for (size_t v = 0; v < order.size(); ++v) order[v] = v;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return first_miss[x] > first_miss[y]; });
    order.resize(std::min<size_t>(order.size(), 24));
    std::vector<int64_t> misses(order.size(), 0);
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t r = 0; r < order.size(); ++r) {
      for (const Output& x : outputs) {
        const uint32_t md = matrix_unit_dot(variants[order[r]], x.tiles->row(x.t, x.i), x.tiles->col(x.t, x.j),
                                            x.tiles->c_at(x.t, x.i, x.j));
        misses[r] += !same_result(base.operand, x.hw, md);
      }
    }
    std::vector<size_t> rank(order.size());
    for (size_t r = 0; r < rank.size(); ++r) rank[r] = r;
    std::sort(rank.begin(), rank.end(), [&](size_t x, size_t y) { return misses[x] < misses[y]; });
    for (size_t r = 0; r < std::min<size_t>(rank.size(), 6); ++r)
      fit.closest.emplace_back(variants[order[rank[r]]], misses[rank[r]]);
  }
  return fit;
}

}  // namespace nvfp4
