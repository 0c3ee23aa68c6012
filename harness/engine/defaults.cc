// Defaults and shared diagnoses (see defaults.h).
#include "harness/engine/defaults.h"

#include <chrono>

#include <fmt/format.h>

namespace nvfp4 {

uint64_t clock_seed() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

uint64_t seed_or_clock(const std::optional<uint64_t>& given, const std::string& repeat) {
  if (given) return *given;
  const uint64_t seed = clock_seed();
  fmt::print(stderr, "nvfp4check: seed from the clock: {} (repeat with {}{})\n", seed, repeat, seed);
  return seed;
}

std::string other_stream(const std::string& mine) { return mine == "legacy" ? "current" : "legacy"; }

// The stream check names the other stream already; the run the other way says which ordering of
// torch's is missing (a kernel on the legacy default stream whose output the runner's uploads
// overwrote is found by it as well as by unwritten-output).
bool stream_explainable(Check c) {
  return c == Check::determinism || c == Check::stale_state || c == Check::unwritten_output || c == Check::oracle ||
         c == Check::stream;
}

std::string other_stream_note(Check c, const std::string& mine, const std::string& rerun) {
  const std::string missing =
      mine == "legacy"
          ? "work the function put on a stream of its own or the runner's is not ordered after the work it put on "
            "the legacy default stream, torch's current stream there: make one stream wait for the other"
          : "work the function put on the legacy default stream (a <<<grid, block>>> launch without a stream, raw "
            "stream 0) is not ordered after the work it put on torch's current stream, the runner's (a .contiguous() "
            "or a copy of an input): launch on torch.cuda.current_stream() or make one stream wait for the other. "
            "GPU MODE's harness runs everything on the legacy stream, where this passes";
  return fmt::format("the same case, run again with {}, passed: {}{}", rerun,
                     c == Check::oracle ? "the wrong values come from a race between two streams; " : "", missing);
}

}  // namespace nvfp4
