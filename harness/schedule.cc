// The case schedule (see schedule.h).
#include "harness/schedule.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

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

ShapeLimits small_shape_limits() {
  // n reaches the same tile edges as m (127-129, 255-257): a GEMM's second N tile is in the
  // small class too, not only in the large tail.
  ShapeLimits l;
  l.max_n = 300;
  return l;
}

ShapeLimits large_shape_limits() {
  ShapeLimits l;
  l.max_m = 1040;
  l.max_n = 1040;
  l.max_k = 16384;
  l.max_l = 16;
  l.max_outputs = int64_t(1) << 20;
  l.max_products = int64_t(1) << 26;
  l.max_elements = int64_t(1) << 24;
  return l;
}

Shape draw_large_shape(Draws& d, Op op, const nvfp4_kernel_info& info) {
  const ShapeLimits small = small_shape_limits(), large = large_shape_limits();
  const int64_t mm = std::max<uint32_t>(1, info.m_multiple), nm = std::max<uint32_t>(1, info.n_multiple);
  const int64_t km = std::lcm<int64_t>(2, std::max<uint32_t>(1, info.k_multiple));
  // Which dimensions span several tiles: m, n (GEMM), k, l, or m and n together.
  const uint64_t focus = d.below(op == Op::gemm ? 5 : 3);
  const bool big_m = focus == 0 || focus == 4, big_n = op == Op::gemm && (focus == 1 || focus == 4);
  const bool big_k = (op == Op::gemm ? focus == 2 : focus == 1), big_l = (op == Op::gemm ? focus == 3 : focus == 2);
  Shape s = draw_shape(d, op, info, small);
  if (big_m) s.m = ragged_large(d, mm);
  if (big_n) s.n = ragged_large(d, nm);
  if (big_k) {
    // Deep K pipelines, with a tail: a partial 16-block or a partial 4-block scale tile.
    static const int64_t kDeep[] = {16384 - 2, 16384 - 16, 16384, 8192 + 18, 12288 + 34, 4096 + 2};
    s.k = round_up(kDeep[d.below(6)], km);
  }
  if (big_l) s.l = 10 + static_cast<int64_t>(d.below(7));
  // Within the cost limits: the largest dimensions first, as the small class does.
  ShapeLimits lim = large;
  while (s.l * s.m * s.n * s.k > lim.max_products || s.l * s.m * s.n > lim.max_outputs ||
         s.l * s.m * s.k > lim.max_elements || s.l * s.n * s.k > lim.max_elements) {
    if (!big_l && s.l > 1) s.l = (s.l + 1) / 2;
    else if (!big_k && s.k > 64) s.k = round_up(s.k / 2, km);
    else if (!big_m && s.m > 16) s.m = round_up((s.m + 1) / 2, mm);
    else if (!big_n && s.n > 16) s.n = round_up((s.n + 1) / 2, nm);
    else if (big_l && s.l > 2) s.l -= 1;
    else if (s.k > 2 * km) s.k = round_up(s.k / 2, km);
    else break;
  }
  return s;
}

