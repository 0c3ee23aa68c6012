// The harness tests' shorthand: a built-in kernel by name, one case checked with the kernel
// called in this process, and the failing check's name and message of an outcome as plain strings.
#pragma once

#include <stdexcept>
#include <string>

#include "harness/judge/case_check.h"
#include "kernels/registry.h"

namespace nvfp4 {

inline const Kernel& builtin(const std::string& name) {
  static const Registry registry = Registry::with_builtins();
  const Kernel* k = registry.find(name);
  if (!k) throw std::runtime_error("no built-in kernel " + name);
  return *k;
}

inline CaseOutcome check_in_process(const Kernel& k, const Problem& p, const CaseOptions& o = {}) {
  InProcessExecutor executor(k, kDefaultCallTimeout);
  return check_case(executor, p, o);
}
inline std::string check_of(const CaseOutcome& r) { return r.finding ? check_name(r.finding->check) : ""; }
inline std::string message_of(const CaseOutcome& r) { return r.finding ? r.finding->message : r.message; }

}  // namespace nvfp4
