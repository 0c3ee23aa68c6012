// Mutation analysis driver (see mutation.h): the suite's check and the two weaker checks over the
// same kernels, and the kill table.
#include "harness/ops/op_module.h"
#include "mutation/mutation_driver.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "harness/judge/case_check.h"
#include "harness/engine/junit.h"
#include "harness/engine/report.h"
#include "harness/engine/suite.h"
#include "reference/block_scale.h"
#include "reference/exact_gemm.h"
#include "reference/formats.h"
#include "reference/oracle.h"
#include "reference/quantize.h"
#include "reference/scale_layout.h"

namespace nvfp4 {

using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string describe_case(const Problem& p, const std::string& data, uint64_t case_seed) {
  // A quantize case's data class is its generator (the GEMM family's spec means nothing there).
  if (op_quantizes(p.op))
    return fmt::format("quantize {} {} data={} case_seed={:#x}", shape_text(p), to_string(p.sf_layout), p.generator,
                       case_seed);
  return fmt::format("{} {} {} {} out data={} case_seed={:#x}", shape_text(p), to_string(p.sf_layout),
                     to_string(p.semantics), to_string(p.out_type), data, case_seed);
}

// ---------------------------------------------------------------------------------------------
// The weaker checks' plain call: C zeroed, permuted padding zero, inputs ready before the call
// (as torch's tensors are), the whole device synchronised afterwards (as torch.cuda.synchronize()
// does), and only the return code and the output looked at.

// Runs one weak-check case; true when the kernel failed it (out filled in).
bool weak_case(Executor& executor, const Problem& p, const Policy& policy, const std::string& data, uint64_t case_seed,
               CheckOutcome& out) {
  ++out.cases;
  CallSpec spec;
  spec.pad = 0x00;
  spec.poison = 0x0000;
  spec.inputs_ready_first = true;
  const std::vector<CallObservation> obs = executor.run_case({p, std::nullopt}, {{spec, NVFP4_OK}});
  const CallObservation& o = obs.front();
  if (o.end != CallObservation::End::returned) {
    CallContext x;
    x.call = CaseCall::run1;
    x.problem = &p;
    x.observation = &o;
    const std::optional<Finding> f = first_finding(x);  // how the call ended decides it
    out.failed = true;
    out.check = f ? check_name(f->check) : "crash";
    out.message = f ? f->message : o.error;
  } else if (o.rc != NVFP4_OK) {
    out.failed = true;
    out.check = "returned-error";
    out.message = fmt::format("returned {} where their harness expects a result", o.rc);
  } else {
    const OpModule& module = op_module(p.op);
    if (module.judge_words == nullptr) throw std::logic_error("the weaker checks judge output words, which op " + std::string(to_string(p.op)) + " has not");
    const ExactResult ref = module.reference(p);
    const OracleSummary s = module.judge_words(p, ref, o.c_later.data(), policy);
    if (s.any_failure()) {
      out.failed = true;
      out.check = "allclose";
      out.message = fmt::format("{} of {} outputs outside {}; first at b={} i={} j={}: expected {:#06x}, got {:#06x}",
                                s.failing, s.elements, policy.name(), s.first_b, s.first_i, s.first_j,
                                s.first.expected_bits, s.first_actual);
    }
  }
  if (out.failed) out.case_desc = describe_case(p, data, case_seed);
  return out.failed;
}

// Nearest E4M3 byte (0x00..0x7E) to a value >= 0, ties to the even byte.
uint8_t e4m3_nearest(double v) {
  uint8_t best = 0;
  double best_err = INFINITY;
  for (int byte = 0; byte <= 0x7E; ++byte) {
    const ScaleValue s = e4m3_decode(static_cast<uint8_t>(byte), ScaleSemantics::ue4m3);
    const double err = std::fabs(std::ldexp(static_cast<double>(s.sig), s.exp) - v);
    if (err < best_err || (err == best_err && (byte & 1) == 0)) {
      best = static_cast<uint8_t>(byte);
      best_err = err;
    }
  }
  return best;
}

// Uniform in (0, 1] from 53 random bits.
double uniform01(Rng& rng) { return (static_cast<double>(rng() >> 11) + 1.0) * 0x1p-53; }

Problem shaped(Op op, int64_t m, int64_t n, int64_t k, int64_t l, const nvfp4_kernel_info& info) {
  Problem p;
  p.op = op;
  p.m = round_up(m, info.m_multiple);
  p.n = op_n_is_one(op) ? 1 : round_up(n, info.n_multiple);
  p.k = round_up(k, info.k_multiple);
  if (p.k % 2) p.k *= 2;
  p.l = l;
  p.sf_layout = ((info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u) ? SfLayout::permuted : SfLayout::linear;
  p.semantics = declared_semantics(info);
  p.alpha = 1.0f;
  return p;
}

json outcome_json(const CheckOutcome& o) {
  json j;
  j["ran"] = o.ran;
  if (!o.ran) return j;
  j["failed"] = o.failed;
  j["cases"] = o.cases;
  j["seconds"] = o.seconds;
  if (o.failed) {
    j["check"] = o.check;
    j["message"] = o.message;
    j["case"] = o.case_desc;
    if (!o.case_file.empty()) j["case_file"] = o.case_file;
  }
  return j;
}

// What every row of the report has, mutant or honest variant: its name, memory and whether it
// could run here (and why not).
template <class Row>
json row_json(const Row& r) {
  json j;
  j["name"] = r.name;
  j["memory"] = r.memory;
  j["runnable"] = r.runnable;
  if (!r.runnable) j["why_not"] = r.why_not;
  return j;
}

std::string cell(const CheckOutcome& o) {
  if (!o.ran) return "-";
  if (o.failed) return fmt::format("KILLED {} @{} {:.2f}s", o.check, o.cases, o.seconds);
  return fmt::format("survived {} {:.2f}s", o.cases, o.seconds);
}

}  // namespace

uint64_t mutation_case_seed(uint64_t seed, const std::string& kernel, const std::string& check, int64_t index) {
  return splitmix64(seed ^ splitmix64(fnv1a(kernel + "/" + check)) ^ splitmix64(static_cast<uint64_t>(index)));
}

std::string unschedulable(const KernelDesc& kernel) {
  try {
    (void)Schedule(kernel.info, kernel.name, ScheduleOptions{});
  } catch (const std::invalid_argument& e) {
    return std::string("the schedule has no case for it yet: ") + e.what();
  }
  return "";
}

CheckOutcome suite_check(Executor& executor, const MutationOptions& options, int64_t cases) {
  CheckOutcome out;
  out.ran = true;
  const KernelDesc& k = executor.kernel();
  ScheduleOptions so;
  so.seed = options.seed;
  if (options.small_shapes) {
    so.limits = quick_shape_limits();
    so.large_tail = false;
  }
  const Schedule schedule(k.info, k.name, so);
  LaneSettings ls;
  ls.cases = cases;
  ls.seed = options.seed;
  ls.case_options.case_dir = options.case_dir;
  if (options.as_matrix_unit) {
    KernelDesc declared = k;
    declared.info.flags |= NVFP4_FLAG_MMA_ACCUMULATE;
    ls.case_options.policy = kernel_policy(declared);
  }
  // The failing case's description, from the schedule that drew it.
  class Describe final : public SuiteListener {
   public:
    Describe(const Schedule& s, CheckOutcome& o) : schedule_(s), out_(o) {}
    void annotate_failure(const KernelDesc&, const CaseOutcome& r, FailureRecord& f) override {
      const ScheduledCase sc = schedule_.at(f.case_index);
      out_.case_desc = describe_case(r.problem, sc.spec.name() + " " + to_string(sc.kind) + " " + to_string(sc.data),
                                     schedule_.case_seed(f.case_index)) +
                       fmt::format(" (schedule case {})", f.case_index);
    }

   private:
    const Schedule& schedule_;
    CheckOutcome& out_;
  } describe(schedule, out);
  const auto start = Clock::now();
  const KernelReport report = check_kernel({&executor}, k, schedule, ls, describe);
  out.cases = report.cases + report.skipped_cases;
  if (report.failure) {
    out.failed = true;
    out.check = check_name(report.failure->check);
    out.message = report.failure->message;
    out.case_file = report.failure->case_file;
  }
  out.seconds = seconds_since(start);
  return out;
}

Problem gpu_mode_problem(Rng& rng, Op op, const nvfp4_kernel_info& info) {
  RngDraws d(rng);
  // Their GEMV shapes are m in the thousands, k up to 16384; scaled down so a host reference
  // checks hundreds of cases, keeping what matters: m a multiple of 128, k of 64, several batches.
  const bool gemv = op_n_is_one(op);
  const int64_t m = 128 * static_cast<int64_t>(1 + d.below(gemv ? 3 : 2));
  const int64_t n = 128;
  const int64_t k = 64 * static_cast<int64_t>(1 + d.below(gemv ? 16 : 8));
  const int64_t l = static_cast<int64_t>(1 + d.below(gemv ? 4 : 2));
  Problem p = shaped(op, m, n, k, l, info);
  // torch.randint(0, 4) bytes: low nibble codes 0-3, high nibble 0.
  p.a = d.bytes(static_cast<size_t>(p.a_bytes()));
  p.b = d.bytes(static_cast<size_t>(p.b_bytes()));
  for (uint8_t& v : p.a) v &= 3u;
  for (uint8_t& v : p.b) v &= 3u;
  // torch.randint(0, 3).to(float8_e4m3fn): the values 0, 1, 2.
  static const uint8_t kScales[3] = {0x00, 0x38, 0x40};
  p.sfa.resize(static_cast<size_t>(p.sfa_bytes()));
  p.sfb.resize(static_cast<size_t>(p.sfb_bytes()));
  for (uint8_t& s : p.sfa) s = kScales[d.below(3)];
  for (uint8_t& s : p.sfb) s = kScales[d.below(3)];
  return p;
}

Problem kernelbench_problem(Rng& rng, Op op, const nvfp4_kernel_info& info) {
  RngDraws d(rng);
  Problem p = op_n_is_one(op) ? shaped(op, 1024, 1, 1024, 1, info) : shaped(op, 256, 128, 512, 1, info);
  p.a = d.bytes(static_cast<size_t>(p.a_bytes()));
  p.b = d.bytes(static_cast<size_t>(p.b_bytes()));
  // |N(0,1)| by Box-Muller from our own uniform draws (std::normal_distribution differs between
  // standard libraries), rounded to the nearest E4M3.
  auto scale = [&rng] {
    const double u1 = uniform01(rng), u2 = uniform01(rng);
    return e4m3_nearest(std::fabs(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2)));
  };
  p.sfa.resize(static_cast<size_t>(p.sfa_bytes()));
  p.sfb.resize(static_cast<size_t>(p.sfb_bytes()));
  for (uint8_t& s : p.sfa) s = scale();
  for (uint8_t& s : p.sfb) s = scale();
  return p;
}

