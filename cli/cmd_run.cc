// `nvfp4check run`: checks kernels on seeded generated cases, each kernel in a worker process
// (see harness/worker_process.h), and the hidden `worker` command those processes run.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "harness/case_input.h"
#include "harness/check_session.h"
#include "harness/generators.h"
#include "harness/report.h"
#include "harness/runner.h"
#include "kernels/registry.h"
#include "reference/case_file.h"

namespace nvfp4::cli {
namespace {

struct RunArgs {
  std::vector<std::string> plugins, kernels;
  std::string op;
  int64_t cases = 0;
  double seconds = 0;
  std::optional<uint64_t> seed;
  std::string report, case_dir = "nvfp4check-cases", policy, shape;
  double timeout_s = 30;
};

struct WorkerArgs {
  std::string kernel, mode = "run", op, case_dir = "nvfp4check-cases", policy, shape;
  std::vector<std::string> plugins, inputs;
  uint64_t seed = 0;
  int64_t cases = 0;
  double seconds = 0, timeout_s = 30;
};

// "MxNxK" or "MxNxKxL" (n = 1 is a GEMV where the kernel has one), for `run --shape`.
Shape parse_shape(const std::string& text) {
  int64_t v[4] = {0, 0, 0, 1};
  int count = 0;
  size_t pos = 0;
  while (count < 4) {
    size_t used = 0;
    try {
      v[count] = std::stoll(text.substr(pos), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || !std::isdigit(static_cast<unsigned char>(text[pos]))) break;
    ++count;
    pos += used;
    if (pos == text.size() || text[pos] != 'x') break;
    ++pos;
  }
  Shape s;
  s.m = v[0];
  s.n = v[1];
  s.k = v[2];
  s.l = v[3];
  s.op = s.n == 1 ? Op::gemv : Op::gemm;
  Problem p;
  set_shape(p, s);
  const std::string error = count < 3 || pos != text.size() ? "expected MxNxK or MxNxKxL" : shape_error(p);
  if (!error.empty()) throw std::invalid_argument(fmt::format("--shape {}: {}", text, error));
  return s;
}

// A case of exactly shape s (production shapes): layout, semantics and alpha chosen as for any
// generated case of this kernel, data drawn from a seed of its own with spec, so that the case
// is saved as `seed` and `generator` instead of tens of megabytes of hex.
Problem problem_of_shape(Rng& rng, const Shape& s, const nvfp4_kernel_info& info, const DataSpec& spec) {
  ShapeLimits smallest;
  smallest.max_m = smallest.max_n = smallest.max_l = 1;
  smallest.max_k = 2;
  Problem p = generate_problem(rng, s.op, info, spec, smallest);
  set_shape(p, s);
  p.a.clear(), p.b.clear(), p.sfa.clear(), p.sfb.clear();
  p.seed = rng();
  p.generator = spec.name();
  expand_seeded_case(p);
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) p.alpha = 1.0f;
  return p;
}

bool applies(const nvfp4_kernel_info& info, const DataSpec& spec) {
  return !(info.flags & NVFP4_FLAG_UNIT_ALPHA) || spec.alpha == AlphaDist::one;
}

// A problem just outside what the kernel declares (a multiple, the layout, the op or alpha), or
// nullopt when the kernel declares no constraint that can be broken.
std::optional<Problem> unsupported_problem(Rng& rng, Op op, const nvfp4_kernel_info& info, const DataSpec& spec,
                                           const ShapeLimits& limits) {
  const Shape s = generate_unsupported_shape(rng, op, info, limits);
  if (s.m != 0) {
    Problem p = generate_problem(rng, op, info, spec, limits);
    set_shape(p, s);
    fill_data(rng, spec, p);
    if (info.flags & NVFP4_FLAG_UNIT_ALPHA) p.alpha = 1.0f;
    return p;
  }
  Problem p = generate_problem(rng, op, info, spec, limits);
  if (!((info.sf_layouts >> NVFP4_SF_LINEAR) & 1u)) {
    p.sf_layout = SfLayout::linear;
    return p;
  }
  if (!((info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u)) {
    p.sf_layout = SfLayout::permuted;
    return p;
  }
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) {
    p.alpha = 2.0f;
    return p;
  }
  const Op other = op == Op::gemm ? Op::gemv : Op::gemm;
  if (!((info.ops >> static_cast<uint32_t>(other)) & 1u)) return generate_problem(rng, other, info, spec, limits);
  return std::nullopt;
}

bool drawable(const CheckResult& r) {
  const Problem& p = r.problem;
  return r.verdict == CheckResult::Verdict::fail && static_cast<int64_t>(r.c.size()) == p.c_elems() &&
         static_cast<int64_t>(r.reference.elems.size()) == p.c_elems() && p.c_elems() > 0;
}

// Failure text and error map of a result, then the result event.
void report_result(const EventWriter& events, const Kernel& kernel, std::optional<uint64_t> seed, const CheckResult& r,
                   const std::string& map_dir) {
  std::string error_map, text;
  if (r.verdict == CheckResult::Verdict::fail) {
    if (drawable(r) && !r.case_file.empty()) {
      error_map = error_map_path_for(r.case_file, map_dir);
      try {
        const std::filesystem::path parent = std::filesystem::path(error_map).parent_path();
        if (!parent.empty()) std::filesystem::create_directories(parent);
        write_error_map_png(error_map, r.problem, r.reference, r.c, r.policy);
      } catch (const std::exception& e) {
        fmt::print(stderr, "warning: no error map: {}\n", e.what());
        error_map.clear();
      }
    }
    text = failure_text(kernel.name(), seed, r, error_map);
  }
  events.emit({{"event", "result"}, {"result", case_result_json(r, text, error_map)}});
}

int worker_main(const WorkerArgs& args) {
  const EventWriter events(kWorkerEventFd);
  try {
    Registry registry = Registry::with_builtins();
    for (const std::string& plugin : args.plugins) registry.load_plugin(plugin);
    const Kernel* kernel = registry.find(args.kernel);
    if (!kernel) throw std::invalid_argument("no kernel named " + args.kernel);
    std::string why;
    if (!kernel_runnable(*kernel, &why)) {
      events.emit({{"event", "skipped"}, {"why", why}});
      events.emit({{"event", "done"}});
      return 0;
    }
    const nvfp4_kernel_info& info = *kernel->info;
    RunOptions options;
    if (!args.policy.empty()) {
      options.use_policy_override = true;
      options.policy_override = Policy::parse(args.policy);  // std::invalid_argument -> exit 2
    }
    options.case_dir = args.case_dir;
    options.timeout_s = args.timeout_s;
    options.on_stage = [&](const std::string& stage) { events.emit({{"event", "stage"}, {"stage", stage}}); };
    options.on_case_saved = [&](const std::string& path) { events.emit({{"event", "saved"}, {"case_file", path}}); };

    if (args.mode == "replay") {
      // Each input gives exactly one result event (the parent counts them off its list).
      options.save_case = false;
      for (size_t x = 0; x < args.inputs.size(); ++x) {
        const std::string& input = args.inputs[x];
        events.emit({{"event", "begin"}, {"index", x}, {"input", input}});
        CheckResult r;
        try {
          const Problem p = load_case_input(input, &info);
          // The stale-state refill depends on the case, not on the path it was given by.
          options.stale_seed = fnv1a(write_case(p));
          r = check_case(*kernel, p, options);
        } catch (const std::exception& e) {
          r.verdict = CheckResult::Verdict::skipped;
          r.message = e.what();
        }
        if (r.case_file.empty()) r.case_file = input;
        report_result(events, *kernel, std::nullopt, r, args.case_dir);
        if (r.context_lost) {
          events.emit({{"event", "restart"}});
          std::fflush(stdout);
          _exit(0);  // a lost CUDA context can hang in teardown: leave without it
        }
      }
      events.emit({{"event", "done"}});
      return 0;
    }

    std::optional<Shape> fixed;
    if (!args.shape.empty()) {
      fixed = parse_shape(args.shape);
      // A kernel without GEMV takes an n = 1 shape as a GEMM.
      if (fixed->op == Op::gemv && !kernel->supports_op(NVFP4_OP_GEMV)) fixed->op = Op::gemm;
    }
    std::vector<Op> ops;
    for (Op op : {Op::gemv, Op::gemm})
      if (kernel->supports_op(static_cast<uint32_t>(op)) && (args.op.empty() || args.op == to_string(op)))
        if (!fixed || fixed->op == op) ops.push_back(op);
    if (ops.empty()) {
      const std::string wanted = fixed ? to_string(fixed->op) : args.op;
      events.emit({{"event", "skipped"}, {"why", wanted.empty() ? "declares no op" : "does not support " + wanted}});
      events.emit({{"event", "done"}});
      return 0;
    }
    std::vector<DataSpec> specs;
    for (const DataSpec& s : DataSpec::all())
      if (applies(info, s)) specs.push_back(s);
    Rng rng(args.seed ^ fnv1a(kernel->name()));
    const ShapeLimits limits;
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    for (int64_t i = 0;; ++i) {
      if (args.cases > 0 && i >= args.cases) break;
      if (args.seconds > 0 && i > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= args.seconds)
        break;
      const Op op = ops[static_cast<size_t>(i) % ops.size()];
      // Every other case has the plainest distribution (exact regime, every bug visible); the
      // rest go through all distributions.
      const DataSpec spec = (i % 2 == 0 || specs.empty()) ? DataSpec{} : specs[rng() % specs.size()];
      std::optional<Problem> p;
      if (fixed) {
        p = problem_of_shape(rng, *fixed, info, spec);
      } else {
        if (i % 8 == 7) p = unsupported_problem(rng, op, info, spec, limits);
        if (!p) p = generate_problem(rng, op, info, spec, limits);
      }
      p->note = fmt::format("nvfp4check run --seed {} --kernel {}: case {}, data {}", args.seed, kernel->name(), i,
                            spec.name());
      options.data_spec = spec.name();
      options.stale_seed = rng();
      events.emit({{"event", "begin"}, {"index", i}});
      const CheckResult r = check_case(*kernel, *p, options);
      report_result(events, *kernel, args.seed, r, "");
      if (r.context_lost) {
        // A lost CUDA context (or a hung kernel still running) can hang the runtime's teardown.
        events.emit({{"event", "done"}});
        std::fflush(stdout);
        _exit(0);
      }
      if (r.verdict == CheckResult::Verdict::fail) break;  // the first failure is the reproducer
    }
    events.emit({{"event", "done"}});
    return 0;
  } catch (const PluginError& e) {
    events.emit({{"event", "error"}, {"message", e.what()}});
  } catch (const std::invalid_argument& e) {
    events.emit({{"event", "error"}, {"message", e.what()}});
  } catch (const std::exception& e) {
    events.emit({{"event", "error"}, {"message", std::string("worker: ") + e.what()}});
  }
  return 2;
}

// The worker's command line for one kernel (the inputs are added by supervise_worker).
std::vector<std::string> worker_argv(const std::string& kernel, const std::vector<std::string>& plugins,
                                     const std::string& mode, const std::string& case_dir, double timeout_s,
                                     const std::string& policy) {
  std::vector<std::string> argv = {self_executable(), "worker", "--kernel", kernel, "--mode", mode,
                                   "--case-dir", case_dir, "--timeout", fmt::format("{}", timeout_s)};
  if (!policy.empty()) argv.insert(argv.end(), {"--policy", policy});
  for (const std::string& p : plugins) {
    argv.push_back("--plugin");
    argv.push_back(p);
  }
  return argv;
}

int run_main(const RunArgs& args, const std::string& command_line) {
  if (!args.policy.empty()) Policy::parse(args.policy);  // a bad name is a usage error here, not in a worker
  Registry registry = Registry::with_builtins();
  for (const std::string& plugin : args.plugins) registry.load_plugin(plugin);  // PluginError -> 2
  const std::vector<const Kernel*> selected = registry.select(args.kernels);
  uint64_t seed = 0;
  if (args.seed) {
    seed = *args.seed;
  } else {
    seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    fmt::print(stderr, "seed from the clock: {} (repeat this run with --seed {})\n", seed, seed);
  }
  SessionOptions session;
  session.seed = seed;
  session.report_path = args.report;
  session.command_line = command_line;
  session.progress_bar = isatty(2) != 0;
  session.print_stages = !args.shape.empty();  // production shapes: show where the time goes
  // With neither a case count nor a time, `run` is the main job: about a minute in all.
  session.total_seconds = args.seconds > 0 ? args.seconds : (args.cases > 0 ? 0 : 60);

  std::vector<SessionKernel> jobs;
  for (const Kernel* k : selected) {
    SessionKernel sk;
    sk.job.kernel = k->name();
    sk.job.origin = k->origin;
    sk.job.seed = seed;
    sk.job.timeout_s = args.timeout_s;
    sk.job.argv = worker_argv(k->name(), args.plugins, "run", args.case_dir, args.timeout_s, args.policy);
    sk.job.argv.insert(sk.job.argv.end(), {"--seed", fmt::format("{}", seed)});
    if (args.cases > 0) sk.job.argv.insert(sk.job.argv.end(), {"--cases", fmt::format("{}", args.cases)});
    if (!args.shape.empty()) sk.job.argv.insert(sk.job.argv.end(), {"--shape", args.shape});
    if (!args.op.empty()) {
      sk.job.argv.insert(sk.job.argv.end(), {"--op", args.op});
      if (!k->supports_op(args.op == "gemv" ? NVFP4_OP_GEMV : NVFP4_OP_GEMM)) sk.skip_reason = "does not support " + args.op;
    }
    jobs.push_back(sk);
  }
  return run_session(std::move(jobs), session);
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "Check kernels on seeded generated cases (each kernel in its own process)");
  run->add_option("--plugin", args->plugins, "Shared library exporting the nvfp4 kernel ABI (repeatable)");
  run->add_option("--kernel", args->kernels, "Kernel to check (repeatable; default: every kernel that can run here)");
  run->add_option("--op", args->op, "Only this op")->check(CLI::IsMember({"gemv", "gemm"}));
  run->add_option("--cases", args->cases, "Cases per kernel (default: as many as the time allows)")->check(CLI::PositiveNumber);
  run->add_option("--seconds", args->seconds, "Time for all kernels together (default 60 without --cases)")
      ->check(CLI::PositiveNumber);
  run->add_option("--seed", args->seed, "Seed of the generators (default: from the clock, printed)");
  run->add_option("--report", args->report, "Write the JSON report here");
  run->add_option("--case-dir", args->case_dir, "Where cases are saved before they run (kept when they fail)");
  run->add_option("--policy", args->policy,
                  "Judge with this oracle policy instead of the one the kernel's flags call for "
                  "(fp32, exact, fp16-accum, allclose:RTOL:ATOL, ulp:N)");
  run->add_option("--timeout", args->timeout_s, "Watchdog: seconds one kernel call may take (default 30)")
      ->check(CLI::PositiveNumber);
  run->add_option("--shape", args->shape,
                  "Every case of this shape, MxNxK or MxNxKxL (e.g. 7168x1x16384 for a production GEMV; large "
                  "problems are judged against the GPU reference where there is a device)");
  run->callback([args, &exit_code] {
    try {
      if (!args->shape.empty()) parse_shape(args->shape);  // a bad shape is a usage error here
      std::string command = "nvfp4check run";
      for (const auto& k : args->kernels) command += " --kernel " + k;
      for (const auto& p : args->plugins) command += " --plugin " + p;
      if (!args->op.empty()) command += " --op " + args->op;
      if (args->cases > 0) command += fmt::format(" --cases {}", args->cases);
      if (args->seconds > 0) command += fmt::format(" --seconds {}", args->seconds);
      if (!args->policy.empty()) command += " --policy " + args->policy;
      if (!args->shape.empty()) command += " --shape " + args->shape;
      exit_code = run_main(*args, command);
    } catch (const std::exception& e) {
      // Bad plugins, unknown kernel names, a worker that found bad input, an unwritable report.
      fmt::print(stderr, "nvfp4check run: {}\n", e.what());
      exit_code = 2;
    }
  });

  // The worker a `run` or `replay` starts for each kernel; not for people (hidden from --help).
  auto wargs = std::make_shared<WorkerArgs>();
  CLI::App* worker = app.add_subcommand("worker", "internal: runs one kernel's cases, events on fd 3");
  worker->group("");
  worker->add_option("--kernel", wargs->kernel)->required();
  worker->add_option("--mode", wargs->mode)->check(CLI::IsMember({"run", "replay"}));
  worker->add_option("--plugin", wargs->plugins);
  worker->add_option("--input", wargs->inputs);
  worker->add_option("--seed", wargs->seed);
  worker->add_option("--op", wargs->op);
  worker->add_option("--cases", wargs->cases);
  worker->add_option("--seconds", wargs->seconds);
  worker->add_option("--case-dir", wargs->case_dir);
  worker->add_option("--timeout", wargs->timeout_s);
  worker->add_option("--policy", wargs->policy);
  worker->add_option("--shape", wargs->shape);
  worker->callback([wargs, &exit_code] { exit_code = worker_main(*wargs); });
}

}  // namespace nvfp4::cli
