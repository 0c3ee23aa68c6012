// `--python FILE[:FUNCTION]` for run and replay (see python_kernel.h).
#include "cli/python_kernel.h"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/ops/op_module.h"

namespace nvfp4::cli {

void add_python_options(CLI::App* c, PythonArgs& args, bool with_op) {
  c->add_option("--python", args.python,
                "Check a Python function instead: FILE[:FUNCTION] (default custom_kernel), called by Python's "
                "nvfp4check worker (the package must be importable by --python-exe)");
  // --format is both how the function is called and, for a quantizer, the format it writes
  // (SPEC.md section 6): the value says which.
  c->add_option("--format", args.format_words,
                "--python: what the function takes (canonical, or gpumode with --problem); for a quantizer also a "
                "format it writes (nvfp4, mxfp4, mxfp8_e4m3, mxfp8_e5m2; repeatable, default nvfp4)")
      ->check(CLI::IsMember({"canonical", "gpumode", "nvfp4", "mxfp4", "mxfp8_e4m3", "mxfp8_e5m2"}))
      ->each([&args](const std::string& v) {
        if (v == "canonical" || v == "gpumode") {
          args.format = v;
          args.format_given = true;
        } else {
          args.q_formats.push_back(v);
        }
      });
  c->add_option("--in-type", args.in_types, "--python: a quantizer's input type (repeatable; default all three)")
      ->check(CLI::IsMember({"fp16", "bf16", "fp32"}));
  c->add_option("--recipe", args.recipes,
                "--python: a recipe the quantizer follows (repeatable; SPEC.md section 2; required with --op quantize)")
      ->check(CLI::IsMember({"te", "ref", "fast", "torchao", "mx_rceil", "mx_floor", "mx_even"}));
  c->add_option("--a-format", args.a_formats, "--python: a format of A the function reads (repeatable; default nvfp4)")
      ->check(CLI::IsMember({"nvfp4", "mxfp4", "mxfp8_e4m3", "mxfp8_e5m2"}));
  c->add_option("--b-format", args.b_formats, "--python: a format of B the function reads (repeatable; default nvfp4)")
      ->check(CLI::IsMember({"nvfp4", "mxfp4", "mxfp8_e4m3", "mxfp8_e5m2"}));
  c->add_option("--problem", args.problem,
                "--python: a GPU MODE problem (gpu-mode/reference-kernels, problems/nvidia): the function gets the "
                "tuple its reference.py builds, declares its op and the shape limits of its task.yml")
      ->check(CLI::IsMember({"nvfp4_gemv", "nvfp4_gemm", "nvfp4_group_gemm", "nvfp4_dual_gemm"}));
  c->add_option("--stream", args.stream,
                "--python: torch's current stream during the call: the runner's (current, default) or the legacy "
                "default stream, as GPU MODE's harness runs (legacy)")
      ->check(CLI::IsMember({"current", "legacy"}));
  c->add_option("--out-type", args.out_types, "--python: an output type the function writes (repeatable; default fp16)")
      ->check(CLI::IsMember({"fp16", "bf16", "fp32"}));
  c->add_option("--max-groups", args.max_groups,
                "--python: grouped GEMM: the most groups the function takes in one call (default 0: no limit)")
      ->check(CLI::Range(0u, 1u << 20));
  c->add_option("--warmup-timeout", args.warmup_timeout_s,
                "--python: seconds the first call of each kernel process may take (compiling; default 900), "
                "outside --timeout and --seconds")
      ->check(CLI::Range(0.001, 24 * 3600.0));
  c->add_option("--memory", args.memory, "where kernels' tensors live: --python: the function's (default cuda); `run` without --python: "
                "only the kernels in this memory")
      ->check(CLI::IsMember({"host", "cuda"}));
  if (with_op)
    c->add_option("--op", args.ops, "--python: an op the function declares (repeatable; default gemv)")
        ->check(CLI::IsMember(op_names()));
  c->add_option("--sf-layout", args.sf_layouts, "--python: a scale layout the function reads (repeatable)")
      ->check(CLI::IsMember({"linear", "permuted"}));
  c->add_option("--flags", args.flags, "--python: the function's declared flags (SPEC.md section 5 bits)");
  c->add_option("--flag", args.flag_names,
                "--python: a declared flag by name (repeatable: signed_scales, nondeterministic, fp16_accumulate, "
                "saturates, exact, unit_alpha, mma_accumulate, groups_packed, quant_2d, row_global_scale, stochastic, "
                "sf_padding_kept)");
  c->add_option("--m-multiple", args.m_multiple, "--python: the m the function needs is a multiple of this")
      ->check(CLI::Range(1u, 1u << 20));
  c->add_option("--n-multiple", args.n_multiple, "--python: likewise for n (GEMM)")->check(CLI::Range(1u, 1u << 20));
  c->add_option("--k-multiple", args.k_multiple, "--python: likewise for k")->check(CLI::Range(1u, 1u << 20));
  c->add_option("--min-sm", args.min_sm, "--python: the lowest compute capability x 10 it runs on (e.g. 100)")
      ->check(CLI::Range(0u, 1000u));
  c->add_option("--name", args.name, "--python: the kernel's name (default: the function's, lowercased)");
  c->add_option("--python-exe", args.python_exe,
                "--python: the interpreter (default: env NVFP4_PYTHON, else python3 on PATH)");
}

std::vector<std::string> python_declaration_args(const PythonArgs& args) {
  if (!args.problem.empty() && args.format_given && args.format != "gpumode")
    throw std::invalid_argument("--problem " + args.problem + " is a GPU MODE problem: --format gpumode");
  std::vector<std::string> a = {"--format", args.problem.empty() ? args.format : "gpumode", "--memory", args.memory};
  if (!args.problem.empty()) a.insert(a.end(), {"--problem", args.problem});
  if (args.stream != "current") a.insert(a.end(), {"--stream", args.stream});
  for (const std::string& t : args.out_types) a.insert(a.end(), {"--out-type", t});
  for (const std::string& op : args.ops) a.insert(a.end(), {"--op", op});
  for (const std::string& t : args.in_types) a.insert(a.end(), {"--in-type", t});
  for (const std::string& r : args.recipes) a.insert(a.end(), {"--recipe", r});
  for (const std::string& f : args.q_formats) a.insert(a.end(), {"--format", f});
  for (const std::string& f : args.a_formats) a.insert(a.end(), {"--a-format", f});
  for (const std::string& f : args.b_formats) a.insert(a.end(), {"--b-format", f});
  for (const std::string& layout : args.sf_layouts) a.insert(a.end(), {"--sf-layout", layout});
  for (const std::string& flag : args.flag_names) a.insert(a.end(), {"--flag", flag});
  if (args.flags) a.insert(a.end(), {"--flags", std::to_string(args.flags)});
  if (args.m_multiple > 1) a.insert(a.end(), {"--m-multiple", std::to_string(args.m_multiple)});
  if (args.n_multiple > 1) a.insert(a.end(), {"--n-multiple", std::to_string(args.n_multiple)});
  if (args.k_multiple > 1) a.insert(a.end(), {"--k-multiple", std::to_string(args.k_multiple)});
  if (args.min_sm > 0) a.insert(a.end(), {"--min-sm", std::to_string(args.min_sm)});
  if (args.max_groups > 0) a.insert(a.end(), {"--max-groups", std::to_string(args.max_groups)});
  if (!args.name.empty()) a.insert(a.end(), {"--name", args.name});
  return a;
}

WorkerCommand python_worker_command(const PythonArgs& args, double timeout_s) {
  WorkerCommand command;
  const char* env_python = std::getenv("NVFP4_PYTHON");
  const std::string python = !args.python_exe.empty() ? args.python_exe : env_python && *env_python ? env_python : "python3";
  const std::vector<std::string> declared = python_declaration_args(args);
  command.kernel = args.python;
  command.argv = {python, "-m", "nvfp4check.worker", args.python};
  command.argv.insert(command.argv.end(), declared.begin(), declared.end());
  command.argv.insert(command.argv.end(), {"--timeout", fmt::format("{}", timeout_s), "--serve-fd",
                                           std::to_string(kWorkerChannelFd)});
  // execve needs a path: find the interpreter on PATH here.
  if (command.argv[0].find('/') == std::string::npos) {
    if (const std::string found = find_on_path(command.argv[0]); !found.empty()) command.argv[0] = found;
  }
  // A missing interpreter is bad usage, not a kernel's process that "exited with status 127".
  if (access(command.argv[0].c_str(), X_OK) != 0)
    throw std::invalid_argument(fmt::format(
        "the Python interpreter {} was not found{}", command.argv[0],
        !args.python_exe.empty() ? " (--python-exe)" : env_python && *env_python ? " (NVFP4_PYTHON)" : " on PATH"));
  command.warmup_timeout_s = args.warmup_timeout_s;
  return command;
}

SuiteKernel python_kernel(const PythonArgs& args, double timeout_s) {
  SuiteKernel k;
  const std::vector<std::string> declared = python_declaration_args(args);
  // What names this function again (the interpreter is the environment's business).
  k.replay_args = {"--python", args.python};
  k.replay_args.insert(k.replay_args.end(), declared.begin(), declared.end());
  k.command = python_worker_command(args, timeout_s);
  k.stream = args.stream;
  // This process tells the declarations and then checks the first cases: the file is imported
  // (and compiled) once.
  k.started = std::make_shared<WorkerExecutor>(k.command, timeout_s);
  k.desc = k.started->kernel();  // WorkerStartError: the file does not import, or declares nonsense
  k.desc.origin = args.python;
  return k;
}

bool declares_anything(const PythonArgs& a) {
  return !a.problem.empty() || a.stream != "current" || !a.out_types.empty() || a.m_multiple > 1 ||
         a.n_multiple > 1 || a.k_multiple > 1 || a.min_sm > 0 || a.max_groups > 0 || !a.flag_names.empty() ||
         !a.sf_layouts.empty() || !a.name.empty() || a.flags != 0 || !a.in_types.empty() || !a.recipes.empty() ||
         !a.q_formats.empty() || !a.a_formats.empty() || !a.b_formats.empty();
}

namespace {

class OtherStreamListener final : public SuiteListener {
 public:
  // `other`: the same function's worker with torch's current stream the other one.
  OtherStreamListener(WorkerCommand other, std::string mine, double timeout_s, std::string case_dir)
      : command_(std::move(other)), mine_(std::move(mine)), other_(other_stream(mine_)), timeout_s_(timeout_s),
        case_dir_(std::move(case_dir)) {}

