// Mutation analysis: how many of the mutant kernels' bugs each way of checking finds. Three
// checks judge the same kernel, each called in a worker process like `run` does: this suite (the
// core's one schedule, exactly `run`'s cases, through check_case), a GPU MODE style check (their
// input distributions, allclose 1e-3, no poison or guards) and a KernelBench style check (five
// random inputs, allclose 1e-2). Honest kernels go through the same suite check, where any
// failure is a false alarm.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/process/executor.h"
#include "harness/draw/generators.h"
#include "harness/draw/schedule.h"

namespace nvfp4 {

// What one check concluded about one kernel.
struct CheckOutcome {
  bool ran = false;     // false: not run (the kernel cannot run here, or the check was off)
  bool failed = false;  // the kernel failed (a mutant killed; for an honest kernel, a false alarm)
  std::string check;    // which check failed ("oracle", "guard", ..., "allclose", "returned-error")
  int64_t cases = 0;    // cases run, up to and including the failing one
  double seconds = 0;
  std::string message;    // what failed, one paragraph
  std::string case_desc;  // the failing case: op, shape, layout, data distribution, case seed
  std::string case_file;  // the saved case, when the suite saved one
};

struct MutationOptions {
  uint64_t seed = 1;
  int64_t budget = 200;       // suite cases per kernel, at most
  int64_t weak_cases = 200;   // GPU MODE style cases per kernel, at most (KernelBench: always 5)
  bool weak_checks = true;    // run the two weaker checks as well
  // The schedule's shapes: `run`'s (small class and its large tail) unless small_shapes.
  bool small_shapes = false;
  // Judge every kernel as if it declared NVFP4_FLAG_MMA_ACCUMULATE (the matrix-unit model):
  // how many bugs the looser rule lets through.
  bool as_matrix_unit = false;
  std::string case_dir = "nvfp4check-cases/mutants";
  double timeout_s = kDefaultCallTimeout;
  // Called with a line of progress (kernel started, verdict); may be empty.
  std::function<void(const std::string&)> progress;
};

// The seed of case `index` of a weak check: every case is reproducible on its own.
uint64_t mutation_case_seed(uint64_t seed, const std::string& kernel, const std::string& check, int64_t index);

// Empty when the core's schedule draws cases for this kernel, else why not (it declares only ops
// or output types the schedule does not draw yet): such a mutant or honest kernel is reported
// as one that cannot run, not as killed or passing.
std::string unschedulable(const KernelDesc& kernel);

// The suite: cases 0 .. cases-1 of the core's schedule (the same cases `run --seed S` draws for
// this kernel), through check_case; stops at the first failure.
CheckOutcome suite_check(Executor& executor, const MutationOptions& options, int64_t cases);

// GPU MODE style inputs (their nvfp4_gemv generator): A and B bytes uniform in [0, 4) (low nibble
// codes 0-3 = 0, 0.5, 1, 1.5; high nibble 0), scales the E4M3 VALUES 0, 1 and 2 (bytes 0x00, 0x38,
// 0x40: torch.randint(0, 3).to(float8_e4m3fn) converts values, not bits), alpha 1, m and n
// multiples of 128 (n = 1 for GEMV), k a multiple of 64, l in 1-4, the permuted layout when the
// kernel has it.
Problem gpu_mode_problem(Rng& rng, Op op, const nvfp4_kernel_info& info);
// KernelBench style inputs: one fixed shape per op (GEMV 1024 x 1024, GEMM 256 x 128 x 512),
// every byte of A and B uniform (all 16 codes), scales |N(0,1)| rounded to E4M3, alpha 1.
Problem kernelbench_problem(Rng& rng, Op op, const nvfp4_kernel_info& info);

// The weaker checks: each case run once on unpoisoned buffers (C zeroed, permuted padding zero,
// guards never looked at), the whole device synchronised afterwards (as torch.cuda.synchronize()
// does), and the output compared with allclose against the exact reference. A kernel that
// returns anything but NVFP4_OK fails (their harnesses raise).
CheckOutcome gpu_mode_check(Executor& executor, const MutationOptions& options, int64_t cases);
CheckOutcome kernelbench_check(Executor& executor, const MutationOptions& options);

// One row of the kill table.
struct MutantRow {
  std::string name, description, memory;
  bool runnable = true;
  std::string why_not;  // when not runnable
  CheckOutcome suite, gpu_mode, kernelbench;
};

// One honest kernel (or mutant-engine control): cases run and false alarms (0 or 1: it stops at
// the first, which comes with the failing case).
struct HonestRow {
  std::string name, memory;
  bool runnable = true;
  std::string why_not;
  CheckOutcome suite;
};

MutantRow analyse_mutant(Executor& executor, const MutationOptions& options);
HonestRow run_honest(Executor& executor, int64_t cases, const MutationOptions& options);

// The table people read: per mutant, killed or not, by which check, cases and seconds, for the
// suite and both weaker checks side by side; then totals.
std::string kill_table(const std::vector<MutantRow>& rows);
std::string honest_table(const std::vector<HonestRow>& rows);

// A whole analysis, as `nvfp4check mutants` runs it: the kernels of both plugins (listed in a
// child process), each in its own worker process; prints the kill table and the honest table.
struct MutationRun {
  MutationOptions options;
  std::string mutant_plugin, honest_plugin, report, command_line;
  std::string junit;                 // JUnit XML: a test case per mutant (killed passes) and honest kernel
  std::string memory = "all";        // host, cuda or all
  std::vector<std::string> kernels;  // only these (empty: all)
  int64_t honest_cases = 200;
  bool honest_only = false;
  int jobs = 1;  // kernels checked side by side, each in a worker process of its own
};
// 0 when every mutant that could run was killed and no honest kernel failed, 1 otherwise, 2 for
// bad plugins or names or an unwritable report.
int run_mutation_analysis(const MutationRun& run);

nlohmann::json mutation_report_json(const MutationOptions& options, const std::vector<MutantRow>& mutants,
                                    const std::vector<HonestRow>& honest, const std::string& command);

}  // namespace nvfp4
