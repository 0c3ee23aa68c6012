// One `run` or `replay` from the parent's side: each kernel's job in its own workers, progress on
// stderr, failures as they come, the summary table, the JSON report and the exit code.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/worker_process.h"

namespace nvfp4 {

struct SessionKernel {
  WorkerJob job;
  std::string skip_reason;  // not empty: reported as skipped without starting a worker
  int64_t planned_inputs = 0;  // replay: the inputs, for the progress display
};

struct SessionOptions {
  std::optional<uint64_t> seed;
  std::string report_path;   // "" = no JSON report
  std::string command_line;  // recorded in the report
  // Total time for `run` (0 = no limit): each kernel gets an equal share of what is left when it
  // starts, so the time of kernels that are skipped or finish early goes to the others. The
  // share is passed to its worker as "--seconds S".
  double total_seconds = 0;
  bool progress_bar = false;  // a redrawn bar (stderr is a terminal) instead of plain lines
  bool print_stages = false;  // after the table, each kernel's time by step (KernelReport::stage_seconds)
};

// Runs every kernel's job in order and returns the exit code: 0 all passed or skipped, 1 a kernel
// failed a check. Throws WorkerUsageError for bad input a worker found (the command exits 2).
int run_session(std::vector<SessionKernel> kernels, const SessionOptions& options);

}  // namespace nvfp4