CheckOutcome gpu_mode_check(Executor& executor, const MutationOptions& options, int64_t cases) {
  CheckOutcome out;
  out.ran = true;
  const KernelDesc& kernel = executor.kernel();
  const std::vector<Op> ops = declared_gemv_gemm_ops(kernel.info);
  const Policy policy = Policy::parse("allclose:1e-3:1e-3");
  const auto start = Clock::now();
  for (int64_t c = 0; c < cases; ++c) {
    const uint64_t case_seed = mutation_case_seed(options.seed, kernel.name, "gpu-mode", c);
    Rng rng(case_seed);
    const Problem p = gpu_mode_problem(rng, ops[static_cast<size_t>(c) % ops.size()], kernel.info);
    if (weak_case(executor, p, policy, "gpu-mode", case_seed, out)) break;
  }
  out.seconds = seconds_since(start);
  return out;
}

CheckOutcome kernelbench_check(Executor& executor, const MutationOptions& options) {
  CheckOutcome out;
  out.ran = true;
  const KernelDesc& kernel = executor.kernel();
  const std::vector<Op> ops = declared_gemv_gemm_ops(kernel.info);
  // KernelBench problems are one operation each: the GEMM when the kernel has it.
  const Op op = ops.back();
  const Policy policy = Policy::parse("allclose:1e-2:1e-2");
  const auto start = Clock::now();
  for (int64_t c = 0; c < 5; ++c) {
    const uint64_t case_seed = mutation_case_seed(options.seed, kernel.name, "kernelbench", c);
    Rng rng(case_seed);
    const Problem p = kernelbench_problem(rng, op, kernel.info);
    if (weak_case(executor, p, policy, "kernelbench", case_seed, out)) break;
  }
  out.seconds = seconds_since(start);
  return out;
}

