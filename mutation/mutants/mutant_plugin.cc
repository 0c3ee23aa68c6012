// The nvfp4_mutants plugin: every mutant (and the unmutated control of each engine) behind the
// kernel ABI, so the suite checks them exactly like any outside kernel. Besides the three ABI
// symbols it exports nvfp4_kernel_describe(index), the bug in one sentence, for kill tables.
#include <deque>
#include <string>
#include <vector>

#include "kernels/mx_bug.h"
#include "kernels/host/host_gemm_nvfp4_out.h"
#include "kernels/host/host_mx_gemm.h"
#include "kernels/host/host_quantize.h"
#include "kernels/problem_fits.h"
#include "mutation/mutants/mutant_engines.h"

namespace nvfp4::mutants {
namespace {

constexpr uint32_t kBothOps = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
// Engines: host, CUDA cores, tensor cores (the CUDA ones are both named mut_cuda_<bug>).
constexpr unsigned kHost = 1, kCuda = 2, kTensorCore = 4;

struct BugEntry {
  Bug bug;
  const char* name;  // the mutant is mut_host_<name> / mut_cuda_<name>
  unsigned engines;  // kHost | kCuda, or kTensorCore
  const char* what;
};

// Where each comes from: the classes of a block-scaled decode that can go wrong, and bugs seen in public NVFP4/MXFP4 kernels and their
// issue threads (MXFP4 block size and UE8M0 scales mixed up with NVFP4's, floor instead of ceil in
// the swizzled scale tiles, FP16 epilogues, fast paths that skip zeros).
const BugEntry kBugs[] = {
    {Bug::nibble_swap_a, "nibble_swap_a", kHost, "A's nibble order swapped: element 2t read from the high nibble"},
    {Bug::nibble_swap_b, "nibble_swap_b", kHost | kCuda, "B's nibble order swapped: element 2t read from the high nibble"},
    {Bug::e2m1_subnormal_as_normal, "e2m1_subnormal_as_normal", kHost, "E2M1 code 1 decoded with an implicit one (0.75, not 0.5)"},
    {Bug::scale_subnormal_as_normal, "scale_subnormal_as_normal", kHost | kCuda, "E4M3 subnormal scales decoded as normals ((8+m)*2^-10)"},
    {Bug::nan_scale_as_number, "nan_scale_as_number", kHost, "E4M3 NaN scale (0x7F/0xFF) decoded as the number 480"},
    {Bug::scale_sign_honoured, "scale_sign_honoured", kHost, "ue4m3 kernel honours the scale's sign bit"},
    {Bug::scale_as_ue8m0, "scale_as_ue8m0", kHost, "scale byte read as MXFP4's UE8M0 power of two"},
    {Bug::block32_scales, "block32_scales", kHost, "one scale per 32 elements (MXFP4's block) instead of 16"},
    {Bug::permuted_32_4_swapped, "permuted_32_4_swapped", kHost | kCuda, "permuted scale index with the 32 and 4 roles swapped"},
    {Bug::layout_ignored, "layout_ignored", kHost, "linear scale indexing used even for the permuted layout"},
    {Bug::kt_floor, "kt_floor", kHost | kCuda, "permuted layout's k tiles = kb/4 rounded down (kb%4 != 0 reads other tiles)"},
    {Bug::mt_floor, "mt_floor", kHost, "permuted layout's row tiles = rows/128 rounded down (batch stride wrong)"},
    {Bug::kb_floor, "kb_floor", kHost, "kb = k/16 rounded down: last partial block dropped, scale row stride wrong"},
    {Bug::k_tail_64_dropped, "k_tail_64_dropped", kHost | kCuda, "k loop stops at the last multiple of 64"},
    {Bug::rows_past_128_skipped, "rows_past_128_skipped", kHost | kCuda, "rows past the last multiple of 128 never computed"},
    {Bug::n_tile_scales_reused, "n_tile_scales_reused", kHost | kCuda,
     "columns past the first 128 read the B scales of the first 128-column tile (a second N tile's offset bug)"},
    {Bug::batch_stride_scales_ignored, "batch_stride_scales_ignored", kHost | kCuda, "batch 0's scales used for every batch"},
    {Bug::b_batch_broadcast, "b_batch_broadcast", kHost, "B (data and scales) of batch 0 used for every batch"},
    {Bug::c_transposed, "c_transposed", kHost, "C written column-major ((b*n + j)*m + i)"},
    {Bug::acc_not_reset, "acc_not_reset", kHost, "accumulator zeroed once per row, not per output element"},
    {Bug::fp16_accumulation, "fp16_accumulation", kHost | kCuda, "FP16 accumulation (hfma) without declaring FP16_ACCUMULATE"},
    {Bug::output_round_toward_zero, "output_round_toward_zero", kHost | kCuda, "FP32 -> FP16 rounded toward zero (__float2half_rz)"},
    {Bug::output_ftz, "output_ftz", kHost, "FP16 subnormal outputs flushed to zero"},
    {Bug::saturates_undeclared, "saturates_undeclared", kHost, "overflow clamped to +-65504 without declaring SATURATES"},
    {Bug::alpha_ignored, "alpha_ignored", kHost, "alpha never applied"},
    {Bug::alpha_in_fp16, "alpha_in_fp16", kHost, "epilogue in half: RN16(RN16(acc) * RN16(alpha))"},
    {Bug::zero_skip, "zero_skip", kHost, "skips products whose A element is zero, so 0 * NaN scale is never NaN"},
    {Bug::cached_by_pointer, "cached_by_pointer", kHost | kCuda, "returns the last output when called again with the same pointers and shape"},
    {Bug::write_past_end, "write_past_end", kHost | kCuda, "half2 store of the last pair writes one element past C when l*m*n is odd"},
    {Bug::unsupported_shape_computed, "unsupported_shape_computed", kHost | kCuda, "declares k % 64 == 0 but computes any k anyway"},
    {Bug::refuses_supported, "refuses_supported", kHost, "declares any k but answers UNSUPPORTED when k % 64 != 0"},
    {Bug::missing_syncthreads, "missing_syncthreads", kCuda, "shared-memory reduction without __syncthreads"},
    {Bug::own_stream, "own_stream", kCuda, "work launched on a stream of its own, not the problem's"},
    {Bug::uninitialised_shared_acc, "uninitialised_shared_acc", kCuda, "block total accumulated in shared memory that was never zeroed"},
    // Tensor-core kernels: an unrolled k loop's remainder, gemm_tc's old subnormal
    // operands, and a split-k reduction.
    {Bug::mma_k16_step_dropped, "mma_k16_step_dropped", kTensorCore, "k16 loop unrolled by two skips the last full step when k/16 is odd"},
    {Bug::mma_subnormal_operands, "mma_subnormal_operands", kTensorCore, "FP16 MMA operands scaled by 2^-14 (subnormal below 1), IEEE accumulation declared"},
    {Bug::split_k_partial_twice, "split_k_partial_twice", kTensorCore, "the last split-k FP32 partial added twice"},
};

// Two-op kernels that send n = 1 down a GEMV path of their own (as production libraries do), the
// bug in that path only: their GEMM cases are right, so only GEMV cases with the data that shows
// the bug can kill them.
const BugEntry kGemvPathBugs[] = {
    {Bug::alpha_ignored, "alpha_ignored", kHost | kCuda, "GEMV path only: alpha never applied"},
    {Bug::zero_skip, "zero_skip", kHost, "GEMV path only: zero A elements skipped, so 0 * NaN scale is never NaN"},
    {Bug::scale_subnormal_flushed, "scale_subnormal_flushed", kHost | kCuda, "GEMV path only: subnormal E4M3 scales read as zero"},
    {Bug::scale_sign_honoured, "scale_sign_honoured", kHost, "GEMV path only: a ue4m3 kernel honours the scale's sign bit"},
    {Bug::nan_scale_as_number, "nan_scale_as_number", kHost | kCuda, "GEMV path only: E4M3 NaN scale decoded as 480"},
    {Bug::k_tail_64_dropped, "k_tail_64_dropped", kHost, "GEMV path only: k loop stops at the last multiple of 64"},
};

// ABI version 2's mutants (mutant_v2_host.cc): what each declares, so that its bug is the only
// thing between it and a correct kernel of that declaration. The harness reaches them once its
// schedule draws their op or output type; until then `nvfp4check mutants` lists them as unable
// to run, with why.
enum class Declares { out_bf16, out_fp32, dual, grouped, grouped_packed, gemm_all_outs };

struct V2BugEntry {
  Bug bug;
  const char* name;  // the mutant is mut_host_<name>, or big_host_<name> when large_only
  Declares declares;
  const char* what;
  // Wrong only on a case too big for the schedule's budget (a packed B past 2^31 bytes): named
  // big_* so the kill table and its budget test leave it to the case that shows it
  // (corpus/large/, gpu-check.sh v2-large).
  bool large_only = false;
};

// Bugs that reached users of MoE and BF16 NVFP4 kernels (the public threads named in each line).
const V2BugEntry kV2Bugs[] = {
    {Bug::bf16_truncated, "bf16_truncated", Declares::out_bf16,
     "BF16 output written by truncating the FP32 value (BF16 path wrong where FP16 is right, cutlass#3197); declares BF16 only"},
    {Bug::fp32_through_fp16, "fp32_through_fp16", Declares::out_fp32,
     "FP32 output rounded through FP16 first (an FP16 epilogue reused); declares FP32 only"},
    {Bug::bf16_satfinite, "bf16_satfinite", Declares::out_bf16,
     "BF16 output clamped to +-0x7F7F (the largest finite) on overflow instead of +-Inf, as a satfinite conversion does; declares BF16 only"},
    {Bug::fp32_ftz, "fp32_ftz", Declares::out_fp32,
     "FP32 subnormal outputs flushed to +-0 (an epilogue built with flush-to-zero); declares FP32 only"},
    {Bug::dual_silu_fp16, "dual_silu_fp16", Declares::dual, "dual GEMM: silu computed in FP16 (G, e^-G, 1 + e^-G, quotient)"},
    {Bug::dual_gate_up_swapped, "dual_gate_up_swapped", Declares::dual, "dual GEMM: silu(U) * G instead of silu(G) * U"},
    {Bug::dual_alpha2_ignored, "dual_alpha2_ignored", Declares::dual, "dual GEMM: U computed without alpha2"},
    {Bug::grouped_next_expert_scales, "grouped_next_expert_scales", Declares::grouped_packed,
     "grouped, packed: expert g reads expert g+1's B scales (invisible when experts share scales, flashinfer#5438)"},
    {Bug::grouped_stops_at_empty, "grouped_stops_at_empty", Declares::grouped,
     "grouped: the group loop ends at the first empty expert, later experts' output unwritten (MSLK#158)"},
    {Bug::grouped_empty_writes_row, "grouped_empty_writes_row", Declares::grouped_packed,
     "grouped, packed: an empty expert writes a row of zeros at its C offset, the next expert's row 0 or past the last row (MSLK#158)"},
    {Bug::grouped_alpha_of_first, "grouped_alpha_of_first", Declares::grouped,
     "grouped: every expert scaled by expert 0's alpha (a wrong per-group alpha, TransformerEngine#2971)"},
    {Bug::grouped_offsets_32bit, "grouped_offsets_32bit", Declares::grouped_packed,
     "grouped, packed: B_g's offset g*n*k/2 in 32-bit int, wrong once the packed B passes 2^31 bytes", true},
};

constexpr uint32_t kAllOutTypes = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);

// Quantizers (SPEC section 2): the bugs of public quantizers (shared/evidence/
// field-study-2026-12.md), each in the host quantizer of kernels/host/host_quantize.h.
using QBug = kern::quant::Bug;
struct QuantBugEntry {
  QBug bug;
  const char* name;  // the mutant is mut_host_<name>
  uint32_t flags, formats, recipes;
  const char* what;
};
constexpr uint32_t kNvfp4 = 1u << NVFP4_FORMAT_NVFP4;
constexpr uint32_t kTe = 1u << NVFP4_RECIPE_TE;
constexpr uint32_t kMx = (1u << NVFP4_FORMAT_MXFP4) | (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);

const QuantBugEntry kQuantBugs[] = {
    {QBug::none, "quantize_unmutated", 0, kNvfp4, kTe | (1u << NVFP4_RECIPE_REF) | (1u << NVFP4_RECIPE_TORCHAO),
     "control: the quantizer engine, te, ref and torchao, no bug (must pass)"},
    {QBug::none, "quantize_mx_unmutated", 0, kMx, 1u << NVFP4_RECIPE_MX_RCEIL,
     "control: the quantizer engine, MX formats by mx_rceil, no bug (must pass)"},
    {QBug::subnormal_scale_decode, "q_subnormal_scale_decode", 0, kNvfp4, kTe,
     "E4M3 subnormal block scales decoded with the normal formula when forming os (flashinfer PR #3932)"},
    {QBug::zero_codes, "q_zero_codes", 0, kNvfp4, kTe,
     "every code written 0 (a conversion compiled out on one architecture, TransformerEngine PR #3281)"},
    {QBug::no_global_scale, "q_no_global_scale", 0, kNvfp4, kTe,
     "the global scale ignored: blocks with amax > 2688 clip (kekzl/imp#1544)"},
    {QBug::other_association, "q_other_association", 0, kNvfp4, kTe,
     "te's scale as gs * (amax * c6) instead of amax * (gs * c6): the fast kernels' association under the te recipe"},
    {QBug::scale_toward_zero, "q_scale_toward_zero", 0, kNvfp4, kTe, "the E4M3 block scale rounded toward zero"},
    {QBug::os_from_unrounded, "q_os_from_unrounded", 0, kNvfp4, kTe,
     "the encode factor from the block scale before its E4M3 rounding"},
    {QBug::decode_as_encode, "q_decode_as_encode", 0, kNvfp4, kTe,
     "the global scale used the other way round (the decode convention 1/gs taken as the encode scale)"},
    {QBug::padding_not_written, "q_padding_not_written", 0, kNvfp4, kTe,
     "the permuted SFQ's padding cells left as they were instead of 0x00 (vLLM#45741 class)"},
    {QBug::linear_scales_declared_permuted, "q_linear_scales_declared_permuted", 0, kNvfp4, kTe,
     "writes linear scales where the permuted layout is asked for (vllm PR #42089)"},
    {QBug::tile_amax_16_columns, "q_tile_amax_one_row", NVFP4_FLAG_QUANT_2D, kNvfp4, kTe,
     "16 x 16 tiles: the amax taken over the tile's first row (16 columns) only"},
    {QBug::row0_global_scale, "q_row0_global_scale", NVFP4_FLAG_ROW_GLOBAL_SCALE, kNvfp4, kTe,
     "per-row global scales: every row quantized with row 0's (cutlass PR #3392's class: one group's scale for all)"},
    {QBug::rceil_as_floor, "q_rceil_as_floor", 0, kMx, 1u << NVFP4_RECIPE_MX_RCEIL,
     "mx_rceil's E8M0 scale rounded down instead of up (the OCP floor rule under the rceil recipe)"},
    {QBug::none, "quantize_sr_unmutated", NVFP4_FLAG_STOCHASTIC, kNvfp4, kTe,
     "control: the quantizer engine with stochastic rounding, te, no bug (must pass)"},
    {QBug::sr_constant_source, "q_sr_constant_source", NVFP4_FLAG_STOCHASTIC, kNvfp4, kTe,
     "stochastic rounding whose random source ignores the seed: every seed gives the same codes"},
    {QBug::sr_biased_source, "q_sr_biased_source", NVFP4_FLAG_STOCHASTIC, kNvfp4, kTe,
     "stochastic rounding up with probability p^2 instead of p (a biased random source)"},
    {QBug::zero_codes, "q_sr_zero_codes", NVFP4_FLAG_STOCHASTIC, kNvfp4, kTe,
     "stochastic rounding returning all-zero codes (a device assert compiled out, TransformerEngine PR #3281)"},
};

// GEMM, dual GEMM and grouped GEMM with block-scaled output (SPEC section 2, rule 8): the host
// engine of kernels/host/host_gemm_nvfp4_out.h and the CUDA one of
// kernels/cuda/gemm_nvfp4_out_launch.cuh (the built-ins' code), each with one quantizer bug in the
// epilogue both share (kernels/block_scaled_epilogue.h): the host kills show the CUDA bugs'
// arithmetic. A bug of the grouped epilogue only declares grouped GEMM only, so every case shows it.
struct OutBugEntry {
  QBug bug;
  const char* name;  // the mutant is mut_host_<name> / mut_cuda_<name> (ctl_ for the control)
  bool grouped_only;
  const char* what;
};
const OutBugEntry kOutBugs[] = {
    {QBug::none, "out_unmutated", false,
     "control: GEMM, dual GEMM and grouped GEMM with block-scaled output, te/ref/fast/torchao, no bug (must pass)"},
    {QBug::scale_toward_zero, "out_scale_toward_zero", false, "block-scaled output: the E4M3 block scale rounded toward zero"},
    {QBug::os_from_unrounded, "out_os_from_unrounded", false,
     "block-scaled output: the encode factor from the block scale before its E4M3 rounding"},
    {QBug::padding_not_written, "out_padding_not_written", false,
     "block-scaled output: the permuted SFQ's padding cells left as they were (the vLLM#45741 class)"},
    {QBug::group0_global_scale, "out_group0_global_scale", true,
     "grouped GEMM with block-scaled output: every group encoded with group 0's global scale (cutlass PR #3392)"},
};

// MX GEMV/GEMM (SPEC section 1's block formats): the bugs of MX kernels in public threads, each
// in the host MX engine of kernels/host/host_mx_gemm.h and again in the naive CUDA MX GEMM
// (kernels/mx_gemm_core.h, the built-in mx_gemm_naive's arithmetic), declaring the three MX formats
// for A and B so that every pair, mixed ones included, is drawn; and the packed grouped GEMM's
// scale offsets (host engine only, beside its control).
using MxBug = kern::mx::MxBug;
struct MxBugEntry {
  MxBug bug;
  const char* name;  // ctl_host_<name> for the honest ones, else mut_host_<name>
  const char* what;
  bool grouped_packed = false;  // grouped GEMM in the packed arrangement only (host engine)
};
const MxBugEntry kMxBugs[] = {
    {MxBug::none, "mx_unmutated", "control: the host MX engine, any MX format pair, no bug (must pass)"},
    {MxBug::blocks_reversed, "mx_blocks_reversed",
     "control: the host MX engine adding its blocks from the last to the first (another honest summation order; must pass)"},
    {MxBug::e8m0_zero_as_zero, "mx_e8m0_zero_is_zero",
     "E8M0 scale 0x00 read as 0 instead of 2^-127 (Triton's test helper's decode)"},
    {MxBug::neighbour_block_scale, "mx_neighbour_block_scale",
     "an element's scale read from the next block (invisible when every block has one exponent, flashinfer#4087)"},
    {MxBug::block32_as_16, "mx_block_of_16", "MX blocks taken as 16 elements (NVFP4's) instead of 32"},
    {MxBug::e5m2_as_e4m3, "mx_e5m2_as_e4m3", "E5M2 elements decoded as E4M3"},
    {MxBug::mxfp8_as_nibbles, "mx_mxfp8_as_nibbles", "the MXFP8 operand's bytes unpacked as two E2M1 nibbles"},
    {MxBug::e8m0_bias_126, "mx_e8m0_bias_126", "E8M0 exponent bias 126 instead of 127 (every scale doubled)"},
    {MxBug::nan_scale_ignored, "mx_nan_scale_ignored", "E8M0 NaN scale 0xFF read as 1.0"},
    {MxBug::none, "mx_grouped_packed_unmutated",
     "control: the host MX engine's packed grouped GEMM, any MX format pair, no bug (must pass)", true},
    {MxBug::group0_scales, "mx_grouped_group0_scales",
     "packed grouped GEMM reading every group's SFA and SFB without the group's offset (group 0's scales)", true},
};

void declare(nvfp4_kernel_info& info, Declares d) {
  info.out_types = kAllOutTypes;
  switch (d) {
    case Declares::out_bf16: info.out_types = 1u << NVFP4_OUT_BF16; break;
    case Declares::out_fp32: info.out_types = 1u << NVFP4_OUT_FP32; break;
    case Declares::dual: info.ops = 1u << NVFP4_OP_DUAL_GEMM; break;
    case Declares::grouped: info.ops = 1u << NVFP4_OP_GROUPED_GEMM; break;
    case Declares::grouped_packed:
      info.ops = 1u << NVFP4_OP_GROUPED_GEMM;
      info.flags |= NVFP4_FLAG_GROUPS_PACKED;
      break;
    case Declares::gemm_all_outs: break;
  }
}

#if defined(NVFP4_MUTANTS_WITH_CUDA)
// Quantizer bugs of the CUDA engine only: a bug that shows past 2^31 elements, which only the
// huge tier of a CUDA kernel's schedule reaches (a host mutant of it would survive every run).
const QuantBugEntry kCudaQuantBugs[] = {
    {QBug::row_offset_32bit, "q_row_offset_32bit", 0, kNvfp4, kTe,
     "X's element offsets row * k + x in 32 bits: past 2^31 elements they wrap (flashinfer PR #4263: illegal "
     "addresses from m = 798,916 at k = 2688)"},
};
#endif

struct Entry;
int run_gemm(const Entry& e, const nvfp4_problem* p);

struct Entry {
  nvfp4_kernel_info info;
  Bug bug;
  unsigned engine;  // kHost, kCuda or kTensorCore
  std::string what;
  bool gemv_path_only = false;  // the bug applies to GEMV problems only
  QBug qbug = QBug::none;
  MxBug mxbug = MxBug::none;
  // The kernel with the entry's bug: the GEMV/GEMM engines by default; the version-2 engine
  // (mutant_v2_host.cc), a quantizer (kernels/host/host_quantize.h) with qbug, a GEMM with
  // block-scaled output (host_gemm_nvfp4_out.h, gemm_nvfp4_out_launch.cuh) with qbug, or the MX
  // engine with mxbug (kernels/host/host_mx_gemm.h, or kernels/mx_gemm_core.h on CUDA). A new
  // engine or op is one more function here, not a flag and a branch.
  int (*run)(const Entry& e, const nvfp4_problem* p) = run_gemm;
};

int run_out(const Entry& e, const nvfp4_problem* p) {
#if defined(NVFP4_MUTANTS_WITH_CUDA)
  if (e.engine == nvfp4::mutants::kCuda) return nvfp4::mutants::run_cuda_out_mutant(e.info, p, static_cast<int>(e.qbug));
#endif
  if (p->op == NVFP4_OP_GROUPED_GEMM) return nvfp4::kern::quant::run_grouped_gemm_nvfp4_out(e.info, p, e.qbug);
  return nvfp4::kern::quant::run_gemm_nvfp4_out(e.info, p, e.qbug);
}

int run_quant(const Entry& e, const nvfp4_problem* p) {
#if defined(NVFP4_MUTANTS_WITH_CUDA)
  if (e.engine == nvfp4::mutants::kCuda) return nvfp4::mutants::run_cuda_quantize_mutant(e.info, p, static_cast<int>(e.qbug));
#endif
  return nvfp4::kern::quant::quantize_on_host(p, e.info, e.qbug);
}

int run_mx(const Entry& e, const nvfp4_problem* p) {
#if defined(NVFP4_MUTANTS_WITH_CUDA)
  if (e.engine == nvfp4::mutants::kCuda) return nvfp4::mutants::run_cuda_mx_mutant(e.info, p, static_cast<int>(e.mxbug));
#endif
  if (p->op == NVFP4_OP_GROUPED_GEMM) return nvfp4::kern::mx::run_mx_grouped(e.info, p, e.mxbug);
  return nvfp4::kern::mx::run_mx(e.info, p, e.mxbug);
}

// What the GEMV/GEMM and version-2 engines share before they run: the declaration enforced (or,
// for two bugs, not), and the bug limited to GEMV where it lives on that path only. False (rc
// set) when the problem is refused.
bool admitted(const Entry& e, const nvfp4_problem* p, int* rc, Bug* bug) {
  nvfp4_kernel_info enforced = e.info;
  // The bug: the declared k multiple is never enforced.
  if (e.bug == Bug::unsupported_shape_computed) enforced.k_multiple = 1;
  *rc = NVFP4_UNSUPPORTED;
  if (!nvfp4::kern::problem_fits(enforced, p)) return false;
  // The bug: a shape inside the declaration refused anyway.
  if (e.bug == Bug::refuses_supported && p->k % 64 != 0) return false;
  *bug = e.gemv_path_only && p->op != NVFP4_OP_GEMV ? Bug::none : e.bug;
  return true;
}

int run_v2(const Entry& e, const nvfp4_problem* p) {
  int rc = NVFP4_OK;
  Bug bug = Bug::none;
  if (!admitted(e, p, &rc, &bug)) return rc;
  const bool packed = e.info.flags & NVFP4_FLAG_GROUPS_PACKED;
#if defined(NVFP4_MUTANTS_WITH_CUDA)
  if (e.engine == nvfp4::mutants::kCuda) return nvfp4::mutants::run_cuda_v2_mutant(e.bug, packed, p);
#endif
  return nvfp4::mutants::run_host_v2_mutant(e.bug, packed, p);
}

int run_gemm(const Entry& e, const nvfp4_problem* p) {
  int rc = NVFP4_OK;
  Bug bug = Bug::none;
  if (!admitted(e, p, &rc, &bug)) return rc;
#if defined(NVFP4_MUTANTS_WITH_CUDA)
  if (e.engine == nvfp4::mutants::kTensorCore) return nvfp4::mutants::run_tensor_core_mutant(bug, p);
  if (e.engine == nvfp4::mutants::kCuda) return nvfp4::mutants::run_cuda_mutant(bug, p);
#endif
  return nvfp4::mutants::run_host_mutant(bug, p);
}

// Built once; names live in a deque so their c_str() stays put.
struct Catalog {
  std::deque<std::string> names;
  std::vector<Entry> entries;

