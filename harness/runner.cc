// The checks of one case against one kernel (see runner.h). Each kernel call gets guarded
// buffers, NaN scale padding and a NaN poison in C; everything a kernel could get wrong besides
// the arithmetic (writes out of bounds, unwritten outputs, modified inputs, stale state, the wrong
// stream, run-to-run differences, ignored constraints) is a named check of its own.
#include "harness/runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/device_buffers.h"
#include "gpu_reference/exact_gemm_gpu.h"
#include "harness/generators.h"
#include "reference/case_file.h"
#include "reference/fp16.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

// C is filled with one of these before a run. Both are NaN (so an unwritten element can never
// pass as a number) with payloads FP16 arithmetic does not produce (quiet NaNs from arithmetic
// are 0x7E00/0xFE00 on NVIDIA hardware and x86), and they differ, so an element that keeps
// the poison of each run is unwritten even where NaN is the right answer.
constexpr uint16_t kPoison1 = 0x7D5B;
constexpr uint16_t kPoison2 = 0xFEA7;
// Padding cells of the permuted scale layout: both E4M3 NaN bytes, one per run.
constexpr uint8_t kPad1 = 0x7F;
constexpr uint8_t kPad2 = 0xFF;

// (b, i, j) of a C-order element index.
struct Index3 {
  int64_t b, i, j;
};
Index3 index3(const Problem& p, int64_t e) {
  return {e / (p.m * p.n), (e / p.n) % p.m, e % p.n};
}

ScaleSemantics kernel_semantics(const nvfp4_kernel_info& info) {
  return (info.flags & NVFP4_FLAG_SIGNED_SCALES) ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
}

bool any_sign_bit(const std::vector<uint8_t>& scales) {
  return std::any_of(scales.begin(), scales.end(), [](uint8_t s) { return (s & 0x80u) && (s & 0x7Fu) != 0x7F; });
}

// The inputs as one kernel call sees them: scales in the problem's layout, padding filled.
struct LaidOut {
  std::vector<uint8_t> a, b, sfa, sfb;
};

LaidOut lay_out(const Problem& p, uint8_t pad) {
  LaidOut in{p.a, p.b, p.sfa, p.sfb};
  if (p.sf_layout == SfLayout::permuted) {
    in.sfa = sf_to_permuted(p.sfa.data(), p.m, p.kb(), p.l, pad);
    in.sfb = sf_to_permuted(p.sfb.data(), p.n, p.kb(), p.l, pad);
  }
  return in;
}

bool has_padding(const Problem& p) {
  return p.sf_layout == SfLayout::permuted && (p.m % 128 != 0 || p.n % 128 != 0 || p.kb() % 4 != 0);
}

// One kernel's buffers, kept across the runs of a case so the stale-state run reuses the pointers.
struct Buffers {
  std::unique_ptr<KernelMemory> memory;
  std::unique_ptr<GuardedBuffer> a, b, sfa, sfb, c;

  Buffers(uint32_t memory_kind, const Problem& p) : memory(KernelMemory::create(memory_kind)) {
    const bool permuted = p.sf_layout == SfLayout::permuted;
    a = memory->allocate(p.a_bytes(), GuardPattern::bytes);
    b = memory->allocate(p.b_bytes(), GuardPattern::bytes);
    sfa = memory->allocate(permuted ? sf_permuted_bytes(p.m, p.kb(), p.l) : p.sfa_bytes(), GuardPattern::nan_scales);
    sfb = memory->allocate(permuted ? sf_permuted_bytes(p.n, p.kb(), p.l) : p.sfb_bytes(), GuardPattern::nan_scales);
    c = memory->allocate(p.c_elems() * 2, GuardPattern::nan_fp16);
  }
};

// What one kernel call left behind, or the check it failed before its output could be judged.
struct CallOutcome {
  std::string check, message;  // empty check: the output can be judged
  std::vector<uint16_t> c;
};

std::vector<uint16_t> as_words(const std::vector<uint8_t>& bytes) {
  std::vector<uint16_t> w(bytes.size() / 2);
  if (!w.empty()) std::memcpy(w.data(), bytes.data(), w.size() * 2);
  return w;
}

