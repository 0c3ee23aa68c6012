// Converters between the linear and the permuted (128x4 tile) scale layouts of SPEC.md section 2.
#include "reference/scale_layout.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace nvfp4 {

namespace {
void check_dims(int64_t rows, int64_t kb, int64_t l) {
  if (rows < 1 || kb < 1 || l < 1) throw std::invalid_argument("scale layout: rows, kb and l must be >= 1");
}

// Blocks 4t .. 4t+3 of a row are 4 consecutive bytes in both layouts (sf_permuted_offset: s % 4
// last), so a row moves 4 bytes at a time from offsets computed once per row: a GEMV's scales are
// laid out for every call, and a byte at a time with the full offset formula cost a quarter of a
// millisecond for 256 KiB. `to_permuted` picks the direction.
template <bool to_permuted>
void move_rows(const uint8_t* from, uint8_t* to, int64_t rows, int64_t kb, int64_t l) {
  for (int64_t b = 0; b < l; ++b)
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t lin = sf_linear_offset(rows, kb, b, i, 0), perm = sf_permuted_offset(rows, kb, b, i, 0);
      for (int64_t s = 0; s < kb; s += 4) {  // the next 128x4 tile: 512 bytes on
        const size_t bytes = static_cast<size_t>(std::min<int64_t>(4, kb - s));
        if (to_permuted)
          std::memcpy(to + perm + 128 * s, from + lin + s, bytes);
        else
          std::memcpy(to + lin + s, from + perm + 128 * s, bytes);
      }
    }
}
}  // namespace

std::vector<uint8_t> sf_to_permuted(const uint8_t* linear, int64_t rows, int64_t kb, int64_t l,
                                    uint8_t pad_byte) {
  check_dims(rows, kb, l);
  std::vector<uint8_t> out(static_cast<size_t>(sf_permuted_bytes(rows, kb, l)), pad_byte);
  move_rows<true>(linear, out.data(), rows, kb, l);
  return out;
}

std::vector<uint8_t> sf_to_linear(const uint8_t* permuted, int64_t rows, int64_t kb, int64_t l) {
  check_dims(rows, kb, l);
  std::vector<uint8_t> out(static_cast<size_t>(l * rows * kb));
  move_rows<false>(permuted, out.data(), rows, kb, l);
  return out;
}

std::vector<bool> sf_permuted_padding_mask(int64_t rows, int64_t kb, int64_t l) {
  check_dims(rows, kb, l);
  std::vector<bool> padding(static_cast<size_t>(sf_permuted_bytes(rows, kb, l)), true);
  for (int64_t b = 0; b < l; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t s = 0; s < kb; ++s) padding[sf_permuted_offset(rows, kb, b, i, s)] = false;
  return padding;
}

}  // namespace nvfp4
