// Every built-in CUDA kernel that can run here agrees bit for bit with the host FP32 kernel on
// exact-regime problems (SPEC section 3 rule 2: any FP32 accumulation order gives RN16 exactly),
// on ragged shapes, several batches, every declared op and layout, NaN scale padding, and its
// own non-blocking stream. A quick direct check of the kernels; the runner's suite is the full one.
// Kernels with block-scaled output (out_type nvfp4: Q and SFQ, no C) are judged by rule 8 against
// the exact reference instead, and so are their mutants. Without a CUDA device every case reports
// skipped with the reason.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/builtin.h"
#include "kernels/tests/mx_grouped_dual_problems.h"
#include "kernels/tests/mx_problems.h"
#include "kernels/tests/small_problems.h"
#include "kernels/tests/v2_problems.h"
#include "reference/block_scaled_output.h"

namespace nvfp4 {
namespace {

#define ASSERT_CUDA(call)                                                                           \
  do {                                                                                            \
    const cudaError_t err_ = (call);                                                              \
    ASSERT_EQ(err_, cudaSuccess) << #call << ": " << cudaGetErrorName(err_) << ": " << cudaGetErrorString(err_); \
  } while (0)

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  cudaError_t allocate(size_t count) { return cudaMalloc(reinterpret_cast<void**>(&ptr), count * sizeof(T)); }
  ~DeviceArray() {
    if (ptr) cudaFree(ptr);
  }
};

class CudaKernel : public ::testing::TestWithParam<std::string> {};

// A format set of nvfp4_kernel_info (0: NVFP4 only) holds f.
bool declares_format(uint32_t formats, BlockFormat f) {
  return ((formats == 0 ? 1u << NVFP4_FORMAT_NVFP4 : formats) >> static_cast<uint32_t>(f)) & 1u;
}

int64_t round_up(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

// Runs kernel k on t (scales in `layout`) on a fresh non-blocking stream; C starts as a NaN poison.
void run_on_device(const Kernel& k, const SmallProblem& t, uint32_t layout, std::vector<uint16_t>* out) {
  std::vector<uint8_t> sfa = t.sfa, sfb = t.sfb;
  if (layout == NVFP4_SF_PERMUTED) {
    sfa = to_permuted(t.sfa, t.m, t.kb(), t.l);
    sfb = to_permuted(t.sfb, t.n, t.kb(), t.l);
  }
  std::vector<uint16_t> c(t.l * t.m * t.n, 0x7E55);
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DeviceArray<uint8_t> da, db, dsfa, dsfb;
  DeviceArray<uint16_t> dc;
  ASSERT_CUDA(da.allocate(t.a.size()));
  ASSERT_CUDA(db.allocate(t.b.size()));
  ASSERT_CUDA(dsfa.allocate(sfa.size()));
  ASSERT_CUDA(dsfb.allocate(sfb.size()));
  ASSERT_CUDA(dc.allocate(c.size()));
  ASSERT_CUDA(cudaMemcpyAsync(da.ptr, t.a.data(), t.a.size(), cudaMemcpyHostToDevice, stream));
  ASSERT_CUDA(cudaMemcpyAsync(db.ptr, t.b.data(), t.b.size(), cudaMemcpyHostToDevice, stream));
  ASSERT_CUDA(cudaMemcpyAsync(dsfa.ptr, sfa.data(), sfa.size(), cudaMemcpyHostToDevice, stream));
  ASSERT_CUDA(cudaMemcpyAsync(dsfb.ptr, sfb.data(), sfb.size(), cudaMemcpyHostToDevice, stream));
  ASSERT_CUDA(cudaMemcpyAsync(dc.ptr, c.data(), c.size() * 2, cudaMemcpyHostToDevice, stream));
  const nvfp4_problem p = t.abi(da.ptr, db.ptr, dsfa.ptr, dsfb.ptr, layout, dc.ptr, stream);
  ASSERT_EQ(k.run(p), NVFP4_OK) << k.name();
  ASSERT_CUDA(cudaMemcpyAsync(c.data(), dc.ptr, c.size() * 2, cudaMemcpyDeviceToHost, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  ASSERT_CUDA(cudaStreamDestroy(stream));
  *out = std::move(c);
}

TEST_P(CudaKernel, MatchesHostKernelBitForBitInTheExactRegime) {
  const Kernel& k = builtin(GetParam());
  std::string why;
  if (!kernel_runnable(k, &why)) GTEST_SKIP() << k.name() << " cannot run here: " << why;
  if (k.info->flags & NVFP4_FLAG_FP16_ACCUMULATE)
    GTEST_SKIP() << k.name() << " accumulates in FP16: not bit-exact with FP32 accumulation by design";
  if (!declares_format(k.info->a_formats, BlockFormat::nvfp4) || !declares_format(k.info->b_formats, BlockFormat::nvfp4))
    GTEST_SKIP() << k.name() << " declares no NVFP4 operands (CudaMx checks it)";
  const Kernel& host = builtin((k.info->flags & NVFP4_FLAG_SIGNED_SCALES) ? "host_gemm_fp32_e4m3" : "host_gemm_fp32");
  const uint64_t seed = 0xC0DA;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  // Ragged on purpose: one row, tails of 128-row scale tiles and of 4-block scale groups.
  const int64_t shapes[][4] = {{1, 1, 2, 1}, {7, 5, 34, 2}, {129, 9, 80, 3}, {300, 130, 1000, 1}, {64, 3, 4096, 2}};
  for (uint32_t op : {NVFP4_OP_GEMV, NVFP4_OP_GEMM}) {
    if (!k.supports_op(op)) continue;
    for (const auto& s : shapes) {
      const int64_t m = round_up(s[0], k.info->m_multiple);
      const int64_t n = op == NVFP4_OP_GEMV ? 1 : round_up(s[1], k.info->n_multiple);
      const int64_t kk = round_up(s[2], std::max<int64_t>(2, k.info->k_multiple));
      if (op == NVFP4_OP_GEMV && k.info->n_multiple > 1) continue;  // n = 1 is outside its info
      SmallProblem t = random_problem(rng, op, m, n, kk, s[3]);
      for (float alpha : {1.0f, 0.5f}) {
        if (alpha != 1.0f && (k.info->flags & NVFP4_FLAG_UNIT_ALPHA)) continue;
        t.alpha = alpha;
        for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED}) {
          if (!k.supports_layout(layout)) continue;
          std::vector<uint16_t> got;
          run_on_device(k, t, layout, &got);
          if (HasFatalFailure()) return;
          // The host kernel reads host memory with linear scales: the same problem.
          SmallProblem h = t;
          h.op = NVFP4_OP_GEMM;
          std::vector<uint16_t> expect(t.l * t.m * t.n);
          const nvfp4_problem p = h.abi(h.a.data(), h.b.data(), h.sfa.data(), h.sfb.data(), NVFP4_SF_LINEAR,
                                        expect.data());
          ASSERT_EQ(host.run(p), NVFP4_OK);
          for (size_t e = 0; e < got.size(); ++e) {
            if ((got[e] | expect[e]) == 0x8000) continue;  // +0 == -0
            ASSERT_EQ(got[e], expect[e]) << k.name() << " op " << op << " m" << m << " n" << n << " k" << kk
                                         << " l" << t.l << " alpha " << alpha << " layout " << layout
                                         << ": first difference at C index " << e << " (b " << e / (m * n) << ", i "
                                         << (e / n) % m << ", j " << e % n << ")";
          }
        }
      }
    }
  }
}

// A host buffer's device copy; pointers into the host buffer map to the same offset in the copy.
struct Mirror {
  const uint8_t* host = nullptr;
  size_t bytes = 0;
  uint8_t* device = nullptr;
  ~Mirror() {
    if (device) cudaFree(device);
  }
  cudaError_t upload(const std::vector<uint8_t>& v, cudaStream_t s) {
    host = v.data(), bytes = v.size();
    cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&device), bytes ? bytes : 1);
    return err != cudaSuccess ? err : cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, s);
  }
  template <typename T>
  T* map(T* p) const {
    if (p == nullptr) return nullptr;
    return reinterpret_cast<T*>(device + (reinterpret_cast<const uint8_t*>(p) - host));
  }
};

