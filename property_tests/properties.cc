// The twelve properties. Comparisons between two runs are bit for bit for
// deterministic kernels and, for kernels that declare NONDETERMINISTIC, on the outputs the oracle
// pins to one value (the exact regime), where any correct kernel is deterministic too.
#include "harness/ops/op_module.h"
#include "property_tests/properties.h"

#include <rapidcheck.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <cmath>
#include <cstring>

#include "harness/judge/case_check.h"
#include "harness/process/executor.h"
#include "harness/engine/report.h"
#include "kernels/registry.h"
#include "reference/formats.h"
#include "reference/quantize.h"
#include "reference/scale_layout.h"

namespace nvfp4::prop {
namespace {

std::string describe_oracle_failure(const Problem& p, const DataSpec& spec, const OracleSummary& s) {
  const ElementVerdict& v = s.first;
  char text[512];
  std::snprintf(text, sizeof text,
                "%lld of %lld outputs wrong; first C[%lld][%lld][%lld] = %g (%s), expected %g (%s)%s, "
                "error %.3g ulps = %.3g x bound; case %s",
                static_cast<long long>(s.failing), static_cast<long long>(s.elements),
                static_cast<long long>(s.first_b), static_cast<long long>(s.first_i),
                static_cast<long long>(s.first_j), fp16_to_double(s.first_actual), hex16(s.first_actual).c_str(),
                v.expected, hex16(v.expected_bits).c_str(), v.exact_regime ? " bit for bit (exact regime)" : "",
                v.error_ulps, v.error_over_bound, describe(p, spec).c_str());
  return text;
}

// Elements whose two outputs must agree: all of them for a deterministic kernel, the exact-regime
// ones otherwise (mask may be empty for deterministic kernels: it is then not consulted).
bool must_agree(const Kernel& k, const std::vector<bool>& mask, size_t index) {
  return deterministic(k) || mask[index];
}

std::vector<bool> mask_if_needed(const Kernel& k, const Problem& p) {
  if (deterministic(k)) return {};
  return exact_mask(p, op_reference(p), policy_of(k));
}

// Compares two outputs on the elements outside `changed` (a predicate on the C-order index):
// the first difference fails the property with `what` describing the change.
template <typename Changed>
void require_unchanged_outside(const Kernel& k, const Problem& p, const DataSpec& spec,
                               const std::vector<uint16_t>& before, const std::vector<uint16_t>& after,
                               const std::vector<bool>& mask, Changed changed, const Property& property,
                               const std::string& what) {
  for (size_t x = 0; x < before.size(); ++x) {
    if (changed(static_cast<int64_t>(x)) || !must_agree(k, mask, x)) continue;
    const bool equal = deterministic(k) ? same_bits_or_nan(before[x], after[x]) : same_value(before[x], after[x]);
    if (!equal) {
      fail_case(k, p, property.name,
                what + " changed " + element_name(p, static_cast<int64_t>(x)) + " from " + hex16(before[x]) +
                    " to " + hex16(after[x]) + "; case " + describe(p, spec));
    }
  }
}

// A row, column or batch index drawn BEFORE the case, so that it shrinks first (toward 0) and
// keeps its meaning while the shape shrinks under it: RapidCheck shrinks picks left to right and
// redraws every later pick from its original randomness, so an index drawn as raw % size after
// the shape would jump whenever the shape shrank, and the failure with it.
int64_t draw_index_first(Draws& d, int64_t max) { return static_cast<int64_t>(d.below(static_cast<uint64_t>(max))); }
int64_t clamp_index(int64_t raw, int64_t size) { return std::min(raw, size - 1); }

// ----- 1. Agrees with the exact reference under its oracle policy ------------------------------

void check_agrees(const Kernel& k, Draws& d, CaseTags& tags) {
  const DrawnCase c = draw_case(d, k, {});
  const Problem& p = c.problem;
  tags.shape(p);
  const std::vector<uint16_t> out = run_or_fail(k, p, kAgreesWithReference.name);
  const ExactResult ref = op_reference(p);
  const OracleSummary s = judge(p, ref, out.data(), policy_of(k));
  tags.exact(s.exact_regime, s.elements);
  if (s.any_failure()) fail_case(k, p, kAgreesWithReference.name, describe_oracle_failure(p, c.spec, s));
}

// ----- 12. Every problem it declares (grouped, dual, every output type) agrees too --------------

// The one draw as the schedule makes it, every op and output type the kernel declares: grouped
// GEMMs with empty groups and their own scales and alphas, dual GEMMs, BF16 and FP32 words.
void check_every_problem(const Kernel& k, Draws& d, CaseTags& tags) {
  const DrawnCase c = nvfp4::draw_case(d, *k.info, {}, property_limits());
  const Problem& p = c.problem;
  tags.shape(p);
  if (op_quantizes(p.op) || p.out_type == OutType::nvfp4) {
    // A quantizer's and a block-scaled output's bytes are judged by their op's oracle (rules 7
    // and 8), with every check of a case.
    InProcessExecutor executor(k, kDefaultCallTimeout);
    const CaseOutcome r = check_case(executor, p, CaseOptions{});
    if (r.verdict == CaseOutcome::Verdict::fail)
      fail_case(k, p, kEveryProblemAgreesWithReference.name,
                "check " + std::string(check_name(r.finding->check)) + " failed: " + r.finding->message);
    return;
  }
  std::vector<uint32_t> out;
  try {
    InProcessExecutor executor(k, kDefaultCallTimeout);
    out = run_kernel_once(executor, p);
  } catch (const std::exception& e) {
    fail_case(k, p, kEveryProblemAgreesWithReference.name, std::string("the kernel run failed: ") + e.what());
  }
  const ExactResult ref = op_reference(p);
  const OracleSummary s = judge_words(p, ref, out.data(), policy_of(k));
  tags.exact(s.exact_regime, s.elements);
  if (s.any_failure())
    fail_case(k, p, kEveryProblemAgreesWithReference.name,
              oracle_text(p.out_type, s, policy_of(k)) + "; case " + describe(p, c.spec));
}

// ----- 2. Doubling every scale of one A row doubles that output row exactly --------------------

void check_doubling(const Kernel& k, Draws& d, CaseTags& tags) {
  const ShapeLimits lim = property_limits();
  const int64_t raw_b = draw_index_first(d, lim.max_l), raw_i = draw_index_first(d, lim.max_m);
  CaseConstraints o;
  o.exact_regime = true;
  const DrawnCase c = draw_case(d, k, o);
  const Problem& p = c.problem;
  tags.shape(p);
  const int64_t b = clamp_index(raw_b, p.l), i = clamp_index(raw_i, p.m);
  const int64_t row = b * p.m + i;
  Problem q = p;
  for (int64_t s = 0; s < p.kb(); ++s) {
    const int doubled = e4m3_doubled(p.sfa[row * p.kb() + s]);
    RC_PRE(doubled >= 0);  // narrow scales always double; kept as a guard
    q.sfa[row * p.kb() + s] = static_cast<uint8_t>(doubled);
  }
  const std::vector<uint16_t> c1 = run_or_fail(k, p, kDoublingRowScalesDoublesRow.name);
  const std::vector<uint16_t> c2 = run_or_fail(k, q, kDoublingRowScalesDoublesRow.name);
  const std::vector<bool> mask = exact_mask(p, op_reference(p), policy_of(k));
  tags.exact(std::count(mask.begin(), mask.end(), true), static_cast<int64_t>(mask.size()));
  const std::string what = "doubling the scales of A row (batch " + std::to_string(b) + ", row " + std::to_string(i) + ")";
  for (int64_t j = 0; j < p.n; ++j) {
    const size_t x = static_cast<size_t>(row * p.n + j);
    if (!mask[x]) continue;
    const uint16_t h1 = c1[x], h2 = c2[x];
    const int e = (h1 >> 10) & 0x1F;
    bool ok = true;
    if (fp16_is_zero(h1)) {
      ok = fp16_is_zero(h2);
    } else if (e >= 2 && e <= 29) {
      // Normal on both sides (the value and its double): scaling by 2 commutes with rounding, so
      // the double is the same significand one binade up. Subnormal, near-subnormal (e = 1) and
      // near-overflow (e >= 30) outputs round differently when doubled and are not compared.
      ok = h2 == static_cast<uint16_t>(h1 + 0x0400u);
    }
    if (!ok) {
      fail_case(k, p, kDoublingRowScalesDoublesRow.name,
                what + " took " + element_name(p, static_cast<int64_t>(x)) + " from " + hex16(h1) + " (" +
                    std::to_string(fp16_to_double(h1)) + ") to " + hex16(h2) + " (" + std::to_string(fp16_to_double(h2)) +
                    "), not exactly twice; case " + describe(p, c.spec));
    }
  }
  require_unchanged_outside(k, p, c.spec, c1, c2, deterministic(k) ? std::vector<bool>{} : mask,
                            [&](int64_t x) { return x / p.n == row; }, kDoublingRowScalesDoublesRow, what);
}

// ----- 3. Permuting whole 16-element blocks consistently leaves C unchanged ---------------------

void check_block_permutation(const Kernel& k, Draws& d, CaseTags& tags) {
  CaseConstraints o;
  o.exact_regime = true;
  o.min_full_blocks = 2;
  const DrawnCase c = draw_case(d, k, o);
  const Problem& p = c.problem;
  tags.shape(p);
  // Only whole blocks move: a partial last block stays last (it covers fewer elements).
  const int64_t blocks = p.k / 16, kb = p.kb(), row_bytes = p.k / 2;
  std::vector<int64_t> perm(static_cast<size_t>(blocks));
  std::iota(perm.begin(), perm.end(), 0);
  // Fisher-Yates where raw 0 keeps the element in place, so shrinking heads for the identity...
  for (int64_t s = blocks - 1; s >= 1; --s) {
    std::swap(perm[s], perm[s - static_cast<int64_t>(d.below(static_cast<uint64_t>(s + 1)))]);
  }
  // ...which says nothing, so it becomes the plainest real permutation: swap blocks 0 and 1.
  if (std::is_sorted(perm.begin(), perm.end())) std::swap(perm[0], perm[1]);
  Problem q = p;
  auto permute = [&](const std::vector<uint8_t>& data, const std::vector<uint8_t>& scales, int64_t rows,
                     std::vector<uint8_t>& data_out, std::vector<uint8_t>& scales_out) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t s = 0; s < blocks; ++s) {
        const int64_t from = perm[static_cast<size_t>(s)];
        std::copy_n(data.begin() + r * row_bytes + 8 * from, 8, data_out.begin() + r * row_bytes + 8 * s);
        scales_out[r * kb + s] = scales[r * kb + from];
      }
    }
  };
  permute(p.a, p.sfa, p.l * p.m, q.a, q.sfa);
  permute(p.b, p.sfb, p.l * p.n, q.b, q.sfb);
  const std::vector<uint16_t> c1 = run_or_fail(k, p, kPermutingBlocksKeepsC.name);
  const std::vector<uint16_t> c2 = run_or_fail(k, q, kPermutingBlocksKeepsC.name);
  const std::vector<bool> mask = exact_mask(p, op_reference(p), policy_of(k));
  tags.exact(std::count(mask.begin(), mask.end(), true), static_cast<int64_t>(mask.size()));
  std::string perm_text;
  for (int64_t s : perm) perm_text += (perm_text.empty() ? "" : ",") + std::to_string(s);
  for (size_t x = 0; x < c1.size(); ++x) {
    if (mask[x] && !same_value(c1[x], c2[x])) {
      fail_case(k, p, kPermutingBlocksKeepsC.name,
                "permuting the 16-element blocks of every A and B row (new block s = old block [" + perm_text +
                    "][s]) changed " + element_name(p, static_cast<int64_t>(x)) + " from " + hex16(c1[x]) + " to " +
                    hex16(c2[x]) + " (exact regime: order cannot matter); case " + describe(p, c.spec));
    }
  }
}

