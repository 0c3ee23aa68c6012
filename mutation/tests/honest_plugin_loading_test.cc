// The honest plugin holds one kernel that calls cuBLAS and many that do not. cuBLAS (and the
// cuBLASLt it needs) is over half a gigabyte whose loading costs about half a second of CPU, paid
// by every kernel process that loads the plugin if the plugin links it: `mutants` starts one
// such process per honest kernel. So loading the plugin must not load cuBLAS.
#include <gtest/gtest.h>

#include <link.h>

#include <cstring>
#include <string>

#include "kernels/registry.h"

namespace nvfp4 {
namespace {

int find_cublas(dl_phdr_info* info, size_t, void* found) {
  if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "libcublas") != nullptr)
    *static_cast<std::string*>(found) = info->dlpi_name;
  return 0;
}

TEST(HonestPluginLoading, LoadsWithoutCublas) {
  Registry registry = Registry::with_builtins();
  registry.load_plugin(NVFP4_HONEST_PLUGIN);
  ASSERT_NE(registry.find("honest_host_forward"), nullptr);
  std::string found;
  dl_iterate_phdr(find_cublas, &found);
  EXPECT_EQ(found, "") << "loading the honest plugin loaded " << found;
}

}  // namespace
}  // namespace nvfp4
