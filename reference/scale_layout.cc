// Converters between the linear and the permuted (128x4 tile) scale layouts of SPEC.md section 2.
#include "reference/scale_layout.h"

#include <stdexcept>

namespace nvfp4 {

namespace {
void check_dims(int64_t rows, int64_t kb, int64_t l) {
  if (rows < 1 || kb < 1 || l < 1) throw std::invalid_argument("scale layout: rows, kb and l must be >= 1");
}
}  // namespace

std::vector<uint8_t> sf_to_permuted(const uint8_t* linear, int64_t rows, int64_t kb, int64_t l,
                                    uint8_t pad_byte) {
  check_dims(rows, kb, l);
  std::vector<uint8_t> out(static_cast<size_t>(sf_permuted_bytes(rows, kb, l)), pad_byte);
  for (int64_t b = 0; b < l; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t s = 0; s < kb; ++s)
        out[sf_permuted_offset(rows, kb, b, i, s)] = linear[sf_linear_offset(rows, kb, b, i, s)];
  return out;
}

std::vector<uint8_t> sf_to_linear(const uint8_t* permuted, int64_t rows, int64_t kb, int64_t l) {
  check_dims(rows, kb, l);
  std::vector<uint8_t> out(static_cast<size_t>(l * rows * kb));
  for (int64_t b = 0; b < l; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t s = 0; s < kb; ++s)
        out[sf_linear_offset(rows, kb, b, i, s)] = permuted[sf_permuted_offset(rows, kb, b, i, s)];
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
