// Block-scaled output (SPEC.md section 2, out_type nvfp4; rule 8 of section 3): a GEMM, grouped
// GEMM or dual GEMM whose result is quantized along n, in blocks of 16 of each row, with the
// problem's recipe and output global scale into Q (codes, row-major like A with n in place of k)
// and SFQ (scales, linear or permuted with n in place of k). The reference quantizes the value an
// FP32 accumulator holds in the exact regime (RN_fp32 of the exact result) with the quantize
// reference of reference/quantize.h; the judge applies rule 7 to blocks wholly in the exact regime
// and the interval rule elsewhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reference/exact_gemm.h"
#include "reference/oracle.h"
#include "reference/problem.h"
#include "reference/quantize.h"

namespace nvfp4 {

// One quantized output: the whole output of a GEMM or dual GEMM (l batches of m x n), or one
// group of a grouped GEMM (m_g x n_g, l = 1; nothing when m_g = 0). `first` is the index (as in
// ExactResult) of its element (0, 0, 0).
struct OutUnit {
  int64_t l = 1, m = 0, n = 0;
  int64_t first = 0;
  float global_scale = 1;
  int64_t nb() const { return (n + 15) / 16; }  // scale blocks per row
  int64_t q_bytes() const { return l * m * n / 2; }
  int64_t sfq_linear_bytes() const { return l * m * nb(); }
  int64_t sfq_bytes(SfLayout layout) const;  // in the kernel's layout, padding included
};
// The units of a problem with out_type nvfp4 (its global scale: the problem's, or the group's).
std::vector<OutUnit> out_units(const Problem& p);
// Q and linear SFQ bytes of all units together (expect_q's and expect_sfq's lengths).
int64_t out_q_bytes(const Problem& p);
int64_t out_sfq_bytes(const Problem& p);

// Empty when p's block-scaled output is well formed, else what is wrong: only gemm, grouped_gemm
// and dual_gemm; n (every group's) even, since Q packs two codes a byte; an NVFP4 recipe (te,
// ref, fast, torchao); one global scale, or for grouped_gemm one or one per group, each finite
// and > 0. A problem of another out_type must have no output global scale.
std::string block_scaled_output_error(const Problem& p);

// The unit's values as the input of a quantize problem (in_type fp32, k = n, the problem's
// recipe and sf_layout): RN_fp32 of each exact value (alpha * r, or silu(G) * U), NaN where a
// used scale is NaN. Its quantize reference, with the unit's global scale, is the unit's
// reference Q and SFQ.
Problem unit_quantize_problem(const Problem& p, const ExactResult& ref, const OutUnit& u);
QuantResult block_scaled_reference(const Problem& p, const ExactResult& ref, const OutUnit& u);
// The reference Q and SFQ (linear) of every unit, one after another: p's expect_q and expect_sfq.
void set_block_scaled_expect(Problem& p, const ExactResult& ref);
// The same bytes as one vector, Q then SFQ: what expect_word's byte indices of a block-scaled
// output (as of a quantize problem) point into.
std::vector<uint8_t> block_scaled_expect_bytes(const Problem& p, const ExactResult& ref);

// Rule 8 for one unit: `q` and `sfq` are the unit's Q and SFQ as the kernel left them (SFQ in
// p.sf_layout; permuted padding cells must hold `padding` after the call). A block whose every
// element lies in the exact regime (rule 2) is judged by rule 7 (bit-exact, `fast`'s window,
// +-0 codes, NaN elements free). Elsewhere an element is known only to lie within x +- spread
// (rules 3 and 6): the scale byte must lie between the recipe's bytes for the smallest and the
// largest block amax those intervals allow, and each code between the codes of its interval's
// ends with the encode factor of the byte written (`fast`: widened by 2^-20; a written byte
// 0x00 dequantizes the block to 0, so its codes are free).
struct BlockOutJudgement {
  QuantJudgement rule7;       // counts and first failure of the exact-regime blocks
  int64_t blocks = 0, exact_blocks = 0;
  int64_t interval_wrong_scales = 0, interval_wrong_codes = 0;
  // The first wrong interval block: batch, row, block, the allowed and written scale bytes, the
  // first wrong element (-1: none) with its interval and the allowed and written codes.
  int64_t b = -1, i = 0, s = 0, x = -1;
  uint8_t scale_lo = 0, scale_hi = 0, actual_scale = 0, code_lo = 0, code_hi = 0, actual_code = 0;
  double value_lo = 0, value_hi = 0;
  bool pass() const { return rule7.pass() && interval_wrong_scales == 0 && interval_wrong_codes == 0; }
};
BlockOutJudgement judge_block_scaled(const Problem& p, const ExactResult& ref, const Policy& policy, const OutUnit& u,
                                     const std::vector<uint8_t>& q, const std::vector<uint8_t>& sfq, uint8_t padding);
// The failure in words: which unit (group), block, row, the expected and actual scale bytes and
// codes (hex and value), and for exact-regime blocks the recipe operation the kernel apparently
// did differently (quantize_failure_text).
std::string block_scaled_failure_text(const Problem& p, const ExactResult& ref, const OutUnit& u,
                                      const BlockOutJudgement& j, const std::vector<uint8_t>& q,
                                      const std::vector<uint8_t>& sfq, uint8_t padding);

// One block of a block-scaled output: its unit (the group of a grouped GEMM; 0 otherwise), batch,
// row and block (columns 16s .. 16s + 15 of the row).
struct OutBlock {
  size_t unit = 0;
  int64_t b = 0, i = 0, s = 0;
};
// The first `count` blocks of p's output in order: units one after another (empty groups have
// none), then batch, row, block.
std::vector<OutBlock> first_out_blocks(const Problem& p, int64_t count);
// "group 2, row 3, block 1 (columns 16..31)" or "batch 0, row 3, block 1 (columns 16..31)".
std::string out_block_place(const Problem& p, const OutBlock& blk);
// A block's scale byte and codes in words, from Q and SFQ bytes in expect order (Q of every unit,
// then SFQ of every unit in linear order: expect_q then expect_sfq, or what `reference` writes):
// "scale 0x38 (1); codes 0x2 (1) 0xA (-1) ...", each code's hex nibble and value.
std::string out_block_words(const Problem& p, const std::vector<uint8_t>& bytes, const OutBlock& blk);
// Two outputs in expect order compared block by block (a block differs when its scale byte or
// any code does, -0 against +0 included): how many blocks differ and the first that does.
struct OutBlockDiff {
  int64_t blocks = 0, differing = 0;
  std::optional<OutBlock> first;
};
OutBlockDiff compare_out_blocks(const Problem& p, const std::vector<uint8_t>& expected, const std::vector<uint8_t>& actual);

}  // namespace nvfp4
