// A Python callable as a kernel, for `run --python` and `replay --python`: its process is Python's
// nvfp4check worker, serving the function over the same protocol as the program's own workers,
// with the declarations a plugin's info would carry (SPEC.md section 7: the adapter keeps them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/engine/suite.h"

namespace nvfp4::cli {

struct PythonArgs {
  std::string python;  // FILE[:FUNCTION]
  std::string format = "canonical", memory = "cuda", python_exe, name;
  std::vector<std::string> ops, sf_layouts, flag_names;  // the declared ops (default gemv), layouts, flags
  uint32_t flags = 0, m_multiple = 1, n_multiple = 1, k_multiple = 1, min_sm = 0;
  uint32_t max_groups = 0;  // grouped GEMM: the most groups per call, 0 = no limit
  // A GPU MODE problem (nvfp4_gemv, nvfp4_gemm, nvfp4_dual_gemm, nvfp4_group_gemm): format gpumode, its op and task.yml's multiples
  // (a multiple above 1 given here overrides its).
  std::string problem;
  std::string stream = "current";   // torch's current stream during the call: or "legacy"
  std::vector<std::string> out_types;
  // Revision 4: a quantizer's input types, recipes and output formats (--format F besides
  // canonical/gpumode), and the operand formats of a GEMM.
  std::vector<std::string> in_types, recipes, q_formats, a_formats, b_formats;
  std::vector<std::string> format_words;  // --format as given (split into format and q_formats)
  double warmup_timeout_s = 900;    // the warm-up call of each kernel process (harness/process/warmup.h)
  bool format_given = false;
};

// The options that say which function, how it is called and what it declares, shared by run and
// replay. with_op: also --op (replay's; run's --op is its own, and declares the op it names).
void add_python_options(CLI::App* command, PythonArgs& args, bool with_op);

// The worker's arguments for these declarations (also what names the kernel again).
std::vector<std::string> python_declaration_args(const PythonArgs& args);

// The kernel, its info from its first start (importing the file, which also shows a file that
// does not import as bad input: WorkerStartError), and the arguments that name it again.
SuiteKernel python_kernel(const PythonArgs& args, double timeout_s);

// Whether any declaration was given, for commands without --python (a plugin declares for itself).
bool declares_anything(const PythonArgs& args);

// For a CUDA function: a listener that runs a determinism, stale-state, unwritten-output or oracle
// failure once more with torch's current stream the other one (SPEC.md section 7, "Streams") and
// says in the failure when that passes, and which ordering is missing. nullptr for a host function.
std::unique_ptr<SuiteListener> other_stream_listener(const SuiteKernel& kernel, const PythonArgs& args,
                                                     double timeout_s, const std::string& case_dir);

}  // namespace nvfp4::cli
