// `--shard I/N` (see shard.h).
#include "harness/draw/shard.h"

#include <cctype>
#include <stdexcept>

namespace nvfp4 {
namespace {

// Digits only, at most 7 of them (N <= 2^20 fits; the schedule's indices then stay far from
// int64's end however long the run).
bool whole_number(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 7) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  *out = std::stoll(s);
  return true;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  const std::string shown = "--shard " + text.substr(0, 40);
  const size_t slash = text.find('/');
  Shard s;
  if (slash == std::string::npos || !whole_number(text.substr(0, slash), &s.index) ||
      !whole_number(text.substr(slash + 1), &s.count))
    throw std::invalid_argument(shown + ": expected I/N, two whole numbers (e.g. 0/4)");
  if (s.count < 1 || s.count > (int64_t(1) << 20))
    throw std::invalid_argument(shown + ": N must be in [1, 1048576]");
  if (s.index >= s.count) throw std::invalid_argument(shown + ": I must be in [0, N)");
  return s;
}

}  // namespace nvfp4
