// The GEMM family with block-scaled output (see the header).
#include "harness/ops/block_scaled_output.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

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

// The call's output words split back into Q's and SFQ's bytes (one unit: grouped GEMM is refused).
struct Outputs {
  std::vector<uint8_t> q, sfq;
};
Outputs split(const OutUnit& u, const std::vector<uint32_t>& words) {
  Outputs o;
  const size_t q = static_cast<size_t>(u.q_bytes());
  if (words.size() < q) return o;
  o.q.assign(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(q));
  o.sfq.assign(words.begin() + static_cast<std::ptrdiff_t>(q), words.end());
  return o;
}

}  // namespace

std::string unsupported_reason(const nvfp4_kernel_info& info, const Problem& p) {
  if (info.abi_version < 3) return "the kernel predates ABI version 3, which has block-scaled output";
  if (!((info.recipes >> static_cast<uint32_t>(p.out_recipe)) & 1u))
    return fmt::format("the kernel does not declare the {} recipe", to_string(p.out_recipe));
  // The per-group Q and SFQ of grouped GEMM travel in an nvfp4_group_out table the suite does not
  // build yet: such a case is never handed to a kernel.
  if (p.op == Op::grouped_gemm) return "grouped GEMM with block-scaled output is not yet laid out by the suite";
  return "";
}

void lay_out(LaidOut& in, const Problem& p, const CallSpec& spec) {
  const OutUnit u = out_units(p).front();
  std::vector<uint8_t> gs(sizeof(float));
  std::memcpy(gs.data(), &u.global_scale, sizeof(float));
  in.inputs.push_back({"global_scale", InputKind::global_scale, std::move(gs)});
  const uint8_t poison = poison_byte(spec.poison);
  in.outputs.clear();
  in.outputs.push_back({"q", u.q_bytes(), 1, std::vector<uint8_t>(static_cast<size_t>(u.q_bytes()), poison)});
  std::vector<uint8_t> sfq(static_cast<size_t>(u.sfq_linear_bytes()), poison);
  // The permuted SFQ's padding cells hold the call's padding byte: a kernel must write 0x00 there
  // (or leave them, declaring NVFP4_FLAG_SF_PADDING_KEPT).
  if (p.sf_layout == SfLayout::permuted) sfq = sf_to_permuted(sfq.data(), u.m, u.nb(), u.l, spec.pad);
  const int64_t words = static_cast<int64_t>(sfq.size());
  in.outputs.push_back({"sfq", words, 1, std::move(sfq)});
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
  const OutUnit u = out_units(p).front();
  const Outputs o = split(u, x.observation->c);
  const BlockOutJudgement j = judge_block_scaled(p, *x.reference, *x.policy, u, o.q, o.sfq, expected_padding(x));
  summary->elements = static_cast<int64_t>(x.observation->c.size());
  summary->exact_regime = j.exact_blocks;
  summary->failing = j.rule7.wrong_codes + j.rule7.wrong_scales + j.rule7.wrong_padding + j.interval_wrong_codes +
                     j.interval_wrong_scales;
  if (j.pass()) return std::nullopt;
  return Finding{Check::oracle,
                 block_scaled_failure_text(p, *x.reference, u, j, o.q, o.sfq, expected_padding(x))};
}

// Q bytes and linear SFQ cells still holding the poison where the reference has another byte,
// reported only when they explain the whole failure: with the reference's bytes there, rule 8
// accepts the output (a code or scale byte may equal the poison by chance; any other failure is
// the oracle's to name).
std::optional<Finding> unwritten(const CallContext& x) {
  const Problem& p = *x.problem;
  const OutUnit u = out_units(p).front();
  Outputs o = split(u, x.observation->c);
  const uint8_t poison = poison_byte(x.poison), padding = expected_padding(x);
  const QuantResult ref = block_scaled_reference(p, *x.reference, u);
  if (o.q.size() != ref.q.size() || judge_block_scaled(p, *x.reference, *x.policy, u, o.q, o.sfq, padding).pass())
    return std::nullopt;
  int64_t left = 0, first = -1, left_sfq = 0;
  for (size_t e = 0; e < o.q.size(); ++e) {
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
  if (left + left_sfq == 0 || !judge_block_scaled(p, *x.reference, *x.policy, u, o.q, o.sfq, padding).pass())
    return std::nullopt;
  return Finding{Check::unwritten_output,
                 fmt::format("left {} byte(s) of Q and {} scale byte(s) of SFQ unwritten (still the runner's poison "
                             "0x{:02x}){}",
                             left, left_sfq, poison,
                             first >= 0 ? fmt::format("; the first Q byte is {} (row {}, columns {}..{})", first,
                                                      first / (u.n / 2), 2 * (first % (u.n / 2)),
                                                      2 * (first % (u.n / 2)) + 1)
                                        : std::string())};
}

void draw_recipe(Draws& d, const nvfp4_kernel_info& info, Problem& p) {
  // An unsupported case may turn a GEMM kernel's case into a GEMV, whose n = 1 has no
  // block-scaled output: FP16 C then, outside the kernel's declaration twice.
  if (p.op == Op::gemv) {
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
}

namespace {

// The recipe's global scale for an amax (SPEC section 2's conventions; torchao's is a decode scale).
float recipe_global_scale(Recipe r, float amax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0f;
  const float g = r == Recipe::torchao ? amax / 2688.0f : 2688.0f / amax;
  return std::isfinite(g) && g > 0 ? g : 1.0f;
}

}  // namespace

void draw_global_scale(Draws& d, Problem& p) {
  const uint64_t how = d.below(4), factor = d.below(1024);
  const int pow2 = static_cast<int>(d.below(24)) - 12;
  if (p.c_elems() > (int64_t(1) << 16)) {
    p.out_global_scale = {std::ldexp(1.0f, pow2)};
    return;
  }
  const ExactResult ref = exact_gemm(p);
  float amax = 0;
  for (size_t e = 0; e < ref.size(); ++e) {
    float v;
    const uint32_t w = ref.word(e);
    std::memcpy(&v, &w, sizeof v);
    if (std::fabs(v) > amax) amax = std::fabs(v);  // NaN elements left out
  }
  float g = recipe_global_scale(p.out_recipe, amax);
  // "Larger" and "smaller" as encode scales: torchao's decode scale goes the other way.
  const float up = p.out_recipe == Recipe::torchao ? 1.0f / 16 : 16.0f;
  if (how == 1) g *= up;
  if (how == 2) g /= up;
  if (how == 3) g *= 0.5f + static_cast<float>(factor) / 682.0f;
  p.out_global_scale = {std::isfinite(g) && g > 0 ? g : 1.0f};
}

int64_t output_words(const Problem& p) {
  const OutUnit u = out_units(p).front();
  return u.q_bytes() + std::max(u.sfq_linear_bytes(), u.sfq_bytes(SfLayout::permuted));
}

}  // namespace nvfp4::block_scaled_out