// ----- 4. Batches are independent ---------------------------------------------------------------

void check_batches(const Kernel& k, Draws& d, CaseTags& tags) {
  const int64_t raw_batch = draw_index_first(d, property_limits().max_l);
  CaseConstraints o;
  o.min_l = 2;
  const DrawnCase c = draw_case(d, k, o);
  const Problem& p = c.problem;
  tags.shape(p);
  const int64_t changed = clamp_index(raw_batch, p.l);
  Problem fresh = p;
  draw_data(d, c.spec, fresh);
  Problem q = p;
  auto copy_batch = [&](const std::vector<uint8_t>& from, std::vector<uint8_t>& to, int64_t per_batch) {
    std::copy_n(from.begin() + changed * per_batch, per_batch, to.begin() + changed * per_batch);
  };
  copy_batch(fresh.a, q.a, p.m * p.k / 2);
  copy_batch(fresh.b, q.b, p.n * p.k / 2);
  copy_batch(fresh.sfa, q.sfa, p.m * p.kb());
  copy_batch(fresh.sfb, q.sfb, p.n * p.kb());
  const std::vector<uint16_t> c1 = run_or_fail(k, p, kBatchesAreIndependent.name);
  const std::vector<uint16_t> c2 = run_or_fail(k, q, kBatchesAreIndependent.name);
  require_unchanged_outside(k, p, c.spec, c1, c2, mask_if_needed(k, p),
                            [&](int64_t x) { return x / (p.m * p.n) == changed; }, kBatchesAreIndependent,
                            "new data in batch " + std::to_string(changed));
}

