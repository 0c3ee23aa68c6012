#include "harness/process/tensor_rotation.h"

#include <cstring>

namespace nvfp4 {
namespace {

void copy_xor(uint8_t* to, const uint8_t* from, int64_t size, uint8_t flip) {
  if (size <= 0) return;
  if (flip == 0) {
    std::memcpy(to, from, static_cast<size_t>(size));
    return;
  }
  for (int64_t x = 0; x < size; ++x) to[x] = from[x] ^ flip;
}

}  // namespace

TensorRotation undoing(TensorRotation t) {
  const auto back = [](int64_t by, int64_t count) { return count > 0 ? (count - by % count) % count : int64_t{0}; };
  t.blocks_by = t.blocks >= 2 ? back(t.blocks_by, t.blocks) : 0;
  t.rows_by = back(t.rows_by, t.rows);
  t.batches_by = back(t.batches_by, t.l);
  return t;
}

void copy_rotated(const uint8_t* from, const TensorRotation& t, uint8_t* to) {
  each_rotated_run(t, [&](int64_t at, int64_t source, int64_t count) { copy_xor(to + at, from + source, count, t.flip); });
}

}  // namespace nvfp4
