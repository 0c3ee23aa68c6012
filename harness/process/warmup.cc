// The warm-up call of Python kernel processes (see warmup.h).
#include "harness/process/warmup.h"

#include <stdexcept>

#include <fmt/format.h>

#include "harness/draw/generators.h"
#include "harness/ops/op_module.h"
#include "harness/draw/schedule.h"
#include "kernels/registry.h"

namespace nvfp4 {

namespace {

BlockFormat first_format(uint32_t set) {
  for (uint32_t f = 1; f <= 4; ++f)
    if ((set >> f) & 1u) return static_cast<BlockFormat>(f);
  return BlockFormat::nvfp4;
}

}  // namespace

CaseData warmup_case(const nvfp4_kernel_info& info) {
  const std::vector<Op> ops = declared_ops(info);  // GEMV first, then GEMM, grouped, dual
  if (ops.empty()) throw std::invalid_argument("the kernel declares no op: nothing to warm up");
  Problem p;
  p.op = ops.front();
  p.m = std::max<int64_t>(1, info.m_multiple);
  p.n = op_n_is_one(p.op) ? 1 : std::max<int64_t>(1, info.n_multiple);
  // k even and at least 64 (whole 16-element blocks, as a compiled kernel's tiles want), a
  // multiple of what the kernel declares.
  p.k = round_up(64, std::max<int64_t>(2, info.k_multiple));
  if (p.k % 2) p.k *= 2;
  p.l = 1;
  p.sf_layout = (info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u ? SfLayout::permuted : SfLayout::linear;
  p.semantics = declared_semantics(info);
  // The first operand formats it declares (NVFP4 where it does).
  if (p.op == Op::gemv || p.op == Op::gemm) {
    p.a_format = first_format(declared_formats(info, false));
    p.b_format = first_format(declared_formats(info, true));
  }
  // The first output type it declares (FP16 where it does).
  const uint32_t outs = declared_out_types(info);
  for (OutType t : {OutType::bf16, OutType::fp32, OutType::fp16})
    if ((outs >> static_cast<uint32_t>(t)) & 1u) p.out_type = t;
  Rng rng(0x7761726D);  // "warm": the warm-up's data is the same every time
  if (op_quantizes(p.op)) {
    // The first of each declaration the draw would pick (raw 0), X of the plain class.
    RngDraws first(rng);
    CasePlan plan;
    ShapeLimits limits;
    limits.max_m = std::max<int64_t>(1, info.m_multiple);
    limits.max_k = p.k;
    quantize_op::draw(first, info, limits, plan);
    plan.problem.m = limits.max_m, plan.problem.k = p.k, plan.problem.l = 1;
    plan.problem.sf_layout = p.sf_layout;
    plan.problem.seed = 0x7761726D;
    plan.problem.generator = "quantize/plain";
    quantize_op::fill_x(plan.problem);
    p = std::move(plan.problem);
  } else if (op_is_grouped(p.op)) {
    // One group of the declared multiples (and its n, as a GEMM's).
    Problem one = p;
    one.op = Op::gemm;
    one.n = std::max<int64_t>(1, info.n_multiple);
    fill_data(rng, DataSpec{}, one);
    Group g;
    g.m = one.m, g.n = one.n, g.k = one.k;
    g.a = one.a, g.b = one.b, g.sfa = one.sfa, g.sfb = one.sfb;
    p.groups = {g};
    p.packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  } else {
    fill_data(rng, DataSpec{}, p);
    if (op_is_dual(p.op)) {
      Problem second = p;
      second.op = Op::gemm;
      fill_data(rng, DataSpec{}, second);
      p.b2 = second.b, p.sfb2 = second.sfb;
    }
  }
  p.alpha = 1.0f;
  CaseData data;
  data.problem = std::move(p);
  return data;
}

bool WarmupFailure::record(const std::vector<CallObservation>& out, const Problem& warmup, const std::string& limit,
                           const std::string& on_timeout) {
  if (out.empty() || out.back().end == CallObservation::End::returned) return true;
  CallObservation o = out.back();
  const std::string what = fmt::format("{}one {} before the first case{})", kWarmupCallWords, warmup_shape_text(warmup), limit);
  if (o.end == CallObservation::End::timeout && !on_timeout.empty())
    o.error = fmt::format("{} did not finish within {}", what, on_timeout);
  else
    o.error = fmt::format("during {}: {}", what, o.error);
  kept_ = std::move(o);
  return false;
}

std::optional<std::vector<CallObservation>> WarmupFailure::hand_to_case() {
  if (!kept_) return std::nullopt;
  std::vector<CallObservation> out = {std::move(*kept_)};
  kept_.reset();
  return out;
}

std::string warmup_shape_text(const Problem& p) {
  if (op_quantizes(p.op)) return op_module(p.op).shape_text(p);
  if (op_is_grouped(p.op))
    return fmt::format("one group {}x{}x{} {}", p.groups.front().m, p.groups.front().n, p.groups.front().k, to_string(p.op));
  return fmt::format("{}x{}x{} {}", p.m, p.n, p.k, to_string(p.op));
}

}  // namespace nvfp4