// ----- 5. Rows and columns are independent ------------------------------------------------------

void check_rows_columns(const Kernel& k, Draws& d, CaseTags& tags) {
  const ShapeLimits lim = property_limits();
  const int64_t raw_ab = draw_index_first(d, lim.max_l), raw_ai = draw_index_first(d, lim.max_m);
  const int64_t raw_bb = draw_index_first(d, lim.max_l), raw_bj = draw_index_first(d, lim.max_n);
  const DrawnCase c = draw_case(d, k, {});
  const Problem& p = c.problem;
  tags.shape(p);
  const int64_t kb = p.kb(), row_bytes = p.k / 2;
  const int64_t ab = clamp_index(raw_ab, p.l), ai = clamp_index(raw_ai, p.m);
  const int64_t bb = clamp_index(raw_bb, p.l), bj = clamp_index(raw_bj, p.n);
  Problem fresh = p;
  draw_data(d, c.spec, fresh);
  Problem qa = p, qb = p;
  const int64_t arow = ab * p.m + ai, brow = bb * p.n + bj;
  std::copy_n(fresh.a.begin() + arow * row_bytes, row_bytes, qa.a.begin() + arow * row_bytes);
  std::copy_n(fresh.sfa.begin() + arow * kb, kb, qa.sfa.begin() + arow * kb);
  std::copy_n(fresh.b.begin() + brow * row_bytes, row_bytes, qb.b.begin() + brow * row_bytes);
  std::copy_n(fresh.sfb.begin() + brow * kb, kb, qb.sfb.begin() + brow * kb);
  const std::vector<uint16_t> c0 = run_or_fail(k, p, kRowsAndColumnsIndependent.name);
  const std::vector<uint16_t> ca = run_or_fail(k, qa, kRowsAndColumnsIndependent.name);
  const std::vector<uint16_t> cb = run_or_fail(k, qb, kRowsAndColumnsIndependent.name);
  const std::vector<bool> mask = mask_if_needed(k, p);
  require_unchanged_outside(k, p, c.spec, c0, ca, mask, [&](int64_t x) { return x / p.n == arow; },
                            kRowsAndColumnsIndependent,
                            "new data in A row " + std::to_string(ai) + " of batch " + std::to_string(ab));
  require_unchanged_outside(
      k, p, c.spec, c0, cb, mask,
      [&](int64_t x) { return x / (p.m * p.n) == bb && x % p.n == bj; }, kRowsAndColumnsIndependent,
      "new data in B row (C column) " + std::to_string(bj) + " of batch " + std::to_string(bb));
}