DrawnCase draw_case(Draws& d, const nvfp4_kernel_info& info, const CaseConstraints& o, const ShapeLimits& limits) {
  DrawnCase c;
  Op op = Op::gemm;
  if (o.op) {
    op = *o.op;
  } else {
    const bool gemv = (info.ops >> NVFP4_OP_GEMV) & 1u, gemm = (info.ops >> NVFP4_OP_GEMM) & 1u;
    const uint64_t pick = d.below(2);
    op = gemv && gemm ? (pick ? Op::gemm : Op::gemv) : gemv ? Op::gemv : Op::gemm;
  }
  // The distribution is drawn before the shape so that it shrinks first, toward
  // uniform/narrow/one, where a failure shows in almost any data: RapidCheck shrinks picks left to
  // right and never returns to an earlier one, so a shape shrunk under sparse data would stay big.
  c.spec = draw_spec(d);
  const Shape s = draw_shape(d, op, info, limits);
  Problem& p = c.problem;
  set_shape(p, s);
  p.l = std::max(p.l, o.min_l);
  if (o.min_full_blocks > 0 && p.k / 16 < o.min_full_blocks) {
    const int64_t km = std::lcm<int64_t>(2, info.k_multiple > 1 ? info.k_multiple : 1);
    p.k = (16 * o.min_full_blocks + km - 1) / km * km;
  }
  const uint64_t layout_pick = d.below(2);
  p.sf_layout = o.layout ? *o.layout : pick_layout(info, layout_pick);
  p.semantics = declared_semantics(info);
  if (o.exact_regime) {
    c.spec.scales = ScaleDist::narrow;
    if (c.spec.alpha == AlphaDist::arbitrary) c.spec.alpha = AlphaDist::pow2;
  }
  if (o.no_nan && c.spec.scales == ScaleDist::nan_block) c.spec.scales = ScaleDist::narrow;
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) c.spec.alpha = AlphaDist::one;
  draw_data(d, c.spec, p);
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) p.alpha = 1.0f;
  return c;
}

Schedule::Schedule(const nvfp4_kernel_info& info, std::string kernel_name, ScheduleOptions options)
    : info_(info), name_(std::move(kernel_name)), options_(std::move(options)) {
  info_.name = nullptr;
  ops_ = declared_ops(info_, options_.shape ? std::optional<Op>() : options_.op);
  if (options_.shape) {
    // A kernel without GEMV takes an n = 1 shape as a GEMM.
    Op op = options_.shape->op;
    if (op == Op::gemv && !((info_.ops >> NVFP4_OP_GEMV) & 1u)) op = Op::gemm;
    ops_ = declared_ops(info_, op);
  }
  if (ops_.empty())
    throw std::invalid_argument(options_.shape || options_.op ? "the kernel does not declare that op"
                                                              : "the kernel declares no op");
  for (const DataSpec& s : DataSpec::all())
    if (!(info_.flags & NVFP4_FLAG_UNIT_ALPHA) || s.alpha == AlphaDist::one) specs_.push_back(s);
}

uint64_t Schedule::case_seed(int64_t index) const {
  return splitmix64(options_.seed ^ splitmix64(fnv1a(name_) ^ splitmix64(static_cast<uint64_t>(index))));
}

