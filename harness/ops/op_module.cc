// The list of op modules: one line per op.
#include "harness/ops/op_module.h"

#include "gpu_reference/exact_gemm_gpu.h"
#include "harness/ops/block_scaled_output.h"

#include <iterator>
#include <stdexcept>

namespace nvfp4 {
namespace quantize_op {
extern const OpModule kModule;
}

namespace {

// GEMV, GEMM, grouped and dual GEMM share their buffers, oracle and stale data.
OpModule gemm_family_module(Op op) {
  return {op,
          gemm_family::unsupported_reason,
          gemm_family::probes_refusal,
          gemm_family::lay_out,
          gemm_family::point_abi,
          gemm_family::judge,
          gemm_family::unwritten,
          gemm_family::stale_variant,
          gemm_family::shape_text,
          [](const Problem& p) {
            return block_scaled_out::applies(p) ? block_scaled_out::output_words(p) : p.c_elems();
          },
          nullptr,  // the stale data travels
          // On the GPU where one is available and the problem is large.
          [](const Problem& p) { return exact_gemm_auto(p); },
          judge_words,
          judge_output,
          gemm_family::draw,
          gemm_family::draw_data,
          gemm_family::expand_seed};
}

std::vector<OpModule> registered_modules() {
  // One line per op, in op_table.h's order.
  std::vector<OpModule> modules = {
      gemm_family_module(Op::gemv),
      gemm_family_module(Op::gemm),
      gemm_family_module(Op::grouped_gemm),
      gemm_family_module(Op::dual_gemm),
      quantize_op::kModule,
  };
  // The table and this list name the same ops in the same order (the draws follow it): a row
  // without a module, or a module out of place, stops every program at its first use of an op.
  bool same = modules.size() == std::size(kOpTable);
  for (size_t i = 0; same && i < modules.size(); ++i) same = modules[i].op == kOpTable[i].op;
  if (!same) throw std::logic_error("harness/ops/op_module.cc: the module list does not follow op_table.h's rows");
  return modules;
}

}  // namespace

const std::vector<OpModule>& op_modules() {
  static const std::vector<OpModule> modules = registered_modules();
  return modules;
}

const OpModule& op_module(Op op) {
  for (const OpModule& m : op_modules())
    if (m.op == op) return m;
  throw std::invalid_argument("no module for op " + std::to_string(static_cast<uint32_t>(op)));
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpModule& m : op_modules()) names.push_back(m.info().name);
  return names;
}

}  // namespace nvfp4
