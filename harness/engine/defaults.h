// What a run does when it is not told, and the diagnoses every front end words the same way: the
// program (`nvfp4check run`), the C API and through it Python's nc.check read them from here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "harness/judge/checks.h"

namespace nvfp4 {

// The run's length when neither cases nor seconds are given, for all its kernels together: long
// enough that a pass means something for one kernel (`run --python`, nc.check) and for the main
// job's every kernel.
inline constexpr double kDefaultRunSeconds = 60;
// Where failing cases (and every case, while it runs) are saved.
inline constexpr const char* kDefaultCaseDir = "nvfp4check-cases";

// A seed from the clock (nanoseconds), for a run, a pytest session or a campaign that was given none.
uint64_t clock_seed();
// The run's seed: `given`, else one from the clock, told on stderr with how to repeat the run
// (`repeat` and the seed, e.g. "--seed " or "seed=").
uint64_t seed_or_clock(const std::optional<uint64_t>& given, const std::string& repeat);

// The other value of a Python CUDA kernel's stream option ("current" <-> "legacy").
std::string other_stream(const std::string& mine);
// Whether a failure of check c can come from work on two unordered streams, so that a second run
// of the case with the other stream is worth its time. Besides the three checks that look for it
// (a second run, stale data, the poison left), the oracle: a kernel reading an input another
// stream is still writing shows the race first as wrong values.
bool stream_explainable(Check c);
// The note for a failure of check c on stream `mine` whose case passed when run again the other
// way; `rerun` is that run as the reader would ask for it ("--stream legacy", "stream='legacy'").
std::string other_stream_note(Check c, const std::string& mine, const std::string& rerun);

}  // namespace nvfp4
