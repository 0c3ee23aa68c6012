// matrix_unit_probe: executes single MMA instructions on targeted and seeded random operands,
// compares every output with reference/matrix_unit_model, checks the accumulation rules on every
// vector, optionally searches the candidate models the hardware agrees with, and reports as text
// and JSON (docs/MATRIX_UNITS.md shows the runs).
//
//   matrix_unit_probe [--seed S] [--vectors N] [--instructions mma_f16,wgmma_bf16,...] [--json FILE]
//                     [--fit] [--save-hardware DIR | --load-hardware DIR]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include "probe/matrix_unit_judge.h"
#include "probe/matrix_unit_probe.h"

namespace nvfp4 {
namespace {

using json = nlohmann::json;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

std::string hex_operands(const std::vector<uint32_t>& v, MmaOperand op) {
  std::string s;
  const int digits = op == MmaOperand::fp16 || op == MmaOperand::bf16 ? 4 : 2;
  for (uint32_t x : v) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%0*x", digits, x);
    if (!s.empty()) s += ' ';
    s += buf;
  }
  return s;
}

json vector_json(const ProbeVector& v, MmaOperand op) {
  return {{"family", v.family}, {"tile", v.tile}, {"i", v.i}, {"j", v.j}, {"a", hex_operands(v.a, op)},
          {"b", hex_operands(v.b, op)}, {"c", hex32(v.c)}, {"hardware", hex32(v.hardware)},
          {"model", hex32(v.model)}, {"exact", v.exact}};
}

std::string vector_text(const ProbeVector& v, MmaOperand op) {
  std::ostringstream s;
  s << "    " << v.family << " tile " << v.tile << " (" << v.i << "," << v.j << "): c=" << hex32(v.c)
    << " hw=" << hex32(v.hardware) << " (" << (op == MmaOperand::s8 ? static_cast<int32_t>(v.hardware) : fp32_value(v.hardware))
    << ") model=" << hex32(v.model) << " exact=" << v.exact << "\n      a=" << hex_operands(v.a, op)
    << "\n      b=" << hex_operands(v.b, op) << "\n";
  return s.str();
}

json rule_json(const RuleTally& r, MmaOperand op) {
  json j = {{"exact_bits", r.rule.exact_bits}, {"t_factor", r.rule.t_factor}, {"applies", r.applies},
            {"exact_regime", r.exact_regime}, {"violations", r.violations},
            {"worst_budget_used", r.worst_budget_used}, {"first_violations", json::array()}};
  for (const ProbeVector& v : r.first) j["first_violations"].push_back(vector_json(v, op));
  return j;
}

// The values each parameter takes among the consistent variants: the measured parameters.
json fit_summary(const ModelFit& fit) {
  std::set<int> p, blk, rf, fl;
  std::set<std::string> wr, rr, ce, sub, zs, ov;
  for (const MatrixUnitModel& m : fit.consistent) {
    const std::string d = describe(m);
    p.insert(m.kept_bits);
    blk.insert(m.block);
    auto field = [&](const char* key) {
      const size_t at = d.find(key);
      const size_t start = at + std::string(key).size();
      return d.substr(start, d.find(' ', start) - start);
    };
    wr.insert(field("window_rounding="));
    rr.insert(field("result_rounding="));
    ce.insert(field("c_entry="));
    sub.insert(field("subnormal_operands="));
    zs.insert(field("zero_sign="));
    ov.insert(field("overflow="));
    rf.insert(m.result_fraction_bits);
    fl.insert(m.alignment_floor);
  }
  json j = {{"variants", fit.variants}, {"outputs", fit.outputs}, {"consistent", fit.consistent.size()}};
  if (!fit.consistent.empty()) {
    j["kept_bits"] = p;
    j["block"] = blk;
    j["window_rounding"] = wr;
    j["result_rounding"] = rr;
    j["c_entry"] = ce;
    j["subnormal_operands"] = sub;
    j["zero_sign"] = zs;
    j["result_fraction_bits"] = rf;
    j["overflow"] = ov;
    j["alignment_floor"] = fl;
  }
  for (const auto& [m, misses] : fit.closest) j["closest"].push_back({{"model", describe(m)}, {"mismatches", misses}});
  return j;
}

// Raw hardware results: a header, then the targeted and the random outputs as little-endian u32.
struct SavedHeader {
  char magic[8];
  uint64_t seed, vectors, targeted_outputs, random_outputs;
};

void save_hardware(const std::string& path, uint64_t seed, uint64_t vectors, const std::vector<uint32_t>& t,
                   const std::vector<uint32_t>& r) {
  std::ofstream out(path, std::ios::binary);
  SavedHeader h{{'n', 'v', 'f', 'p', '4', 'm', 'u', '1'}, seed, vectors, t.size(), r.size()};
  out.write(reinterpret_cast<const char*>(&h), sizeof h);
  out.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 4));
  out.write(reinterpret_cast<const char*>(r.data()), static_cast<std::streamsize>(r.size() * 4));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void load_hardware(const std::string& path, uint64_t seed, uint64_t vectors, std::vector<uint32_t>& t,
                   std::vector<uint32_t>& r) {
  std::ifstream in(path, std::ios::binary);
  SavedHeader h{};
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  if (!in || std::string(h.magic, 8) != "nvfp4mu1") throw std::runtime_error(path + ": not a saved probe result");
  if (h.seed != seed || h.vectors != vectors)
    throw std::runtime_error(path + ": saved with --seed " + std::to_string(h.seed) + " --vectors " +
                             std::to_string(h.vectors) + "; run with the same");
  if (h.random_outputs != r.size()) throw std::runtime_error(path + ": random output counts differ from this build's");
  if (h.targeted_outputs != t.size()) {
    // Saved by a build with other targeted families: judge the random vectors alone.
    std::printf("%s: targeted families differ from this build's; judging the random vectors only\n", path.c_str());
    t.clear();
    in.seekg(static_cast<std::streamoff>(h.targeted_outputs * 4), std::ios::cur);
  } else {
    in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(t.size() * 4));
  }
  in.read(reinterpret_cast<char*>(r.data()), static_cast<std::streamsize>(r.size() * 4));
  if (!in) throw std::runtime_error(path + ": truncated");
}