namespace {

// A quantizer's harness as the projects' own tests are written (shared/evidence/
// field-study-2026-12.md): each case run once on zeroed buffers, then TransformerEngine's
// comparison (codes and the valid part of the scales exact, padding never looked at) or
// FlashInfer's (codes as values at rtol 1, atol 0.1; scales at rtol 0.1; padding never looked at).
enum class QuantizerHarness { transformer_engine, flashinfer };

double code_value(BlockFormat f, uint8_t code) {
  if (packs_nibbles(f)) return e2m1_twice(code) / 2.0;
  return code;  // MXFP8 elements: compared as bytes (no loose comparison is written for them)
}
bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

// Where a quantizer's output fails the harness's comparison, in words; "" when it passes.
std::string quantizer_mismatch(const Problem& p, const std::vector<uint32_t>& words, QuantizerHarness h) {
  const QuantResult ref = quantize_reference(p);
  const std::vector<uint8_t> q(words.begin(), words.begin() + p.q_bytes()), laid(words.begin() + p.q_bytes(), words.end());
  const std::vector<uint8_t> sfq = p.sf_layout == SfLayout::permuted ? sf_to_linear(laid.data(), p.m, p.qkb(), p.l) : laid;
  const bool te = h == QuantizerHarness::transformer_engine;
  for (size_t s = 0; s < ref.sfq.size(); ++s)
    if (te ? sfq[s] != ref.sfq[s] : !close(block_scale_value(p.q_format, sfq[s]), block_scale_value(p.q_format, ref.sfq[s]), 0.1, 0))
      return fmt::format("scale {}: 0x{:02x}, the reference's 0x{:02x}", s, sfq[s], ref.sfq[s]);
  const int64_t elems = p.l * p.m * p.k;
  for (int64_t e = 0; e < elems; ++e) {
    const auto code = [&](const std::vector<uint8_t>& v) {
      return packs_nibbles(p.q_format) ? static_cast<uint8_t>((v[static_cast<size_t>(e / 2)] >> (4 * (e % 2))) & 0xF)
                                       : v[static_cast<size_t>(e)];
    };
    const uint8_t got = code(q), want = code(ref.q);
    const bool ok = te || !packs_nibbles(p.q_format) ? code_value(p.q_format, got) == code_value(p.q_format, want)
                                                     : close(code_value(p.q_format, got), code_value(p.q_format, want), 1.0, 0.1);
    if (!ok) return fmt::format("element {}: code 0x{:x}, the reference's 0x{:x}", e, got, want);
  }
  return "";
}

CheckOutcome quantizer_harness_check(Executor& executor, const MutationOptions& options, QuantizerHarness h) {
  CheckOutcome out;
  out.ran = true;
  const KernelDesc& kernel = executor.kernel();
  ScheduleOptions so;
  so.seed = mutation_case_seed(options.seed, kernel.name, h == QuantizerHarness::flashinfer ? "flashinfer" : "te", 0);
  const Schedule schedule(kernel.info, kernel.name, so);
  const auto start = Clock::now();
  for (int64_t c = 0; c < options.weak_cases; ++c) {
    const Problem p = schedule.at(c).problem;
    ++out.cases;
    CallSpec spec;
    spec.pad = 0x00;
    spec.poison = 0x0000;
    spec.inputs_ready_first = true;
    const CallObservation o = executor.run_case({p, std::nullopt}, {{spec, NVFP4_OK}}).front();
    if (o.end == CallObservation::End::suite_memory) throw_suite_memory(o);  // no kill: the suite's error
    std::string why;
    if (o.end != CallObservation::End::returned) why = o.error.empty() ? "the call did not return" : o.error;
    else if (o.rc != NVFP4_OK) why = fmt::format("returned {} where a result is expected", o.rc);
    else why = quantizer_mismatch(p, o.c_later.words(), h);
    if (!why.empty()) {
      out.failed = true;
      out.check = h == QuantizerHarness::flashinfer ? "allclose" : "exact";
      out.message = why;
      break;
    }
  }
  out.seconds = seconds_since(start);
  return out;
}

// A row's name, memory and whether the kernel can run here and has cases in the schedule (why not,
// when it does not): what a mutant's and an honest variant's rows start with. False when it cannot.
template <class Row>
bool start_row(Row& row, const KernelDesc& kernel) {
  row.name = kernel.name;
  row.memory = kernel.is_cuda() ? "cuda" : "host";
  row.runnable = kernel.runnable;
  row.why_not = kernel.why_not;
  if (!row.runnable) return false;
  if (const std::string why = unschedulable(kernel); !why.empty()) {
    row.runnable = false;
    row.why_not = why;
  }
  return row.runnable;
}

}  // namespace

