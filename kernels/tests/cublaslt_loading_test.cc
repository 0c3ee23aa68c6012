// cuBLASLt is half a gigabyte of shared library whose loading costs about half a second of CPU
// (some 24,000 page faults) in every process that links it: the runner, the kernel's process it
// starts for each kernel, and every test binary. Only one built-in kernel calls it, so the
// library is loaded when that kernel first runs, never when a process merely starts.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <link.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/registry.h"

namespace nvfp4 {
namespace {

int find_cublaslt(dl_phdr_info* info, size_t, void* found) {
  if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "libcublasLt") != nullptr)
    *static_cast<std::string*>(found) = info->dlpi_name;
  return 0;
}

std::string loaded_cublaslt() {
  std::string found;
  dl_iterate_phdr(find_cublaslt, &found);
  return found;
}

TEST(CublasLtLoading, NotLoadedByAProcessThatOnlyListsTheKernels) {
  const Registry registry = Registry::with_builtins();
  ASSERT_NE(registry.find("cublaslt_nvfp4"), nullptr);
  EXPECT_EQ(loaded_cublaslt(), "") << "libcublasLt is loaded before any kernel ran";
}

// Without a device the kernel loads the library, finds no device and says so (with one, a problem
// it declares would run on the device: that is cuda_kernels_test's).
TEST(CublasLtLoading, LoadedWhenTheKernelRuns) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) GTEST_SKIP() << "a CUDA device is present";
  const Registry registry = Registry::with_builtins();
  const Kernel* kernel = registry.find("cublaslt_nvfp4");
  ASSERT_NE(kernel, nullptr);
  std::vector<uint8_t> bytes(1 << 16);
  std::vector<uint16_t> c(32 * 32);
  nvfp4_problem p{};
  p.op = NVFP4_OP_GEMM;
  p.m = p.n = p.k = 32;
  p.l = 1;
  p.a = p.b = p.sfa = p.sfb = bytes.data();
  p.sf_layout = NVFP4_SF_PERMUTED;
  p.alpha = 1.0f;
  p.c = c.data();
  p.out_type = NVFP4_OUT_FP16;
  EXPECT_EQ(kernel->run(p), NVFP4_ERROR);
  EXPECT_NE(loaded_cublaslt(), "");
}

}  // namespace
}  // namespace nvfp4