// Uploads the inputs and a poisoned C on the runner's stream (held first, so work on any other
// stream runs ahead of the data), calls the kernel, waits, then checks guards, inputs and the
// stream discipline. DeviceError escapes to the caller.
CallOutcome call_kernel(const Kernel& kernel, Buffers& buf, const Problem& p, const LaidOut& in,
                        uint16_t poison, double timeout_s, int expect_rc) {
  CallOutcome out;
  std::vector<uint16_t> poisoned(static_cast<size_t>(p.c_elems()), poison);
  KernelMemory& mem = *buf.memory;
  mem.hold_stream();
  buf.a->upload(in.a.data());
  buf.b->upload(in.b.data());
  buf.sfa->upload(in.sfa.data());
  buf.sfb->upload(in.sfb.data());
  buf.c->upload(reinterpret_cast<const uint8_t*>(poisoned.data()));

  nvfp4_problem abi{};
  abi.op = static_cast<uint32_t>(p.op);
  abi.m = p.m;
  abi.n = p.n;
  abi.k = p.k;
  abi.l = p.l;
  abi.a = buf.a->data();
  abi.b = buf.b->data();
  abi.sfa = buf.sfa->data();
  abi.sfb = buf.sfb->data();
  abi.sf_layout = static_cast<uint32_t>(p.sf_layout);
  abi.alpha = p.alpha;
  abi.c = reinterpret_cast<uint16_t*>(buf.c->data());
  abi.stream = mem.stream();

  const int rc = kernel.run(abi);
  mem.after_call();
  mem.synchronize(timeout_s);
  out.c = as_words(buf.c->download(timeout_s));
  // Everything the kernel enqueued anywhere must be finished before buffers are compared; if C
  // changes meanwhile, the kernel wrote it from a stream other than problem.stream.
  mem.synchronize_device(timeout_s);
  const std::vector<uint16_t> c_later = as_words(buf.c->download(timeout_s));

  if (rc != expect_rc) {
    if (expect_rc == NVFP4_UNSUPPORTED) {
      out.check = "ignored-unsupported";
      out.message = fmt::format("returned {} for a problem outside its declared constraints; it must "
                                "return NVFP4_UNSUPPORTED (1) and touch nothing", rc);
    } else if (rc == NVFP4_UNSUPPORTED) {
      out.check = "refused-supported";
      out.message = "returned NVFP4_UNSUPPORTED for a problem inside its declared constraints";
    } else {
      out.check = "kernel-error";
      out.message = fmt::format("returned {} ({})", rc, rc == NVFP4_ERROR ? "NVFP4_ERROR" : "not an NVFP4_* code");
    }
    // A refusal must still leave C alone; that is reported as this check either way.
    return out;
  }
  struct Named {
    const char* name;
    GuardedBuffer* buffer;
  };
  for (const Named& nb : {Named{"a", buf.a.get()}, Named{"b", buf.b.get()}, Named{"sfa", buf.sfa.get()},
                          Named{"sfb", buf.sfb.get()}, Named{"c", buf.c.get()}}) {
    const GuardDamage d = nb.buffer->check_guards(timeout_s);
    if (!d.intact) {
      out.check = "guard";
      out.message = "wrote out of bounds: " + d.describe(nb.name);
      return out;
    }
  }
  const struct {
    const char* name;
    GuardedBuffer* buffer;
    const std::vector<uint8_t>* sent;
  } inputs[] = {{"a", buf.a.get(), &in.a}, {"b", buf.b.get(), &in.b}, {"sfa", buf.sfa.get(), &in.sfa},
                {"sfb", buf.sfb.get(), &in.sfb}};
  for (const auto& input : inputs) {
    const std::vector<uint8_t> now = input.buffer->download(timeout_s);
    if (now != *input.sent) {
      int64_t first = 0, count = 0;
      for (size_t x = 0; x < now.size(); ++x)
        if (now[x] != (*input.sent)[x]) {
          if (count++ == 0) first = static_cast<int64_t>(x);
        }
      out.check = "inputs-modified";
      out.message = fmt::format("changed its input {}: {} byte(s) differ, the first at offset {} "
                                "(was 0x{:02x}, now 0x{:02x})", input.name, count, first,
                                (*input.sent)[first], now[first]);
      return out;
    }
  }
  if (c_later != out.c) {
    out.check = "stream";
    out.message = "C changed after the runner's stream had finished: the kernel does work on a "
                  "stream other than problem.stream (the legacy default stream, or its own)";
    return out;
  }
  return out;
}