  void annotate_failure(const KernelDesc&, const CaseOutcome& out, FailureRecord& f) override {
    if (!stream_explainable(f.check) || out.case_file.empty()) return;
    std::string note;
    try {
      const ReplayInput input = read_replay_input(out.case_file, false);
      WorkerExecutor executor(command_, timeout_s_);
      CaseOptions base;
      base.case_dir = case_dir_ + "/other-stream";
      const CaseOutcome again = replay_case(executor, input, base);
      if (again.verdict != CaseOutcome::Verdict::pass) return;  // not the streams, or not only
      note = other_stream_note(f.check, mine_, "--stream " + other_);
    } catch (const std::exception& e) {
      note = fmt::format("running it again with --stream {} did not work: {}", other_, e.what());
    }
    f.notes.push_back(note);
  }

 private:
  WorkerCommand command_;
  std::string mine_, other_;
  double timeout_s_;
  std::string case_dir_;
};

}  // namespace

std::unique_ptr<SuiteListener> other_stream_listener(const SuiteKernel& kernel, const PythonArgs& args,
                                                     double timeout_s, const std::string& case_dir) {
  if (!kernel.desc.is_cuda()) return nullptr;
  PythonArgs other = args;
  other.stream = other_stream(args.stream);
  return std::make_unique<OtherStreamListener>(python_worker_command(other, timeout_s), args.stream, timeout_s, case_dir);
}

}  // namespace nvfp4::cli
