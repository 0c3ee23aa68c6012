// The checks of one case, in the order they decide it (see case_check.h).
#include "harness/case_check.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "gpu_reference/exact_gemm_gpu.h"
#include "harness/generators.h"
#include "reference/case_file.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool any_sign_bit(const std::vector<uint8_t>& scales) {
  return std::any_of(scales.begin(), scales.end(), [](uint8_t s) { return (s & 0x80u) && (s & 0x7Fu) != 0x7F; });
}

bool has_padding(const Problem& p) {
  return p.sf_layout == SfLayout::permuted && (p.m % 128 != 0 || p.n % 128 != 0 || p.kb() % 4 != 0);
}

// The checks every returned call goes through before its output is looked at.
std::optional<Finding> check_call(const CallObservation& o, int expected_rc) {
  if (auto f = check_call_completed(o)) return f;
  if (auto f = check_return_code(o, expected_rc)) return f;
  if (auto f = check_guards(o)) return f;
  if (auto f = check_inputs_unchanged(o)) return f;
  return check_stream(o);
}

// Rotates the rows [0, rows) of each of `groups` groups of `row_bytes` bytes by r.
void rotate_rows(std::vector<uint8_t>& v, int64_t groups, int64_t rows, int64_t row_bytes, int64_t r) {
  if (rows < 2 || r % rows == 0) return;
  for (int64_t g = 0; g < groups; ++g) {
    auto first = v.begin() + g * rows * row_bytes;
    std::rotate(first, first + (r % rows) * row_bytes, first + rows * row_bytes);
  }
}

// Rotates the first `blocks` 16-element blocks of every row (8 bytes of E2M1, one scale each).
void rotate_blocks(Problem& q, int64_t blocks, int64_t r) {
  if (blocks < 2 || r % blocks == 0) return;
  const int64_t row_bytes = q.k / 2, kb = q.kb();
  auto per_row = [&](std::vector<uint8_t>& data, std::vector<uint8_t>& scales, int64_t rows) {
    for (int64_t row = 0; row < rows; ++row) {
      auto d = data.begin() + row * row_bytes;
      std::rotate(d, d + (r % blocks) * 8, d + blocks * 8);
      auto s = scales.begin() + row * kb;
      std::rotate(s, s + r % blocks, s + blocks);
    }
  };
  per_row(q.a, q.sfa, q.l * q.m);
  per_row(q.b, q.sfb, q.l * q.n);
}

}  // namespace

const char* verdict_name(CaseOutcome::Verdict v) {
  switch (v) {
    case CaseOutcome::Verdict::pass: return "pass";
    case CaseOutcome::Verdict::fail: return "fail";
    case CaseOutcome::Verdict::unsupported: return "unsupported";
    case CaseOutcome::Verdict::skipped: return "skipped";
  }
  return "?";
}

Policy kernel_policy(const KernelDesc& k) {
  Policy policy = Policy::for_flags(k.info.flags);
  if (k.is_cuda() && policy.accumulation == Accumulation::matrix_unit) policy.device_sm = cuda_compute_capability();
  return policy;
}

std::string unsupported_reason(const nvfp4_kernel_info& info, const Problem& p) {
  const uint32_t op = static_cast<uint32_t>(p.op), layout = static_cast<uint32_t>(p.sf_layout);
  if (!((info.ops >> op) & 1u)) return fmt::format("the kernel does not declare op {}", to_string(p.op));
  if (!((info.sf_layouts >> layout) & 1u))
    return fmt::format("the kernel does not declare the {} scale layout", to_string(p.sf_layout));
  if (info.m_multiple > 1 && p.m % info.m_multiple != 0)
    return fmt::format("m = {} is not a multiple of the declared m_multiple {}", p.m, info.m_multiple);
  if (p.op == Op::gemm && info.n_multiple > 1 && p.n % info.n_multiple != 0)
    return fmt::format("n = {} is not a multiple of the declared n_multiple {}", p.n, info.n_multiple);
  if (info.k_multiple > 1 && p.k % info.k_multiple != 0)
    return fmt::format("k = {} is not a multiple of the declared k_multiple {}", p.k, info.k_multiple);
  if ((info.flags & NVFP4_FLAG_UNIT_ALPHA) && p.alpha != 1.0f)
    return fmt::format("alpha = {} but the kernel declares NVFP4_FLAG_UNIT_ALPHA", p.alpha);
  return "";
}

