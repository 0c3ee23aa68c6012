/* A plugin whose kernels kill or hang their process, for the isolation test of `nvfp4check run`:
 * the suite must report "crash" / "timeout" with a saved case, and go on with the next kernel. */
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#include "kernels/nvfp4_kernel_abi.h"

#define BOTH_OPS ((1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM))
#define BOTH_LAYOUTS ((1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED))

static const nvfp4_kernel_info kInfos[2] = {
    {NVFP4_ABI_VERSION, "segfaults_host", NVFP4_MEMORY_HOST, BOTH_OPS, BOTH_LAYOUTS, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "hangs_host", NVFP4_MEMORY_HOST, BOTH_OPS, BOTH_LAYOUTS, 0, 1, 1, 1, 0},
};

int nvfp4_kernel_count(void) { return 2; }

const nvfp4_kernel_info *nvfp4_kernel_get(int index) {
  return (index == 0 || index == 1) ? &kInfos[index] : 0;
}

int nvfp4_kernel_run(int index, const nvfp4_problem *problem) {
  (void)problem;
  if (index == 0) {
    /* A write through a wild pointer, as an indexing bug far out of bounds would do. */
    raise(SIGSEGV);
    return NVFP4_ERROR;
  }
  for (;;) pause();
}
