// The quantize op's module (harness/ops/): every op has a module; the built-in host quantizers
// pass their own schedule; the schedule reaches every declared recipe, input type, layout and
// data class; and the oracle's side of the module says what it should for a kernel that leaves
// padding, writes another layout than it declares, or writes nothing (observations built here,
// so each text is checked against a known cause).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/judge/case_check.h"
#include "harness/judge/checks.h"
#include "harness/ops/op_module.h"
#include "harness/draw/schedule.h"
#include "harness/draw/generators.h"
#include "harness/tests/check_in_process.h"
#include "kernels/host/host_quantize.h"
#include "reference/case_file.h"
#include "kernels/registry.h"
#include "reference/quantize.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

TEST(OpModules, EveryOpHasOneAndANameThatParses) {
  // The module list follows op_table.h row for row, and each row's name parses back to its op.
  const std::vector<std::string> names = op_names();
  ASSERT_EQ(names.size(), std::size(kOpTable));
  ASSERT_EQ(op_modules().size(), std::size(kOpTable));
  for (size_t i = 0; i < names.size(); ++i) {
    const OpInfo& row = kOpTable[i];
    EXPECT_EQ(names[i], row.name);
    Op op;
    ASSERT_TRUE(parse_op(names[i], &op)) << names[i];
    EXPECT_EQ(op, row.op);
    EXPECT_EQ(to_string(op), names[i]);
    const OpModule& m = op_module(op);
    EXPECT_EQ(m.op, row.op);
    EXPECT_EQ(&m, &op_modules()[i]) << names[i];
    EXPECT_TRUE(m.lay_out && m.judge && m.unwritten && m.stale_variant && m.shape_text) << names[i];
    EXPECT_GE(row.abi_version, 1u) << names[i];
  }
  Op op;
  EXPECT_FALSE(parse_op("gemmm", &op));
  EXPECT_STREQ(to_string(static_cast<Op>(0)), "unknown-op");
  EXPECT_THROW(op_module(static_cast<Op>(0)), std::invalid_argument);
}

// The registry's known op sets come from the same rows: version 1 has GEMV and GEMM, version 2
// adds grouped and dual GEMM, version 3 the quantizer.
TEST(OpModules, AbiVersionsKnowTheirOps) {
  const auto bit = [](Op op) { return 1u << static_cast<uint32_t>(op); };
  EXPECT_EQ(ops_of_version(1), bit(Op::gemv) | bit(Op::gemm));
  EXPECT_EQ(ops_of_version(2), ops_of_version(1) | bit(Op::grouped_gemm) | bit(Op::dual_gemm));
  EXPECT_EQ(ops_of_version(3), ops_of_version(2) | bit(Op::quantize));
}

// Case i of a built-in quantizer's schedule, with its data.
Problem scheduled(const Kernel& k, int64_t i, uint64_t seed = 31) {
  ScheduleOptions o;
  o.seed = seed;
  const Schedule s(*k.info, k.name(), o);
  return s.at(i).problem;
}

// A drawn quantize case's seed-only text (what replay hashes) is its text without X.
TEST(QuantizeOp, SeedOnlyTextIsTheTextWithoutX) {
  for (int64_t i = 0; i < 40; ++i) {
    const Problem p = scheduled(builtin("host_quantize_mx"), i);
    if (!p.data_from_seed) continue;
    Problem cleared = p;
    cleared.x.clear();
    ASSERT_EQ(write_case(p, CaseText::seed_only), write_case(cleared)) << i;
  }
}

TEST(QuantizeOp, HostQuantizersPassTheirSchedule) {
  for (const std::string name : {"host_quantize_nvfp4", "host_quantize_nvfp4_2d", "host_quantize_nvfp4_rows",
                                 "host_quantize_mx"}) {
    const Kernel& k = builtin(name);
    for (int64_t i = 0; i < 60; ++i) {
      const Problem p = scheduled(k, i);
      CaseOptions o;
      o.stale_seed = static_cast<uint64_t>(i);
      const CaseOutcome r = check_in_process(k, p, o);
      ASSERT_NE(r.verdict, CaseOutcome::Verdict::fail)
          << name << " case " << i << " (" << op_module(p.op).shape_text(p) << ", " << p.generator << "): "
          << check_of(r) << ": " << message_of(r);
    }
  }
}