// ----- 6. Negating B negates C ------------------------------------------------------------------

void check_negation(const Kernel& k, Draws& d, CaseTags& tags) {
  const DrawnCase c = draw_case(d, k, {});
  const Problem& p = c.problem;
  tags.shape(p);
  Problem q = p;
  for (uint8_t& byte : q.b) byte ^= 0x88u;  // the sign bit of both E2M1 codes
  const std::vector<uint16_t> c1 = run_or_fail(k, p, kNegatingBNegatesC.name);
  const std::vector<uint16_t> c2 = run_or_fail(k, q, kNegatingBNegatesC.name);
  const std::vector<bool> mask = mask_if_needed(k, p);
  for (size_t x = 0; x < c1.size(); ++x) {
    if (!must_agree(k, mask, x)) continue;
    // Every rounding the oracle allows (to nearest, toward zero) is symmetric in sign, so the
    // negated sum rounds to the negated result; zeros may come out with either sign.
    const uint16_t h1 = c1[x], h2 = c2[x];
    const bool ok = fp16_is_nan(h1)    ? fp16_is_nan(h2)
                    : fp16_is_zero(h1) ? fp16_is_zero(h2)
                                       : h2 == static_cast<uint16_t>(h1 ^ 0x8000u);
    if (!ok) {
      fail_case(k, p, kNegatingBNegatesC.name,
                "negating every B element took " + element_name(p, static_cast<int64_t>(x)) + " from " + hex16(h1) +
                    " to " + hex16(h2) + " instead of " + hex16(static_cast<uint16_t>(h1 ^ 0x8000u)) + "; case " +
                    describe(p, c.spec));
    }
  }
}

// ----- 7. Linear and permuted scale layouts give identical C ------------------------------------

