// Small block-format problems (any pair of SPEC's four formats) for the kernels' unit tests, as
// the exact MX reference takes them: finite random elements, and E8M0 scales whose exponents are
// pairwise distinct along each row of blocks, so that a scale read from the wrong block always
// changes the result (equal exponents would cancel such a misread). Optionally the extreme E8M0
// bytes (0x00 = 2^-127 against 0xFE = 2^127) and a NaN scale. Test-only.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "reference/exact_mx.h"
#include "reference/scale_layout.h"

namespace nvfp4 {

constexpr BlockFormat kAllBlockFormats[] = {BlockFormat::nvfp4, BlockFormat::mxfp4, BlockFormat::mxfp8_e4m3,
                                            BlockFormat::mxfp8_e5m2};

// A random finite element byte (E2M1 bytes hold two elements, all finite).
inline uint8_t finite_element_byte(BlockFormat f, uint8_t v) {
  if (f == BlockFormat::mxfp8_e4m3 && (v & 0x7Fu) == 0x7Fu) return static_cast<uint8_t>(v ^ 1u);      // NaN -> 448
  if (f == BlockFormat::mxfp8_e5m2 && (v & 0x7Cu) == 0x7Cu) return static_cast<uint8_t>(v ^ 0x04u);   // Inf/NaN -> finite
  return v;
}

// Scale of (batch b, row r, block s): E8M0 exponents 2^-20 .. 2^20, distinct along a row for
// up to 41 blocks; NVFP4 E4M3 scales 0.5, 1 or 2.
inline uint8_t test_scale(BlockFormat f, std::mt19937_64& rng, int64_t b, int64_t r, int64_t s, int salt) {
  if (f == BlockFormat::nvfp4) {
    const uint8_t e4m3[3] = {0x30, 0x38, 0x40};
    return e4m3[rng() % 3];
  }
  return static_cast<uint8_t>(127 - 20 + (s * 7 + r * 3 + b * 5 + salt) % 41);
}

inline void fill_operand(MxOperand& o, BlockFormat f, int64_t rows, int64_t k, int64_t l, std::mt19937_64& rng, int salt) {
  o.format = f;
  o.rows = rows, o.k = k, o.l = l;
  o.data.resize(static_cast<size_t>(o.data_bytes()));
  for (auto& v : o.data) v = finite_element_byte(f, static_cast<uint8_t>(rng()));
  o.scales.resize(static_cast<size_t>(o.scale_bytes()));
  for (int64_t b = 0; b < l; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t s = 0; s < o.kb(); ++s) o.scales[(b * rows + r) * o.kb() + s] = test_scale(f, rng, b, r, s, salt);
}

struct MxTestOptions {
  bool extremes = false;  // A row 0 block 0 = 0x00, B row 0 block 0 = 0xFE (MX operands)
  bool nan_scale = false;  // A's last row, last block: 0xFF (an MX A)
};

inline MxProblem random_mx_problem(std::mt19937_64& rng, BlockFormat fa, BlockFormat fb, Op op, int64_t m, int64_t n,
                                   int64_t k, int64_t l, OutType out, MxTestOptions opt = {}) {
  MxProblem p;
  p.op = op;
  p.m = m, p.n = n, p.k = k, p.l = l;
  p.out_type = out;
  fill_operand(p.a, fa, m, k, l, rng, 0);
  fill_operand(p.b, fb, n, k, l, rng, 11);
  if (opt.extremes && fa != BlockFormat::nvfp4 && fb != BlockFormat::nvfp4) {
    p.a.scales[0] = 0x00;
    p.b.scales[0] = 0xFE;
  }
  if (opt.nan_scale && fa != BlockFormat::nvfp4) p.a.scales[static_cast<size_t>(m * p.a.kb() - 1)] = 0xFF;
  return p;
}

// An operand's scales in `layout` (SPEC section 2), permuted padding filled with the format's NaN.
inline std::vector<uint8_t> scales_in_layout(const MxOperand& o, uint32_t layout) {
  if (layout == NVFP4_SF_LINEAR) return o.scales;
  return sf_to_permuted(o.scales.data(), o.rows, o.kb(), o.l, o.format == BlockFormat::nvfp4 ? 0x7F : 0xFF);
}

}  // namespace nvfp4