// Every BF16 bit pattern of sign 0 (Inf and NaN included) as a block's first element, in each MX
// format under each MX recipe, quantized by the host kernel and judged by rule 7: the E8M0 scale's
// floor, its even rounding (a carry into the exponent), the clamp at 2^-127 and 0xFF for a
// non-finite amax are exercised at every BF16 amax. The block's other elements step down from the
// first (NaN elements are skipped by the amax, as the kernel's and the reference's are).
TEST(QuantizeOp, HostMxQuantizerMatchesEveryMxRecipeOnEveryBf16BlockMaximum) {
  const Kernel& k = builtin("host_quantize_mx");
  for (const Recipe r : {Recipe::mx_rceil, Recipe::mx_floor, Recipe::mx_even}) {
    ASSERT_TRUE((k.info->recipes >> static_cast<uint32_t>(r)) & 1u) << to_string(r);
    for (const BlockFormat f : {BlockFormat::mxfp4, BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e5m2}) {
      Problem p;
      p.op = Op::quantize;
      p.m = 0x8000, p.k = 32, p.l = 1;
      p.in_type = InType::bf16;
      p.q_format = f;
      p.recipe = r;
      p.sf_layout = SfLayout::permuted;
      p.generator = "test/bf16-maxima";
      p.x.resize(static_cast<size_t>(p.m * p.k * 2));
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.k; ++j) {
          const uint16_t w = static_cast<uint16_t>(std::max<int64_t>(0, i - j * 97) | ((j & 1) ? 0x8000 : 0));
          std::memcpy(&p.x[static_cast<size_t>((i * p.k + j) * 2)], &w, 2);
        }
      const QuantResult exact = quantize_reference(p);
      std::set<uint8_t> scales(exact.sfq.begin(), exact.sfq.end());
      EXPECT_TRUE(scales.count(0x00)) << to_string(r) << ": no block at or below 2^-127";
      EXPECT_TRUE(scales.count(r == Recipe::mx_rceil ? 0xFE : 0xFF)) << to_string(r) << ": no block with an Inf amax";
      const CaseOutcome outcome = check_in_process(k, p);
      EXPECT_EQ(outcome.verdict, CaseOutcome::Verdict::pass)
          << to_string(r) << " " << to_string(f) << ": " << check_of(outcome) << ": " << message_of(outcome);
    }
  }
}

// The kernel core's quantizer with te's block scale associated as ref's, gs * (amax_b * c6)
// (mut_host_q_other_association's bug), declared as host_quantize_nvfp4.
int run_other_association(int, const nvfp4_problem* p) {
  return kern::quant::quantize_on_host(p, *builtin("host_quantize_nvfp4").info, kern::quant::Bug::other_association);
}

// The decision class puts block maxima where te's and ref's associations of gs * amax_b / 6 give
// different scale bytes, in every input type and under every recipe that has both: the bug is
// rejected wherever the recipe is te's, and accepted under ref and fast, whose association it is.
// Under torchao the pair is RN(amax_b / 6) against RN(amax_b * RN(1/6)) (its code on a CUDA tensor).
TEST(QuantizeOp, DecisionBlocksSplitTheTwoAssociationsOfTheScaleProduct) {
  Kernel other;
  other.info = builtin("host_quantize_nvfp4").info;
  other.run_fn = run_other_association;
  for (const InType t : {InType::fp16, InType::bf16, InType::fp32})
    for (const Recipe r : {Recipe::te, Recipe::ref, Recipe::fast, Recipe::torchao})
      for (uint64_t seed = 1; seed <= 6; ++seed) {
        Problem p;
        p.op = Op::quantize;
        p.m = 3, p.k = 96, p.l = 1;  // 18 blocks
        p.sf_layout = SfLayout::linear;
        p.in_type = t;
        p.recipe = r;
        p.seed = seed;
        p.generator = "quantize/decision";
        expand_seeded_case(p);
        const std::string what = fmt::format("{} {} seed {}", to_string(t), to_string(r), seed);
        const QuantResult exact = quantize_reference(p), swapped = quantize_reference(p, QuantVariant::other_association);
        int64_t split = 0;
        for (size_t b = 0; b < exact.sfq.size(); ++b) split += exact.sfq[b] != swapped.sfq[b];
        EXPECT_GE(split, 1) << what << ": no block where the associations differ";
        if (r == Recipe::torchao) continue;  // the kernel core's bug is te's pair; torchao's is the reference's
        const CaseOutcome outcome = check_in_process(other, p);
        if (r == Recipe::te) {
          EXPECT_EQ(outcome.verdict, CaseOutcome::Verdict::fail) << what;
          EXPECT_NE(message_of(outcome).find("[other_association]"), std::string::npos) << what << ": " << message_of(outcome);
        } else {
          EXPECT_NE(outcome.verdict, CaseOutcome::Verdict::fail) << what << ": " << message_of(outcome);
        }
      }
}

