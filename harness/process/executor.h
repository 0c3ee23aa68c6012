// Where a kernel's calls are made: in this process (property tests, fuzzers, Python's nc.check)
// or in a worker process watched by this one (run, replay, mutants). case_check.cc drives either
// the same way and judges what comes back.
#pragma once

#include <memory>
#include <vector>

#include "harness/process/kernel_call.h"
#include "harness/process/worker_protocol.h"

namespace nvfp4 {

// The watchdog's default: seconds one kernel call may take.
inline constexpr double kDefaultCallTimeout = 30;

class Executor {
 public:
  virtual ~Executor() = default;
  // The kernel the calls go to.
  virtual const KernelDesc& kernel() = 0;
  // Makes the planned calls of one case in order, through the same buffers, and returns one
  // observation per call made: fewer than planned when a call ended other than `returned`
  // (crash, timeout, CUDA error, exception), which is then the last.
  virtual std::vector<CallObservation> run_case(const CaseData& data, const std::vector<PlannedCall>& plan) = 0;
};

// Calls the kernel in this process. A hang is not interrupted and a crash ends the process:
// for kernels trusted that far (tests, fuzzing, a Python author's own check).
class InProcessExecutor final : public Executor {
 public:
  InProcessExecutor(const Kernel& kernel, double timeout_s);
  const KernelDesc& kernel() override { return desc_; }
  std::vector<CallObservation> run_case(const CaseData& data, const std::vector<PlannedCall>& plan) override;

 private:
  KernelDesc desc_;
  KernelCaller caller_;
};

}  // namespace nvfp4
