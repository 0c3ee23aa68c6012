// Every built-in CUDA kernel that can run here agrees bit for bit with the host FP32 kernel on
// exact-regime problems (SPEC section 3 rule 2: any FP32 accumulation order gives RN16 exactly),
// on ragged shapes, several batches, every declared op and layout, NaN scale padding, and its
// own non-blocking stream. A quick direct check of the kernels; the runner's suite is the full one.
// Without a CUDA device every case reports skipped with the reason.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "kernels/builtin.h"
#include "kernels/tests/small_problems.h"

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

std::vector<std::string> cuda_builtin_names() {
  std::vector<std::string> names;
  for (int i = 0; i < kern::builtin_kernel_count(); ++i)
    if (kern::builtin_kernel_get(i)->memory == NVFP4_MEMORY_CUDA) names.push_back(kern::builtin_kernel_get(i)->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Builtins, CudaKernel, ::testing::ValuesIn(cuda_builtin_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaKernel);

}  // namespace
}  // namespace nvfp4