TEST(QuantizeOp, ScheduleReachesEveryDeclarationAndDataClass) {
  const Kernel& k = builtin("host_quantize_nvfp4");
  std::set<std::string> recipes, in_types, layouts, classes;
  int64_t k_tail = 0, row_tail = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const Problem p = scheduled(k, i, 7);
    ASSERT_EQ(p.op, Op::quantize);
    recipes.insert(to_string(p.recipe));
    in_types.insert(to_string(p.in_type));
    layouts.insert(to_string(p.sf_layout));
    classes.insert(p.generator);
    k_tail += p.k % 16 != 0;
    row_tail += p.m % 128 != 0 && p.m > 128;
  }
  EXPECT_EQ(recipes, (std::set<std::string>{"fast", "ref", "te", "torchao"}));
  EXPECT_EQ(in_types, (std::set<std::string>{"bf16", "fp16", "fp32"}));
  EXPECT_EQ(layouts, (std::set<std::string>{"linear", "permuted"}));
  EXPECT_EQ(classes, (std::set<std::string>{"quantize/decision", "quantize/edges", "quantize/plain", "quantize/zero"}));
  EXPECT_GT(k_tail, 40);
  EXPECT_GT(row_tail, 10);
}

// The huge tier: CUDA quantizers only, about one case in 64 where the device has the memory,
// every case with `always`, none where the memory is short; its shapes pass 2^31 elements by a few
// rows; every other case is the case drawn without the tier (the tier takes no draw from it).
TEST(QuantizeOp, TheHugeTierIsDrawnForCudaQuantizersWithTheMemory) {
  // The host quantizer's declaration, once as a CUDA kernel's (no device needed to draw).
  const Kernel& host = builtin("host_quantize_nvfp4");
  nvfp4_kernel_info cuda_info = *host.info;
  cuda_info.memory = NVFP4_MEMORY_CUDA;
  cuda_info.min_sm = 90;
  struct {
    const nvfp4_kernel_info* info;
    std::string name() const { return "cuda_twin"; }
  } cuda{&cuda_info};
  ScheduleOptions plain;
  plain.seed = 20261202;
  ScheduleOptions roomy = plain;
  roomy.device_free_bytes = uint64_t(139) << 30;  // an H200
  const int64_t n = 1280;
  const Schedule without(*cuda.info, cuda.name(), plain), with(*cuda.info, cuda.name(), roomy);
  int64_t huge = 0;
  std::set<int64_t> widths;
  ScheduleStats stats;
  for (int64_t i = 0; i < n; ++i) {
    const ScheduledCase a = without.at(i), b = with.at(i);
    stats.add(b);
    ASSERT_NE(a.kind, CaseKind::huge);
    if (b.kind != CaseKind::huge) {
      EXPECT_EQ(b.problem.x, a.problem.x) << i;
      EXPECT_EQ(b.problem.m, a.problem.m) << i;
      continue;
    }
    ++huge;
    const Problem& p = b.problem;
    const int64_t elements = p.l * p.m * p.k;
    EXPECT_GE(elements, int64_t(1) << 31) << i;
    EXPECT_LT(elements - (int64_t(1) << 31), 9 * p.k) << i << ": just past 2^31, by at most 8 rows";
    EXPECT_TRUE(p.x.empty()) << "a huge case's X is drawn when it is checked";
    EXPECT_NE(p.in_type, InType::fp32) << "two-byte X where the kernel declares it";
    EXPECT_EQ(p.seed, a.problem.seed) << "the same data seed as without the tier";
    EXPECT_NE(p.note.find("huge tier"), std::string::npos) << p.note;
    widths.insert(p.k);
  }
  // 1280 / 64 = 20 expected; a binomial count below 6 or above 40 has probability < 1e-4.
  EXPECT_GE(huge, 6);
  EXPECT_LE(huge, 40);
  EXPECT_EQ(widths, (std::set<int64_t>{2688, 5120, 7168}));
  EXPECT_EQ(stats.huge, huge);
  EXPECT_EQ(stats.by_kind["huge"], huge);
  EXPECT_NE(stats.text().find(fmt::format("huge tier {}", huge)), std::string::npos) << stats.text();

  // Host kernels never, whatever the options say; a device without room never; `always`: every case.
  ScheduleOptions always = roomy;
  always.huge = HugeTier::always;
  const Schedule host_always(*host.info, host.name(), always);
  ScheduleOptions short_of_room = always;
  short_of_room.device_free_bytes = uint64_t(6) << 30;  // holds one call of a BF16 case, not twice
  const Schedule cramped(*cuda.info, cuda.name(), short_of_room);
  ScheduleOptions off = always;
  off.huge = HugeTier::off;
  const Schedule none(*cuda.info, cuda.name(), off), every(*cuda.info, cuda.name(), always);
  for (int64_t i = 0; i < 40; ++i) {
    EXPECT_NE(host_always.at(i).kind, CaseKind::huge);
    EXPECT_NE(cramped.at(i).kind, CaseKind::huge);
    EXPECT_NE(none.at(i).kind, CaseKind::huge);
    const ScheduledCase c = every.at(i);
    EXPECT_EQ(c.kind, CaseKind::huge) << i;
    EXPECT_LE(2 * quantize_op::device_bytes(c.problem) + (uint64_t(2) << 30), always.device_free_bytes);
  }
}

