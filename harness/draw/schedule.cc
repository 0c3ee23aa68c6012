// The case schedule (see schedule.h).
#include "harness/draw/schedule.h"

#include "harness/ops/block_scaled_output.h"
#include "harness/ops/op_module.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/registry.h"
#include "reference/case_file.h"

namespace nvfp4 {
namespace {

SfLayout pick_layout(const nvfp4_kernel_info& info, uint64_t pick) {
  const bool linear = (info.sf_layouts >> NVFP4_SF_LINEAR) & 1u;
  const bool permuted = (info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u;
  return linear && permuted ? (pick ? SfLayout::permuted : SfLayout::linear)
         : linear           ? SfLayout::linear
                            : SfLayout::permuted;
}

// A dimension past three 256-wide tiles with a ragged end (or a multiple of the kernel's).
int64_t ragged_large(Draws& d, int64_t multiple) {
  static const int64_t kBases[] = {769, 767, 800, 640 + 3, 513, 1023, 900};
  const int64_t v = kBases[d.below(7)] + static_cast<int64_t>(d.below(8));
  return round_up(v, multiple);
}

}  // namespace

Shape draw_large_shape(Draws& d, Op op, const nvfp4_kernel_info& info) {
  const ShapeLimits small = small_shape_limits(), large = large_shape_limits();
  const int64_t mm = std::max<uint32_t>(1, info.m_multiple), nm = std::max<uint32_t>(1, info.n_multiple);
  const int64_t km = std::lcm<int64_t>(2, std::max<uint32_t>(1, info.k_multiple));
  // Which dimensions span several tiles: m, n (GEMM, dual GEMM), k, l, or m and n together.
  const bool has_n = !op_n_is_one(op);
  const uint64_t focus = d.below(has_n ? 5 : 3);
  const bool big_m = focus == 0 || focus == 4, big_n = has_n && (focus == 1 || focus == 4);
  const bool big_k = (has_n ? focus == 2 : focus == 1), big_l = (has_n ? focus == 3 : focus == 2);
  Shape s = draw_shape(d, op, info, small);
  if (big_m) s.m = ragged_large(d, mm);
  if (big_n) s.n = ragged_large(d, nm);
  if (big_k) {
    // Deep K pipelines, with a tail: a partial 16-block or a partial 4-block scale tile.
    static const int64_t kDeep[] = {16384 - 2, 16384 - 16, 16384, 8192 + 18, 12288 + 34, 4096 + 2};
    s.k = round_up(kDeep[d.below(6)], km);
  }
  if (big_l) s.l = 10 + static_cast<int64_t>(d.below(7));
  // Within the cost limits: the largest dimensions first, as the small class does. A dimension
  // shrinks only while it is above one multiple of the kernel's: 128 halved and rounded up to a
  // multiple of 128 is 128 again, and a step that changes nothing would loop for ever.
  ShapeLimits lim = large;
  while (s.l * s.m * s.n * s.k > lim.max_products || s.l * s.m * s.n > lim.max_outputs ||
         s.l * s.m * s.k > lim.max_elements || s.l * s.n * s.k > lim.max_elements) {
    if (!big_l && s.l > 1) s.l = (s.l + 1) / 2;
    else if (!big_k && s.k > std::max<int64_t>(64, km)) s.k = round_up(s.k / 2, km);
    else if (!big_m && s.m > std::max<int64_t>(16, mm)) s.m = round_up((s.m + 1) / 2, mm);
    else if (!big_n && s.n > std::max<int64_t>(16, nm)) s.n = round_up((s.n + 1) / 2, nm);
    else if (big_l && s.l > 2) s.l -= 1;
    else if (s.k > 2 * km) s.k = round_up(s.k / 2, km);
    // Only large multiples get here (m and n of a few 128-tiles with k at 256 already): the big
    // dimensions give way too, to two tiles at the least.
    else if (big_m && s.m > 2 * mm) s.m = round_up((s.m + 1) / 2, mm);
    else if (big_n && s.n > 2 * nm) s.n = round_up((s.n + 1) / 2, nm);
    else break;
  }
  return s;
}

std::vector<Group> draw_large_grouped_shape(Draws& d, const nvfp4_kernel_info& info) {
  const bool packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  const int64_t mm = std::max<uint32_t>(1, info.m_multiple), nm = std::max<uint32_t>(1, info.n_multiple);
  const int64_t km = std::lcm<int64_t>(2, std::max<uint32_t>(1, info.k_multiple));
  // A few big experts (rows past three 256-row tiles, k deep, with tails), or many experts of
  // moderate size around the 128-row tile (a layer of 32 to 256 experts, some without tokens).
  const bool few = d.below(2) == 0;
  int64_t count = few ? 2 + static_cast<int64_t>(d.below(7)) : 32 + static_cast<int64_t>(d.below(225));
  if (info.max_groups > 0) count = std::min<int64_t>(count, info.max_groups);
  static const int64_t kFewK[] = {4096 + 2, 2048, 7168, 1024 + 18}, kManyK[] = {256, 512 + 2, 1024, 128 + 16 + 2};
  static const int64_t kManyN[] = {128, 256, 129, 257, 64}, kManyM[] = {128, 256, 127, 129, 255, 257, 1, 64};
  auto draw_k = [&] { return round_up(few ? kFewK[d.below(4)] : kManyK[d.below(4)], km); };
  auto draw_n = [&] { return few ? ragged_large(d, nm) : round_up(kManyN[d.below(5)], nm); };
  const int64_t shared_k = draw_k(), shared_n = draw_n();
  std::vector<Group> groups(static_cast<size_t>(count));
  for (Group& g : groups) {
    const bool empty = d.below(4) == 0;
    const int64_t m = few ? ragged_large(d, mm) : round_up(kManyM[d.below(8)], mm);
    g.m = empty ? 0 : m;
    g.k = packed ? shared_k : draw_k();
    g.n = packed ? shared_n : draw_n();
  }
  fit_group_limits(groups, info, large_shape_limits());
  return groups;
}

bool draw_huge_grouped_shape(uint64_t pick, const nvfp4_kernel_info& info, uint64_t device_free_bytes, Problem& p) {
  if (p.op != Op::grouped_gemm || !(info.flags & NVFP4_FLAG_GROUPS_PACKED) || p.mx_operands()) return false;
  static const int64_t kWidths[] = {7168, 4096, 5120};
  const int64_t mm = std::max<uint32_t>(1, info.m_multiple), nm = std::max<uint32_t>(1, info.n_multiple);
  const int64_t km = std::lcm<int64_t>(32, std::max<uint32_t>(1, info.k_multiple));
  const int64_t k = round_up(kWidths[pick % 3], km), n = round_up(2048, nm);
  const int64_t expert = n * (k / 2);  // one expert's packed B
  // The expert that straddles 2^31 bytes (or the first past it), then 2 to 9 more.
  const int64_t straddle = (int64_t(1) << 31) / expert;
  const int64_t count = straddle + 3 + static_cast<int64_t>(pick / 3 % 8);
  if (info.max_groups > 0 && count > static_cast<int64_t>(info.max_groups)) return false;
  // B and its scales in the call's buffer and the device copy the runner keeps of every input,
  // and 2 GiB more for the CUDA contexts of the other lanes and the runtime.
  const uint64_t b_bytes = static_cast<uint64_t>(count) * static_cast<uint64_t>(expert + n * (k / 16));
  if (2 * b_bytes + (uint64_t(2) << 30) > device_free_bytes) return false;
  std::vector<Group> groups(static_cast<size_t>(count));
  uint64_t tokens = splitmix64(pick ^ 0x544F4B454E53ull);  // "TOKENS": 0 to 3 per expert, 2 bits each
  for (int64_t g = 0; g < count; ++g) {
    if (g % 32 == 0) tokens = splitmix64(tokens);
    int64_t m = static_cast<int64_t>(tokens >> (2 * (g % 32)) & 3);
    if (g >= straddle) m = std::max<int64_t>(m, 1);  // the experts a wrapped offset misplaces
    Group& q = groups[static_cast<size_t>(g)];
    q.m = m == 0 ? 0 : round_up(m, mm);
    q.n = n;
    q.k = k;
  }
  p.groups = std::move(groups);
  return true;
}

const char* to_string(CaseKind kind) {
  switch (kind) {
    case CaseKind::small: return "small";
    case CaseKind::large: return "large";
    case CaseKind::unsupported: return "unsupported";
    case CaseKind::shape: return "shape";
    case CaseKind::huge: return "huge";
  }
  return "?";
}

const char* to_string(DataClass data) {
  switch (data) {
    case DataClass::plain: return "plain";
    case DataClass::mixed: return "mixed";
    case DataClass::fine_cancel: return "fine-cancel";
    case DataClass::nan_sparse: return "nan-sparse";
  }
  return "?";
}

namespace {

// The shares of the one draw, out of 16 (raw 0 is always the plainest choice). Shape class: the
// small class 13, just outside the declaration 2 (when the kernel declares something that can be
// broken), the large class 1. Data class: plain 8, mixed 6, each targeted kind 1.
constexpr uint64_t kShares = 16;
constexpr uint64_t kSmallShare = 13, kUnsupportedShare = 2;
constexpr uint64_t kPlainShare = 8, kMixedShare = 6;

CaseKind kind_from_raw(uint64_t raw, const CaseConstraints& c) {
  if (raw < kSmallShare) return CaseKind::small;
  if (raw < kSmallShare + kUnsupportedShare) return c.unsupported ? CaseKind::unsupported : CaseKind::small;
  return c.large ? CaseKind::large : CaseKind::small;
}

DataClass data_from_raw(uint64_t raw) {
  if (raw < kPlainShare) return DataClass::plain;
  if (raw < kPlainShare + kMixedShare) return DataClass::mixed;
  return raw == kPlainShare + kMixedShare ? DataClass::fine_cancel : DataClass::nan_sparse;
}

// Problems just outside what the kernel declares, of an op and output type it declares: a broken
// multiple, else an undeclared layout, else alpha != 1 (dual GEMM: alpha or alpha2) for a
// UNIT_ALPHA kernel. False when nothing the kernel declares can be broken (the case is then an
// ordinary one). An op or output type the kernel does not declare is no probe: such a problem is
// never handed to a kernel at all.
bool draw_unsupported(Draws& d, const nvfp4_kernel_info& info, Op op, const ShapeLimits& limits, CasePlan& plan) {
  Problem& p = plan.problem;
  const Shape s = draw_unsupported_shape(d, op, info, limits);
  const bool linear = (info.sf_layouts >> NVFP4_SF_LINEAR) & 1u;
  const bool permuted = (info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u;
  if (s.m != 0) {
    set_shape(p, s);
    return true;
  }
  set_shape(p, draw_shape(d, op, info, limits));
  const uint64_t alpha_pick = d.below(2);
  if (!linear) {
    p.sf_layout = SfLayout::linear;
  } else if (!permuted) {
    p.sf_layout = SfLayout::permuted;
  } else if (info.flags & NVFP4_FLAG_UNIT_ALPHA) {
    plan.spec.alpha = alpha_pick ? AlphaDist::arbitrary : AlphaDist::pow2;
  } else if (const Op other = op == Op::gemm ? Op::gemv : Op::gemm;
             (op == Op::gemv || op == Op::gemm) && !((info.ops >> static_cast<uint32_t>(other)) & 1u)) {
    // The other of GEMV and GEMM, which every kernel can tell apart by p->op (a version-1 kernel
    // too); grouped and dual problems are never handed to a kernel without them
    // (case_check.h's probes_refusal).
    nvfp4_kernel_info any = info;
    any.ops = 1u << static_cast<uint32_t>(other);
    set_shape(p, draw_shape(d, other, any, limits));
  } else {
    return false;
  }
  return true;
}

// A q * multiple + r with r in [1, multiple - 1] (never a multiple, never zero) for m or n; for
// k an even value that is not a multiple of k_multiple (k_multiple > 2, or odd and > 1).
int64_t broken_dim(char dim, int64_t multiple, uint64_t quotient, uint64_t offset_raw) {
  if (dim != 'k') return static_cast<int64_t>(quotient) * multiple + 1 + static_cast<int64_t>(offset_raw % (multiple - 1));
  int64_t k = static_cast<int64_t>(quotient) * std::lcm<int64_t>(2, multiple);
  if (multiple % 2 == 0) return k + 2 + 2 * static_cast<int64_t>(offset_raw % ((multiple - 2) / 2));
  return k + 2 * (1 + static_cast<int64_t>(offset_raw % (multiple - 1)));
}

// Grouped problems just outside what a kernel declaring grouped_gemm accepts: one group's m_g,
// n_g or k_g breaking a declared multiple (every group's n or k for a packed kernel, whose groups
// always share them), more groups than max_groups, or a group alpha != 1 for a UNIT_ALPHA kernel.
// False when none applies.
constexpr uint32_t kMaxProbedGroups = 1024;

bool draw_unsupported_grouped(Draws& d, const nvfp4_kernel_info& info, const ShapeLimits& limits, CasePlan& plan) {
  const bool packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  std::vector<char> probes;
  if (info.m_multiple > 1) probes.push_back('m');
  if (info.n_multiple > 1) probes.push_back('n');
  if (info.k_multiple > 2 || (info.k_multiple > 1 && info.k_multiple % 2 == 1)) probes.push_back('k');
  // More groups than max_groups only where that is a case of ordinary size: a kernel allowing
  // 65535 groups would be probed with a 65536-group case, too big to draw or check often.
  if (info.max_groups > 0 && info.max_groups <= kMaxProbedGroups) probes.push_back('G');
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) probes.push_back('a');
  const uint64_t which = d.below(std::max<size_t>(1, probes.size()));
  const uint64_t quotient = d.below(4), offset_raw = d.below(uint64_t(1) << 30), extra = d.below(4);
  std::vector<Group> groups = draw_grouped_shape(d, info, limits);
  const uint64_t at = d.below(groups.size());
  if (probes.empty()) return false;
  Group& g = groups[at];
  switch (probes[which]) {
    case 'm': g.m = broken_dim('m', info.m_multiple, quotient, offset_raw); break;
    case 'n': {
      const int64_t n = broken_dim('n', info.n_multiple, quotient, offset_raw);
      for (Group& q : groups) if (packed || &q == &g) q.n = n;
      break;
    }
    case 'k': {
      const int64_t k = broken_dim('k', info.k_multiple, quotient, offset_raw);
      for (Group& q : groups) if (packed || &q == &g) q.k = k;
      break;
    }
    case 'G': {
      // One to four groups past the limit, repeating the drawn groups' shapes.
      const size_t drawn = groups.size(), want = static_cast<size_t>(info.max_groups) + 1 + extra;
      for (size_t i = drawn; i < want; ++i) groups.push_back(groups[i % drawn]);
      fit_group_limits(groups, info, limits);
      break;
    }
    default: plan.spec.alpha = quotient % 2 ? AlphaDist::arbitrary : AlphaDist::pow2; break;
  }
  set_groups(plan.problem, std::move(groups), info);
  return true;
}

// alpha = alpha2 = every group's alpha = 1: what a UNIT_ALPHA kernel is handed outside its probes.
void set_unit_alpha(Problem& p) {
  p.alpha = p.alpha2 = 1.0f;
  for (Group& g : p.groups) g.alpha = 1.0f;
}

}  // namespace

namespace {

// draw_plan's last part: the shape of the case (a given shape, one just outside the kernel's
// declaration, a large one, or a small one), with the data class's needs (fine_cancel's three
// blocks, the constraints' batches and whole blocks).
void draw_plan_shape(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& c, const ShapeLimits& limits,
                     const std::optional<Shape>& shape, Op op, CasePlan& plan) {
  Problem& p = plan.problem;
  const bool grouped = op_is_grouped(op);
  if (plan.kind == CaseKind::unsupported &&
      !(grouped ? draw_unsupported_grouped(d, info, limits, plan) : draw_unsupported(d, info, op, limits, plan)))
    plan.kind = CaseKind::small;
  if (plan.kind == CaseKind::shape && grouped) {
    // A shape given for a grouped kernel is one group of it.
    Group g;
    g.m = shape->m, g.n = shape->n, g.k = shape->k;
    set_groups(p, {g}, info);
  } else if (plan.kind == CaseKind::shape) {
    Shape s = *shape;
    s.op = op;
    set_shape(p, s);
  } else if (plan.kind != CaseKind::unsupported && grouped) {
    set_groups(p, plan.kind == CaseKind::large ? draw_large_grouped_shape(d, info) : draw_grouped_shape(d, info, limits),
               info);
    const int64_t km = std::lcm<int64_t>(2, std::max<uint32_t>(1, info.k_multiple));
    const uint64_t extra = d.below(4);
    for (Group& g : p.groups) {
      if (c.min_full_blocks > 0 && g.k / 16 < c.min_full_blocks) g.k = round_up(16 * c.min_full_blocks, km);
      // fine_cancel needs fine blocks before its middle pair block: at least three blocks (the
      // same k for every group, so that packed groups keep one k).
      if (plan.data == DataClass::fine_cancel && g.k < 48)
        g.k = round_up(48 + static_cast<int64_t>(extra) * 16 + (g.k % 16), km);
    }
  } else if (plan.kind != CaseKind::unsupported) {
    set_shape(p, plan.kind == CaseKind::large ? draw_large_shape(d, op, info) : draw_shape(d, op, info, limits));
    const int64_t km = std::lcm<int64_t>(2, std::max<uint32_t>(1, info.k_multiple));
    p.l = std::max(p.l, c.min_l);
    if (c.min_full_blocks > 0 && p.k / 16 < c.min_full_blocks) p.k = round_up(16 * c.min_full_blocks, km);
    // fine_cancel needs fine blocks before its middle pair block: at least three blocks.
    const uint64_t extra = d.below(4);
    if (plan.data == DataClass::fine_cancel && p.k < 48)
      p.k = round_up(48 + static_cast<int64_t>(extra) * 16 + (p.k % 16), km);
  }
}

}  // namespace

CasePlan draw_plan(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& c, const ShapeLimits& limits,
                   const std::optional<Shape>& shape) {
  CasePlan plan;
  Problem& p = plan.problem;
  const bool unit_alpha = info.flags & NVFP4_FLAG_UNIT_ALPHA;
  // Draw order: shape class, data class and distribution, op, layout, shape. RapidCheck shrinks
  // picks left to right and never returns to an earlier one, so the classes shrink first,
  // toward small and plain, where a failure shows in almost any data; a shape shrunk under
  // sparse data would stay big.
  plan.kind = shape ? CaseKind::shape : kind_from_raw(d.below(kShares), c);
  plan.data = data_from_raw(d.below(kShares));
  const uint64_t values = d.below(6), scales = d.below(8), alpha = d.below(unit_alpha ? 1 : 3);
  switch (plan.data) {
    case DataClass::plain: plan.spec = DataSpec{}; break;
    case DataClass::mixed:
      plan.spec = DataSpec{static_cast<ValueDist>(values), static_cast<ScaleDist>(scales), static_cast<AlphaDist>(alpha)};
      break;
    case DataClass::fine_cancel: plan.spec = DataSpec{ValueDist::fine_cancel, ScaleDist::fine_cancel, AlphaDist::one}; break;
    case DataClass::nan_sparse: plan.spec = DataSpec{ValueDist::sparse, ScaleDist::nan_block, AlphaDist::one}; break;
  }
  if (c.exact_regime) {
    plan.spec.scales = ScaleDist::narrow;
    if (plan.spec.alpha == AlphaDist::arbitrary) plan.spec.alpha = AlphaDist::pow2;
  }
  if (c.no_nan && plan.spec.scales == ScaleDist::nan_block) plan.spec.scales = ScaleDist::narrow;

  std::vector<Op> ops = c.gemv_gemm_only ? declared_gemv_gemm_ops(info) : declared_ops(info);
  if (c.op) ops.erase(std::remove_if(ops.begin(), ops.end(), [&](Op op) { return op != *c.op; }), ops.end());
  if (shape) {
    // A kernel without GEMV takes an n = 1 shape as a GEMM.
    const Op op = shape->op == Op::gemv && !((info.ops >> NVFP4_OP_GEMV) & 1u) ? Op::gemm : shape->op;
    ops = declared_ops(info, op);
  }
  if (ops.empty()) throw std::invalid_argument("the kernel declares no op the case may have");
  const Op op = ops[d.below(ops.size())];
  const uint64_t layout_pick = d.below(2);
  p.sf_layout = c.layout ? *c.layout : pick_layout(info, layout_pick);
  op_module(op).draw(d, info, c, limits, shape ? &*shape : nullptr, op, plan);
  return plan;
}

void gemm_family::draw(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& c, const ShapeLimits& limits,
                       const Shape* shape_given, Op op, CasePlan& plan) {
  Problem& p = plan.problem;
  const bool unit_alpha = info.flags & NVFP4_FLAG_UNIT_ALPHA;
  const std::optional<Shape> shape = shape_given ? std::optional<Shape>(*shape_given) : std::nullopt;
  p.semantics = declared_semantics(info);
  // Among the declared output types, FP16 first (raw 0) when declared. One declared type draws
  // nothing, so a version-1 kernel's cases are what they were before BF16 and FP32 existed.
  std::vector<OutType> out_types = declared_out_type_list(info);
  // Block-scaled output is GEMM's, dual GEMM's and grouped GEMM's in the separate arrangement
  // (GEMV's n = 1 cannot pack; the packed arrangement has no place for each group's Q and SFQ).
  if (op_n_is_one(op) || (op_is_grouped(op) && (info.flags & NVFP4_FLAG_GROUPS_PACKED)))
    out_types.erase(std::remove(out_types.begin(), out_types.end(), OutType::nvfp4), out_types.end());
  if (out_types.empty()) throw std::invalid_argument("the kernel declares no output type the op may have");
  if (c.out_type && std::find(out_types.begin(), out_types.end(), *c.out_type) == out_types.end())
    throw std::invalid_argument(fmt::format("the kernel does not declare out type {}", to_string(*c.out_type)));
  p.out_type = c.out_type ? *c.out_type : out_types[d.below(out_types.size())];

  // Every op of the GEMM family takes the declared formats; a block-scaled output quantizes
  // NVFP4 results only (shape_error), so its operands stay NVFP4.
  if (p.out_type != OutType::nvfp4) draw_operand_formats(d, info, p);
  // The block-scaled reference's wide accumulators are slow on the CPU for the large class's
  // billions of products: MX cases stay small unless a GPU reference judges them.
  if (p.mx_operands() && plan.kind == CaseKind::large && !c.mx_large) plan.kind = CaseKind::small;
  draw_plan_shape(d, info, c, limits, shape, op, plan);
  if (block_scaled_out::applies(p)) block_scaled_out::draw_recipe(d, info, p);
  if (unit_alpha && plan.kind != CaseKind::unsupported) plan.spec.alpha = AlphaDist::one;
}

DrawnCase draw_case(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& c, const ShapeLimits& limits) {
  CasePlan plan = draw_plan(d, info, c, limits);
  DrawnCase out;
  out.problem = std::move(plan.problem);
  out.spec = plan.spec;
  out.kind = plan.kind;
  out.data = plan.data;
  op_module(out.problem.op).draw_data(d, info, out);
  return out;
}

void gemm_family::draw_data(Draws& d, const nvfp4_kernel_info& info, DrawnCase& out) {
  nvfp4::draw_data(d, out.spec, out.problem);
  if ((info.flags & NVFP4_FLAG_UNIT_ALPHA) && out.kind != CaseKind::unsupported) set_unit_alpha(out.problem);
  if (block_scaled_out::applies(out.problem)) block_scaled_out::draw_global_scale(d, out.problem);
}

DrawnCase draw_fuzz_case(const uint8_t* data, std::size_t size, const nvfp4_kernel_info* kernel,
                         const ShapeLimits& limits) {
  nvfp4_kernel_info any{};
  any.abi_version = NVFP4_ABI_VERSION;
  any.ops = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM) | (1u << NVFP4_OP_GROUPED_GEMM) | (1u << NVFP4_OP_DUAL_GEMM);
  any.out_types = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
  any.sf_layouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
  any.m_multiple = any.n_multiple = any.k_multiple = 1;
  ByteDraws d(data, size);
  CaseConstraints c;
  c.unsupported = true;
  DrawnCase out = draw_case(d, kernel ? *kernel : any, c, limits);
  out.problem.note = fmt::format("kernel fuzzer input ({} bytes): {}, {}, data {}", size, to_string(out.kind),
                                 to_string(out.data), out.spec.name());
  return out;
}

bool is_case_text(const std::string& bytes) {
  return std::none_of(bytes.begin(), bytes.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F;
  });
}

