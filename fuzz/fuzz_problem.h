// The binary encoding of a problem used by the `kernel` and `reference` fuzzers, and its decoder,
// shared with `nvfp4check replay` (which accepts these inputs as well as case files).
//
// Encoding v1 (every byte string decodes to a problem or is rejected by the size caps):
//
//   byte 0    flags: bit 0 op (0 gemv, 1 gemm); bit 1 sf_layout (0 linear, 1 permuted);
//             bit 2 semantics (0 ue4m3, 1 e4m3; ignored when a kernel is given: its flags decide);
//             bit 3 keep the shape even where it breaks the kernel's declared constraints (so the
//             runner checks the NVFP4_UNSUPPORTED path); bits 4-5 alpha kind (0: 1.0, 1: 2^int8,
//             2: raw FP32, non-finite read as 1.0, 3: -1.0); bits 6-7 scale mapping (0: raw
//             bytes; 1: narrow window (byte & 0x8F) | 0x30, magnitudes 0.5 .. 1.875, so most
//             outputs are in the oracle's exact regime; 2: raw with NaN bytes made 448;
//             3: subnormals only, byte & 0x87).
//   bytes 1-2 m - 1, little-endian, modulo caps.max_m
//   bytes 3-4 n - 1, modulo caps.max_n (read but ignored for gemv: n = 1)
//   bytes 5-6 k / 2 - 1, modulo caps.max_k / 2
//   byte 7    l - 1, modulo caps.max_l
//   [1 byte exponent for alpha kind 1 | 4 bytes FP32 for alpha kind 2]
//   then the data, in order: A (l*m*k/2 bytes), B, SFA (linear), SFB (linear), each byte used as
//   is (scales through the scale mapping), so every mutation reaches one code or scale byte.
//   Where the input ends, the rest is filled by a fixed function of the position (all E2M1
//   codes; scales in [0.5, 2)), so a short input still makes a full problem.
//
// A missing header byte reads as 0, so the empty input is a valid 1x1x2 GEMV.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/nvfp4_kernel_abi.h"
#include "reference/problem.h"

namespace nvfp4 {

// Sizes the decoder produces. The defaults reach every tile edge the kernels and the permuted
// layout have (rows 127-129 and 255-257, k tails past 1024, several batches) while keeping one
// check cheap enough for hundreds of executions per second.
struct FuzzCaps {
  int64_t max_m = 264, max_n = 136, max_k = 1056, max_l = 4;
  // Rejects problems with more products than this (l*m*n*k): big problems find no more bugs
  // than small ones and slow the fuzzer down by orders of magnitude. 2^18 still admits every
  // tile edge above with small other sides (257x1x1020, 129x17x80, 2x129x1016, 2x1x1056).
  int64_t max_products = int64_t(1) << 18;
};

// The smaller caps of the `reference` fuzzer, whose brute force is O(l*m*n*k) in 128-bit
// arithmetic; m up to 260 still crosses two 128-row tile edges of the permuted layout.
inline FuzzCaps reference_fuzzer_caps() {
  FuzzCaps c;
  c.max_m = 260;
  c.max_n = 40;
  c.max_k = 200;
  c.max_l = 3;
  c.max_products = int64_t(1) << 16;
  return c;
}

struct FuzzDecodeOptions {
  FuzzCaps caps;
  // When set, the problem is fitted to this kernel: a supported op and layout, shape rounded up
  // to its multiples, alpha 1 for UNIT_ALPHA kernels, semantics from NVFP4_FLAG_SIGNED_SCALES
  // (unless flag bit 3 asks to keep an unsupported shape/op/layout).
  const nvfp4_kernel_info* kernel = nullptr;
};

// Decodes fuzz bytes into *out (with explicit data). False when the problem is over the caps.
bool decode_fuzz_input(const uint8_t* data, size_t size, Problem* out);
bool decode_fuzz_input(const uint8_t* data, size_t size, const FuzzDecodeOptions& options,
                       Problem* out);

// decode_fuzz_input of a byte string, fitted to `kernel` (null: no fitting); nullopt with *why
// set when the bytes are over the caps.
std::optional<Problem> decode_fuzz_case(const std::string& bytes, const nvfp4_kernel_info* kernel,
                                        std::string* why);

// Bytes that decode (with default options and no kernel) to exactly p, for problems within the
// default caps, raw scales, and alpha representable by the encoding. Used to write seeds.
std::vector<uint8_t> encode_fuzz_input(const Problem& p);

// True when the bytes are text (no control bytes but tab, CR and LF, no DEL): such input is a
// case file (SPEC.md section 4), anything else is a fuzz input in the encoding above.
bool looks_like_case_text(const uint8_t* data, size_t size);

// What `nvfp4check replay` and the kernel fuzzer do with one input file: text is parsed as a
// case file (CaseError propagates, naming `name`), other bytes are decoded for `kernel` (may be
// null); nullopt when the fuzz bytes are over the caps.
std::optional<Problem> load_case_or_fuzz_input(const uint8_t* data, size_t size,
                                               const std::string& name,
                                               const nvfp4_kernel_info* kernel);

// Stable 64-bit FNV-1a of bytes, as 16 hex digits: names saved case files by content.
std::string content_hash_hex(const uint8_t* data, size_t size);

}  // namespace nvfp4