  void add(const std::string& name, Bug bug, unsigned engine, const std::string& what, bool gemv_path_only = false) {
    names.push_back(name);
    nvfp4_kernel_info info{};
    info.abi_version = NVFP4_ABI_VERSION;
    info.name = names.back().c_str();
    info.memory = engine == kHost ? NVFP4_MEMORY_HOST : NVFP4_MEMORY_CUDA;
    info.ops = kBothOps;
    info.sf_layouts = kBothLayouts;
    info.min_sm = engine == kHost ? 0 : 90;
    info.m_multiple = info.n_multiple = info.k_multiple = 1;
    // The tensor-core engine adds on matrix units and says so (SPEC section 3), except the mutant
    // whose bug is the old gemm_tc's: subnormal operands while declaring IEEE accumulation.
    info.flags = engine == kTensorCore && bug != Bug::mma_subnormal_operands ? NVFP4_FLAG_MMA_ACCUMULATE : 0;
    if (bug == Bug::unsupported_shape_computed) info.k_multiple = 64;
    entries.push_back({info, bug, engine, what, gemv_path_only});
  }

  void add_v2(const std::string& name, Bug bug, Declares d, const std::string& what, unsigned engine = kHost) {
    add(name, bug, engine, what);
    declare(entries.back().info, d);
    // The CUDA engine's grouped kernel has a grid row per group.
    if (engine == kCuda && (d == Declares::grouped || d == Declares::grouped_packed)) entries.back().info.max_groups = 65535;
    entries.back().run = run_v2;
  }

