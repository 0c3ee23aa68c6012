// The stale-state call's reference (stale_variant) follows from the case's own reference where
// the stale data is the case's negated and rotated: MX problems of every op (A negated) and dual
// GEMM with NVFP4 operands (B2 negated). Here it is held to the reference computed afresh from
// the stale data, every field, on problems drawn as `run` draws them for the host kernels.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "harness/draw/schedule.h"
#include "harness/draw/shape_limits.h"
#include "harness/judge/case_check.h"
#include "harness/ops/op_module.h"
#include "reference/case_file.h"
#include "kernels/registry.h"
#include "reference/exact_mx.h"
#include "reference/oracle.h"
#include "reference/out_type.h"
#include "reference/stable_hash.h"

namespace nvfp4 {
namespace {

const Registry& builtins() {
  static const Registry r = Registry::with_builtins();
  return r;
}

bool same_dual(const DualValue& x, const DualValue& y) {
  return std::memcmp(&x.silu_g, &y.silu_g, 10) == 0 && std::memcmp(&x.u, &y.u, 10) == 0 &&
         std::memcmp(&x.v, &y.v, 10) == 0;  // the 80 bits of each long double
}

bool same_exact(const ExactElement& x, const ExactElement& y) {
  return x.sum == y.sum && x.abs_sum == y.abs_sum && x.nonzero == y.nonzero && x.min_tz == y.min_tz && x.nan == y.nan;
}

// Every field of two references of one problem, named where they differ ("" when equal).
std::string difference(const ExactResult& got, const ExactResult& want) {
  if (got.out_type != want.out_type) return "out_type";
  if (got.c != want.c || got.c32 != want.c32) return "words";
  if (got.group_offset != want.group_offset) return "group offsets";
  if (got.elems.size() != want.elems.size() || got.elems2.size() != want.elems2.size()) return "element counts";
  const bool mx = want.mx != nullptr;
  for (size_t x = 0; x < want.elems.size(); ++x) {
    // MX references set the NaN flags of elems only; NVFP4 ones every fact.
    if (mx ? got.elems[x].nan != want.elems[x].nan : !same_exact(got.elems[x], want.elems[x]))
      return "elems[" + std::to_string(x) + "]";
  }
  for (size_t x = 0; x < want.elems2.size(); ++x) {
    if (mx ? got.elems2[x].nan != want.elems2[x].nan : !same_exact(got.elems2[x], want.elems2[x]))
      return "elems2[" + std::to_string(x) + "]";
  }
  if (got.dual.size() != want.dual.size()) return "dual count";
  for (size_t x = 0; x < want.dual.size(); ++x)
    if (!same_dual(got.dual[x], want.dual[x])) return "dual[" + std::to_string(x) + "]";
  for (const auto& [g, w, name] : {std::tuple{got.mx, want.mx, "mx"}, std::tuple{got.mx2, want.mx2, "mx2"}}) {
    if ((g == nullptr) != (w == nullptr)) return std::string(name) + " present on one side only";
    if (w == nullptr) continue;
    if (g->size() != w->size()) return std::string(name) + " count";
    for (size_t x = 0; x < w->size(); ++x)
      if (!same_mx_facts((*g)[x], (*w)[x]))
        return std::string(name) + "[" + std::to_string(x) + "]: " + describe_mx_facts((*g)[x]) + " vs " +
               describe_mx_facts((*w)[x]);
  }
  return "";
}

// The case a small draw for kernel `name` makes from `seed`; false where the kernel does not
// take the drawn case.
bool draw_small(const char* name, uint64_t seed, Problem* out) {
  const Kernel* k = builtins().find(name);
  EXPECT_NE(k, nullptr) << name;
  if (k == nullptr) return false;
  Rng rng(seed);
  RngDraws d(rng);
  DrawnCase drawn = draw_case(d, *k->info, CaseConstraints{}, small_shape_limits());
  if (drawn.kind == CaseKind::unsupported) return false;
  *out = std::move(drawn.problem);
  return true;
}

// The first operand tensor (A, B, their scales, B2 and its scales, each group's) in which `got`
// differs from `want`; empty where all are equal.
std::string operand_difference(const Problem& got, const Problem& want) {
  if (got.a != want.a) return "a";
  if (got.b != want.b) return "b";
  if (got.sfa != want.sfa) return "sfa";
  if (got.sfb != want.sfb) return "sfb";
  if (got.b2 != want.b2) return "b2";
  if (got.sfb2 != want.sfb2) return "sfb2";
  if (got.groups.size() != want.groups.size()) return "the number of groups";
  for (size_t g = 0; g < got.groups.size(); ++g) {
    const std::string at = " of group " + std::to_string(g);
    if (got.groups[g].a != want.groups[g].a) return "a" + at;
    if (got.groups[g].b != want.groups[g].b) return "b" + at;
    if (got.groups[g].sfa != want.groups[g].sfa) return "sfa" + at;
    if (got.groups[g].sfb != want.groups[g].sfb) return "sfb" + at;
  }
  return "";
}

// `cases` problems drawn for kernel `name` (seeded), each with its stale variant's derived
// reference against the one recomputed from the stale data. Returns how many were compared.
int check_kernel(const std::string& name, int cases, uint64_t seed) {
  if (builtins().find(name) == nullptr) throw std::runtime_error("no kernel " + name);
  int compared = 0;
  for (int c = 0; c < cases; ++c) {
    Problem p;
    if (!draw_small(name.c_str(), seed + static_cast<uint64_t>(c), &p)) continue;
    const ExactResult ref = exact_gemm(p);
    const StaleVariant v = stale_variant(p, ref, seed ^ static_cast<uint64_t>(c * 7919));
    const ExactResult fresh = exact_gemm(v.problem);
    const std::string diff = difference(v.reference, fresh);
    EXPECT_EQ(diff, "") << name << " case " << c << " (" << to_string(p.op) << " " << p.m << "x" << p.n << "x" << p.k
                        << "x" << p.l << ")";
    if (!diff.empty()) return compared;
    ++compared;
  }
  return compared;
}

TEST(MxStale, DerivedReferenceIsTheRecomputedOne) {
  for (const char* name : {"host_mx_gemm_fp32", "host_mx_dual_gemm_fp32", "host_mx_grouped_gemm_fp32",
                           "host_mx_grouped_gemm_fp32_packed"}) {
    EXPECT_GE(check_kernel(name, 40, 20261207), 25) << name;
  }
}

TEST(DualStale, DerivedReferenceIsTheRecomputedOne) {
  for (const char* name : {"host_dual_gemm_fp32", "host_dual_gemm_nvfp4_out"}) {
    EXPECT_GE(check_kernel(name, 60, 20261208), 40) << name;
  }
}

// The kernel's process turns the case's own data into the stale call's in place (the op's
// stale_in_place) instead of receiving them: the same bytes as stale_variant's problem, for every
// op, operand format, output type and arrangement, and undone back to the case's. Grouped NVFP4
// stale references (stitched from each group's) equal the recomputed ones too.
TEST(GemmStale, InPlaceDataAreTheStaleVariantsAndUndoRestores) {
  const auto in_place = op_module(Op::gemm).stale_in_place;
  ASSERT_NE(in_place, nullptr);
  int compared = 0;
  for (const char* name : {"host_gemv_fp32", "host_gemm_fp32", "host_dual_gemm_fp32", "host_grouped_gemm_fp32",
                           "host_grouped_gemm_fp32_packed", "host_gemm_nvfp4_out", "host_grouped_gemm_nvfp4_out",
                           "host_mx_gemm_fp32", "host_mx_dual_gemm_fp32", "host_mx_grouped_gemm_fp32"}) {
    for (int c = 0; c < 40; ++c) {
      Problem p;
      if (!draw_small(name, 20261219 + static_cast<uint64_t>(c), &p)) continue;
      const ExactResult ref = exact_gemm(p);
      const uint64_t seed = 77 + static_cast<uint64_t>(c);
      const StaleVariant v = stale_variant(p, ref, seed);
      Problem q = p;
      op_module(p.op).stale_in_place(q, seed, false);
      const std::string where = std::string(name) + " case " + std::to_string(c);
      ASSERT_EQ(operand_difference(q, v.problem), "") << where;
      if (p.op == Op::grouped_gemm && !p.mx_operands() && p.out_type != OutType::nvfp4) {
        EXPECT_EQ(difference(v.reference, exact_gemm(v.problem)), "") << where;
      }
      op_module(p.op).stale_in_place(q, seed, true);
      ASSERT_EQ(write_case(q), write_case(p)) << where;
      ++compared;
    }
  }
  EXPECT_GE(compared, 300);
}

// The kernel's process leaves a GEMV's, GEMM's and dual GEMM's A, B and B2 as they are
// (stale_in_buffers) and moves them as it writes them into the call's buffers: the tensors left,
// moved by their rotation, and the tensors moved in place are stale_variant's problem, and undo
// gives back the case. An InputTensor borrowing a left tensor writes and compares the moved
// bytes (a change found at its first byte in the moved order).
TEST(GemmStale, InBuffersLeavesWholeTensorsWithTheMovesThatMakeTheStaleData) {
  int compared = 0, moved_in_buffers = 0;
  for (const char* name : {"host_gemv_fp32", "host_gemm_fp32", "host_dual_gemm_fp32", "host_grouped_gemm_fp32",
                           "host_grouped_gemm_fp32_packed", "host_gemm_nvfp4_out", "host_mx_gemm_fp32",
                           "host_mx_dual_gemm_fp32", "host_mx_grouped_gemm_fp32"}) {
    for (int c = 0; c < 30; ++c) {
      Problem p;
      if (!draw_small(name, 20261207 + static_cast<uint64_t>(c), &p)) continue;
      const uint64_t seed = 91 + static_cast<uint64_t>(c);
      const StaleVariant v = stale_variant(p, exact_gemm(p), seed);
      const std::string where = std::string(name) + " case " + std::to_string(c);
      Problem q = p;
      const std::vector<MovedTensor> left = op_module(p.op).stale_in_buffers(q, seed, false);
      std::vector<const std::vector<uint8_t>*> want_left;
      if (!op_is_grouped(p.op)) want_left = {&q.a, &q.b};
      if (op_is_dual(p.op)) want_left.push_back(&q.b2);
      ASSERT_EQ(left.size(), want_left.size()) << where;
      Problem moved = q;
      for (size_t x = 0; x < left.size(); ++x) {
        ASSERT_EQ(left[x].tensor, want_left[x]) << where;
        const std::vector<uint8_t>& t = *left[x].tensor;
        ASSERT_EQ(left[x].rotation.bytes(), static_cast<int64_t>(t.size())) << where;
        std::vector<uint8_t> out(t.size());
        copy_rotated(t.data(), left[x].rotation, out.data());
        (x == 0 ? moved.a : x == 1 ? moved.b : moved.b2) = out;

        InputTensor in{"t", GuardPattern::bytes, {}};
        in.borrowed = &t;
        in.rotated = left[x].rotation;
        std::vector<uint8_t> written(t.size());
        in.write_to(written.data());
        ASSERT_EQ(written, out) << where;
        EXPECT_EQ(in.compare(out.data()).count, 0) << where;
        if (!out.empty()) {
          const size_t at = out.size() / 3;
          written[at] ^= 0x21;
          written[out.size() - 1] ^= 0x04;
          const InputTensor::Difference diff = in.compare(written.data());
          EXPECT_EQ(diff.count, at == out.size() - 1 ? 1 : 2) << where;
          EXPECT_EQ(diff.first, static_cast<int64_t>(at)) << where;
          EXPECT_EQ(diff.was, out[at]) << where;
          EXPECT_EQ(diff.now, written[at]) << where;
        }
        ++moved_in_buffers;
      }
      ASSERT_EQ(operand_difference(moved, v.problem), "") << where;
      EXPECT_TRUE(op_module(p.op).stale_in_buffers(q, seed, true).empty()) << where;
      ASSERT_EQ(write_case(q), write_case(p)) << where;
      ++compared;
    }
  }
  EXPECT_GE(compared, 200);
  EXPECT_GE(moved_in_buffers, 300);
}

// A stale variant's reference must differ from the case's (else the stale call checks nothing):
// the negation moves every nonzero result.
TEST(MxStale, StaleDataChangesTheResult) {
  int changed = 0;
  for (int c = 0; c < 40; ++c) {
    Problem p;
    if (!draw_small("host_mx_gemm_fp32", 99 + static_cast<uint64_t>(c), &p)) continue;
    const ExactResult ref = exact_gemm(p);
    changed += stale_variant(p, ref, 5).reference.words() != ref.words();
  }
  EXPECT_GE(changed, 30);
}

// The stale call of a GEMV, GEMM, grouped or dual GEMM is judged as run 1 was when its output mirrors run 1's
// (case_check.cc): the oracle's summary of the mirrored output against the stale reference must be
// its summary of run 1's output against the case's, every field, under each policy that shortcut
// is taken for, on outputs that are right, a few ulps off, signed zeros, NaN, Inf and the largest
// finite value (saturation), with zeros and NaNs mirrored by a zero or NaN of either sign.
TEST(GemmStale, MirroredOutputIsJudgedAsRunOneWas) {
  int compared = 0;
  for (const char* name : {"host_gemv_fp32", "host_gemm_fp32", "host_grouped_gemm_fp32", "host_dual_gemm_fp32"}) {
    const Kernel* k = builtins().find(name);
    ASSERT_NE(k, nullptr) << name;
    for (int c = 0; c < 40; ++c) {
      Rng rng(20261203 + static_cast<uint64_t>(c));
      RngDraws d(rng);
      const DrawnCase drawn = draw_case(d, *k->info, CaseConstraints{}, small_shape_limits());
      if (drawn.kind == CaseKind::unsupported || drawn.problem.mx_operands()) continue;
      const Problem& p = drawn.problem;
      const ExactResult ref = exact_gemm(p);
      const uint64_t stale_seed = splitmix64(static_cast<uint64_t>(c));
      const StaleVariant v = stale_variant(p, ref, stale_seed);
      const OutFormat f = out_format(p.out_type);
      std::vector<uint32_t> run1 = ref.words();
      for (uint32_t& w : run1) {
        switch (rng() % 16) {
          case 0: w += 1; break;
          case 1: w -= 1; break;
          case 2: w += 3; break;
          case 3: w = 0; break;
          case 4: w = f.sign_bit; break;
          case 5: w = f.quiet_nan; break;
          case 6: w = f.inf | (rng() % 2 ? f.sign_bit : 0); break;
          case 7: w = f.max_finite | (rng() % 2 ? f.sign_bit : 0); break;
          default: break;
        }
      }
      const std::vector<int64_t> from = stale_output_sources(p, stale_seed);
      std::vector<uint32_t> stale(run1.size());
      // Negated, but a zero of either sign where run 1 wrote a zero and any NaN where it wrote a NaN.
      for (size_t to = 0; to < stale.size(); ++to) {
        const uint32_t w = run1[static_cast<size_t>(from[to])];
        stale[to] = w ^ f.sign_bit;
        if (is_zero_out(p.out_type, w) && rng() % 2) stale[to] = w;
        if (is_nan_out(p.out_type, w) && rng() % 2) stale[to] = rng() % 2 ? f.inf | 1u : f.quiet_nan | f.sign_bit;
      }
      ASSERT_TRUE(stale_output_mirrors_run1(p, stale_seed, OutputWords(run1), OutputWords(stale))) << name << " case " << c;
      // One word not negated (a nonzero, non-NaN one: those may keep their sign) is no mirror.
      for (size_t to = 0; to < stale.size(); ++to) {
        if (is_zero_out(p.out_type, stale[to]) || is_nan_out(p.out_type, stale[to])) continue;
        std::vector<uint32_t> off = stale;
        off[to] ^= f.sign_bit;
        EXPECT_FALSE(stale_output_mirrors_run1(p, stale_seed, OutputWords(run1), OutputWords(off))) << name << " case " << c;
        // Nor is a zero or a NaN where run 1 wrote a number.
        for (const uint32_t other : {0u, f.sign_bit, f.quiet_nan}) {
          off[to] = other;
          EXPECT_FALSE(stale_output_mirrors_run1(p, stale_seed, OutputWords(run1), OutputWords(off))) << name << " case " << c;
        }
        break;
      }
      for (const char* policy : {"fp32", "fp16-accum", "exact", "matrix-unit:90", "fp16-accum/matrix-unit:90"}) {
        Policy pol = Policy::parse(policy);
        for (bool saturates : {false, true}) {
          pol.saturates = saturates;
          const OracleSummary a = judge_words(p, ref, run1.data(), pol);
          const OracleSummary b = judge_words(v.problem, v.reference, stale.data(), pol);
          const std::string at = std::string(name) + " case " + std::to_string(c) + " " + pol.name();
          EXPECT_EQ(a.elements, b.elements) << at;
          EXPECT_EQ(a.failing, b.failing) << at;
          EXPECT_EQ(a.exact_regime, b.exact_regime) << at;
          EXPECT_EQ(a.unjudged, b.unjudged) << at;
          EXPECT_EQ(a.max_error_ulps, b.max_error_ulps) << at;
          EXPECT_EQ(a.max_error_over_bound, b.max_error_over_bound) << at;
        }
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 90);
}

}  // namespace
}  // namespace nvfp4
