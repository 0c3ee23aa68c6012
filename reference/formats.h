// NVFP4's two number formats, decoded to exact integers (SPEC.md section 1). Header-only and
// usable from CUDA device code, so the GPU reference decodes exactly like the CPU one.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define NVFP4_HD __host__ __device__
#else
#define NVFP4_HD
#endif

namespace nvfp4 {

// E2M1 (FP4). Sign: 1, exponent: 2, mantissa: 1, bias: 1.
// No Inf, no NaN; 0x8 is -0; code 1 (0.5) is the only subnormal.
// Values are returned doubled so they are integers: {0, 1, 2, 3, 4, 6, 8, 12} with sign.
// The doubled magnitudes of codes 0..7 as 4-bit fields, code c's at bit 4c (12 = 0xC fits): the
// one table of them (the CPU reference's vector decode shifts it lane by lane).
constexpr uint32_t kE2m1TwiceNibbles = 0xC8643210u;
NVFP4_HD inline int e2m1_twice(uint8_t code) {
  const int mag = static_cast<int>((kE2m1TwiceNibbles >> ((code & 7u) * 4u)) & 0xFu);
  return (code & 8u) ? -mag : mag;
}

// Element x of a packed E2M1 row: element 2i is the LOW nibble of byte i.
NVFP4_HD inline uint8_t e2m1_nibble(const uint8_t* packed_row, int64_t x) {
  const uint8_t byte = packed_row[x >> 1];
  return (x & 1) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0xFu);
}

enum class ScaleSemantics : uint8_t {
  ue4m3,  // the sign bit is ignored: the scale is |value| (cuBLASLt's and NVFP4's meaning)
  e4m3,   // the sign bit is honoured: a negative scale negates its block
};

// An E4M3FN scale as sign * sig * 2^exp with an integer significand sig in [0, 15].
struct ScaleValue {
  bool nan;
  int sign;  // +1 or -1 (ue4m3 always +1)
  int sig;   // 0 for +-0
  int exp;   // >= -9, <= 5
};

// E4M3FN. Sign: 1, exponent: 4, mantissa: 3, bias: 7.
// No Inf; NaN iff (byte & 0x7F) == 0x7F; exponent field 0 is subnormal (m * 2^-9);
// largest finite 448 (0x7E); 0x80 is -0.
NVFP4_HD inline ScaleValue e4m3_decode(uint8_t byte, ScaleSemantics semantics) {
  ScaleValue v{};
  v.nan = (byte & 0x7Fu) == 0x7Fu;
  v.sign = (semantics == ScaleSemantics::e4m3 && (byte & 0x80u)) ? -1 : 1;
  const int e = (byte >> 3) & 0xF;
  const int m = byte & 0x7;
  if (e == 0) {
    v.sig = m;
    v.exp = -9;
  } else {
    v.sig = 8 + m;
    v.exp = e - 10;
  }
  return v;
}

}  // namespace nvfp4
