// The stable 64-bit hashes of the project: FNV-1a of text: names saved case files by their content and
// derives per-kernel and per-case seeds, the same on every machine and compiler.
#pragma once

#include <cstdint>
#include <string_view>

namespace nvfp4 {

inline uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;  // the FNV-1a 64 offset basis (14695981039346656037)
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 0x100000001b3ull;  // the FNV-1a 64 prime
  }
  return h;
}

// The splitmix64 finaliser of x + the golden ratio: mixes a counter or a combination of seeds into
// a well-spread 64-bit seed (case seeds of the schedule and of mutation analysis, the probe's
// generator).
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace nvfp4