bool runnable_or_skip(const Kernel& k, std::string* why) { return kernel_runnable(k, why); }

// Whether the kernel writes C at all: a kernel of block-scaled output only (out_type nvfp4) writes
// Q and SFQ instead, and is checked by the suite's own tests of that output.
bool writes_c(const nvfp4_kernel_info& info) {
  const uint32_t c_types = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
  return info.out_types == 0 || (info.out_types & c_types) != 0;
}

std::vector<std::string> cuda_names_with_op(uint32_t op) {
  std::vector<std::string> names;
  for (int i = 0; i < kern::builtin_kernel_count(); ++i) {
    const nvfp4_kernel_info* info = kern::builtin_kernel_get(i);
    if (info->memory == NVFP4_MEMORY_CUDA && ((info->ops >> op) & 1u) && writes_c(*info)) names.push_back(info->name);
  }
  return names;
}

class CudaGrouped : public ::testing::TestWithParam<std::string> {};

// Every group of one launch is its own exact GEMM, bit for bit, in each declared output type and
// layout, with empty groups and m_g around the tile edges; nothing past any group's output changes.
TEST_P(CudaGrouped, EveryGroupIsItsOwnExactGemm) {
  const Kernel& k = builtin(GetParam());
  std::string why;
  if (!runnable_or_skip(k, &why)) GTEST_SKIP() << k.name() << " cannot run here: " << why;
  const bool packed = k.groups_packed();
  const uint64_t seed = 0x6A0u + packed;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const std::vector<std::vector<int64_t>> group_rows = {
      {5}, {0, 3, 0}, {1, 127, 128, 129, 0}, {0, 0, 255, 2}, {300, 0, 64, 0, 9, 0, 1}};
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const std::vector<int64_t>& ms : group_rows)
    for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED})
      for (uint32_t t : {NVFP4_OUT_FP16, NVFP4_OUT_BF16, NVFP4_OUT_FP32}) {
        if (!k.supports_out_type(t) || !k.supports_layout(layout)) continue;
        GroupedCase gc = random_grouped(rng, packed, ms);
        gc.layout = layout;
        gc.out_type = t;
        gc.lay_out(packed);
        const nvfp4_problem host_view = gc.abi(packed, stream);
        nvfp4_problem p = host_view;
        std::vector<nvfp4_group> device_table = gc.table;
        // Packed: the packed buffers' copies; separate: each group's. The table points at them.
        std::vector<Mirror> mirrors(packed ? 5 : 5 * gc.groups.size());
        if (packed) {
          const std::vector<uint8_t>* bufs[5] = {&gc.pa, &gc.pb, &gc.psfa, &gc.psfb, &gc.pc};
          for (int x = 0; x < 5; ++x) ASSERT_CUDA(mirrors[x].upload(*bufs[x], stream));
          p.a = mirrors[0].map(p.a), p.b = mirrors[1].map(p.b), p.sfa = mirrors[2].map(p.sfa), p.sfb = mirrors[3].map(p.sfb);
          p.c = mirrors[4].map(p.c);
          for (nvfp4_group& g : device_table) {
            g.a = mirrors[0].map(g.a), g.b = mirrors[1].map(g.b), g.sfa = mirrors[2].map(g.sfa), g.sfb = mirrors[3].map(g.sfb);
            g.c = mirrors[4].map(static_cast<uint8_t*>(g.c));
          }
        } else {
          for (size_t g = 0; g < gc.groups.size(); ++g) {
            const std::vector<uint8_t>* bufs[5] = {&gc.a[g], &gc.b[g], &gc.sfa[g], &gc.sfb[g], &gc.c[g]};
            for (int x = 0; x < 5; ++x) ASSERT_CUDA(mirrors[5 * g + x].upload(*bufs[x], stream));
            nvfp4_group& d = device_table[g];
            d.a = mirrors[5 * g].map(d.a), d.b = mirrors[5 * g + 1].map(d.b), d.sfa = mirrors[5 * g + 2].map(d.sfa);
            d.sfb = mirrors[5 * g + 3].map(d.sfb), d.c = mirrors[5 * g + 4].map(static_cast<uint8_t*>(d.c));
          }
        }
        // The host table (p.group) has the device pointers too: SPEC section 5 gives the same entries twice.
        nvfp4_group* table_on_device = nullptr;
        ASSERT_CUDA(cudaMalloc(reinterpret_cast<void**>(&table_on_device), sizeof(nvfp4_group) * device_table.size()));
        ASSERT_CUDA(cudaMemcpyAsync(table_on_device, device_table.data(), sizeof(nvfp4_group) * device_table.size(),
                                    cudaMemcpyHostToDevice, stream));
        p.group = device_table.data();
        p.group_device = table_on_device;
        ASSERT_EQ(k.run(p), NVFP4_OK) << k.name();
        if (packed) {
          ASSERT_CUDA(cudaMemcpyAsync(gc.pc.data(), mirrors[4].device, gc.pc.size(), cudaMemcpyDeviceToHost, stream));
        } else {
          for (size_t g = 0; g < gc.groups.size(); ++g)
            ASSERT_CUDA(cudaMemcpyAsync(gc.c[g].data(), mirrors[5 * g + 4].device, gc.c[g].size(), cudaMemcpyDeviceToHost, stream));
        }
        ASSERT_CUDA(cudaStreamSynchronize(stream));
        ASSERT_CUDA(cudaFree(table_on_device));
        EXPECT_EQ(check_grouped(gc, packed), "") << k.name() << " layout " << layout << " " << out_name(t);
      }
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Builtins, CudaGrouped, ::testing::ValuesIn(cuda_names_with_op(NVFP4_OP_GROUPED_GEMM)),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaGrouped);

