// Mutation analysis driver (see mutation.h): the suite's check and the two weaker checks over the
// same kernels, and the kill table.
#include "harness/mutation.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/device_buffers.h"
#include "reference/exact_gemm.h"
#include "reference/formats.h"
#include "reference/oracle.h"
#include "reference/scale_layout.h"

namespace nvfp4 {

using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::vector<Op> kernel_ops(const nvfp4_kernel_info& info) {
  std::vector<Op> ops;
  if ((info.ops >> NVFP4_OP_GEMV) & 1u) ops.push_back(Op::gemv);
  if ((info.ops >> NVFP4_OP_GEMM) & 1u) ops.push_back(Op::gemm);
  return ops;
}

ScaleSemantics kernel_semantics(const nvfp4_kernel_info& info) {
  return (info.flags & NVFP4_FLAG_SIGNED_SCALES) ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
}

int64_t round_up(int64_t v, uint32_t multiple) {
  return multiple > 1 ? (v + multiple - 1) / multiple * multiple : v;
}

std::string describe_case(const Problem& p, const std::string& data, uint64_t case_seed) {
  return fmt::format("{} m={} n={} k={} l={} {} {} alpha={} data={} case_seed={:#x}", to_string(p.op), p.m, p.n,
                     p.k, p.l, to_string(p.sf_layout), to_string(p.semantics), p.alpha, data, case_seed);
}

// ---------------------------------------------------------------------------------------------
// The weaker checks' plain run: no poison, no NaN padding, no guards looked at, no second run.

std::vector<uint16_t> run_plain(const Kernel& kernel, const Problem& p, double timeout_s, int* rc) {
  std::unique_ptr<KernelMemory> mem = KernelMemory::create(kernel.info->memory);
  const bool permuted = p.sf_layout == SfLayout::permuted;
  // Their scale tensors have no padding at their shapes; zero where ours have some.
  const std::vector<uint8_t> sfa = permuted ? sf_to_permuted(p.sfa.data(), p.m, p.kb(), p.l, 0) : p.sfa;
  const std::vector<uint8_t> sfb = permuted ? sf_to_permuted(p.sfb.data(), p.n, p.kb(), p.l, 0) : p.sfb;
  const std::vector<uint8_t> zeros(static_cast<size_t>(p.c_elems() * 2), 0);
  auto a = mem->allocate(p.a_bytes(), GuardPattern::bytes);
  auto b = mem->allocate(p.b_bytes(), GuardPattern::bytes);
  auto sa = mem->allocate(static_cast<int64_t>(sfa.size()), GuardPattern::bytes);
  auto sb = mem->allocate(static_cast<int64_t>(sfb.size()), GuardPattern::bytes);
  auto c = mem->allocate(p.c_elems() * 2, GuardPattern::bytes);
  a->upload(p.a.data());
  b->upload(p.b.data());
  sa->upload(sfa.data());
  sb->upload(sfb.data());
  c->upload(zeros.data());
  mem->synchronize(timeout_s);  // inputs are ready before the call, as torch's tensors are

  nvfp4_problem abi{};
  abi.op = static_cast<uint32_t>(p.op);
  abi.m = p.m;
  abi.n = p.n;
  abi.k = p.k;
  abi.l = p.l;
  abi.a = a->data();
  abi.b = b->data();
  abi.sfa = sa->data();
  abi.sfb = sb->data();
  abi.sf_layout = static_cast<uint32_t>(p.sf_layout);
  abi.alpha = p.alpha;
  abi.c = reinterpret_cast<uint16_t*>(c->data());
  abi.stream = mem->stream();
  *rc = kernel.run(abi);
  mem->after_call();
  // torch.cuda.synchronize(): the whole device, so work on any stream is finished.
  mem->synchronize_device(timeout_s);
  const std::vector<uint8_t> bytes = c->download(timeout_s);
  std::vector<uint16_t> words(bytes.size() / 2);
  if (!words.empty()) std::memcpy(words.data(), bytes.data(), words.size() * 2);
  return words;
}

// Runs one weak-check case; true when the kernel failed it (out filled in).
bool weak_case(const Kernel& kernel, const Problem& p, const Policy& policy, double timeout_s,
               const std::string& data, uint64_t case_seed, CheckOutcome& out) {
  ++out.cases;
  int rc = NVFP4_OK;
  std::vector<uint16_t> c;
  try {
    c = run_plain(kernel, p, timeout_s, &rc);
  } catch (const DeviceError& e) {
    out.failed = true;
    out.check = e.check();
    out.message = e.what();
  }
  if (!out.failed && rc != NVFP4_OK) {
    out.failed = true;
    out.check = "returned-error";
    out.message = fmt::format("returned {} where their harness expects a result", rc);
  }
  if (!out.failed) {
    const ExactResult ref = exact_gemm(p);
    const OracleSummary s = judge(p, ref, c.data(), policy);
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
  p.n = op == Op::gemv ? 1 : round_up(n, info.n_multiple);
  p.k = round_up(k, info.k_multiple);
  if (p.k % 2) p.k *= 2;
  p.l = l;
  p.sf_layout = ((info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u) ? SfLayout::permuted : SfLayout::linear;
  p.semantics = kernel_semantics(info);
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

std::string cell(const CheckOutcome& o) {
  if (!o.ran) return "-";
  if (o.failed) return fmt::format("KILLED {} @{} {:.2f}s", o.check, o.cases, o.seconds);
  return fmt::format("survived {} {:.2f}s", o.cases, o.seconds);
}

}  // namespace

uint64_t mutation_case_seed(uint64_t seed, const std::string& kernel, const std::string& check, int64_t index) {
  return splitmix64(seed ^ splitmix64(fnv1a(kernel + "/" + check)) ^ splitmix64(static_cast<uint64_t>(index)));
}

CheckOutcome suite_check(const Kernel& kernel, const MutationOptions& options, int64_t cases) {
  CheckOutcome out;
  out.ran = true;
  const nvfp4_kernel_info& info = *kernel.info;
  const std::vector<Op> ops = kernel_ops(info);
  if (ops.empty()) throw std::invalid_argument(kernel.name() + " declares no op");
  // Distributions in a seeded order, each used before any repeats.
  const std::vector<DataSpec>& specs = DataSpec::all();
  std::vector<size_t> order(specs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  Rng order_rng(mutation_case_seed(options.seed, kernel.name(), "suite-order", 0));
  RngDraws order_draws(order_rng);
  for (size_t x = order.size(); x > 1; --x) std::swap(order[x - 1], order[order_draws.below(x)]);

  const auto start = Clock::now();
  for (int64_t c = 0; c < cases; ++c) {
    const uint64_t case_seed = mutation_case_seed(options.seed, kernel.name(), "suite", c);
    Rng rng(case_seed);
    const DataSpec& spec = specs[order[static_cast<size_t>(c) % order.size()]];
    const Op op = ops[static_cast<size_t>(c) % ops.size()];
    Problem p;
    bool built = false;
    if (c % 4 == 3) {
      const Shape s = generate_unsupported_shape(rng, op, info, options.limits);
      if (s.m != 0) {
        p = shaped(s.op, s.m, s.n, s.k, s.l, nvfp4_kernel_info{});  // exactly the unsupported shape
        p.sf_layout = ((info.sf_layouts >> NVFP4_SF_LINEAR) & 1u) ? SfLayout::linear : SfLayout::permuted;
        p.semantics = kernel_semantics(info);
        fill_data(rng, spec, p);
        built = true;
      } else {
        // No multiple to break: a layout or an op the kernel does not declare, if there is one.
        p = generate_problem(rng, op, info, spec, options.limits);
        if (!((info.sf_layouts >> NVFP4_SF_LINEAR) & 1u)) {
          p.sf_layout = SfLayout::linear;
        } else if (!((info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u)) {
          p.sf_layout = SfLayout::permuted;
        }
        built = true;
      }
    }
    if (!built) p = generate_problem(rng, op, info, spec, options.limits);

    RunOptions run;
    run.case_dir = options.case_dir;
    run.timeout_s = options.timeout_s;
    run.data_spec = spec.name();
    run.stale_seed = splitmix64(case_seed);
    const CheckResult r = check_case(kernel, p, run);
    ++out.cases;
    if (r.verdict == CheckResult::Verdict::fail) {
      out.failed = true;
      out.check = r.check;
      out.message = r.message;
      out.case_file = r.case_file;
      out.case_desc = describe_case(r.problem, spec.name(), case_seed);
      break;
    }
  }
  out.seconds = seconds_since(start);
  return out;
}

Problem gpu_mode_problem(Rng& rng, Op op, const nvfp4_kernel_info& info) {
  RngDraws d(rng);
  // Their GEMV shapes are m in the thousands, k up to 16384; scaled down so a host reference
  // checks hundreds of cases, keeping what matters: m a multiple of 128, k of 64, several batches.
  const bool gemv = op == Op::gemv;
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
  Problem p = op == Op::gemv ? shaped(op, 1024, 1, 1024, 1, info) : shaped(op, 256, 128, 512, 1, info);
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

CheckOutcome gpu_mode_check(const Kernel& kernel, const MutationOptions& options, int64_t cases) {
  CheckOutcome out;
  out.ran = true;
  const std::vector<Op> ops = kernel_ops(*kernel.info);
  const Policy policy = Policy::parse("allclose:1e-3:1e-3");
  const auto start = Clock::now();
  for (int64_t c = 0; c < cases; ++c) {
    const uint64_t case_seed = mutation_case_seed(options.seed, kernel.name(), "gpu-mode", c);
    Rng rng(case_seed);
    const Problem p = gpu_mode_problem(rng, ops[static_cast<size_t>(c) % ops.size()], *kernel.info);
    if (weak_case(kernel, p, policy, options.timeout_s, "gpu-mode", case_seed, out)) break;
  }
  out.seconds = seconds_since(start);
  return out;
}

CheckOutcome kernelbench_check(const Kernel& kernel, const MutationOptions& options) {
  CheckOutcome out;
  out.ran = true;
  const std::vector<Op> ops = kernel_ops(*kernel.info);
  // KernelBench problems are one operation each: the GEMM when the kernel has it.
  const Op op = ops.back();
  const Policy policy = Policy::parse("allclose:1e-2:1e-2");
  const auto start = Clock::now();
  for (int64_t c = 0; c < 5; ++c) {
    const uint64_t case_seed = mutation_case_seed(options.seed, kernel.name(), "kernelbench", c);
    Rng rng(case_seed);
    const Problem p = kernelbench_problem(rng, op, *kernel.info);
    if (weak_case(kernel, p, policy, options.timeout_s, "kernelbench", case_seed, out)) break;
  }
  out.seconds = seconds_since(start);
  return out;
}

MutantRow analyse_mutant(const Kernel& kernel, const std::string& description, const MutationOptions& options) {
  MutantRow row;
  row.name = kernel.name();
  row.description = description;
  row.memory = kernel.is_cuda() ? "cuda" : "host";
  row.runnable = kernel_runnable(kernel, &row.why_not);
  if (!row.runnable) return row;
  row.suite = suite_check(kernel, options, options.budget);
  if (options.weak_checks) {
    row.gpu_mode = gpu_mode_check(kernel, options, options.weak_cases);
    row.kernelbench = kernelbench_check(kernel, options);
  }
  return row;
}

HonestRow run_honest(const Kernel& kernel, int64_t cases, const MutationOptions& options) {
  HonestRow row;
  row.name = kernel.name();
  row.memory = kernel.is_cuda() ? "cuda" : "host";
  row.runnable = kernel_runnable(kernel, &row.why_not);
  if (!row.runnable) return row;
  row.suite = suite_check(kernel, options, cases);
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
  return t + "\n";
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
  j["weak_cases"] = options.weak_cases;
  j["mutants"] = json::array();
  int killed = 0, ran = 0;
  for (const MutantRow& r : mutants) {
    json m;
    m["name"] = r.name;
    m["description"] = r.description;
    m["memory"] = r.memory;
    m["runnable"] = r.runnable;
    if (!r.runnable) {
      m["why_not"] = r.why_not;
    } else {
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
    json h;
    h["name"] = r.name;
    h["memory"] = r.memory;
    h["runnable"] = r.runnable;
    if (!r.runnable) {
      h["why_not"] = r.why_not;
    } else {
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

std::string mutant_description(const std::string& plugin_path, int index) {
  // The registry has the plugin open already; RTLD_NOLOAD only takes another reference to it.
  void* handle = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return "";
  std::string text;
  using Describe = const char* (*)(int);
  if (auto describe = reinterpret_cast<Describe>(dlsym(handle, "nvfp4_mutant_describe"))) {
    if (const char* s = describe(index)) text = s;
  }
  dlclose(handle);
  return text;
}

}  // namespace nvfp4
