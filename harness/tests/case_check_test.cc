// Each check fires on a host kernel that has exactly that bug, and an honest kernel passes them
// all (googletest's "one interface, many implementations": a table of kernel -> check); the
// stale-state data's derived reference is the exact one; saved cases reproduce.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "harness/engine/suite.h"
#include "harness/judge/checks.h"
#include "harness/process/kernel_call.h"
#include "harness/process/warmup.h"
#include "harness/draw/generators.h"
#include "harness/tests/check_in_process.h"
#include "harness/tests/scratch_dir.h"
#include "mutation/wrong/wrong_host_kernels.h"
#include "kernels/registry.h"
#include "reference/case_file.h"

namespace nvfp4 {
namespace {

Registry& test_registry() {
  static Registry* registry = [] {
    auto* r = new Registry();
    r->add_provider(test::wrong_host_kernel_count, test::wrong_host_kernel_get, test::wrong_host_kernel_run,
                    "mutation/wrong/wrong_host_kernels.cc");
    return r;
  }();
  return *registry;
}

const Kernel& kernel(const std::string& name) {
  const Kernel* k = test_registry().find(name);
  if (!k) throw std::runtime_error("test kernel missing: " + name);
  return *k;
}

// A problem with generated data; rows 0 of A in batch 0 are zero so some outputs are exactly 0.
Problem make_problem(Op op, int64_t m, int64_t n, int64_t k, int64_t l, SfLayout layout, uint64_t seed) {
  Problem p;
  p.op = op;
  p.m = m;
  p.n = op == Op::gemv ? 1 : n;
  p.k = k;
  p.l = l;
  p.sf_layout = layout;
  Rng rng(seed);
  std::printf("problem %s %ldx%ldx%ldx%ld %s from seed %lu\n", to_string(op), (long)p.m, (long)p.n, (long)p.k,
              (long)p.l, to_string(layout), (unsigned long)seed);
  fill_data(rng, DataSpec{}, p);
  for (int64_t x = 0; x < k / 2; ++x) p.a[static_cast<size_t>(x)] = 0;
  return p;
}

CaseOptions test_options() {
  CaseOptions o;
  o.case_dir = test::scratch_dir("runner-host-test").string();
  o.stale_seed = 99;
  return o;
}

struct Expectation {
  const char* kernel;
  const char* check;  // "" = pass, "unsupported" = correctly refused
  Op op;
  int64_t m, n, k, l;
  SfLayout layout;
};

void PrintTo(const Expectation& e, std::ostream* os) { *os << e.kernel << " -> " << (*e.check ? e.check : "pass"); }

class RunnerCheck : public ::testing::TestWithParam<Expectation> {};

TEST_P(RunnerCheck, FiresExactlyWhereTheBugIs) {
  const Expectation& e = GetParam();
  const Problem p = make_problem(e.op, e.m, e.n, e.k, e.l, e.layout, 12345);
  const CaseOutcome r = check_in_process(kernel(e.kernel), p, test_options());
  const std::string check = e.check;
  if (check.empty()) {
    EXPECT_EQ(r.verdict, CaseOutcome::Verdict::pass) << check_of(r) << ": " << message_of(r);
    EXPECT_TRUE(r.case_file.empty()) << "a passing case's file is removed";
  } else if (check == "unsupported") {
    EXPECT_EQ(r.verdict, CaseOutcome::Verdict::unsupported) << check_of(r) << ": " << message_of(r);
  } else {
    ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail) << "no check fired";
    EXPECT_EQ(check_of(r), check) << message_of(r);
    EXPECT_FALSE(message_of(r).empty());
    ASSERT_FALSE(r.case_file.empty());
    EXPECT_TRUE(std::filesystem::exists(r.case_file)) << "a failing case keeps its file: " << r.case_file;
    std::printf("%s: %s: %s\n  %s\n", e.kernel, check_of(r).c_str(), message_of(r).c_str(), r.case_file.c_str());
  }
}

constexpr Op G = Op::gemm;
constexpr SfLayout P = SfLayout::permuted, L = SfLayout::linear;

INSTANTIATE_TEST_SUITE_P(
    HostKernels, RunnerCheck,
    ::testing::Values(Expectation{"honest_host", "", G, 37, 5, 80, 2, P},
                      Expectation{"honest_host", "", G, 37, 5, 80, 2, L},
                      Expectation{"honest_host", "", Op::gemv, 129, 1, 34, 3, P},
                      Expectation{"honest_m4_host", "", G, 8, 3, 64, 1, P},
                      Expectation{"honest_m4_host", "unsupported", G, 5, 3, 64, 1, P},
                      Expectation{"unwritten_host", "unwritten-output", G, 37, 5, 80, 2, P},
                      Expectation{"write_past_end_host", "guard", G, 37, 5, 80, 2, P},
                      Expectation{"modifies_input_host", "inputs-modified", G, 37, 5, 80, 2, P},
                      Expectation{"stale_cache_host", "stale-state", G, 37, 5, 80, 2, P},
                      Expectation{"nondeterministic_host", "determinism", G, 37, 5, 80, 2, P},
                      Expectation{"ignores_unsupported_host", "ignored-unsupported", G, 5, 3, 64, 1, P},
                      Expectation{"touches_c_when_refusing_host", "unsupported-touched-output", G, 5, 3, 64, 1, P},
                      Expectation{"refuses_supported_host", "refused-supported", G, 37, 5, 80, 2, P},
                      Expectation{"wrong_answer_host", "oracle", G, 37, 5, 80, 2, L},
                      Expectation{"reads_padding_host", "nan-padding", G, 37, 5, 80, 2, P}),
    [](const ::testing::TestParamInfo<Expectation>& info) {
      std::string name = std::string(info.param.kernel) + "_" + (*info.param.check ? info.param.check : "passes") +
                         "_" + to_string(info.param.op) + "_" + to_string(info.param.layout);
      for (char& ch : name)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// The honest kernel passes on every distribution the generators have (NaN blocks, overflow,
// subnormal scales, arbitrary alpha), on generated shapes: no check may fire on a correct kernel.
TEST(RunnerHonest, PassesEveryDistribution) {
  const Kernel& honest = kernel("honest_host");
  const uint64_t seed = 20261130;
  std::printf("seed %lu\n", (unsigned long)seed);
  Rng rng(seed);
  ShapeLimits limits;
  limits.max_m = 140;
  limits.max_n = 9;
  limits.max_k = 300;
  limits.max_l = 3;
  int checked = 0;
  for (const DataSpec& spec : DataSpec::all()) {
    for (Op op : {Op::gemv, Op::gemm}) {
      const Problem p = generate_problem(rng, op, *honest.info, spec, limits);
      CaseOptions o = test_options();
      o.stale_seed = rng();
      const CaseOutcome r = check_in_process(honest, p, o);
      EXPECT_EQ(r.verdict, CaseOutcome::Verdict::pass)
          << spec.name() << " " << to_string(op) << ": " << check_of(r) << ": " << message_of(r) << " (" << r.case_file << ")";
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

// The stale-state data catches a kernel that returns its cached result for the same pointers.
TEST(CaseStale, DerivedDataCatchesACache) {
  const Problem p = make_problem(G, 19, 4, 96, 1, P, 777);
  const CaseOutcome r = check_in_process(kernel("stale_cache_host"), p, test_options());
  ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "stale-state") << message_of(r);
  EXPECT_NE(message_of(r).find("returned run 1's output unchanged"), std::string::npos) << message_of(r);
  EXPECT_EQ(r.call, CaseCall::stale);
  // The saved stale case reproduces: its own reference agrees with the outcome's.
  ASSERT_TRUE(std::filesystem::exists(r.case_file));
  const Problem saved = read_case_file(r.case_file);
  EXPECT_EQ(exact_gemm(saved).c, r.reference.c);
}

// The runner computes the stale variant only where a check looks at it. A stale output that
// mirrors run 1 takes run 1's judgement, but where it holds the poison the stale reference says
// whether a NaN was due there: a stale call that leaves every NaN-due element unwritten (its
// poison is a NaN too) passes, its variant computed for that lookup.
class NanDueLeftUnwrittenInTheStaleCall final : public Executor {
 public:
  explicit NanDueLeftUnwrittenInTheStaleCall(const Kernel& k) : inner_(k, kDefaultCallTimeout) {}
  const KernelDesc& kernel() override { return inner_.kernel(); }
  std::vector<CallObservation> run_case(const CaseData& data, const std::vector<PlannedCall>& plan) override {
    std::vector<CallObservation> obs = inner_.run_case(data, plan);
    for (size_t x = 0; x < obs.size() && x < plan.size(); ++x) {
      if (!plan[x].spec.stale_data) continue;
      std::vector<uint32_t> words = obs[x].c.words();
      for (uint32_t& w : words)
        if (is_nan_out(OutType::fp16, w)) w = plan[x].spec.poison, ++replaced;
      obs[x].c = words;
      obs[x].c_later = obs[x].c;
    }
    return obs;
  }
  int64_t replaced = 0;

 private:
  InProcessExecutor inner_;
};

TEST(CaseStale, PoisonWhereANanIsDueIsLookedUpInTheStaleReference) {
  Problem p = make_problem(G, 19, 4, 96, 2, L, 779);
  p.sfa[0] = 0x7F;  // batch 0, row 0, block 0: a NaN scale, so that row's outputs are NaN
  NanDueLeftUnwrittenInTheStaleCall executor(kernel("honest_host"));
  const CaseOutcome r = check_case(executor, p, test_options());
  ASSERT_GT(executor.replaced, 0) << "no NaN in the stale call's output";
  EXPECT_EQ(r.verdict, CaseOutcome::Verdict::pass) << check_of(r) << ": " << message_of(r);
}

// A wrong output on the new data that is not run 1's is not called a cached result: the text names
// both causes it may be and how to tell them apart (a kernel that swaps two operands can pass run 1
// and fail only on the stale data, as a dual GEMM with G and U swapped did on the H200).
TEST(CaseStale, WrongOnTheNewDataIsNotCalledACachedResult) {
  const Problem p = make_problem(G, 19, 4, 96, 1, P, 778);
  const ExactResult ref = exact_gemm(p);
  const StaleVariant v = stale_variant(p, ref, 99);
  CallObservation run1, stale;
  run1.c = run1.c_later = ref.words();
  std::vector<uint32_t> words = v.reference.words();
  size_t wrong = 0;
  while (wrong < words.size() && (v.reference.elems[wrong].nan || (words[wrong] & 0x7FFFu) == 0)) ++wrong;
  ASSERT_LT(wrong, words.size()) << "no nonzero output in the stale data";
  words[wrong] ^= 0x8000u;  // its sign flipped: wrong, and not run 1's output
  stale.c = words;
  stale.c_later = stale.c;
  const Policy policy = Policy::for_flags(0);
  auto judge = [&](const CallObservation& o) {
    CallContext x;
    CallContext::Judgement judgement;
    x.call = CaseCall::stale;
    x.problem = &v.problem;
    x.reference = &v.reference;
    x.observation = &o;
    x.run1 = &run1;
    x.policy = &policy;
    x.judgement = &judgement;
    return first_finding(x);
  };
  const std::optional<Finding> f = judge(stale);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->check, Check::stale_state);
  EXPECT_EQ(f->message.find("unchanged"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("nor is it run 1's output"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("wrong on this data alone"), std::string::npos) << f->message;
  // Run 1's words handed back for the new data: the cached result, named as such.
  const std::optional<Finding> cached = judge(run1);
  ASSERT_TRUE(cached);
  EXPECT_NE(cached->message.find("returned run 1's output unchanged"), std::string::npos) << cached->message;
  // The right output passes.
  CallObservation right;
  right.c = right.c_later = v.reference.words();
  EXPECT_FALSE(judge(right));
}

// A CUDA kernel that writes C on a stream of its own can write it before the runner's uploads run,
// C's poison among them: C is still the poison once the device is done. Right when its inputs are
// complete before the call, it is named by its stream, not as a kernel that left C unwritten; wrong
// or unwritten again, the finding stays unwritten-output (in the stale call, stale-state: a kernel
// that skips pointers it has seen).
TEST(CaseRuns, OutputOverwrittenByThePoisonIsNamedByItsStream) {
  const Problem p = make_problem(G, 19, 4, 96, 1, P, 779);
  const ExactResult ref = exact_gemm(p);
  const Policy policy = Policy::for_flags(0);
  CallObservation unwritten;
  unwritten.c = std::vector<uint32_t>(ref.words().size(), kPoison1);
  unwritten.c_later = unwritten.c;
  std::vector<uint32_t> wrong = ref.words();
  size_t e = 0;
  while (e < wrong.size() && (ref.elems[e].nan || (wrong[e] & 0x7FFFu) == 0)) ++e;
  ASSERT_LT(e, wrong.size());
  wrong[e] ^= 0x8000u;
  // Run 1 in a fresh process often lands after the uploads (its module loads first); run 2 then
  // finds C overwritten, so both runs ask.
  // The stale call's uploads are held the same way.
  for (const CaseCall call : {CaseCall::run1, CaseCall::run2, CaseCall::stale}) {
    auto judge = [&](std::optional<std::vector<uint32_t>> again) {
      CallContext x;
      CallContext::Judgement judgement;
      x.call = call;
      x.problem = &p;
      x.reference = &ref;
      x.observation = &unwritten;
      x.poison = kPoison1;
      x.policy = &policy;
      x.judgement = &judgement;
      int reruns = 0;
      if (again)
        x.rerun_inputs_ready = [&reruns, again] {
          ++reruns;
          return again;
        };
      std::optional<Finding> f = first_finding(x);
      EXPECT_EQ(reruns, again ? 1 : 0);
      return f;
    };
    const std::optional<Finding> named = judge(ref.words());
    ASSERT_TRUE(named);
    EXPECT_EQ(named->check, Check::stream) << named->message;
    EXPECT_NE(named->message.find("before the work queued on problem.stream"), std::string::npos) << named->message;
    EXPECT_NE(named->message.find("left output elements unwritten"), std::string::npos) << named->message;
    for (const std::optional<std::vector<uint32_t>>& again :
         {std::optional<std::vector<uint32_t>>{}, std::optional<std::vector<uint32_t>>{unwritten.c.words()},
          std::optional<std::vector<uint32_t>>{wrong}}) {
      const std::optional<Finding> f = judge(again);
      ASSERT_TRUE(f);
      EXPECT_EQ(f->check, call == CaseCall::stale ? Check::stale_state : Check::unwritten_output) << f->message;
    }
  }
}

// The stale data's reference is derived (negated, rotated), not computed: it must equal the exact
// reference of that data in every field, for every shape class (m, n, l of 1, partial blocks,
// NaN scales, alpha not a power of two), and every input buffer must change.
TEST(CaseStale, DerivedReferenceIsTheExactOne) {
  const uint64_t seed = 4711;
  std::printf("seed %lu\n", (unsigned long)seed);
  Rng rng(seed);
  ShapeLimits limits;
  limits.max_m = 40;
  limits.max_n = 9;
  limits.max_k = 200;
  limits.max_l = 3;
  nvfp4_kernel_info any{};
  any.ops = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
  any.sf_layouts = 1u << NVFP4_SF_LINEAR;
  any.m_multiple = any.n_multiple = any.k_multiple = 1;
  int changed_all = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const DataSpec& spec = DataSpec::all()[static_cast<size_t>(trial) % DataSpec::all().size()];
    const Problem p = generate_problem(rng, trial % 3 ? Op::gemm : Op::gemv, any, spec, limits);
    const ExactResult ref = exact_gemm(p);
    const StaleVariant v = stale_variant(p, ref, rng());
    const ExactResult direct = exact_gemm(v.problem);
    ASSERT_EQ(v.reference.c, direct.c) << "trial " << trial << " " << spec.name();
    for (size_t x = 0; x < direct.elems.size(); ++x) {
      const ExactElement &d = direct.elems[x], &e = v.reference.elems[x];
      ASSERT_TRUE(d.sum == e.sum && d.abs_sum == e.abs_sum && d.nonzero == e.nonzero && d.min_tz == e.min_tz &&
                  d.nan == e.nan)
          << "trial " << trial << " element " << x;
    }
    changed_all += v.problem.a != p.a && (v.problem.b != p.b || (p.n == 1 && p.l == 1 && p.k < 32));
  }
  EXPECT_GT(changed_all, 250);
}

// A large case drawn from a seed is saved as that seed (not megabytes of hex); loading the file
// gives back the same data, so the saved case reproduces the failure. A small one keeps its data.
TEST(RunnerSave, LargeSeededCaseIsSavedAsItsSeed) {
  for (const int64_t m : {int64_t(8), int64_t(2048)}) {
    Problem p;
    p.op = Op::gemv;
    p.m = m;
    p.k = 2048;  // m = 2048: 2 MiB of A, above the 1 MiB limit
    p.seed = 4242;
    p.generator = DataSpec{}.name();
    expand_seeded_case(p);
    ASSERT_TRUE(p.data_from_seed);
    const CaseOutcome r = check_in_process(kernel("wrong_answer_host"), p, test_options());
    ASSERT_EQ(r.verdict, CaseOutcome::Verdict::fail) << message_of(r);
    ASSERT_TRUE(std::filesystem::exists(r.case_file));
    Problem loaded = read_case_file(r.case_file);
    EXPECT_EQ(loaded.has_data(), m == 8) << "m = " << m << ": " << r.case_file;
    EXPECT_EQ(loaded.seed, p.seed);
    EXPECT_LT(std::filesystem::file_size(r.case_file), m == 8 ? 100000u : 20000u);
    expand_seeded_case(loaded);
    EXPECT_EQ(loaded.a, p.a);
    EXPECT_EQ(loaded.sfa, p.sfa);
    EXPECT_EQ(loaded.b, p.b);
    EXPECT_EQ(loaded.sfb, p.sfb);
    EXPECT_EQ(loaded.alpha, p.alpha);
    const CaseOutcome again = check_in_process(kernel("wrong_answer_host"), loaded, test_options());
    EXPECT_EQ(check_of(again), check_of(r));
    // Changed data is no longer its seed's expansion: it must be saved in full.
    Problem edited = p;
    edited.a[0] ^= 0x11;
    edited.data_from_seed = false;
    const CaseOutcome r2 = check_in_process(kernel("wrong_answer_host"), edited, test_options());
    ASSERT_EQ(r2.verdict, CaseOutcome::Verdict::fail);
    EXPECT_TRUE(read_case_file(r2.case_file).has_data());
  }
}

// A lane's write-ahead records go to one file, written over for each case: while a call runs,
// the file holds that case (a run killed then leaves it); a case that passes leaves nothing once
// the lane ends; a failing one is under its own name.
struct RecordWatcher final : Executor {
  explicit RecordWatcher(std::string dir) : inner(nvfp4::kernel("honest_host"), kDefaultCallTimeout), dir(std::move(dir)) {}
  InProcessExecutor inner;
  std::string dir;
  int cases = 0, held = 0;
  const KernelDesc& kernel() override { return inner.kernel(); }
  std::vector<CallObservation> run_case(const CaseData& data, const std::vector<PlannedCall>& plan) override {
    ++cases;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().filename().string().find("-in-flight-") == std::string::npos) continue;
      Problem saved = read_case_file(entry.path().string());
      expand_seeded_case(saved);
      held += saved.a == data.problem.a && saved.b == data.problem.b && saved.m == data.problem.m;
    }
    return inner.run_case(data, plan);
  }
};

TEST(RunnerSave, ALanesRecordHoldsTheCaseInFlightAndGoesWhenTheLaneEnds) {
  LaneSettings ls;
  ls.cases = 12;
  ls.case_options = test_options();
  ls.case_options.case_dir += "/lane-record";
  std::filesystem::remove_all(ls.case_options.case_dir);
  RecordWatcher lane(ls.case_options.case_dir);
  const KernelDesc& desc = lane.kernel();
  const Schedule schedule(desc.info, desc.name, ScheduleOptions{});
  SuiteListener quiet;
  const KernelReport report = check_kernel({&lane}, desc, schedule, ls, quiet);
  EXPECT_EQ(report.verdict, KernelVerdict::pass);
  EXPECT_GT(lane.cases, 0);
  EXPECT_EQ(lane.held, lane.cases) << "every call ran with its case in the lane's record";
  EXPECT_TRUE(std::filesystem::is_empty(ls.case_options.case_dir));
}

TEST(RunnerSave, AFailingCaseLeavesTheSlotUnderItsOwnName) {
  CaseOptions o = test_options();
  // Named relative to the working directory: the case files named are absolute all the same.
  o.case_dir = std::filesystem::relative(std::filesystem::path(o.case_dir) / "slot").string();
  std::filesystem::remove_all(o.case_dir);
  std::string slot_path;
  {
    RecordSlot slot(o.case_dir, "k-in-flight-1-0");
    o.record_slot = &slot;
    // Data of its own (not drawn from a seed): the record is the case in full, and it is kept.
    Problem p = make_problem(G, 7, 3, 32, 1, P, 5);
    p.data_from_seed = false;
    const CaseOutcome bad = check_in_process(kernel("wrong_answer_host"), p, o);
    ASSERT_EQ(bad.verdict, CaseOutcome::Verdict::fail);
    EXPECT_EQ(bad.case_file.find("-in-flight-"), std::string::npos) << bad.case_file;
    EXPECT_TRUE(std::filesystem::path(bad.case_file).is_absolute()) << bad.case_file;
    ASSERT_TRUE(std::filesystem::exists(bad.case_file)) << bad.case_file;
    EXPECT_EQ(read_case_file(bad.case_file).a, p.a);
    // The next case starts a new record file; a pass leaves it to the next case.
    const CaseOutcome good = check_in_process(kernel("honest_host"), p, o);
    ASSERT_EQ(good.verdict, CaseOutcome::Verdict::pass) << message_of(good);
    EXPECT_TRUE(good.case_file.empty());
    slot_path = slot.path();
    EXPECT_NE(slot_path.find("-in-flight-"), std::string::npos);
    EXPECT_TRUE(std::filesystem::exists(slot_path));
    EXPECT_TRUE(std::filesystem::exists(bad.case_file)) << "the kept record is not written over";
  }
  EXPECT_FALSE(std::filesystem::exists(slot_path)) << "the lane's record goes with the lane";
}

// Saving the case is best effort: where the case folder cannot be made (a file is in its place),
// the failure is still judged and returned, saying why its case was not saved.
TEST(RunnerSave, UnwritableCaseDirKeepsTheVerdict) {
  const Problem p = make_problem(G, 7, 3, 32, 1, P, 5);
  CaseOptions o = test_options();
  std::filesystem::create_directories(std::filesystem::path(o.case_dir).parent_path());
  o.case_dir += "-file";
  std::ofstream(o.case_dir) << "not a folder\n";
  CaseOutcome r;
  ASSERT_NO_THROW(r = check_in_process(kernel("wrong_answer_host"), p, o));
  EXPECT_EQ(r.verdict, CaseOutcome::Verdict::fail);
  EXPECT_EQ(check_of(r), "oracle");
  EXPECT_TRUE(r.case_file.empty());
  EXPECT_FALSE(r.case_file_error.empty());
  CaseOutcome honest;
  ASSERT_NO_THROW(honest = check_in_process(kernel("honest_host"), p, o));
  EXPECT_EQ(honest.verdict, CaseOutcome::Verdict::pass);
  std::filesystem::remove(o.case_dir);
}

// run_kernel_once hands back what an honest kernel computed, and names a refusal.
TEST(RunnerOnce, ReturnsOutputAndNamesErrors) {
  const Problem p = make_problem(G, 7, 3, 32, 2, P, 5);
  InProcessExecutor honest(kernel("honest_host"), kDefaultCallTimeout), m4(kernel("honest_m4_host"), kDefaultCallTimeout);
  const std::vector<uint32_t> c = run_kernel_once(honest, p);
  EXPECT_EQ(static_cast<int64_t>(c.size()), p.c_elems());
  Problem refused = make_problem(G, 5, 3, 32, 1, P, 6);
  EXPECT_THROW(run_kernel_once(m4, refused), std::runtime_error);
}

// A kernel's caller keeps its last layout for a call of the same data, padding and poison only:
// each call of a kernel that leaves an element unwritten shows that call's own poison there, and a
// new case's call its new data's shape.
TEST(KernelCaller, EachCallStartsFromItsOwnPoison) {
  KernelCaller caller(kernel("unwritten_host"), kDefaultCallTimeout);
  const Problem p = make_problem(G, 4, 8, 64, 2, P, 5);
  caller.begin_case(CaseData{p, std::nullopt, std::nullopt});
  const auto count = [](const CallObservation& o, uint32_t word) {
    int64_t n = 0;
    for (size_t e = 0; e < o.c.size(); ++e) n += o.c[e] == word;
    return n;
  };
  CallSpec first, second;
  first.poison = 0x1111;
  second.poison = 0x2222;
  for (const CallSpec& spec : {first, first, second, first}) {
    const CallObservation o = caller.call(spec);
    ASSERT_EQ(o.rc, NVFP4_OK);
    ASSERT_EQ(static_cast<int64_t>(o.c.size()), p.c_elems());
    EXPECT_EQ(count(o, spec.poison), p.l) << "poison " << spec.poison;  // the last element of each batch
    EXPECT_EQ(count(o, spec.poison == first.poison ? second.poison : first.poison), 0);
  }
  const Problem other = make_problem(G, 3, 8, 64, 1, P, 6);
  caller.begin_case(CaseData{other, std::nullopt, std::nullopt});
  const CallObservation o = caller.call(first);
  ASSERT_EQ(o.rc, NVFP4_OK);
  EXPECT_EQ(static_cast<int64_t>(o.c.size()), other.c_elems());
  EXPECT_EQ(count(o, first.poison), other.l);
}

TEST(RunnerUnsupportedReason, NamesTheConstraint) {
  const Kernel& k = kernel("honest_m4_host");
  Problem p = make_problem(G, 5, 3, 32, 1, P, 1);
  EXPECT_NE(unsupported_reason(*k.info, p).find("m_multiple"), std::string::npos);
  p = make_problem(G, 8, 3, 32, 1, P, 1);
  EXPECT_EQ(unsupported_reason(*k.info, p), "");
  // GEMV's n is 1 by definition: a declared n_multiple constrains GEMM only.
  nvfp4_kernel_info n4 = *k.info;
  n4.m_multiple = 1;
  n4.n_multiple = 4;
  p = make_problem(Op::gemv, 8, 1, 32, 1, P, 1);
  EXPECT_EQ(unsupported_reason(n4, p), "");
  p = make_problem(G, 8, 3, 32, 1, P, 1);
  EXPECT_NE(unsupported_reason(n4, p).find("n_multiple"), std::string::npos);
}

// What a listener finds out about a failure after it is decided (a second run of the case) is a
// note: the text shows it on a line of its own and the check's message stays the check's, so
// nothing compares or re-renders messages.
TEST(Suite, ListenersAddNotesToAFailure) {
  InProcessExecutor executor(kernel("wrong_answer_host"), kDefaultCallTimeout);
  const KernelDesc& desc = executor.kernel();
  const Schedule schedule(desc.info, desc.name, ScheduleOptions{});
  LaneSettings ls;
  ls.cases = 50;
  ls.case_options = test_options();
  struct Noting final : SuiteListener {
    void annotate_failure(const KernelDesc&, const CaseOutcome&, FailureRecord& f) override {
      f.notes.push_back("run again, it passed");
    }
  } noting;
  const KernelReport r = check_kernel({&executor}, desc, schedule, ls, noting);
  ASSERT_TRUE(r.failure);
  EXPECT_EQ(r.failure->notes, std::vector<std::string>{"run again, it passed"});
  EXPECT_EQ(r.failure->message.find("run again"), std::string::npos) << r.failure->message;
  EXPECT_NE(r.failure->text.find("\n  note: run again, it passed\n"), std::string::npos) << r.failure->text;
}

// honest_host, but its third case (counted from 1) is `third`'s instead.
struct OnThirdCase final : Executor {
  explicit OnThirdCase(std::function<std::vector<CallObservation>()> third)
      : inner(nvfp4::kernel("honest_host"), kDefaultCallTimeout), third(std::move(third)) {}
  InProcessExecutor inner;
  std::function<std::vector<CallObservation>()> third;
  int cases = 0;
  const KernelDesc& kernel() override { return inner.kernel(); }
  std::vector<CallObservation> run_case(const CaseData& data, const std::vector<PlannedCall>& plan) override {
    return ++cases == 3 ? third() : inner.run_case(data, plan);
  }
};

// The error of a run of ten cases that must end in the suite's own error of type E, after
// checking that it names the case's file and that the file is there ("" when no E came).
template <class E>
std::string suite_error(Executor& executor) {
  const KernelDesc& desc = executor.kernel();
  const Schedule schedule(desc.info, desc.name, ScheduleOptions{});
  LaneSettings ls;
  ls.cases = 10;
  ls.case_options = test_options();
  SuiteListener quiet;
  try {
    check_kernel({&executor}, desc, schedule, ls, quiet);
  } catch (const E& e) {
    const std::string what = e.what();
    const size_t at = what.find("saved as ");
    EXPECT_NE(at, std::string::npos) << what;
    if (at != std::string::npos) {
      const std::string path = what.substr(at + 9, what.rfind(')') - at - 9);
      EXPECT_TRUE(std::filesystem::exists(path)) << path;
      EXPECT_NE(path.find("-suite-error.case"), std::string::npos) << path;
    }
    return what;
  }
  return "";
}

// A check that throws on a drawn case (the suite's own bug, never the kernel's) ends the run with
// an error that names the case and where its file was saved, and keeps the exception's type (the
// exit status `run` maps it to).
TEST(Suite, TheSuitesOwnErrorNamesAndSavesTheCase) {
  OnThirdCase executor([]() -> std::vector<CallObservation> {
    throw std::invalid_argument("a problem the suite made wrong");
  });
  const std::string what = suite_error<std::invalid_argument>(executor);
  EXPECT_NE(what.find("a problem the suite made wrong (the suite's own error on case "), std::string::npos) << what;
}

// The lanes' (and the mutation rows') OpenMP teams share the cores out rounded up: together they
// cover every core, and one thread fewer each would not.
TEST(Suite, LaneTeamsCoverTheCoresRoundedUp) {
  EXPECT_EQ(lane_team(12, 16), 2);  // rounded down it was 1: four cores left to no lane
  EXPECT_EQ(lane_team(8, 16), 2);
  EXPECT_EQ(lane_team(2, 2), 1);
  EXPECT_EQ(lane_team(3, 2), 1);
  EXPECT_EQ(lane_team(0, 16), 16);
  for (int cores : {1, 2, 7, 16, 64})
    for (int lanes = 1; lanes <= 2 * cores; ++lanes) {
      const int team = lane_team(lanes, cores);
      EXPECT_GE(team * lanes, cores) << lanes << " lanes, " << cores << " cores";
      if (team > 1) EXPECT_LT((team - 1) * lanes, cores) << lanes << " lanes, " << cores << " cores";
    }
}

// A kernel's process that could not allocate the suite's own memory for a case (its call ended in
// suite_memory) says nothing of the kernel: no verdict from any caller that judges a call. A run
// ends in the suite's error, with the case saved; one call judged alone throws too.
TEST(Suite, AKernelProcessOutOfMemoryIsTheSuitesErrorNeverAVerdict) {
  OnThirdCase executor([] {
    CallObservation o;
    o.end = CallObservation::End::suite_memory;
    o.error = "the kernel's process ran out of host memory (test)";
    return std::vector<CallObservation>{o};
  });
  const std::string what = suite_error<std::runtime_error>(executor);
  EXPECT_NE(what.find("the kernel's process ran out of host memory (test): the case needs more memory than this "
                      "machine leaves the kernel's process"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("(the suite's own error on case 2 of honest_host"), std::string::npos) << what;
  executor.cases = 2;
  const KernelDesc& desc = executor.kernel();
  try {
    run_kernel_once(executor, Schedule(desc.info, desc.name, ScheduleOptions{}).at(0).problem);
    FAIL() << "the call was judged";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("ran out of host memory (test): the case needs more memory"),
              std::string::npos)
        << e.what();
  }
}


// Lanes that share one GPU context (MPS) cannot tell whose fault a lost context was: every case
// that loses it runs again alone on the lane's own executor before it is reported. Here one lane
// (so the order of cases is fixed), an executor standing for the shared context that loses it on
// chosen cases, and one standing for the lane's own context that loses it on chosen calls.
namespace shared_context {

// honest_host, but the calls of its n-th case (counted from 1) end with a lost CUDA context when
// n is in `faults`; with start_failures, the n-th case's worker could not start instead.
struct FaultingExecutor final : Executor {
  FaultingExecutor(std::set<int> faults, bool start_failures = false,
                   std::string error = "cudaErrorIllegalAddress: an illegal memory access was encountered")
      : inner(nvfp4::kernel("honest_host"), kDefaultCallTimeout),
        faults(std::move(faults)),
        start_failures(start_failures),
        error(std::move(error)) {}
  InProcessExecutor inner;
  std::set<int> faults;
  bool start_failures;
  std::string error;
  int cases = 0;
  const KernelDesc& kernel() override { return inner.kernel(); }
  std::vector<CallObservation> run_case(const CaseData& data, const std::vector<PlannedCall>& plan) override {
    if (!faults.count(++cases)) return inner.run_case(data, plan);
    if (start_failures) throw WorkerStartError("cudaErrorMpsServerNotReady: the MPS server is recovering");
    CallObservation o;
    o.end = CallObservation::End::cuda_error;
    o.error = error;
    o.context_lost = true;
    return {o};
  }
};

struct LaneRun {
  KernelReport report;
  std::vector<std::string> files_left;  // in the case folder (one per run), sorted
  int own_made = 0;
};

LaneRun run_lane(FaultingExecutor& shared, const std::shared_ptr<FaultingExecutor>& own, int64_t cases) {
  const KernelDesc& desc = shared.kernel();
  const Schedule schedule(desc.info, desc.name, ScheduleOptions{});
  LaneSettings ls;
  ls.cases = cases;
  ls.case_options = test_options();
  ls.case_options.case_dir += std::string("/") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  LaneRun r;
  ls.own_context = [&](size_t lane) -> std::shared_ptr<Executor> {
    EXPECT_EQ(lane, 0u);
    ++r.own_made;
    return own;
  };
  SuiteListener quiet;
  r.report = check_kernel({&shared}, desc, schedule, ls, quiet);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(ls.case_options.case_dir, ec))
    r.files_left.push_back(entry.path().string());
  std::sort(r.files_left.begin(), r.files_left.end());
  return r;
}

// A fault that comes back alone is the case's: reported there, with a note that says so.
TEST(SharedContext, AFaultThatRecursAloneIsTheCasesFailure) {
  FaultingExecutor shared({4});
  auto own = std::make_shared<FaultingExecutor>(std::set<int>{1});  // its first case: the rerun of case 3
  const LaneRun r = run_lane(shared, own, 20);
  ASSERT_TRUE(r.report.failure);
  EXPECT_EQ(r.report.failure->case_index, 3);
  EXPECT_EQ(std::string(check_name(r.report.failure->check)), "cuda-error");
  EXPECT_EQ(r.report.context_reruns, 1);
  EXPECT_EQ(r.own_made, 1);
  EXPECT_EQ(r.report.cases, 4);
  ASSERT_EQ(r.report.failure->notes.size(), 1u);
  EXPECT_NE(r.report.failure->notes[0].find("failed again alone"), std::string::npos) << r.report.failure->notes[0];
  EXPECT_EQ(r.files_left, std::vector<std::string>{r.report.failure->case_file});
}

// A fault that does not come back alone still fails the kernel (one of its cases did fault), at
// the lowest such case, saying that it passed alone; the cases after it ran in the lane's own
// context.
TEST(SharedContext, AFaultThatPassesAloneFailsTheKernelSayingSo) {
  FaultingExecutor shared({4});
  auto own = std::make_shared<FaultingExecutor>(std::set<int>{});
  const LaneRun r = run_lane(shared, own, 20);
  ASSERT_TRUE(r.report.failure);
  EXPECT_EQ(r.report.failure->case_index, 3);
  EXPECT_EQ(std::string(check_name(r.report.failure->check)), "cuda-error");
  EXPECT_EQ(r.report.failed_cases, 1);
  EXPECT_EQ(r.report.cases, 4);
  EXPECT_EQ(shared.cases, 4);    // the shared context was left after its fault
  EXPECT_EQ(own->cases, 1 + 16);  // the rerun, then cases 4..19
  ASSERT_EQ(r.report.failure->notes.size(), 1u);
  EXPECT_NE(r.report.failure->notes[0].find("this case passed (so may its replay)"), std::string::npos)
      << r.report.failure->notes[0];
  EXPECT_EQ(r.files_left, std::vector<std::string>{r.report.failure->case_file});
}

// A case that fails on its own, alone, outranks a fault that did not recur, whatever their order;
// the case file of the one that passed alone is removed.
TEST(SharedContext, AFailureOfItsOwnOutranksAnUnreproducedFault) {
  FaultingExecutor shared({4});
  auto own = std::make_shared<FaultingExecutor>(std::set<int>{4});  // the rerun, cases 4 and 5, then 6: lost
  const LaneRun r = run_lane(shared, own, 20);
  ASSERT_TRUE(r.report.failure);
  EXPECT_EQ(r.report.failure->case_index, 6);
  EXPECT_TRUE(r.report.failure->notes.empty());
  EXPECT_EQ(r.report.context_reruns, 1);
  EXPECT_EQ(r.files_left, std::vector<std::string>{r.report.failure->case_file});  // nothing of case 3
}

// A worker the shared server would not take says nothing about the kernel: the case runs alone
// and passes, and so does the kernel.
TEST(SharedContext, AWorkerTheServerRefusedIsNoFaultOfTheKernel) {
  FaultingExecutor shared({2}, true);
  auto own = std::make_shared<FaultingExecutor>(std::set<int>{});
  const LaneRun r = run_lane(shared, own, 12);
  EXPECT_FALSE(r.report.failure);
  EXPECT_EQ(r.report.verdict, KernelVerdict::pass);
  EXPECT_EQ(r.report.cases, 12);
  EXPECT_EQ(r.report.context_reruns, 1);
  EXPECT_EQ(r.files_left, std::vector<std::string>{});
}

// ... nor does the server's own error during a call.
TEST(SharedContext, TheServersOwnErrorIsNoFaultOfTheKernel) {
  FaultingExecutor shared({2}, false, "cudaStreamSynchronize: cudaErrorMpsClientTerminated (the MPS client has been terminated)");
  auto own = std::make_shared<FaultingExecutor>(std::set<int>{});
  const LaneRun r = run_lane(shared, own, 12);
  EXPECT_FALSE(r.report.failure);
  EXPECT_EQ(r.report.cases, 12);
  EXPECT_EQ(r.report.context_reruns, 1);
  EXPECT_EQ(r.files_left, std::vector<std::string>{});
}

// Without faults the shared lanes' report is the report of lanes with a context each.
TEST(SharedContext, WithoutFaultsNothingChanges) {
  FaultingExecutor shared({});
  auto own = std::make_shared<FaultingExecutor>(std::set<int>{});
  const LaneRun r = run_lane(shared, own, 15);
  EXPECT_EQ(r.report.verdict, KernelVerdict::pass);
  EXPECT_EQ(r.report.cases, 15);
  EXPECT_EQ(r.report.context_reruns, 0);
  EXPECT_EQ(r.own_made, 0);
  EXPECT_EQ(own->cases, 0);
}

}  // namespace shared_context

// A CUDA kernel's call that times out may be the GPU's stall, not the kernel's hang (one lane's
// hung kernel holds back every lane under MPS; other processes on the GPU can hold back a small
// case). Its case runs once more in a fresh process: a hang that comes back is the case's failure;
// one stall that does not is reported and not held against the kernel; stalls at different
// times are.
namespace stalls {

// FaultingExecutor's honest_host described as a CUDA kernel, whose n-th run_case (counted from 1,
// reruns included) times out on the device when n is in `hangs`.
struct StallingExecutor final : Executor {
  explicit StallingExecutor(std::set<int> hangs) : inner(nvfp4::kernel("honest_host"), kDefaultCallTimeout), hangs(std::move(hangs)) {
    desc = inner.kernel();
    desc.info.memory = NVFP4_MEMORY_CUDA;
  }
  InProcessExecutor inner;
  KernelDesc desc;
  std::set<int> hangs;
  int hang_ms = 0;  // how long a call that times out takes
  std::string error = "the work on the runner's stream did not finish within 30 s (a hung kernel?)";
  int cases = 0;
  const KernelDesc& kernel() override { return desc; }
  std::vector<CallObservation> run_case(const CaseData& data, const std::vector<PlannedCall>& plan) override {
    if (!hangs.count(++cases)) return inner.run_case(data, plan);
    std::this_thread::sleep_for(std::chrono::milliseconds(hang_ms));
    CallObservation o;
    o.end = CallObservation::End::device_hang;
    o.error = error;
    o.context_lost = true;
    return {o};
  }
};

struct StallRun {
  KernelReport report;
  std::vector<std::string> files_left;
};

// One lane, in a context of its own (own == nullptr) or shared with `own` as its own context.
StallRun run_stalls(StallingExecutor& lane, const std::shared_ptr<StallingExecutor>& own, int64_t cases) {
  const KernelDesc& desc = lane.kernel();
  const Schedule schedule(desc.info, desc.name, ScheduleOptions{});
  LaneSettings ls;
  ls.cases = cases;
  ls.case_options = test_options();
  ls.case_options.case_dir += std::string("/") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  if (own) ls.own_context = [&](size_t) -> std::shared_ptr<Executor> { return own; };
  SuiteListener quiet;
  StallRun r;
  r.report = check_kernel({&lane}, desc, schedule, ls, quiet);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(ls.case_options.case_dir, ec))
    r.files_left.push_back(entry.path().string());
  std::sort(r.files_left.begin(), r.files_left.end());
  return r;
}

TEST(Stalls, OneStallThatDoesNotComeBackIsReportedNotHeldAgainstTheKernel) {
  StallingExecutor lane({4});  // case 3; its rerun is run_case 5
  const StallRun r = run_stalls(lane, nullptr, 20);
  EXPECT_FALSE(r.report.failure);
  EXPECT_EQ(r.report.verdict, KernelVerdict::pass);
  EXPECT_EQ(r.report.cases, 20);
  EXPECT_EQ(lane.cases, 21);
  EXPECT_EQ(r.report.stalls, 1);
  EXPECT_NE(r.report.stall_note.find("case(s) 3 timed out"), std::string::npos) << r.report.stall_note;
  EXPECT_EQ(r.files_left, std::vector<std::string>{});
}

// The run failed with a timeout at case `index`, whose one note says `note`, and left only its case file.
void expect_timeout_failure(const StallRun& r, int64_t index, const std::string& note) {
  ASSERT_TRUE(r.report.failure);
  EXPECT_EQ(r.report.failure->case_index, index);
  EXPECT_EQ(std::string(check_name(r.report.failure->check)), "timeout");
  ASSERT_EQ(r.report.failure->notes.size(), 1u);
  EXPECT_NE(r.report.failure->notes[0].find(note), std::string::npos) << r.report.failure->notes[0];
  EXPECT_EQ(r.files_left, std::vector<std::string>{r.report.failure->case_file});
}

TEST(Stalls, AHangThatComesBackIsTheCasesFailure) {
  StallingExecutor lane({4, 5});
  const StallRun r = run_stalls(lane, nullptr, 20);
  expect_timeout_failure(r, 3, "failed again when the case ran a second time");
  EXPECT_EQ(r.report.stalls, 0);
}

// Two stalls at different times (one lane runs its cases one after another) fail the kernel at
// the first, each having passed when run again.
TEST(Stalls, StallsAtDifferentTimesAreTheKernels) {
  StallingExecutor lane({4, 10});  // cases 3 and 8
  const StallRun r = run_stalls(lane, nullptr, 20);
  expect_timeout_failure(r, 3, "so did case(s) 8, in 2 stalls");
  EXPECT_EQ(r.report.cases, 4);
}

// A stall before a case that fails on its own is told in the report; the failure is that case's.
TEST(Stalls, AStallBeforeAFailureIsTold) {
  StallingExecutor lane({2, 8, 9});  // case 1 stalls (its rerun passes); case 6 hangs, again too
  const StallRun r = run_stalls(lane, nullptr, 20);
  ASSERT_TRUE(r.report.failure);
  EXPECT_EQ(r.report.failure->case_index, 6);
  EXPECT_EQ(r.report.stalls, 1);
  EXPECT_NE(r.report.stall_note.find("case(s) 1 timed out before the failing case"), std::string::npos)
      << r.report.stall_note;
  EXPECT_EQ(r.files_left, std::vector<std::string>{r.report.failure->case_file});
}

// A warm-up call (a compile) that did not finish is no stall: the case fails at once, not run
// again (a fresh process would compile again).
TEST(Stalls, AWarmupThatDidNotFinishIsNoStall) {
  StallingExecutor lane({1});
  lane.error = std::string("during ") + kWarmupCallWords + "one 128x1x64 gemv before the first case): timed out";
  const StallRun r = run_stalls(lane, nullptr, 20);
  ASSERT_TRUE(r.report.failure);
  EXPECT_EQ(r.report.failure->case_index, 0);
  EXPECT_EQ(std::string(check_name(r.report.failure->check)), "timeout");
  EXPECT_EQ(lane.cases, 1);
  EXPECT_EQ(r.report.stalls, 0);
}

// Lanes whose cases stalled at the same time met one stall of the GPU: reported, not held against
// the kernel.
TEST(Stalls, LanesStalledTogetherAreOneStall) {
  StallingExecutor a({1}), b({1});  // each lane's first case (0, and 1 or 2), both under way for 300 ms
  a.hang_ms = b.hang_ms = 300;
  const KernelDesc& desc = a.kernel();
  const Schedule schedule(desc.info, desc.name, ScheduleOptions{});
  LaneSettings ls;
  ls.cases = 12;
  ls.case_options = test_options();
  ls.case_options.case_dir += "/LanesStalledTogetherAreOneStall";
  SuiteListener quiet;
  const KernelReport report = check_kernel({&a, &b}, desc, schedule, ls, quiet);
  EXPECT_FALSE(report.failure) << report.failure->text;
  EXPECT_EQ(report.cases, 12);
  EXPECT_EQ(report.stalls, 2);
  EXPECT_NE(report.stall_note.find("case(s) 0, "), std::string::npos) << report.stall_note;
}

// Under a shared context a stall is rerun alone like a lost context, but one that passes there is
// a stall, not an unreproduced fault: the kernel passes, saying so.
TEST(Stalls, UnderASharedContextOneStallIsNoFault) {
  StallingExecutor shared({4});
  auto own = std::make_shared<StallingExecutor>(std::set<int>{});
  const StallRun r = run_stalls(shared, own, 20);
  EXPECT_FALSE(r.report.failure);
  EXPECT_EQ(r.report.cases, 20);
  EXPECT_EQ(r.report.context_reruns, 1);
  EXPECT_EQ(r.report.stalls, 1);
  EXPECT_EQ(shared.cases, 4);
  EXPECT_EQ(own->cases, 1 + 16);
  EXPECT_EQ(r.files_left, std::vector<std::string>{});
}

TEST(Stalls, UnderASharedContextAHangThatComesBackAloneIsTheCases) {
  StallingExecutor shared({4});
  auto own = std::make_shared<StallingExecutor>(std::set<int>{1});
  const StallRun r = run_stalls(shared, own, 20);
  ASSERT_TRUE(r.report.failure);
  EXPECT_EQ(r.report.failure->case_index, 3);
  ASSERT_EQ(r.report.failure->notes.size(), 1u);
  EXPECT_NE(r.report.failure->notes[0].find("one lane's hung kernel holds back every lane"), std::string::npos)
      << r.report.failure->notes[0];
}

}  // namespace stalls

}  // namespace
}  // namespace nvfp4
