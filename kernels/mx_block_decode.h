// What a built-in kernel needs to read operands of any of SPEC.md's four block formats (section
// 1, revision 4): nvfp4 (E2M1, E4M3 scales, blocks of 16), mxfp4 (E2M1, E8M0, 32), mxfp8_e4m3 and
// mxfp8_e5m2 (one byte per element, E8M0, 32). Host and device; the kernels' own copy of the
// formats, like block_scaled_decode.h (kernels never include reference/).
//
// A scale is kept as mant * 2^exp: mant is 1 (or NaN) for E8M0 and the E4M3 value for NVFP4, so
// a kernel can apply two E8M0 scales as one exact power of two (ldexpf) without forming 2^-254
// or 2^254 in FP32, where the product of two E8M0 scales underflows or overflows.
#pragma once

#include <stdint.h>

#include "kernels/block_scaled_decode.h"

namespace nvfp4::kern {

NVFP4_KERNEL_HD uint32_t format_or_nvfp4(uint32_t format) { return format == 0 ? uint32_t{NVFP4_FORMAT_NVFP4} : format; }

NVFP4_KERNEL_HD bool packs_nibbles(uint32_t format) {
  return format_or_nvfp4(format) == NVFP4_FORMAT_NVFP4 || format == NVFP4_FORMAT_MXFP4;
}

// Elements per scale: 16 for NVFP4, 32 for the MX formats.
NVFP4_KERNEL_HD int64_t format_block(uint32_t format) { return format_or_nvfp4(format) == NVFP4_FORMAT_NVFP4 ? 16 : 32; }

// Bytes of one row of k elements.
NVFP4_KERNEL_HD int64_t format_row_bytes(uint32_t format, int64_t k) { return packs_nibbles(format) ? k / 2 : k; }

// E5M2 `s eeeee mm`, bias 15: exponent field 0 is the subnormal m * 2^-16, field 31 is Inf
// (m = 0) or NaN; otherwise float exponent e - 15 + 127 with the two mantissa bits on top.
NVFP4_KERNEL_HD float e5m2_to_float(uint32_t byte) {
  const uint32_t sign = (byte & 0x80u) << 24, e = (byte >> 2) & 0x1Fu, m = byte & 3u;
  if (e == 31) return float_from_bits(sign | (m ? 0x7FC00000u : 0x7F800000u));
  if (e == 0) {
    const float mag = static_cast<float>(m) * 0x1p-16f;
    return sign ? -mag : mag;
  }
  return float_from_bits(sign | ((e + 112u) << 23) | (m << 21));
}

// An E4M3FN element: the scale byte's format with its sign honoured.
NVFP4_KERNEL_HD float e4m3_element_to_float(uint32_t byte) { return e4m3_to_float(byte, true); }

// Element x of a row of `format` (row points at the row's first byte).
NVFP4_KERNEL_HD float format_element(uint32_t format, const uint8_t* row, int64_t x) {
  switch (format_or_nvfp4(format)) {
    case NVFP4_FORMAT_MXFP8_E4M3: return e4m3_element_to_float(row[x]);
    case NVFP4_FORMAT_MXFP8_E5M2: return e5m2_to_float(row[x]);
    default: return e2m1_to_float(e2m1_code(row, x));
  }
}

struct ScaleParts {
  float mant;  // 1 or NaN for E8M0; the E4M3 value (ue4m3) for NVFP4
  int exp;
};

// E8M0: 2^(byte - 127) for 0..254 (0x00 is 2^-127, not zero), NaN for 0xFF.
NVFP4_KERNEL_HD ScaleParts e8m0_parts(uint32_t byte) {
  return ScaleParts{byte == 0xFFu ? float_from_bits(0x7FC00000u) : 1.0f, static_cast<int>(byte) - 127};
}

NVFP4_KERNEL_HD ScaleParts format_scale(uint32_t format, uint32_t byte) {
  if (format_or_nvfp4(format) == NVFP4_FORMAT_NVFP4) return ScaleParts{e4m3_to_float(byte, false), 0};
  return e8m0_parts(byte);
}

// Whether the problem's operand formats are among those the kernel declares (0 = NVFP4 only).
NVFP4_KERNEL_HD bool formats_declared(const nvfp4_kernel_info& info, const nvfp4_problem& p) {
  const uint32_t as = info.a_formats == 0 ? (1u << NVFP4_FORMAT_NVFP4) : info.a_formats;
  const uint32_t bs = info.b_formats == 0 ? (1u << NVFP4_FORMAT_NVFP4) : info.b_formats;
  const uint32_t a = format_or_nvfp4(p.a_format), b = format_or_nvfp4(p.b_format);
  return a <= NVFP4_FORMAT_MXFP8_E5M2 && b <= NVFP4_FORMAT_MXFP8_E5M2 && ((as >> a) & 1u) && ((bs >> b) & 1u);
}

}  // namespace nvfp4::kern