StaleVariant stale_variant(const Problem& p, const ExactResult& ref, uint64_t seed) {
  Rng rng(seed ^ 0x5741'4c45'5354'4154ull);
  RngDraws d(rng);
  StaleVariant v;
  Problem& q = v.problem;
  q = p;
  q.expect.reset();
  q.data_from_seed = false;
  q.seed.reset();
  q.generator.clear();
  q.note = "stale-state data of " + (p.note.empty() ? std::string("a case") : p.note);
  for (uint8_t& byte : q.a) byte ^= 0x88;  // both nibbles' sign bits: every product negated
  const int64_t full_blocks = p.k / 16;
  const int64_t rb = full_blocks > 1 ? 1 + static_cast<int64_t>(d.below(static_cast<uint64_t>(full_blocks - 1))) : 0;
  const int64_t ri = p.m > 1 ? 1 + static_cast<int64_t>(d.below(static_cast<uint64_t>(p.m - 1))) : 0;
  const int64_t rj = p.n > 1 ? 1 + static_cast<int64_t>(d.below(static_cast<uint64_t>(p.n - 1))) : 0;
  const int64_t rl = p.l > 1 ? 1 + static_cast<int64_t>(d.below(static_cast<uint64_t>(p.l - 1))) : 0;
  rotate_blocks(q, full_blocks, rb);
  rotate_rows(q.a, q.l, q.m, q.k / 2, ri);
  rotate_rows(q.sfa, q.l, q.m, q.kb(), ri);
  rotate_rows(q.b, q.l, q.n, q.k / 2, rj);
  rotate_rows(q.sfb, q.l, q.n, q.kb(), rj);
  for (auto* v2 : {&q.a, &q.sfa}) rotate_rows(*v2, 1, q.l, static_cast<int64_t>(v2->size()) / q.l, rl);
  for (auto* v2 : {&q.b, &q.sfb}) rotate_rows(*v2, 1, q.l, static_cast<int64_t>(v2->size()) / q.l, rl);
  // C'[b][i][j] = -C[(b + rl) % l][(i + ri) % m][(j + rj) % n]
  v.reference.elems.resize(ref.elems.size());
  v.reference.c.resize(ref.c.size());
  for (int64_t b = 0; b < p.l; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        const int64_t from = (((b + rl) % p.l) * p.m + (i + ri) % p.m) * p.n + (j + rj) % p.n;
        const int64_t to = (b * p.m + i) * p.n + j;
        ExactElement e = ref.elems[from];
        e.sum = -e.sum;
        v.reference.elems[to] = e;
        v.reference.c[to] = round_result(e, p.alpha);
      }
  return v;
}

std::string case_file_stem(const std::string& kernel, const Problem& p, const std::string& text) {
  return fmt::format("{}-{}-{}x{}x{}x{}-{:016x}", kernel, to_string(p.op), p.m, p.n, p.k, p.l, fnv1a(text));
}

std::string save_case(const std::string& kernel, const Problem& p, const ExactResult* ref, const std::string& dir,
                      const std::string& suffix, bool compact) {
  // Above 1 MiB of data a case drawn from a seed is saved as the seed (a production GEMV's data
  // is 130 MB of hex), and above 2^20 outputs without `expect` (replay recomputes it).
  constexpr int64_t kSeededSaveBytes = int64_t(1) << 20;
  constexpr int64_t kMaxSavedExpect = int64_t(1) << 20;
  Problem saved = p;
  const int64_t data_bytes = p.a_bytes() + p.b_bytes() + p.sfa_bytes() + p.sfb_bytes();
  const bool seeded = p.data_from_seed && p.seed && (compact || data_bytes > kSeededSaveBytes);
  if (seeded) saved.a.clear(), saved.b.clear(), saved.sfa.clear(), saved.sfb.clear();
  saved.expect.reset();
  if (seeded && compact) {
    // the write-ahead record: nothing but what reproduces the case
  } else if (ref && p.c_elems() <= kMaxSavedExpect) saved.expect = ref->c;
  else if (ref) saved.note += fmt::format("{}(expect omitted: {} outputs)", saved.note.empty() ? "" : " ", p.c_elems());
  const std::string text = write_case(saved);
  std::filesystem::create_directories(dir);
  const std::string path = std::filesystem::absolute(
      std::filesystem::path(dir) / (case_file_stem(kernel, p, text) + suffix + ".case")).string();
  write_case_text(text, path);
  return path;
}

std::vector<uint16_t> run_kernel_once(Executor& executor, const Problem& input) {
  Problem p = input;
  if (!p.has_data()) expand_seeded_case(p);
  if (const std::string err = problem_error(p); !err.empty()) throw std::runtime_error("bad problem: " + err);
  const std::vector<CallObservation> obs = executor.run_case({p, std::nullopt}, {{{kPad1, kPoison1, false}, NVFP4_OK}});
  if (std::optional<Finding> f = check_call(obs.front(), NVFP4_OK))
    throw std::runtime_error(executor.kernel().name + ": " + check_name(f->check) + ": " + f->message);
  return obs.front().c;
}

CaseOutcome check_case(Executor& executor, const Problem& input, const CaseOptions& options) {
  const KernelDesc& k = executor.kernel();
  CaseOutcome r;
  r.problem = input;
  Problem& p = r.problem;
  if (!p.has_data()) expand_seeded_case(p);
  if (const std::string err = problem_error(p); !err.empty()) throw std::invalid_argument("bad case: " + err);

  // The ABI has no semantics field: a kernel computes with the semantics its flags declare. A case
  // of the other semantics only fits when no used scale has its sign bit set.
  const ScaleSemantics semantics = declared_semantics(k.info);
  if (p.semantics != semantics) {
    if (any_sign_bit(p.sfa) || any_sign_bit(p.sfb)) {
      r.verdict = CaseOutcome::Verdict::skipped;
      r.message = fmt::format("the case uses {} scales with sign bits set; the kernel computes {}",
                              to_string(p.semantics), to_string(semantics));
      return r;
    }
    p.semantics = semantics;
  }
  r.policy = options.policy ? *options.policy : kernel_policy(k);

  auto t = Clock::now();
  // Large problems are judged against the GPU reference (bit-identical to the CPU one).
  r.reference = exact_gemm_auto(p);
  r.times.reference = since(t);
  if (const std::string mismatch = expect_mismatch(p, r.reference.c); !mismatch.empty())
    throw std::invalid_argument("the case's " + mismatch +
                                " (the case file or the reference is wrong; nothing is judged against either)");
  p.expect.reset();

  t = Clock::now();
  if (!options.existing_file.empty()) {
    r.case_file = options.existing_file;
  } else if (!options.case_dir.empty()) {
    r.case_file = save_case(k.name, p, &r.reference, options.case_dir, "", /*compact=*/true);
  }
  r.times.save = since(t);

  auto fail = [&](Finding f, const std::string& stage) {
    r.verdict = CaseOutcome::Verdict::fail;
    r.finding = std::move(f);
    r.stage = stage;
  };
  auto run = [&](const CaseData& data, const std::vector<PlannedCall>& plan) {
    const auto t0 = Clock::now();
    std::vector<CallObservation> obs = executor.run_case(data, plan);
    r.times.kernel += since(t0);
    r.calls += static_cast<int64_t>(obs.size());
    for (const CallObservation& o : obs) r.context_lost |= o.context_lost;
    return obs;
  };

  const std::string why = unsupported_reason(k.info, p);
  if (!why.empty()) {
    // Outside the declared constraints: NVFP4_UNSUPPORTED, and C, the guards and the inputs
    // exactly as they were.
    const std::vector<CallObservation> obs = run({p, std::nullopt}, {{{kPad1, kPoison1, false}, NVFP4_UNSUPPORTED}});
    t = Clock::now();
    const CallObservation& o = obs.front();
    r.c = o.c;
    if (auto f = check_call(o, NVFP4_UNSUPPORTED)) {
      f->message += " (" + why + ")";
      fail(std::move(*f), "unsupported");
    } else if (auto f2 = check_untouched(p, o.c, kPoison1, why)) {
      fail(std::move(*f2), "unsupported");
    } else {
      r.verdict = CaseOutcome::Verdict::unsupported;
      r.message = "correctly refused: " + why;
    }
    r.times.judge = since(t);
  } else {
    std::optional<StaleVariant> stale;
    if (options.check_stale) stale = stale_variant(p, r.reference, options.stale_seed);
    std::vector<PlannedCall> plan = {{{kPad1, kPoison1, false}, NVFP4_OK}};
    if (options.check_determinism) plan.push_back({{kPad2, kPoison2, false}, NVFP4_OK});
    if (stale) plan.push_back({{kPad1, kPoison1, true}, NVFP4_OK});
    const std::vector<CallObservation> obs =
        run({p, stale ? std::optional<Problem>(stale->problem) : std::nullopt}, plan);
    t = Clock::now();
    const bool nondeterministic = k.info.flags & NVFP4_FLAG_NONDETERMINISTIC;
    // Run 1: NaN padding 0x7F, poison 1.
    const CallObservation& run1 = obs[0];
    r.c = run1.c;
    if (auto f = check_call(run1, NVFP4_OK)) {
      fail(std::move(*f), "run 1");
    } else if (auto f2 = check_unwritten(p, r.reference, run1.c, kPoison1)) {
      fail(std::move(*f2), "run 1");
    } else if (auto f3 = check_oracle(p, r.reference, run1.c, r.policy, &r.summary)) {
      fail(std::move(*f3), "run 1");
      if (has_padding(p)) {
        // Does the output depend on the padding cells? Again with zero padding.
        const std::vector<CallObservation> zero = run({p, std::nullopt}, {{{0x00, kPoison1, false}, NVFP4_OK}});
        if (zero.front().end == CallObservation::End::returned && zero.front().rc == NVFP4_OK &&
            !judge(p, r.reference, zero.front().c.data(), r.policy).any_failure())
          r.finding = Finding{Check::nan_padding,
                              "the output depends on the permuted layout's padding cells (the runner fills them "
                              "with NaN scales; with zero padding the output is right): " + r.finding->message};
      }
    }
    // Run 2: the other NaN padding byte and poison; the output must not change.
    size_t next = 1;
    if (r.verdict != CaseOutcome::Verdict::fail && options.check_determinism) {
      const CallObservation& run2 = obs.at(next++);
      OracleSummary s2;
      if (auto f = check_call(run2, NVFP4_OK)) {
        r.c = run2.c;
        f->message = "second run: " + f->message;
        fail(std::move(*f), "run 2");
      } else if (auto f2 = check_unwritten(p, r.reference, run2.c, kPoison2, &run1.c, kPoison1)) {
        r.c = run2.c;
        fail(std::move(*f2), "run 2");
      } else if (nondeterministic) {
        if (auto f3 = check_oracle(p, r.reference, run2.c, r.policy, &s2)) {
          r.c = run2.c;
          r.summary = s2;
          f3->message = "second run: " + f3->message;
          fail(std::move(*f3), "run 2");
        } else {
          r.summary.max_error_ulps = std::max(r.summary.max_error_ulps, s2.max_error_ulps);
          r.summary.max_error_over_bound = std::max(r.summary.max_error_over_bound, s2.max_error_over_bound);
        }
      } else if (auto f4 = check_deterministic(p, run1.c, run2.c)) {
        r.c = run2.c;
        fail(std::move(*f4), "run 2");
      }
    }
    // Stale state: new data through the same pointers; the output must follow the new data.
    if (r.verdict != CaseOutcome::Verdict::fail && stale) {
      const CallObservation& run3 = obs.at(next);
      OracleSummary s3;
      std::optional<Finding> f = check_call(run3, NVFP4_OK);
      if (f) {
        f->message = "after new data in place: " + f->message;
      } else if ((f = check_unwritten(stale->problem, stale->reference, run3.c, kPoison1))) {
        f = Finding{Check::stale_state, "after new input data in the same buffers, " + f->message};
      } else if ((f = check_oracle(stale->problem, stale->reference, run3.c, r.policy, &s3))) {
        f = Finding{Check::stale_state,
                    "after new input data was written to the same buffers (same pointers, same shape), the output "
                    "does not match the new data (does the kernel cache results or decoded inputs by pointer?): " +
                        f->message};
        r.summary = s3;
      }
      if (f) {
        // The stale data is what the output is judged against from here on.
        r.c = run3.c;
        r.problem = stale->problem;
        r.reference = stale->reference;
        fail(std::move(*f), "stale");
        if (!options.case_dir.empty()) r.case_file = save_case(k.name, r.problem, &r.reference, options.case_dir, "-stale");
      } else {
        r.summary.max_error_ulps = std::max(r.summary.max_error_ulps, s3.max_error_ulps);
        r.summary.max_error_over_bound = std::max(r.summary.max_error_over_bound, s3.max_error_over_bound);
      }
    }
    if (r.verdict != CaseOutcome::Verdict::fail) r.verdict = CaseOutcome::Verdict::pass;
    r.times.judge = since(t);
  }
  if (options.existing_file.empty() && !r.case_file.empty()) {
    const bool failed = r.verdict == CaseOutcome::Verdict::fail;
    // A failure keeps its case in full (the write-ahead record named only its seed); a pass
    // leaves nothing behind unless asked to.
    if (failed && r.stage != "stale" && p.data_from_seed) {
      const std::string full = save_case(k.name, p, &r.reference, options.case_dir);
      if (full != r.case_file) std::filesystem::remove(r.case_file);
      r.case_file = full;
    } else if (!failed && !options.keep_passing) {
      std::error_code ignored;
      std::filesystem::remove(r.case_file, ignored);
      r.case_file.clear();
    }
  }
  return r;
}

}  // namespace nvfp4