// First element that still holds the poison where the oracle wanted a number (or, with `other`,
// an element that held each run's poison), or -1.
int64_t first_unwritten(const ExactResult& ref, const std::vector<uint16_t>& c, uint16_t poison,
                        const std::vector<uint16_t>* other_c = nullptr, uint16_t other_poison = 0) {
  for (size_t e = 0; e < c.size(); ++e) {
    if (c[e] != poison) continue;
    if (!ref.elems[e].nan) return static_cast<int64_t>(e);
    if (other_c && (*other_c)[e] == other_poison) return static_cast<int64_t>(e);
  }
  return -1;
}

std::string element_text(const Problem& p, const ExactResult& ref, int64_t e, uint16_t actual) {
  const Index3 x = index3(p, e);
  return fmt::format("(b={}, i={}, j={}): expected {}, actual {}", x.b, x.i, x.j, fp16_text(ref.c[e]),
                     fp16_text(actual));
}

std::string oracle_text(const Problem& p, const OracleSummary& s, const Policy& policy) {
  const ElementVerdict& v = s.first;
  return fmt::format("{} of {} outputs are wrong under policy {}; the first (b={}, i={}, j={}): expected {}, "
                     "actual {}; error {:.4g} ulps, {:.4g} x the allowed bound {:.4g}{}",
                     s.failing, s.elements, policy.name(), s.first_b, s.first_i, s.first_j,
                     fp16_text(v.expected_bits), fp16_text(s.first_actual), v.error_ulps, v.error_over_bound,
                     v.bound, v.exact_regime ? " (exact regime: only the bit-exact RN16 result is right; the bound shown is "
                                       "its own half-ulp rounding)"
                                     : "");
}

void merge_maxima(OracleSummary& into, const OracleSummary& s) {
  into.max_error_ulps = std::max(into.max_error_ulps, s.max_error_ulps);
  into.max_error_over_bound = std::max(into.max_error_over_bound, s.max_error_over_bound);
}

std::string case_stem(const Kernel& kernel, const Problem& p, const std::string& text) {
  return fmt::format("{}-{}-{}x{}x{}x{}-{:016x}", kernel.name(), to_string(p.op), p.m, p.n, p.k, p.l, fnv1a(text));
}

// Above this many data bytes, a case whose data is its seed's expansion is saved as the seed
// alone: a production GEMV's data is 64 MB, 130 MB of hex, and writing it took most of a check.
constexpr int64_t kSeededSaveBytes = int64_t(1) << 20;
// Above this many outputs the saved case carries no `expect` line (replay recomputes it).
constexpr int64_t kMaxSavedExpect = int64_t(1) << 20;

// Saves p (with its reference output) before anything runs, so even a crash leaves a reproducer.
std::string save_case(const Kernel& kernel, const Problem& p, const RunOptions& options, const std::string& suffix) {
  const int64_t data_bytes = p.a_bytes() + p.b_bytes() + p.sfa_bytes() + p.sfb_bytes();
  const bool seeded = p.data_from_seed && p.seed && data_bytes > kSeededSaveBytes;
  const bool big_expect = p.expect && p.c_elems() > kMaxSavedExpect;
  std::string text;
  if (seeded || big_expect) {
    Problem small = p;
    if (seeded) small.a.clear(), small.b.clear(), small.sfa.clear(), small.sfb.clear();
    if (big_expect) {
      small.expect.reset();
      small.note += fmt::format("{}(expect omitted: {} outputs)", small.note.empty() ? "" : " ", p.c_elems());
    }
    text = write_case(small);
  } else {
    text = write_case(p);
  }
  std::filesystem::create_directories(options.case_dir);
  const std::string path =
      (std::filesystem::path(options.case_dir) / (case_stem(kernel, p, text) + suffix + ".case")).string();
  write_case_text(text, path);
  if (options.on_case_saved) options.on_case_saved(path);
  return path;
}

