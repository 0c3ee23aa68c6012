// Reports: the error map shows a bad element where it is, JSON results add up, the SPEC section 6
// report has its fields, the table names every kernel.
#include <gtest/gtest.h>
#include <png.h>

#include <filesystem>
#include <set>

#include "harness/judge/checks.h"
#include "harness/draw/generators.h"
#include "harness/engine/report.h"
#include "harness/engine/report_fields.h"
#include "harness/engine/report_merge.h"
#include "harness/engine/suite.h"
#include "harness/tests/scratch_dir.h"
#include "reference/exact_gemm.h"

namespace nvfp4 {
namespace {

// `list` on a machine without a GPU: the one reason every CUDA kernel shares is printed once under
// the table, a reason of one kernel stays on its row.
TEST(KernelTable, AReasonSharedByKernelsIsPrintedOnce) {
  const std::string shared = "no usable CUDA device (cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device)";
  std::vector<SuiteKernel> kernels(4);
  const char* names[] = {"host_a", "cuda_a", "cuda_b", "odd_one"};
  for (int i = 0; i < 4; ++i) {
    kernels[i].desc.name = names[i];
    kernels[i].desc.origin = "builtin";
    kernels[i].desc.info.memory = i == 0 ? NVFP4_MEMORY_HOST : NVFP4_MEMORY_CUDA;
    kernels[i].desc.info.ops = 1u << NVFP4_OP_GEMV;
  }
  kernels[1].desc.runnable = kernels[2].desc.runnable = kernels[3].desc.runnable = false;
  kernels[1].desc.why_not = kernels[2].desc.why_not = shared;
  kernels[3].desc.why_not = "needs sm_100";
  const std::string t = kernel_table(kernels);
  size_t count = 0;
  for (size_t at = t.find(shared); at != std::string::npos; at = t.find(shared, at + 1)) ++count;
  EXPECT_EQ(count, 1u) << t;
  EXPECT_NE(t.find("[1] 2 kernels cannot run here: " + shared), std::string::npos) << t;
  EXPECT_NE(t.find("no: needs sm_100"), std::string::npos) << t;
  size_t marks = 0;
  for (size_t at = t.find("no [1]"); at != std::string::npos; at = t.find("no [1]", at + 1)) ++marks;
  EXPECT_EQ(marks, 2u) << t;
}

Problem small_problem() {
  Problem p;
  p.op = Op::gemm;
  p.m = 5;
  p.n = 3;
  p.k = 32;
  p.l = 2;
  Rng rng(4242);
  fill_data(rng, DataSpec{}, p);
  return p;
}

struct Image {
  png_uint_32 width = 0, height = 0;
  std::vector<uint8_t> rgb;
  const uint8_t* at(png_uint_32 x, png_uint_32 y) const { return &rgb[(y * width + x) * 3]; }
};

Image read_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  EXPECT_TRUE(png_image_begin_read_from_file(&image, path.c_str())) << image.message;
  image.format = PNG_FORMAT_RGB;
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  EXPECT_TRUE(png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) << image.message;
  return out;
}

TEST(ErrorMap, MarksTheBadElementInItsBatchPanel) {
  const Problem p = small_problem();
  const ExactResult ref = exact_gemm(p);
  std::vector<uint32_t> c = ref.words();
  const int64_t bad = (1 * p.m + 4) * p.n + 2;  // b=1, i=4, j=2: the tail corner of batch 1
  c[bad] ^= 0x0100;
  const std::filesystem::path dir = test::scratch_dir("error-map");
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "error_map_test.png").string();
  write_error_map_png(path, p, ref, c, Policy{});
  const Image img = read_png(path);
  // Cells: 1200 / (l*n) = 200 -> clamped to 24 wide; 800 / m = 160 -> 24 high; 2-pixel gap.
  ASSERT_EQ(img.width, 2u * 3 * 24 + 2);
  ASSERT_EQ(img.height, 5u * 24);
  const uint8_t* bad_px = img.at(3 * 24 + 2 + 2 * 24 + 5, 4 * 24 + 5);
  EXPECT_EQ(bad_px[0], 255);  // red channel: beyond the bound
  EXPECT_EQ(bad_px[2], 0);
  const uint8_t* good_px = img.at(5, 5);
  EXPECT_EQ(good_px[0], 48);  // the right bits: dark grey
  const uint8_t* gap_px = img.at(3 * 24, 5);
  EXPECT_EQ(gap_px[0], 255);  // white panel separator
  EXPECT_EQ(gap_px[1], 255);
}

