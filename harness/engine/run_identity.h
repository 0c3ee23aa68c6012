// What identifies a run's work in its report, so that `merge` can tell shards of one campaign
// from files that only claim to be: the build of the program, each kernel's plugin file, and a
// digest of the schedule cases a shard's counts say it walked.
#pragma once

#include <cstdint>
#include <string>

#include "harness/draw/shard.h"

namespace nvfp4 {

// "fnv1a64:" and 16 hex digits of the FNV-1a hash (reference/stable_hash.h) of the file's bytes;
// empty when the file cannot be read.
std::string file_identity(const std::string& path);
// The identity of a kernel's origin: empty for "builtin" (the build says it), else that of the
// plugin file, or of the Python file of "FILE:FUNCTION" (empty when it cannot be read).
std::string origin_identity(const std::string& origin);
// The identity of the running program's executable, read once.
const std::string& program_identity();

// The cases a shard's counts say it walked, as 16 hex digits: a hash of `walked` and the case
// seeds (schedule_case_seed) of the first and the last of the shard's first `walked` indices I,
// I+N, ... A run walks exactly those indices in order (with `--seconds` and several lanes the
// last few may differ; the digest is of the indices the counts claim). It depends on the seed,
// the kernel and the shard's index, so another shard's report or edited counts do not match it;
// it costs the same however many cases there were.
std::string schedule_digest(uint64_t seed, const std::string& kernel_name, const Shard& shard, int64_t walked);

}  // namespace nvfp4
