// A plugin (SPEC.md section 5) with deliberately broken kernels, the target of the fuzzing
// demonstration: `broken_k_tail_host` and, when built with CUDA, `broken_k_tail_cuda` (see
// broken_k_tail.h) and `faulting_tail_cuda` (correct elements, but an illegal address on a problem
// with the tail: the lost context of the shared-context test, cli/tests/shared_context_test.sh).
// A campaign against them must find the bug and leave a replayable case file:
//   scripts/fuzz-campaign.sh --build build/fuzz --plugin build/fuzz/fuzz/libnvfp4_broken_k_tail.so
//       --kernel broken_k_tail_host --seconds 60
#include "mutation/wrong/broken_k_tail.h"
#include "kernels/host/fp16_from_float.h"

#if defined(NVFP4_BROKEN_PLUGIN_CUDA)
int broken_k_tail_cuda_run(const nvfp4_problem* p);  // broken_k_tail_plugin.cu
int faulting_tail_cuda_run(const nvfp4_problem* p);
#endif

namespace {

constexpr uint32_t kOps = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
constexpr uint32_t kLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);

const nvfp4_kernel_info kInfos[] = {
    {NVFP4_ABI_VERSION, "broken_k_tail_host", NVFP4_MEMORY_HOST, kOps, kLayouts, 0, 1, 1, 1, 0},
#if defined(NVFP4_BROKEN_PLUGIN_CUDA)
    {NVFP4_ABI_VERSION, "broken_k_tail_cuda", NVFP4_MEMORY_CUDA, kOps, kLayouts, 90, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "faulting_tail_cuda", NVFP4_MEMORY_CUDA, kOps, kLayouts, 90, 1, 1, 1, 0},
#endif
};

bool valid(const nvfp4_problem* p) {
  return p && (p->op == NVFP4_OP_GEMM || (p->op == NVFP4_OP_GEMV && p->n == 1)) &&
         (p->sf_layout == NVFP4_SF_LINEAR || p->sf_layout == NVFP4_SF_PERMUTED) && p->m >= 1 &&
         p->n >= 1 && p->l >= 1 && p->k >= 2 && p->k % 2 == 0;
}

int run_host(const nvfp4_problem* p) {
  for (int64_t b = 0; b < p->l; ++b) {
    for (int64_t i = 0; i < p->m; ++i) {
      for (int64_t j = 0; j < p->n; ++j) {
        p->c[(b * p->m + i) * p->n + j] =
            nvfp4::kern::fp16_from_float(nvfp4::fuzz_demo::broken_k_tail_element(*p, b, i, j));
      }
    }
  }
  return NVFP4_OK;
}

}  // namespace

extern "C" {

int nvfp4_kernel_count(void) { return static_cast<int>(sizeof kInfos / sizeof kInfos[0]); }

const nvfp4_kernel_info* nvfp4_kernel_get(int index) {
  return index >= 0 && index < nvfp4_kernel_count() ? &kInfos[index] : nullptr;
}

int nvfp4_kernel_run(int index, const nvfp4_problem* p) {
  if (index < 0 || index >= nvfp4_kernel_count() || !valid(p)) return NVFP4_UNSUPPORTED;
#if defined(NVFP4_BROKEN_PLUGIN_CUDA)
  if (index == 1) return broken_k_tail_cuda_run(p);
  if (index == 2) return faulting_tail_cuda_run(p);
#endif
  return run_host(p);
}

}  // extern "C"