TEST(ErrorMap, PathSitsNextToTheCase) {
  EXPECT_EQ(error_map_path_for("dir/x-gemm-1x1x2x1-ab.case", ""), "dir/x-gemm-1x1x2x1-ab.png");
  EXPECT_EQ(error_map_path_for("corpus/a.case", "out"), "out/a.png");
}

CaseOutcome failing_result() {
  CaseOutcome r;
  r.problem = small_problem();
  r.reference = exact_gemm(r.problem);
  std::vector<uint32_t> c = r.reference.words();
  c[4] ^= 0x0001;
  r.c = c;
  r.summary = judge_words(r.problem, r.reference, r.c.data(), r.policy);
  r.verdict = CaseOutcome::Verdict::fail;
  r.finding = Finding{Check::oracle, "wrong"};
  r.call = CaseCall::run1;
  r.case_file = "cases/k.case";
  return r;
}

TEST(Report, FailureTextSaysWhereAndHowFar) {
  const CaseOutcome r = failing_result();
  const std::string t =
      failure_text("kern", 77, r, "cases/k.png", reproduce_command(r.case_file, {"--plugin", "/p/lib k.so", "--kernel", "kern"}));
  EXPECT_NE(t.find("during: run 1"), std::string::npos);
  EXPECT_NE(t.find("FAIL kern"), std::string::npos);
  EXPECT_NE(t.find("seed 77"), std::string::npos);
  EXPECT_NE(t.find("(b=0, i=1, j=1)"), std::string::npos) << t;  // element 4 of a 5x3 output
  EXPECT_NE(t.find("0x"), std::string::npos);
  EXPECT_NE(t.find("ulps"), std::string::npos);
  EXPECT_NE(t.find("cases/k.case"), std::string::npos);
  EXPECT_NE(t.find("cases/k.png"), std::string::npos);
  // The plugin is named, and quoted for the shell where its path needs it.
  EXPECT_NE(t.find("reproduce: nvfp4check replay cases/k.case --plugin '/p/lib k.so' --kernel kern"),
            std::string::npos) << t;
}

// SPEC section 3: a kernel declaring IEEE adds that fails only by what the matrix-unit rule allows
// is told to declare NVFP4_FLAG_MMA_ACCUMULATE, in the text a person reads (the element is
// printed apart from the message there, and the hint must not go with the message's tail).
TEST(Report, FailureTextNamesTheMatrixUnitFlagWhenThatRuleWouldPass) {
  const Policy ieee = Policy::for_flags(0);
  const Policy mma = ieee.with_accumulation(Accumulation::matrix_unit);  // provisional: 9t, 2^22 g
  for (uint64_t seed = 1; seed < 200; ++seed) {
    Problem p;
    p.op = Op::gemm;
    p.m = 4, p.n = 4, p.k = 1024, p.l = 1;
    Rng rng(seed);
    fill_data(rng, DataSpec{ValueDist::uniform, ScaleDist::full, AlphaDist::one}, p);
    const ExactResult ref = exact_gemm(p);
    for (size_t e = 0; e < ref.c.size(); ++e) {
      if (judge_element(ref.elems[e], p.alpha, ref.c[e], ieee).exact_regime || ref.elems[e].nan) continue;
      // Walk away from the right bits until IEEE's bound is passed; keep it if the rule allows it.
      uint16_t h = ref.c[e];
      while (judge_element(ref.elems[e], p.alpha, h, ieee).ok && (h & 0x7C00u) != 0x7C00u) ++h;
      if ((h & 0x7C00u) == 0x7C00u || !judge_element(ref.elems[e], p.alpha, h, mma).ok) continue;
      CallObservation o;
      std::vector<uint32_t> c = ref.words();
      c[e] = h;
      o.c = c;
      o.c_later = o.c;
      CallContext x;
      CallContext::Judgement judgement;
      x.call = CaseCall::run1;
      x.problem = &p;
      x.reference = &ref;
      x.observation = &o;
      x.policy = &ieee;
      x.judgement = &judgement;
      std::optional<Finding> f = first_finding(x);
      ASSERT_TRUE(f && f->check == Check::oracle);
      CaseOutcome r;
      r.problem = p;
      r.reference = ref;
      r.c = o.c;
      r.policy = ieee;
      r.summary = judgement.summary;
      r.verdict = CaseOutcome::Verdict::fail;
      r.finding = std::move(f);
      r.call = CaseCall::run1;
      const std::string t = failure_text("truncating_host", 1, r, "", "");
      EXPECT_NE(t.find("NVFP4_FLAG_MMA_ACCUMULATE"), std::string::npos) << t;
      EXPECT_NE(t.find("first bad element"), std::string::npos) << t;
      return;
    }
  }
  FAIL() << "no element in the rounding regime found where only the matrix-unit rule passes";
}

