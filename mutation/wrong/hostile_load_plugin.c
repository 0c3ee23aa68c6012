/* Plugins that attack the process that loads them, or declare what the ABI forbids, for the
 * isolation tests of `nvfp4check list`, `run` and `replay`: loading happens in a child, so each
 * must end in exit code 2 with a message naming the plugin, never in an exit 0 that checked
 * nothing, a crash of the suite or a hang. Built once per HOSTILE value:
 *   1  a constructor that calls exit(0)           2  nvfp4_kernel_count segfaults
 *   3  nvfp4_kernel_get hangs                     4  shape multiples of 2^32 - 1
 *   5  a host kernel declaring min_sm 90          6  EXACT together with NONDETERMINISTIC
 *   7  a name of a million characters */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/nvfp4_kernel_abi.h"

#ifndef HOSTILE
#error "HOSTILE must be defined (1-7)"
#endif

#define BOTH_OPS ((1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM))
#define BOTH_LAYOUTS ((1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED))

static char g_long_name[1 << 20];

static nvfp4_kernel_info g_info = {NVFP4_ABI_VERSION, "hostile_load_host", NVFP4_MEMORY_HOST, BOTH_OPS,
                                   BOTH_LAYOUTS, 0, 1, 1, 1, 0};

__attribute__((constructor)) static void on_load(void) {
#if HOSTILE == 1
  exit(0);
#elif HOSTILE == 4
  g_info.m_multiple = g_info.n_multiple = g_info.k_multiple = 0xFFFFFFFFu;
#elif HOSTILE == 5
  g_info.min_sm = 90;
#elif HOSTILE == 6
  g_info.flags = NVFP4_FLAG_EXACT | NVFP4_FLAG_NONDETERMINISTIC;
#elif HOSTILE == 7
  memset(g_long_name, 'a', sizeof g_long_name - 1);
  g_info.name = g_long_name;
#endif
}

int nvfp4_kernel_count(void) {
#if HOSTILE == 2
  raise(SIGSEGV);
#endif
  return 1;
}

const nvfp4_kernel_info *nvfp4_kernel_get(int index) {
#if HOSTILE == 3
  for (;;) pause();
#endif
  return index == 0 ? &g_info : 0;
}

int nvfp4_kernel_run(int index, const nvfp4_problem *problem) {
  (void)index;
  (void)problem;
  return NVFP4_ERROR;
}
