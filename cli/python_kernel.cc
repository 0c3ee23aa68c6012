// `--python FILE[:FUNCTION]` for run and replay (see python_kernel.h).
#include "cli/python_kernel.h"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

namespace nvfp4::cli {

void add_python_options(CLI::App* c, PythonArgs& args, bool with_op) {
  c->add_option("--python", args.python,
                "Check a Python function instead: FILE[:FUNCTION] (default custom_kernel), called by Python's "
                "nvfp4check worker (the package must be importable by --python-exe)");
  c->add_option("--format", args.format, "--python: what the function takes (SPEC.md section 7)")
      ->check(CLI::IsMember({"canonical", "gpumode"}));
  c->add_option("--memory", args.memory, "--python: where the function's tensors live (default cuda)")
      ->check(CLI::IsMember({"host", "cuda"}));
  if (with_op)
    c->add_option("--op", args.ops, "--python: an op the function declares (repeatable; default gemv)")
        ->check(CLI::IsMember({"gemv", "gemm"}));
  c->add_option("--sf-layout", args.sf_layouts, "--python: a scale layout the function reads (repeatable)")
      ->check(CLI::IsMember({"linear", "permuted"}));
  c->add_option("--flags", args.flags, "--python: the function's declared flags (SPEC.md section 5 bits)");
  c->add_option("--flag", args.flag_names,
                "--python: a declared flag by name (repeatable: signed_scales, nondeterministic, fp16_accumulate, "
                "saturates, exact, unit_alpha, mma_accumulate)");
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
  std::vector<std::string> a = {"--format", args.format, "--memory", args.memory};
  for (const std::string& op : args.ops) a.insert(a.end(), {"--op", op});
  for (const std::string& layout : args.sf_layouts) a.insert(a.end(), {"--sf-layout", layout});
  for (const std::string& flag : args.flag_names) a.insert(a.end(), {"--flag", flag});
  if (args.flags) a.insert(a.end(), {"--flags", std::to_string(args.flags)});
  if (args.m_multiple > 1) a.insert(a.end(), {"--m-multiple", std::to_string(args.m_multiple)});
  if (args.n_multiple > 1) a.insert(a.end(), {"--n-multiple", std::to_string(args.n_multiple)});
  if (args.k_multiple > 1) a.insert(a.end(), {"--k-multiple", std::to_string(args.k_multiple)});
  if (args.min_sm > 0) a.insert(a.end(), {"--min-sm", std::to_string(args.min_sm)});
  if (!args.name.empty()) a.insert(a.end(), {"--name", args.name});
  return a;
}

SuiteKernel python_kernel(const PythonArgs& args, double timeout_s) {
  SuiteKernel k;
  const char* env_python = std::getenv("NVFP4_PYTHON");
  const std::string python = !args.python_exe.empty() ? args.python_exe : env_python && *env_python ? env_python : "python3";
  const std::vector<std::string> declared = python_declaration_args(args);
  // What names this function again (the interpreter is the environment's business).
  k.replay_args = {"--python", args.python};
  k.replay_args.insert(k.replay_args.end(), declared.begin(), declared.end());
  k.command.kernel = args.python;
  k.command.argv = {python, "-m", "nvfp4check.worker", args.python};
  k.command.argv.insert(k.command.argv.end(), declared.begin(), declared.end());
  k.command.argv.insert(k.command.argv.end(), {"--timeout", fmt::format("{}", timeout_s), "--serve-fd",
                                               std::to_string(kWorkerChannelFd)});
  // execve needs a path: find the interpreter on PATH here.
  if (k.command.argv[0].find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t start = 0; start <= dirs.size();) {
      const size_t end = std::min(dirs.find(':', start), dirs.size());
      const std::string candidate = dirs.substr(start, end - start) + "/" + k.command.argv[0];
      if (access(candidate.c_str(), X_OK) == 0) {
        k.command.argv[0] = candidate;
        break;
      }
      start = end + 1;
    }
  }
  WorkerExecutor first(k.command, timeout_s);
  k.desc = first.kernel();  // WorkerStartError: the file does not import, or declares nonsense
  k.desc.origin = args.python;
  return k;
}

}  // namespace nvfp4::cli