// kept_bits sweep: for each distance d between 2^R and the small addend, whether the hardware kept
// it ('K'), dropped it ('.'), or gave something else ('?'); C = 0, positive small addend, m = 1.
std::string kept_bits_sweep(const ProbeTiles& tiles, const std::vector<uint32_t>& hw, const std::string& family,
                            bool negative) {
  const InstructionInfo& in = *tiles.instr;
  std::string s;
  for (int64_t t = 0; t < tiles.count; ++t) {
    if (tiles.family_names[tiles.family[t]] != family) continue;
    for (int d = 0; d < std::min(in.m, in.n); ++d) {
      const uint32_t* a = tiles.row(t, d);
      const uint32_t* b = tiles.col(t, d);
      bool any = false;
      double small = 0;
      for (int x = 0; x < in.k; ++x) {
        const double p = operand_value(in.model->operand, a[x]) * operand_value(in.model->operand, b[x]);
        if (p != 0) any = true;
        if (p != 0 && std::fabs(p) != std::fabs(small) && (small == 0 || std::fabs(p) < std::fabs(small))) small = p;
      }
      if (!any || (small < 0) != negative) continue;
      const double got = fp32_value(hw[(t * in.m + d) * in.n + d]);
      s += got == small ? 'K' : got == 0 ? '.' : '?';
    }
  }
  return s;
}

