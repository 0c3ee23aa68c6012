// `nvfp4check replay FILE...`: saved cases (and binary fuzz inputs, through the decoder of
// harness/case_input.h) against kernels, with every check of `run`, each kernel in its own worker.
#include <unistd.h>

#include <memory>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "fuzz/fuzz_problem.h"
#include "harness/case_input.h"
#include "harness/check_session.h"
#include "kernels/registry.h"
#include "reference/case_file.h"
#include "reference/oracle.h"

namespace nvfp4::cli {
namespace {

struct ReplayArgs {
  std::vector<std::string> files, plugins, kernels;
  std::string report, case_dir = "nvfp4check-cases", policy;
  double timeout_s = 30;
};

struct Input {
  std::string path;
  bool binary = false;
  Problem problem;  // text inputs only: op and layout pick the default kernels
};

int replay_main(const ReplayArgs& args) {
  if (!args.policy.empty()) Policy::parse(args.policy);  // a bad name is a usage error
  // Every input is read here first, so a bad file is a usage error (exit 2) before anything runs.
  std::vector<Input> inputs;
  for (const std::string& path : args.files) {
    Input in;
    in.path = path;
    in.binary = is_binary_case_input(path);
    if (in.binary) {
      // Binary inputs are fitted to each kernel by the decoder, so they apply to every kernel.
      if (!have_binary_case_decoder())
        throw CaseError(path + ": not a case file (it holds control bytes) and no binary decoder is installed");
    } else {
      in.problem = read_case_file(path);
    }
    inputs.push_back(in);
  }

  Registry registry = Registry::with_builtins();
  for (const std::string& plugin : args.plugins) registry.load_plugin(plugin);
  const bool named = !args.kernels.empty();
  const std::vector<const Kernel*> selected = registry.select(args.kernels);

  std::vector<SessionKernel> jobs;
  for (const Kernel* k : selected) {
    SessionKernel sk;
    sk.job.kernel = k->name();
    sk.job.origin = k->origin;
    sk.job.timeout_s = args.timeout_s;
    sk.job.argv = {self_executable(), "worker", "--kernel", k->name(), "--mode", "replay",
                   "--case-dir", args.case_dir, "--timeout", fmt::format("{}", args.timeout_s)};
    for (const std::string& p : args.plugins) sk.job.argv.insert(sk.job.argv.end(), {"--plugin", p});
    if (!args.policy.empty()) sk.job.argv.insert(sk.job.argv.end(), {"--policy", args.policy});
    // A named kernel gets every input (one outside its constraints checks its UNSUPPORTED path);
    // by default a kernel gets the inputs of an op and layout it declares.
    for (const Input& in : inputs)
      if (named || in.binary ||
          (k->supports_op(static_cast<uint32_t>(in.problem.op)) &&
           k->supports_layout(static_cast<uint32_t>(in.problem.sf_layout))))
        sk.job.inputs.push_back(in.path);
    if (sk.job.inputs.empty()) continue;  // nothing here applies to this kernel
    sk.planned_inputs = static_cast<int64_t>(sk.job.inputs.size());
    jobs.push_back(sk);
  }
  if (jobs.empty()) throw std::invalid_argument("no kernel declares the op and scale layout of these inputs");

  SessionOptions session;
  session.report_path = args.report;
  session.command_line = "nvfp4check replay";
  for (const std::string& f : args.files) session.command_line += " " + f;
  session.progress_bar = isatty(2) != 0;
  return run_session(std::move(jobs), session);
}

}  // namespace

void add_replay_command(CLI::App& app, int& exit_code) {
  // Binary inputs are the kernel fuzzer's encoding. Installed here, at start-up, so the worker
  // processes replay starts (this same program) decode them too.
  set_binary_case_decoder(decode_fuzz_case);
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* replay = app.add_subcommand("replay", "Run saved case files (or binary fuzz inputs) against kernels");
  replay->add_option("files", args->files, "Case files or binary fuzz inputs")->required();
  replay->add_option("--plugin", args->plugins, "Shared library exporting the nvfp4 kernel ABI (repeatable)");
  replay->add_option("--kernel", args->kernels,
                     "Kernel to check (repeatable; default: every runnable kernel declaring the input's op and layout)");
  replay->add_option("--report", args->report, "Write the JSON report here");
  replay->add_option("--case-dir", args->case_dir, "Where error maps and stale-state cases of failures go");
  replay->add_option("--policy", args->policy,
                     "Judge with this oracle policy instead of the one the kernel's flags call for");
  replay->add_option("--timeout", args->timeout_s, "Watchdog: seconds one kernel call may take (default 30)")
      ->check(CLI::PositiveNumber);
  replay->callback([args, &exit_code] {
    try {
      exit_code = replay_main(*args);
    } catch (const std::exception& e) {
      // A bad input file, plugin or kernel name, or a report that cannot be written.
      fmt::print(stderr, "nvfp4check replay: {}\n", e.what());
      exit_code = 2;
    }
  });
}

}  // namespace nvfp4::cli