  void add_quant(const QuantBugEntry& e, unsigned engine = kHost) {
    const std::string memory = engine == kHost ? "host_" : "cuda_";
    // big_: killed only by a case past every budget of the mutants table (the huge tier), as
    // big_cuda_grouped_offsets_32bit is; the tables and their tests leave it to gpu-check.sh huge.
    const char* kind = e.bug == QBug::none ? "ctl_" : e.bug == QBug::row_offset_32bit ? "big_" : "mut_";
    add(kind + memory + e.name, Bug::none, engine, e.what);
    nvfp4_kernel_info& info = entries.back().info;
    info.ops = 1u << NVFP4_OP_QUANTIZE;
    info.flags = e.flags;
    info.in_types = (1u << NVFP4_IN_FP16) | (1u << NVFP4_IN_BF16) | (1u << NVFP4_IN_FP32);
    info.q_formats = e.formats;
    info.recipes = e.recipes;
    entries.back().run = run_quant;
    entries.back().qbug = e.bug;
  }

  void add_out(const OutBugEntry& e, unsigned engine = kHost) {
    const std::string memory = engine == kHost ? "host_" : "cuda_";
    // big_: killed only by a case past every budget of the mutants table (the huge tier), as
    // big_cuda_grouped_offsets_32bit is; the tables and their tests leave it to gpu-check.sh huge.
    const char* kind = e.bug == QBug::none ? "ctl_" : e.bug == QBug::row_offset_32bit ? "big_" : "mut_";
    add(kind + memory + e.name, Bug::none, engine, e.what);
    nvfp4_kernel_info& info = entries.back().info;
    info.ops = e.grouped_only ? 1u << NVFP4_OP_GROUPED_GEMM
                              : (1u << NVFP4_OP_GEMM) | (1u << NVFP4_OP_DUAL_GEMM) | (1u << NVFP4_OP_GROUPED_GEMM);
    info.out_types = 1u << NVFP4_OUT_NVFP4;
    info.recipes = (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_REF) | (1u << NVFP4_RECIPE_FAST) |
                   (1u << NVFP4_RECIPE_TORCHAO);
    // The CUDA engine's grouped kernel has a grid row per group.
    if (engine == kCuda) info.max_groups = 65535;
    entries.back().run = run_out;
    entries.back().qbug = e.bug;
  }

