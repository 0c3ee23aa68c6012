// A Python callable as a kernel, for `run --python` and `replay --python`: its process is Python's
// nvfp4check worker, serving the function over the same protocol as the program's own workers,
// with the declarations a plugin's info would carry (SPEC.md section 7: the adapter keeps them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/suite.h"

namespace nvfp4::cli {

struct PythonArgs {
  std::string python;  // FILE[:FUNCTION]
  std::string format = "canonical", memory = "cuda", python_exe, name;
  std::vector<std::string> ops, sf_layouts, flag_names;  // the declared ops (default gemv), layouts, flags
  uint32_t flags = 0, m_multiple = 1, n_multiple = 1, k_multiple = 1, min_sm = 0;
};

// The options that say which function, how it is called and what it declares, shared by run and
// replay. with_op: also --op (replay's; run's --op is its own, and declares the op it names).
void add_python_options(CLI::App* command, PythonArgs& args, bool with_op);

// The worker's arguments for these declarations (also what names the kernel again).
std::vector<std::string> python_declaration_args(const PythonArgs& args);

// The kernel, its info from its first start (importing the file, which also shows a file that
// does not import as bad input: WorkerStartError), and the arguments that name it again.
SuiteKernel python_kernel(const PythonArgs& args, double timeout_s);

}  // namespace nvfp4::cli
