// Argument checks shared by the commands: numbers in a sane range with a short message (CLI11's
// own range errors print the bound's 309 digits), seeds as plain unsigned integers, shapes.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/draw/generators.h"

namespace nvfp4::cli {

// A finite number of seconds in (0, max_s]: "nan", "inf", "1e300" and negatives are refused.
CLI::Validator seconds_in_range(double max_s);
// A count in [1, max].
CLI::Validator count_in_range(int64_t max);
// Digits only, below 2^64 ("-1" would otherwise wrap to 2^64 - 1).
CLI::Validator unsigned_seed();

// "MxNxK" or "MxNxKxL" (n = 1 is a GEMV where the kernel has one), for `run --shape`; throws
// std::invalid_argument for a malformed shape or one whose tensors would need more than 1 GiB.
Shape parse_shape(const std::string& text);

// The CPUs this process may run on (its affinity mask: a Slurm task's or taskset's share, not the
// whole machine's), at least 1; the commands' default counts of kernel processes follow it.
unsigned usable_cpus();

// `run`'s kernel processes per GPU (or in all, for host kernels) when --jobs is not given, for
// `cpus` usable CPUs and `gpus` GPUs named by --gpus (0: the environment's one): three quarters
// of the CPUs, shared among the GPUs, at least 2 and at most 12.
int default_run_jobs(unsigned cpus, size_t gpus);

}  // namespace nvfp4::cli
