// The one bug each mutant kernel carries, and the decode steps those bugs live in. Every mutant
// is the same correct kernel (host or CUDA) with exactly one of these switched on; Bug::none is
// the unmutated control, which must pass every check. Host and device.
#pragma once

#include <stdint.h>

#include "kernels/block_scaled_decode.h"
#include "mutation/honest/rounding.h"

namespace nvfp4::mutants {

enum class Bug : int {
  none = 0,
  // Decoding the data.
  nibble_swap_a,             // A: element 2t read from the HIGH nibble (and 2t+1 from the low)
  nibble_swap_b,             // the same in B
  e2m1_subnormal_as_normal,  // E2M1 code 1 (0.5) decoded with an implicit leading one: 0.75
  // Decoding the scales.
  scale_subnormal_as_normal,  // E4M3 exponent field 0 decoded as (8+m)*2^-10 instead of m*2^-9
  nan_scale_as_number,        // E4M3 0x7F/0xFF decoded as 480 instead of NaN
  scale_sign_honoured,        // a ue4m3 kernel that negates blocks whose scale has the sign bit
  scale_subnormal_flushed,    // E4M3 exponent field 0 (subnormal scales) read as zero
  scale_as_ue8m0,             // MXFP4 confusion: the scale byte read as a power of two 2^(byte-127)
  block32_scales,             // MXFP4 confusion: one scale per 32 elements (index x/32, not x/16)
  // Finding the scales.
  permuted_32_4_swapped,  // permuted layout: (i%32)*4 + ((i%128)/32)*16, the 32 and 4 roles swapped
  layout_ignored,         // always indexes the linear layout, even when handed the permuted one
  kt_floor,               // permuted: k tiles = kb/4 (floor), so kb%4 != 0 reads other tiles/padding
  mt_floor,               // permuted: row tiles = rows/128 (floor), so batch b>0 reads wrong tiles
  kb_floor,               // kb = k/16 (floor): the last partial block dropped and the row stride wrong
  // Loop bounds and strides.
  k_tail_64_dropped,            // k loop runs to the last multiple of 64 only
  rows_past_128_skipped,        // rows past the last multiple of 128 never computed
  n_tile_scales_reused,         // columns past the first 128 read the B scales of column j % 128
  batch_stride_scales_ignored,  // scales of batch 0 used for every batch
  b_batch_broadcast,            // B (data and scales) of batch 0 used for every batch
  c_transposed,                 // C written column-major: (b*n + j)*m + i
  // Accumulation and epilogue.
  acc_not_reset,            // accumulator set to 0 once per row, not per output element
  fp16_accumulation,        // products and sums in FP16 (hfma) without declaring FP16_ACCUMULATE
  output_round_toward_zero, // FP32 -> FP16 with __float2half_rz instead of _rn
  output_ftz,               // FP16 subnormal outputs flushed to zero
  saturates_undeclared,     // overflow clamped to +-65504 without declaring SATURATES
  alpha_ignored,            // alpha never applied
  alpha_in_fp16,            // epilogue in half: RN16(acc) * RN16(alpha), rounded again
  zero_skip,                // skips products whose A element is zero: 0 * NaN scale never seen
  // Interface and memory.
  cached_by_pointer,           // returns the previous output when called again with the same pointers
  write_past_end,              // stores C in half2 pairs: one element past the end when l*m*n is odd
  unsupported_shape_computed,  // declares k % 64 == 0 but computes (and writes) any k anyway
  refuses_supported,           // declares any k but answers UNSUPPORTED when k % 64 != 0
  // CUDA only.
  missing_syncthreads,      // shared-memory reduction without __syncthreads between its steps
  own_stream,               // launches on a stream of its own instead of the problem's stream
  uninitialised_shared_acc, // block total in shared memory accumulated without being zeroed
  // Tensor-core engine only (mutant_tensor_core.cu).
  mma_k16_step_dropped,     // k loop unrolled by two k16 steps: the last full step skipped when k/16 is odd
  mma_subnormal_operands,   // FP16 operands stored as value * 2^-14 (subnormal below 1), declares IEEE
  split_k_partial_twice,    // one of the split-k FP32 partials added twice
  // Output types (a GEMM declaring only the type its bug is in; mutant_v2_host.cc).
  bf16_truncated,           // FP32 -> BF16 by dropping the low 16 bits instead of rounding
  fp32_through_fp16,        // FP32 output written as RN32(RN16(value)): an FP16 epilogue reused
  bf16_satfinite,           // BF16 overflow written as +-0x7F7F (cvt.rn.satfinite) instead of +-Inf
  fp32_ftz,                 // FP32 subnormal outputs flushed to +-0 (an FTZ epilogue)
  // Dual GEMM with SiLU.
  dual_silu_fp16,           // silu computed in FP16 (G, e^-G, 1 + e^-G and the quotient rounded to half)
  dual_gate_up_swapped,     // silu(U) * G instead of silu(G) * U
  dual_alpha2_ignored,      // U computed without alpha2
  // Grouped GEMM.
  grouped_next_expert_scales,   // packed: expert g reads expert g+1's SFB (the last expert its own)
  grouped_stops_at_empty,       // the group loop ends at the first empty group: later groups unwritten
  grouped_empty_writes_row,     // packed: an empty group writes a row of zeros at its C offset (the next group's row 0)
  grouped_alpha_of_first,       // every group scaled by group 0's alpha
  grouped_offsets_32bit,        // packed: B_g's byte offset g*n*k/2 formed in 32-bit int (wraps past 2^31)
};

// E2M1 code to float, with the data-decoding bugs.
NVFP4_KERNEL_HD float mutant_e2m1(uint32_t code, Bug bug) {
  if (bug == Bug::e2m1_subnormal_as_normal && (code & 7u) == 1u) return (code & 8u) ? -0.75f : 0.75f;
  return kern::e2m1_to_float(code);
}

// An E4M3 scale byte to float, with the scale-decoding bugs.
NVFP4_KERNEL_HD float mutant_scale(uint32_t byte, bool signed_scales, Bug bug) {
  switch (bug) {
    case Bug::scale_subnormal_as_normal:
      if (((byte >> 3) & 0xFu) == 0) {
        const float mag = static_cast<float>(8u + (byte & 7u)) * 0.0009765625f;  // (8+m) * 2^-10
        return (signed_scales && (byte & 0x80u)) ? -mag : mag;
      }
      break;
    case Bug::nan_scale_as_number:
      if ((byte & 0x7Fu) == 0x7Fu) return (signed_scales && (byte & 0x80u)) ? -480.0f : 480.0f;
      break;
    case Bug::scale_sign_honoured:
      return kern::e4m3_to_float(byte, true);
    case Bug::scale_subnormal_flushed:
      if (((byte >> 3) & 0xFu) == 0) return (signed_scales && (byte & 0x80u)) ? -0.0f : 0.0f;
      break;
    case Bug::scale_as_ue8m0:
      // UE8M0: 0xFF is NaN, otherwise 2^(byte-127); byte 0 is the float subnormal 2^-127.
      if (byte == 0xFFu) return kern::float_from_bits(0x7FC00000u);
      return kern::float_from_bits(byte == 0 ? 0x00400000u : (byte << 23));
    default:
      break;
  }
  return kern::e4m3_to_float(byte, signed_scales);
}

// Offset of the scale of (b, i, s) for a matrix of `rows` rows, with the layout bugs. kb is the
// kernel's idea of blocks per row (k/16 under kb_floor).
NVFP4_KERNEL_HD int64_t mutant_scale_offset(uint32_t layout, int64_t rows, int64_t kb, int64_t b,
                                            int64_t i, int64_t s, Bug bug) {
  // Always linear rather than always permuted: linear offsets stay inside a permuted buffer, so
  // the bug shows as wrong values rather than as a crash that would stop the analysis.
  if (bug == Bug::layout_ignored) layout = NVFP4_SF_LINEAR;
  if (layout == NVFP4_SF_LINEAR) return (b * rows + i) * kb + s;
  const int64_t row_tiles = bug == Bug::mt_floor ? rows / 128 : (rows + 127) / 128;
  const int64_t k_tiles = bug == Bug::kt_floor ? kb / 4 : (kb + 3) / 4;
  const int64_t inside = bug == Bug::permuted_32_4_swapped
                             ? (i % 32) * 4 + ((i % 128) / 32) * 16 + s % 4
                             : (i % 32) * 16 + ((i % 128) / 32) * 4 + s % 4;
  return ((b * row_tiles + i / 128) * k_tiles + s / 4) * 512 + inside;
}

// Elements of a row the kernel's k loop visits (the loop-bound bugs).
NVFP4_KERNEL_HD int64_t mutant_k_end(int64_t k, Bug bug) {
  if (bug == Bug::k_tail_64_dropped) return k / 64 * 64;
  if (bug == Bug::kb_floor) return k / 16 * 16;
  return k;
}

// Blocks per row as the kernel computes them.
NVFP4_KERNEL_HD int64_t mutant_kb(int64_t k, Bug bug) { return bug == Bug::kb_floor ? k / 16 : (k + 15) / 16; }

// Scale block of element x.
NVFP4_KERNEL_HD int64_t mutant_block(int64_t x, Bug bug) { return bug == Bug::block32_scales ? x / 32 : x / 16; }

// The FP16 result of an FP32 accumulator: alpha, then one rounding, with the epilogue bugs.
NVFP4_KERNEL_HD uint16_t mutant_epilogue(float acc, float alpha, Bug bug) {
  using kern::Fp16Rounding;
  switch (bug) {
    case Bug::alpha_ignored:
      return kern::fp16_from_double(acc);
    case Bug::alpha_in_fp16: {
      // __hmul(__float2half(acc), __float2half(alpha)): the product of two halves is exact in
      // double and then rounded once more.
      const float h = kern::float_from_fp16(kern::fp16_from_double(acc));
      const float ah = kern::float_from_fp16(kern::fp16_from_double(alpha));
      return kern::fp16_from_double(static_cast<double>(h) * ah);
    }
    case Bug::output_round_toward_zero:
      return kern::fp16_from_double(alpha * acc, Fp16Rounding::toward_zero);
    case Bug::output_ftz: {
      const uint16_t h = kern::fp16_from_double(alpha * acc);
      return (h & 0x7C00u) == 0 ? static_cast<uint16_t>(h & 0x8000u) : h;
    }
    case Bug::saturates_undeclared: {
      const uint16_t h = kern::fp16_from_double(alpha * acc);
      return (h & 0x7FFFu) == 0x7C00u ? static_cast<uint16_t>((h & 0x8000u) | 0x7BFFu) : h;
    }
    default:
      return kern::fp16_from_double(alpha * acc);
  }
}

// The output-type bugs that act on a word already written: BF16 overflow clamped to the largest
// finite value, FP32 subnormals flushed to zero of their sign.
NVFP4_KERNEL_HD void mutant_output_word(void* c, int64_t index, uint32_t out, Bug bug) {
  if (bug == Bug::bf16_satfinite && out == NVFP4_OUT_BF16) {
    uint16_t& w = static_cast<uint16_t*>(c)[index];
    if ((w & 0x7FFFu) == 0x7F80u) w = static_cast<uint16_t>((w & 0x8000u) | 0x7F7Fu);
  }
  if (bug == Bug::fp32_ftz && out == NVFP4_OUT_FP32) {
    float& f = static_cast<float*>(c)[index];
    const uint32_t bits = kern::float_bits(f);
    if ((bits & 0x7F800000u) == 0) f = kern::float_from_bits(bits & 0x80000000u);
  }
}

// acc + a*b with FP32 accumulation, or FP16 accumulation (one hfma: a and b are exact halves,
// so a*b + acc is exact in double and rounded once to FP16).
NVFP4_KERNEL_HD float mutant_accumulate(float acc, float a, float b, Bug bug) {
  if (bug == Bug::fp16_accumulation) {
    return kern::float_from_fp16(kern::fp16_from_double(static_cast<double>(a) * b + acc));
  }
  return acc + a * b;  // a*b is exact in FP32 (at most 12 significant bits, >= 2^-20)
}

}  // namespace nvfp4::mutants