MutantRow analyse_mutant(Executor& executor, const MutationOptions& options) {
  const KernelDesc& kernel = executor.kernel();
  MutantRow row;
  row.description = kernel.description;
  if (!start_row(row, kernel)) return row;
  row.suite = suite_check(executor, options, options.budget);
  // The weaker checks model harnesses of FP16 GEMV and GEMM problems (GPU MODE's, KernelBench's):
  // a kernel of neither, or without FP16 output, is not one they could check ("-").
  const bool weak_applies = !declared_gemv_gemm_ops(kernel.info).empty() &&
                            ((declared_out_types(kernel.info) >> NVFP4_OUT_FP16) & 1u);
  if (options.weak_checks && weak_applies) {
    row.gpu_mode = gpu_mode_check(executor, options, options.weak_cases);
    row.kernelbench = kernelbench_check(executor, options);
  } else if (options.weak_checks && kernel.supports_op(NVFP4_OP_QUANTIZE)) {
    // A quantizer's table columns: FlashInfer's quantizer test, then TransformerEngine's.
    row.gpu_mode = quantizer_harness_check(executor, options, QuantizerHarness::flashinfer);
    row.kernelbench = quantizer_harness_check(executor, options, QuantizerHarness::transformer_engine);
  }
  return row;
}

HonestRow run_honest(Executor& executor, int64_t cases, const MutationOptions& options) {
  const KernelDesc& kernel = executor.kernel();
  HonestRow row;
  if (!start_row(row, kernel)) return row;
  row.suite = suite_check(executor, options, cases);
  return row;
}