// New data of the same distribution in the same shape (alpha and semantics kept).
Problem refreshed(const Problem& p, const RunOptions& options) {
  Problem q = p;
  q.expect.reset();
  const uint64_t seed = options.stale_seed ^ 0x5741'4c45'5354'4154ull;
  if (!options.data_spec.empty()) {
    // Drawn from a seed, so a large stale case is saved as that seed. The generator's alpha part
    // is `one`, which keeps the case's alpha instead of drawing a new one.
    DataSpec spec = DataSpec::parse(options.data_spec);
    spec.alpha = AlphaDist::one;
    q.a.clear(), q.b.clear(), q.sfa.clear(), q.sfb.clear();
    q.seed = seed;
    q.generator = spec.name();
    expand_seeded_case(q);
  } else {
    // No generator known (a replayed file): the case's own bytes, shuffled, keep its distribution.
    Rng rng(seed);
    for (auto* v : {&q.a, &q.b, &q.sfa, &q.sfb}) std::shuffle(v->begin(), v->end(), rng);
    q.data_from_seed = false;
  }
  q.note = "stale-state refill of " + (p.note.empty() ? std::string("a case") : p.note);
  return q;
}

void stage(const RunOptions& options, const std::string& name) {
  if (options.on_stage) options.on_stage(name);
}

CheckResult fail(CheckResult r, std::string check, std::string message) {
  r.verdict = CheckResult::Verdict::fail;
  r.check = std::move(check);
  r.message = std::move(message);
  return r;
}

// A problem outside the declared constraints: the call must return NVFP4_UNSUPPORTED and leave C,
// the guards and the inputs exactly as they were.
CheckResult check_unsupported(const Kernel& kernel, CheckResult r, const std::string& why,
                              const RunOptions& options) {
  const Problem& p = r.problem;
  stage(options, "unsupported");
  Buffers buf(kernel.info->memory, p);
  const LaidOut in = lay_out(p, kPad1);
  CallOutcome out = call_kernel(kernel, buf, p, in, kPoison1, options.timeout_s, NVFP4_UNSUPPORTED);
  ++r.runs;
  r.c = out.c;
  if (!out.check.empty()) return fail(std::move(r), out.check, out.message + " (" + why + ")");
  for (size_t e = 0; e < out.c.size(); ++e) {
    if (out.c[e] != kPoison1) {
      const Index3 x = index3(p, static_cast<int64_t>(e));
      return fail(std::move(r), "unsupported-touched-output",
                  fmt::format("returned NVFP4_UNSUPPORTED ({}) but wrote C at (b={}, i={}, j={}): {}", why, x.b,
                              x.i, x.j, fp16_text(out.c[e])));
    }
  }
  r.verdict = CheckResult::Verdict::unsupported;
  r.message = "correctly refused: " + why;
  return r;
}

