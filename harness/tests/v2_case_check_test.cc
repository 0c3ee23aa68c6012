// The call path of ABI version 2's problems: grouped GEMM (both arrangements), dual GEMM and the
// BF16 and FP32 output types are handed to kernels, poisoned, guarded and judged like GEMV and
// GEMM. Honest kernels pass with every check on; kernels with one bug each fail the check that
// names it (the mutants of mutation/mutants and small kernels of this file with a write out of
// bounds, a changed group table); the stale data's reference is the exact one; problems travel
// through the worker protocol unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "harness/judge/case_check.h"
#include "harness/tests/scratch_dir.h"
#include "harness/draw/generators.h"
#include "harness/tests/check_in_process.h"
#include "harness/process/worker_protocol.h"
#include "kernels/registry.h"
#include "reference/case_file.h"
#include "reference/fp16.h"
#include "reference/scale_layout.h"
#include "harness/ops/op_module.h"

namespace nvfp4 {
namespace {

const Registry& builtins() {
  static const Registry r = Registry::with_builtins();
  return r;
}

const Registry& mutants() {
  static const Registry r = [] {
    Registry reg;
    reg.load_plugin(NVFP4_MUTANTS_PLUGIN);
    return reg;
  }();
  return r;
}

const Kernel& find(const Registry& r, const std::string& name) {
  const Kernel* k = r.find(name);
  if (!k) throw std::runtime_error("no kernel " + name);
  return *k;
}

// ---- Kernels of this file: an honest grouped computation with one way of being wrong each ------

enum class Wrong { writes_past_group, packed_writes_past_last, writes_group_table };

// FP32 dot products of one group, rounded to FP16 (the tests below use FP16 outputs): enough to
// be right, so only the planted misbehaviour fails.
void grouped_fp16(const nvfp4_problem* p, Wrong wrong) {
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    const int64_t kb = (q.k + 15) / 16;
    for (int64_t i = 0; i < q.m; ++i)
      for (int64_t j = 0; j < q.n; ++j) {
        float acc = 0;
        for (int64_t x = 0; x < q.k; ++x) {
          const auto e2m1 = [](const uint8_t* row, int64_t x) {
            const uint8_t code = (row[x / 2] >> (4 * (x % 2))) & 0xF;
            static const float kValues[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
            return (code & 8 ? -1.0f : 1.0f) * kValues[code & 7];
          };
          const auto e4m3 = [](uint8_t s) {
            const int e = (s >> 3) & 0xF, m = s & 7;
            return e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
          };
          acc += e2m1(q.a + i * (q.k / 2), x) * e4m3(q.sfa[i * kb + x / 16]) * e2m1(q.b + j * (q.k / 2), x) *
                 e4m3(q.sfb[j * kb + x / 16]);
        }
        const float v = q.alpha * acc;
        int e = 0;
        const float frac = std::frexp(std::fabs(v), &e);  // exact: 24 bits
        static_cast<uint16_t*>(q.c)[i * q.n + j] =
            fp16_round(std::signbit(v), static_cast<u128>(std::ldexp(frac, 24)), e - 24);
      }
  }
  int64_t last = -1;
  for (int64_t g = 0; g < p->groups; ++g)
    if (p->group[g].m > 0) last = g;
  if (last < 0) return;
  const nvfp4_group& q = p->group[last];
  if (wrong == Wrong::writes_past_group || wrong == Wrong::packed_writes_past_last)
    static_cast<uint16_t*>(q.c)[q.m * q.n] = 0x3C00;  // one element past the group's (or packed C's) end
  if (wrong == Wrong::writes_group_table) const_cast<nvfp4_group*>(p->group)[last].alpha = 2.0f;
}

nvfp4_kernel_info g_infos[3];
const char* const kNames[3] = {"test_grouped_writes_past_group", "test_grouped_packed_writes_past_last",
                               "test_grouped_writes_group_table"};

int test_count() { return 3; }
const nvfp4_kernel_info* test_get(int index) {
  nvfp4_kernel_info& i = g_infos[index];
  i.abi_version = NVFP4_ABI_VERSION;
  i.name = kNames[index];
  i.memory = NVFP4_MEMORY_HOST;
  i.ops = 1u << NVFP4_OP_GROUPED_GEMM;
  i.sf_layouts = 1u << NVFP4_SF_LINEAR;
  i.m_multiple = i.n_multiple = i.k_multiple = 1;
  i.out_types = 1u << NVFP4_OUT_FP16;
  i.flags = index == 1 ? NVFP4_FLAG_GROUPS_PACKED : 0;
  return &i;
}
int test_run(int index, const nvfp4_problem* p) {
  if (p->op != NVFP4_OP_GROUPED_GEMM || p->sf_layout != NVFP4_SF_LINEAR || p->out_type != NVFP4_OUT_FP16)
    return NVFP4_UNSUPPORTED;
  grouped_fp16(p, static_cast<Wrong>(index));
  return NVFP4_OK;
}

const Registry& test_kernels() {
  static const Registry r = [] {
    Registry reg;
    reg.add_provider(test_count, test_get, test_run, "harness/tests/v2_case_check_test.cc");
    return reg;
  }();
  return r;
}

// ---- Problems -----------------------------------------------------------------------------------

Problem gemm_problem(Op op, int64_t m, int64_t n, int64_t k, OutType out, SfLayout layout, uint64_t seed) {
  Problem p;
  p.op = op;
  p.m = m, p.n = op == Op::gemv ? 1 : n, p.k = k, p.l = 2;
  p.sf_layout = layout;
  Rng rng(seed);
  std::printf("problem %s %ldx%ldx%ld %s %s from seed %lu\n", to_string(op), (long)m, (long)p.n, (long)k,
              to_string(out), to_string(layout), (unsigned long)seed);
  // Drawn as an FP16 problem: a drawn alpha of a BF16 or FP32 one may be moved to the type's edges
  // (generators.cc), and these problems are meant to be ordinary ones, in the exact regime.
  fill_data(rng, DataSpec::parse("uniform/narrow/pow2"), p);
  p.out_type = out;
  if (op == Op::dual_gemm) {
    Problem second = p;
    second.op = Op::gemm;
    second.out_type = OutType::fp16;  // as above
    Rng rng2(seed + 1);
    fill_data(rng2, DataSpec::parse("uniform/narrow/pow2"), second);
    p.b2 = second.b, p.sfb2 = second.sfb, p.alpha2 = 0.5f;
  }
  return p;
}

// Groups of the given m (0 allowed), each with its own data and alpha; one n and k (packable).
Problem grouped_problem(const std::vector<int64_t>& ms, int64_t n, int64_t k, OutType out, SfLayout layout,
                        uint64_t seed) {
  Problem p;
  p.op = Op::grouped_gemm;
  p.sf_layout = layout;
  p.out_type = out;
  std::printf("grouped problem, %zu groups, n %ld k %ld %s %s from seed %lu\n", ms.size(), (long)n, (long)k,
              to_string(out), to_string(layout), (unsigned long)seed);
  for (size_t g = 0; g < ms.size(); ++g) {
    Group q;
    q.m = ms[g], q.n = n, q.k = k;
    q.alpha = g % 2 ? 0.5f : 2.0f;  // groups differ in alpha (rule 5: each its own)
    if (q.m > 0) {
      Problem one;
      one.op = Op::gemm;
      one.m = q.m, one.n = n, one.k = k, one.l = 1;
      Rng rng(seed + g);
      fill_data(rng, DataSpec{}, one);
      q.a = one.a, q.b = one.b, q.sfa = one.sfa, q.sfb = one.sfb;
    }
    p.groups.push_back(std::move(q));
  }
  return p;
}

CaseOptions options() {
  CaseOptions o;
  o.case_dir = test::scratch_dir("v2-case-test").string();
  o.stale_seed = 7;
  return o;
}

::testing::AssertionResult passes(const Kernel& k, const Problem& p) {
  const CaseOutcome r = check_in_process(k, p, options());
  if (r.verdict == CaseOutcome::Verdict::pass && r.calls == 3) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << k.name() << ": " << verdict_name(r.verdict) << " after " << r.calls
                                       << " calls: " << check_of(r) << ": " << message_of(r);
}

::testing::AssertionResult fails_with(const Kernel& k, const Problem& p, const std::string& check,
                                      const std::string& words = "") {
  const CaseOutcome r = check_in_process(k, p, options());
  if (r.verdict != CaseOutcome::Verdict::fail)
    return ::testing::AssertionFailure() << k.name() << ": " << verdict_name(r.verdict) << ", not " << check;
  if (check_of(r) != check)
    return ::testing::AssertionFailure() << k.name() << ": " << check_of(r) << " (" << message_of(r) << "), not " << check;
  if (!words.empty() && message_of(r).find(words) == std::string::npos)
    return ::testing::AssertionFailure() << k.name() << ": the message does not say \"" << words << "\": " << message_of(r);
  return ::testing::AssertionSuccess();
}

const std::vector<int64_t> kRaggedGroups = {1, 0, 129, 127, 0, 2};

// ---- Honest kernels pass every check ------------------------------------------------------------

TEST(V2Honest, GemmInEveryOutputTypeAndLayout) {
  for (OutType out : {OutType::fp16, OutType::bf16, OutType::fp32})
    for (SfLayout layout : {SfLayout::linear, SfLayout::permuted}) {
      EXPECT_TRUE(passes(find(builtins(), "host_gemm_fp32"), gemm_problem(Op::gemm, 33, 9, 80, out, layout, 1)));
      EXPECT_TRUE(passes(find(builtins(), "host_gemm_fp32"), gemm_problem(Op::gemv, 129, 1, 48, out, layout, 2)));
    }
}

TEST(V2Honest, DualGemmInEveryOutputType) {
  for (OutType out : {OutType::fp16, OutType::bf16, OutType::fp32})
    for (SfLayout layout : {SfLayout::linear, SfLayout::permuted})
      EXPECT_TRUE(passes(find(builtins(), "host_dual_gemm_fp32"), gemm_problem(Op::dual_gemm, 17, 5, 64, out, layout, 3)));
}

TEST(V2Honest, GroupedGemmInBothArrangements) {
  for (const char* name : {"host_grouped_gemm_fp32", "host_grouped_gemm_fp32_packed"})
    for (OutType out : {OutType::fp16, OutType::bf16, OutType::fp32})
      for (SfLayout layout : {SfLayout::linear, SfLayout::permuted})
        EXPECT_TRUE(passes(find(builtins(), name), grouped_problem(kRaggedGroups, 6, 48, out, layout, 4)));
  // Every group empty: nothing to write, nothing to read.
  EXPECT_TRUE(passes(find(builtins(), "host_grouped_gemm_fp32"), grouped_problem({0, 0, 0}, 4, 32, OutType::fp16,
                                                                                 SfLayout::permuted, 5)));
}

// A packed call's A and B are laid out from the groups' own bytes, not copied into one vector:
// they upload as pack_groups' buffers, and a changed byte (in a group's rows or in an empty
// group's zero B slot) is found at its offset in the packed buffer.
TEST(V2Packed, AAndBAreTheGroupsOwnBytesEndToEnd) {
  const Problem p = grouped_problem(kRaggedGroups, 6, 48, OutType::fp16, SfLayout::permuted, 11);
  const uint32_t flags = find(builtins(), "host_grouped_gemm_fp32_packed").info->flags;
  const LaidOut in = op_module(p.op).lay_out(p, CallSpec{}, flags);
  const PackedData d = pack_groups(p, CallSpec{}.pad);
  ASSERT_TRUE(in.packed);
  ASSERT_EQ(in.inputs.size(), 4u);
  const std::vector<uint8_t>* want[4] = {&d.a, &d.b, &d.sfa_permuted, &d.sfb_permuted};
  for (size_t x = 0; x < 4; ++x) {
    const InputTensor& t = in.inputs[x];
    ASSERT_EQ(t.size(), static_cast<int64_t>(want[x]->size())) << t.name;
    std::vector<uint8_t> bytes(static_cast<size_t>(t.size()));
    t.write_to(bytes.data());
    EXPECT_EQ(bytes, *want[x]) << t.name;
    EXPECT_EQ(t.compare(bytes.data()).count, 0) << t.name;
  }
  ASSERT_EQ(kRaggedGroups[1], 0);  // the second group is empty: its B slot is zero
  const PackedLayout lay = packed_layout(p);
  std::vector<uint8_t> b = d.b;
  const int64_t in_slot = lay.b_offset(1) + 5, in_rows = lay.b_offset(3) + 7;
  b[static_cast<size_t>(in_slot)] ^= 0x40;
  b[static_cast<size_t>(in_rows)] ^= 0x01;
  const InputTensor::Difference diff = in.inputs[1].compare(b.data());
  EXPECT_EQ(diff.count, 2);
  EXPECT_EQ(diff.first, in_slot);
  EXPECT_EQ(diff.was, 0);
  EXPECT_EQ(diff.now, 0x40);
}

// ---- Each bug fails the check that names it -------------------------------------------------------

TEST(V2Mutants, OutputTypeBugsFailTheOracle) {
  EXPECT_TRUE(fails_with(find(mutants(), "mut_host_bf16_truncated"),
                         gemm_problem(Op::gemm, 33, 9, 80, OutType::bf16, SfLayout::linear, 6), "oracle", "bf16"));
  EXPECT_TRUE(fails_with(find(mutants(), "mut_host_fp32_through_fp16"),
                         gemm_problem(Op::gemm, 33, 9, 80, OutType::fp32, SfLayout::linear, 7), "oracle"));
}

TEST(V2Mutants, DualGemmBugsFailTheOracle) {
  const Problem p = gemm_problem(Op::dual_gemm, 17, 5, 64, OutType::fp32, SfLayout::linear, 8);
  EXPECT_TRUE(passes(find(mutants(), "ctl_host_dual_unmutated"), p));
  for (const char* name : {"mut_host_dual_gate_up_swapped", "mut_host_dual_alpha2_ignored", "mut_host_dual_silu_fp16"})
    EXPECT_TRUE(fails_with(find(mutants(), name), p, "oracle"));
}

TEST(V2Mutants, GroupedBugsFailTheirChecks) {
  const Problem p = grouped_problem(kRaggedGroups, 6, 48, OutType::fp16, SfLayout::linear, 9);
  EXPECT_TRUE(passes(find(mutants(), "ctl_host_grouped_unmutated"), p));
  EXPECT_TRUE(fails_with(find(mutants(), "mut_host_grouped_next_expert_scales"), p, "oracle", "(g="));
  EXPECT_TRUE(fails_with(find(mutants(), "mut_host_grouped_alpha_of_first"), p, "oracle", "(g="));
  EXPECT_TRUE(fails_with(find(mutants(), "mut_host_grouped_stops_at_empty"), p, "unwritten-output", "(g=2"));
}

TEST(V2Guards, AWriteBetweenGroupsIsAGuardFailure) {
  const Problem p = grouped_problem(kRaggedGroups, 6, 48, OutType::fp16, SfLayout::linear, 10);
  EXPECT_TRUE(fails_with(find(test_kernels(), "test_grouped_writes_past_group"), p, "guard", "c[g=5]"));
  EXPECT_TRUE(fails_with(find(test_kernels(), "test_grouped_packed_writes_past_last"), p, "guard", "wrote out of bounds: c: "));
}

TEST(V2Guards, AChangedGroupTableIsAChangedInput) {
  const Problem p = grouped_problem(kRaggedGroups, 6, 48, OutType::fp16, SfLayout::linear, 11);
  EXPECT_TRUE(fails_with(find(test_kernels(), "test_grouped_writes_group_table"), p, "inputs-modified", "group table"));
}

// ---- Stale data, declarations, the protocol -------------------------------------------------------

TEST(V2Stale, DerivedReferenceIsTheExactOne) {
  std::vector<Problem> problems = {gemm_problem(Op::gemm, 9, 7, 64, OutType::bf16, SfLayout::linear, 12),
                                   gemm_problem(Op::dual_gemm, 9, 7, 64, OutType::fp32, SfLayout::linear, 13),
                                   grouped_problem(kRaggedGroups, 5, 64, OutType::fp32, SfLayout::linear, 14)};
  for (const Problem& p : problems) {
    const ExactResult ref = exact_gemm(p);
    const StaleVariant v = stale_variant(p, ref, 3);
    const ExactResult direct = exact_gemm(v.problem);
    ASSERT_EQ(v.reference.words(), direct.words()) << to_string(p.op);
    EXPECT_NE(v.reference.words(), ref.words()) << to_string(p.op) << ": the stale data must change the output";
    if (p.op == Op::grouped_gemm) {
      for (size_t g = 0; g < p.groups.size(); ++g) {
        if (p.groups[g].m > 1) {
          EXPECT_NE(v.problem.groups[g].a, p.groups[g].a) << "group " << g;
        }
      }
    }
  }
}

TEST(V2Declarations, RefusalsAreProbedOnlyWhereTheKernelCanTell) {
  const Kernel& grouped = find(builtins(), "host_grouped_gemm_fp32");
  nvfp4_kernel_info info = *grouped.info;
  info.max_groups = 4;
  const Problem many = grouped_problem(kRaggedGroups, 6, 48, OutType::fp16, SfLayout::linear, 15);
  EXPECT_NE(unsupported_reason(info, many).find("max_groups 4"), std::string::npos);
  EXPECT_TRUE(probes_refusal(info, many));
  info.m_multiple = 2;
  info.max_groups = 0;
  EXPECT_NE(unsupported_reason(info, many).find("group 0: m = 1"), std::string::npos) << unsupported_reason(info, many);
  // An output type the kernel does not declare, or a grouped problem for a version-1 kernel, is
  // never handed over.
  info = *grouped.info;
  info.out_types = 1u << NVFP4_OUT_FP16;
  const Problem bf16 = grouped_problem({3}, 6, 48, OutType::bf16, SfLayout::linear, 16);
  EXPECT_FALSE(unsupported_reason(info, bf16).empty());
  EXPECT_FALSE(probes_refusal(info, bf16));
  info.abi_version = 1;
  EXPECT_FALSE(probes_refusal(info, grouped_problem({3}, 6, 48, OutType::fp16, SfLayout::linear, 17)));
  // GEMV and GEMM every kernel tells apart by op: a GEMM in BF16 is handed to a kernel declaring
  // GEMV in BF16 (to be refused), also to a version-2 one; a version-1 kernel sees FP16 only.
  nvfp4_kernel_info gemv_bf16 = *grouped.info;
  gemv_bf16.ops = 1u << NVFP4_OP_GEMV;
  gemv_bf16.out_types = 1u << NVFP4_OUT_BF16;
  const Problem gemm_bf16 = gemm_problem(Op::gemm, 5, 3, 32, OutType::bf16, SfLayout::linear, 19);
  EXPECT_FALSE(unsupported_reason(gemv_bf16, gemm_bf16).empty());
  EXPECT_TRUE(probes_refusal(gemv_bf16, gemm_bf16));
  gemv_bf16.abi_version = 1;
  EXPECT_FALSE(probes_refusal(gemv_bf16, gemm_bf16));
  // Groups of different n cannot be packed: not a probe of a packed kernel.
  Problem ragged = grouped_problem({3, 2}, 6, 48, OutType::fp16, SfLayout::linear, 18);
  ragged.groups[1].n = 7;
  ragged.groups[1].b.resize(7 * 24), ragged.groups[1].sfb.resize(7 * 3);
  const nvfp4_kernel_info packed = *find(builtins(), "host_grouped_gemm_fp32_packed").info;
  EXPECT_FALSE(unsupported_reason(packed, ragged).empty());
  EXPECT_FALSE(probes_refusal(packed, ragged));
  const CaseOutcome r = check_in_process(find(builtins(), "host_grouped_gemm_fp32_packed"), ragged, options());
  // Never handed over, so nothing was checked: skipped, with the reason.
  EXPECT_EQ(r.verdict, CaseOutcome::Verdict::skipped);
  EXPECT_NE(r.message.find("not handed to the kernel"), std::string::npos) << r.message;
  EXPECT_EQ(r.calls, 0);
  // UNIT_ALPHA covers alpha2.
  info = *find(builtins(), "host_dual_gemm_fp32").info;
  info.flags |= NVFP4_FLAG_UNIT_ALPHA;
  Problem dual = gemm_problem(Op::dual_gemm, 4, 4, 32, OutType::fp16, SfLayout::linear, 19);
  dual.alpha = 1.0f;
  EXPECT_NE(unsupported_reason(info, dual).find("alpha2"), std::string::npos);
}

// A GEMM with MX operands: small integers (E4M3/E5M2 bytes 0x38/0x3C are 1.0, E2M1 nibbles
// from the seed) and E8M0 scales near 2^0, linear scales (the problem's layout is `layout`).
Problem mx_gemm(BlockFormat fa, BlockFormat fb, int64_t m, int64_t n, int64_t k, SfLayout layout, uint32_t seed) {
  Problem p;
  p.op = n == 1 ? Op::gemv : Op::gemm;
  p.m = m, p.n = n, p.k = k, p.l = 1;
  p.a_format = fa, p.b_format = fb;
  p.sf_layout = layout;
  p.out_type = OutType::fp32;
  std::mt19937 rng(seed);
  auto fill = [&](std::vector<uint8_t>& v, int64_t bytes, BlockFormat f) {
    v.resize(static_cast<size_t>(bytes));
    const uint8_t one = f == BlockFormat::mxfp8_e5m2 ? 0x3C : 0x38;
    for (uint8_t& b : v) b = packs_nibbles(f) ? static_cast<uint8_t>(rng() & 0x77) : static_cast<uint8_t>(one | (rng() & 0x80));
  };
  fill(p.a, p.a_bytes(), fa);
  fill(p.b, p.b_bytes(), fb);
  p.sfa.resize(static_cast<size_t>(p.sfa_bytes()));
  p.sfb.resize(static_cast<size_t>(p.sfb_bytes()));
  for (uint8_t& b : p.sfa) b = static_cast<uint8_t>(fa == BlockFormat::nvfp4 ? 0x38 : 120 + rng() % 15);
  for (uint8_t& b : p.sfb) b = static_cast<uint8_t>(fb == BlockFormat::nvfp4 ? 0x38 : 120 + rng() % 15);
  return p;
}

TEST(MxDeclarations, AKernelNeverReceivesAFormatItDoesNotDeclare) {
  const Kernel& nvfp4_only = find(builtins(), "host_gemm_fp32");
  const Problem p = mx_gemm(BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4, 5, 3, 64, SfLayout::permuted, 31);
  ASSERT_EQ(problem_error(p), "");
  EXPECT_NE(unsupported_reason(*nvfp4_only.info, p).find("does not declare the mxfp8_e4m3 format for A"),
            std::string::npos)
      << unsupported_reason(*nvfp4_only.info, p);
  EXPECT_FALSE(probes_refusal(*nvfp4_only.info, p));
  const CaseOutcome r = check_in_process(nvfp4_only, p, options());
  EXPECT_EQ(r.verdict, CaseOutcome::Verdict::skipped) << r.message;
  EXPECT_EQ(r.calls, 0);
  // Declaring A's format alone is not enough: B's is named next.
  nvfp4_kernel_info info = *nvfp4_only.info;
  info.abi_version = 3;
  info.a_formats = 1u << NVFP4_FORMAT_MXFP8_E4M3;
  EXPECT_NE(unsupported_reason(info, p).find("mxfp4 format for B"), std::string::npos);
  info.b_formats = 1u << NVFP4_FORMAT_MXFP4;
  EXPECT_EQ(unsupported_reason(info, p), "");
  EXPECT_TRUE(probes_refusal(info, p));
  // Such a kernel no longer takes NVFP4 (its set names the formats it takes).
  EXPECT_NE(unsupported_reason(info, gemm_problem(Op::gemm, 5, 3, 32, OutType::fp32, SfLayout::linear, 3)).find("nvfp4"),
            std::string::npos);
  // A version-2 kernel cannot have declared any: its a_formats bytes are not read.
  info.abi_version = 2;
  EXPECT_FALSE(unsupported_reason(info, p).empty());
}

TEST(MxDeclarations, TheAbiProblemCarriesTheFormatsAndBuffersSizedByThem) {
  const Problem p = mx_gemm(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp4, 130, 3, 200, SfLayout::permuted, 32);
  const nvfp4_problem abi = to_abi(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(abi.a_format, static_cast<uint32_t>(NVFP4_FORMAT_MXFP8_E5M2));
  EXPECT_EQ(abi.b_format, static_cast<uint32_t>(NVFP4_FORMAT_MXFP4));
  // Reports name the formats with the shape.
  EXPECT_NE(op_module(p.op).shape_text(p).find("A mxfp8_e5m2 x B mxfp4"), std::string::npos) << op_module(p.op).shape_text(p);
  CallSpec spec;  // the default pad, 0x7F, is E4M3's NaN but E8M0's 1.0
  const LaidOut out = op_module(p.op).lay_out(p, spec, 0);
  ASSERT_EQ(out.inputs.size(), 4u);
  EXPECT_EQ(out.inputs[0].size(), 130 * 200);  // a byte per E5M2 element
  EXPECT_EQ(out.inputs[1].size(), 3 * 100);    // two E2M1 per byte
  // kb = ceil(200/32) = 7 blocks: Kt = 2 tiles of 4; two row tiles for A's 130 rows.
  EXPECT_EQ(out.inputs[2].bytes.size(), 2u * 2 * 512);
  EXPECT_EQ(out.inputs[3].bytes.size(), 1u * 2 * 512);
  EXPECT_EQ(sf_to_linear(out.inputs[2].bytes.data(), 130, 7, 1), p.sfa);
  EXPECT_EQ(out.inputs[3].bytes[sf_permuted_offset(3, 7, 0, 0, 7)], 0xFF);  // padding: E8M0's NaN
  EXPECT_EQ(out.inputs[2].bytes[sf_permuted_offset(130, 7, 0, 131, 0)], 0xFF);
}

// A write into a read-only input is named from the call's own buffers (the worker's exit status
// indexes these names): each input's name without its group, then the group table. An input no
// op had before (a bias) is named like any other, with no list of kinds to extend.
TEST(InputFaults, NamesComeFromTheLaidOutInputs) {
  LaidOut in;
  for (const char* name : {"a[g=0]", "b[g=0]", "a[g=2]", "sfa[g=2]", "bias"}) in.inputs.push_back({name, GuardPattern::bytes, {}});
  EXPECT_EQ(input_fault_names(in, true), (std::vector<std::string>{"a", "b", "sfa", "bias", "group table"}));
  EXPECT_EQ(input_fault_names(in, false), (std::vector<std::string>{"a", "b", "sfa", "bias"}));
  // The ops' own buffers give the names failures have always printed.
  const Problem dual = gemm_problem(Op::dual_gemm, 5, 3, 32, OutType::fp16, SfLayout::permuted, 3);
  EXPECT_EQ(input_fault_names(op_module(dual.op).lay_out(dual, CallSpec{}, 0), false),
            (std::vector<std::string>{"a", "b", "sfa", "sfb", "b2", "sfb2"}));
}

// The built-in host MX kernels pass every check (run 1, run 2 with other padding, stale data)
// on every hand case of corpus/mx in both layouts (grouped cases also packed where their groups
// share n and k) and on every format pair.
TEST(MxHostKernel, PassesHandCasesAndEveryFormatPair) {
  const Kernel& k = find(builtins(), "host_mx_gemm_fp32");
  int cases = 0, grouped_dual = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(NVFP4_SOURCE_DIR) + "/corpus/mx")) {
    if (e.path().extension() != ".case") continue;
    Problem p = read_case_file(e.path().string());
    const char* name = p.op == Op::dual_gemm      ? "host_mx_dual_gemm_fp32"
                       : p.op == Op::grouped_gemm ? (p.packed ? "host_mx_grouped_gemm_fp32_packed" : "host_mx_grouped_gemm_fp32")
                                                  : "host_mx_gemm_fp32";
    grouped_dual += p.op == Op::dual_gemm || p.op == Op::grouped_gemm;
    for (const SfLayout layout : {SfLayout::linear, SfLayout::permuted}) {
      p.sf_layout = layout;
      if (p.semantics == ScaleSemantics::e4m3) continue;  // signed NVFP4 scales: not this kernel's
      EXPECT_TRUE(passes(find(builtins(), name), p)) << e.path();
      ++cases;
    }
  }
  EXPECT_GE(cases, 60);
  EXPECT_GE(grouped_dual, 12);
  const BlockFormat formats[] = {BlockFormat::nvfp4, BlockFormat::mxfp4, BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e5m2};
  uint32_t seed = 40;
  for (const BlockFormat fa : formats)
    for (const BlockFormat fb : formats)
      EXPECT_TRUE(passes(k, mx_gemm(fa, fb, 131, 5, 96, SfLayout::permuted, ++seed))) << to_string(fa) << " x " << to_string(fb);
}

TEST(V2Protocol, ProblemsAndWordsRoundTrip) {
  RunCaseMsg run;
  run.case_id = 5;
  run.data.problem = grouped_problem(kRaggedGroups, 6, 48, OutType::fp32, SfLayout::permuted, 20);
  run.data.stale = gemm_problem(Op::dual_gemm, 9, 7, 64, OutType::bf16, SfLayout::linear, 21);
  run.plan = {{kPad1, poison_word(OutType::fp32, 1), false, false}};
  const std::vector<uint8_t> frame = encode_message(run);
  const RunCaseMsg back = std::get<RunCaseMsg>(decode_message(frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes));
  const Problem& g = back.data.problem;
  ASSERT_EQ(g.groups.size(), kRaggedGroups.size());
  EXPECT_EQ(g.out_type, OutType::fp32);
  for (size_t x = 0; x < g.groups.size(); ++x) {
    EXPECT_EQ(g.groups[x].m, kRaggedGroups[x]);
    EXPECT_EQ(g.groups[x].a, run.data.problem.groups[x].a);
    EXPECT_EQ(g.groups[x].alpha, run.data.problem.groups[x].alpha);
  }
  ASSERT_TRUE(back.data.stale);
  EXPECT_EQ(back.data.stale->b2, run.data.stale->b2);
  EXPECT_EQ(back.data.stale->alpha2, 0.5f);
  EXPECT_EQ(back.plan.front().poison, poison_word(OutType::fp32, 1));

  CallDoneMsg done;
  done.observation.c = std::vector<uint32_t>{0x7FA5A55Bu, 0x3F800000u, 0};
  done.observation.c_later = std::vector<uint32_t>{1, 2};
  const std::vector<uint8_t> f2 = encode_message(done);
  const CallDoneMsg d2 = std::get<CallDoneMsg>(decode_message(f2.data() + kFrameHeaderBytes, f2.size() - kFrameHeaderBytes));
  EXPECT_EQ(d2.observation.c, done.observation.c);
  EXPECT_EQ(d2.observation.c_later, done.observation.c_later);
}

TEST(V2Poison, PoisonsAreNaNsNoArithmeticProduces) {
  for (OutType t : {OutType::fp16, OutType::bf16, OutType::fp32}) {
    const uint32_t p1 = poison_word(t, 1), p2 = poison_word(t, 2);
    EXPECT_TRUE(is_nan_out(t, p1)) << to_string(t);
    EXPECT_TRUE(is_nan_out(t, p2)) << to_string(t);
    EXPECT_NE(p1, p2);
    const uint32_t quiet = out_format(t).quiet_nan, sign = out_format(t).sign_bit;
    const uint32_t ones = out_word_bytes(t) == 4 ? 0x7FFFFFFFu : 0x7FFFu;
    for (uint32_t produced : {quiet, quiet | sign, ones, ones | sign}) {
      EXPECT_NE(p1, produced) << to_string(t);
      EXPECT_NE(p2, produced) << to_string(t);
    }
  }
}

}  // namespace
}  // namespace nvfp4