std::optional<Problem> fuzz_input_problem(const std::string& bytes, const nvfp4_kernel_info* kernel,
                                          const ShapeLimits& limits, std::string* why) {
  if (!is_case_text(bytes))
    return draw_fuzz_case(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), kernel, limits).problem;
  std::string error;
  try {
    Problem p = parse_case(bytes, "fuzz input");
    if (!p.has_data()) expand_seeded_case(p);
    // Recorded results are no input of the kernel: a mutated expect line would only make the
    // case unjudgeable (check_case refuses a case its own reference contradicts), and the kernel
    // is judged against the reference anyway.
    p.expect.reset();
    p.expect_q.reset();
    p.expect_sfq.reset();
    for (Group& g : p.groups) g.expect.reset();
    return p;
  } catch (const CaseError& e) {
    error = e.what();
  } catch (const std::invalid_argument& e) {  // a case naming an unknown generator
    error = e.what();
  }
  if (why) *why = "text that is no case file, so the kernel fuzzer runs nothing for it: " + error;
  return std::nullopt;
}

ShapeLimits fuzz_limits_from_environment() {
  ShapeLimits limits = fuzz_shape_limits();
  if (const char* cap = std::getenv("NVFP4_FUZZ_MAX_PRODUCTS")) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(cap, &end, 10);
    if (end == cap || *end != '\0' || errno != 0 || v < 2)
      throw std::invalid_argument(fmt::format("NVFP4_FUZZ_MAX_PRODUCTS must be an integer >= 2, not '{}'", cap));
    limits.max_products = v;
  }
  return limits;
}

