// The in-process executor (the worker one is in worker.cc).
#include "harness/process/executor.h"

namespace nvfp4 {

InProcessExecutor::InProcessExecutor(const Kernel& kernel, double timeout_s)
    : desc_(describe_kernel(kernel)), caller_(kernel, timeout_s) {}

std::vector<CallObservation> InProcessExecutor::run_case(const CaseData& data, const std::vector<PlannedCall>& plan) {
  std::vector<CallObservation> out;
  caller_.begin_case(data);
  for (const PlannedCall& call : plan) {
    out.push_back(caller_.call(call.spec));
    if (out.back().end != CallObservation::End::returned) break;
  }
  return out;
}

}  // namespace nvfp4
