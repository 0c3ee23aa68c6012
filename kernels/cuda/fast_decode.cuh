// Cheap NVFP4 decoding for the fast CUDA kernels (gemv_fast, gemm_tc): E2M1 nibbles to FP16 with
// two integer ops per pair of values, E4M3 scale bytes through the hardware FP8 converter, and
// the cp.async wrappers both kernels stage their inputs with. Device code only; ABI types only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

namespace nvfp4::kern::fast {

// ---- E2M1 -> FP16, two values per 32-bit word of half2 ------------------------------------
//
// A 32-bit word w holds eight E2M1 codes, nibble t = element t of the word (SPEC section 1: the
// low nibble of a byte is the even element). Pair i (0..3) is (element i, element i+4): their
// nibbles sit exactly 16 bits apart, so ONE shift moves both into the two halves of a half2.
//
// Magnitude: the three bits `e1 e0 m` placed at FP16 bits 9..11 (exponent bits 10..11, top
// mantissa bit 9) read as an FP16 number are exactly value * 2^-14, subnormal 0.5 included
// (code 1 becomes mantissa 0x200, i.e. 2^-15). Sign: bit 3 of the nibble moved to bit 15.
// Shifts per pair: magnitude 9 - 4i (i = 3 is a right shift by 3), sign 12 - 4i.
constexpr uint32_t kPairMagnitudeMask = 0x0E000E00u;
constexpr uint32_t kPairSignMask = 0x80008000u;

template <int kPair>
__device__ __forceinline__ uint32_t pair_magnitude_bits(uint32_t w) {
  static_assert(kPair >= 0 && kPair < 4, "four pairs per word");
  return (kPair < 3 ? (w << (9 - 4 * kPair)) : (w >> 3)) & kPairMagnitudeMask;
}

template <int kPair>
__device__ __forceinline__ uint32_t pair_sign_bits(uint32_t w) {
  return (w << (12 - 4 * kPair)) & kPairSignMask;
}

// Pair kPair of w as a signed half2 of value * 2^-14 (exact).
template <int kPair>
__device__ __forceinline__ uint32_t pair_scaled_bits(uint32_t w) {
  return pair_magnitude_bits<kPair>(w) | pair_sign_bits<kPair>(w);
}

__device__ __forceinline__ __half2 half2_from_bits(uint32_t bits) {
  return *reinterpret_cast<const __half2*>(&bits);
}
__device__ __forceinline__ uint32_t bits_from_half2(__half2 h) {
  return *reinterpret_cast<const uint32_t*>(&h);
}

// 2^14 as half2: turns value * 2^-14 back into the E2M1 value (exact, a power of two).
__device__ __forceinline__ __half2 two_pow_14() { return half2_from_bits(0x74007400u); }

// The four pairs of a word as true E2M1 values in FP16 (uint4 = four half2).
__device__ __forceinline__ uint4 word_to_pairs(uint32_t w) {
  const __half2 k = two_pow_14();
  uint4 r;
  r.x = bits_from_half2(__hmul2(half2_from_bits(pair_scaled_bits<0>(w)), k));
  r.y = bits_from_half2(__hmul2(half2_from_bits(pair_scaled_bits<1>(w)), k));
  r.z = bits_from_half2(__hmul2(half2_from_bits(pair_scaled_bits<2>(w)), k));
  r.w = bits_from_half2(__hmul2(half2_from_bits(pair_scaled_bits<3>(w)), k));
  return r;
}

// ---- E4M3 scales -------------------------------------------------------------------------
//
// ue4m3 semantics (SPEC section 1): the sign bit is ignored, so it is cleared first; the
// hardware converter (cvt.rn.f16x2.e4m3x2, sm_89 and later) keeps NaN (0x7F) a NaN, keeps the
// subnormals, and every E4M3 value is exact in FP16.
__device__ __forceinline__ __half2 ue4m3x2_to_half2(uint32_t two_bytes) {
  const __half2_raw raw =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_bytes & 0x7F7Fu), __NV_E4M3);
  return __half2(raw);
}

// Bytes 0..3 of a scale word as floats.
__device__ __forceinline__ float4 ue4m3x4_to_float4(uint32_t word) {
  const float2 lo = __half22float2(ue4m3x2_to_half2(word & 0xFFFFu));
  const float2 hi = __half22float2(ue4m3x2_to_half2(word >> 16));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// ---- cp.async ----------------------------------------------------------------------------
//
// src_bytes = 0 zero-fills the destination without reading the source (rows past m, chunks past
// k): the source address must still be a valid pointer, callers pass the tensor's base.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, uint32_t src_bytes) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, uint32_t src_bytes) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace nvfp4::kern::fast
