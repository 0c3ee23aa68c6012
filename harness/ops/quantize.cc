// The quantize op (SPEC.md section 2, rule 7): a kernel that turns X (FP16, BF16 or FP32) into
// block-scaled codes Q and scales SFQ by a named recipe. Everything the suite does that is
// particular to it is here: what a kernel declares for it, its buffers (X and the global scale
// in, Q and SFQ out, SFQ's padding poisoned before the call), its ABI fields, its oracle, its
// stale data and its draws, which aim at the decisions a quantizer makes (E4M3 scale midpoints,
// E2M1 code boundaries, E8M0 binade edges, zero, NaN and Inf blocks and tensors).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "harness/judge/case_check.h"
#include "harness/judge/checks.h"
#include "harness/ops/op_module.h"
#include "harness/draw/schedule.h"
#include "reference/quantize.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace quantize_op {
namespace {

bool has_global_scale(const Problem& p) { return p.q_format == BlockFormat::nvfp4; }
uint32_t declared_formats(const nvfp4_kernel_info& info) {
  return info.q_formats ? info.q_formats : (1u << NVFP4_FORMAT_NVFP4);
}

// The options the kernel's flags fix (the ABI problem has no field for them).
std::string flag_mismatch(const nvfp4_kernel_info& info, const Problem& p) {
  const auto says = [&](uint32_t flag, bool has, const char* flag_name, const char* with, const char* without) {
    const bool declared = info.flags & flag;
    if (declared == has) return std::string();
    return fmt::format("the kernel {} {} but the case has {}", declared ? "declares" : "does not declare", flag_name,
                       has ? with : without);
  };
  for (std::string why : {says(NVFP4_FLAG_QUANT_2D, p.quant_2d, "NVFP4_FLAG_QUANT_2D", "16 x 16 tiles", "1 x 16 blocks"),
                          says(NVFP4_FLAG_ROW_GLOBAL_SCALE, p.row_global_scale, "NVFP4_FLAG_ROW_GLOBAL_SCALE",
                               "one global scale per row", "one global scale"),
                          says(NVFP4_FLAG_STOCHASTIC, p.stochastic_seed.has_value(), "NVFP4_FLAG_STOCHASTIC",
                               "stochastic rounding", "round-to-nearest codes")})
    if (!why.empty()) return why;
  return "";
}

std::string unsupported_reason(const nvfp4_kernel_info& info, const Problem& p) {
  if (info.abi_version < 3 || !((info.ops >> NVFP4_OP_QUANTIZE) & 1u)) return "the kernel does not declare op quantize";
  if (!((declared_formats(info) >> static_cast<uint32_t>(p.q_format)) & 1u))
    return fmt::format("the kernel does not declare the {} format", to_string(p.q_format));
  if (!((info.in_types >> static_cast<uint32_t>(p.in_type)) & 1u))
    return fmt::format("the kernel does not declare the {} input type", to_string(p.in_type));
  if (!((info.recipes >> static_cast<uint32_t>(p.recipe)) & 1u))
    return fmt::format("the kernel does not declare the {} recipe", to_string(p.recipe));
  if (!((info.sf_layouts >> static_cast<uint32_t>(p.sf_layout)) & 1u))
    return fmt::format("the kernel does not declare the {} scale layout", to_string(p.sf_layout));
  if (info.m_multiple > 1 && p.m % info.m_multiple != 0)
    return fmt::format("m = {} is not a multiple of the declared m_multiple {}", p.m, info.m_multiple);
  if (info.k_multiple > 1 && p.k % info.k_multiple != 0)
    return fmt::format("k = {} is not a multiple of the declared k_multiple {}", p.k, info.k_multiple);
  return flag_mismatch(info, p);
}

bool probes_refusal(const nvfp4_kernel_info& info, const Problem& p) {
  return info.abi_version >= 3 && ((info.ops >> NVFP4_OP_QUANTIZE) & 1u) && flag_mismatch(info, p).empty();
}

std::vector<uint8_t> float_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Run 1's and run 2's poison as a byte (a quantizer's outputs are bytes).
uint8_t poison_byte(uint32_t poison) { return static_cast<uint8_t>(poison & 0xFFu); }

LaidOut lay_out(const Problem& p, const CallSpec& spec, uint32_t) {
  LaidOut in;
  in.inputs.push_back({"x", GuardPattern::bytes, {}, &p.x});
  if (has_global_scale(p)) in.inputs.push_back({"global_scale", GuardPattern::bytes, float_bytes(quantize_global_scales(p))});
  const uint8_t poison = poison_byte(spec.poison);
  in.outputs.push_back({"q", p.q_bytes(), 1, std::vector<uint8_t>(static_cast<size_t>(p.q_bytes()), poison)});
  std::vector<uint8_t> sfq(static_cast<size_t>(p.sfq_bytes()), poison);
  // The permuted SFQ's padding cells hold the call's padding byte: a kernel must write 0x00 there
  // (or leave them, declaring NVFP4_FLAG_SF_PADDING_KEPT).
  if (p.sf_layout == SfLayout::permuted) sfq = sf_to_permuted(sfq.data(), p.m, p.qkb(), p.l, spec.pad);
  const int64_t sfq_words = static_cast<int64_t>(sfq.size());
  in.outputs.push_back({"sfq", sfq_words, 1, std::move(sfq)});
  return in;
}

void point_abi(nvfp4_problem& abi, const Problem& p, const std::vector<uint8_t*>& inputs,
               const std::vector<uint8_t*>& outputs) {
  abi.n = 1;
  abi.alpha = 1.0f;
  abi.a = abi.b = abi.sfa = abi.sfb = nullptr;
  abi.c = nullptr;
  abi.out_type = 0;
  abi.a_format = abi.b_format = 0;
  abi.in_type = static_cast<uint32_t>(p.in_type);
  abi.x = inputs[0];
  abi.global_scale = has_global_scale(p) ? reinterpret_cast<const float*>(inputs[1]) : nullptr;
  abi.q = outputs[0];
  abi.sfq = outputs[1];
  abi.q_format = static_cast<uint32_t>(p.q_format);
  abi.recipe = static_cast<uint32_t>(p.recipe);
  abi.seed = p.stochastic_seed.value_or(0);
}

// The call's output words split back into Q's and SFQ's bytes (SFQ in p's layout).
struct Outputs {
  std::vector<uint8_t> q, sfq;
};
Outputs split(const Problem& p, const OutputWords& words) {
  Outputs o;
  const size_t q = static_cast<size_t>(p.q_bytes());
  if (words.size() < q) return o;
  if (words.byte_wide()) {
    const std::vector<uint8_t>& b = words.bytes();
    o.q.assign(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(q));
    o.sfq.assign(b.begin() + static_cast<std::ptrdiff_t>(q), b.end());
    return o;
  }
  const std::vector<uint32_t>& w = words.words();
  o.q.assign(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(q));
  o.sfq.assign(w.begin() + static_cast<std::ptrdiff_t>(q), w.end());
  return o;
}

// The chain check: what a consumer of the quantizer's output sees. A GEMV whose A is the
// kernel's Q with its SFQ read in the declared layout, against a B of ones (every product is
// a*sa exactly), row by row against the same GEMV on the reference quantization. A quantizer
// that writes another layout than it declares (vllm PR #42089: linear scales where the GEMM
// reads swizzled ones) shows here as the consumer's wrong rows, and when reading SFQ in the other
// layout makes them right, the text says so. "" when the consumer sees the right values.
std::string chain_text(const Problem& p, const QuantResult& ref, const Outputs& o) {
  if (p.q_format != BlockFormat::nvfp4 || o.sfq.empty()) return "";
  Problem g;
  g.op = Op::gemv;
  g.m = p.m, g.n = 1, g.k = p.k, g.l = p.l;
  g.sf_layout = SfLayout::linear;
  g.b.assign(static_cast<size_t>(g.b_bytes()), 0x22);     // E2M1 1.0 in both nibbles
  g.sfb.assign(static_cast<size_t>(g.sfb_bytes()), 0x38);  // E4M3 1.0
  g.a = ref.q;
  g.sfa = ref.sfq;
  const ExactResult want = exact_gemm(g);
  const auto consumer = [&](SfLayout read_as) {
    Problem c = g;
    c.a = o.q;
    c.sfa = read_as == SfLayout::permuted ? sf_to_linear(o.sfq.data(), p.m, p.qkb(), p.l)
                                          : std::vector<uint8_t>(o.sfq.begin(), o.sfq.begin() + p.sfq_bytes());
    const ExactResult got = exact_gemm(c);
    int64_t wrong = 0, first = -1;
    for (size_t e = 0; e < want.size(); ++e)
      if (!same_result_out(OutType::fp16, want.word(e), got.word(e)) && wrong++ == 0) first = static_cast<int64_t>(e);
    return std::make_pair(wrong, first);
  };
  const auto [wrong, first] = consumer(p.sf_layout);
  if (wrong == 0) return "";
  std::string t = fmt::format("; a GEMV consuming Q and SFQ in the declared {} layout (B all ones) gets {} of {} rows "
                              "wrong, the first row {}",
                              to_string(p.sf_layout), wrong, want.size(), first);
  const SfLayout other = p.sf_layout == SfLayout::permuted ? SfLayout::linear : SfLayout::permuted;
  if (static_cast<int64_t>(o.sfq.size()) >= p.sfq_bytes() && consumer(other).first == 0)
    t += fmt::format(": read in the {} layout instead, every row is right: the kernel writes {} scales while it "
                     "declares {} ones",
                     to_string(other), to_string(other), to_string(p.sf_layout));
  return t;
}

uint8_t expected_padding(const CallContext& x) {
  return (x.kernel_flags & NVFP4_FLAG_SF_PADDING_KEPT) ? x.pad : uint8_t{0x00};
}

std::optional<Finding> judge(const CallContext& x, OracleSummary* summary) {
  const Problem& p = *x.problem;
  const Outputs o = split(p, x.observation->c);
  const QuantJudgement j = judge_quantize(p, *x.reference->quant, o.q, o.sfq, expected_padding(x));
  summary->elements = static_cast<int64_t>(x.observation->c.size());
  summary->failing = j.wrong_codes + j.wrong_scales + j.wrong_padding;
  summary->exact_regime = summary->elements;
  if (j.pass()) return std::nullopt;
  summary->first_b = j.b, summary->first_i = j.i, summary->first_j = j.s;
  // The reference's global scales, not X's amax taken again (a huge case's pass over 2^31 elements).
  return Finding{Check::oracle,
                 quantize_failure_text(p, j, o.q, o.sfq, expected_padding(x), &x.reference->quant->global_scale) +
                     chain_text(p, *x.reference->quant, o)};
}

// The bytes of Q and of SFQ (linear positions) still holding the poison where the reference has
// another byte.
struct PoisonLeft {
  std::vector<int64_t> q, sfq;
};
PoisonLeft poison_left(const Problem& p, const QuantResult& ref, const Outputs& o, uint8_t poison) {
  PoisonLeft left;
  for (size_t e = 0; e < o.q.size(); ++e)
    if (o.q[e] == poison && ref.q[e] != poison) left.q.push_back(static_cast<int64_t>(e));
  const std::vector<uint8_t> sfq =
      p.sf_layout == SfLayout::permuted ? sf_to_linear(o.sfq.data(), p.m, p.qkb(), p.l) : o.sfq;
  for (size_t e = 0; e < sfq.size() && e < ref.sfq.size(); ++e)
    if (sfq[e] == poison && ref.sfq[e] != poison) left.sfq.push_back(static_cast<int64_t>(e));
  return left;
}

// Whether the poison left explains the whole failure: with those bytes as the reference's, rule 7
// accepts the outputs.
bool poison_explains(const Problem& p, const QuantResult& ref, Outputs o, const PoisonLeft& left, uint8_t padding) {
  for (int64_t e : left.q) o.q[static_cast<size_t>(e)] = ref.q[static_cast<size_t>(e)];
  const int64_t kb = p.qkb();
  for (int64_t e : left.sfq) {
    const int64_t b = e / (p.m * kb), i = e / kb % p.m, s = e % kb;
    const int64_t at = p.sf_layout == SfLayout::permuted ? sf_permuted_offset(p.m, kb, b, i, s) : e;
    o.sfq[static_cast<size_t>(at)] = ref.sfq[static_cast<size_t>(e)];
  }
  return judge_quantize(p, ref, o.q, o.sfq, padding).pass();
}

// A byte equal to the poison may also be what the kernel wrote (a `fast` code inside rule 7's
// window, a NaN element's code, a scale byte that happens to be the poison's value in the wrong
// place): the output counts as unwritten only where rule 7 rejects it and the poison left
// explains the whole failure;
// any other failure is the oracle's to name, and a byte left as it was shows in the other run,
// whose poison differs.
std::optional<Finding> unwritten(const CallContext& x) {
  const Problem& p = *x.problem;
  const QuantResult& ref = *x.reference->quant;
  const Outputs o = split(p, x.observation->c);
  const uint8_t poison = poison_byte(x.poison);
  const PoisonLeft left = poison_left(p, ref, o, poison);
  const uint8_t padding = expected_padding(x);
  if ((left.q.empty() && left.sfq.empty()) || judge_quantize(p, ref, o.q, o.sfq, padding).pass() ||
      !poison_explains(p, ref, o, left, padding))
    return std::nullopt;
  if (!left.q.empty()) {
    const int64_t first = left.q.front();
    return Finding{Check::unwritten_output,
                   fmt::format("left {} byte(s) of Q unwritten (still the runner's poison 0x{:02x}); the first is byte {} "
                               "(row {}, elements {}..{}), due 0x{:02x}",
                               left.q.size(), poison, first, first / (p.q_bytes() / (p.l * p.m)),
                               packs_nibbles(p.q_format) ? 2 * (first % (p.k / 2)) : first % p.k,
                               packs_nibbles(p.q_format) ? 2 * (first % (p.k / 2)) + 1 : first % p.k, ref.q[first])};
  }
  const int64_t first = left.sfq.front();
  return Finding{Check::unwritten_output,
                 fmt::format("left {} scale byte(s) of SFQ unwritten (still the runner's poison 0x{:02x}); the first is "
                             "row {}, block {}, due 0x{:02x}",
                             left.sfq.size(), poison, first / p.qkb(), first % p.qkb(), ref.sfq[first])};
}

// Rotates the rows of X (l*m rows of k words) by r and negates every element: codes change sign
// and move, scales move with their rows, so a kernel that keeps anything of the call before by
// pointer shows it. In place (undo: the inverse), so the kernel's process derives it from X.
// The rotation in rows: whole 16-row tiles move together so 2D tiles stay tiles; rows past the
// last whole unit stay where they are.
struct StaleRotation {
  int64_t unit_bytes = 0, units = 0, r = 0;
};
StaleRotation stale_rotation(const Problem& q, uint64_t seed) {
  const int64_t unit = q.quant_2d ? 16 : 1, units = q.l * q.m / unit;
  StaleRotation t{unit * q.k * in_word_bytes(q.in_type), units, 0};
  if (units > 1) t.r = 1 + static_cast<int64_t>(splitmix64(seed ^ 0x51A7E) % static_cast<uint64_t>(units - 1));
  return t;
}

void negate_all(const Problem& q, uint8_t* x) {
  const int64_t width = in_word_bytes(q.in_type), elements = q.l * q.m * q.k;
#pragma omp parallel for schedule(static) if (elements > (int64_t(1) << 20))
  for (int64_t e = 0; e < elements; ++e) x[e * width + width - 1] ^= 0x80;
}

// Rotates the `size` bytes at first left by `by`: the smaller side through a copy and one memmove
// (std::rotate on bytes moves them one at a time); in place where that side would be a large
// allocation (a huge case's X).
void rotate_bytes(uint8_t* first, size_t by, size_t size) {
  const size_t right = size - by;
  if (std::min(by, right) > (size_t(1) << 26)) {
    std::rotate(first, first + by, first + size);
  } else if (by <= right) {
    const std::vector<uint8_t> head(first, first + by);
    std::memmove(first, first + by, right);
    std::copy(head.begin(), head.end(), first + right);
  } else {
    const std::vector<uint8_t> tail(first + by, first + size);
    std::memmove(first + right, first, by);
    std::copy(tail.begin(), tail.end(), first);
  }
}

void stale_in_place(Problem& q, uint64_t seed, bool undo) {
  negate_all(q, q.x.data());
  const StaleRotation t = stale_rotation(q, seed);
  if (t.r == 0) return;
  rotate_bytes(q.x.data(), static_cast<size_t>((undo ? t.units - t.r : t.r) * t.unit_bytes),
               static_cast<size_t>(t.units * t.unit_bytes));
}

StaleVariant stale_variant(const Problem& p, const ExactResult&, uint64_t seed) {
  StaleVariant v;
  Problem& q = v.problem;
  q = p;
  clear_expect(q);
  q.data_from_seed = false;
  q.seed.reset();
  q.generator.clear();
  q.note = "stale-state data of " + (p.note.empty() ? std::string("a case") : p.note);
  // stale_in_place's data, moved from p's rows into q's in one parallel pass (a huge case's X
  // rotated in place is one thread's work).
  const StaleRotation t = stale_rotation(q, seed);
  if (t.r > 0) {
#pragma omp parallel for schedule(static) if (t.units * t.unit_bytes > (int64_t(1) << 22))
    for (int64_t u = 0; u < t.units; ++u)
      std::memcpy(q.x.data() + u * t.unit_bytes, p.x.data() + ((u + t.r) % t.units) * t.unit_bytes,
                  static_cast<size_t>(t.unit_bytes));
  }
  negate_all(q, q.x.data());
  v.reference = exact_quantize(q);
  return v;
}

std::string shape_text(const Problem& p) {
  return fmt::format("{}x{}x{} {}->{} {}{}{}", p.m, p.k, p.l, to_string(p.in_type), to_string(p.q_format),
                     to_string(p.recipe), p.quant_2d ? " 16x16" : "", p.row_global_scale ? " per-row" : "");
}

void module_draw(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints&, const ShapeLimits& limits,
                 const Shape*, Op, CasePlan& plan) {
  // The shape and data classes the schedule drew are the GEMM family's; a quantizer's data
  // classes aim at its own decisions.
  plan.kind = CaseKind::small;
  draw(d, info, limits, plan);
}

void module_draw_data(Draws& d, const nvfp4_kernel_info&, DrawnCase& out) {
  // X from a seed drawn here: its classes are the module's, named by the generator.
  out.problem.seed = d.below(uint64_t(1) << 62);
  fill_x(out.problem);
}

void expand_seed(Problem& p) {
  // Explicit X wins like every tensor.
  if (static_cast<int64_t>(p.x.size()) == p.x_bytes()) return;
  fill_x(p);
  p.data_from_seed = true;
}

int64_t output_words(const Problem& p) {
  return p.q_bytes() + std::max(p.sfq_bytes(), sf_permuted_bytes(p.m, p.qkb(), p.l));
}

}  // namespace

constexpr OpModule kModule = {Op::quantize, unsupported_reason, probes_refusal, lay_out,    point_abi,    judge,
                          unwritten,    stale_variant,      shape_text,     output_words, stale_in_place,
                          nullptr,      exact_quantize,     nullptr,        nullptr,      module_draw,
                          module_draw_data,
                          expand_seed};

}  // namespace quantize_op

const OpModule modules::quantize = quantize_op::kModule;

}  // namespace nvfp4