// A dual GEMM's error may come from its epilogue (silu, the product, FP32's underflow), which the
// matrix-unit rule's wider allowance for G and U would absorb: the flag is never offered there,
// even where that rule would pass every output.
TEST(Report, NoMatrixUnitHintForADualGemmEvenWhereThatRuleWouldPass) {
  const Policy ieee = Policy::for_flags(0);
  const Policy mma = ieee.with_accumulation(Accumulation::matrix_unit);  // provisional: 9t, 2^22 g
  for (uint64_t seed = 1; seed < 400; ++seed) {
    Problem p;
    p.op = Op::dual_gemm;
    p.m = 3, p.n = 3, p.k = 1024, p.l = 1;
    p.out_type = OutType::fp32;
    Rng rng(seed);
    fill_data(rng, DataSpec{ValueDist::uniform, ScaleDist::full, AlphaDist::one}, p);
    const ExactResult ref = exact_gemm(p);
    for (size_t e = 0; e < ref.size(); ++e) {
      if (ref.elems[e].nan || ref.elems2[e].nan) continue;
      // Walk away from the right word until rule 6 under IEEE adders fails; keep it if the
      // matrix-unit rule passes it.
      uint32_t w = ref.c32[e];
      for (int step = 0; step < 4096 && judge_output(p, ref, static_cast<int64_t>(e), w, ieee).ok; ++step) ++w;
      if (judge_output(p, ref, static_cast<int64_t>(e), w, ieee).ok ||
          !judge_output(p, ref, static_cast<int64_t>(e), w, mma).ok)
        continue;
      std::vector<uint32_t> c = ref.words();
      c[e] = w;
      ASSERT_TRUE(judge_words(p, ref, c.data(), ieee).any_failure());
      ASSERT_FALSE(judge_words(p, ref, c.data(), mma).any_failure());
      EXPECT_EQ(accumulation_hint(p, ref, c, ieee), "") << "seed " << seed << " element " << e;
      return;
    }
  }
  FAIL() << "no dual GEMM element found that only the matrix-unit rule passes";
}

// An element where Inf is due (or given) has no meaningful ulp distance: the texts say in words
// what the kernel did.
TEST(Report, AnInfiniteErrorIsSaidInWords) {
  Problem huge = small_problem();
  huge.alpha = 0x1p40f;  // every output overflows FP16
  const Problem plain = small_problem();
  auto text_of = [](const Problem& p, uint32_t actual) {
    CaseOutcome r;
    r.problem = p;
    r.reference = exact_gemm(p);
    std::vector<uint32_t> c = r.reference.words();
    size_t e = 0;  // the first element that is no NaN
    while (is_nan_out(OutType::fp16, c[e])) ++e;
    c[e] = actual == 0 ? c[e] ^ 0x0001u : actual == 1 ? (c[e] & 0x8000u) | 0x7BFFu : actual;
    r.c = c;
    r.summary = judge_words(p, r.reference, r.c.data(), r.policy);
    r.verdict = CaseOutcome::Verdict::fail;
    r.finding = Finding{Check::oracle, oracle_text(OutType::fp16, r.summary, r.policy)};
    r.call = CaseCall::run1;
    return r.finding->message + "\n" + failure_text("k", 1, r, "", "");
  };
  // 1: +-65504, the sign of the infinity due.
  std::string t = text_of(huge, 1);
  EXPECT_EQ(t.find("ulps"), std::string::npos) << t;
  EXPECT_NE(t.find("saturated to the largest finite value where the exact value overflows fp16"), std::string::npos) << t;
  EXPECT_NE(t.find("65520"), std::string::npos) << t;  // where FP16 overflows
  t = text_of(huge, 0x3C00u);
  EXPECT_EQ(t.find("ulps"), std::string::npos) << t;
  EXPECT_NE(t.find("gave a finite value where the exact value overflows"), std::string::npos) << t;
  t = text_of(plain, 0x7C00u);
  EXPECT_EQ(t.find("ulps"), std::string::npos) << t;
  EXPECT_NE(t.find("gave inf where the exact value rounds to a finite fp16"), std::string::npos) << t;
  // 0: one ulp off a finite value keeps its figures.
  t = text_of(plain, 0);
  EXPECT_NE(t.find("ulps"), std::string::npos) << t;
}

