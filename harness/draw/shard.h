// A share of one schedule (SPEC.md section 6, `run --shard I/N`): shard I of N checks the cases
// whose index is I modulo N, so N machines split one schedule with no coordination (case i is a
// pure function of the seed, the kernel and i). The k-th case a shard takes is index I + k*N.
#pragma once

#include <cstdint>
#include <string>

namespace nvfp4 {

struct Shard {
  int64_t index = 0;  // I, in [0, count)
  int64_t count = 1;  // N >= 1; 1 is the whole schedule
  bool sharded() const { return count > 1; }
  // The schedule index of this shard's k-th case.
  int64_t case_index(int64_t k) const { return index + k * count; }
  // How many of the indices below `limit` are this shard's.
  int64_t cases_below(int64_t limit) const { return limit > index ? (limit - index + count - 1) / count : 0; }
};

// "I/N" with 0 <= I < N and 1 <= N <= 2^20; throws std::invalid_argument naming what is wrong.
Shard parse_shard(const std::string& text);

}  // namespace nvfp4
