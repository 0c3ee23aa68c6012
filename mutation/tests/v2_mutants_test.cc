// The version-2 mutants (mutant_v2_host.cc) carry the bug they say, and their controls are
// honest: each runs here, through the ABI, on a problem of its class, against the exact
// reference (kernels/tests/v2_problems.h), before the suite's schedule reaches them. A mutant
// that passes here is no mutant; a control that fails would make every kill meaningless.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "kernels/tests/v2_problems.h"

namespace nvfp4 {
namespace {

const Registry& mutants() {
  static const Registry r = [] {
    Registry reg;
    reg.load_plugin(NVFP4_MUTANTS_PLUGIN);
    return reg;
  }();
  return r;
}

const Kernel& mutant(const std::string& name) {
  const Kernel* k = mutants().find(name);
  if (!k) throw std::runtime_error("no kernel " + name + " in the mutants plugin");
  return *k;
}

// What the kernel's GEMM writes in out_type, against RN_out of the exact value: "" when equal.
std::string check_gemm(const Kernel& k, uint32_t out_type, uint64_t seed) {
  std::mt19937_64 rng(seed);
  SmallProblem p = random_problem(rng, NVFP4_OP_GEMM, 33, 7, 96, 2);
  p.alpha = 0.5f;
  std::vector<uint8_t> c(p.l * p.m * p.n * out_bytes(out_type));
  nvfp4_problem abi = p.abi(p.a.data(), p.b.data(), p.sfa.data(), p.sfb.data(), NVFP4_SF_LINEAR,
                            reinterpret_cast<uint16_t*>(c.data()));
  abi.out_type = out_type;
  abi.alpha2 = 1.0f;
  if (k.run(abi) != NVFP4_OK) return "refused";
  const ExactResult exact = exact_gemm(reference_problem(p));
  const int64_t w = out_bytes(out_type);
  for (size_t e = 0; e < exact.elems.size(); ++e) {
    const std::vector<uint8_t> want = expected_word(exact_value(exact.elems[e], p.alpha), out_type);
    if (std::memcmp(&c[e * w], want.data(), w) != 0 && !(word_value(&c[e * w], out_type) == 0 && word_value(want.data(), out_type) == 0))
      return "element " + std::to_string(e) + " differs";
  }
  return "";
}

std::string check_dual_kernel(const Kernel& k, uint32_t out_type, uint64_t seed) {
  std::mt19937_64 rng(seed);
  DualCase d = random_dual(rng, 17, 9, 64, 2);
  d.g.alpha = 1.0f, d.alpha2 = d.u.alpha = 0.5f;  // alpha2 != 1, so ignoring it shows
  std::vector<uint8_t> c(d.g.l * d.g.m * d.g.n * out_bytes(out_type));
  const nvfp4_problem p = dual_abi(d, d.g.a.data(), d.g.b.data(), d.g.sfa.data(), d.g.sfb.data(), d.u.b.data(),
                                   d.u.sfb.data(), NVFP4_SF_LINEAR, c.data(), out_type);
  if (k.run(p) != NVFP4_OK) return "refused";
  return check_dual(d, c.data(), out_type);
}

std::string check_grouped_kernel(const Kernel& k, uint32_t layout, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool packed = k.groups_packed();
  GroupedCase gc = random_grouped(rng, packed, {3, 0, 130, 0, 5});
  const float alphas[5] = {1.0f, 1.0f, 0.5f, 1.0f, -2.0f};  // distinct per group
  for (size_t g = 0; g < gc.groups.size(); ++g) gc.groups[g].alpha = alphas[g];
  gc.layout = layout;
  gc.out_type = NVFP4_OUT_BF16;
  gc.lay_out(packed);
  if (k.run(gc.abi(packed)) != NVFP4_OK) return "refused";
  return check_grouped(gc, packed);
}

TEST(V2Controls, PassOnTheirClass) {
  for (uint32_t t : {NVFP4_OUT_FP16, NVFP4_OUT_BF16, NVFP4_OUT_FP32}) {
    EXPECT_EQ(check_gemm(mutant("ctl_host_out_types_unmutated"), t, 1), "") << out_name(t);
    EXPECT_EQ(check_dual_kernel(mutant("ctl_host_dual_unmutated"), t, 2), "") << out_name(t);
  }
  for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED}) {
    EXPECT_EQ(check_grouped_kernel(mutant("ctl_host_grouped_unmutated"), layout, 3), "") << layout;
    EXPECT_EQ(check_grouped_kernel(mutant("ctl_host_grouped_packed_unmutated"), layout, 3), "") << layout;
  }
}

TEST(V2Mutants, EachFailsOnAProblemOfItsClass) {
  EXPECT_NE(check_gemm(mutant("mut_host_bf16_truncated"), NVFP4_OUT_BF16, 1), "");
  EXPECT_NE(check_gemm(mutant("mut_host_fp32_through_fp16"), NVFP4_OUT_FP32, 1), "");
  for (const char* name : {"mut_host_dual_silu_fp16", "mut_host_dual_gate_up_swapped", "mut_host_dual_alpha2_ignored"})
    EXPECT_NE(check_dual_kernel(mutant(name), NVFP4_OUT_FP32, 2), "") << name;
  for (const char* name : {"mut_host_grouped_next_expert_scales", "mut_host_grouped_stops_at_empty",
                           "mut_host_grouped_empty_writes_row", "mut_host_grouped_alpha_of_first"})
    for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED})
      EXPECT_NE(check_grouped_kernel(mutant(name), layout, 3), "") << name << " layout " << layout;
  // big_host_grouped_offsets_32bit differs only once the packed B passes 2^31 bytes: the GPU's
  // large tier reaches it, a CPU test cannot. Below that it must be correct.
  EXPECT_EQ(check_grouped_kernel(mutant("big_host_grouped_offsets_32bit"), NVFP4_SF_PERMUTED, 3), "");
}

TEST(V2Mutants, OutputTypeMutantsDeclareOnlyTheTypeOfTheirBug) {
  EXPECT_EQ(mutant("mut_host_bf16_truncated").info->out_types, 1u << NVFP4_OUT_BF16);
  EXPECT_EQ(mutant("mut_host_fp32_through_fp16").info->out_types, 1u << NVFP4_OUT_FP32);
}

}  // namespace
}  // namespace nvfp4