TEST(Report, GroupedShapeListsTheNonEmptyGroupsFirst) {
  // Twelve groups, only 9 and 11 with rows: those are the ones a reader needs, the first eight
  // empty ones say nothing.
  Problem p;
  p.op = Op::grouped_gemm;
  for (int g = 0; g < 12; ++g) {
    Group q;
    q.m = g == 9 ? 37 : g == 11 ? 5 : 0;
    q.n = 8;
    q.k = 64;
    q.alpha = g == 11 ? 0.5f : 1.0f;
    p.groups.push_back(q);
  }
  EXPECT_EQ(shape_text(p), "grouped_gemm 12 groups, 10 empty: g9=37x8x64 g11=5x8x64 alpha=0.5 g0=0x8x64 g1=0x8x64 "
                           "g2=0x8x64 g3=0x8x64 g4=0x8x64 g5=0x8x64 ... (4 more)");
  for (Group& q : p.groups) q.m = 3;
  EXPECT_EQ(shape_text(p).rfind("grouped_gemm 12 groups: g0=3x8x64 g1=3x8x64 ", 0), 0u) << shape_text(p);
}

TEST(Report, EveryCheckHasOneNameAndMeaningThatReadBack) {
  std::set<std::string> names;
  for (Check c : kAllChecks) {
    EXPECT_TRUE(names.insert(check_name(c)).second) << check_name(c);
    EXPECT_EQ(check_from_name(check_name(c)), c);
    EXPECT_GT(std::string(check_meaning(c)).size(), 10u) << check_name(c);
  }
  EXPECT_EQ(names.size(), 17u);
  EXPECT_FALSE(check_from_name("no-such-check"));
}

// Which later call a finding names is a column of the check list, not a check's place in it.
TEST(Report, FindingsNameTheCallAsTheCheckListSays) {
  auto said = [](Check c, CaseCall call) {
    Finding f{c, "m"};
    say_which_call(f, call, "k not a multiple of 64");
    return f.message;
  };
  EXPECT_EQ(said(Check::guard, CaseCall::stale), "after new data in place: m");
  EXPECT_EQ(said(Check::crash, CaseCall::run2), "second run: m");
  EXPECT_EQ(said(Check::stream, CaseCall::unsupported), "m (k not a multiple of 64)");
  EXPECT_EQ(said(Check::oracle, CaseCall::run2), "second run: m");
  EXPECT_EQ(said(Check::oracle, CaseCall::stale), "m");
  EXPECT_EQ(said(Check::stale_state, CaseCall::stale), "m");
  EXPECT_EQ(said(Check::unsupported_touched_output, CaseCall::unsupported), "m");
  EXPECT_EQ(said(Check::determinism, CaseCall::run2), "m");
  EXPECT_EQ(said(Check::guard, CaseCall::run1), "m");
  for (Check c : kAllChecks)
    if (names_call(c) == CallNaming::every) { EXPECT_FALSE(blames_elements(c)) << check_name(c); }
}

TEST(Report, ShellQuotingSurvivesQuotes) {
  EXPECT_EQ(shell_quote("plain/path-1.case"), "plain/path-1.case");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
}