// Past kRowSeededElements X is drawn row by row from seeds of its own, in parallel: the same bytes
// for any number of threads, each row its own data, the class's blocks (here the zero blocks and
// NaN elements of `edges`) in every part of the tensor.
TEST(QuantizeOp, RowSeededXIsTheSameForAnyThreadCount) {
  Problem p;
  p.op = Op::quantize;
  p.l = 1, p.k = 2688;
  p.m = quantize_op::kRowSeededElements / p.k + 3;
  p.in_type = InType::bf16;
  p.recipe = Recipe::te;
  p.sf_layout = SfLayout::linear;
  p.seed = 99;
  p.generator = "quantize/edges";
  Problem one = p, many = p;
  omp_set_num_threads(1);
  quantize_op::fill_x(one);
  omp_set_num_threads(4);
  quantize_op::fill_x(many);
  omp_set_num_threads(omp_get_num_procs());
  ASSERT_EQ(one.x.size(), static_cast<size_t>(p.x_bytes()));
  EXPECT_TRUE(one.x == many.x);
  const size_t row = static_cast<size_t>(p.k) * 2;
  EXPECT_FALSE(std::equal(one.x.begin(), one.x.begin() + row, one.x.begin() + row)) << "rows 0 and 1 alike";
  // NaN elements (BF16 exponent all ones, mantissa nonzero) in the first and the last quarter.
  auto nan_in = [&](size_t from, size_t to) {
    for (size_t e = from; e < to; e += 2) {
      const uint16_t w = static_cast<uint16_t>(one.x[e] | one.x[e + 1] << 8);
      if ((w & 0x7F80) == 0x7F80 && (w & 0x7F)) return true;
    }
    return false;
  };
  EXPECT_TRUE(nan_in(0, one.x.size() / 4));
  EXPECT_TRUE(nan_in(one.x.size() / 4 * 3, one.x.size()));
}

// A kernel's observed output for problem p: Q and SFQ (in p's layout, padding `pad`) as words.
std::vector<uint32_t> words_of(const Problem& p, const std::vector<uint8_t>& q, const std::vector<uint8_t>& sfq_linear,
                               uint8_t pad) {
  std::vector<uint32_t> w(q.begin(), q.end());
  const std::vector<uint8_t> sfq =
      p.sf_layout == SfLayout::permuted ? sf_to_permuted(sfq_linear.data(), p.m, p.qkb(), p.l, pad) : sfq_linear;
  w.insert(w.end(), sfq.begin(), sfq.end());
  return w;
}

struct Judged {
  std::optional<Finding> finding;
  OracleSummary summary;
};

