// The GEMM family with block-scaled output (out_type nvfp4, SPEC.md section 2 and rule 8): what
// differs from a GEMM writing C, kept apart from the family's own entries, which call these
// where p.out_type is nvfp4: the declaration it needs, its buffers (the global scale in; Q and
// SFQ out instead of C, SFQ's padding cells holding the call's pad byte), its ABI fields and its
// oracle.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/ops/op_module.h"

namespace nvfp4::block_scaled_out {

inline bool applies(const Problem& p) { return p.out_type == OutType::nvfp4; }
// Why p's block-scaled output lies outside what info declares ("" inside).
std::string unsupported_reason(const nvfp4_kernel_info& info, const Problem& p);
// The global scale appended to in.inputs; in.outputs replaced by Q and SFQ, poisoned.
void lay_out(LaidOut& in, const Problem& p, const CallSpec& spec);
// Grouped GEMM: Q and SFQ of every non-empty group instead of its C, no global-scale input.
// The group_out table of a grouped call: each group's Q and SFQ among `outputs` (the buffers of
// lay_out's outputs, in order; NULL for an empty group) and its own global scale.
std::vector<nvfp4_group_out> group_out_table(const Problem& p, const std::vector<uint8_t*>& outputs);
// q, sfq, recipe and global_scale of the ABI problem; c NULL.
void point_abi(nvfp4_problem& abi, const Problem& p, const std::vector<uint8_t*>& inputs,
               const std::vector<uint8_t*>& outputs);
std::optional<Finding> judge(const CallContext& x, OracleSummary* summary);
std::optional<Finding> unwritten(const CallContext& x);
int64_t output_words(const Problem& p);
// A call's output words (each non-empty unit's Q, then its SFQ in p's layout, as lay_out made
// them) as the bytes `reference` writes for the case: Q of every unit, then SFQ of every unit in
// linear order. Throws std::invalid_argument when the words are too few.
std::vector<uint8_t> reference_order_bytes(const Problem& p, const std::vector<uint32_t>& words);

// The schedule's draws for a case whose out_type the schedule drew as nvfp4: a recipe among the
// declared ones and n made even (before the data); then, with the data, the global scale: the
// recipe's own for the output's amax, or that times 16 (block maxima above 2688 * gs: scales
// clamp at 448), or over 16 (scales among the E4M3 subnormals), or a factor in [1/2, 2); a
// random power of two where the case is too large to compute its amax first.
void draw_recipe(Draws& d, const nvfp4_kernel_info& info, Problem& p);
void draw_global_scale(Draws& d, Problem& p);

}  // namespace nvfp4::block_scaled_out
