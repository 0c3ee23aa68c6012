// The exact quantizers of SPEC.md section 2 (recipes te, ref, fast, torchao, mx_rceil, mx_floor,
// mx_even) and the oracle's rule 7 for a quantize problem: what every byte of Q and SFQ must be,
// and, where a kernel's bytes differ, which block and which of the recipe's operations the kernel
// apparently did differently. Every operation is the FP32 operation the recipe names, done with
// the host's IEEE binary32 arithmetic (round to nearest even, subnormals kept), so the result is
// the same on every machine; the sources of each formula are in the project's
// shared/evidence/quantizer-recipes.md.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reference/fp16.h"
#include "reference/problem.h"

namespace nvfp4 {

// Input element `index` (C order over l x m x k) of a quantize problem as a float (every FP16,
// BF16 and FP32 word is exactly a float). Inline: the judge and the statistics read every
// element through it, several times a case.
inline float quantize_input(const Problem& p, int64_t index) {
  const size_t w = static_cast<size_t>(in_word_bytes(p.in_type));
  const uint8_t* at = p.x.data() + static_cast<size_t>(index) * w;
  if (p.in_type == InType::fp16) return static_cast<float>(fp16_to_double(static_cast<uint16_t>(at[0] | at[1] << 8)));
  uint32_t bits = 0;
  if (p.in_type == InType::bf16) {
    bits = static_cast<uint32_t>(at[0]) << 16 | static_cast<uint32_t>(at[1]) << 24;
  } else {
    bits = static_cast<uint32_t>(at[0]) | static_cast<uint32_t>(at[1]) << 8 | static_cast<uint32_t>(at[2]) << 16 |
           static_cast<uint32_t>(at[3]) << 24;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The global scales the suite hands the kernel, by the recipe's own convention from amax(|X|)
// (NaN elements ignored): one value, or l*m with p.row_global_scale (one per row); empty for the
// MX recipes, which have none. te: min(RN(2688/amax), FLT_MAX), 1 where amax is 0 or that is 0;
// ref and fast: RN(2688/amax); torchao: the decode scale RN(amax/2688).
std::vector<float> quantize_global_scales(const Problem& p);
// The one global scale recipe r hands over for a tensor's (or a row's) amax, by that convention.
float quantize_global_scale(Recipe r, float amax);

// How a kernel's quantization may differ from the recipe's named operations: used to say which
// operation a failing kernel did differently, by recomputing with each variant.
enum class QuantVariant : uint8_t {
  exact,              // the recipe as SPEC section 2 writes it
  other_association,  // gs * (amax * c6) where the recipe has amax * (gs * c6), and the reverse;
                      // torchao: RN(amax * RN(1/6)) for RN(amax / 6)
  approx_reciprocal,  // both reciprocals within 1 ulp (rcp.approx.ftz): `fast`'s window.
                      // quantize_reference gives the extreme of largest os (the outer
                      // reciprocal 1 ulp up, the inner one 1 ulp down; torchao: RN(1/pts) up);
                      // the failure text accepts any code between the two extremes
  scale_toward_zero,  // the E4M3 / E8M0 scale rounded toward zero instead of to nearest
  os_from_unrounded,  // the encode factor from the scale before its E4M3 / E8M0 rounding
  decode_as_encode,   // the global scale used the other way round (1/gs for gs)
};
const char* to_string(QuantVariant v);

// The reference quantization of p: Q (l*m*k/2 packed E2M1 bytes, or l*m*k bytes for MXFP8) and
// SFQ (l*m*qkb scale bytes, LINEAR order), with each block's encode factor os (linear order,
// like SFQ) and the global scales handed over. Throws std::invalid_argument for a problem that is
// not a valid quantize problem with data. An E8M0 NaN scale (0xFF: mx_floor and mx_even on an Inf
// amax) has os = NaN, torchao's inverse, so its block's codes are the NaN codes (E2M1 +6 = 0x7,
// E4M3/E5M2 0x7F); an all-NaN block's amax is 0.
struct QuantResult {
  std::vector<uint8_t> q, sfq;
  std::vector<float> os;
  std::vector<float> global_scale;
};
QuantResult quantize_reference(const Problem& p, QuantVariant variant = QuantVariant::exact);

// The same with the global scales given (one, or one per row of l*m) instead of computed from X
// by the recipe's convention: a GEMM's block-scaled output is quantized with the problem's own
// output global scale (SPEC section 2), whatever its amax.
QuantResult quantize_reference(const Problem& p, const std::vector<float>& global_scale,
                               QuantVariant variant = QuantVariant::exact);

// One NVFP4 block under recipe r (te, ref, fast, torchao) with the global scale g handed over
// by the recipe's convention: the scale byte the recipe writes for a block maximum amax_b, and
// the encode factor os it uses with a written scale byte (`fast` as `ref`: its reciprocals'
// window is the judge's; with byte 0x00 both give os = 0). `variant` exact, other_association
// or scale_toward_zero departs from the recipe as quantize_reference's does.
uint8_t nvfp4_scale_byte(Recipe r, float g, float amax_b, QuantVariant variant = QuantVariant::exact);
float nvfp4_encode_factor(Recipe r, float g, uint8_t byte);
// e2m1(v) of SPEC section 2 (RN saturating to +-6, NaN to +6 = 0x7, the sign kept on zero) and
// the signed value of an E2M1 code; the value of an E4M3 scale byte's magnitude (NaN for 0x7F).
uint8_t e2m1_code(float v);
double e2m1_value(uint8_t code);
double e4m3_scale_value(uint8_t byte);

// Rule 7: a kernel's Q and SFQ against the reference. `sfq` is SFQ as the kernel left it, in
// p.sf_layout (for permuted: padding cells included, which must be `padding` after the call:
// 0x00, or the byte the runner put there when the kernel declares NVFP4_FLAG_SF_PADDING_KEPT).
// Zero codes of either sign are equal; a NaN element may take any code and the rest of its block
// is judged as if it were absent; for `fast` a code may also be the one for x*os' for any os'
// within os*(1 +- 2^-20).
struct QuantJudgement {
  int64_t wrong_codes = 0, wrong_scales = 0, wrong_padding = 0;
  // The first wrong block: batch, row, block; the expected and actual scale byte, the first
  // wrong element in it and its expected and actual code.
  int64_t b = 0, i = 0, s = 0, x = -1;
  uint8_t expected_scale = 0, actual_scale = 0, expected_code = 0, actual_code = 0;
  bool pass() const { return wrong_codes == 0 && wrong_scales == 0 && wrong_padding == 0; }
};
QuantJudgement judge_quantize(const Problem& p, const QuantResult& ref, const std::vector<uint8_t>& q,
                              const std::vector<uint8_t>& sfq, uint8_t padding);

// judge_quantize for several outputs of one problem (a stochastic quantizer's calls under other
// seeds), each element's allowed codes worked out once (for formats of nibbles): for each output
// the judgement judge_quantize gives.
struct QuantOutput {
  const std::vector<uint8_t>* q = nullptr;
  const std::vector<uint8_t>* sfq = nullptr;
};
std::vector<QuantJudgement> judge_quantize_each(const Problem& p, const QuantResult& ref,
                                                const std::vector<QuantOutput>& outputs, uint8_t padding);
// The most elements whose allowed codes judge_quantize_each keeps at once.
constexpr int64_t kJudgeMemoElements = int64_t(1) << 22;

// Rule 7 for one block of p (batch b, row i, block s), counted into j, which records the first
// wrong block when it holds none yet: what judge_quantize does for each block, for a caller that
// judges some blocks by another rule (block-scaled output, rule 8).
void judge_quantize_block(const Problem& p, const QuantResult& ref, const std::vector<uint8_t>& q,
                          const std::vector<uint8_t>& sfq, int64_t b, int64_t i, int64_t s, QuantJudgement& j);

// The failure in words: the block, expected and actual scale byte and codes (value and hex),
// and the variant whose output the kernel's matches, where one does ("the kernel's bytes are
// what the recipe gives with the other association ..."), tried in QuantVariant's order.
// `global_scale`: the scales the kernel was handed when they are not the recipe's own from X
// (block-scaled output); null for a quantize problem.
std::string quantize_failure_text(const Problem& p, const QuantJudgement& j, const std::vector<uint8_t>& q,
                                  const std::vector<uint8_t>& sfq, uint8_t padding,
                                  const std::vector<float>* global_scale = nullptr);

}  // namespace nvfp4
