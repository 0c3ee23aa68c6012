// The checks of checks.h: names, meanings, and one function each.
#include "harness/judge/checks.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/judge/nan_scale_hint.h"
#include "harness/ops/block_scaled_output.h"
#include "harness/ops/op_module.h"
#include "reference/block_scaled_output.h"
#include "reference/fp16.h"

namespace nvfp4 {
namespace {

struct CheckEntry {
  const char* name;
  bool blames_elements;
  CallNaming names_call;
  const char* meaning;
};

constexpr CheckEntry kEntries[] = {
#define NVFP4_CHECK_ENTRY(id, name, blames, names_call, meaning) {name, blames, CallNaming::names_call, meaning},
    NVFP4_CHECKS(NVFP4_CHECK_ENTRY)
#undef NVFP4_CHECK_ENTRY
};

using CheckFunction = std::optional<Finding> (*)(const CallContext&);
constexpr CheckFunction kFunctions[] = {
#define NVFP4_CHECK_POINTER(id, name, blames, names_call, meaning) &check_##id,
    NVFP4_CHECKS(NVFP4_CHECK_POINTER)
#undef NVFP4_CHECK_POINTER
};

const CheckEntry& entry(Check c) { return kEntries[static_cast<size_t>(c)]; }

std::string element_text(const Problem& p, int64_t e, uint32_t expected, uint32_t actual) {
  return fmt::format("{}: expected {}, actual {}", position_text(p, e), word_text(p.out_type, expected),
                     word_text(p.out_type, actual));
}

bool returned(const CallContext& x) { return x.observation->end == CallObservation::End::returned; }

std::optional<Finding> ended(const CallContext& x, CallObservation::End end, Check check, const std::string& lead = "") {
  if (x.observation->end != end) return std::nullopt;
  return Finding{check, lead + x.observation->error};
}

}  // namespace

// An element still holding the poison where the reference wants a number (or, for run 2, one
// that held each run's poison: unwritten even where NaN is the right answer).
std::optional<Finding> gemm_family::unwritten(const CallContext& x) {
  if (block_scaled_out::applies(*x.problem)) return block_scaled_out::unwritten(x);
  // The words as one vector (the oracle reads the same), scanned for the poison by std::find:
  // element by element through OutputWords' accessor this was a tenth of judging a grouped case.
  const std::vector<uint32_t>& c = x.observation->c.words();
  const OutputWords* other = x.call == CaseCall::run2 && x.run1 ? &x.run1->c : nullptr;
  const uint32_t run1_poison = poison_word(x.problem->out_type, 1);
  for (auto at = std::find(c.begin(), c.end(), x.poison); at != c.end(); at = std::find(at + 1, c.end(), x.poison)) {
    const size_t e = static_cast<size_t>(at - c.begin());
    if (x.reference->elems[e].nan && !(other && (*other)[e] == run1_poison)) continue;
    return Finding{Check::unwritten_output,
                   "left output elements unwritten (still the runner's NaN poison); the first " +
                       element_text(*x.problem, static_cast<int64_t>(e), x.reference->word(e), c[e])};
  }
  return std::nullopt;
}

std::optional<Finding> gemm_family::judge(const CallContext& x, OracleSummary* summary) {
  if (block_scaled_out::applies(*x.problem)) return block_scaled_out::judge(x, summary);
  *summary = judge_words(*x.problem, *x.reference, x.observation->c.data(), *x.policy);
  const OracleSummary& s = *summary;
  if (!s.any_failure()) return std::nullopt;
  Finding f{Check::oracle, oracle_text(x.problem->out_type, s, *x.policy), "",
            accumulation_hint(*x.problem, *x.reference, x.observation->c.words(), *x.policy)};
  if (f.hint.empty()) f.hint = nan_scale_hint(*x.problem, s);
  if (!f.hint.empty()) f.message += ". " + f.hint;
  return f;
}

namespace {

std::optional<Finding> unwritten(const CallContext& x) { return op_module(x.problem->op).unwritten(x); }

// The op's oracle on this call's output, once (later checks reuse the judgement).
std::optional<Finding> oracle_finding(const CallContext& x) {
  if (!x.judgement->done) {
    x.judgement->finding = op_module(x.problem->op).judge(x, &x.judgement->summary);
    x.judgement->done = true;
  }
  return x.judgement->finding;
}

// f (an oracle finding) under another check, with what leads up to it.
Finding blamed(Check check, const std::string& context, Finding f) {
  return Finding{check, context + ": " + f.message, context, f.hint};
}

// The second opinion of a CUDA kernel's call (x.rerun_inputs_ready: the case again with its inputs
// complete before the call) passes the op's oracle. False where none can be had: a host kernel, an
// op without a words oracle, a block-scaled output.
bool right_with_inputs_ready(const CallContext& x) {
  const auto judge_words = op_module(x.problem->op).judge_words;
  if (!x.rerun_inputs_ready || judge_words == nullptr || block_scaled_out::applies(*x.problem)) return false;
  const std::optional<std::vector<uint32_t>> ready = x.rerun_inputs_ready();
  return ready && !judge_words(*x.problem, *x.reference, ready->data(), *x.policy).any_failure();
}

// unwritten, a finding of C still holding the poison: the runner holds its stream while the kernel
// is called, so work the kernel queues on a stream of its own runs before the uploads, C's poison
// among them, and what it wrote is overwritten. Whether it lands before or after the poison is a
// race, and the verdict should not depend on it: right with the inputs complete before the call,
// the kernel wrote C, on another stream. Otherwise unwritten stands (a kernel that skips pointers
// it has seen leaves C unwritten in the second opinion too: the same pointers).
Finding unless_overwritten_by_the_poison(const CallContext& x, Finding unwritten) {
  if (!right_with_inputs_ready(x)) return unwritten;
  return blamed(Check::stream,
                "C still held the runner's poison once the whole device was done, but the output is right when the "
                "inputs are complete before the call: the kernel wrote C on a stream other than problem.stream (its "
                "own, or the legacy default stream) before the work queued on problem.stream (the runner's uploads, "
                "C's poison among them) had run, and that work overwrote it",
                std::move(unwritten));
}

}  // namespace

const char* check_name(Check c) { return entry(c).name; }
const char* check_meaning(Check c) { return entry(c).meaning; }
bool blames_elements(Check c) { return entry(c).blames_elements; }
CallNaming names_call(Check c) { return entry(c).names_call; }

void say_which_call(Finding& f, CaseCall call, const std::string& unsupported_why) {
  const CallNaming naming = names_call(f.check);
  if (naming == CallNaming::every && call == CaseCall::unsupported) f.message += " (" + unsupported_why + ")";
  if (naming != CallNaming::none && call == CaseCall::run2) f.message = "second run: " + f.message;
  if (naming == CallNaming::every && call == CaseCall::stale) f.message = "after new data in place: " + f.message;
}

std::optional<Check> check_from_name(std::string_view name) {
  for (Check c : kAllChecks)
    if (name == check_name(c)) return c;
  return std::nullopt;
}

const char* to_string(CaseCall call) {
  switch (call) {
    case CaseCall::none: return "";
    case CaseCall::start: return "start";
    case CaseCall::unsupported: return "unsupported";
    case CaseCall::run1: return "run 1";
    case CaseCall::run2: return "run 2";
    case CaseCall::stale: return "stale";
  }
  return "?";
}

const OracleSummary& judged(const CallContext& x) {
  (void)oracle_finding(x);
  return x.judgement->summary;
}

void throw_suite_memory(const CallObservation& o) {
  throw std::runtime_error(
      o.error +
      ": the case needs more memory than this machine leaves the kernel's process (ulimit -v, a cgroup's limit, the "
      "other lanes: fewer --jobs leave it more). A kernel that keeps memory from call to call ends a run this way "
      "too; `replay` of the saved case runs it alone, in a fresh process");
}

std::optional<Finding> first_finding(const CallContext& x) {
  if (x.observation->end == CallObservation::End::suite_memory) throw_suite_memory(*x.observation);
  for (CheckFunction f : kFunctions)
    if (std::optional<Finding> found = f(x)) return found;
  return std::nullopt;
}

// The shortest decimal that reads back to the same double (every FP16 value is one), so the text
// identifies the value; the bits settle NaN payloads and -0.
std::string fp16_text(uint16_t h) { return fmt::format("{} (0x{:04x})", fp16_to_double(h), h); }

std::string position_text(const Problem& p, int64_t e) {
  const OutputPosition pos = output_position(p, e);
  if (pos.g >= 0) return fmt::format("(g={}, i={}, j={})", pos.g, pos.i, pos.j);
  return fmt::format("(b={}, i={}, j={})", pos.b, pos.i, pos.j);
}

bool has_padding(const Problem& p) {
  // A quantizer's padding is an output it writes, judged by its oracle.
  if (p.sf_layout != SfLayout::permuted || op_quantizes(p.op)) return false;
  // A's and B's scale blocks per row differ when one operand is NVFP4 and the other MX.
  const auto padded = [&p](int64_t m, int64_t n, int64_t k) {
    return m % 128 != 0 || n % 128 != 0 || operand_kb(p.a_format, k) % 4 != 0 || operand_kb(p.b_format, k) % 4 != 0;
  };
  if (!op_is_grouped(p.op)) return padded(p.m, p.n, p.k);
  for (const Group& g : p.groups)
    if (g.m > 0 && padded(g.m, g.n, g.k)) return true;
  return false;
}

std::string expect_mismatch(const Problem& p, const ExactResult& reference) {
  // reference/'s one comparison: equal words, or any two NaNs of the output type (SPEC rule 1).
  const ExpectComparison cmp = compare_expect(p, reference, 1);
  if (cmp.differing == 0) return "";
  const int64_t x = cmp.first.front();
  if (op_quantizes(p.op) || p.out_type == OutType::nvfp4) {
    const bool quantize = op_quantizes(p.op);
    const std::vector<uint8_t> bytes = quantize ? std::vector<uint8_t>() : block_scaled_expect_bytes(p, reference);
    const int64_t q = quantize ? static_cast<int64_t>(reference.quant->q.size()) : out_q_bytes(p);
    const uint8_t due = !quantize ? bytes[static_cast<size_t>(x)]
                        : x < q   ? reference.quant->q[static_cast<size_t>(x)]
                                  : reference.quant->sfq[static_cast<size_t>(x - q)];
    return fmt::format("the {} line disagrees with the exact reference at byte {}: expect 0x{:02x}, reference 0x{:02x}",
                       x < q ? "expect_q" : "expect_sfq", x < q ? x : x - q, expect_word(p, x), due);
  }
  const std::string where = position_text(p, x);
  return fmt::format("the expect line disagrees with the exact reference at {}: expect {}, reference {}", where,
                     word_text(p.out_type, expect_word(p, x)), word_text(p.out_type, reference.word(static_cast<size_t>(x))));
}

// ---- How the call ended --------------------------------------------------------------------

std::optional<Finding> check_crash(const CallContext& x) {
  std::optional<Finding> f = ended(x, CallObservation::End::crash, Check::crash);
  if (!f || x.problem == nullptr || !op_is_grouped(x.problem->op)) return f;
  // An empty group's pointers are NULL: the likeliest cause of a grouped kernel's fault.
  for (size_t g = 0; g < x.problem->groups.size(); ++g)
    if (x.problem->groups[g].m == 0) {
      f->hint = fmt::format("group {} is empty (m = 0) and its a, b, sfa, sfb and c are NULL: a kernel that reads or "
                            "writes an empty group's rows faults", g);
      break;
    }
  return f;
}

std::optional<Finding> check_timeout(const CallContext& x) {
  if (auto f = ended(x, CallObservation::End::timeout, Check::timeout)) return f;
  return ended(x, CallObservation::End::device_hang, Check::timeout);
}

std::optional<Finding> check_protocol(const CallContext& x) {
  return ended(x, CallObservation::End::protocol, Check::protocol);
}

std::optional<Finding> check_exception(const CallContext& x) {
  return ended(x, CallObservation::End::exception, Check::exception, "the kernel threw: ");
}

std::optional<Finding> check_cuda_error(const CallContext& x) {
  return ended(x, CallObservation::End::cuda_error, Check::cuda_error);
}

// ---- What it returned and what it touched besides C -------------------------------------------

std::optional<Finding> check_ignored_unsupported(const CallContext& x) {
  const int rc = x.observation->rc;
  if (!returned(x) || x.expected_rc != NVFP4_UNSUPPORTED || rc == NVFP4_UNSUPPORTED) return std::nullopt;
  return Finding{Check::ignored_unsupported,
                 fmt::format("returned {} for a problem outside its declared constraints; it must return "
                             "NVFP4_UNSUPPORTED (1) and touch nothing", rc)};
}

std::optional<Finding> check_refused_supported(const CallContext& x) {
  if (!returned(x) || x.expected_rc == NVFP4_UNSUPPORTED || x.observation->rc != NVFP4_UNSUPPORTED)
    return std::nullopt;
  return Finding{Check::refused_supported, "returned NVFP4_UNSUPPORTED for a problem inside its declared constraints"};
}

std::optional<Finding> check_kernel_error(const CallContext& x) {
  const int rc = x.observation->rc;
  if (!returned(x) || rc == x.expected_rc || rc == NVFP4_UNSUPPORTED || x.expected_rc == NVFP4_UNSUPPORTED)
    return std::nullopt;
  return Finding{Check::kernel_error,
                 fmt::format("returned {} ({})", rc, rc == NVFP4_ERROR ? "NVFP4_ERROR" : "not an NVFP4_* code")};
}

std::optional<Finding> check_guard(const CallContext& x) {
  const CallObservation& o = *x.observation;
  if (!returned(x) || o.guards.empty()) return std::nullopt;
  return Finding{Check::guard, "wrote out of bounds: " + o.guards.front().damage.describe(o.guards.front().buffer)};
}

std::optional<Finding> check_inputs_modified(const CallContext& x) {
  const CallObservation& o = *x.observation;
  if (auto f = ended(x, CallObservation::End::input_fault, Check::inputs_modified)) return f;
  if (!returned(x) || o.inputs.empty()) return std::nullopt;
  const InputChange& c = o.inputs.front();
  return Finding{Check::inputs_modified,
                 fmt::format("changed its input {}: {} byte(s) differ, the first at offset {} (was 0x{:02x}, now "
                             "0x{:02x})", c.buffer, c.count, c.first, c.was, c.now)};
}

std::optional<Finding> check_stream(const CallContext& x) {
  const CallObservation& o = *x.observation;
  if (!returned(x) || o.c_later == o.c) return std::nullopt;
  return Finding{Check::stream,
                 "C changed after the runner's stream had finished: the kernel does work on a stream other than "
                 "problem.stream (the legacy default stream, or its own)"};
}

// ---- C ---------------------------------------------------------------------------------------

std::optional<Finding> check_unsupported_touched_output(const CallContext& x) {
  if (x.call != CaseCall::unsupported) return std::nullopt;
  const OutputWords& c = x.observation->c;
  if (op_quantizes(x.problem->op)) {
    // A quantizer's outputs held the call's poison and, in the permuted SFQ's padding, its pad
    // byte: what the op's buffers held before the call, word for word.
    CallSpec spec;
    spec.pad = x.pad;
    spec.poison = x.poison;
    std::vector<uint32_t> before;
    for (const OutputTensor& o : op_module(Op::quantize).lay_out(*x.problem, spec, x.kernel_flags).outputs)
      before.insert(before.end(), o.before.begin(), o.before.end());
    for (size_t e = 0; e < c.size() && e < before.size(); ++e)
      if (c[e] != before[e])
        return Finding{Check::unsupported_touched_output,
                       fmt::format("returned NVFP4_UNSUPPORTED ({}) but wrote its outputs: byte {} of Q and SFQ is "
                                   "0x{:02x}, it held 0x{:02x}",
                                   x.unsupported_why, e, c[e], before[e])};
    return std::nullopt;
  }
  for (size_t e = 0; e < c.size(); ++e) {
    if (c[e] == x.poison) continue;
    return Finding{Check::unsupported_touched_output,
                   fmt::format("returned NVFP4_UNSUPPORTED ({}) but wrote C at {}: {}", x.unsupported_why,
                               position_text(*x.problem, static_cast<int64_t>(e)), word_text(x.problem->out_type, c[e]))};
  }
  return std::nullopt;
}

std::optional<Finding> check_unwritten_output(const CallContext& x) {
  if (x.call != CaseCall::run1 && x.call != CaseCall::run2) return std::nullopt;
  std::optional<Finding> f = unwritten(x);
  if (!f) return f;
  return unless_overwritten_by_the_poison(x, std::move(*f));
}

// Run 1 only: when the output fails the oracle, does it depend on the padding cells? Run again
// with zero padding: right then, the NaN scales in the padding are to blame.
std::optional<Finding> check_nan_padding(const CallContext& x) {
  if (x.call != CaseCall::run1 || !has_padding(*x.problem) || !x.rerun_zero_padding) return std::nullopt;
  // A block-scaled output has padding of its own, which the re-run fills with the same zero byte
  // its oracle expects there: a kernel that leaves that padding unwritten would pass the re-run
  // and be blamed on the inputs' NaN padding. Its failure stays the oracle's, which names it.
  if (block_scaled_out::applies(*x.problem)) return std::nullopt;
  std::optional<Finding> oracle = oracle_finding(x);
  if (!oracle) return std::nullopt;
  // Only word outputs get here (above), so the op's words oracle judges the re-run.
  const auto judge_words = op_module(x.problem->op).judge_words;
  if (judge_words == nullptr) return std::nullopt;
  const std::optional<std::vector<uint32_t>> zero = x.rerun_zero_padding();
  if (!zero || judge_words(*x.problem, *x.reference, zero->data(), *x.policy).any_failure()) return std::nullopt;
  return blamed(Check::nan_padding,
                 "the output depends on the permuted layout's padding cells (the runner fills them with NaN scales; "
                 "with zero padding the output is right)",
                 std::move(*oracle));
}

std::optional<Finding> check_oracle(const CallContext& x) {
  // A deterministic kernel's run 2 is judged by matching run 1 bit for bit.
  if (x.call != CaseCall::run1 && !(x.call == CaseCall::run2 && x.nondeterministic)) return std::nullopt;
  return oracle_finding(x);
}

std::optional<Finding> check_determinism(const CallContext& x) {
  if (x.call != CaseCall::run2 || x.nondeterministic || !x.run1) return std::nullopt;
  const OutputWords& run1 = x.run1->c;
  const OutputWords& run2 = x.observation->c;
  if (run1 == run2) return std::nullopt;  // one comparison of the storage (a huge case's 1.2 GB)
  int64_t differing = 0, first = -1;
  for (size_t e = 0; e < run1.size(); ++e)
    if (run1[e] != run2[e] && differing++ == 0) first = static_cast<int64_t>(e);
  if (differing == 0) return std::nullopt;
  return Finding{Check::determinism,
                 fmt::format("two runs on the same inputs differ in {} element(s) and the kernel does not declare "
                             "NVFP4_FLAG_NONDETERMINISTIC; the first {}: run 1 {}, run 2 {}",
                             differing, position_text(*x.problem, first), word_text(x.problem->out_type, run1[first]),
                             word_text(x.problem->out_type, run2[first]))};
}

std::optional<Finding> check_stale_state(const CallContext& x) {
  if (x.call != CaseCall::stale) return std::nullopt;
  // The stale call's uploads are held as the runs' are.
  if (std::optional<Finding> f = unwritten(x))
    return unless_overwritten_by_the_poison(
        x, Finding{Check::stale_state, "after new input data in the same buffers, " + f->message});
  std::optional<Finding> f = oracle_finding(x);
  if (!f) return std::nullopt;
  // The runner holds its stream while the kernel is called, so a kernel computing on a stream of
  // its own reads the buffers before this call's data arrive: run 1's data, or part of it. It
  // looks like kept state, but with the inputs complete before each call it is right; a kernel
  // that keeps state is not (its pointers are the same in the second try).
  if (right_with_inputs_ready(x))
    return blamed(Check::stream,
                  "the output does not match the new data, but it does when the inputs are complete before the "
                  "call: the kernel read its inputs before the work queued on problem.stream (the runner's "
                  "uploads) had finished, so it computes on a stream of its own (or the legacy default stream) "
                  "without waiting for problem.stream",
                  std::move(*f));
  // Run 1's output back unchanged is most likely a result kept by pointer (an output that ignores
  // the data would show the same, but rarely passes run 1). Any other wrong output may be state
  // kept from the call before (decoded inputs, a partial cache) or a kernel wrong on this data
  // alone; only a run of this data first, in a fresh process, tells them apart.
  if (x.run1 && x.run1->c == x.observation->c)
    return blamed(Check::stale_state,
                  "after new input data was written to the same buffers (same pointers, same shape), the kernel "
                  "returned run 1's output unchanged, bit for bit: most likely a result kept by pointer",
                  std::move(*f));
  return blamed(Check::stale_state,
                "after new input data was written to the same buffers (same pointers, same shape), the output does "
                "not match the new data, nor is it run 1's output: the kernel keeps state from the call before "
                "(decoded inputs or scales by pointer), or it is wrong on this data alone; the reproduce line "
                "runs this data first, in a fresh process: failing there in run 1, it is the data",
                std::move(*f));
}

std::string element_position_text(const OracleSummary& s) {
  if (s.first_g >= 0) return fmt::format("(g={}, i={}, j={})", s.first_g, s.first_i, s.first_j);
  return fmt::format("(b={}, i={}, j={})", s.first_b, s.first_i, s.first_j);
}

std::string infinite_error_text(OutType type, uint32_t expected, uint32_t actual, double error_ulps) {
  const OutFormat f = out_format(type);
  const bool expected_inf = is_inf_out(type, expected), actual_inf = is_inf_out(type, actual);
  const bool expected_nan = is_nan_out(type, expected), actual_nan = is_nan_out(type, actual);
  if (!expected_inf && !actual_inf && std::isfinite(error_ulps)) return "";
  if (expected_inf && actual_inf) return "the kernel gave an infinity of the wrong sign";
  if (expected_inf) {
    const std::string overflows =
        fmt::format("the exact value overflows {} (its magnitude is at least {}, which rounds to inf)", to_string(type),
                    overflow_threshold(type));
    if (actual_nan) return "the kernel gave NaN where " + overflows;
    if ((actual & ~f.sign_bit) == f.max_finite && (actual & f.sign_bit) == (expected & f.sign_bit))
      return "the kernel saturated to the largest finite value where " + overflows;
    return "the kernel gave a finite value where " + overflows;
  }
  if (actual_inf)
    return expected_nan ? "the kernel gave inf where NaN is due"
                        : fmt::format("the kernel gave inf where the exact value rounds to a finite {}", to_string(type));
  if (actual_nan) return "the kernel gave NaN where a number is due";
  if (expected_nan) return "the kernel gave a number where NaN is due";
  return "the error is infinite";
}

std::string oracle_text(OutType type, const OracleSummary& s, const Policy& policy) {
  const ElementVerdict& v = s.first;
  const std::string lead = fmt::format("{} of {} outputs are wrong under policy {}; the first {}: expected {}, actual {}",
                                       s.failing, s.elements, policy.name(), element_position_text(s),
                                       word_text(type, v.expected_bits), word_text(type, s.first_actual));
  // An ulp count of an infinite distance says nothing: where an infinity or NaN is wrong, words.
  if (const std::string words = infinite_error_text(type, v.expected_bits, s.first_actual, v.error_ulps);
      !words.empty())
    return lead + ": " + words;
  return fmt::format(
      "{}; error {:.4g} ulps, {:.4g} x the allowed bound {:.4g}{}", lead, v.error_ulps, v.error_over_bound, v.bound,
      v.exact_regime ? fmt::format(" (exact regime: only the bit-exact RN_{} result is right; the bound shown is its "
                                   "own half-ulp rounding)", to_string(type))
                     : "");
}

std::string accumulation_hint(const Problem& p, const ExactResult& ref, const std::vector<uint32_t>& c,
                              const Policy& policy) {
  if (!policy.models_accumulation() || policy.accumulation != Accumulation::ieee_fp32) return "";
  // Only where an output is the accumulation itself. A dual GEMM's output is silu(G) * U, whose
  // epilogue (exp, divide, product, FP32's underflow) errs in ways the matrix-unit rule's wider
  // allowance for G and U would absorb: the flag would hide such an error, not explain it.
  if (op_is_dual(p.op)) return "";
  const auto judge_words = op_module(p.op).judge_words;
  if (judge_words == nullptr) return "";
  const Policy as_mma = policy.with_accumulation(Accumulation::matrix_unit);
  if (judge_words(p, ref, c.data(), as_mma).any_failure()) return "";
  return fmt::format(
      "Every output is within what the matrix-unit accumulation model ({}: exact below 2^{} g, t' = {}t) allows: "
      "if the kernel adds on tensor cores, it should declare NVFP4_FLAG_MMA_ACCUMULATE (and keep its operands "
      "normal: see docs/MATRIX_UNITS.md)",
      as_mma.name(), as_mma.rule().exact_bits, as_mma.rule().t_factor);
}

}  // namespace nvfp4