bool has_both_layouts(const Kernel& k) {
  return k.supports_layout(NVFP4_SF_LINEAR) && k.supports_layout(NVFP4_SF_PERMUTED);
}

void check_layouts(const Kernel& k, Draws& d, CaseTags& tags) {
  CaseConstraints o;
  o.layout = SfLayout::linear;
  const DrawnCase c = draw_case(d, k, o);
  const Problem& p = c.problem;
  tags.shape(p);
  Problem q = p;
  q.sf_layout = SfLayout::permuted;
  const std::vector<uint16_t> c1 = run_or_fail(k, p, kLayoutsAgree.name);
  const std::vector<uint16_t> c2 = run_or_fail(k, q, kLayoutsAgree.name);
  require_unchanged_outside(k, p, c.spec, c1, c2, mask_if_needed(k, p), [](int64_t) { return false; },
                            kLayoutsAgree, "handing the scales in the permuted layout instead of the linear one");
}

// ----- 8. GEMM with n = 1 equals GEMV on the same data -----------------------------------------

bool takes_nvfp4_operands(const Kernel& k);

// draw_case draws NVFP4 operands for the properties (property_support.cc): an MX-only kernel
// (mx_gemm_tc) would be handed what it rightly refuses.
bool has_both_ops(const Kernel& k) {
  return k.supports_op(NVFP4_OP_GEMV) && k.supports_op(NVFP4_OP_GEMM) && k.info->n_multiple <= 1 &&
         takes_nvfp4_operands(k);
}

void check_gemm_is_gemv(const Kernel& k, Draws& d, CaseTags& tags) {
  CaseConstraints o;
  o.op = Op::gemv;
  const DrawnCase c = draw_case(d, k, o);
  const Problem& p = c.problem;
  tags.shape(p);
  Problem q = p;
  q.op = Op::gemm;
  const std::vector<uint16_t> gemv = run_or_fail(k, p, kGemmWithNOneIsGemv.name);
  const std::vector<uint16_t> gemm = run_or_fail(k, q, kGemmWithNOneIsGemv.name);
  const ExactResult ref = op_reference(p);
  const Policy policy = policy_of(k);
  const std::vector<bool> mask = exact_mask(p, ref, policy);
  tags.exact(std::count(mask.begin(), mask.end(), true), static_cast<int64_t>(mask.size()));
  // The two ops may legitimately accumulate in different orders: they must agree bit for bit
  // where the oracle allows one answer, and both be acceptable elsewhere.
  for (size_t x = 0; x < gemv.size(); ++x) {
    if (mask[x] && !same_value(gemv[x], gemm[x])) {
      fail_case(k, p, kGemmWithNOneIsGemv.name,
                "GEMV gives " + hex16(gemv[x]) + " but GEMM with n = 1 gives " + hex16(gemm[x]) + " at " +
                    element_name(p, static_cast<int64_t>(x)) + " (exact regime); case " + describe(p, c.spec));
    }
  }
  for (const auto* out : {&gemv, &gemm}) {
    const OracleSummary s = judge(p, ref, out->data(), policy);
    if (s.any_failure()) {
      fail_case(k, out == &gemv ? p : q, kGemmWithNOneIsGemv.name,
                std::string(out == &gemv ? "GEMV" : "GEMM with n = 1") + " is wrong: " +
                    describe_oracle_failure(p, c.spec, s));
    }
  }
}

// ----- 9. NaN in padding cells never reaches C --------------------------------------------------

bool has_permuted(const Kernel& k) { return k.supports_layout(NVFP4_SF_PERMUTED); }

void check_nan_padding(const Kernel& k, Draws& d, CaseTags& tags) {
  CaseConstraints o;
  o.layout = SfLayout::permuted;
  o.no_nan = true;
  const DrawnCase c = draw_case(d, k, o);
  const Problem& p = c.problem;
  tags.shape(p);
  const bool padded = p.m % 128 != 0 || p.n % 128 != 0 || p.kb() % 4 != 0;
  tags.note(padded ? "padding cells present" : "no padding cells");
  // run_kernel_once hands the permuted layout with every padding cell a NaN scale (0x7F), as the
  // runner does; no used scale is NaN here, so a NaN output can only come from padding.
  const std::vector<uint16_t> out = run_or_fail(k, p, kNanPaddingNeverReachesC.name);
  for (size_t x = 0; x < out.size(); ++x) {
    if (fp16_is_nan(out[x])) {
      fail_case(k, p, kNanPaddingNeverReachesC.name,
                element_name(p, static_cast<int64_t>(x)) + " is NaN (" + hex16(out[x]) +
                    ") though no used scale is NaN: a NaN padding cell of the permuted layout reached C; case " +
                    describe(p, c.spec));
    }
  }
}