Judged judge_words_of(const Problem& p, const ExactResult& ref, const std::vector<uint32_t>& words, uint32_t flags,
                      uint8_t pad, CaseCall call = CaseCall::run1) {
  CallObservation o;
  o.c = o.c_later = words;
  const Policy policy = Policy::for_flags(0);
  CallContext::Judgement j;
  CallContext x;
  x.call = call;
  x.problem = &p;
  x.reference = &ref;
  x.observation = &o;
  x.policy = &policy;
  x.kernel_flags = flags;
  x.pad = pad;
  x.poison = poison_word(p.out_type, 1);
  x.judgement = &j;
  Judged out;
  out.finding = first_finding(x);
  out.summary = j.summary;
  return out;
}

Problem permuted_case() {
  Problem p;
  p.op = Op::quantize;
  p.m = 130, p.k = 80, p.l = 1;  // padding rows (130 -> 256) and blocks (5 -> 8)
  p.sf_layout = SfLayout::permuted;
  p.in_type = InType::bf16;
  p.recipe = Recipe::te;
  p.x.clear();
  p.seed = 5;
  p.generator = "quantize/plain";
  expand_seeded_case(p);
  return p;
}

TEST(QuantizeOp, PaddingMustBeZeroUnlessTheKernelKeepsIt) {
  const Problem p = permuted_case();
  const ExactResult ref = op_reference(p);
  const QuantResult& q = *ref.quant;
  EXPECT_FALSE(judge_words_of(p, ref, words_of(p, q.q, q.sfq, 0x00), 0, kPad1).finding);
  const Judged left = judge_words_of(p, ref, words_of(p, q.q, q.sfq, kPad1), 0, kPad1);
  ASSERT_TRUE(left.finding);
  EXPECT_EQ(check_name(left.finding->check), std::string("oracle"));
  EXPECT_NE(left.finding->message.find("padding cells of the permuted SFQ"), std::string::npos) << left.finding->message;
  // Declared kept: the runner's byte must still be there, and 0x00 is then a change.
  EXPECT_FALSE(judge_words_of(p, ref, words_of(p, q.q, q.sfq, kPad1), NVFP4_FLAG_SF_PADDING_KEPT, kPad1).finding);
  EXPECT_TRUE(judge_words_of(p, ref, words_of(p, q.q, q.sfq, 0x00), NVFP4_FLAG_SF_PADDING_KEPT, kPad1).finding);
}

TEST(QuantizeOp, TheChainCheckNamesALayoutTheKernelDoesNotDeclare) {
  const Problem p = permuted_case();
  const ExactResult ref = op_reference(p);
  const QuantResult& q = *ref.quant;
  // Linear scales written into the permuted buffer (vllm PR #42089), the rest zero.
  std::vector<uint32_t> words(q.q.begin(), q.q.end());
  std::vector<uint8_t> sfq(static_cast<size_t>(sf_permuted_bytes(p.m, p.qkb(), p.l)), 0x00);
  std::copy(q.sfq.begin(), q.sfq.end(), sfq.begin());
  words.insert(words.end(), sfq.begin(), sfq.end());
  const Judged j = judge_words_of(p, ref, words, 0, kPad1);
  ASSERT_TRUE(j.finding);
  EXPECT_NE(j.finding->message.find("a GEMV consuming Q and SFQ in the declared permuted layout"), std::string::npos)
      << j.finding->message;
  EXPECT_NE(j.finding->message.find("the kernel writes linear scales while it declares permuted ones"), std::string::npos)
      << j.finding->message;
}

TEST(QuantizeOp, QStillHoldingThePoisonIsUnwritten) {
  const Problem p = permuted_case();
  const ExactResult ref = op_reference(p);
  const QuantResult& q = *ref.quant;
  const uint8_t poison = static_cast<uint8_t>(poison_word(p.out_type, 1) & 0xFF);
  std::vector<uint8_t> codes = q.q;
  for (size_t e = codes.size() / 2; e < codes.size(); ++e) codes[e] = poison;  // the second half never written
  const Judged j = judge_words_of(p, ref, words_of(p, codes, q.sfq, 0x00), 0, kPad1);
  ASSERT_TRUE(j.finding);
  EXPECT_EQ(check_name(j.finding->check), std::string("unwritten-output")) << j.finding->message;
  EXPECT_NE(j.finding->message.find("byte(s) of Q unwritten"), std::string::npos) << j.finding->message;
}

