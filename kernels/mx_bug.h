// The switch the naive MX GEMM (mx_gemm_core.h) takes for the MX mutants: none for the built-in
// mx_gemm_naive, one decode bug for each mutant (mutation/mutants/). Plain C++, so the mutant
// catalog, compiled by the host compiler, names the bugs it registers.
#pragma once

namespace nvfp4::kern::mx {

// The bugs of public MX kernels (shared/evidence/field-study-2026-12.md), one per mutant.
enum class MxBug : int {
  none = 0,
  e8m0_zero_as_zero,      // E8M0 0x00 read as 0 instead of 2^-127 (Triton's test helper)
  neighbour_block_scale,  // block s reads the scale of block s ^ 1 (invisible when exponents repeat)
  block32_as_16,          // MX scale index x / 16, NVFP4's block, instead of x / 32
  e5m2_as_e4m3,           // E5M2 elements decoded with the E4M3 decoder
  mxfp8_as_nibbles,       // an MXFP8 operand unpacked as E2M1 nibbles, k/2 bytes per row
  e8m0_bias_126,          // E8M0 bias 127 off by one: 2^(byte - 126)
  nan_scale_ignored,      // a block whose E8M0 scale is 0xFF skipped instead of giving NaN
  blocks_reversed,        // honest (host engine): blocks accumulated from the last to the first
  group0_scales,          // grouped, packed: every group's SFA and SFB read without the group's offset (group 0's)
};

}  // namespace nvfp4::kern::mx
