// A block's scale byte as a number, whichever format scales the block: E4M3 (NVFP4) or E8M0 (the
// MX formats). One decoder for the tools that print or compare a quantizer's scales.
#pragma once

#include <cmath>
#include <cstdint>

#include "reference/mx_formats.h"
#include "reference/problem.h"

namespace nvfp4 {

// The value of scale byte `byte` of a block of format f (E4M3 under `semantics`); NaN for a NaN byte.
inline double block_scale_value(BlockFormat f, uint8_t byte, ScaleSemantics semantics = ScaleSemantics::ue4m3) {
  if (f != BlockFormat::nvfp4) {
    const E8m0Value v = e8m0_decode(byte);
    return v.nan ? std::nan("") : std::ldexp(1.0, v.exp);
  }
  const ScaleValue v = e4m3_decode(byte, semantics);
  return v.nan ? std::nan("") : v.sign * std::ldexp(static_cast<double>(v.sig), v.exp);
}

}  // namespace nvfp4