Schedule::Schedule(const nvfp4_kernel_info& info, std::string kernel_name, ScheduleOptions options)
    : info_(info), name_(std::move(kernel_name)), options_(std::move(options)) {
  info_.name = nullptr;
  ops_ = declared_ops(info_, options_.shape ? std::optional<Op>() : options_.op);
  if (options_.shape) {
    const Op op = options_.shape->op == Op::gemv && !((info_.ops >> NVFP4_OP_GEMV) & 1u) ? Op::gemm : options_.shape->op;
    ops_ = declared_ops(info_, op);
  }
  if (ops_.empty())
    throw std::invalid_argument(options_.shape || options_.op ? "the kernel does not declare that op"
                                                              : "the kernel declares no op");
}

uint64_t schedule_case_seed(uint64_t seed, const std::string& kernel_name, int64_t index) {
  return splitmix64(seed ^ splitmix64(fnv1a(kernel_name) ^ splitmix64(static_cast<uint64_t>(index))));
}

uint64_t Schedule::case_seed(int64_t index) const { return schedule_case_seed(options_.seed, name_, index); }

ScheduledCase Schedule::at(int64_t index) const {
  Rng rng(case_seed(index));
  RngDraws d(rng);
  ScheduledCase c;
  c.index = index;
  c.stale_seed = rng();
  CaseConstraints constraints;
  constraints.op = options_.shape ? std::nullopt : options_.op;
  constraints.unsupported = true;
  constraints.large = options_.large_tail;
  constraints.mx_large = options_.gpu_reference && info_.memory == NVFP4_MEMORY_CUDA;
  CasePlan plan = draw_plan(d, info_, constraints, options_.limits, options_.shape);
  // The huge tier decides from a hash of its own, so that drawing it takes nothing from the
  // case's draws: every other case is the case it was without the tier.
  const bool quantizer = op_quantizes(plan.problem.op);
  const bool packed_groups = plan.problem.op == Op::grouped_gemm && (info_.flags & NVFP4_FLAG_GROUPS_PACKED);
  // (A grouped case drawn just outside the declaration stays that case.)
  if ((quantizer || (packed_groups && plan.kind != CaseKind::unsupported)) && !options_.shape &&
      options_.huge != HugeTier::off && info_.memory == NVFP4_MEMORY_CUDA && options_.device_free_bytes > 0) {
    const uint64_t pick = splitmix64(case_seed(index) ^ 0x4855474554494552ull);  // "HUGETIER"
    if ((options_.huge == HugeTier::always || pick % kHugeShare == 0) &&
        (quantizer ? quantize_op::draw_huge_shape(pick / kHugeShare, info_, options_.device_free_bytes, plan.problem)
                   : draw_huge_grouped_shape(pick / kHugeShare, info_, options_.device_free_bytes, plan.problem)))
      plan.kind = CaseKind::huge;
  }
  c.kind = plan.kind;
  c.data = plan.data;
  c.spec = plan.spec;
  c.problem = std::move(plan.problem);
  Problem& p = c.problem;
  p.seed = rng();
  if (!op_quantizes(p.op)) p.generator = c.spec.name();
  // A huge case's X (4 to 8 GiB) is drawn when the case is checked (check_case expands a seeded
  // case), one huge case at a time, not here where lanes draw the next case ahead.
  if (c.kind != CaseKind::huge) expand_seeded_case(p);
  if ((info_.flags & NVFP4_FLAG_UNIT_ALPHA) && c.kind != CaseKind::unsupported) set_unit_alpha(p);
  // The output's global scale is drawn against the output's amax, so after the data.
  if (block_scaled_out::applies(p)) block_scaled_out::draw_global_scale(d, p);
  p.note = op_quantizes(p.op)
               ? fmt::format("schedule seed {} kernel {} case {} ({}{})", options_.seed, name_, index, p.generator,
                             c.kind == CaseKind::huge ? ", huge tier" : "")
               : fmt::format("schedule seed {} kernel {} case {} ({}, {}, data {})", options_.seed, name_, index,
                             to_string(c.kind), to_string(c.data), c.spec.name());
  return c;
}

