// Every kernel the suite can check, built in or loaded from a plugin, behind the ABI of
// nvfp4_kernel_abi.h. The suite never calls a kernel except through Kernel::run.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4 {

// The size of the version-1 structs: what a plugin built against version 1 of the header has
// (its info) and may read (its problem). Everything after is version 2's (SPEC.md section 5).
constexpr size_t kAbiV1InfoBytes = offsetof(nvfp4_kernel_info, out_types);
constexpr size_t kAbiV1ProblemBytes = offsetof(nvfp4_problem, out_type);
// Likewise version 2's (everything after is version 3's).
constexpr size_t kAbiV2InfoBytes = offsetof(nvfp4_kernel_info, a_formats);
constexpr size_t kAbiV2ProblemBytes = offsetof(nvfp4_problem, a_format);

// The output types a kernel writes, as a bit set of (1u << NVFP4_OUT_*): a version-1 kernel, or
// out_types 0, writes FP16 only.
inline uint32_t declared_out_types(const nvfp4_kernel_info& info) {
  return info.abi_version < 2 || info.out_types == 0 ? (1u << NVFP4_OUT_FP16) : info.out_types;
}

// The operand formats a kernel takes for A (b = false) or B (b = true): a bit set of
// (1u << NVFP4_FORMAT_*), NVFP4 alone for kernels before version 3 and for an empty set.
inline uint32_t declared_formats(const nvfp4_kernel_info& info, bool b) {
  const uint32_t set = info.abi_version < 3 ? 0u : (b ? info.b_formats : info.a_formats);
  return set == 0 ? (1u << NVFP4_FORMAT_NVFP4) : set;
}

// Whether p is a problem version 1 of the ABI can express: GEMV or GEMM, FP16 out, no second B,
// no groups. A version-1 kernel is handed nothing else (it could not tell).
bool is_v1_problem(const nvfp4_problem& p);
// Whether p is one version 2 can express: no quantize op, no NVFP4 output, NVFP4 operands.
bool is_v2_problem(const nvfp4_problem& p);

// One kernel: its info and how to call it (the providing library's nvfp4_kernel_run + index).
struct Kernel {
  // The registry's zero-filled version-2 copy of the provider's info (a version-1 provider's
  // struct is shorter: only its version-1 fields are read). Its name still points into the
  // provider's memory.
  const nvfp4_kernel_info* info = nullptr;
  std::shared_ptr<const nvfp4_kernel_info> info_copy;  // what info points to
  int index = 0;
  int (*run_fn)(int index, const nvfp4_problem* problem) = nullptr;
  std::string origin;  // "builtin" or the plugin's path
  std::string description;  // the plugin's optional nvfp4_kernel_describe(index), else ""

  std::string name() const { return info->name; }
  // Calls the kernel. A version-1 kernel gets a copy of p's version-1 prefix in an allocation of
  // exactly that size (a read past it is a read past an allocation, which ASan reports), and a
  // problem it cannot express (!is_v1_problem) is answered NVFP4_UNSUPPORTED on its behalf.
  int run(const nvfp4_problem& p) const;
  bool is_cuda() const { return info->memory == NVFP4_MEMORY_CUDA; }
  bool supports_op(uint32_t op) const { return (info->ops >> op) & 1u; }
  bool supports_layout(uint32_t layout) const { return (info->sf_layouts >> layout) & 1u; }
  bool supports_out_type(uint32_t t) const { return (declared_out_types(*info) >> t) & 1u; }
  bool groups_packed() const { return info->flags & NVFP4_FLAG_GROUPS_PACKED; }
};

// A plugin that cannot be used: missing symbol, wrong ABI version, duplicate or invalid name.
class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Registry {
 public:
  // The built-in kernels (host always; CUDA ones when built with CUDA).
  static Registry with_builtins();

  // dlopen()s a shared library exporting the three ABI symbols and adds its kernels. Every kernel
  // is checked first (ABI version 1 or 2, [a-z0-9_]+ name of at most 64 characters unique across the
  // registry, known memory, ops, layouts and flags, no contradictory flags, min_sm 0 for host
  // kernels, nonzero multiples whose smallest problem fits in 1 GiB; for version 2 also known
  // output types): on any error nothing is
  // added and the PluginError's message names the plugin's path and what is wrong. The loading
  // runs the plugin's code (constructors, nvfp4_kernel_count/get): call it only in a process
  // that may die of it (harness/process/worker.h lists plugins in a child).
  void load_plugin(const std::string& path);  // throws PluginError
  // Adds a provider given by its three entry points (built-ins, tests) and, optionally, a
  // one-line description per kernel.
  void add_provider(int (*count)(void), const nvfp4_kernel_info* (*get)(int),
                    int (*run)(int, const nvfp4_problem*), const std::string& origin,
                    const char* (*describe)(int) = nullptr);

  // A Kernel points into its provider (a plugin's info lives in the plugin's memory): use it only
  // while the Registry it came from (or a copy of it, which shares the libraries) is alive.
  const std::vector<Kernel>& kernels() const { return kernels_; }
  const Kernel* find(const std::string& name) const;
  // The kernels named (every kernel when names is empty); throws std::invalid_argument naming
  // an unknown name and listing the known ones.
  std::vector<const Kernel*> select(const std::vector<std::string>& names) const;

 private:
  std::vector<Kernel> kernels_;
  std::vector<std::shared_ptr<void>> libraries_;  // dlopen handles, closed with the registry
};

// The compute capability (major * 10 + minor) of this process's CUDA device, 0 when there is none.
int cuda_compute_capability();
// Bytes free on the current CUDA device now (cudaMemGetInfo), 0 where there is none usable. It
// creates the process's CUDA context: ask it only in a process that will use the device.
uint64_t cuda_free_bytes();

// Whether this kernel can run on this machine; when not, *why says why (no CUDA device,
// compute capability below min_sm, built without CUDA).
bool kernel_runnable(const Kernel& k, std::string* why);

}  // namespace nvfp4