int run(int argc, char** argv) {
  CLI::App app{"Runs single MMA instructions against the bit-accurate matrix-unit model"};
  uint64_t seed = 20261201;
  int64_t vectors = 1000000;
  std::string instructions = "all", json_path, save_dir, load_dir;
  bool fit = false;
  int64_t fit_outputs = 20000;
  size_t max_listed = 20;
  app.add_option("--seed", seed, "seed of the random vectors (printed)");
  app.add_option("--vectors", vectors, "random vectors per instruction (each tile output is one)");
  app.add_option("--instructions", instructions, "comma-separated: mma_f16, mma_bf16, mma_s8, mma_s8_k16, wgmma_f16, "
                                                 "wgmma_bf16, wgmma_e4m3, wgmma_f16_ss, wgmma_bf16_ss, "
                                                 "wgmma_e4m3_ss, or all");
  app.add_option("--json", json_path, "write the full report as JSON");
  app.add_flag("--fit", fit, "search the candidate models consistent with the hardware");
  app.add_option("--fit-outputs", fit_outputs, "random outputs per instruction the search uses (plus all targeted)");
  app.add_option("--max-listed", max_listed, "mismatches listed per instruction");
  app.add_option("--save-hardware", save_dir, "write raw hardware results to DIR/<instruction>.bin");
  app.add_option("--load-hardware", load_dir, "judge saved hardware results instead of running the GPU");
  CLI11_PARSE(app, argc, argv);

  std::vector<const InstructionInfo*> selected;
  if (instructions == "all") {
    for (const InstructionInfo& i : probe_instructions()) selected.push_back(&i);
  } else {
    std::stringstream ss(instructions);
    std::string name;
    while (std::getline(ss, name, ',')) {
      const InstructionInfo* i = find_instruction(name);
      if (!i) {
        std::fprintf(stderr, "unknown instruction '%s'\n", name.c_str());
        return 2;
      }
      selected.push_back(i);
    }
  }
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  const std::string device = load_dir.empty() ? device_description() : "saved results from " + load_dir;
  std::printf("matrix_unit_probe: seed %llu, %lld random vectors per instruction, %s\ndevice: %s\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(vectors), date, device.c_str());
  json report = {{"seed", seed}, {"vectors_per_instruction", vectors}, {"date", date}, {"device", device},
                 {"instructions", json::array()}};
  struct Row {
    std::string name, status;
    int64_t vectors = 0, mismatches = 0, spec_violations = 0, rule_violations = 0, rule_applies = 0;
    AccumulationRule rule{};
    double budget = 0;
    size_t consistent = 0;
  };
  std::vector<Row> rows;
  bool all_match = true;

  for (const InstructionInfo* in : selected) {
    const MmaOperand op = in->model->operand;
    Row row;
    row.name = in->name;
    row.rule = in->single_instruction_rule;
    json ij = {{"name", in->name}, {"ptx", in->ptx}, {"model", describe(*in->model)}};
    std::string why;
    if (load_dir.empty() && !instruction_available(*in, &why)) {
      std::printf("\n== %s: skipped: %s\n", in->name, why.c_str());
      ij["skipped"] = why;
      report["instructions"].push_back(ij);
      row.status = "skipped";
      rows.push_back(row);
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ProbeTiles targeted = targeted_tiles(*in);
    const ProbeTiles random = random_tiles(*in, seed, vectors);
    std::vector<uint32_t> hw_t(static_cast<size_t>(targeted.outputs())), hw_r(static_cast<size_t>(random.outputs()));
    if (load_dir.empty()) {
      hw_t = run_on_device(targeted);
      hw_r = run_on_device(random);
    } else {
      load_hardware(load_dir + "/" + in->name + ".bin", seed, static_cast<uint64_t>(vectors), hw_t, hw_r);
      if (hw_t.empty()) {
        ProbeTiles none;
        none.instr = in;
        targeted = std::move(none);
      }
    }
    if (!save_dir.empty()) save_hardware(save_dir + "/" + in->name + ".bin", seed, static_cast<uint64_t>(vectors), hw_t, hw_r);
    const auto t1 = std::chrono::steady_clock::now();

    Judgement jt = judge(targeted, hw_t, *in->model, in->single_instruction_rule, max_listed);
    Judgement jr = judge(random, hw_r, *in->model, in->single_instruction_rule, max_listed);
    const auto t2 = std::chrono::steady_clock::now();
    std::printf("\n== %s (%s)\nmodel: %s\n", in->name, in->ptx, describe(*in->model).c_str());
    std::printf("targeted: %lld outputs in %lld tiles; random: %lld outputs in %lld tiles (%.1f s GPU+generation, %.1f s judge)\n",
                static_cast<long long>(jt.vectors), static_cast<long long>(targeted.count),
                static_cast<long long>(jr.vectors), static_cast<long long>(random.count),
                std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count());
    ij["targeted_outputs"] = jt.vectors;
    ij["random_outputs"] = jr.vectors;
    for (const auto* j : {&jt, &jr}) {
      const bool is_t = j == &jt;
      std::printf("  %-28s %10s %10s %10s\n", is_t ? "targeted family" : "random distribution", "vectors",
                  "hw!=model", "hw exact");
      for (const FamilyTally& f : j->families) {
        std::printf("  %-28s %10lld %10lld %10lld\n", f.name.c_str(), static_cast<long long>(f.vectors),
                    static_cast<long long>(f.mismatches), static_cast<long long>(f.hardware_exact));
        ij[is_t ? "targeted" : "random"][f.name] = {
            {"vectors", f.vectors}, {"mismatches", f.mismatches}, {"hardware_exact", f.hardware_exact}};
      }
    }
    if (op != MmaOperand::s8) {
      const std::string kp = kept_bits_sweep(targeted, hw_t, "kept_bits", false);
      const std::string kn = kept_bits_sweep(targeted, hw_t, "kept_bits", true);
      std::printf("  kept-bits sweep (d = 1, 2, ...; K kept, . dropped, ? other): +%s\n                                                   -%s\n",
                  kp.c_str(), kn.c_str());
      ij["kept_bits_sweep"] = {{"positive", kp}, {"negative", kn}};
    }
    Judgement all = jt;
    merge(all, jr);
    all.listed = jt.listed;
    for (const ProbeVector& v : jr.listed)
      if (all.listed.size() < max_listed) all.listed.push_back(v);
    if (all.mismatches) {
      all_match = false;
      std::printf("  MISMATCHES: %lld (first %zu)\n", static_cast<long long>(all.mismatches), all.listed.size());
      for (const ProbeVector& v : all.listed) std::printf("%s", vector_text(v, op).c_str());
    }
    ij["mismatches"] = all.mismatches;
    ij["mismatch_list"] = json::array();
    for (const ProbeVector& v : all.listed) ij["mismatch_list"].push_back(vector_json(v, op));
    for (const RuleTally* r : {&all.spec_rule, &all.instruction_rule}) {
      std::printf("  rule {exact_bits %d, t_factor %d}: %lld vectors in its domain, %lld in the exact regime, "
                  "%lld violations, worst error %.3g t u S\n",
                  r->rule.exact_bits, r->rule.t_factor, static_cast<long long>(r->applies),
                  static_cast<long long>(r->exact_regime), static_cast<long long>(r->violations), r->worst_budget_used);
      for (const ProbeVector& v : r->first) std::printf("%s", vector_text(v, op).c_str());
    }
    ij["spec_revision2_rule"] = rule_json(all.spec_rule, op);
    ij["instruction_rule"] = rule_json(all.instruction_rule, op);
    row.vectors = all.vectors;
    row.mismatches = all.mismatches;
    row.spec_violations = all.spec_rule.violations;
    row.rule_violations = all.instruction_rule.violations;
    row.rule_applies = all.instruction_rule.applies;
    row.budget = all.instruction_rule.worst_budget_used;
    row.status = all.mismatches ? "MISMATCH" : "match";
    if (fit && op != MmaOperand::s8) {
      const ModelFit mf = fit_models(*in->model, {{&targeted, &hw_t, INT64_MAX, true}, {&random, &hw_r, fit_outputs, false}});
      const json fj = fit_summary(mf);
      std::printf("  model search: %lld variants on %lld outputs: %zu consistent\n    %s\n",
                  static_cast<long long>(mf.variants), static_cast<long long>(mf.outputs), mf.consistent.size(),
                  fj.dump().c_str());
      ij["fit"] = fj;
      row.consistent = mf.consistent.size();
    }
    report["instructions"].push_back(ij);
    rows.push_back(row);
  }

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << report.dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 2;
    }
  }
  std::printf("\nsummary (seed %llu): hw!=model counts every output; rule = the instruction's single-instruction "
              "rule, SPEC r2 = {22, 9}\n%-14s %-9s %10s %10s %12s %12s %10s %10s\n",
              static_cast<unsigned long long>(seed), "instruction", "status", "vectors", "hw!=model", "rule", "violations",
              "SPEC r2", "fits");
  for (const Row& r : rows) {
    char rule[32];
    std::snprintf(rule, sizeof rule, "{%d, %d}", r.rule.exact_bits, r.rule.t_factor);
    std::printf("%-14s %-9s %10lld %10lld %12s %12lld %10lld %10zu\n", r.name.c_str(), r.status.c_str(),
                static_cast<long long>(r.vectors), static_cast<long long>(r.mismatches), rule,
                static_cast<long long>(r.rule_violations), static_cast<long long>(r.spec_violations), r.consistent);
  }
  return all_match ? 0 : 1;
}

}  // namespace
}  // namespace nvfp4

int main(int argc, char** argv) {
  try {
    return nvfp4::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "matrix_unit_probe: %s\n", e.what());
    return 2;
  }
}