class CudaDual : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaDual, SiluOfGTimesUWithinRuleSix) {
  const Kernel& k = builtin(GetParam());
  std::string why;
  if (!runnable_or_skip(k, &why)) GTEST_SKIP() << k.name() << " cannot run here: " << why;
  const uint64_t seed = 0xD0A1;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const int64_t shapes[][4] = {{1, 1, 2, 1}, {7, 5, 34, 2}, {129, 9, 80, 1}, {300, 130, 1000, 1}};
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const auto& s : shapes)
    for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED})
      for (uint32_t t : {NVFP4_OUT_FP16, NVFP4_OUT_BF16, NVFP4_OUT_FP32}) {
        if (!k.supports_out_type(t) || !k.supports_layout(layout)) continue;
        const DualCase d = random_dual(rng, s[0], s[1], s[2], s[3]);
        const SmallProblem& g = d.g;
        std::vector<uint8_t> sfa = g.sfa, sfb = g.sfb, sfb2 = d.u.sfb;
        if (layout == NVFP4_SF_PERMUTED) {
          sfa = to_permuted(g.sfa, g.m, g.kb(), g.l);
          sfb = to_permuted(g.sfb, g.n, g.kb(), g.l);
          sfb2 = to_permuted(d.u.sfb, g.n, g.kb(), g.l);
        }
        std::vector<uint8_t> c(g.l * g.m * g.n * out_bytes(t), 0xA5);
        Mirror m[7];
        const std::vector<uint8_t>* bufs[7] = {&g.a, &g.b, &sfa, &sfb, &d.u.b, &sfb2, &c};
        for (int x = 0; x < 7; ++x) ASSERT_CUDA(m[x].upload(*bufs[x], stream));
        const nvfp4_problem p =
            dual_abi(d, m[0].device, m[1].device, m[2].device, m[3].device, m[4].device, m[5].device, layout, m[6].device, t, stream);
        ASSERT_EQ(k.run(p), NVFP4_OK) << k.name();
        ASSERT_CUDA(cudaMemcpyAsync(c.data(), m[6].device, c.size(), cudaMemcpyDeviceToHost, stream));
        ASSERT_CUDA(cudaStreamSynchronize(stream));
        EXPECT_EQ(check_dual(d, c.data(), t), "") << k.name() << " layout " << layout << " " << out_name(t);
      }
  ASSERT_CUDA(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Builtins, CudaDual, ::testing::ValuesIn(cuda_names_with_op(NVFP4_OP_DUAL_GEMM)),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaDual);