namespace {

// The bucket of a grouped case's group count in ScheduleStats::by_groups.
std::string group_count_bucket(size_t count) {
  return count == 1 ? "1" : count <= 8 ? "2-8" : count <= 64 ? "9-64" : count <= 256 ? "65-256" : ">256";
}

}  // namespace

void ScheduleStats::add(const ScheduledCase& c) {
  const Problem& p = c.problem;
  ++cases;
  ++by_kind[to_string(c.kind)];
  ++by_op[to_string(p.op)];
  if (op_quantizes(p.op)) {
    // Its data classes are its module's (the generator), its options its own.
    const std::string data = p.generator.substr(p.generator.find('/') + 1);
    ++by_data[data];
    ++by_op_data["quantize " + data];
    ++by_out_type[fmt::format("{}->{} {}", to_string(p.in_type), to_string(p.q_format), to_string(p.recipe))];
    huge += c.kind == CaseKind::huge;
    batched += p.l > 1;
    k_tail += p.k % block_size(p.q_format) != 0;
    padded += p.sf_layout == SfLayout::permuted && (p.m % 128 != 0 || p.qkb() % 4 != 0);
    tile_edge += p.m % 128 == 0 || p.m % 128 == 1 || p.m % 128 == 127;
    return;
  }
  ++by_data[to_string(c.data)];
  ++by_op_data[fmt::format("{} {}", to_string(p.op), to_string(c.data))];
  ++by_out_type[to_string(p.out_type)];
  const std::string spec = c.spec.name();  // values/scales/alpha
  const size_t a = spec.find('/'), b = spec.find('/', a + 1);
  ++by_scales[spec.substr(a + 1, b - a - 1)];
  ++by_values[spec.substr(0, a)];
  if (op_is_grouped(p.op)) {
    // A grouped case counts as on a tile edge, with a k tail or permuted padding when any of
    // its non-empty groups is.
    ++grouped;
    ++by_groups[group_count_bucket(p.groups.size())];
    groups += static_cast<int64_t>(p.groups.size());
    bool edge = false, tail = false, pad = false, any = false;
    for (const Group& g : p.groups) {
      empty_groups += g.m == 0;
      if (g.m == 0) continue;
      any = true;
      edge = edge || on_tile_edge({Op::gemm, g.m, g.n, g.k, 1});
      tail = tail || g.k % 16 != 0;
      pad = pad || (g.m % 128 || g.n % 128 || g.kb(p.a_format) % 4 || g.kb(p.b_format) % 4);
    }
    all_empty += !any;
    tile_edge += edge;
    k_tail += tail;
    padded += p.sf_layout == SfLayout::permuted && pad;
    return;
  }
  tile_edge += on_tile_edge({p.op, p.m, p.n, p.k, p.l});
  batched += p.l > 1;
  k_tail += p.k % 16 != 0;
  padded += p.sf_layout == SfLayout::permuted && (p.m % 128 || p.n % 128 || p.kb() % 4);
}