// A problem of a format the kernel does not declare is handed over to be refused (the kernel can
// tell from q_format): refused and untouched, it passes; the outputs' padding held the pad byte.
TEST(QuantizeOp, AnUndeclaredFormatIsRefusedUntouched) {
  Problem p = permuted_case();
  p.q_format = BlockFormat::mxfp4;
  p.recipe = Recipe::mx_rceil;
  const CaseOutcome r = check_in_process(builtin("host_quantize_nvfp4"), p);
  EXPECT_EQ(r.verdict, CaseOutcome::Verdict::unsupported) << check_of(r) << ": " << message_of(r);
}

TEST(QuantizeOp, StaleDataNegatesAndMovesRows) {
  const Problem p = permuted_case();
  const ExactResult ref = op_reference(p);
  const StaleVariant v = stale_variant(p, ref, 3);
  ASSERT_EQ(v.problem.x.size(), p.x.size());
  EXPECT_NE(v.problem.x, p.x);
  ASSERT_TRUE(v.reference.quant);
  EXPECT_NE(v.reference.quant->q, ref.quant->q);  // a kernel returning the old Q fails the stale call
}

// The kernel's process derives the stale call's X from the case's own (no second copy travels):
// the op's in-place rule gives exactly stale_variant's data, and undoing it gives X back, for 1x16
// blocks and 16x16 tiles (whole tiles move).
TEST(QuantizeOp, StaleDataDerivedInPlaceIsTheStaleVariantsAndUndoes) {
  const auto stale_in_place = op_module(Op::quantize).stale_in_place;
  ASSERT_NE(stale_in_place, nullptr);
  for (const bool tiles : {false, true}) {
    Problem p = permuted_case();
    p.quant_2d = tiles;  // (the shape alone: the in-place rule reads only it and X)
    p.m = 48;
    p.seed = 7;
    p.generator = "quantize/plain";
    p.x.clear();
    expand_seeded_case(p);
    for (const uint64_t seed : {3ull, 99ull, 12345ull}) {
      const StaleVariant v = stale_variant(p, op_reference(p), seed);
      Problem q = p;
      stale_in_place(q, seed, false);
      EXPECT_EQ(q.x, v.problem.x) << "tiles " << tiles << " seed " << seed;
      stale_in_place(q, seed, true);
      EXPECT_EQ(q.x, p.x) << "tiles " << tiles << " seed " << seed;
    }
  }
}

// A quantizer that returns its last output when called again with the same X pointer (a result
// kept by pointer) fails the stale call, whose data its process derived in place.
const uint8_t* g_last_x = nullptr;
std::vector<uint8_t> g_last_q, g_last_sfq;
int run_cached_by_pointer(int, const nvfp4_problem* p) {
  Problem shape;
  shape.op = Op::quantize;
  shape.m = p->m, shape.k = p->k, shape.l = p->l;
  shape.q_format = static_cast<BlockFormat>(p->q_format);
  const size_t qn = static_cast<size_t>(shape.q_bytes()),
               sn = static_cast<size_t>(p->sf_layout == NVFP4_SF_PERMUTED ? sf_permuted_bytes(shape.m, shape.qkb(), shape.l)
                                                                            : shape.sfq_bytes());
  if (p->x == g_last_x && g_last_q.size() == qn) {
    std::memcpy(p->q, g_last_q.data(), qn);
    std::memcpy(p->sfq, g_last_sfq.data(), sn);
    return NVFP4_OK;
  }
  const int rc = kern::quant::quantize_on_host(p, *builtin("host_quantize_nvfp4").info, kern::quant::Bug::none);
  g_last_x = static_cast<const uint8_t*>(p->x);
  g_last_q.assign(p->q, p->q + qn);
  g_last_sfq.assign(p->sfq, p->sfq + sn);
  return rc;
}

TEST(QuantizeOp, AResultKeptByPointerFailsTheDerivedStaleCall) {
  Kernel cached;
  cached.info = builtin("host_quantize_nvfp4").info;
  cached.run_fn = run_cached_by_pointer;
  const CaseOutcome r = check_in_process(cached, permuted_case());
  EXPECT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "stale-state") << message_of(r);
}

}  // namespace
}  // namespace nvfp4
