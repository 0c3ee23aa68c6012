// Warm-up (SPEC.md section 7, revision 3): Python kernels compile on their first call (torch's
// load_inline, Triton's JIT, CuTe DSL), which takes a minute and is no hang. Each such kernel
// process makes one call on a small declared problem before its first checked case, under a
// limit of its own; the per-call watchdog starts after it, and the time is not the checks'.
// Lanes after the first start once the first is warm, so they load from the compiler's cache.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/process/kernel_call.h"

namespace nvfp4 {

// The warm-up's problem: the smallest inside what info declares (its first op and layout, each
// dimension its declared multiple, k at least 64, alpha 1, seeded data). Throws
// std::invalid_argument when info declares no op.
CaseData warmup_case(const nvfp4_kernel_info& info);
// "128x1x64 gemv" for messages.
std::string warmup_shape_text(const Problem& p);

// What the error of a warm-up call that did not return says it was (the suite tells such a call
// from a case's own by it).
inline constexpr const char* kWarmupCallWords = "the warm-up call (";

// A warm-up call that did not return becomes the first call of the next case, which is then its
// reproducer (the warm-up's own output is never judged). Worker processes and the C API's
// in-process check both keep it here, so both word it the same way.
class WarmupFailure {
 public:
  // Keeps the last of the warm-up calls `out` (made on `warmup`) unless it returned, its error
  // saying it was the warm-up; `limit` names the limit it ran under (", --warmup-timeout 120 s")
  // and `on_timeout`, when given, what follows "did not finish within " for a call that timed out.
  // True when the warm-up returned (nothing kept).
  bool record(const std::vector<CallObservation>& out, const Problem& warmup, const std::string& limit = "",
              const std::string& on_timeout = "");
  const std::optional<CallObservation>& kept() const { return kept_; }
  void keep(CallObservation o) { kept_ = std::move(o); }
  // The kept call as the observations of the case it is handed to, once; nullopt when none is kept.
  std::optional<std::vector<CallObservation>> hand_to_case();

 private:
  std::optional<CallObservation> kept_;
};

}  // namespace nvfp4
