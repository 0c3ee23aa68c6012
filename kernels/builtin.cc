// The table of built-in kernels, built from kernels/builtin_list.h, exposed through the same
// three entry points (count, get, run) that a plugin exports.
#include "kernels/builtin.h"

namespace nvfp4::kern {

#define NVFP4_BUILTIN_HOST(name) extern const BuiltinKernel builtin_##name;
#if defined(NVFP4_HAVE_CUDA)
#define NVFP4_BUILTIN_CUDA(name) extern const BuiltinKernel builtin_##name;
#else
#define NVFP4_BUILTIN_CUDA(name)
#endif
#include "kernels/builtin_list.h"
#undef NVFP4_BUILTIN_HOST
#undef NVFP4_BUILTIN_CUDA

namespace {

#define NVFP4_BUILTIN_HOST(name) &builtin_##name,
#if defined(NVFP4_HAVE_CUDA)
#define NVFP4_BUILTIN_CUDA(name) &builtin_##name,
#else
#define NVFP4_BUILTIN_CUDA(name)
#endif
const BuiltinKernel* const kBuiltins[] = {
#include "kernels/builtin_list.h"
};
#undef NVFP4_BUILTIN_HOST
#undef NVFP4_BUILTIN_CUDA

constexpr int kBuiltinCount = static_cast<int>(sizeof kBuiltins / sizeof kBuiltins[0]);

}  // namespace

int builtin_kernel_count(void) { return kBuiltinCount; }

const nvfp4_kernel_info* builtin_kernel_get(int index) {
  if (index < 0 || index >= kBuiltinCount) return nullptr;
  return &kBuiltins[index]->info;
}

int builtin_kernel_run(int index, const nvfp4_problem* problem) {
  // An index the registry never hands out: a caller bug, reported as an error, not a crash.
  if (index < 0 || index >= kBuiltinCount) return NVFP4_ERROR;
  return kBuiltins[index]->run(problem);
}

}  // namespace nvfp4::kern