CheckResult check_supported(const Kernel& kernel, CheckResult r, const RunOptions& options) {
  const Problem p = r.problem;
  const Policy& policy = r.policy;
  Buffers buf(kernel.info->memory, p);

  // Run 1: NaN padding 0x7F, poison 1.
  stage(options, "run 1");
  const LaidOut in1 = lay_out(p, kPad1);
  CallOutcome run1 = call_kernel(kernel, buf, p, in1, kPoison1, options.timeout_s, NVFP4_OK);
  ++r.runs;
  r.c = run1.c;
  if (!run1.check.empty()) return fail(std::move(r), run1.check, run1.message);
  if (const int64_t e = first_unwritten(r.reference, run1.c, kPoison1); e >= 0)
    return fail(std::move(r), "unwritten-output",
                "left output elements unwritten (still the runner's NaN poison" +
                    std::string(kernel.is_cuda() ? ", or written from another stream before the runner's "
                                                   "poison and inputs were in place"
                                                 : "") +
                    "); the first " + element_text(p, r.reference, e, run1.c[e]));
  r.summary = judge(p, r.reference, run1.c.data(), policy);
  if (r.summary.any_failure()) {
    std::string text = oracle_text(p, r.summary, policy);
    if (has_padding(p)) {
      // Diagnose: does the output depend on the padding cells? Rerun with zero padding.
      stage(options, "padding diagnosis");
      CallOutcome zero = call_kernel(kernel, buf, p, lay_out(p, 0x00), kPoison1, options.timeout_s, NVFP4_OK);
      ++r.runs;
      if (zero.check.empty() && !judge(p, r.reference, zero.c.data(), policy).any_failure())
        return fail(std::move(r), "nan-padding",
                    "the output depends on the permuted layout's padding cells (the runner fills them with "
                    "NaN scales; with zero padding the output is right): " + text);
    }
    return fail(std::move(r), "oracle", text);
  }

  // Run 2: the other NaN padding byte and poison; the output must not change.
  if (options.check_determinism) {
    stage(options, "run 2");
    CallOutcome run2 = call_kernel(kernel, buf, p, lay_out(p, kPad2), kPoison2, options.timeout_s, NVFP4_OK);
    ++r.runs;
    if (!run2.check.empty()) {
      r.c = run2.c;
      return fail(std::move(r), run2.check, "second run: " + run2.message);
    }
    if (const int64_t e = first_unwritten(r.reference, run2.c, kPoison2, &run1.c, kPoison1); e >= 0) {
      r.c = run2.c;
      return fail(std::move(r), "unwritten-output",
                  "left output elements unwritten in the second run (they hold each run's NaN poison); the first " +
                      element_text(p, r.reference, e, run2.c[e]));
    }
    if (kernel.info->flags & NVFP4_FLAG_NONDETERMINISTIC) {
      const OracleSummary s2 = judge(p, r.reference, run2.c.data(), policy);
      if (s2.any_failure()) {
        r.c = run2.c;
        r.summary = s2;
        return fail(std::move(r), "oracle", "second run: " + oracle_text(p, s2, policy));
      }
      merge_maxima(r.summary, s2);
    } else {
      for (size_t e = 0; e < run2.c.size(); ++e) {
        if (run2.c[e] != run1.c[e]) {
          int64_t differing = 0;
          for (size_t x = 0; x < run2.c.size(); ++x) differing += run2.c[x] != run1.c[x];
          const Index3 x = index3(p, static_cast<int64_t>(e));
          r.c = run2.c;
          return fail(std::move(r), "determinism",
                      fmt::format("two runs on the same inputs differ in {} element(s) and the kernel does not "
                                  "declare NVFP4_FLAG_NONDETERMINISTIC; the first (b={}, i={}, j={}): run 1 {}, "
                                  "run 2 {}", differing, x.b, x.i, x.j, fp16_text(run1.c[e]), fp16_text(run2.c[e])));
        }
      }
    }
  }

  // Stale state: new data through the same pointers; the output must follow the new data.
  if (options.check_stale) {
    stage(options, "stale data");
    Problem q = refreshed(p, options);
    stage(options, "stale reference");
    ExactResult ref2 = exact_gemm_auto(q);
    std::string stale_file;
    if (options.save_case && !r.case_file.empty()) {
      Problem saved = q;
      saved.expect = ref2.c;
      stale_file = save_case(kernel, saved, options, "-stale");
    }
    stage(options, "stale");
    CallOutcome run3 = call_kernel(kernel, buf, q, lay_out(q, kPad1), kPoison1, options.timeout_s, NVFP4_OK);
    ++r.runs;
    const int64_t unwritten = run3.check.empty() ? first_unwritten(ref2, run3.c, kPoison1) : -1;
    const OracleSummary s3 =
        run3.check.empty() && unwritten < 0 ? judge(q, ref2, run3.c.data(), policy) : OracleSummary{};
    if (!run3.check.empty() || unwritten >= 0 || s3.any_failure()) {
      // The stale run's data is what the output is judged against from here on.
      r.c = run3.c;
      r.problem = q;
      r.reference = std::move(ref2);
      if (!stale_file.empty()) r.case_file = stale_file;
      if (!run3.check.empty()) return fail(std::move(r), run3.check, "after new data in place: " + run3.message);
      if (unwritten >= 0)
        return fail(std::move(r), "stale-state",
                    "after new input data in the same buffers, outputs were left unwritten; the first " +
                        element_text(q, r.reference, unwritten, run3.c[unwritten]));
      r.summary = s3;
      return fail(std::move(r), "stale-state",
                  "after new input data was written to the same buffers (same pointers, same shape), the "
                  "output does not match the new data (does the kernel cache results or decoded inputs by "
                  "pointer?): " + oracle_text(q, s3, policy));
    }
    merge_maxima(r.summary, s3);
    if (!stale_file.empty()) std::filesystem::remove(stale_file);
  }
  r.verdict = CheckResult::Verdict::pass;
  return r;
}

}  // namespace

