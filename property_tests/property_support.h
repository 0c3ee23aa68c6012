// What every property shares: RapidCheck draws that shrink toward the plainest case, the kernels
// under test (registry + plugins), drawing one case for a kernel, tags, and saving a shrunk
// failing case as a regression file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "harness/draw/generators.h"
#include "harness/draw/schedule.h"
#include "kernels/registry.h"
#include "reference/exact_gemm.h"
#include "reference/fp16.h"
#include "reference/oracle.h"
#include "reference/problem.h"

namespace nvfp4::prop {

// Draws through RapidCheck: every number is one pick, uniform whatever RapidCheck's size (its own
// integer generators grow with size and skew small, which would starve the distributions), and
// shrinking toward 0, which the generators map to the plainest choice. Data bytes are one pick
// per tensor, a fixed-length container whose elements shrink one by one.
// The two RapidCheck generators behind RcDraws (exposed for their test).
rc::Gen<uint64_t> uniform_below(uint64_t bound);
rc::Gen<uint8_t> uniform_byte();

class RcDraws final : public Draws {
 public:
  uint64_t below(uint64_t bound) override;
  std::vector<uint8_t> bytes(std::size_t count) override;
};

// Limits of property-test shapes: every tile edge of m reachable, but few enough elements that a
// case (and each step of shrinking one) stays in the milliseconds.
ShapeLimits property_limits();

// ----- The kernels under test -----------------------------------------------------------------

// Which kernels a property binary checks: host ones (CI), CUDA ones (label gpu), or all.
enum class MemoryFilter { host, cuda, all };
// Set before the first kernels() call (the property main does, from its arguments).
// names, when not empty, keeps only those kernels (a name that matches none is an error).
void configure_kernels(MemoryFilter filter, const std::vector<std::string>& plugin_paths,
                       const std::vector<std::string>& names = {});
// The built-in kernels plus the plugins named by configure_kernels and by env NVFP4_PLUGINS
// (paths separated by ':'), filtered by memory and by whether they can run here.
const std::vector<const Kernel*>& kernels();
// Kernels left out, each with the reason (printed by the main, so a skipped GPU run says why).
const std::vector<std::string>& kernels_left_out();

// ----- One case -------------------------------------------------------------------------------

// A case inside the kernel's declared constraints (shape, layout, UNIT_ALPHA, scale semantics):
// the core's draw_case with the property tests' shape limits, GEMV or GEMM with FP16 output
// only (what the properties are written for).
DrawnCase draw_case(Draws& d, const Kernel& k, const CaseConstraints& constraints);

// ----- Comparing outputs ----------------------------------------------------------------------

// (fp16_is_nan and fp16_to_double are reference/fp16.h's.)
bool fp16_is_zero(uint16_t h);
// Same bits, or both NaN (any payload).
bool same_bits_or_nan(uint16_t x, uint16_t y);
// Same value: also +0 == -0.
bool same_value(uint16_t x, uint16_t y);
std::string hex16(uint16_t h);
// "C[b][i][j]" of a C-order index.
std::string element_name(const Problem& p, int64_t index);
// "gemm m=3 n=2 k=34 l=1 linear ue4m3 alpha=1 uniform/narrow/one"
std::string describe(const Problem& p, const DataSpec& spec);

// Per output element: whether the oracle leaves a single answer (the exact regime) for this
// kernel's policy. Those elements must agree bit for bit between any two runs of any kernel.
std::vector<bool> exact_mask(const Problem& p, const ExactResult& ref, const Policy& policy);
Policy policy_of(const Kernel& k);
bool deterministic(const Kernel& k);

// Runs k on p once (runner::run_kernel_once: fresh guarded buffers, NaN padding), failing the
// property with the kernel's error instead of throwing.
std::vector<uint16_t> run_or_fail(const Kernel& k, const Problem& p, const std::string& property);

// ----- Tags -----------------------------------------------------------------------------------

// Collects what the cases of one property run looked like, across the kernels it checked, and
// tags the RapidCheck case once: exact-regime share, tile-edge shapes, NaN cases.
class CaseTags {
 public:
  void shape(const Problem& p);
  void nan_case(bool any_nan) { nan_ |= any_nan; }
  void exact(int64_t exact_elements, int64_t elements);
  void note(const std::string& tag) { extra_ = tag; }
  void emit() const;  // RC_TAG with the collected tags

 private:
  bool edge_ = false, partial_ = false, nan_ = false;
  int64_t exact_ = 0, elements_ = 0;
  std::string extra_;
};

bool any_nan_scale(const Problem& p);

// Exact-regime outputs and all outputs judged since the last call (across cases and shrinking),
// for the share a property run prints at its end.
std::pair<int64_t, int64_t> take_exact_totals();

// ----- Failures and regressions ---------------------------------------------------------------

// Where shrunk failing cases go: env NVFP4_REGRESSIONS_DIR, else <source>/corpus/regressions.
std::string regressions_dir();
// Path a case would be saved under: <dir>/<kernel>/<content hash>.case.
std::string regression_path(const std::string& kernel, const Problem& p);

// Fails the current RapidCheck case. The case is remembered: RapidCheck runs the minimal case
// last, so what is remembered when the property ends is the shrunk one, which
// save_pending_regression() then writes (the test main does it when a test fails).
void fail_case(const Kernel& k, const Problem& p, const std::string& property, const std::string& message);
// Writes the remembered failing case with a note naming the property and the RapidCheck seed;
// returns its path, or nullopt when nothing failed since clear_pending_regression().
std::optional<std::string> save_pending_regression();
void clear_pending_regression();

}  // namespace nvfp4::prop