std::string kill_table(const std::vector<MutantRow>& rows) {
  size_t w = 6;
  for (const MutantRow& r : rows) w = std::max(w, r.name.size());
  std::string t = fmt::format("{:<{}}  {:<36}  {:<36}  {:<36}\n", "mutant", w, "this suite", "GPU MODE style",
                              "KernelBench style");
  int ran = 0, suite = 0, gpu_mode = 0, kernelbench = 0, skipped = 0;
  for (const MutantRow& r : rows) {
    if (!r.runnable) {
      ++skipped;
      t += fmt::format("{:<{}}  skipped: {}\n", r.name, w, r.why_not);
      continue;
    }
    ++ran;
    suite += r.suite.failed;
    gpu_mode += r.gpu_mode.failed;
    kernelbench += r.kernelbench.failed;
    t += fmt::format("{:<{}}  {:<36}  {:<36}  {:<36}\n", r.name, w, cell(r.suite), cell(r.gpu_mode),
                     cell(r.kernelbench));
  }
  t += fmt::format("killed: this suite {}/{}, GPU MODE style {}/{}, KernelBench style {}/{}", suite, ran, gpu_mode,
                   ran, kernelbench, ran);
  if (skipped) t += fmt::format(" ({} mutant(s) cannot run here)", skipped);
  t += "\n";
  if (std::any_of(rows.begin(), rows.end(), [](const MutantRow& r) { return r.name.find("_q_") != std::string::npos; }))
    t += "quantizers (mut_*_q_*): the two columns are FlashInfer's quantizer test (codes as values at rtol 1, atol 0.1; "
         "scales at rtol 0.1) and TransformerEngine's (codes and the valid part of the scales exact); neither looks at "
         "the scale padding\n";
  return t;
}

std::string honest_table(const std::vector<HonestRow>& rows) {
  size_t w = 6;
  for (const HonestRow& r : rows) w = std::max(w, r.name.size());
  std::string t = fmt::format("{:<{}}  {:>8}  {:>9}  {}\n", "honest", w, "cases", "seconds", "false alarms");
  int64_t cases = 0, alarms = 0;
  for (const HonestRow& r : rows) {
    if (!r.runnable) {
      t += fmt::format("{:<{}}  skipped: {}\n", r.name, w, r.why_not);
      continue;
    }
    cases += r.suite.cases;
    alarms += r.suite.failed;
    t += fmt::format("{:<{}}  {:>8}  {:>9.2f}  {}\n", r.name, w, r.suite.cases, r.suite.seconds,
                     r.suite.failed ? fmt::format("1: {} ({})", r.suite.check, r.suite.case_file) : "0");
  }
  t += fmt::format("honest total: {} cases, {} false alarm(s)\n", cases, alarms);
  return t;
}

