// Converters between the linear and the permuted (128x4 tile) scale layouts of SPEC.md section 2.
#include "reference/scale_layout.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace nvfp4 {

namespace {
void check_dims(int64_t rows, int64_t kb, int64_t l) {
  if (rows < 1 || kb < 1 || l < 1) throw std::invalid_argument("scale layout: rows, kb and l must be >= 1");
}

// Blocks 4t .. 4t+3 of a row are 4 consecutive bytes in both layouts (sf_permuted_offset: s % 4
// last), so they move 4 bytes at a time. The loops go tile by tile (128 rows x 4 blocks, 512
// consecutive bytes of the permuted layout), each tile's rows in turn: the permuted side is then
// read or written in order and the linear side's 128 rows stay in the first-level cache across a
// row's tiles. Row by row, every 4 bytes landed on another tile 512 bytes on, and a GEMV's 256 KiB
// of scales took three times as long (they are laid out for every call). `to_permuted` picks the
// direction.
template <bool to_permuted>
void move_rows(const uint8_t* from, uint8_t* to, int64_t rows, int64_t kb, int64_t l) {
  // Where each of a tile's 128 rows begins inside it (the same in every tile), filled once: on
  // every call it cost about a third of a small case's layout.
  static const std::array<int64_t, 128> in_tile = [] {
    std::array<int64_t, 128> t{};
    for (int64_t i = 0; i < 128; ++i) t[static_cast<size_t>(i)] = sf_permuted_offset(128, 4, 0, i, 0);
    return t;
  }();
  for (int64_t b = 0; b < l; ++b)
    for (int64_t r0 = 0; r0 < rows; r0 += 128) {
      const int64_t tile_rows = std::min<int64_t>(128, rows - r0);
      const int64_t lin0 = sf_linear_offset(rows, kb, b, r0, 0);
      for (int64_t s = 0; s < kb; s += 4) {  // the next tile: 512 bytes on
        const int64_t perm0 = sf_permuted_offset(rows, kb, b, r0, s), bytes = std::min<int64_t>(4, kb - s);
        const auto move = [&](auto size) {  // a constant 4 for every tile but a short last one
          for (int64_t i = 0; i < tile_rows; ++i) {
            const int64_t perm = perm0 + in_tile[static_cast<size_t>(i)], lin = lin0 + i * kb + s;
            if (to_permuted)
              std::memcpy(to + perm, from + lin, static_cast<size_t>(size));
            else
              std::memcpy(to + lin, from + perm, static_cast<size_t>(size));
          }
        };
        if (bytes == 4)
          move(std::integral_constant<size_t, 4>{});
        else
          move(static_cast<size_t>(bytes));
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
