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
#include "reference/op_table.h"  // the ops, their ABI values and shape traits

namespace nvfp4 {
namespace {

class BuiltinRefusal : public ::testing::TestWithParam<std::string> {};

// A problem and, for a grouped one, its group table and (block-scaled output) its group_out
// table (the problem points into them).
struct Call {
  nvfp4_problem p{};
  std::vector<nvfp4_group> groups;
  std::vector<nvfp4_group_out> outs;
  void point() {
    p.group = p.group_device = groups.empty() ? nullptr : groups.data();
    p.group_out = p.group_out_device = outs.empty() ? nullptr : outs.data();
  }
};

struct Variant {
  std::string what;
  std::function<void(Call&)> mutate;
};

using nvfp4::kOpTable;
using nvfp4::Op;

bool declares(const nvfp4_kernel_info& info, const nvfp4::OpInfo& o) { return (info.ops >> static_cast<uint32_t>(o.op)) & 1u; }
bool quantizer(const nvfp4_kernel_info& info) { return info.ops & nvfp4::ops_with(nvfp4::kOpQuantizes); }
Op as_op(uint32_t op) { return static_cast<Op>(op); }

// The first declared op of the table with an n of its own (more variants apply to it), else the
// first declared one.
uint32_t first_op(const nvfp4_kernel_info& info) {
  for (const bool want_n : {true, false})
    for (const nvfp4::OpInfo& o : kOpTable)
      if (declares(info, o) && !nvfp4::op_quantizes(o.op) && nvfp4::op_has_n(o.op) == want_n)
        return static_cast<uint32_t>(o.op);
  return 0;
}

uint32_t out_types_of(const nvfp4_kernel_info& info) { return info.out_types ? info.out_types : 1u << NVFP4_OUT_FP16; }

uint32_t first_bit(uint32_t bits, uint32_t first, uint32_t last) {
  for (uint32_t v = first; v <= last; ++v)
    if ((bits >> v) & 1u) return v;
  return 0;
}

// A quantize problem inside the kernel's info: m and k its multiples (k doubled), two batches,
// its first input type, format and a recipe of that format, X at `data` (zeros), Q and SFQ at
// `out`, the global scale at `gs`.
Call inside_quantize(const nvfp4_kernel_info& info, const uint8_t* data, uint8_t* out, const float* gs) {
  Call call;
  nvfp4_problem& p = call.p;
  p.op = NVFP4_OP_QUANTIZE;
  p.m = info.m_multiple;
  p.n = 1;
  p.k = 2 * static_cast<int64_t>(info.k_multiple);
  p.l = 2;
  p.sf_layout = ((info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u) ? NVFP4_SF_PERMUTED : NVFP4_SF_LINEAR;
  p.alpha = p.alpha2 = 1.0f;
  p.in_type = first_bit(info.in_types, NVFP4_IN_FP16, NVFP4_IN_FP32);
  p.q_format = first_bit(info.q_formats ? info.q_formats : 2u, NVFP4_FORMAT_NVFP4, NVFP4_FORMAT_MXFP8_E5M2);
  const bool nvfp4 = p.q_format == NVFP4_FORMAT_NVFP4;
  p.recipe = first_bit(info.recipes & (nvfp4 ? 0x1Eu : 0xE0u), NVFP4_RECIPE_TE, NVFP4_RECIPE_MX_EVEN);
  p.x = data;
  p.q = out;
  p.sfq = out + 4096;
  p.global_scale = nvfp4 ? gs : nullptr;
  return call;
}

// A problem inside the kernel's info: smallest allowed shape (doubled k), two batches (grouped:
// a nonempty group and an empty one), every tensor at `data`, C at `c`, its first output type.
Call inside(const nvfp4_kernel_info& info, const uint8_t* data, uint16_t* c) {
  static uint8_t quantized[8192];
  static const float global_scale[64] = {1.0f};
  if (quantizer(info)) return inside_quantize(info, data, quantized, global_scale);
  Call call;
  nvfp4_problem& p = call.p;
  p.op = first_op(info);
  p.m = info.m_multiple;
  p.n = nvfp4::op_n_is_one(as_op(p.op)) ? 1 : info.n_multiple;
  p.k = 2 * static_cast<int64_t>(info.k_multiple);
  p.l = nvfp4::op_is_grouped(as_op(p.op)) ? 1 : 2;
  p.sf_layout = ((info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u) ? NVFP4_SF_PERMUTED : NVFP4_SF_LINEAR;
  p.alpha = p.alpha2 = 1.0f;
  for (uint32_t t = NVFP4_OUT_FP16; t <= NVFP4_OUT_FP32; ++t)
    if ((out_types_of(info) >> t) & 1u) {
      p.out_type = t;
      break;
    }
  p.a = p.b = p.sfa = p.sfb = data;
  p.c = c;
  if (nvfp4::op_is_dual(as_op(p.op))) p.b2 = p.sfb2 = data;
  if (p.out_type == 0 && ((info.out_types >> NVFP4_OUT_NVFP4) & 1u)) {
    // Block-scaled output only: n even (Q packs two codes a byte), Q and SFQ, a declared recipe.
    p.out_type = NVFP4_OUT_NVFP4;
    p.n = 2 * static_cast<int64_t>(info.n_multiple);
    p.c = nullptr;
    p.q = quantized;
    p.sfq = quantized + 4096;
    p.global_scale = global_scale;
    p.recipe = first_bit(info.recipes, NVFP4_RECIPE_TE, NVFP4_RECIPE_TORCHAO);
  }
  if (nvfp4::op_is_grouped(as_op(p.op))) {
    call.groups = {{p.m, p.n, p.k, data, data, data, data, c, 1.0f}, {0, p.n, p.k, nullptr, nullptr, nullptr, nullptr, nullptr, 1.0f}};
    if (p.out_type == NVFP4_OUT_NVFP4) {
      // Each group's Q, SFQ and global scale in group_out; C is not written.
      call.groups[0].c = nullptr;
      call.outs = {{quantized, quantized + 4096, 1.0f}, {nullptr, nullptr, 1.0f}};
      p.q = p.sfq = nullptr;
      p.global_scale = nullptr;
    }
    p.groups = 2;
    call.point();
    if (!(info.flags & NVFP4_FLAG_GROUPS_PACKED)) p.a = p.b = p.sfa = p.sfb = nullptr, p.c = nullptr;
  }
  return call;
}

// What lies outside a quantizer's info: other ops, formats, input types, recipes and layouts
// than it declares, bad shapes, missing tensors.
std::vector<Variant> outside_quantize(const nvfp4_kernel_info& info) {
  std::vector<Variant> v;
  const uint32_t formats = info.q_formats ? info.q_formats : 2u;
  // Every other op of the table, 0, and the first value past the table.
  std::vector<uint32_t> ops;
  uint32_t past = 0;
  for (const nvfp4::OpInfo& o : kOpTable) {
    if (!declares(info, o)) ops.push_back(static_cast<uint32_t>(o.op));
    past = std::max(past, static_cast<uint32_t>(o.op) + 1);
  }
  ops.push_back(0u);
  ops.push_back(past);
  for (uint32_t op : ops)
    v.push_back({"op " + std::to_string(op), [op](Call& c) { c.p.op = op; }});
  for (uint32_t f = 0; f <= 5; ++f)
    if (!((formats >> f) & 1u)) v.push_back({"format " + std::to_string(f), [f](Call& c) { c.p.q_format = f; }});
  for (uint32_t t = 0; t <= 4; ++t)
    if (!((info.in_types >> t) & 1u)) v.push_back({"in type " + std::to_string(t), [t](Call& c) { c.p.in_type = t; }});
  for (uint32_t r = 0; r <= 8; ++r)
    if (!((info.recipes >> r) & 1u)) v.push_back({"recipe " + std::to_string(r), [r](Call& c) { c.p.recipe = r; }});
  for (uint32_t layout : {0u, uint32_t{NVFP4_SF_LINEAR}, uint32_t{NVFP4_SF_PERMUTED}, 3u})
    if (!((info.sf_layouts >> layout) & 1u))
      v.push_back({"layout " + std::to_string(layout), [layout](Call& c) { c.p.sf_layout = layout; }});
  v.push_back({"k odd (E2M1 codes)", [](Call& c) { c.p.k += 1; }});
  v.push_back({"n 2", [](Call& c) { c.p.n = 2; }});
  v.push_back({"m 0", [](Call& c) { c.p.m = 0; }});
  v.push_back({"l 0", [](Call& c) { c.p.l = 0; }});
  v.push_back({"null x", [](Call& c) { c.p.x = nullptr; }});
  v.push_back({"null q", [](Call& c) { c.p.q = nullptr; }});
  v.push_back({"null sfq", [](Call& c) { c.p.sfq = nullptr; }});
  if (formats & 2u) v.push_back({"null global scale", [](Call& c) { c.p.global_scale = nullptr; }});
  return v;
}

std::vector<Variant> outside(const nvfp4_kernel_info& info) {
  if (quantizer(info)) return outside_quantize(info);
  std::vector<Variant> v;
  const uint32_t op = first_op(info);
  const bool grouped = nvfp4::op_is_grouped(as_op(op)), packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  for (const nvfp4::OpInfo& o : kOpTable) {
    const uint32_t other = static_cast<uint32_t>(o.op);
    if (!declares(info, o) && !nvfp4::op_quantizes(o.op))
      v.push_back({"undeclared op " + std::to_string(other), [other](Call& c) {
                     c.p.op = other;
                     if (nvfp4::op_n_is_one(as_op(other))) c.p.n = 1;
                   }});
  }
  for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED})
    if (!((info.sf_layouts >> layout) & 1u))
      v.push_back({"undeclared layout " + std::to_string(layout), [layout](Call& c) { c.p.sf_layout = layout; }});
  for (uint32_t t = NVFP4_OUT_FP16; t <= NVFP4_OUT_FP32; ++t)
    if (!((out_types_of(info) >> t) & 1u))
      v.push_back({"undeclared out type " + std::to_string(t), [t](Call& c) { c.p.out_type = t; }});
  if ((out_types_of(info) >> NVFP4_OUT_NVFP4) & 1u) {
    for (uint32_t r = 0; r <= 8; ++r)
      if (!((info.recipes >> r) & 1u)) v.push_back({"recipe " + std::to_string(r), [r](Call& c) { c.p.recipe = r; }});
    v.push_back({"nvfp4 out: n odd", [](Call& c) { c.p.n += 1; }});
    if (grouped) {
      v.push_back({"nvfp4 out: n_g odd", [](Call& c) { c.groups[0].n += 1, c.groups[1].n += 1, c.p.n += 1; }});
      v.push_back({"nvfp4 out: null group_out table", [](Call& c) { c.p.group_out = c.p.group_out_device = nullptr; }});
      v.push_back({"nvfp4 out: null q_g", [](Call& c) { c.outs[0].q = nullptr; }});
      v.push_back({"nvfp4 out: null sfq_g", [](Call& c) { c.outs[0].sfq = nullptr; }});
      v.push_back({"nvfp4 out: global scale_g 0", [](Call& c) { c.outs[0].global_scale = 0.0f; }});
    } else {
      v.push_back({"nvfp4 out: null q", [](Call& c) { c.p.q = nullptr; }});
      v.push_back({"nvfp4 out: null sfq", [](Call& c) { c.p.sfq = nullptr; }});
      v.push_back({"nvfp4 out: null global scale", [](Call& c) { c.p.global_scale = nullptr; }});
    }
  } else {
    v.push_back({"out type 4", [](Call& c) { c.p.out_type = 4; }});
  }
  v.push_back({"out type 5", [](Call& c) { c.p.out_type = 5; }});
  v.push_back({"op 0", [](Call& c) { c.p.op = 0; }});
  v.push_back({"op 5", [](Call& c) { c.p.op = 5; }});
  v.push_back({"layout 0", [](Call& c) { c.p.sf_layout = 0; }});
  if (grouped) {
    // Per group: the multiples, k, alpha and pointers of each group; the totals; the table.
    if (info.m_multiple > 1) v.push_back({"m_g not a multiple", [](Call& c) { c.groups[0].m += 1, c.p.m += 1; }});
    if (info.n_multiple > 1) v.push_back({"n_g not a multiple", [](Call& c) { c.groups[0].n += 1; }});
    if (info.k_multiple > 2) v.push_back({"k_g not a multiple", [](Call& c) { c.groups[0].k += 2; }});
    if (info.flags & NVFP4_FLAG_UNIT_ALPHA) v.push_back({"alpha_g != 1", [](Call& c) { c.groups[1].alpha = 2.0f; }});
    if (info.max_groups > 0)
      v.push_back({"more groups than max_groups", [&info](Call& c) {
                     c.groups.resize(info.max_groups + 1, c.groups[1]);
                     c.p.groups = static_cast<int64_t>(c.groups.size());
                     c.point();
                   }});
    v.push_back({"groups 0", [](Call& c) { c.p.groups = 0; }});
    v.push_back({"null group table", [](Call& c) { c.p.group = c.p.group_device = nullptr; }});
    v.push_back({"k_g odd", [](Call& c) { c.groups[0].k += 1, c.p.k += 1; }});
    v.push_back({"m_g negative", [](Call& c) { c.groups[1].m = -1, c.p.m -= 1; }});
    v.push_back({"n_g 0", [](Call& c) { c.groups[1].n = 0; }});
    v.push_back({"m is not the sum of m_g", [](Call& c) { c.p.m += 1; }});
    v.push_back({"l 2", [](Call& c) { c.p.l = 2; }});
    v.push_back({"null a_g of a nonempty group", [](Call& c) { c.groups[0].a = nullptr; }});
    if (!((out_types_of(info) >> NVFP4_OUT_NVFP4) & 1u))
      v.push_back({"null c_g of a nonempty group", [](Call& c) { c.groups[0].c = nullptr; }});
    if (packed) {
      v.push_back({"packed: groups of two n", [](Call& c) { c.groups[1].n += 1, c.p.n += 1; }});
      v.push_back({"packed: null b", [](Call& c) { c.p.b = nullptr; }});
      v.push_back({"packed: null sfb", [](Call& c) { c.p.sfb = nullptr; }});
      v.push_back({"packed: null a", [](Call& c) { c.p.a = nullptr; }});
      v.push_back({"packed: null c", [](Call& c) { c.p.c = nullptr; }});
    }
    return v;
  }
  if (info.m_multiple > 1) v.push_back({"m not a multiple", [](Call& c) { c.p.m += 1; }});
  if (info.n_multiple > 1 && !nvfp4::op_n_is_one(as_op(op))) v.push_back({"n not a multiple", [](Call& c) { c.p.n += 1; }});
  if (info.k_multiple > 2) v.push_back({"k not a multiple", [](Call& c) { c.p.k += 2; }});
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) v.push_back({"alpha != 1", [](Call& c) { c.p.alpha = 2.0f; }});
  for (const nvfp4::OpInfo& o : kOpTable)
    if (declares(info, o) && nvfp4::op_n_is_one(o.op))
      v.push_back({std::string(o.name) + " with n = 2", [other = static_cast<uint32_t>(o.op)](Call& c) {
                     c.p.op = other;
                     c.p.n = 2;
                   }});
  v.push_back({"k odd", [](Call& c) { c.p.k += 1; }});
  v.push_back({"m 0", [](Call& c) { c.p.m = 0; }});
  v.push_back({"l 0", [](Call& c) { c.p.l = 0; }});
  v.push_back({"null a", [](Call& c) { c.p.a = nullptr; }});
  v.push_back({"null b", [](Call& c) { c.p.b = nullptr; }});
  v.push_back({"null sfa", [](Call& c) { c.p.sfa = nullptr; }});
  v.push_back({"null sfb", [](Call& c) { c.p.sfb = nullptr; }});
  v.push_back({"groups on a non-grouped op", [](Call& c) { c.p.groups = 1; }});
  if (nvfp4::op_is_dual(as_op(op))) {
    v.push_back({"dual: null b2", [](Call& c) { c.p.b2 = nullptr; }});
    v.push_back({"dual: null sfb2", [](Call& c) { c.p.sfb2 = nullptr; }});
    if (info.flags & NVFP4_FLAG_UNIT_ALPHA) v.push_back({"alpha2 != 1", [](Call& c) { c.p.alpha2 = 2.0f; }});
  }
  return v;
}

TEST_P(BuiltinRefusal, RefusesProblemsOutsideItsInfoTouchingNothing) {
  const Registry registry = Registry::with_builtins();
  const Kernel* k = registry.find(GetParam());
  ASSERT_NE(k, nullptr);
  // Big enough for the base problem in either layout and any output type (l = 2, rows and k a
  // little past the base); never read on refusal anyway.
  const int64_t rows = std::max(k->info->m_multiple, k->info->n_multiple) + 2;
  const int64_t kk = 2 * static_cast<int64_t>(k->info->k_multiple) + 2, kb = (kk + 15) / 16;
  std::vector<uint8_t> data(std::max<int64_t>(2 * rows * kk, 2 * ((rows + 127) / 128) * ((kb + 3) / 4) * 512), 0x38);
  std::vector<uint16_t> c(4 * rows * rows, 0x1234);
  for (const Variant& v : outside(*k->info)) {
    Call call = inside(*k->info, data.data(), c.data());
    v.mutate(call);
    EXPECT_EQ(k->run(call.p), NVFP4_UNSUPPORTED) << k->name() << ": " << v.what;
    for (uint16_t x : c) ASSERT_EQ(x, 0x1234) << k->name() << " wrote C on " << v.what;
  }
  EXPECT_EQ(k->run_fn(k->index, nullptr), NVFP4_UNSUPPORTED) << "null problem";
  if (!k->is_cuda()) {
    // The base problem itself is inside the info: a host kernel must accept it.
    const Call call = inside(*k->info, data.data(), c.data());
    EXPECT_EQ(k->run(call.p), NVFP4_OK) << k->name() << " refused a problem inside its info";
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
