// The built-in kernels: each is an ABI info plus a run function, defined in its own source file
// and listed once in kernels/builtin_list.h. Registry::with_builtins() adds them all as one
// provider ("builtin") through the same three entry points a plugin exports.
//
// Adding a built-in kernel `foo` (host or CUDA):
//   1. In its source file (e.g. kernels/cuda/foo.cu), inside namespace nvfp4::kern:
//        static int run_foo(const nvfp4_problem* p) { ... }
//        NVFP4_DEFINE_BUILTIN(foo) = {{NVFP4_ABI_VERSION, "foo", NVFP4_MEMORY_CUDA, ...}, run_foo};
//      run_foo returns NVFP4_UNSUPPORTED, touching nothing, when !problem_fits(info, p)
//      (kernels/problem_fits.h), and a CUDA kernel enqueues on (cudaStream_t)p->stream only.
//   2. Add ONE line to kernels/builtin_list.h: NVFP4_BUILTIN_CUDA(foo) (or NVFP4_BUILTIN_HOST).
//   3. Put the source file in kernels/cuda/ (a .cu) or kernels/host/ (a .cc): CMake builds every
//      such file (kernels/CMakeLists.txt), so no build list changes.
// Nothing else changes: `nvfp4check list/run`, the property tests and the fuzzers see it through
// the registry. The symbol builtin_<name> must match the list entry or the link fails, so a
// kernel cannot be listed without being defined (or defined without being reachable).
#pragma once

#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4::kern {

struct BuiltinKernel {
  nvfp4_kernel_info info;
  int (*run)(const nvfp4_problem*);
};

// Defines the (extern, so visible to builtin.cc) table entry of one built-in kernel.
#define NVFP4_DEFINE_BUILTIN(name)                               \
  extern const ::nvfp4::kern::BuiltinKernel builtin_##name; \
  const ::nvfp4::kern::BuiltinKernel builtin_##name

// The built-ins as an ABI provider, in the order of builtin_list.h (host kernels first).
int builtin_kernel_count(void);
const nvfp4_kernel_info* builtin_kernel_get(int index);
int builtin_kernel_run(int index, const nvfp4_problem* problem);

}  // namespace nvfp4::kern
