// The checks a case goes through, as one enumerated list: each has a name (what reports and the
// JSON use), one line saying what it catches, and one function in checks.cc that looks at what a
// kernel call left behind. Adding a check is one entry here and one function there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/kernel_call.h"
#include "reference/exact_gemm.h"
#include "reference/oracle.h"
#include "reference/problem.h"

namespace nvfp4 {

enum class Check : uint8_t {
  oracle,                      // an output element outside what the oracle accepts
  nan_padding,                 // the output depends on the permuted layout's padding cells
  unwritten_output,            // an output element still holds the runner's NaN poison
  guard,                       // a write before or past a buffer
  inputs_modified,             // an input buffer changed
  determinism,                 // two runs on the same inputs differ (and NONDETERMINISTIC is not declared)
  stale_state,                 // new data through the same pointers, and the output did not follow
  stream,                      // C changed after the runner's stream had finished
  unsupported_touched_output,  // NVFP4_UNSUPPORTED returned, but C was written
  ignored_unsupported,         // a problem outside the declared constraints was computed
  refused_supported,           // NVFP4_UNSUPPORTED for a problem inside the declared constraints
  kernel_error,                // NVFP4_ERROR or a code that is no NVFP4_* code
  exception,                   // the kernel threw (a C++ or a Python exception)
  cuda_error,                  // a CUDA error, named
  timeout,                     // a call did not finish within the watchdog's time
  crash,                       // the kernel's process died
  protocol,                    // the kernel's process sent the runner something it did not ask for
};

inline constexpr Check kAllChecks[] = {
    Check::oracle,          Check::nan_padding,   Check::unwritten_output,           Check::guard,
    Check::inputs_modified, Check::determinism,   Check::stale_state,                Check::stream,
    Check::unsupported_touched_output,            Check::ignored_unsupported,        Check::refused_supported,
    Check::kernel_error,    Check::exception,     Check::cuda_error,                 Check::timeout,
    Check::crash,           Check::protocol,
};

// "oracle", "nan-padding", "unwritten-output", ... (stable: reports and scripts use them).
const char* check_name(Check c);
std::optional<Check> check_from_name(std::string_view name);
// One line: what the check catches.
const char* check_meaning(Check c);
// Whether a failure of this check blames output elements (the report then names the first one).
bool blames_elements(Check c);

// A failed check: which, and one paragraph a person can act on.
struct Finding {
  Check check;
  std::string message;
};

// The runner's NaN poisons of C and the E4M3 NaN bytes it puts in padding cells, one per run.
// Both poisons are NaN (an unwritten element never passes as a number) with payloads FP16
// arithmetic does not produce (0x7E00/0xFE00 on NVIDIA hardware and x86), and they differ, so an
// element that keeps each run's poison is unwritten even where NaN is the right answer.
constexpr uint16_t kPoison1 = 0x7D5B;
constexpr uint16_t kPoison2 = 0xFEA7;
constexpr uint8_t kPad1 = 0x7F;
constexpr uint8_t kPad2 = 0xFF;

// ---- One function per check ---------------------------------------------------------------
// Each looks at what calls left behind and returns a Finding when its check fails. They are
// applied in the order case_check.cc gives; the first finding decides the case.

// The call itself: the kernel's process or device failed (crash, timeout, CUDA error,
// exception, protocol), or the return code is not the one expected.
std::optional<Finding> check_call_completed(const CallObservation& o);
std::optional<Finding> check_return_code(const CallObservation& o, int expected_rc);
std::optional<Finding> check_guards(const CallObservation& o);
std::optional<Finding> check_inputs_unchanged(const CallObservation& o);
std::optional<Finding> check_stream(const CallObservation& o);
// An element still holding `poison` where the reference wants a number (or, with `other`, an
// element that held each run's poison).
std::optional<Finding> check_unwritten(const Problem& p, const ExactResult& ref, const std::vector<uint16_t>& c,
                                       uint16_t poison, const std::vector<uint16_t>* other_c = nullptr,
                                       uint16_t other_poison = 0);
std::optional<Finding> check_untouched(const Problem& p, const std::vector<uint16_t>& c, uint16_t poison,
                                       const std::string& why);
std::optional<Finding> check_deterministic(const Problem& p, const std::vector<uint16_t>& run1,
                                           const std::vector<uint16_t>& run2);
// The oracle (rules 1-4 of SPEC section 3 under `policy`); *summary gets the judgement either way.
std::optional<Finding> check_oracle(const Problem& p, const ExactResult& ref, const std::vector<uint16_t>& c,
                                    const Policy& policy, OracleSummary* summary);

// The oracle's failure in words: how many outputs, the first (b, i, j), expected and actual,
// error in ulps and against the bound. When the policy assumes IEEE adders and the output would
// pass the matrix-unit model, says so and names NVFP4_FLAG_MMA_ACCUMULATE.
std::string oracle_text(const Problem& p, const ExactResult& ref, const std::vector<uint16_t>& c,
                        const OracleSummary& s, const Policy& policy);

// "1.5 (0x3e00)": an FP16 value as every message writes it (the shortest decimal of its value, then
// its bits).
std::string fp16_text(uint16_t h);
// "(b=0, i=3, j=1)": output element e of p (C order) as every message names it.
std::string position_text(const Problem& p, int64_t e);
// Where p's expect line first disagrees with the reference output, in words; "" when it has none
// or agrees.
std::string expect_mismatch(const Problem& p, const std::vector<uint16_t>& reference);

}  // namespace nvfp4