TEST(Report, ReproduceLinesSplitBackIntoTheirWords) {
  const KernelArgs args = {"--kernel", "k", "--python", "it's a file.py:fn", ""};
  const std::optional<std::vector<std::string>> words = shell_words(reproduce_command("/tmp/a b.case", args));
  ASSERT_TRUE(words);
  const std::vector<std::string> want = {"nvfp4check", "replay", "/tmp/a b.case", "--kernel", "k", "--python",
                                         "it's a file.py:fn", ""};
  EXPECT_EQ(*words, want);
  EXPECT_FALSE(shell_words("nvfp4check replay 'open"));
}

TEST(Report, ResultsAddUpAndTheReportHasSpecFields) {
  KernelReport k;
  k.name = "kern";
  CaseOutcome pass = failing_result();
  pass.verdict = CaseOutcome::Verdict::pass;
  pass.finding.reset();
  pass.summary = judge(pass.problem, pass.reference, pass.reference.c.data(), pass.policy);
  add_outcome(k, pass, 0, "", "");
  EXPECT_EQ(k.verdict, KernelVerdict::pass);
  const CaseOutcome fail = failing_result();
  add_outcome(k, fail, 1, "text", "map.png");
  add_outcome(k, fail, 2, "second", "");
  EXPECT_EQ(k.cases, 3);
  EXPECT_EQ(k.failed_cases, 2);
  EXPECT_EQ(k.verdict, KernelVerdict::fail);
  ASSERT_TRUE(k.failure.has_value());
  EXPECT_EQ(k.failure->text, "text");  // the first failure is kept
  EXPECT_EQ(k.failure->error_map, "map.png");
  EXPECT_TRUE(k.failure->has_element);
  EXPECT_EQ(k.failure->i, 1);
  EXPECT_EQ(k.failure->case_index, 1);
  EXPECT_GT(k.max_error_ulps, 0);
  // Nothing checked is never a pass.
  KernelReport none;
  none.name = "none";
  CaseOutcome skipped_case;
  skipped_case.verdict = CaseOutcome::Verdict::skipped;
  skipped_case.message = "e4m3 scales with sign bits";
  add_outcome(none, skipped_case, 0, "", "");
  finish_report(none);
  EXPECT_EQ(none.verdict, KernelVerdict::skipped);
  EXPECT_NE(none.skip_reason.find("sign bits"), std::string::npos);

  KernelReport skipped;
  skipped.name = "gpu_only";
  skipped.verdict = KernelVerdict::skipped;
  skipped.skip_reason = "no CUDA device";
  const nlohmann::json j = report_json(uint64_t{9}, {k, skipped}, "nvfp4check run");
  EXPECT_EQ(j["seed"], 9);
  ASSERT_EQ(j["kernels"].size(), 2u);
  EXPECT_EQ(j["kernels"][0]["name"], "kern");
  EXPECT_EQ(j["kernels"][0]["verdict"], "fail");
  EXPECT_EQ(j["kernels"][0]["cases"], 3);
  EXPECT_EQ(j["kernels"][0]["failure"]["check"], "oracle");
  EXPECT_EQ(j["kernels"][0]["failure"]["case_file"], "cases/k.case");
  EXPECT_EQ(j["kernels"][1]["verdict"], "skipped");
  EXPECT_FALSE(j["kernels"][1].contains("failure"));

  EXPECT_EQ(j["kernels"][0]["accumulation"], "ieee-fp32");
  KernelReport timed = k;
  timed.flags = NVFP4_FLAG_MMA_ACCUMULATE;
  timed.step_seconds = {{"start", 0.5}, {"reference", 1.25}, {"run 1", 0.125}};
  const nlohmann::json t = report_json(std::nullopt, {timed}, "nvfp4check run --shape 7168x1x16384");
  EXPECT_EQ(t["kernels"][0]["stage_seconds"]["reference"], 1.25);
  EXPECT_EQ(t["kernels"][0]["stage_seconds"].size(), 3u);
  EXPECT_EQ(t["kernels"][0]["accumulation"], "matrix-unit");
  EXPECT_EQ(step_text(timed), "start 0.50 s, reference 1.25 s, run 1 0.12 s");

  const std::string table = summary_table({k, skipped});
  EXPECT_NE(table.find("kern"), std::string::npos);
  EXPECT_NE(table.find("oracle"), std::string::npos);
  EXPECT_NE(table.find("no CUDA device"), std::string::npos);

  // A reason shared by several kernels is one line naming them, not one per kernel.
  KernelReport also = skipped;
  also.name = "gpu_only_2";
  const std::string shared = summary_table({k, skipped, also});
  EXPECT_EQ(shared.find("no CUDA device"), shared.rfind("no CUDA device")) << shared;
  EXPECT_NE(shared.find("skipped 2 kernels (gpu_only, gpu_only_2): no CUDA device\n"), std::string::npos) << shared;
}

