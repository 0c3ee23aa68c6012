// The exact reference for block-scaled operands of any of SPEC.md's four formats (nvfp4, mxfp4,
// mxfp8_e4m3, mxfp8_e5m2; A and B may differ), GEMV and GEMM, and through exact_mx_result grouped
// GEMM (each group a GEMM) and dual GEMM (G and U each a GEMM). With E8M0 scales products span
// about 2^-300 to 2^300, so sums are kept in a wide fixed-point (Kulisch) accumulator and rounded
// once to the output type; Inf elements (E5M2) follow IEEE.
//
// MxProblem is the reference's own view of a gemv/gemm Problem (mx_problem below): an NVFP4-only
// Problem maps onto it one to one (both operands BlockFormat::nvfp4).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reference/exact_gemm.h"
#include "reference/mx_accumulate.h"  // Kulisch, MxElement
#include "reference/oracle.h"
#include "reference/problem.h"

namespace nvfp4 {

// One operand: rows x k elements per batch of `format`, the data as SPEC section 2 lays it out
// (E2M1 packed two to a byte, E4M3 and E5M2 one byte each) and its scales in LINEAR order
// (l * rows * kb, kb = ceil(k / block_size(format))).
struct MxOperand {
  BlockFormat format = BlockFormat::nvfp4;
  int64_t rows = 0, k = 0, l = 1;
  std::vector<uint8_t> data, scales;

  int64_t kb() const { return (k + block_size(format) - 1) / block_size(format); }
  int64_t data_bytes() const { return packs_nibbles(format) ? l * rows * k / 2 : l * rows * k; }
  int64_t scale_bytes() const { return l * rows * kb(); }
};

// A GEMV (n = 1) or GEMM with operands of any formats. `semantics` applies to NVFP4 operands'
// E4M3 scales only.
struct MxProblem {
  Op op = Op::gemm;
  int64_t m = 1, n = 1, k = 32, l = 1;
  float alpha = 1.0f;
  OutType out_type = OutType::fp16;
  ScaleSemantics semantics = ScaleSemantics::ue4m3;
  MxOperand a, b;  // a.rows = m, b.rows = n
  std::optional<std::vector<uint32_t>> expect;  // l*m*n words, C order
  std::string note;
};

// Throws std::invalid_argument naming what is wrong (shape, operand sizes, k odd for an E2M1
// operand, op other than gemv/gemm).
void validate(const MxProblem& p);

// Every output element's facts, C order ((b*m + i)*n + j). Validates p first.
std::vector<MxElement> exact_mx(const MxProblem& p);
// Whether two elements' facts agree in every field (both accumulators limb by limb, t, g, the
// NaN and Inf flags), and one element's facts in words (the accumulators as hex limbs, top first):
// for tests comparing two sources of them.
bool same_mx_facts(const MxElement& x, const MxElement& y);
std::string describe_mx_facts(const MxElement& e);

// RN_out(alpha * r) once; NaN (the type's quiet NaN) for e.nan; +-Inf for an Inf element
// (alpha = 0 times Inf gives NaN); an exact zero is +0.
uint32_t round_mx(const MxElement& e, float alpha, OutType type);
// round_mx of every element.
std::vector<uint32_t> exact_mx_words(const MxProblem& p);

// SPEC section 3 rule 9: rules 1-4 with the element's E8M0/E4M3/E5M2 values, the same policies
// and accumulation rules as judge_element. An Inf result accepts only that Inf.
ElementVerdict judge_mx_element(const MxElement& e, float alpha, uint32_t actual, const Policy& policy, OutType type);

// p (gemv, gemm, or dual_gemm's G = A*B; any operand formats, with data) as an MxProblem: the
// same data, linear scales. A group of a grouped problem: mx_problem(group_problem(p, g)).
MxProblem mx_problem(const Problem& p);
MxProblem mx_problem(Problem&& p);  // the same, its data moved, not copied
// The reference of a Problem with MX operands, every op of the GEMM family: `mx` holds every
// element's facts (grouped: the groups' one after another), `elems` only their NaN flags (what
// code reading NVFP4 facts may look at), the words RN_out(alpha * r) with each group's alpha.
// Dual GEMM: `mx` G's facts, `mx2` U's (alpha2), `elems2` U's NaN flags, `dual` silu(G), U and v
// as exact_gemm.h computes them from the exact sums, the words RN_out(v) (an Inf in G or U
// follows IEEE with silu(+Inf) = +Inf and silu(-Inf) = -0). exact_gemm(p) calls it for such
// problems.
ExactResult exact_mx_result(const Problem& p);
// The same from another source of every GEMM's facts (each a GEMV or GEMM MxProblem: the problem,
// a group of it, a dual problem's G or U), which must give exact_mx's: the GPU reference's.
using MxElementsFn = std::function<std::vector<MxElement>(const MxProblem&)>;
ExactResult exact_mx_result(const Problem& p, const MxElementsFn& elements);
// Element `index` of p (as in ExactResult) judged by rule 9, with `alpha` its group's (grouped)
// or the problem's; dual GEMM by rule 6 over G's and U's facts.
ElementVerdict judge_mx_output(const Problem& p, const ExactResult& ref, int64_t index, float alpha, uint32_t actual,
                               const Policy& policy);

// A case file (SPEC section 4) with `a_format`/`b_format`, GEMV or GEMM with explicit data:
// keys op m n k l alpha out_type scale_semantics a_format b_format a b sfa sfb expect note
// (sfa/sfb in linear order; sf_layout may be given, as linear or permuted, and is not kept).
// Throws CaseError "FILE:LINE: what is wrong". write_mx_case writes what parse reads back.
MxProblem parse_mx_case(const std::string& text, const std::string& filename);
std::string write_mx_case(const MxProblem& p);

}  // namespace nvfp4
