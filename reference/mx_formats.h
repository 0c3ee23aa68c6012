// The MX block formats' number formats (SPEC.md section 1, revision 4), decoded to exact
// integers: E8M0 scales, E4M3FN and E5M2 elements, and E2M1 in the same shape. Header-only and
// usable from CUDA device code (NVFP4_HD), so a GPU reference decodes exactly like the CPU one.
#pragma once

#include <cstdint>

#include "reference/formats.h"

namespace nvfp4 {

// E8M0 scale byte: an unsigned biased exponent, 2^(e - 127) for e = 0..254. 0x00 is 2^-127
// (not zero: decoding it as zero is a known bug of test helpers), 0xFF is NaN. No sign, no zero,
// no Inf.
struct E8m0Value {
  bool nan;
  int exp;  // the scale is 2^exp, -127..127 (meaningless when nan)
};

NVFP4_HD inline E8m0Value e8m0_decode(uint8_t byte) { return E8m0Value{byte == 0xFFu, static_cast<int>(byte) - 127}; }

// An element as (-1)^negative * sig * 2^exp with an integer significand, or Inf / NaN.
// Zeros have sig = 0 (either sign: -0 counts as 0 in every sum).
struct ElementValue {
  bool nan;
  bool inf;       // sig is 0 then; `negative` is the Inf's sign
  bool negative;
  int sig;        // E2M1: 0..12 (doubled), E4M3: 0..15, E5M2: 0..7
  int exp;
};

// E2M1 code (low nibble) in the same shape: the doubled value times 2^-1.
NVFP4_HD inline ElementValue e2m1_element(uint8_t code) {
  const int twice = e2m1_twice(code);
  return ElementValue{false, false, (code & 8u) != 0, twice < 0 ? -twice : twice, -1};
}

// E4M3FN element: section 1's scale byte, signed. NaN iff (byte & 0x7F) == 0x7F, no Inf, largest
// finite 448 (0x7E); exponent field 0 is subnormal (m * 2^-9), else (8 + m) * 2^(e - 10).
NVFP4_HD inline ElementValue e4m3_element(uint8_t byte) {
  const ScaleValue s = e4m3_decode(byte, ScaleSemantics::ue4m3);
  return ElementValue{s.nan, false, (byte & 0x80u) != 0, s.nan ? 0 : s.sig, s.exp};
}

// E5M2 element: `s eeeee mm`, bias 15. Exponent field 0 is subnormal (m * 2^-16), else
// (4 + m) * 2^(e - 17); field 31 is Inf (m = 0) or NaN (m != 0). Largest finite 57344 (0x7B).
NVFP4_HD inline ElementValue e5m2_element(uint8_t byte) {
  const int e = (byte >> 2) & 0x1F;
  const int m = byte & 0x3;
  ElementValue v{false, false, (byte & 0x80u) != 0, 0, 0};
  if (e == 31) {
    v.nan = m != 0;
    v.inf = m == 0;
    return v;
  }
  v.sig = e == 0 ? m : 4 + m;
  v.exp = e == 0 ? -16 : e - 17;
  return v;
}

}  // namespace nvfp4