// ----- 10. Shapes outside the declared constraints come back UNSUPPORTED, C untouched ----------

bool violable(const nvfp4_kernel_info& info, Op op) {
  return info.m_multiple > 1 || (op == Op::gemm && info.n_multiple > 1) || info.k_multiple > 2 ||
         (info.k_multiple > 1 && info.k_multiple % 2 == 1);
}

bool has_constraints(const Kernel& k) {
  const bool unit_alpha = k.info->flags & NVFP4_FLAG_UNIT_ALPHA;
  return unit_alpha || (k.supports_op(NVFP4_OP_GEMV) && violable(*k.info, Op::gemv)) ||
         (k.supports_op(NVFP4_OP_GEMM) && violable(*k.info, Op::gemm));
}

void check_unsupported(const Kernel& k, Draws& d, CaseTags& tags) {
  const nvfp4_kernel_info& info = *k.info;
  DrawnCase c = draw_case(d, k, {});  // layout, semantics, spec and op inside the constraints
  Problem& p = c.problem;
  const bool unit_alpha = info.flags & NVFP4_FLAG_UNIT_ALPHA;
  const Shape s = draw_unsupported_shape(d, p.op, info, property_limits());
  const uint64_t use_alpha_pick = d.below(2);
  const bool use_alpha = unit_alpha && (s.m == 0 || use_alpha_pick == 1);
  if (s.m == 0 && !use_alpha) {
    tags.note("nothing to violate for this op");
    return;
  }
  if (use_alpha) {
    p.alpha = 2.0f;  // outside UNIT_ALPHA; the shape stays inside
    tags.note("alpha != 1 for a UNIT_ALPHA kernel");
  } else {
    set_shape(p, s);  // s.op is p.op: the unsupported shape was drawn for it
    const float alpha = p.alpha;
    draw_data(d, c.spec, p);
    if (unit_alpha) p.alpha = 1.0f;
    else p.alpha = alpha;
    tags.note("shape off the declared multiples");
  }
  tags.shape(p);
  CaseOptions options;
  options.check_stale = false;
  InProcessExecutor executor(k, kDefaultCallTimeout);
  const CaseOutcome r = check_case(executor, p, options);
  if (r.verdict != CaseOutcome::Verdict::unsupported) {
    fail_case(k, p, kUnsupportedIsRefused.name,
              "outside its declared constraints (" + unsupported_reason(info, p) +
                  ") the kernel must return NVFP4_UNSUPPORTED with C untouched; the runner says " +
                  (r.finding ? std::string(check_name(r.finding->check)) + ": " + r.finding->message
                             : std::string(verdict_name(r.verdict))));
  }
}

// ----- 11. The runner's checks hold on every case -----------------------------------------------

void check_runner(const Kernel& k, Draws& d, CaseTags& tags) {
  const DrawnCase c = draw_case(d, k, {});
  const Problem& p = c.problem;
  tags.shape(p);
  CaseOptions options;
  options.stale_seed = d.below(uint64_t(1) << 32);
  InProcessExecutor executor(k, kDefaultCallTimeout);
  const CaseOutcome r = check_case(executor, p, options);
  tags.exact(r.summary.exact_regime, r.summary.elements);
  if (r.verdict != CaseOutcome::Verdict::pass) {
    fail_case(k, p, kRunnerChecksHold.name,
              (r.finding ? "check " + std::string(check_name(r.finding->check)) + " failed: " + r.finding->message
                         : "verdict " + std::string(verdict_name(r.verdict)) + ": " + r.message) +
                  "; case " + describe(p, c.spec));
  }
}

bool always(const Kernel&) { return true; }

// ----- 13, 14. Quantizers ------------------------------------------------------------------------

bool quantizes(const Kernel& k) { return k.supports_op(NVFP4_OP_QUANTIZE); }