// A report read back holds every field it was written with: the writer and the reader walk one
// list, so no field is written and forgotten (warm-up time, stream, why a case was not saved).
TEST(Report, EveryFieldReadsBackAsItWasWritten) {
  KernelReport k;
  k.name = "kern";
  k.origin = "plugin.so";
  k.origin_identity = "fnv1a64:00";
  k.verdict = KernelVerdict::fail;
  k.flags = 5;
  k.policy = "ieee";
  k.stream = "legacy";
  k.cases = 7, k.unsupported_cases = 1, k.skipped_cases = 2, k.first_skip = "e4m3", k.failed_cases = 1;
  k.elements = 40, k.exact_elements = 30, k.unjudged_elements = 2;
  k.max_error_ulps = 3.5, k.max_error_over_bound = std::numeric_limits<double>::infinity();
  k.seconds = 1.25, k.workers = 2, k.warmup_seconds = 61.5;
  k.add_time("kernel", 0.5);
  k.drawn.cases = 9, k.drawn.batched = 4, k.drawn.by_op["gemm"] = 9;
  FailureRecord f;
  f.check = Check::stale_state, f.message = "m", f.hint = "h", f.call = CaseCall::run2, f.case_index = 6;
  f.case_file = "c.case", f.case_file_error = "disk full", f.reproduce = "nvfp4check replay c.case";
  f.has_element = true, f.g = -1, f.b = 1, f.i = 2, f.j = 3, f.expected = 0x3c00, f.actual = 0x3c01;
  f.error_ulps = 1, f.error_over_bound = 2, f.bound = 0.5;
  f.notes = {"run again with --stream legacy, passed"};
  k.failure = f;
  const nlohmann::json entry = report_json(uint64_t{1}, {k}, "nvfp4check run").at("kernels").at(0);
  const KernelReport r = kernel_report_from_json(entry);
  EXPECT_EQ(r.origin_identity, k.origin_identity);
  EXPECT_EQ(r.stream, "legacy");
  EXPECT_EQ(r.warmup_seconds, 61.5);
  EXPECT_EQ(r.first_skip, "e4m3");
  EXPECT_EQ(r.unjudged_elements, 2);
  EXPECT_EQ(r.max_error_over_bound, k.max_error_over_bound);
  EXPECT_EQ(r.step_seconds, k.step_seconds);
  EXPECT_EQ(r.drawn.batched, 4);
  EXPECT_EQ(r.drawn.by_op, k.drawn.by_op);
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->case_file_error, "disk full");
  EXPECT_EQ(r.failure->call, CaseCall::run2);
  EXPECT_EQ(r.failure->check, Check::stale_state);
  EXPECT_EQ(r.failure->actual, 0x3c01u);
  EXPECT_EQ(r.failure->word_digits, 4);
  EXPECT_EQ(r.failure->bound, 0.5);
  EXPECT_EQ(r.failure->notes, f.notes);
  // Written again, it is the same entry.
  EXPECT_EQ(report_json(uint64_t{1}, {r}, "nvfp4check run").at("kernels").at(0), entry);
}

// Every field of a kernel's entry is listed once with a rule; the rules read as intended.
TEST(Report, FieldListsGiveEveryFieldOneRule) {
  KernelReport k;
  std::set<std::string> keys;
  int summed = 0;
  visit_fields([&](const char* key, FieldRule rule, const auto&) {
    EXPECT_TRUE(keys.insert(key).second) << key << " listed twice";
    summed += rule.merge == Merge::sum;
  }, k);
  EXPECT_TRUE(keys.count("warmup_seconds") && keys.count(kStageSecondsKey) && keys.count("failure"));
  EXPECT_GE(summed, 10);
}

}  // namespace
}  // namespace nvfp4