// Runs kernel k on the MX problem t (scales in `layout`, C poisoned) on a non-blocking stream;
// *words gets C's words (2 or 4 bytes each).
void run_mx_on_device(const Kernel& k, const MxProblem& t, uint32_t layout, float alpha, std::vector<uint32_t>* words) {
  const int64_t count = t.l * t.m * t.n, bytes = static_cast<int64_t>(out_bytes(static_cast<uint32_t>(t.out_type)));
  std::vector<uint8_t> c(static_cast<size_t>(count * bytes), 0xA5);
  const std::vector<uint8_t> sfa = scales_in_layout(t.a, layout), sfb = scales_in_layout(t.b, layout);
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Mirror m[5];
  const std::vector<uint8_t>* bufs[5] = {&t.a.data, &t.b.data, &sfa, &sfb, &c};
  for (int x = 0; x < 5; ++x) ASSERT_CUDA(m[x].upload(*bufs[x], stream));
  nvfp4_problem p{};
  p.op = t.op == Op::gemv ? NVFP4_OP_GEMV : NVFP4_OP_GEMM;
  p.m = t.m, p.n = t.n, p.k = t.k, p.l = t.l;
  p.a = m[0].device, p.b = m[1].device, p.sfa = m[2].device, p.sfb = m[3].device;
  p.sf_layout = layout;
  p.alpha = alpha;
  p.c = reinterpret_cast<uint16_t*>(m[4].device);
  p.stream = stream;
  p.out_type = static_cast<uint32_t>(t.out_type);
  p.alpha2 = 1.0f;
  p.a_format = static_cast<uint32_t>(t.a.format), p.b_format = static_cast<uint32_t>(t.b.format);
  ASSERT_EQ(k.run(p), NVFP4_OK) << k.name();
  ASSERT_CUDA(cudaMemcpyAsync(c.data(), m[4].device, c.size(), cudaMemcpyDeviceToHost, stream));
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  ASSERT_CUDA(cudaStreamDestroy(stream));
  words->assign(static_cast<size_t>(count), 0);
  for (int64_t e = 0; e < count; ++e)
    for (int64_t y = 0; y < bytes; ++y) (*words)[e] |= uint32_t{c[e * bytes + y]} << (8 * y);
}

std::vector<std::string> cuda_mx_names() {
  std::vector<std::string> names;
  for (int i = 0; i < kern::builtin_kernel_count(); ++i) {
    const nvfp4_kernel_info* info = kern::builtin_kernel_get(i);
    const uint32_t mx = ~(1u << NVFP4_FORMAT_NVFP4);
    if (info->memory == NVFP4_MEMORY_CUDA && ((info->a_formats | info->b_formats) & mx)) names.push_back(info->name);
  }
  return names;
}

// Runs kernel k on every declared pair of operand formats and judges each output against the
// exact MX reference and SPEC's oracle (rules 1-4 with rule 9; the matrix-unit model of this
// device for a kernel that declares it): ragged shapes, batches, both layouts (permuted padding
// NaN), each declared output type, alpha 1 and 0.5, E8M0 exponents distinct along every row of
// blocks; in FP16 also the extreme scales 2^-127 against 2^127 and a NaN scale. Returns the
// configurations with a failing element, each described in *log (with `report`, as a test
// failure too).
int64_t mx_failures(const Kernel& k, bool report, std::string* log) {
  Policy policy = Policy::for_flags(k.info->flags);
  cudaDeviceProp prop{};
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  policy.device_sm = prop.major * 10 + prop.minor;
  std::mt19937_64 rng(0x3A7);
  struct Shape {
    Op op;
    int64_t m, n, k, l;
  };
  const Shape shapes[] = {{Op::gemv, 1, 1, 2, 1},   {Op::gemv, 129, 1, 80, 3}, {Op::gemm, 7, 5, 34, 2},
                          {Op::gemm, 33, 130, 520, 1}, {Op::gemm, 130, 17, 96, 2}};
  int64_t failing = 0;
  for (BlockFormat fa : kAllBlockFormats)
    for (BlockFormat fb : kAllBlockFormats) {
      if (!declares_format(k.info->a_formats, fa) || !declares_format(k.info->b_formats, fb)) continue;
      for (const Shape& s : shapes) {
        if (!k.supports_op(s.op == Op::gemv ? NVFP4_OP_GEMV : NVFP4_OP_GEMM)) continue;
        for (bool extremes : {false, true}) {
          MxProblem t = random_mx_problem(rng, fa, fb, s.op, s.m, s.n, s.k, s.l, OutType::fp16, {extremes, extremes});
          const std::vector<MxElement> exact = exact_mx(t);
          for (uint32_t out : {NVFP4_OUT_FP16, NVFP4_OUT_BF16, NVFP4_OUT_FP32}) {
            // The extremes' sums fall below FP32's normal range, where no FP32 kernel is exact.
            if (!k.supports_out_type(out) || (extremes && out != NVFP4_OUT_FP16)) continue;
            t.out_type = static_cast<OutType>(out);
            for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED})
              for (float alpha : {1.0f, 0.5f}) {
                if (!k.supports_layout(layout)) continue;
                std::vector<uint32_t> got;
                run_mx_on_device(k, t, layout, alpha, &got);
                if (::testing::Test::HasFatalFailure()) return failing + 1;
                int64_t bad = 0, first = -1;
                for (size_t e = 0; e < got.size(); ++e)
                  if (!judge_mx_element(exact[e], alpha, got[e], policy, t.out_type).ok && bad++ == 0) first = static_cast<int64_t>(e);
                if (bad == 0) continue;
                ++failing;
                std::ostringstream what;
                what << k.name() << " (" << policy.name() << ") a " << to_string(fa) << " b " << to_string(fb) << " m" << s.m
                     << " n" << s.n << " k" << s.k << " l" << s.l << " " << out_name(out) << " layout " << layout << " alpha "
                     << alpha << (extremes ? " extremes" : "") << ": " << bad << " failing, first at C index " << first
                     << " got 0x" << std::hex << got[first] << " expected 0x" << round_mx(exact[first], alpha, t.out_type)
                     << std::dec << "\n";
                *log += what.str();
                if (report) ADD_FAILURE() << what.str();
              }
          }
        }
      }
    }
  return failing;
}

