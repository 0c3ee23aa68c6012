// GEMM, dual GEMM and grouped GEMM with block-scaled output through the whole case check: the
// built-in host kernels pass their schedule; the schedule reaches every recipe, both layouts,
// partial 16-column blocks, global scales that clamp block scales at 448 and one distinct global
// scale per group; and the host engine with one quantizer bug (the mutants' engine,
// kernels/host/host_gemm_nvfp4_out.h) fails, by name.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "harness/draw/schedule.h"
#include "harness/judge/case_check.h"
#include "harness/judge/checks.h"
#include "harness/ops/op_module.h"
#include "harness/tests/check_in_process.h"
#include "kernels/host/host_gemm_nvfp4_out.h"
#include "kernels/registry.h"
#include "reference/block_scaled_output.h"

namespace nvfp4 {
namespace {

Schedule schedule_of(const nvfp4_kernel_info& info, const std::string& name, uint64_t seed) {
  ScheduleOptions o;
  o.seed = seed;
  return Schedule(info, name, o);
}

TEST(BlockScaledOutputOp, HostKernelsPassTheirSchedule) {
  for (const std::string name : {"host_gemm_nvfp4_out", "host_dual_gemm_nvfp4_out"}) {
    const Kernel& k = builtin(name);
    const Schedule s = schedule_of(*k.info, name, 31);
    for (int64_t i = 0; i < 40; ++i) {
      const Problem p = s.at(i).problem;
      CaseOptions o;
      o.stale_seed = static_cast<uint64_t>(i);
      const CaseOutcome r = check_in_process(k, p, o);
      ASSERT_NE(r.verdict, CaseOutcome::Verdict::fail)
          << name << " case " << i << " (" << op_module(p.op).shape_text(p) << "): " << check_of(r) << ": "
          << message_of(r);
    }
  }
}

TEST(BlockScaledOutputOp, ScheduleReachesRecipesLayoutsAndScales) {
  const Kernel& k = builtin("host_gemm_nvfp4_out");
  std::set<std::string> recipes, layouts;
  int partial_blocks = 0, clamped = 0;
  const Schedule s = schedule_of(*k.info, k.name(), 7);
  for (int64_t i = 0; i < 300; ++i) {
    const Problem p = s.at(i).problem;
    if (p.out_type != OutType::nvfp4 || p.a.empty()) continue;
    recipes.insert(to_string(p.out_recipe));
    layouts.insert(to_string(p.sf_layout));
    partial_blocks += p.n % 16 != 0;
    if (p.c_elems() > 4096) continue;
    const QuantResult q = block_scaled_reference(p, exact_gemm(p), out_units(p).front());
    for (uint8_t s : q.sfq) clamped += s == 0x7E;
  }
  EXPECT_EQ(recipes.size(), 4u);
  EXPECT_EQ(layouts.size(), 2u);
  EXPECT_GT(partial_blocks, 20);
  EXPECT_GT(clamped, 20) << "no block maximum above 2688 times the global scale";
}

// The mutants' host engine with one bug, as a kernel of this process.
template <kern::quant::Bug B>
int run_buggy(int, const nvfp4_problem* p);

nvfp4_kernel_info buggy_info(const char* name) {
  nvfp4_kernel_info info{};
  info.abi_version = NVFP4_ABI_VERSION;
  info.name = name;
  info.memory = NVFP4_MEMORY_HOST;
  info.ops = (1u << NVFP4_OP_GEMM) | (1u << NVFP4_OP_DUAL_GEMM);
  info.sf_layouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
  info.m_multiple = info.n_multiple = info.k_multiple = 1;
  info.out_types = 1u << NVFP4_OUT_NVFP4;
  info.recipes = (1u << NVFP4_RECIPE_TE) | (1u << NVFP4_RECIPE_REF) | (1u << NVFP4_RECIPE_FAST) |
                 (1u << NVFP4_RECIPE_TORCHAO);
  return info;
}

template <kern::quant::Bug B>
const nvfp4_kernel_info& info_of() {
  static const nvfp4_kernel_info info = buggy_info("buggy_gemm_nvfp4_out");
  return info;
}

template <kern::quant::Bug B>
int run_buggy(int, const nvfp4_problem* p) {
  return kern::quant::run_gemm_nvfp4_out(info_of<B>(), p, B);
}

// The first failing case of a kernel of this process over `cases` of its schedule (-1 when none,
// with the failure's check and message); `seen` is shown every case that did not fail.
std::pair<int64_t, std::string> first_kill_of(const nvfp4_kernel_info& info, int (*run)(int, const nvfp4_problem*),
                                              int64_t cases,
                                              const std::function<void(const Problem&, const CaseOutcome&)>& seen = {}) {
  Kernel k;
  k.info = &info;
  k.run_fn = run;
  k.origin = "test";
  const Schedule s = schedule_of(*k.info, k.name(), 20261202);
  for (int64_t i = 0; i < cases; ++i) {
    const Problem p = s.at(i).problem;
    const CaseOutcome r = check_in_process(k, p);
    if (r.verdict == CaseOutcome::Verdict::fail) return {i, check_of(r) + ": " + message_of(r)};
    if (seen) seen(p, r);
  }
  return {-1, ""};
}

template <kern::quant::Bug B>
std::pair<int64_t, std::string> first_kill(int64_t cases) {
  return first_kill_of(info_of<B>(), run_buggy<B>, cases);
}

TEST(BlockScaledOutputOp, ControlPassesAndBugsFail) {
  const auto control = first_kill<kern::quant::Bug::none>(40);
  EXPECT_EQ(control.first, -1) << control.second;
  const auto toward_zero = first_kill<kern::quant::Bug::scale_toward_zero>(300);
  ASSERT_GE(toward_zero.first, 0);
  EXPECT_NE(toward_zero.second.find("oracle"), std::string::npos) << toward_zero.second;
  const auto padding = first_kill<kern::quant::Bug::padding_not_written>(300);
  ASSERT_GE(padding.first, 0);
  EXPECT_NE(padding.second.find("padding"), std::string::npos) << padding.second;
}

// The same engine's grouped form (each group's Q, SFQ and global scale through the group_out
// table), as a kernel of this process declaring grouped GEMM only.
template <kern::quant::Bug B>
const nvfp4_kernel_info& grouped_info_of() {
  static const nvfp4_kernel_info info = [] {
    nvfp4_kernel_info i = buggy_info("buggy_grouped_gemm_nvfp4_out");
    i.ops = 1u << NVFP4_OP_GROUPED_GEMM;
    return i;
  }();
  return info;
}

template <kern::quant::Bug B>
int run_grouped_buggy(int, const nvfp4_problem* p) {
  return kern::quant::run_grouped_gemm_nvfp4_out(grouped_info_of<B>(), p, B);
}

// The first failing case of the grouped engine with bug B over `cases`, and how many passed.
template <kern::quant::Bug B>
std::pair<int64_t, std::string> first_grouped_kill(int64_t cases, int64_t* passed) {
  return first_kill_of(grouped_info_of<B>(), run_grouped_buggy<B>, cases, [passed](const Problem& p, const CaseOutcome& r) {
    *passed += r.verdict == CaseOutcome::Verdict::pass && p.op == Op::grouped_gemm && p.out_type == OutType::nvfp4;
  });
}

TEST(BlockScaledOutputOp, GroupedControlPassesAndGroupZeroScaleFails) {
  int64_t passed = 0;
  const auto control = first_grouped_kill<kern::quant::Bug::none>(40, &passed);
  EXPECT_EQ(control.first, -1) << control.second;
  EXPECT_GT(passed, 20) << "grouped cases with block-scaled output were not run";
  int64_t ignored = 0;
  const auto group0 = first_grouped_kill<kern::quant::Bug::group0_global_scale>(300, &ignored);
  ASSERT_GE(group0.first, 0) << "every group encoded with group 0's global scale was not caught";
  EXPECT_NE(group0.second.find("oracle"), std::string::npos) << group0.second;
  EXPECT_NE(group0.second.find("group "), std::string::npos) << group0.second;
  const auto padding = first_grouped_kill<kern::quant::Bug::padding_not_written>(300, &ignored);
  ASSERT_GE(padding.first, 0);
  EXPECT_NE(padding.second.find("padding"), std::string::npos) << padding.second;
}

// Grouped cases draw one global scale per group, all different: otherwise a kernel that encodes
// every group with one of them would pass.
TEST(BlockScaledOutputOp, GroupedCasesDrawDistinctGlobalScales) {
  const Schedule s = schedule_of(grouped_info_of<kern::quant::Bug::none>(), "buggy_grouped_gemm_nvfp4_out", 5);
  int64_t seen = 0;
  for (int64_t i = 0; i < 100; ++i) {
    const Problem p = s.at(i).problem;
    if (p.op != Op::grouped_gemm || p.out_type != OutType::nvfp4) continue;
    ++seen;
    ASSERT_EQ(p.out_global_scale.size(), p.groups.size()) << "case " << i;
    const std::set<float> distinct(p.out_global_scale.begin(), p.out_global_scale.end());
    EXPECT_EQ(distinct.size(), p.groups.size()) << "case " << i;
  }
  EXPECT_GT(seen, 50);
}

}  // namespace
}  // namespace nvfp4