  void add_mx(const MxBugEntry& e, unsigned engine = kHost) {
    const bool honest = e.bug == MxBug::none || e.bug == MxBug::blocks_reversed;
    // A bug of the grouped path only: every case grouped, so it is drawn at once.
    add(std::string(honest ? "ctl_" : "mut_") + (engine == kHost ? "host_" : "cuda_") + e.name, Bug::none, engine, e.what);
    nvfp4_kernel_info& info = entries.back().info;
    info.out_types = kAllOutTypes;
    info.a_formats = info.b_formats = kMx;
    if (e.grouped_packed) {
      info.ops = 1u << NVFP4_OP_GROUPED_GEMM;
      info.flags |= NVFP4_FLAG_GROUPS_PACKED;
    }
    entries.back().run = run_mx;
    entries.back().mxbug = e.bug;
  }

  Catalog() {
    add("ctl_host_unmutated", Bug::none, kHost, "control: the host mutant engine with no bug (must pass)");
#if defined(NVFP4_MUTANTS_WITH_CUDA)
    add("ctl_cuda_unmutated", Bug::none, kCuda, "control: the CUDA mutant engine with no bug (must pass)");
    add("ctl_cuda_mma_unmutated", Bug::none, kTensorCore,
        "control: the tensor-core mutant engine with no bug (must pass)");
#endif
    for (const BugEntry& e : kBugs) {
      if (e.engines & kHost) add(std::string("mut_host_") + e.name, e.bug, kHost, e.what);
    }
    for (const BugEntry& e : kGemvPathBugs) {
      if (e.engines & kHost) add(std::string("mut_host_gemv_path_") + e.name, e.bug, kHost, e.what, true);
    }
    add_v2("ctl_host_out_types_unmutated", Bug::none, Declares::gemm_all_outs,
           "control: the version-2 host engine, GEMV/GEMM in FP16, BF16 and FP32, no bug (must pass)");
    add_v2("ctl_host_dual_unmutated", Bug::none, Declares::dual, "control: the version-2 host engine's dual GEMM, no bug (must pass)");
    add_v2("ctl_host_grouped_unmutated", Bug::none, Declares::grouped,
           "control: the version-2 host engine's grouped GEMM, separate arrangement, no bug (must pass)");
    add_v2("ctl_host_grouped_packed_unmutated", Bug::none, Declares::grouped_packed,
           "control: the version-2 host engine's grouped GEMM, packed arrangement, no bug (must pass)");
    for (const V2BugEntry& e : kV2Bugs)
      add_v2(std::string(e.large_only ? "big_host_" : "mut_host_") + e.name, e.bug, e.declares, e.what);
#if defined(NVFP4_MUTANTS_WITH_CUDA)
    add_v2("ctl_cuda_out_types_unmutated", Bug::none, Declares::gemm_all_outs,
           "control: the version-2 CUDA engine, GEMV/GEMM in FP16, BF16 and FP32, no bug (must pass)", kCuda);
    add_v2("ctl_cuda_dual_unmutated", Bug::none, Declares::dual, "control: the version-2 CUDA engine's dual GEMM, no bug (must pass)",
           kCuda);
    add_v2("ctl_cuda_grouped_unmutated", Bug::none, Declares::grouped,
           "control: the version-2 CUDA engine's grouped GEMM, separate arrangement, no bug (must pass)", kCuda);
    add_v2("ctl_cuda_grouped_packed_unmutated", Bug::none, Declares::grouped_packed,
           "control: the version-2 CUDA engine's grouped GEMM, packed arrangement, no bug (must pass)", kCuda);
    for (const V2BugEntry& e : kV2Bugs)
      add_v2(std::string(e.large_only ? "big_cuda_" : "mut_cuda_") + e.name, e.bug, e.declares, e.what, kCuda);
#endif
#if defined(NVFP4_MUTANTS_WITH_CUDA)
    for (unsigned engine : {kCuda, kTensorCore}) {
      for (const BugEntry& e : kBugs) {
        if (e.engines & engine) add(std::string("mut_cuda_") + e.name, e.bug, engine, e.what);
      }
    }
    for (const BugEntry& e : kGemvPathBugs) {
      if (e.engines & kCuda) add(std::string("mut_cuda_gemv_path_") + e.name, e.bug, kCuda, e.what, true);
    }
#endif
    for (const QuantBugEntry& e : kQuantBugs) add_quant(e);
    for (const OutBugEntry& e : kOutBugs) add_out(e);
    for (const MxBugEntry& e : kMxBugs) add_mx(e);
#if defined(NVFP4_MUTANTS_WITH_CUDA)
    for (const QuantBugEntry& e : kQuantBugs) add_quant(e, kCuda);
    for (const QuantBugEntry& e : kCudaQuantBugs) add_quant(e, kCuda);
    for (const OutBugEntry& e : kOutBugs) add_out(e, kCuda);
    // The CUDA engine sums in its own order only: no second honest order there.
    for (const MxBugEntry& e : kMxBugs)
      if (e.bug != MxBug::blocks_reversed && !e.grouped_packed) add_mx(e, kCuda);
#endif
  }
};

const Catalog& catalog() {
  static const Catalog c;
  return c;
}

}  // namespace
}  // namespace nvfp4::mutants

using nvfp4::mutants::Bug;
using nvfp4::mutants::catalog;

extern "C" __attribute__((visibility("default"))) int nvfp4_kernel_count(void) {
  return static_cast<int>(catalog().entries.size());
}

extern "C" __attribute__((visibility("default"))) const nvfp4_kernel_info* nvfp4_kernel_get(int index) {
  if (index < 0 || index >= nvfp4_kernel_count()) return nullptr;
  return &catalog().entries[static_cast<size_t>(index)].info;
}

extern "C" __attribute__((visibility("default"))) const char* nvfp4_kernel_describe(int index) {
  if (index < 0 || index >= nvfp4_kernel_count()) return nullptr;
  return catalog().entries[static_cast<size_t>(index)].what.c_str();
}

extern "C" __attribute__((visibility("default"))) int nvfp4_kernel_run(int index, const nvfp4_problem* p) {
  if (index < 0 || index >= nvfp4_kernel_count()) return NVFP4_ERROR;
  const auto& e = catalog().entries[static_cast<size_t>(index)];
  return e.run(e, p);
}
