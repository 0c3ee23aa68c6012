// `nvfp4check merge`: the JSON reports of `run --shard I/N` for I = 0..N-1 joined into the report
// one unsharded run would have written (SPEC.md section 6), per kernel: the verdict, the first
// failure by case index, the case counts, the distribution drawn, the time.
//
// How the counts compare with the unsharded run. An unsharded run stops at its first failure F
// (with one lane: it checked exactly the indices 0..F); shard I stops at ITS first failure F_I,
// the smallest failing index that is I modulo N. So the merged first failure is min over I of F_I
// = F, the same index, case and check; the merged counts are the sums of the shards' (they add
// up exactly) and cover every index below the case limit up to each shard's own F_I: at least
// the unsharded run's indices 0..F, more where a shard went on past F to its own failure. Shards
// bounded by `--cases F+1` check exactly 0..F between them, and their merge then equals the
// unsharded run's report in every count, maximum and distribution (the shard tests check both).
// Without a failure, shards with `--cases C` check indices 0..C-1 between them, like the
// unsharded run with `--cases C`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/engine/report.h"

namespace nvfp4 {

// Bad input to merge (exit 2): a file that is not a run report, reports of different runs, a
// shard missing or given twice. The message names the file.
class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ShardReport {
  std::string path;
  nlohmann::json json;
};
// Reads and parses each file (throws MergeError "PATH: ...").
std::vector<ShardReport> read_shard_reports(const std::vector<std::string>& paths);

// One kernel's entry of a report, read back (throws MergeError for a malformed entry).
KernelReport kernel_report_from_json(const nlohmann::json& entry);

// A shard's first failure of a kernel.
struct ShardFailure {
  int64_t shard = 0;
  FailureRecord failure;
};

struct MergedReport {
  uint64_t seed = 0;
  std::string command;
  std::string build;  // the identity of the build that wrote every shard (harness/engine/run_identity.h)
  int64_t shards = 1;
  std::vector<KernelReport> kernels;  // the failure of each is the earliest by case index
  std::vector<int64_t> failure_shard;  // per kernel: the shard that found it (-1: none)
  std::vector<std::vector<ShardFailure>> shard_failures;  // per kernel: every shard's first failure, by index
};

// Checks that the reports are shards 0..N-1 of one run (one seed, one command, one N, one build,
// the same kernels in the same order from the same plugin files) and that what each says adds
// up: its counts against the command's `--cases` and its share of the indices, its verdict
// against its failures and the `drawn` summary, a failure's case_index in the shard's residue
// class, and its schedule digest (harness/engine/run_identity.h) against its label; then merges them.
// Throws MergeError naming the file and what does not add up.
MergedReport merge_shard_reports(const std::vector<ShardReport>& reports);

// The merged report as JSON: report_json's fields (the failure's "reproduce" as its shard wrote
// it), plus "merged_shards": N and, per kernel, "shard_failures" and the failure's "shard".
nlohmann::json merged_report_json(const MergedReport& merged);

}  // namespace nvfp4
