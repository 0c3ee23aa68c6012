// The inputs `nvfp4check replay` accepts: case files (SPEC.md section 4) and, through a decoder
// registered by whoever defines one (the fuzzers' binary encoding), binary inputs.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "kernels/nvfp4_kernel_abi.h"
#include "reference/problem.h"

namespace nvfp4 {

// Decodes a binary input. `kernel` is the kernel the problem is meant for (a decoder may fit the
// shape to it) or null; nullopt means the bytes are not a usable problem (say why in *why).
using BinaryCaseDecoder =
    std::function<std::optional<Problem>(const std::string& bytes, const nvfp4_kernel_info* kernel, std::string* why)>;

// Installs the decoder for inputs that are not text (replaces any earlier one; empty removes it).
void set_binary_case_decoder(BinaryCaseDecoder decoder);
bool have_binary_case_decoder();

// True when the bytes are text (no control bytes but tab, CR and LF): a case file.
bool looks_like_case_text(const std::string& bytes);
bool is_binary_case_input(const std::string& path);  // throws CaseError when unreadable

// Reads one input: text is parsed as a case file, anything else goes to the binary decoder for
// `kernel`. Throws CaseError ("FILE: what is wrong") for a bad or unusable input.
Problem load_case_input(const std::string& path, const nvfp4_kernel_info* kernel = nullptr);

}  // namespace nvfp4
