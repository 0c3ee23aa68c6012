// The GEMM family with block-scaled output (see the header).
#include "harness/ops/block_scaled_output.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/draw/generators.h"
#include "harness/judge/checks.h"
#include "reference/block_scaled_output.h"
#include "reference/scale_layout.h"

namespace nvfp4::block_scaled_out {
namespace {

uint8_t poison_byte(uint32_t poison) { return static_cast<uint8_t>(poison & 0xFFu); }

// The padding byte a correct kernel leaves in the permuted SFQ's padding cells.
uint8_t expected_padding(const CallContext& x) {
  return (x.kernel_flags & NVFP4_FLAG_SF_PADDING_KEPT) ? x.pad : uint8_t{0x00};
}

// The call's output words split back into each unit's Q and SFQ bytes, in the order lay_out
// made the buffers: Q then SFQ of the whole output, or of each non-empty group in turn.
struct Outputs {
  OutUnit unit;
  size_t group = 0;  // grouped GEMM: the unit's group
  std::vector<uint8_t> q, sfq;
};
std::vector<Outputs> split(const Problem& p, const std::vector<uint32_t>& words) {
  std::vector<Outputs> all;
  const std::vector<OutUnit> units = out_units(p);
  size_t at = 0;
  for (size_t g = 0; g < units.size(); ++g) {
    const OutUnit& u = units[g];
    if (u.m == 0) continue;
    Outputs o{u, g, {}, {}};
    const size_t q = static_cast<size_t>(u.q_bytes());
    // One unit: SFQ is the rest (a permuted SFQ's padding included).
    const size_t sfq = op_is_grouped(p.op) ? static_cast<size_t>(u.sfq_bytes(p.sf_layout)) : words.size() - std::min(words.size(), q);
    if (words.size() < at + q + sfq) return all;
    o.q.assign(words.begin() + static_cast<std::ptrdiff_t>(at), words.begin() + static_cast<std::ptrdiff_t>(at + q));
    o.sfq.assign(words.begin() + static_cast<std::ptrdiff_t>(at + q), words.begin() + static_cast<std::ptrdiff_t>(at + q + sfq));
    at += q + sfq;
    all.push_back(std::move(o));
  }
  return all;
}

}  // namespace

std::string unsupported_reason(const nvfp4_kernel_info& info, const Problem& p) {
  if (info.abi_version < 3) return "the kernel predates ABI version 3, which has block-scaled output";
  if (!((info.recipes >> static_cast<uint32_t>(p.out_recipe)) & 1u))
    return fmt::format("the kernel does not declare the {} recipe", to_string(p.out_recipe));
  // Each group's Q and SFQ travel in the nvfp4_group_out table beside the separate arrangement's
  // group table; the packed arrangement has no place for them.
  if (op_is_grouped(p.op) && (info.flags & NVFP4_FLAG_GROUPS_PACKED))
    return "grouped GEMM with block-scaled output is laid out in the separate arrangement only";
  return "";
}

namespace {

// Q and SFQ of one unit, poisoned; the permuted SFQ's padding cells hold the call's padding byte:
// a kernel must write 0x00 there (or leave them, declaring NVFP4_FLAG_SF_PADDING_KEPT).
void add_unit_outputs(LaidOut& in, const Problem& p, const CallSpec& spec, const OutUnit& u, const std::string& at) {
  const uint8_t poison = poison_byte(spec.poison);
  in.outputs.push_back({"q" + at, u.q_bytes(), 1, std::vector<uint8_t>(static_cast<size_t>(u.q_bytes()), poison)});
  std::vector<uint8_t> sfq(static_cast<size_t>(u.sfq_linear_bytes()), poison);
  if (p.sf_layout == SfLayout::permuted) sfq = sf_to_permuted(sfq.data(), u.m, u.nb(), u.l, spec.pad);
  const int64_t words = static_cast<int64_t>(sfq.size());
  in.outputs.push_back({"sfq" + at, words, 1, std::move(sfq)});
}

}  // namespace

void lay_out(LaidOut& in, const Problem& p, const CallSpec& spec) {
  in.outputs.clear();
  if (op_is_grouped(p.op)) {
    // Each group's global scale travels in the group_out table (the caller builds it).
    const std::vector<OutUnit> units = out_units(p);
    for (size_t g = 0; g < units.size(); ++g)
      if (units[g].m != 0) add_unit_outputs(in, p, spec, units[g], fmt::format("[g={}]", g));
    return;
  }
  const OutUnit u = out_units(p).front();
  std::vector<uint8_t> gs(sizeof(float));
  std::memcpy(gs.data(), &u.global_scale, sizeof(float));
  in.inputs.push_back({"global_scale", GuardPattern::bytes, std::move(gs)});
  add_unit_outputs(in, p, spec, u, "");
}

std::vector<nvfp4_group_out> group_out_table(const Problem& p, const std::vector<uint8_t*>& outputs) {
  std::vector<nvfp4_group_out> table;
  size_t next = 0;
  for (const OutUnit& u : out_units(p)) {
    nvfp4_group_out t{};
    t.global_scale = u.global_scale;
    if (u.m != 0 && next + 2 <= outputs.size()) {
      t.q = outputs[next];
      t.sfq = outputs[next + 1];
      next += 2;
    }
    table.push_back(t);
  }
  return table;
}

void point_abi(nvfp4_problem& abi, const Problem& p, const std::vector<uint8_t*>& inputs,
               const std::vector<uint8_t*>& outputs) {
  abi.c = nullptr;
  abi.global_scale = reinterpret_cast<const float*>(inputs.back());
  abi.q = outputs[0];
  abi.sfq = outputs[1];
  abi.q_format = NVFP4_FORMAT_NVFP4;
  abi.recipe = static_cast<uint32_t>(p.out_recipe);
}

std::optional<Finding> judge(const CallContext& x, OracleSummary* summary) {
  const Problem& p = *x.problem;
  const uint8_t padding = expected_padding(x);
  summary->elements = static_cast<int64_t>(x.observation->c.size());
  std::optional<Finding> first;
  for (const Outputs& o : split(p, x.observation->c.words())) {
    const BlockOutJudgement j = judge_block_scaled(p, *x.reference, *x.policy, o.unit, o.q, o.sfq, padding);
    summary->exact_regime += j.exact_blocks;
    summary->failing += j.rule7.wrong_codes + j.rule7.wrong_scales + j.rule7.wrong_padding + j.interval_wrong_codes +
                        j.interval_wrong_scales;
    if (j.pass() || first) continue;
    // The text names the group (the unit) itself.
    first = Finding{Check::oracle, block_scaled_failure_text(p, *x.reference, o.unit, j, o.q, o.sfq, padding)};
  }
  return first;
}

namespace {

// Unit o's Q bytes and linear SFQ cells still holding the poison where the reference has another
// byte, replaced by the reference's; counted into left and left_sfq, the first Q byte into first.
void fill_unwritten(const Problem& p, const ExactResult& ref_gemm, uint8_t poison, Outputs& o, int64_t& left,
                    int64_t& left_sfq, int64_t& first) {
  const OutUnit& u = o.unit;
  const QuantResult ref = block_scaled_reference(p, ref_gemm, u);
  for (size_t e = 0; e < o.q.size() && e < ref.q.size(); ++e) {
    if (o.q[e] != poison || ref.q[e] == poison) continue;
    if (left++ == 0) first = static_cast<int64_t>(e);
    o.q[e] = ref.q[e];
  }
  for (int64_t e = 0; e < u.sfq_linear_bytes(); ++e) {
    const int64_t b = e / (u.m * u.nb()), i = e / u.nb() % u.m, s = e % u.nb();
    const int64_t at = p.sf_layout == SfLayout::permuted ? sf_permuted_offset(u.m, u.nb(), b, i, s) : e;
    if (o.sfq[static_cast<size_t>(at)] != poison || ref.sfq[static_cast<size_t>(e)] == poison) continue;
    ++left_sfq;
    o.sfq[static_cast<size_t>(at)] = ref.sfq[static_cast<size_t>(e)];
  }
}

}  // namespace

// Q bytes and linear SFQ cells still holding the poison where the reference has another byte,
// reported only when they explain the whole failure: with the reference's bytes there, rule 8
// accepts every unit's output (a code or scale byte may equal the poison by chance; any other
// failure is the oracle's to name).
std::optional<Finding> unwritten(const CallContext& x) {
  const Problem& p = *x.problem;
  const uint8_t poison = poison_byte(x.poison), padding = expected_padding(x);
  const auto passes = [&](const Outputs& o) {
    return judge_block_scaled(p, *x.reference, *x.policy, o.unit, o.q, o.sfq, padding).pass();
  };
  std::vector<Outputs> all = split(p, x.observation->c.words());
  const std::vector<OutUnit> units = out_units(p);
  if (all.size() != static_cast<size_t>(std::count_if(units.begin(), units.end(), [](const OutUnit& u) { return u.m != 0; })))
    return std::nullopt;
  int64_t left = 0, left_sfq = 0, first = -1;
  const Outputs* first_unit = nullptr;
  bool failed = false;
  for (Outputs& o : all) {
    if (passes(o)) continue;
    failed = true;
    const int64_t before = left;
    fill_unwritten(p, *x.reference, poison, o, left, left_sfq, first);
    if (!passes(o)) return std::nullopt;
    if (before == 0 && left > 0) first_unit = &o;
  }
  if (!failed || left + left_sfq == 0) return std::nullopt;
  const int64_t half = first_unit ? first_unit->unit.n / 2 : 1;
  return Finding{Check::unwritten_output,
                 fmt::format("left {} byte(s) of Q and {} scale byte(s) of SFQ unwritten (still the runner's poison "
                             "0x{:02x}){}",
                             left, left_sfq, poison,
                             first_unit ? fmt::format("; the first Q byte is {}{} (row {}, columns {}..{})",
                                                      op_is_grouped(p.op) ? fmt::format("group {}'s ", first_unit->group) : "",
                                                      first, first / half, 2 * (first % half), 2 * (first % half) + 1)
                                        : std::string())};
}

void draw_recipe(Draws& d, const nvfp4_kernel_info& info, Problem& p) {
  // An unsupported case may turn a GEMM kernel's case into a GEMV, whose n = 1 has no
  // block-scaled output: FP16 C then, outside the kernel's declaration twice.
  if (op_n_is_one(p.op)) {
    p.out_type = OutType::fp16;
    return;
  }
  std::vector<Recipe> recipes;
  for (Recipe r : {Recipe::te, Recipe::ref, Recipe::fast, Recipe::torchao})
    if ((info.recipes >> static_cast<uint32_t>(r)) & 1u) recipes.push_back(r);
  p.out_recipe = recipes.empty() ? Recipe::te : recipes[d.below(recipes.size())];
  p.out_global_scale = {1.0f};  // a valid problem until the data are drawn (draw_global_scale)
  const int64_t step = std::lcm<int64_t>(2, std::max<uint32_t>(1, info.n_multiple));
  if (p.n % 2 != 0) p.n = (p.n + step - 1) / step * step;
  for (Group& g : p.groups)
    if (g.n % 2 != 0) g.n = (g.n + step - 1) / step * step;
}

namespace {

// The recipe's global scale for an amax (SPEC section 2's conventions; torchao's is a decode scale).
float recipe_global_scale(Recipe r, float amax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0f;
  const float g = r == Recipe::torchao ? amax / 2688.0f : 2688.0f / amax;
  return std::isfinite(g) && g > 0 ? g : 1.0f;
}

}  // namespace

namespace {

// The largest |value| of the output (NaN elements left out), or of one group's output.
float output_amax(const ExactResult& ref, int64_t first, int64_t count) {
  float amax = 0;
  for (int64_t e = first; e < first + count; ++e) {
    float v;
    const uint32_t w = ref.word(static_cast<size_t>(e));
    std::memcpy(&v, &w, sizeof v);
    if (std::fabs(v) > amax) amax = std::fabs(v);
  }
  return amax;
}

// amax < 0: not computed (a case too large), a random power of two then.
float draw_one_scale(Draws& d, Recipe r, float amax) {
  const uint64_t how = d.below(4), factor = d.below(1024);
  const int pow2 = static_cast<int>(d.below(24)) - 12;
  if (amax < 0) return std::ldexp(1.0f, pow2);
  float g = recipe_global_scale(r, amax);
  // "Larger" and "smaller" as encode scales: torchao's decode scale goes the other way.
  const float up = r == Recipe::torchao ? 1.0f / 16 : 16.0f;
  if (how == 1) g *= up;
  if (how == 2) g /= up;
  if (how == 3) g *= 0.5f + static_cast<float>(factor) / 682.0f;
  return std::isfinite(g) && g > 0 ? g : 1.0f;
}

}  // namespace

void draw_global_scale(Draws& d, Problem& p) {
  const bool large = p.c_elems() > (int64_t(1) << 16);
  const std::optional<ExactResult> ref = large ? std::nullopt : std::optional<ExactResult>(exact_gemm(p));
  if (!op_is_grouped(p.op)) {
    p.out_global_scale = {draw_one_scale(d, p.out_recipe, ref ? output_amax(*ref, 0, p.c_elems()) : -1.0f)};
    return;
  }
  // One scale per group, each from its own group's amax: a kernel that encodes a group with
  // another group's scale writes other bytes. Where two draws coincide the later one moves by
  // 3/2 (not a power of two, which would leave the codes alone).
  p.out_global_scale.clear();
  for (const OutUnit& u : out_units(p)) {
    float g = draw_one_scale(d, p.out_recipe, ref ? output_amax(*ref, u.first, u.m * u.n) : -1.0f);
    while (std::find(p.out_global_scale.begin(), p.out_global_scale.end(), g) != p.out_global_scale.end()) g *= 1.5f;
    p.out_global_scale.push_back(g);
  }
}

int64_t output_words(const Problem& p) {
  int64_t words = 0;
  for (const OutUnit& u : out_units(p)) words += u.q_bytes() + std::max(u.sfq_linear_bytes(), u.sfq_bytes(SfLayout::permuted));
  return words;
}

std::vector<uint8_t> reference_order_bytes(const Problem& p, const std::vector<uint32_t>& words) {
  const std::vector<Outputs> all = split(p, words);
  const std::vector<OutUnit> units = out_units(p);
  if (all.size() != static_cast<size_t>(std::count_if(units.begin(), units.end(), [](const OutUnit& u) { return u.m != 0; })))
    throw std::invalid_argument("the output holds fewer bytes than Q and SFQ of every group");
  std::vector<uint8_t> bytes;
  for (const Outputs& o : all) bytes.insert(bytes.end(), o.q.begin(), o.q.end());
  for (const Outputs& o : all) {
    const OutUnit& u = o.unit;
    for (int64_t e = 0; e < u.sfq_linear_bytes(); ++e) {
      const int64_t b = e / (u.m * u.nb()), i = e / u.nb() % u.m, s = e % u.nb();
      bytes.push_back(o.sfq[static_cast<size_t>(p.sf_layout == SfLayout::permuted ? sf_permuted_offset(u.m, u.nb(), b, i, s) : e)]);
    }
  }
  return bytes;
}

}  // namespace nvfp4::block_scaled_out