class CudaMx : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaMx, EveryFormatPairPassesTheOracle) {
  const Kernel& k = builtin(GetParam());
  std::string why, log;
  if (!runnable_or_skip(k, &why)) GTEST_SKIP() << k.name() << " cannot run here: " << why;
  EXPECT_EQ(mx_failures(k, true, &log), 0);
}

// The same cases against the MX mutants (mutation/mutants/, the naive MX kernel with one decode
// bug each): the control passes, and every mutant fails some configuration, so these cases see
// each bug (a scale from the neighbouring block included, through the distinct exponents).
TEST(CudaMxMutants, ControlPassesAndEveryMutantFails) {
  Registry reg;
  reg.load_plugin(NVFP4_MUTANTS_PLUGIN);
  int mutants = 0;
  for (const Kernel& k : reg.kernels()) {
    const bool control = k.name() == "ctl_cuda_mx_unmutated";
    if (!control && k.name().rfind("mut_cuda_mx_", 0) != 0) continue;
    std::string why, log;
    if (!kernel_runnable(k, &why)) GTEST_SKIP() << k.name() << " cannot run here: " << why;
    const int64_t failing = mx_failures(k, control, &log);
    if (control) {
      EXPECT_EQ(failing, 0) << log;
    } else {
      ++mutants;
      EXPECT_GT(failing, 0) << k.name() << " passed every configuration";
      std::cout << k.name() << ": " << failing << " failing configurations; first: " << log.substr(0, log.find('\n')) << "\n";
    }
  }
  EXPECT_EQ(mutants, 7);
}

// Runs kernel k on grouped or dual problem p in device memory (the group table copied there too)
// and returns C's words, groups one after another.
std::vector<uint32_t> run_grouped_dual_on_device(const Kernel& k, const Problem& p) {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<std::unique_ptr<Mirror>> mirrors;
  MxCallBuffers call;
  bool uploaded = true;
  lay_out_mx_call(p, call, [&](std::vector<uint8_t>& v) {
    mirrors.push_back(std::make_unique<Mirror>());
    uploaded = uploaded && mirrors.back()->upload(v, stream) == cudaSuccess;
    return mirrors.back()->device;
  });
  std::vector<uint8_t> table(call.groups.size() * sizeof(nvfp4_group));
  if (!table.empty()) std::memcpy(table.data(), call.groups.data(), table.size());
  Mirror device_table;
  if (!table.empty()) {
    uploaded = uploaded && device_table.upload(table, stream) == cudaSuccess;
    call.abi.group_device = reinterpret_cast<const nvfp4_group*>(device_table.device);
  }
  call.abi.stream = stream;
  EXPECT_TRUE(uploaded);
  EXPECT_EQ(k.run(call.abi), NVFP4_OK) << k.name();
  size_t m = 0;
  for (size_t b = 0; b < call.bufs.size(); ++b, ++m)
    if (std::find(call.outputs.begin(), call.outputs.end(), b) != call.outputs.end()) {
      EXPECT_EQ(cudaMemcpyAsync(call.bufs[b].data(), mirrors[m]->device, call.bufs[b].size(), cudaMemcpyDeviceToHost, stream),
                cudaSuccess);
    }
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  return mx_call_words(p, call);
}

std::vector<std::string> cuda_mx_grouped_dual_names() {
  std::vector<std::string> names;
  for (const std::string& n : cuda_mx_names()) {
    const Kernel& k = builtin(n);
    if (k.supports_op(NVFP4_OP_GROUPED_GEMM) || k.supports_op(NVFP4_OP_DUAL_GEMM)) names.push_back(n);
  }
  return names;
}

// Every declared format pair, output type and layout of a CUDA MX grouped or dual kernel (grouped:
// its arrangement, ragged groups with an empty one) against the exact reference and the oracle.
class CudaMxGroupedDual : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaMxGroupedDual, EveryFormatPairPassesTheOracle) {
  const Kernel& k = builtin(GetParam());
  std::string why;
  if (!runnable_or_skip(k, &why)) GTEST_SKIP() << k.name() << " cannot run here: " << why;
  const bool grouped = k.supports_op(NVFP4_OP_GROUPED_GEMM), packed = k.info->flags & NVFP4_FLAG_GROUPS_PACKED;
  std::mt19937_64 rng(0x6D78);
  int configurations = 0;
  for (BlockFormat fa : kAllBlockFormats)
    for (BlockFormat fb : kAllBlockFormats) {
      if (!declares_format(k.info->a_formats, fa) || !declares_format(k.info->b_formats, fb)) continue;
      for (uint32_t out : {NVFP4_OUT_FP16, NVFP4_OUT_BF16, NVFP4_OUT_FP32})
        for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED}) {
          if (!k.supports_out_type(out) || !k.supports_layout(layout)) continue;
          const Problem p = grouped ? mx_grouped_problem(rng, fa, fb, static_cast<OutType>(out), static_cast<SfLayout>(layout), packed)
                                    : mx_dual_problem(rng, fa, fb, static_cast<OutType>(out), static_cast<SfLayout>(layout));
          const std::vector<uint32_t> got = run_grouped_dual_on_device(k, p);
          if (::testing::Test::HasFailure()) return;
          const OracleSummary s = judge_words(p, exact_gemm(p), got.data(), Policy::for_flags(k.info->flags));
          EXPECT_FALSE(s.any_failure()) << k.name() << " a " << to_string(fa) << " b " << to_string(fb) << " "
                                        << out_name(out) << " layout " << layout << ": " << s.failing
                                        << " failing, first g " << s.first_g << " b " << s.first_b << " i " << s.first_i
                                        << " j " << s.first_j;
          ++configurations;
        }
    }
  EXPECT_GT(configurations, 0);
}

