// The checks of checks.h: names, meanings, and one function each.
#include "harness/checks.h"

#include <fmt/format.h>

#include "reference/fp16.h"

namespace nvfp4 {
namespace {

struct CheckEntry {
  Check check;
  const char* name;
  const char* meaning;
};

constexpr CheckEntry kEntries[] = {
    {Check::oracle, "oracle", "an output element outside what the oracle accepts (SPEC section 3)"},
    {Check::nan_padding, "nan-padding", "the output depends on the permuted layout's padding cells (filled with NaN scales)"},
    {Check::unwritten_output, "unwritten-output", "an output element still holds the runner's NaN poison"},
    {Check::guard, "guard", "a write before or past the end of a buffer"},
    {Check::inputs_modified, "inputs-modified", "an input buffer changed during the call"},
    {Check::determinism, "determinism", "two runs on the same inputs differ, and NONDETERMINISTIC is not declared"},
    {Check::stale_state, "stale-state", "after new data through the same pointers, the output did not follow the data"},
    {Check::stream, "stream", "C changed after the runner's stream had finished: work on another stream"},
    {Check::unsupported_touched_output, "unsupported-touched-output", "NVFP4_UNSUPPORTED returned, but C was written"},
    {Check::ignored_unsupported, "ignored-unsupported", "a problem outside the declared constraints was not refused"},
    {Check::refused_supported, "refused-supported", "NVFP4_UNSUPPORTED for a problem inside the declared constraints"},
    {Check::kernel_error, "kernel-error", "NVFP4_ERROR, or a return code that is no NVFP4_* code"},
    {Check::exception, "exception", "the kernel threw an exception (C++ or Python)"},
    {Check::cuda_error, "cuda-error", "a CUDA error during or after the call"},
    {Check::timeout, "timeout", "a call did not finish within the watchdog's time"},
    {Check::crash, "crash", "the kernel's process died"},
    {Check::protocol, "protocol", "the kernel's process sent the runner something it did not ask for"},
};

const CheckEntry& entry(Check c) {
  for (const CheckEntry& e : kEntries)
    if (e.check == c) return e;
  return kEntries[0];
}

std::string element_text(const Problem& p, int64_t e, uint16_t expected, uint16_t actual) {
  return fmt::format("{}: expected {}, actual {}", position_text(p, e), fp16_text(expected), fp16_text(actual));
}

}  // namespace

const char* check_name(Check c) { return entry(c).name; }
const char* check_meaning(Check c) { return entry(c).meaning; }

std::optional<Check> check_from_name(std::string_view name) {
  for (const CheckEntry& e : kEntries)
    if (name == e.name) return e.check;
  return std::nullopt;
}

bool blames_elements(Check c) {
  return c == Check::oracle || c == Check::nan_padding || c == Check::stale_state;
}

// The shortest decimal that reads back to the same double (every FP16 value is one), so the text
// identifies the value; the bits settle NaN payloads and -0.
std::string fp16_text(uint16_t h) { return fmt::format("{} (0x{:04x})", fp16_to_double(h), h); }

std::string position_text(const Problem& p, int64_t e) {
  return fmt::format("(b={}, i={}, j={})", e / (p.m * p.n), (e / p.n) % p.m, e % p.n);
}

std::string expect_mismatch(const Problem& p, const std::vector<uint16_t>& reference) {
  if (!p.expect || *p.expect == reference) return "";
  const std::vector<uint16_t>& e = *p.expect;
  size_t x = 0;
  while (e[x] == reference[x]) ++x;
  return fmt::format("the expect line disagrees with the exact reference at {}: expect {}, reference {}",
                     position_text(p, static_cast<int64_t>(x)), fp16_text(e[x]), fp16_text(reference[x]));
}

std::optional<Finding> check_call_completed(const CallObservation& o) {
  using End = CallObservation::End;
  switch (o.end) {
    case End::returned:
      return std::nullopt;
    case End::exception:
      return Finding{Check::exception, "the kernel threw: " + o.error};
    case End::device_error:
      return Finding{o.device_check == "timeout" ? Check::timeout : Check::cuda_error, o.error};
    case End::crash:
      return Finding{Check::crash, o.error};
    case End::timeout:
      return Finding{Check::timeout, o.error};
    case End::protocol:
      return Finding{Check::protocol, o.error};
    case End::input_fault:
      return Finding{Check::inputs_modified, o.error};
  }
  return Finding{Check::crash, "unknown end of a call"};
}

std::optional<Finding> check_return_code(const CallObservation& o, int expected_rc) {
  if (o.rc == expected_rc) return std::nullopt;
  if (expected_rc == NVFP4_UNSUPPORTED)
    return Finding{Check::ignored_unsupported,
                   fmt::format("returned {} for a problem outside its declared constraints; it must return "
                               "NVFP4_UNSUPPORTED (1) and touch nothing", o.rc)};
  if (o.rc == NVFP4_UNSUPPORTED)
    return Finding{Check::refused_supported, "returned NVFP4_UNSUPPORTED for a problem inside its declared constraints"};
  return Finding{Check::kernel_error,
                 fmt::format("returned {} ({})", o.rc, o.rc == NVFP4_ERROR ? "NVFP4_ERROR" : "not an NVFP4_* code")};
}

std::optional<Finding> check_guards(const CallObservation& o) {
  if (o.guards.empty()) return std::nullopt;
  return Finding{Check::guard, "wrote out of bounds: " + o.guards.front().damage.describe(o.guards.front().buffer)};
}

std::optional<Finding> check_inputs_unchanged(const CallObservation& o) {
  if (o.inputs.empty()) return std::nullopt;
  const InputChange& x = o.inputs.front();
  return Finding{Check::inputs_modified,
                 fmt::format("changed its input {}: {} byte(s) differ, the first at offset {} (was 0x{:02x}, now "
                             "0x{:02x})", x.buffer, x.count, x.first, x.was, x.now)};
}

std::optional<Finding> check_stream(const CallObservation& o) {
  if (o.c_later == o.c) return std::nullopt;
  return Finding{Check::stream,
                 "C changed after the runner's stream had finished: the kernel does work on a stream other than "
                 "problem.stream (the legacy default stream, or its own)"};
}

std::optional<Finding> check_unwritten(const Problem& p, const ExactResult& ref, const std::vector<uint16_t>& c,
                                       uint16_t poison, const std::vector<uint16_t>* other_c, uint16_t other_poison) {
  for (size_t e = 0; e < c.size(); ++e) {
    if (c[e] != poison) continue;
    const bool unwritten = !ref.elems[e].nan || (other_c && (*other_c)[e] == other_poison);
    if (!unwritten) continue;
    return Finding{Check::unwritten_output,
                   "left output elements unwritten (still the runner's NaN poison); the first " +
                       element_text(p, static_cast<int64_t>(e), ref.c[e], c[e])};
  }
  return std::nullopt;
}

std::optional<Finding> check_untouched(const Problem& p, const std::vector<uint16_t>& c, uint16_t poison,
                                       const std::string& why) {
  for (size_t e = 0; e < c.size(); ++e) {
    if (c[e] == poison) continue;
    return Finding{Check::unsupported_touched_output,
                   fmt::format("returned NVFP4_UNSUPPORTED ({}) but wrote C at {}: {}", why,
                               position_text(p, static_cast<int64_t>(e)), fp16_text(c[e]))};
  }
  return std::nullopt;
}

std::optional<Finding> check_deterministic(const Problem& p, const std::vector<uint16_t>& run1,
                                           const std::vector<uint16_t>& run2) {
  int64_t differing = 0, first = -1;
  for (size_t e = 0; e < run1.size(); ++e)
    if (run1[e] != run2[e] && differing++ == 0) first = static_cast<int64_t>(e);
  if (differing == 0) return std::nullopt;
  return Finding{Check::determinism,
                 fmt::format("two runs on the same inputs differ in {} element(s) and the kernel does not declare "
                             "NVFP4_FLAG_NONDETERMINISTIC; the first {}: run 1 {}, run 2 {}",
                             differing, position_text(p, first), fp16_text(run1[first]), fp16_text(run2[first]))};
}

std::string oracle_text(const Problem& p, const ExactResult& ref, const std::vector<uint16_t>& c,
                        const OracleSummary& s, const Policy& policy) {
  const ElementVerdict& v = s.first;
  std::string text = fmt::format(
      "{} of {} outputs are wrong under policy {}; the first (b={}, i={}, j={}): expected {}, actual {}; error "
      "{:.4g} ulps, {:.4g} x the allowed bound {:.4g}{}",
      s.failing, s.elements, policy.name(), s.first_b, s.first_i, s.first_j, fp16_text(v.expected_bits),
      fp16_text(s.first_actual), v.error_ulps, v.error_over_bound, v.bound,
      v.exact_regime ? " (exact regime: only the bit-exact RN16 result is right; the bound shown is its own half-ulp "
                       "rounding)"
                     : "");
  // SPEC section 3: a kernel judged as adding in IEEE FP32 that fails only by what matrix units
  // may lose is told so, with the flag that declares it.
  const Policy as_mma = policy.with_accumulation(Accumulation::matrix_unit);
  if (policy.models_accumulation() && policy.accumulation == Accumulation::ieee_fp32 &&
      !judge(p, ref, c.data(), as_mma).any_failure())
    text += fmt::format(
        ". Every output is within what the matrix-unit accumulation model ({}: exact below 2^{} g, t' = {}t) "
        "allows: if the kernel adds on tensor cores, it should declare NVFP4_FLAG_MMA_ACCUMULATE (and keep its "
        "operands normal: see docs/MATRIX_UNITS.md)",
        as_mma.name(), as_mma.rule().exact_bits, as_mma.rule().t_factor);
  return text;
}

std::optional<Finding> check_oracle(const Problem& p, const ExactResult& ref, const std::vector<uint16_t>& c,
                                    const Policy& policy, OracleSummary* summary) {
  *summary = judge(p, ref, c.data(), policy);
  if (!summary->any_failure()) return std::nullopt;
  return Finding{Check::oracle, oracle_text(p, ref, c, *summary, policy)};
}

}  // namespace nvfp4
