/* Plugins for the registry tests, one source built once per variant (TEST_PLUGIN_<VARIANT>):
 * a good one, and one per way a plugin can be wrong, each of which load_plugin must reject with
 * a clear message. Their kernels are never judged: run only reports which index it was given. */
#include <stddef.h>

#include "kernels/nvfp4_kernel_abi.h"

#define BOTH_LAYOUTS ((1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED))

#if defined(TEST_PLUGIN_WRONG_ABI)
#define ABI (NVFP4_ABI_VERSION + 1)
#elif defined(TEST_PLUGIN_ABI_ZERO)
#define ABI 0
#else
#define ABI NVFP4_ABI_VERSION
#endif

#if defined(TEST_PLUGIN_DUPLICATE_NAME)
#define SECOND_NAME "test_plugin_first"
#elif defined(TEST_PLUGIN_BUILTIN_NAME)
#define SECOND_NAME "host_gemm_fp32"
#elif defined(TEST_PLUGIN_BAD_NAME)
#define SECOND_NAME "Bad-Name"
#else
#define SECOND_NAME "test_plugin_second"
#endif

#if defined(TEST_PLUGIN_BAD_MEMORY)
#define SECOND_MEMORY 7u
#else
#define SECOND_MEMORY NVFP4_MEMORY_CUDA
#endif

static const nvfp4_kernel_info kInfos[2] = {
    {ABI, "test_plugin_first", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMV, BOTH_LAYOUTS, 0, 1, 1, 1, 0},
    {ABI, SECOND_NAME, SECOND_MEMORY, 1u << NVFP4_OP_GEMM, 1u << NVFP4_SF_PERMUTED, 1000, 1, 1, 32, 0},
};

int nvfp4_kernel_count(void) { return 2; }

const nvfp4_kernel_info *nvfp4_kernel_get(int index) {
#if defined(TEST_PLUGIN_NULL_INFO)
  if (index == 1) return NULL;
#endif
  return (index == 0 || index == 1) ? &kInfos[index] : NULL;
}

#if !defined(TEST_PLUGIN_MISSING_SYMBOL)
/* Index 0 answers OK, index 1 UNSUPPORTED: lets the test see that the registry passes the index. */
int nvfp4_kernel_run(int index, const nvfp4_problem *problem) {
  (void)problem;
  return index == 0 ? NVFP4_OK : NVFP4_UNSUPPORTED;
}
#endif