INSTANTIATE_TEST_SUITE_P(Builtins, CudaMxGroupedDual, ::testing::ValuesIn(cuda_mx_grouped_dual_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaMxGroupedDual);

INSTANTIATE_TEST_SUITE_P(Builtins, CudaMx, ::testing::ValuesIn(cuda_mx_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaMx);

// ---- Block-scaled output (out_type nvfp4, SPEC section 2 and rule 8) ----

// The recipe's global scale for a unit whose largest |value| is amax, times `factor` as an
// encode scale (torchao's convention is a decode scale: divided); 1 for an all-zero unit.
float recipe_out_scale(Recipe r, float amax, float factor) {
  if (!(amax > 0)) return 1.0f;
  return r == Recipe::torchao ? amax / 2688.0f / factor : 2688.0f / amax * factor;
}

// One global scale per unit (each group) from its own amax and a factor drawn from: the recipe's
// own, block scales clamped at 448, smaller ones, a factor that is no power of two (the scale
// rounds), and scales among the E4M3 subnormals; all different, so a kernel that encodes a group
// with another group's scale writes other bytes.
void draw_out_scales(Problem& p, std::mt19937_64& rng) {
  p.out_global_scale = {1.0f};
  const ExactResult ref = exact_gemm(p);  // c32: the FP32 values the output quantizes
  const float factors[5] = {1.0f, 16.0f, 1.0f / 16, 0.75f, 0x1p-15f};
  std::vector<float> scales;
  for (const OutUnit& u : out_units(p)) {
    float amax = 0;
    for (int64_t e = 0; e < u.l * u.m * u.n; ++e) {
      const uint32_t w = ref.word(static_cast<size_t>(u.first + e));
      float v;
      std::memcpy(&v, &w, sizeof v);
      if (std::fabs(v) > amax) amax = std::fabs(v);
    }
    float g = recipe_out_scale(p.out_recipe, amax, factors[rng() % 5]);
    while (std::find(scales.begin(), scales.end(), g) != scales.end()) g *= 1.5f;
    scales.push_back(g);
  }
  p.out_global_scale = p.op == Op::grouped_gemm ? scales : std::vector<float>{scales.front()};
}

// A block-scaled output problem from the tests' exact-regime data (reference view, linear scales).
Problem out_problem(const SmallProblem& t, Op op) {
  Problem p = reference_problem(t);
  p.op = op;
  p.out_type = OutType::nvfp4;
  return p;
}
Problem grouped_out_problem(const GroupedCase& gc) {
  Problem p;
  p.op = Op::grouped_gemm;
  p.out_type = OutType::nvfp4;
  for (const SmallProblem& t : gc.groups) {
    Group g;
    g.m = t.m, g.n = t.n, g.k = t.k, g.alpha = t.alpha;
    if (t.m > 0) g.a = t.a, g.b = t.b, g.sfa = t.sfa, g.sfb = t.sfb;  // an empty group has no data
    p.groups.push_back(std::move(g));
  }
  return p;
}

std::vector<uint8_t> scales_for_kernel(const std::vector<uint8_t>& linear, int64_t rows, int64_t kb, int64_t l,
                                       SfLayout layout) {
  if (rows == 0) return {};
  return layout == SfLayout::permuted ? sf_to_permuted(linear.data(), rows, kb, l, 0x7F) : linear;
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

constexpr uint8_t kOutPoison = 0xA5;  // Q and SFQ (its padding cells too) before the call
constexpr int64_t kOutGuardBytes = 64;  // after each Q and SFQ, must stay kOutPoison

// Runs kernel k on p (scales in p.sf_layout, NaN scale padding) on a non-blocking stream; *q and
// *sfq get each unit's Q and SFQ (SFQ in the kernel's layout; an empty group's are empty).
// Returns "" or what went wrong besides the values (a failed CUDA call, an error code, a write
// past Q or SFQ).
std::string run_out_on_device(const Kernel& k, const Problem& p, std::vector<std::vector<uint8_t>>* q,
                              std::vector<std::vector<uint8_t>>* sfq) {
  std::string what;
  const auto cuda = [&what](cudaError_t err, const char* call) {
    if (err != cudaSuccess && what.empty()) what = std::string(call) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  };
  cudaStream_t stream = nullptr;
  cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::deque<Mirror> mirrors;
  const auto device = [&](const std::vector<uint8_t>& v) -> uint8_t* {
    if (v.empty()) return nullptr;
    mirrors.emplace_back();
    cuda(mirrors.back().upload(v, stream), "upload");
    return mirrors.back().device;
  };
  const std::vector<OutUnit> units = out_units(p);
  std::vector<std::vector<uint8_t>> q_host(units.size()), sfq_host(units.size());
  std::vector<uint8_t*> q_dev(units.size(), nullptr), sfq_dev(units.size(), nullptr);
  for (size_t g = 0; g < units.size(); ++g) {
    if (units[g].m == 0) continue;
    q_host[g].assign(static_cast<size_t>(units[g].q_bytes() + kOutGuardBytes), kOutPoison);
    sfq_host[g].assign(static_cast<size_t>(units[g].sfq_bytes(p.sf_layout) + kOutGuardBytes), kOutPoison);
    q_dev[g] = device(q_host[g]), sfq_dev[g] = device(sfq_host[g]);
  }
  nvfp4_problem a{};
  a.sf_layout = static_cast<uint32_t>(p.sf_layout);
  a.alpha = p.alpha, a.alpha2 = p.alpha2;
  a.stream = stream;
  a.out_type = NVFP4_OUT_NVFP4;
  a.a_format = a.b_format = a.q_format = NVFP4_FORMAT_NVFP4;
  a.recipe = static_cast<uint32_t>(p.out_recipe);
  std::vector<nvfp4_group> table;
  std::vector<nvfp4_group_out> outs;
  if (p.op == Op::grouped_gemm) {
    a.op = NVFP4_OP_GROUPED_GEMM;
    a.l = 1;
    for (size_t g = 0; g < p.groups.size(); ++g) {
      const Group& s = p.groups[g];
      nvfp4_group t{};
      t.m = s.m, t.n = s.n, t.k = s.k, t.alpha = s.alpha;
      t.a = device(s.a), t.b = device(s.b);
      t.sfa = device(scales_for_kernel(s.sfa, s.m, s.kb(p.a_format), 1, p.sf_layout));
      t.sfb = device(scales_for_kernel(s.sfb, s.m == 0 ? 0 : s.n, s.kb(p.b_format), 1, p.sf_layout));
      table.push_back(t);
      outs.push_back({q_dev[g], sfq_dev[g], units[g].global_scale});
      a.m += s.m, a.n = std::max(a.n, s.n), a.k = std::max(a.k, s.k);
    }
    a.groups = static_cast<int64_t>(table.size());
    a.group = table.data(), a.group_out = outs.data();  // the host copies hold device pointers
    a.group_device = reinterpret_cast<const nvfp4_group*>(device(bytes_of(table)));
    a.group_out_device = reinterpret_cast<const nvfp4_group_out*>(device(bytes_of(outs)));
  } else {
    a.op = p.op == Op::dual_gemm ? NVFP4_OP_DUAL_GEMM : NVFP4_OP_GEMM;
    a.m = p.m, a.n = p.n, a.k = p.k, a.l = p.l;
    a.a = device(p.a), a.b = device(p.b);
    a.sfa = device(scales_for_kernel(p.sfa, p.m, p.kb(), p.l, p.sf_layout));
    a.sfb = device(scales_for_kernel(p.sfb, p.n, p.kb(), p.l, p.sf_layout));
    if (p.op == Op::dual_gemm) a.b2 = device(p.b2), a.sfb2 = device(scales_for_kernel(p.sfb2, p.n, p.kb(), p.l, p.sf_layout));
    a.global_scale = reinterpret_cast<const float*>(device(bytes_of(std::vector<float>{units[0].global_scale})));
    a.q = q_dev[0], a.sfq = sfq_dev[0];
  }
  const int rc = what.empty() ? k.run(a) : NVFP4_ERROR;
  if (rc != NVFP4_OK && what.empty()) what = k.name() + " returned " + std::to_string(rc);
  for (size_t g = 0; g < units.size() && rc == NVFP4_OK; ++g) {
    if (units[g].m == 0) continue;
    cuda(cudaMemcpyAsync(q_host[g].data(), q_dev[g], q_host[g].size(), cudaMemcpyDeviceToHost, stream), "copy of Q");
    cuda(cudaMemcpyAsync(sfq_host[g].data(), sfq_dev[g], sfq_host[g].size(), cudaMemcpyDeviceToHost, stream), "copy of SFQ");
  }
  cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (the kernel's work)");
  mirrors.clear();
  cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  q->assign(units.size(), {}), sfq->assign(units.size(), {});
  for (size_t g = 0; g < units.size() && what.empty(); ++g) {
    if (units[g].m == 0) continue;
    for (std::vector<uint8_t>* buf : {&q_host[g], &sfq_host[g]}) {
      const size_t end = buf->size() - kOutGuardBytes;
      for (size_t x = end; x < buf->size(); ++x)
        if ((*buf)[x] != kOutPoison && what.empty())
          what = "a write " + std::to_string(x - end) + " byte(s) past " + (buf == &q_host[g] ? "Q" : "SFQ") +
                 (p.op == Op::grouped_gemm ? " of group " + std::to_string(g) : std::string());
      buf->resize(end);
    }
    (*q)[g] = std::move(q_host[g]), (*sfq)[g] = std::move(sfq_host[g]);
  }
  return what;
}

// "" when every unit's Q and SFQ are what rule 8 allows (0x00 in the permuted SFQ's padding),
// else the first failure in the suite's words.
std::string judge_out(const Problem& p, const ExactResult& ref, const std::vector<std::vector<uint8_t>>& q,
                      const std::vector<std::vector<uint8_t>>& sfq) {
  const std::vector<OutUnit> units = out_units(p);
  for (size_t g = 0; g < units.size(); ++g) {
    if (units[g].m == 0) continue;
    const BlockOutJudgement j = judge_block_scaled(p, ref, Policy{}, units[g], q[g], sfq[g], 0x00);
    if (!j.pass()) return block_scaled_failure_text(p, ref, units[g], j, q[g], sfq[g], 0x00);
  }
  return "";
}

// Runs kernel k on block-scaled output problems of every op it declares (ragged GEMM and dual
// shapes with batches; grouped with empty groups and m_g around the 128-row tiles, n_g even and
// not of 16), every recipe it declares, both layouts, global scales drawn by draw_out_scales, and
// judges them against the exact reference by rule 8. Returns the failing configurations, each
// described in *log (with `report`, as a test failure too).
int64_t out_failures(const Kernel& k, bool report, std::string* log) {
  const uint64_t seed = 0xB50C;
  std::mt19937_64 rng(seed);
  *log += "seed " + std::to_string(seed) + "\n";
  std::vector<Problem> problems;
  const int64_t shapes[][4] = {{1, 2, 2, 1}, {7, 34, 80, 2}, {129, 48, 64, 1}, {300, 130, 520, 1}};
  for (const Op op : {Op::gemm, Op::dual_gemm})
    for (const auto& s : shapes) {
      if (!k.supports_op(static_cast<uint32_t>(op))) continue;
      if (op == Op::gemm) {
        problems.push_back(out_problem(random_problem(rng, NVFP4_OP_GEMM, s[0], s[1], s[2], s[3]), op));
        continue;
      }
      const DualCase d = random_dual(rng, s[0], s[1], s[2], s[3]);
      Problem p = out_problem(d.g, op);
      p.b2 = d.u.b, p.sfb2 = d.u.sfb, p.alpha2 = d.alpha2;
      problems.push_back(std::move(p));
    }
  if (k.supports_op(NVFP4_OP_GROUPED_GEMM)) {
    const std::vector<std::vector<int64_t>> group_rows = {{5}, {0, 3, 0}, {1, 127, 128, 129, 0}, {300, 0, 64, 0, 9, 0, 1}};
    for (const std::vector<int64_t>& ms : group_rows) {
      GroupedCase gc = random_grouped(rng, false, ms);
      for (SmallProblem& t : gc.groups) {
        if (t.n % 2 == 0) continue;
        t.n += 1;  // Q packs two codes a byte
        t.b.resize(static_cast<size_t>(t.n * t.k / 2));
        t.sfb.resize(static_cast<size_t>(t.n * t.kb()), 0x38);
        for (size_t x = t.b.size() - t.k / 2; x < t.b.size(); ++x) t.b[x] = static_cast<uint8_t>(rng());
      }
      problems.push_back(grouped_out_problem(gc));
    }
  }
  int64_t failing = 0;
  for (Problem& p : problems)
    for (const Recipe r : {Recipe::te, Recipe::ref, Recipe::fast, Recipe::torchao})
      for (const SfLayout layout : {SfLayout::linear, SfLayout::permuted}) {
        if (!((k.info->recipes >> static_cast<uint32_t>(r)) & 1u) || !k.supports_layout(static_cast<uint32_t>(layout)))
          continue;
        p.out_recipe = r;
        p.sf_layout = layout;
        draw_out_scales(p, rng);
        const ExactResult ref = exact_gemm(p);
        std::vector<std::vector<uint8_t>> q, sfq;
        std::string wrong = run_out_on_device(k, p, &q, &sfq);
        if (wrong.empty()) wrong = judge_out(p, ref, q, sfq);
        if (wrong.empty()) continue;
        ++failing;
        std::ostringstream what;
        what << k.name() << " " << to_string(p.op) << " "
             << (p.op == Op::grouped_gemm ? std::to_string(p.groups.size()) + " groups"
                                          : "m" + std::to_string(p.m) + " n" + std::to_string(p.n) + " k" +
                                                std::to_string(p.k) + " l" + std::to_string(p.l))
             << " recipe " << to_string(r) << " layout " << to_string(layout) << ": " << wrong << "\n";
        *log += what.str();
        if (report) ADD_FAILURE() << what.str();
      }
  return failing;
}

std::vector<std::string> cuda_out_names() {
  std::vector<std::string> names;
  for (int i = 0; i < kern::builtin_kernel_count(); ++i) {
    const nvfp4_kernel_info* info = kern::builtin_kernel_get(i);
    if (info->memory == NVFP4_MEMORY_CUDA && ((info->out_types >> NVFP4_OUT_NVFP4) & 1u)) names.push_back(info->name);
  }
  return names;
}

class CudaBlockScaledOutput : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaBlockScaledOutput, EveryOpRecipeAndLayoutPassesRuleEight) {
  const Kernel& k = builtin(GetParam());
  std::string why, log;
  if (!runnable_or_skip(k, &why)) GTEST_SKIP() << k.name() << " cannot run here: " << why;
  EXPECT_EQ(out_failures(k, true, &log), 0);
  std::cout << log.substr(0, log.find('\n')) << "\n";
}

INSTANTIATE_TEST_SUITE_P(Builtins, CudaBlockScaledOutput, ::testing::ValuesIn(cuda_out_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaBlockScaledOutput);

// The same cases against the block-scaled output mutants (the CUDA kernels above with one
// quantizer bug each, mutation/mutants/mutant_out_cuda.cu): the control passes and every mutant
// fails some configuration.
TEST(CudaBlockScaledOutputMutants, ControlPassesAndEveryMutantFails) {
  Registry reg;
  reg.load_plugin(NVFP4_MUTANTS_PLUGIN);
  int mutants = 0, controls = 0;
  for (const Kernel& k : reg.kernels()) {
    const bool control = k.name() == "ctl_cuda_out_unmutated";
    if (!control && k.name().rfind("mut_cuda_out_", 0) != 0) continue;
    std::string why, log;
    if (!kernel_runnable(k, &why)) GTEST_SKIP() << k.name() << " cannot run here: " << why;
    const int64_t failing = out_failures(k, control, &log);
    if (control) {
      ++controls;
      EXPECT_EQ(failing, 0) << log;
    } else {
      ++mutants;
      EXPECT_GT(failing, 0) << k.name() << " passed every configuration";
      const size_t first = log.find('\n') + 1;
      std::cout << k.name() << ": " << failing << " failing configurations; first: "
                << log.substr(first, log.find('\n', first) - first) << "\n";
    }
  }
  EXPECT_EQ(controls, 1);
  EXPECT_EQ(mutants, 4);
}

std::vector<std::string> cuda_builtin_names() {
  std::vector<std::string> names;
  for (int i = 0; i < kern::builtin_kernel_count(); ++i)
    if (kern::builtin_kernel_get(i)->memory == NVFP4_MEMORY_CUDA && writes_c(*kern::builtin_kernel_get(i)))
      names.push_back(kern::builtin_kernel_get(i)->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Builtins, CudaKernel, ::testing::ValuesIn(cuda_builtin_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaKernel);

}  // namespace
}  // namespace nvfp4