json mutation_report_json(const MutationOptions& options, const std::vector<MutantRow>& mutants,
                          const std::vector<HonestRow>& honest, const std::string& command) {
  json j;
  j["seed"] = options.seed;
  j["command"] = command;
  j["budget"] = options.budget;
  j["as_matrix_unit"] = options.as_matrix_unit;
  j["weak_cases"] = options.weak_cases;
  j["mutants"] = json::array();
  int killed = 0, ran = 0;
  for (const MutantRow& r : mutants) {
    json m = row_json(r);
    m["description"] = r.description;
    if (r.runnable) {
      ++ran;
      killed += r.suite.failed;
      m["killed"] = r.suite.failed;
      m["suite"] = outcome_json(r.suite);
      m["gpu_mode"] = outcome_json(r.gpu_mode);
      m["kernelbench"] = outcome_json(r.kernelbench);
    }
    j["mutants"].push_back(m);
  }
  j["honest"] = json::array();
  int64_t honest_cases = 0, alarms = 0;
  for (const HonestRow& r : honest) {
    json h = row_json(r);
    if (r.runnable) {
      honest_cases += r.suite.cases;
      alarms += r.suite.failed;
      h["cases"] = r.suite.cases;
      h["false_alarms"] = r.suite.failed ? 1 : 0;
      h["suite"] = outcome_json(r.suite);
    }
    j["honest"].push_back(h);
  }
  j["summary"] = {{"mutants_run", ran},        {"mutants_killed", killed},  {"honest_cases", honest_cases},
                  {"false_alarms", alarms}, {"all_killed", killed == ran}};
  return j;
}

namespace {

// A row made with the kernel in a worker process of its own; a worker that cannot start (its
// plugin fails to load there) makes the kernel's row "cannot run", with why.
template <typename Row, typename Body>
Row in_worker(const SuiteKernel& k, double timeout_s, Body body) {
  WorkerExecutor executor(k.command, timeout_s);
  try {
    return body(executor);
  } catch (const WorkerStartError& e) {
    Row row;
    row.name = k.desc.name;
    row.runnable = false;
    row.why_not = e.what();
    return row;
  }
}

}  // namespace

namespace {

// The analysis as JUnit test cases: a mutant passes when the suite killed it, an honest kernel
// (or control) when it raised no false alarm; one that cannot run here is skipped.
std::vector<JUnitCase> mutation_junit_cases(const std::vector<MutantRow>& rows, const std::vector<HonestRow>& honest,
                                            const std::vector<SuiteKernel>& honest_kernels) {
  std::vector<JUnitCase> cases;
  auto start = [&](const std::string& name, const std::string& kind, bool runnable, const std::string& why_not,
                   double seconds) {
    JUnitCase c;
    c.name = name;
    c.classname = "nvfp4check.mutants." + kind;
    c.seconds = seconds;
    if (!runnable) {
      c.result = JUnitCase::Result::skipped;
      c.message = why_not;
    }
    return c;
  };
  for (const MutantRow& r : rows) {
    JUnitCase c = start(r.name, "mutant", r.runnable, r.why_not, r.suite.seconds);
    if (r.runnable && !r.suite.failed) {
      c.result = JUnitCase::Result::fail;
      c.message = fmt::format("SURVIVED {} case(s) of the suite", r.suite.cases);
      c.body = r.description;
    }
    cases.push_back(c);
  }
  for (const HonestRow& r : honest) {
    JUnitCase c = start(r.name, "honest", r.runnable, r.why_not, r.suite.seconds);
    if (r.runnable && r.suite.failed) {
      c.result = JUnitCase::Result::fail;
      c.message = "false alarm: " + r.suite.check + ": " + r.suite.message;
      c.body = c.message + "\n" + r.suite.case_desc;
      auto k = std::find_if(honest_kernels.begin(), honest_kernels.end(),
                            [&](const SuiteKernel& s) { return s.desc.name == r.name; });
      if (!r.suite.case_file.empty() && k != honest_kernels.end())
        c.body += "\nreproduce: " + reproduce_command(r.suite.case_file, k->replay_args);
    }
    cases.push_back(c);
  }
  return cases;
}

// The JSON report and the JUnit XML, where asked for; false, said on stderr, when one could not
// be written.
bool write_mutation_reports(const MutationRun& run, const std::vector<MutantRow>& rows,
                            const std::vector<HonestRow>& honest_rows, const std::vector<SuiteKernel>& honest_kernels) {
  try {
    if (!run.report.empty())
      write_report_file(run.report, mutation_report_json(run.options, rows, honest_rows, run.command_line));
    if (!run.junit.empty())
      write_junit_file(run.junit, "nvfp4check mutants", mutation_junit_cases(rows, honest_rows, honest_kernels));
    return true;
  } catch (const std::exception& e) {
    fmt::print(stderr, "nvfp4check mutants: {}\n", e.what());
    return false;
  }
}

}  // namespace