std::string ScheduleStats::text() const {
  if (cases == 0) return "no cases";
  auto pct = [&](int64_t v) { return fmt::format("{:.0f}%", 100.0 * double(v) / double(cases)); };
  std::string t = fmt::format("{} cases:", cases);
  for (const auto& [k, v] : by_kind) t += fmt::format(" {} {}", k, v);
  t += ";";
  for (const auto& [k, v] : by_op_data) t += fmt::format(" {} {}", k, v);
  t += "; out";
  for (const auto& [k, v] : by_out_type) t += fmt::format(" {} {}", k, v);
  if (grouped > 0) {
    t += fmt::format("; grouped {}: {} groups, {} empty, {} with every group empty; groups", grouped, groups,
                     empty_groups, all_empty);
    for (const auto& [k, v] : by_groups) t += fmt::format(" {}: {}", k, v);
  }
  if (huge > 0) t += fmt::format("; huge tier {} (past 2^31 elements or bytes)", huge);
  t += fmt::format("; tile edge {}, batched {}, k tail {}, permuted padding {}; scales", pct(tile_edge), pct(batched),
                   pct(k_tail), pct(padded));
  for (const auto& [k, v] : by_scales) t += fmt::format(" {} {}", k, v);
  return t;
}

}  // namespace nvfp4
