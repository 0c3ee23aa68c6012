// FP16 bit patterns as people read them: the exact value and the bits, for the CLI's messages.
#pragma once

#include <fmt/core.h>

#include <cstdint>
#include <string>

#include "reference/fp16.h"

namespace nvfp4::cli {

// "1.5 (0x3e00)": fmt writes the shortest decimal that reads back to the same double, and every
// FP16 value is a double, so the text identifies the value; the bits settle NaN payloads and -0.
inline std::string fp16_text(uint16_t h) {
  return fmt::format("{} (0x{:04x})", fp16_to_double(h), h);
}

}  // namespace nvfp4::cli