int run_mutation_analysis(const MutationRun& run) {
  const MutationOptions& options = run.options;
  std::vector<SuiteKernel> mutants, honest;
  try {
    mutants = find_kernels({run.mutant_plugin}, {}, options.timeout_s);
    honest = find_kernels({run.honest_plugin}, {}, options.timeout_s);
  } catch (const std::exception& e) {
    fmt::print(stderr, "nvfp4check mutants: {}\n", e.what());
    return 2;
  }
  auto origin_is = [](const std::vector<SuiteKernel>& v, const std::string& plugin) {
    std::vector<SuiteKernel> out;
    for (const SuiteKernel& k : v)
      if (k.desc.origin == plugin) out.push_back(k);  // the plugin's own, not the built-ins
    return out;
  };
  mutants = origin_is(mutants, run.mutant_plugin);
  honest = origin_is(honest, run.honest_plugin);
  auto wanted = [&](const SuiteKernel& k) {
    if (run.memory == "host" && k.desc.is_cuda()) return false;
    if (run.memory == "cuda" && !k.desc.is_cuda()) return false;
    return run.kernels.empty() || name_matches(run.kernels, k.desc.name);
  };
  for (const std::string& name : run.kernels) {
    auto named = [&](const SuiteKernel& k) { return name_matches({name}, k.desc.name); };
    if (std::none_of(mutants.begin(), mutants.end(), named) && std::none_of(honest.begin(), honest.end(), named)) {
      fmt::print(stderr, "nvfp4check mutants: no kernel named or matching '{}' in either plugin\n", name);
      return 2;
    }
  }
  if (!run.report.empty() || !run.junit.empty()) {
    try {
      if (!run.report.empty()) check_report_writable(run.report);
      if (!run.junit.empty()) check_report_writable(run.junit);
    } catch (const std::exception& e) {
      fmt::print(stderr, "nvfp4check mutants: {}\n", e.what());
      return 2;
    }
  }
  fmt::print(stderr, "mutants: seed {} (rerun with --seed {}), budget {} suite cases, {} GPU MODE style cases, "
             "{} honest cases per kernel, {} kernel(s) at a time{}\n", options.seed, options.seed, options.budget,
             options.weak_checks ? options.weak_cases : 0, run.honest_cases, std::max(1, run.jobs),
             options.as_matrix_unit ? ", every kernel judged as declaring NVFP4_FLAG_MMA_ACCUMULATE" : "");
  fmt::print(stderr, "mutants plugin {}\nhonest plugin {}\n", run.mutant_plugin, run.honest_plugin);

  // The controls (ctl_*: the mutants plugin's engines with no bug) run as honest kernels.
  std::vector<const SuiteKernel*> mutant_kernels;
  std::vector<SuiteKernel> honest_kernels;
  for (const SuiteKernel& k : mutants) {
    if (!wanted(k)) continue;
    // big_*: mutants only a case past the schedule's sizes shows (corpus/large/): not judged
    // within a budget of ordinary cases.
    if (k.desc.name.rfind("big_", 0) == 0) {
      fmt::print(stderr, "  {}: left to its large case (corpus/large/, scripts/gpu-check.sh v2-large)\n", k.desc.name);
      continue;
    }
    if (k.desc.name.rfind("mut_", 0) != 0) {
      honest_kernels.push_back(k);
      continue;
    }
    if (!run.honest_only) mutant_kernels.push_back(&k);
  }
  for (const SuiteKernel& k : honest)
    if (wanted(k)) honest_kernels.push_back(k);
  if (run.honest_cases <= 0) honest_kernels.clear();

  std::vector<MutantRow> rows(mutant_kernels.size());
  std::vector<HonestRow> honest_rows(honest_kernels.size());
  const size_t total = rows.size() + honest_rows.size();
  // Row x: a mutant's for x < rows.size(), then the honest kernels' in order. Its progress lines.
  auto make_row = [&](size_t x) {
    if (x < rows.size()) {
      const MutantRow row = in_worker<MutantRow>(*mutant_kernels[x], options.timeout_s,
                                                 [&](Executor& e) { return analyse_mutant(e, options); });
      rows[x] = row;
      if (!row.runnable) return fmt::format("  {}: skipped ({})\n", row.name, row.why_not);
      std::string line = fmt::format("  {}: suite {}{} after {} case(s), {:.2f}s\n", row.name,
                                     row.suite.failed ? "KILLED by " : "SURVIVED", row.suite.failed ? row.suite.check : "",
                                     row.suite.cases, row.suite.seconds);
      if (row.suite.failed && !row.suite.case_desc.empty()) line += fmt::format("    {}\n", row.suite.case_desc);
      return line;
    }
    const SuiteKernel& k = honest_kernels[x - rows.size()];
    const HonestRow row =
        in_worker<HonestRow>(k, options.timeout_s, [&](Executor& e) { return run_honest(e, run.honest_cases, options); });
    honest_rows[x - rows.size()] = row;
    if (!row.runnable) return fmt::format("  {}: skipped ({})\n", row.name, row.why_not);
    return fmt::format("  {}: {} case(s), {}, {:.2f}s\n", row.name, row.suite.cases,
                       row.suite.failed ? "FALSE ALARM: " + row.suite.check + ": " + row.suite.message : "no false alarm",
                       row.suite.seconds);
  };
  // `jobs` rows side by side, each kernel in a worker process of its own. A row does not depend on
  // what runs beside it: its cases come from the seed and the kernel's name, and a kernel's first
  // failure and count do not depend on timing. Lines print in the table's order, each as soon as
  // the rows before it are done. Each row's reference and judging get their share of the cores, as
  // `run`'s lanes do.
  const size_t jobs = std::clamp<size_t>(static_cast<size_t>(std::max(1, run.jobs)), 1, std::max<size_t>(total, 1));
  const int team = lane_team(static_cast<int>(jobs), omp_get_num_procs());
  std::vector<std::optional<std::string>> lines(total);
  std::vector<std::exception_ptr> errors(total);
  std::atomic<size_t> next{0};
  std::mutex print_mutex;
  size_t printed = 0;
  auto work = [&] {
    if (jobs > 1) omp_set_num_threads(team);
    for (size_t x = next++; x < total; x = next++) {
      std::string line;
      try {
        line = make_row(x);
      } catch (...) {
        errors[x] = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(print_mutex);
      lines[x] = std::move(line);
      for (; printed < total && lines[printed]; ++printed) fmt::print(stderr, "{}", *lines[printed]);
      std::fflush(stderr);
    }
  };
  if (jobs == 1) {
    work();
  } else {
    std::vector<std::thread> threads;
    for (size_t t = 0; t < jobs; ++t) threads.emplace_back(work);
    for (std::thread& t : threads) t.join();
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  if (!rows.empty()) fmt::print("{}\n", kill_table(rows));
  if (!honest_rows.empty()) fmt::print("{}", honest_table(honest_rows));
  fmt::print("seed {}\n", options.seed);

  bool ok = true;
  for (const MutantRow& r : rows) ok = ok && (!r.runnable || r.suite.failed);
  for (const HonestRow& r : honest_rows) ok = ok && !(r.runnable && r.suite.failed);
  int exit_code = ok ? 0 : 1;
  if (!write_mutation_reports(run, rows, honest_rows, honest_kernels) && exit_code == 0) exit_code = 2;
  return exit_code;
}

}  // namespace nvfp4
