// The registry: the built-in table, plugin loading, and every way a plugin can be wrong
// rejected with a message that names the plugin and the reason.
#include "kernels/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/builtin.h"

namespace nvfp4 {
namespace {

TEST(Registry, BuiltinsHaveUniqueValidNamesAndHostKernels) {
  const Registry r = Registry::with_builtins();
  std::set<std::string> names;
  for (const Kernel& k : r.kernels()) {
    EXPECT_TRUE(names.insert(k.name()).second) << "duplicate " << k.name();
    EXPECT_EQ(k.origin, "builtin");
    EXPECT_EQ(k.info->abi_version, static_cast<uint32_t>(NVFP4_ABI_VERSION));
  }
  for (const char* host : {"host_gemv_fp32", "host_gemm_fp32", "host_gemm_fp32_e4m3"}) {
    const Kernel* k = r.find(host);
    ASSERT_NE(k, nullptr) << host;
    EXPECT_FALSE(k->is_cuda());
    std::string why;
    EXPECT_TRUE(kernel_runnable(*k, &why)) << why;
  }
  EXPECT_EQ(r.find("no_such_kernel"), nullptr);
  EXPECT_EQ(static_cast<int>(r.kernels().size()), kern::builtin_kernel_count());
}

TEST(Registry, CudaBuiltinsPresentExactlyWhenBuiltWithCuda) {
  const Registry r = Registry::with_builtins();
  for (const char* name : {"gemv_naive", "gemm_naive", "cublaslt_nvfp4"}) {
#if defined(NVFP4_HAVE_CUDA)
    const Kernel* k = r.find(name);
    ASSERT_NE(k, nullptr) << name;
    EXPECT_TRUE(k->is_cuda());
#else
    EXPECT_EQ(r.find(name), nullptr) << name;
#endif
  }
}

TEST(Registry, CublasLtNeedsBlackwell) {
  const Registry r = Registry::with_builtins();
  const Kernel* k = r.find("cublaslt_nvfp4");
  if (k == nullptr) GTEST_SKIP() << "built without CUDA";
  EXPECT_EQ(k->info->min_sm, 100u);
  EXPECT_EQ(k->info->k_multiple % 32, 0u);
  EXPECT_TRUE(k->supports_layout(NVFP4_SF_PERMUTED));
  EXPECT_FALSE(k->supports_layout(NVFP4_SF_LINEAR));
  std::string why;
  if (!kernel_runnable(*k, &why)) {
    EXPECT_FALSE(why.empty());
  }
}

TEST(Registry, BuiltinRunRefusesIndicesItNeverHandsOut) {
  EXPECT_EQ(kern::builtin_kernel_get(-1), nullptr);
  EXPECT_EQ(kern::builtin_kernel_get(kern::builtin_kernel_count()), nullptr);
  EXPECT_EQ(kern::builtin_kernel_run(-1, nullptr), NVFP4_ERROR);
}

TEST(Registry, LoadsAGoodPluginAndDispatchesByIndex) {
  Registry r = Registry::with_builtins();
  const size_t before = r.kernels().size();
  r.load_plugin(TEST_PLUGIN_GOOD);
  ASSERT_EQ(r.kernels().size(), before + 2);
  const Kernel* first = r.find("test_plugin_first");
  const Kernel* second = r.find("test_plugin_second");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->origin, TEST_PLUGIN_GOOD);
  nvfp4_problem p{};
  EXPECT_EQ(first->run(p), NVFP4_OK);
  EXPECT_EQ(second->run(p), NVFP4_UNSUPPORTED);
  // A CUDA kernel asking for compute capability 100.0 is never runnable, and says why.
  std::string why;
  EXPECT_FALSE(kernel_runnable(*second, &why));
  EXPECT_FALSE(why.empty());
}

// load_plugin must throw a PluginError whose message contains every fragment; the registry
// must be left unchanged.
void expect_rejected(const std::string& path, std::initializer_list<const char*> fragments) {
  Registry r = Registry::with_builtins();
  const size_t before = r.kernels().size();
  try {
    r.load_plugin(path);
    ADD_FAILURE() << "loaded " << path << " without complaint";
  } catch (const PluginError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the plugin: " << msg;
    for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
  EXPECT_EQ(r.kernels().size(), before) << "a rejected plugin left kernels behind";
}

TEST(Registry, RejectsMissingSymbol) { expect_rejected(TEST_PLUGIN_MISSING_SYMBOL, {"nvfp4_kernel_run"}); }
TEST(Registry, RejectsWrongAbiVersion) { expect_rejected(TEST_PLUGIN_WRONG_ABI, {"ABI version 2"}); }
TEST(Registry, RejectsDuplicateNameInsideAPlugin) {
  expect_rejected(TEST_PLUGIN_DUPLICATE_NAME, {"duplicate kernel name 'test_plugin_first'"});
}
TEST(Registry, RejectsNameOfABuiltin) {
  expect_rejected(TEST_PLUGIN_BUILTIN_NAME, {"duplicate kernel name 'host_gemm_fp32'", "built-in"});
}
TEST(Registry, RejectsInvalidName) { expect_rejected(TEST_PLUGIN_BAD_NAME, {"invalid name 'Bad-Name'", "[a-z0-9_]"}); }
TEST(Registry, RejectsNullInfo) { expect_rejected(TEST_PLUGIN_NULL_INFO, {"nvfp4_kernel_get(1) returned NULL"}); }
TEST(Registry, RejectsUnknownMemoryKind) { expect_rejected(TEST_PLUGIN_BAD_MEMORY, {"memory 7"}); }
TEST(Registry, RejectsAFileThatIsNotALibrary) {
  expect_rejected(std::string(TEST_SOURCE_DIR) + "/test_plugin.c", {"cannot load plugin"});
}
TEST(Registry, RejectsAMissingFile) { expect_rejected("/nonexistent/plugin.so", {"cannot load plugin"}); }

TEST(Registry, LoadingTheSamePluginTwiceIsADuplicate) {
  Registry r;
  r.load_plugin(TEST_PLUGIN_GOOD);
  try {
    r.load_plugin(TEST_PLUGIN_GOOD);
    ADD_FAILURE() << "second load accepted";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r.kernels().size(), 2u);
}

// A provider handed over directly (as the built-ins are) gets the same checks.
const nvfp4_kernel_info kBadInfo = {NVFP4_ABI_VERSION, "ok_name", NVFP4_MEMORY_HOST, 0, 2, 0, 1, 1, 1, 0};
int one() { return 1; }
const nvfp4_kernel_info* bad_get(int) { return &kBadInfo; }
int no_run(int, const nvfp4_problem*) { return NVFP4_ERROR; }

TEST(Registry, AddProviderValidatesInfo) {
  Registry r;
  try {
    r.add_provider(one, bad_get, no_run, "unit-test");
    ADD_FAILURE() << "ops == 0 accepted";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("ops"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(r.kernels().empty());
  EXPECT_THROW(r.add_provider(nullptr, bad_get, no_run, "unit-test"), PluginError);
}

}  // namespace
}  // namespace nvfp4