// A quantize case the kernel declares (the one draw), its output as Q's bytes and SFQ's (linear).
struct QuantOutput {
  std::vector<uint8_t> q, sfq;
};
QuantOutput quantize_once(const Kernel& k, const Problem& p, const char* property) {
  std::vector<uint32_t> words;
  try {
    InProcessExecutor executor(k, kDefaultCallTimeout);
    words = run_kernel_once(executor, p);
  } catch (const std::exception& e) {
    fail_case(k, p, property, std::string("the kernel run failed: ") + e.what());
  }
  QuantOutput o;
  o.q.assign(words.begin(), words.begin() + p.q_bytes());
  const std::vector<uint8_t> sfq(words.begin() + p.q_bytes(), words.end());
  o.sfq = p.sf_layout == SfLayout::permuted ? sf_to_linear(sfq.data(), p.m, p.qkb(), p.l) : sfq;
  return o;
}

uint8_t code_at(const Problem& p, const std::vector<uint8_t>& q, int64_t e) {
  return packs_nibbles(p.q_format) ? static_cast<uint8_t>((q[static_cast<size_t>(e / 2)] >> (4 * (e % 2))) & 0xF)
                                   : q[static_cast<size_t>(e)];
}

// 13: for an NVFP4 or MXFP4 quantizer, every code is x * os rounded to the E2M1 grid: within
// half a grid step of x * os (the step of the binade it lands in), where os is the encode factor
// the reference derives from the kernel's own scale byte; elements past the grid's end (x * os
// beyond 6, up to a sixteenth more where the scale rounded down) take +-6. Blocks with a
// subnormal, zero or NaN scale, NaN or Inf elements are left out (rule 7 decides those).
void check_half_step(const Kernel& k, Draws& d, CaseTags& tags) {
  const DrawnCase c = nvfp4::draw_case(d, *k.info, {}, property_limits());
  const Problem& p = c.problem;
  tags.shape(p);
  if (!packs_nibbles(p.q_format) || p.stochastic_seed) return;
  const QuantOutput out = quantize_once(k, p, kQuantizedWithinHalfStep.name);
  const QuantResult ref = quantize_reference(p);
  const int64_t bs = block_size(p.q_format), rows = p.l * p.m;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t s = 0; s < p.qkb(); ++s) {
      const size_t at = static_cast<size_t>(r * p.qkb() + s);
      if (out.sfq[at] != ref.sfq[at]) continue;  // rule 7's business: the scale is judged there
      const uint8_t sb = out.sfq[at];
      const bool usable = p.q_format == BlockFormat::nvfp4 ? ((sb >> 3) & 0xF) != 0 && (sb & 0x7F) != 0x7F : sb != 0xFF;
      if (!usable || !std::isfinite(ref.os[at]) || ref.os[at] == 0) continue;
      for (int64_t x = s * bs; x < std::min(p.k, (s + 1) * bs); ++x) {
        const double v = static_cast<double>(quantize_input(p, r * p.k + x)) * ref.os[at];
        if (!std::isfinite(v)) continue;
        const uint8_t code = code_at(p, out.q, r * p.k + x);
        const double got = e2m1_twice(code) / 2.0, mag = std::fabs(v);
        const double half = mag < 2 ? 0.25 : mag < 4 ? 0.5 : 1.0;
        const double want = mag > 6 ? std::copysign(6.0, v) : v;
        if (std::fabs(got - want) > half * (1 + 1e-6) && !(got == 0 && mag <= 0.25 * (1 + 1e-6)))
          fail_case(k, p, kQuantizedWithinHalfStep.name,
                    "row " + std::to_string(r) + " element " + std::to_string(x) + ": x * os = " + std::to_string(v) +
                        " but the code is " + std::to_string(got) + ", more than half a grid step away");
      }
    }
}

