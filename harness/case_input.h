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

// Reads one input: a case file, or with `binary` an input for the binary decoder (fitted to
// `kernel` when given). Nothing is guessed from the bytes: a case file with a form feed stays a
// case file, and 16 zero bytes are no case file. Throws CaseError ("FILE: what is wrong").
Problem load_case_input(const std::string& path, const nvfp4_kernel_info* kernel, bool binary);

}  // namespace nvfp4
