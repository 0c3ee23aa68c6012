// The two scale-factor layouts of SPEC.md section 2: linear ([l][rows][kb]) and the permuted
// 128x4 tiles of cuBLASLt / CUTLASS block-scaled MMA, physically [l][Rt][Kt][32][4][4].
#pragma once

#include <cstdint>
#include <vector>

#include "reference/formats.h"  // NVFP4_HD

namespace nvfp4 {

NVFP4_HD inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Offset of the scale of (batch b, row i, block s) in the linear layout.
NVFP4_HD inline int64_t sf_linear_offset(int64_t rows, int64_t kb, int64_t b, int64_t i, int64_t s) {
  return (b * rows + i) * kb + s;
}

// Offset in the permuted layout: a 128-row x 4-block tile holds 512 bytes; inside it row i sits
// at (i % 32) * 16 + ((i % 128) / 32) * 4 and block s at s % 4.
NVFP4_HD inline int64_t sf_permuted_offset(int64_t rows, int64_t kb, int64_t b, int64_t i, int64_t s) {
  const int64_t rt = ceil_div(rows, 128), kt = ceil_div(kb, 4);
  return ((b * rt + i / 128) * kt + s / 4) * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 + s % 4;
}

// Bytes of the permuted layout for l batches of rows x kb scales, padding included.
inline int64_t sf_permuted_bytes(int64_t rows, int64_t kb, int64_t l) {
  return l * ceil_div(rows, 128) * ceil_div(kb, 4) * 512;
}

// Linear -> permuted; padding cells (row >= rows or block >= kb) get pad_byte.
std::vector<uint8_t> sf_to_permuted(const uint8_t* linear, int64_t rows, int64_t kb, int64_t l,
                                    uint8_t pad_byte);
// Permuted -> linear (padding dropped).
std::vector<uint8_t> sf_to_linear(const uint8_t* permuted, int64_t rows, int64_t kb, int64_t l);
// True for the permuted offsets that are padding.
std::vector<bool> sf_permuted_padding_mask(int64_t rows, int64_t kb, int64_t l);

}  // namespace nvfp4