// 14: multiplying X by 2^j (exactly representable) moves only the global scale (NVFP4: the
// recipe's gs or pts by 2^-j or 2^j) or the E8M0 exponents (MX, by +j): the codes and the NVFP4
// scale bytes stay the same.
void check_power_of_two(const Kernel& k, Draws& d, CaseTags& tags) {
  const int j = 1 + static_cast<int>(d.below(3));
  const DrawnCase c = nvfp4::draw_case(d, *k.info, {}, property_limits());
  const Problem& p = c.problem;
  tags.shape(p);
  if (p.stochastic_seed) return;
  // BF16 and FP32 words whose every element scales exactly (FP16's range is too narrow for the
  // schedule's data); finite, zero or far from the subnormals.
  if (p.in_type == InType::fp16) return;
  Problem scaled = p;
  scaled.data_from_seed = false;
  const int width = in_word_bytes(p.in_type);
  for (int64_t e = 0; e < p.l * p.m * p.k; ++e) {
    const float v = quantize_input(p, e), w = std::ldexp(v, j);
    if (!std::isfinite(v) || !std::isfinite(w) || (v != 0 && std::fabs(v) < 1e-30f)) return;
    uint32_t bits;
    std::memcpy(&bits, &w, 4);
    if (p.in_type == InType::bf16) bits >>= 16;
    std::memcpy(scaled.x.data() + e * width, &bits, static_cast<size_t>(width));
  }
  const QuantOutput a = quantize_once(k, p, kPowerOfTwoMovesOnlyScales.name);
  const QuantOutput b = quantize_once(k, scaled, kPowerOfTwoMovesOnlyScales.name);
  if (a.q != b.q) fail_case(k, p, kPowerOfTwoMovesOnlyScales.name, "X * 2^" + std::to_string(j) + " changed the codes");
  for (size_t s = 0; s < a.sfq.size(); ++s) {
    const bool mx = p.q_format != BlockFormat::nvfp4;
    const int want = mx && a.sfq[s] != 0 && a.sfq[s] < 0xFE - j ? a.sfq[s] + j : a.sfq[s];
    if (mx && (a.sfq[s] == 0 || a.sfq[s] >= 0xFE - j)) continue;  // E8M0's ends do not move
    if (b.sfq[s] != want)
      fail_case(k, p, kPowerOfTwoMovesOnlyScales.name,
                "X * 2^" + std::to_string(j) + ": scale " + std::to_string(s) + " went from " + std::to_string(a.sfq[s]) +
                    " to " + std::to_string(b.sfq[s]) + ", not " + std::to_string(want));
  }
}

// The properties written for one GEMV or GEMM with FP16 words (their draw_case asks for those).
// The properties written for one GEMV or GEMM transform NVFP4 bytes (E2M1 nibbles, E4M3 scales of
// 16 elements): they take kernels with NVFP4 operands, and draw_case draws only those.
bool takes_nvfp4_operands(const Kernel& k) {
  const uint32_t nvfp4 = 1u << NVFP4_FORMAT_NVFP4;
  return (declared_formats(*k.info, false) & nvfp4) && (declared_formats(*k.info, true) & nvfp4);
}
bool gemm_fp16(const Kernel& k) {
  return (k.supports_op(NVFP4_OP_GEMV) || k.supports_op(NVFP4_OP_GEMM)) && k.supports_out_type(NVFP4_OUT_FP16) &&
         takes_nvfp4_operands(k);
}
bool both_layouts_gemm(const Kernel& k) { return gemm_fp16(k) && has_both_layouts(k); }
bool permuted_gemm(const Kernel& k) { return gemm_fp16(k) && has_permuted(k); }
bool constrained_gemm(const Kernel& k) { return gemm_fp16(k) && has_constraints(k); }

}  // namespace

const Property kAgreesWithReference{"agrees-with-reference", gemm_fp16, check_agrees};
const Property kDoublingRowScalesDoublesRow{"doubling-row-scales-doubles-row", gemm_fp16, check_doubling};
const Property kPermutingBlocksKeepsC{"permuting-blocks-keeps-c", gemm_fp16, check_block_permutation};
const Property kBatchesAreIndependent{"batches-are-independent", gemm_fp16, check_batches};
const Property kRowsAndColumnsIndependent{"rows-and-columns-are-independent", gemm_fp16, check_rows_columns};
const Property kNegatingBNegatesC{"negating-b-negates-c", gemm_fp16, check_negation};
const Property kLayoutsAgree{"layouts-agree", both_layouts_gemm, check_layouts};
const Property kGemmWithNOneIsGemv{"gemm-with-n-1-is-gemv", has_both_ops, check_gemm_is_gemv};
const Property kNanPaddingNeverReachesC{"nan-padding-never-reaches-c", permuted_gemm, check_nan_padding};
const Property kUnsupportedIsRefused{"unsupported-is-refused", constrained_gemm, check_unsupported};
const Property kRunnerChecksHold{"runner-checks-hold", gemm_fp16, check_runner};
const Property kEveryProblemAgreesWithReference{"every-problem-agrees-with-reference", always, check_every_problem};
const Property kQuantizedWithinHalfStep{"quantized-within-half-a-grid-step", quantizes, check_half_step};
const Property kPowerOfTwoMovesOnlyScales{"power-of-two-moves-only-scales", quantizes, check_power_of_two};

void check_all_kernels(const Property& property, const std::vector<const Kernel*>& ks) {
  RcDraws d;
  CaseTags tags;
  for (const Kernel* k : ks) {
    if (property.applies(*k)) property.check(*k, d, tags);
  }
  tags.emit();
}

}  // namespace nvfp4::prop