ScheduledCase Schedule::at(int64_t index) const {
  Rng rng(case_seed(index));
  RngDraws d(rng);
  ScheduledCase c;
  c.index = index;
  c.stale_seed = rng();
  const Op op = ops_[static_cast<size_t>(index) % ops_.size()];
  c.spec = index % 2 == 0 ? DataSpec{} : specs_[d.below(specs_.size())];
  // Two cases in sixteen aim at bugs that random data meets rarely: the matrix-unit quirk of
  // subnormal operands (generators.h: fine_cancel; it took gemm_tc one case in 3,500 to show),
  // and a NaN scale in mostly-zero data (a kernel that skips zero products never multiplies
  // 0 by NaN).
  const bool targeted = index % 16 == 9 || index % 16 == 13;
  if (index % 16 == 9) c.spec = DataSpec{ValueDist::fine_cancel, ScaleDist::fine_cancel, AlphaDist::one};
  if (index % 16 == 13) c.spec = DataSpec{ValueDist::sparse, ScaleDist::nan_block, AlphaDist::one};
  Problem& p = c.problem;
  p.sf_layout = pick_layout(info_, d.below(2));
  p.semantics = declared_semantics(info_);
  bool shaped = false;
  if (options_.shape) {
    Shape s = *options_.shape;
    s.op = op;
    set_shape(p, s);
    c.kind = "shape";
    shaped = true;
  } else if (index % 8 == 7) {
    // Just outside what the kernel declares: a broken multiple, else an undeclared layout, else
    // alpha != 1 for a UNIT_ALPHA kernel, else the op it lacks.
    const Shape s = draw_unsupported_shape(d, op, info_, options_.limits);
    const bool linear = (info_.sf_layouts >> NVFP4_SF_LINEAR) & 1u;
    const bool permuted = (info_.sf_layouts >> NVFP4_SF_PERMUTED) & 1u;
    const Op other = op == Op::gemm ? Op::gemv : Op::gemm;
    shaped = true;
    c.kind = "unsupported";
    if (s.m != 0) {
      set_shape(p, s);
    } else {
      set_shape(p, draw_shape(d, op, info_, options_.limits));
      if (!linear) {
        p.sf_layout = SfLayout::linear;
      } else if (!permuted) {
        p.sf_layout = SfLayout::permuted;
      } else if (info_.flags & NVFP4_FLAG_UNIT_ALPHA) {
        c.spec.alpha = AlphaDist::pow2;
        if (d.below(2)) c.spec.alpha = AlphaDist::arbitrary;
      } else if (!((info_.ops >> static_cast<uint32_t>(other)) & 1u)) {
        nvfp4_kernel_info any = info_;
        any.ops = 1u << static_cast<uint32_t>(other);
        set_shape(p, draw_shape(d, other, any, options_.limits));
      } else {
        shaped = false;  // nothing the kernel declares can be broken: an ordinary case
        c.kind.clear();
      }
    }
  }
  if (!shaped) {
    const bool large = options_.large_tail && index % 16 == 5;
    set_shape(p, large ? draw_large_shape(d, op, info_) : draw_shape(d, op, info_, options_.limits));
    c.kind = large ? "large" : targeted ? "targeted" : index % 2 == 0 ? "plain" : "mixed";
    if (index % 16 == 9 && p.k < 48) {
      // Fine blocks before the middle pair block: at least three blocks.
      const int64_t km = std::lcm<int64_t>(2, std::max<uint32_t>(1, info_.k_multiple));
      p.k = round_up(48 + static_cast<int64_t>(d.below(4)) * 16 + (p.k % 16), km);
    }
  }
  p.seed = rng();
  p.generator = c.spec.name();
  expand_seeded_case(p);
  if ((info_.flags & NVFP4_FLAG_UNIT_ALPHA) && c.kind != "unsupported") p.alpha = 1.0f;
  p.note = fmt::format("schedule seed {} kernel {} case {} ({}, data {})", options_.seed, name_, index, c.kind,
                       c.spec.name());
  return c;
}

void ScheduleStats::add(const ScheduledCase& c) {
  const Problem& p = c.problem;
  ++cases;
  ++by_kind[c.kind];
  const std::string spec = c.spec.name();  // values/scales/alpha
  const size_t a = spec.find('/'), b = spec.find('/', a + 1);
  ++by_scales[spec.substr(a + 1, b - a - 1)];
  ++by_values[spec.substr(0, a)];
  tile_edge += on_tile_edge({p.op, p.m, p.n, p.k, p.l});
  batched += p.l > 1;
  k_tail += p.k % 16 != 0;
  padded += p.sf_layout == SfLayout::permuted && (p.m % 128 || p.n % 128 || p.kb() % 4);
}

void ScheduleStats::merge(const ScheduleStats& o) {
  cases += o.cases;
  tile_edge += o.tile_edge;
  batched += o.batched;
  k_tail += o.k_tail;
  padded += o.padded;
  for (const auto& [k, v] : o.by_kind) by_kind[k] += v;
  for (const auto& [k, v] : o.by_scales) by_scales[k] += v;
  for (const auto& [k, v] : o.by_values) by_values[k] += v;
}

std::string ScheduleStats::text() const {
  if (cases == 0) return "no cases";
  auto pct = [&](int64_t v) { return fmt::format("{:.0f}%", 100.0 * double(v) / double(cases)); };
  std::string t = fmt::format("{} cases:", cases);
  for (const auto& [k, v] : by_kind) t += fmt::format(" {} {}", k, v);
  t += fmt::format("; tile edge {}, batched {}, k tail {}, permuted padding {}; scales", pct(tile_edge), pct(batched),
                   pct(k_tail), pct(padded));
  for (const auto& [k, v] : by_scales) t += fmt::format(" {} {}", k, v);
  return t;
}

}  // namespace nvfp4
