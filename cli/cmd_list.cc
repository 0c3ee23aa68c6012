// `nvfp4check list`: every kernel known (built in or from plugins), its declared info and whether
// it can run on this machine.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "kernels/registry.h"

namespace nvfp4::cli {
namespace {

std::string bit_names(uint32_t bits, std::initializer_list<std::pair<uint32_t, const char*>> names) {
  std::string s;
  for (const auto& [bit, name] : names)
    if (bits & bit) s += (s.empty() ? "" : ",") + std::string(name);
  return s.empty() ? "-" : s;
}

std::string flag_names(uint32_t flags) {
  return bit_names(flags, {{NVFP4_FLAG_SIGNED_SCALES, "signed-scales"},
                           {NVFP4_FLAG_NONDETERMINISTIC, "nondeterministic"},
                           {NVFP4_FLAG_FP16_ACCUMULATE, "fp16-accumulate"},
                           {NVFP4_FLAG_SATURATES, "saturates"},
                           {NVFP4_FLAG_EXACT, "exact"},
                           {NVFP4_FLAG_UNIT_ALPHA, "unit-alpha"}});
}

int list_main(const std::vector<std::string>& plugins) {
  Registry registry = Registry::with_builtins();
  for (const std::string& plugin : plugins) registry.load_plugin(plugin);
  size_t w = 6;
  for (const Kernel& k : registry.kernels()) w = std::max(w, k.name().size());
  fmt::print("{:<{}}  {:<6}  {:<9}  {:<15}  {:>6}  {:<11}  {:<18}  {}\n", "kernel", w, "memory", "ops", "sf layouts",
             "min_sm", "m/n/k mult", "flags", "runnable here");
  for (const Kernel& k : registry.kernels()) {
    const nvfp4_kernel_info& info = *k.info;
    std::string why;
    const bool runnable = kernel_runnable(k, &why);
    fmt::print("{:<{}}  {:<6}  {:<9}  {:<15}  {:>6}  {:<11}  {:<18}  {}\n", k.name(), w,
               info.memory == NVFP4_MEMORY_CUDA ? "cuda" : info.memory == NVFP4_MEMORY_HOST ? "host" : "?",
               bit_names(info.ops, {{1u << NVFP4_OP_GEMV, "gemv"}, {1u << NVFP4_OP_GEMM, "gemm"}}),
               bit_names(info.sf_layouts, {{1u << NVFP4_SF_LINEAR, "linear"}, {1u << NVFP4_SF_PERMUTED, "permuted"}}),
               info.min_sm, fmt::format("{}/{}/{}", info.m_multiple, info.n_multiple, info.k_multiple),
               flag_names(info.flags), runnable ? "yes" : "no: " + why);
    if (k.origin != "builtin") fmt::print("{:<{}}  from {}\n", "", w, k.origin);
  }
  return 0;
}

}  // namespace

void add_list_command(CLI::App& app, int& exit_code) {
  auto plugins = std::make_shared<std::vector<std::string>>();
  CLI::App* list = app.add_subcommand("list", "Every kernel known, its declared info and whether it can run here");
  list->add_option("--plugin", *plugins, "Shared library exporting the nvfp4 kernel ABI (repeatable)");
  list->callback([plugins, &exit_code] {
    try {
      exit_code = list_main(*plugins);
    } catch (const std::exception& e) {
      // A plugin that cannot be used: missing symbol, wrong ABI version, duplicate name.
      fmt::print(stderr, "nvfp4check list: {}\n", e.what());
      exit_code = 2;
    }
  });
}

}  // namespace nvfp4::cli