std::string fp16_text(uint16_t h) { return fmt::format("{:g} (0x{:04x})", fp16_to_double(h), h); }

std::string unsupported_reason(const nvfp4_kernel_info& info, const Problem& p) {
  const uint32_t op = static_cast<uint32_t>(p.op), layout = static_cast<uint32_t>(p.sf_layout);
  if (!((info.ops >> op) & 1u)) return fmt::format("the kernel does not declare op {}", to_string(p.op));
  if (!((info.sf_layouts >> layout) & 1u))
    return fmt::format("the kernel does not declare the {} scale layout", to_string(p.sf_layout));
  if (info.m_multiple > 1 && p.m % info.m_multiple != 0)
    return fmt::format("m = {} is not a multiple of the declared m_multiple {}", p.m, info.m_multiple);
  if (info.n_multiple > 1 && p.n % info.n_multiple != 0)
    return fmt::format("n = {} is not a multiple of the declared n_multiple {}", p.n, info.n_multiple);
  if (info.k_multiple > 1 && p.k % info.k_multiple != 0)
    return fmt::format("k = {} is not a multiple of the declared k_multiple {}", p.k, info.k_multiple);
  if ((info.flags & NVFP4_FLAG_UNIT_ALPHA) && p.alpha != 1.0f)
    return fmt::format("alpha = {} but the kernel declares NVFP4_FLAG_UNIT_ALPHA", p.alpha);
  return "";
}

CheckResult check_case(const Kernel& kernel, const Problem& input, const RunOptions& options) {
  CheckResult r;
  r.problem = input;
  Problem& p = r.problem;
  if (!p.has_data() && p.seed) expand_seeded_case(p);
  if (const std::string err = problem_error(p); !err.empty()) throw std::invalid_argument("bad case: " + err);
  p.expect.reset();

  // The ABI has no semantics field: a kernel computes with the semantics its flags declare. A case
  // of the other semantics only fits when no used scale has its sign bit set.
  const ScaleSemantics semantics = kernel_semantics(*kernel.info);
  if (p.semantics != semantics) {
    if (any_sign_bit(p.sfa) || any_sign_bit(p.sfb)) {
      r.verdict = CheckResult::Verdict::skipped;
      r.message = fmt::format("the case uses {} scales with sign bits set; the kernel computes {}",
                              to_string(p.semantics), to_string(semantics));
      return r;
    }
    p.semantics = semantics;
  }
  r.policy = options.use_policy_override ? options.policy_override : Policy::for_flags(kernel.info->flags);

  stage(options, "reference");
  // Large problems are checked in full on the GPU reference (bit-identical to the CPU one).
  r.reference = exact_gemm_auto(p);
  if (options.save_case) {
    Problem saved = p;
    saved.expect = r.reference.c;
    r.case_file = save_case(kernel, saved, options, "");
  }
  const std::string why = unsupported_reason(*kernel.info, p);
  try {
    r = why.empty() ? check_supported(kernel, std::move(r), options) : check_unsupported(kernel, std::move(r), why, options);
  } catch (const DeviceError& e) {
    r.context_lost = kernel.is_cuda();
    r = fail(std::move(r), e.check(), e.what());
  }
  const bool failed = r.verdict == CheckResult::Verdict::fail;
  if (!failed && !options.keep_passing_cases && !r.case_file.empty()) {
    std::error_code ignored;
    std::filesystem::remove(r.case_file, ignored);
    r.case_file.clear();
  }
  return r;
}

std::vector<uint16_t> run_kernel_once(const Kernel& kernel, const Problem& input, double timeout_s) {
  Problem p = input;
  if (!p.has_data() && p.seed) expand_seeded_case(p);
  if (const std::string err = problem_error(p); !err.empty()) throw std::runtime_error("bad problem: " + err);
  try {
    Buffers buf(kernel.info->memory, p);
    CallOutcome out = call_kernel(kernel, buf, p, lay_out(p, kPad1), kPoison1, timeout_s, NVFP4_OK);
    if (!out.check.empty()) throw std::runtime_error(kernel.name() + ": " + out.check + ": " + out.message);
    return out.c;
  } catch (const DeviceError& e) {
    throw std::runtime_error(kernel.name() + ": " + e.check() + ": " + e.what());
  }
}

}  // namespace nvfp4
