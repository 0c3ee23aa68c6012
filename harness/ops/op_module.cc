// The list of op modules: one line per op family.
#include "harness/ops/op_module.h"

#include "harness/ops/block_scaled_output.h"

#include <stdexcept>

namespace nvfp4 {
namespace quantize_op {
extern const OpModule kModule;
}

namespace {

const OpModule kGemmFamily = {Op::gemm,
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
                              nullptr};

}  // namespace

const OpModule& op_module(Op op) {
  switch (op) {
    case Op::gemv:
    case Op::gemm:
    case Op::grouped_gemm:
    case Op::dual_gemm: return kGemmFamily;
    case Op::quantize: return quantize_op::kModule;
  }
  throw std::invalid_argument("no module for op " + std::to_string(static_cast<uint32_t>(op)));
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (uint32_t v = static_cast<uint32_t>(Op::gemv); v <= static_cast<uint32_t>(Op::quantize); ++v)
    names.push_back(to_string(static_cast<Op>(v)));
  return names;
}

}  // namespace nvfp4
