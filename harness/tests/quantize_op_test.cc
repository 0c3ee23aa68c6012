// The quantize op's module (harness/ops/): every op has a module; the built-in host quantizers
// pass their own schedule; the schedule reaches every declared recipe, input type, layout and
// data class; and the oracle's side of the module says what it should for a kernel that leaves
// padding, writes another layout than it declares, or writes nothing (observations built here,
// so each text is checked against a known cause).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/judge/case_check.h"
#include "harness/judge/checks.h"
#include "harness/ops/op_module.h"
#include "harness/draw/schedule.h"
#include "harness/tests/check_in_process.h"
#include "kernels/registry.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

TEST(OpModules, EveryOpHasOneAndANameThatParses) {
  const std::vector<std::string> names = op_names();
  ASSERT_EQ(names.size(), 5u);
  for (const std::string& name : names) {
    Op op;
    ASSERT_TRUE(parse_op(name, &op)) << name;
    EXPECT_EQ(to_string(op), name);
    const OpModule& m = op_module(op);
    EXPECT_TRUE(m.lay_out && m.judge && m.unwritten && m.stale_variant && m.shape_text) << name;
  }
  EXPECT_EQ(op_module(Op::quantize).op, Op::quantize);
}

// Case i of a built-in quantizer's schedule, with its data.
Problem scheduled(const Kernel& k, int64_t i, uint64_t seed = 31) {
  ScheduleOptions o;
  o.seed = seed;
  const Schedule s(*k.info, k.name(), o);
  return s.at(i).problem;
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
  const ExactResult ref = exact_gemm(p);
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
  const ExactResult ref = exact_gemm(p);
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
  const ExactResult ref = exact_gemm(p);
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
  const ExactResult ref = exact_gemm(p);
  const StaleVariant v = stale_variant(p, ref, 3);
  ASSERT_EQ(v.problem.x.size(), p.x.size());
  EXPECT_NE(v.problem.x, p.x);
  ASSERT_TRUE(v.reference.quant);
  EXPECT_NE(v.reference.quant->q, ref.quant->q);  // a kernel returning the old Q fails the stale call
}

}  // namespace
}  // namespace nvfp4
