// The checks a case goes through, as one list: each entry is a check's name (what reports and the
// JSON use), whether its failure blames output elements, one line saying what it catches, and one
// function in checks.cc that looks at what a kernel call left behind. The list's order is the
// order they are applied in; the first finding decides the case. Adding a check is one entry here
// and one function there.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/process/kernel_call.h"
#include "reference/exact_gemm.h"
#include "reference/oracle.h"
#include "reference/problem.h"

namespace nvfp4 {

// X(id, name, blames_elements, names_call, meaning). names_call: which later calls a finding's
// message names ("second run: ...", "after new data in place: ...", the refused problem's
// reason): `every` for what is about the call itself (how it ended, what it returned or touched),
// `run2` for a result judged again on the second run, `none` for checks whose message says it.
#define NVFP4_CHECKS(X)                                                                                                \
  /* How the call ended. */                                                                                            \
  X(crash, "crash", false, every, "the kernel's process died")                                                         \
  X(timeout, "timeout", false, every, "a call did not finish within the watchdog's time")                              \
  X(protocol, "protocol", false, every, "the kernel's process sent the runner something it did not ask for")           \
  X(exception, "exception", false, every, "the kernel threw an exception (C++ or Python)")                             \
  X(cuda_error, "cuda-error", false, every, "a CUDA error during or after the call")                                   \
  /* What it returned and what it touched besides C. */                                                                \
  X(ignored_unsupported, "ignored-unsupported", false, every, "a problem outside the declared constraints was not refused") \
  X(refused_supported, "refused-supported", false, every, "NVFP4_UNSUPPORTED for a problem inside the declared constraints") \
  X(kernel_error, "kernel-error", false, every, "NVFP4_ERROR, or a return code that is no NVFP4_* code")               \
  X(guard, "guard", false, every, "a write before or past the end of a buffer")                                        \
  X(inputs_modified, "inputs-modified", false, every, "an input buffer changed during the call")                       \
  X(stream, "stream", false, every,                                                                                     \
    "work on a stream other than problem.stream: C changed after the runner's stream had finished, or the runner's "     \
    "uploads overwrote it")                                                                                             \
  /* C. */                                                                                                             \
  X(unsupported_touched_output, "unsupported-touched-output", false, none, "NVFP4_UNSUPPORTED returned, but C was written") \
  X(unwritten_output, "unwritten-output", false, none, "an output element still holds the runner's NaN poison")        \
  X(nan_padding, "nan-padding", true, none,                                                                            \
    "the output depends on the permuted layout's padding cells (filled with NaN scales)")                              \
  X(oracle, "oracle", true, run2, "an output element outside what the oracle accepts (SPEC section 3)")                \
  X(determinism, "determinism", false, none, "two runs on the same inputs differ, and NONDETERMINISTIC is not declared") \
  X(stale_state, "stale-state", true, none, "after new data through the same pointers, the output did not follow the data")

enum class Check : uint8_t {
#define NVFP4_CHECK_ENUM(id, name, blames, names_call, meaning) id,
  NVFP4_CHECKS(NVFP4_CHECK_ENUM)
#undef NVFP4_CHECK_ENUM
};

inline constexpr Check kAllChecks[] = {
#define NVFP4_CHECK_VALUE(id, name, blames, names_call, meaning) Check::id,
    NVFP4_CHECKS(NVFP4_CHECK_VALUE)
#undef NVFP4_CHECK_VALUE
};

// "oracle", "nan-padding", "unwritten-output", ... (stable: reports and scripts use them).
const char* check_name(Check c);
std::optional<Check> check_from_name(std::string_view name);
// One line: what the check catches.
const char* check_meaning(Check c);
// Whether a failure of this check blames output elements (the report then names the first one).
bool blames_elements(Check c);
// Which later calls a finding of this check names in its message (the list's names_call).
enum class CallNaming : uint8_t { every, run2, none };
CallNaming names_call(Check c);

// A failed check: which, and one paragraph a person can act on.
struct Finding {
  Finding(Check c, std::string m, std::string ctx = "", std::string h = "")
      : check(c), message(std::move(m)), context(std::move(ctx)), hint(std::move(h)) {}
  Check check;
  std::string message;  // the whole paragraph
  // For checks that blame elements: what the message says before it names them ("the output
  // depends on ..."), so a report that prints the element itself need not parse the message.
  std::string context;
  std::string hint;     // a likely cause the suite can name (a flag to declare), or ""
};

// The runner's NaN poisons of C and the E4M3 NaN bytes it puts in padding cells, one per run.
// Both poisons are NaN (an unwritten element never passes as a number) with payloads the
// type's arithmetic does not produce (the canonical quiet NaNs 0x7E00/0xFE00, 0x7FC0/0xFFC0,
// 0x7FC00000/0xFFC00000 of x86, and NVIDIA's all-ones 0x7FFF/0x7FFFFFFF), and they differ, so an
// element that keeps each run's poison is unwritten even where NaN is the right answer.
constexpr uint16_t kPoison1 = 0x7D5B;  // FP16
constexpr uint16_t kPoison2 = 0xFEA7;
constexpr uint8_t kPad1 = 0x7F;
constexpr uint8_t kPad2 = 0xFF;
// Run 1's or run 2's poison word in output type t (kPoison1/kPoison2 for FP16).
constexpr uint32_t poison_word(OutType t, int run) {
  switch (t) {
    case OutType::bf16: return run == 1 ? 0x7FA5u : 0xFF8Bu;
    case OutType::fp32: return run == 1 ? 0x7FA5A55Bu : 0xFF8B5AA7u;
    case OutType::fp16:
    case OutType::nvfp4: break;  // block-scaled output: the byte of Q and SFQ is the word's low byte
  }
  return run == 1 ? kPoison1 : kPoison2;
}

// The calls of one case (a call's role decides which checks apply to it).
enum class CaseCall : uint8_t {
  none,
  start,        // the kernel's process could not be started
  unsupported,  // a problem outside the declared constraints: must come back NVFP4_UNSUPPORTED
  run1,         // NaN padding kPad1, poison kPoison1
  run2,         // the other padding and poison: must match run 1 bit for bit
  stale,        // new data through the same pointers
};
const char* to_string(CaseCall call);  // "start", "unsupported", "run 1", "run 2", "stale"
constexpr int kCaseCalls = static_cast<int>(CaseCall::stale) + 1;

// f's message naming the call it came from, as names_call(f.check) says: "second run: ...",
// "after new data in place: ...", or the refused problem's reason after it.
void say_which_call(Finding& f, CaseCall call, const std::string& unsupported_why);

// Everything one check may look at for one call. The check functions take only this, so they
// share one signature and check_case is a loop over the list.
struct CallContext {
  CaseCall call = CaseCall::none;
  const Problem* problem = nullptr;      // the data this call computed on (the stale data for `stale`)
  const ExactResult* reference = nullptr;
  const CallObservation* observation = nullptr;
  int expected_rc = NVFP4_OK;
  uint32_t poison = kPoison1;            // the word C held before this call (poison_word)
  const CallObservation* run1 = nullptr;  // run 1's observation, for run 2 and the stale call
  const Policy* policy = nullptr;
  bool nondeterministic = false;          // the kernel declares NVFP4_FLAG_NONDETERMINISTIC
  uint32_t kernel_flags = 0;              // all the kernel's flags (ops read theirs)
  uint8_t pad = kPad1;                    // the byte this call's padding cells held
  std::string unsupported_why;            // for `unsupported`: why the problem is outside
  // Runs the case again with zero padding (nan_padding's second opinion); empty when none can.
  std::function<std::optional<std::vector<uint32_t>>()> rerun_zero_padding;
  // For the stale call: runs the case and then the stale data again, each with its inputs complete
  // before the call, and gives the second call's output (stale_state's second opinion: a kernel
  // that computes on a stream of its own reads the held inputs too early). For runs 1 and 2: runs
  // the case again so, and gives C once the device is done (unwritten_output's second opinion:
  // such a kernel's output can land before C's poison). Empty when none can (a host kernel).
  std::function<std::optional<std::vector<uint32_t>>()> rerun_inputs_ready;
  // The oracle's judgement of this call's output, made once by whichever check needs it first.
  struct Judgement {
    bool done = false;
    OracleSummary summary;
    std::optional<Finding> finding;
  };
  Judgement* judgement = nullptr;
};
// x's output judged by its op's oracle under x.policy (once; later calls return the same judgement).
const OracleSummary& judged(const CallContext& x);

// One function per check: a Finding when the check fails for this call, nullopt when it passes
// or does not apply to this call.
#define NVFP4_CHECK_FUNCTION(id, name, blames, names_call, meaning) std::optional<Finding> check_##id(const CallContext& x);
NVFP4_CHECKS(NVFP4_CHECK_FUNCTION)
#undef NVFP4_CHECK_FUNCTION

// The list applied in order to one call: the first finding, else nullopt. A call that ended in
// suite_memory is judged by nobody: throw_suite_memory.
std::optional<Finding> first_finding(const CallContext& x);
// The run's error for a call that ended in suite_memory (memory the suite could not have in the
// kernel's process says nothing of the kernel): a std::runtime_error saying what to do.
[[noreturn]] void throw_suite_memory(const CallObservation& o);

// The oracle's failure in words: how many outputs, the first (b, i, j), expected and actual,
// error in ulps and against the bound (or infinite_error_text).
std::string oracle_text(OutType type, const OracleSummary& s, const Policy& policy);
// Where an infinity or NaN makes an element wrong (the expected or actual word is Inf, or the
// error is infinite), what happened in words ("the kernel saturated to the largest finite value
// where the exact value overflows fp16 ..."): an ulp count says nothing there. "" otherwise.
std::string infinite_error_text(OutType type, uint32_t expected, uint32_t actual, double error_ulps);
// "(b=0, i=3, j=1)" or "(g=2, i=3, j=1)": the oracle's first failing element.
std::string element_position_text(const OracleSummary& s);
// When the policy assumes IEEE adders, the op's outputs are sums of products (GEMV, GEMM,
// grouped GEMM; not dual GEMM's silu(G) * U) and every output would pass the matrix-unit model,
// a sentence saying so that names NVFP4_FLAG_MMA_ACCUMULATE (SPEC section 3); else "".
std::string accumulation_hint(const Problem& p, const ExactResult& ref, const std::vector<uint32_t>& c,
                              const Policy& policy);

// "1.5 (0x3e00)": an FP16 value as every message writes it (the shortest decimal of its value, then
// its bits); word_text (out_type.h) is the same for every output type.
std::string fp16_text(uint16_t h);
// "(b=0, i=3, j=1)", or "(g=2, i=3, j=1)" for a grouped problem: output element e of p (output
// order) as every message names it.
std::string position_text(const Problem& p, int64_t e);
// Whether a call of p has padding cells a correct kernel must ignore: the permuted layout with
// rows not a multiple of 128 or blocks not of 4 (any group's, for a grouped problem).
bool has_padding(const Problem& p);
// Where p's expect line first disagrees with the reference output, in words; "" when it has none
// or agrees. Any two NaNs agree (SPEC section 3, rule 1: any NaN payload is right).
std::string expect_mismatch(const Problem& p, const ExactResult& reference);

}  // namespace nvfp4
