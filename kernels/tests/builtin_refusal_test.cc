// Every built-in kernel, host or CUDA, refuses each problem just outside its declared info with
// NVFP4_UNSUPPORTED and leaves C untouched. Refusal must come before any device work, so this
// runs everywhere (CUDA kernels are handed host memory they must never touch). The variants are
// derived from each kernel's info, so a new built-in is covered without new test code.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "kernels/builtin.h"
#include "kernels/registry.h"

namespace nvfp4 {
namespace {

class BuiltinRefusal : public ::testing::TestWithParam<std::string> {};

struct Variant {
  std::string what;
  std::function<void(nvfp4_problem&)> mutate;
};

// A problem inside the kernel's info: smallest allowed shape (doubled k), two batches.
nvfp4_problem inside(const nvfp4_kernel_info& info) {
  nvfp4_problem p{};
  p.op = ((info.ops >> NVFP4_OP_GEMM) & 1u) ? NVFP4_OP_GEMM : NVFP4_OP_GEMV;
  p.m = info.m_multiple;
  p.n = p.op == NVFP4_OP_GEMV ? 1 : info.n_multiple;
  p.k = 2 * static_cast<int64_t>(info.k_multiple);
  p.l = 2;
  p.sf_layout = ((info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u) ? NVFP4_SF_PERMUTED : NVFP4_SF_LINEAR;
  p.alpha = 1.0f;
  return p;
}

std::vector<Variant> outside(const nvfp4_kernel_info& info) {
  std::vector<Variant> v;
  for (uint32_t op : {NVFP4_OP_GEMV, NVFP4_OP_GEMM})
    if (!((info.ops >> op) & 1u))
      v.push_back({"undeclared op " + std::to_string(op), [op](nvfp4_problem& p) {
                     p.op = op;
                     if (op == NVFP4_OP_GEMV) p.n = 1;
                   }});
  for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED})
    if (!((info.sf_layouts >> layout) & 1u))
      v.push_back({"undeclared layout " + std::to_string(layout), [layout](nvfp4_problem& p) { p.sf_layout = layout; }});
  if (info.m_multiple > 1) v.push_back({"m not a multiple", [](nvfp4_problem& p) { p.m += 1; }});
  if (info.n_multiple > 1 && ((info.ops >> NVFP4_OP_GEMM) & 1u))
    v.push_back({"n not a multiple", [](nvfp4_problem& p) { p.n += 1; }});
  if (info.k_multiple > 2) v.push_back({"k not a multiple", [](nvfp4_problem& p) { p.k += 2; }});
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) v.push_back({"alpha != 1", [](nvfp4_problem& p) { p.alpha = 2.0f; }});
  if ((info.ops >> NVFP4_OP_GEMV) & 1u)
    v.push_back({"gemv with n = 2", [](nvfp4_problem& p) {
                   p.op = NVFP4_OP_GEMV;
                   p.n = 2;
                 }});
  v.push_back({"op 0", [](nvfp4_problem& p) { p.op = 0; }});
  v.push_back({"layout 0", [](nvfp4_problem& p) { p.sf_layout = 0; }});
  v.push_back({"k odd", [](nvfp4_problem& p) { p.k += 1; }});
  v.push_back({"m 0", [](nvfp4_problem& p) { p.m = 0; }});
  v.push_back({"l 0", [](nvfp4_problem& p) { p.l = 0; }});
  v.push_back({"null a", [](nvfp4_problem& p) { p.a = nullptr; }});
  v.push_back({"null b", [](nvfp4_problem& p) { p.b = nullptr; }});
  v.push_back({"null sfa", [](nvfp4_problem& p) { p.sfa = nullptr; }});
  v.push_back({"null sfb", [](nvfp4_problem& p) { p.sfb = nullptr; }});
  return v;
}

TEST_P(BuiltinRefusal, RefusesProblemsOutsideItsInfoTouchingNothing) {
  const Registry registry = Registry::with_builtins();
  const Kernel* k = registry.find(GetParam());
  ASSERT_NE(k, nullptr);
  const nvfp4_problem base = inside(*k->info);
  // Big enough for the base problem in either layout; never read on refusal anyway.
  const int64_t rows = std::max(base.m, base.n) + 1, kb = (base.k + 2 + 15) / 16;
  std::vector<uint8_t> a(base.l * rows * (base.k + 2), 0x11), sf(base.l * ((rows + 127) / 128) * ((kb + 3) / 4) * 512, 0x38);
  std::vector<uint16_t> c(base.l * rows * rows, 0x1234);
  for (const Variant& v : outside(*k->info)) {
    nvfp4_problem p = base;
    p.a = p.b = a.data();
    p.sfa = p.sfb = sf.data();
    p.c = c.data();
    v.mutate(p);
    EXPECT_EQ(k->run(p), NVFP4_UNSUPPORTED) << k->name() << ": " << v.what;
    for (uint16_t x : c) ASSERT_EQ(x, 0x1234) << k->name() << " wrote C on " << v.what;
  }
  EXPECT_EQ(k->run_fn(k->index, nullptr), NVFP4_UNSUPPORTED) << "null problem";
  if (!k->is_cuda()) {
    // The base problem itself is inside the info: a host kernel must accept it.
    nvfp4_problem p = base;
    p.a = p.b = a.data();
    p.sfa = p.sfb = sf.data();
    p.c = c.data();
    EXPECT_EQ(k->run(p), NVFP4_OK) << k->name() << " refused a problem inside its info";
  }
}

std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (int i = 0; i < kern::builtin_kernel_count(); ++i) names.push_back(kern::builtin_kernel_get(i)->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Builtins, BuiltinRefusal, ::testing::ValuesIn(builtin_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace nvfp4
