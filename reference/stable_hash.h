// The one stable 64-bit hash of the project (FNV-1a): names saved case files by their content and
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

}  // namespace nvfp4
