// The registry: the built-in table, plugin loading, and every way a plugin can be wrong
// rejected with a message that names the plugin and the reason.
#include "kernels/registry.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

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
TEST(Registry, RejectsWrongAbiVersion) {
  expect_rejected(TEST_PLUGIN_WRONG_ABI, {"ABI version 4", "versions 1 to 3"});
  expect_rejected(TEST_PLUGIN_ABI_ZERO, {"ABI version 0", "versions 1 to 3"});
}
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

// ---- ABI version 1 next to version 2 (SPEC.md section 5, "Versions") -------------------------

TEST(AbiVersions, HeaderAppendsToVersionOne) {
  // The version-1 structs end where version 2's fields begin (LP64: 48 and 96 bytes).
  EXPECT_EQ(kAbiV1InfoBytes, 48u);
  EXPECT_EQ(kAbiV1ProblemBytes, 96u);
  EXPECT_GT(sizeof(nvfp4_kernel_info), kAbiV1InfoBytes);
  EXPECT_GT(sizeof(nvfp4_problem), kAbiV1ProblemBytes);
}

TEST(AbiVersions, PluginBuiltAgainstVersionOneLoadsAsFp16GemvOnly) {
  Registry r;
  r.load_plugin(TEST_PLUGIN_ABI_V1);
  const Kernel* k = r.find("example_host_gemv");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->info->abi_version, 1u);
  EXPECT_EQ(k->info->out_types, 0u);
  EXPECT_EQ(k->info->max_groups, 0u);
  EXPECT_TRUE(k->supports_out_type(NVFP4_OUT_FP16));
  EXPECT_FALSE(k->supports_out_type(NVFP4_OUT_BF16));
  EXPECT_FALSE(k->supports_out_type(NVFP4_OUT_FP32));
  EXPECT_NE(k->info, nullptr);
}

// A version-1 info at the very end of its allocation, as a plugin built against version 1 has it:
// the registry must copy 48 bytes, not 56 (ASan reports a read past), and zero the rest.
struct V1InfoAtEnd {
  std::vector<unsigned char> bytes;
  V1InfoAtEnd() : bytes(kAbiV1InfoBytes + 8, 0xFF) {
    nvfp4_kernel_info v1{};
    v1.abi_version = 1;
    v1.name = "v1_at_end";
    v1.memory = NVFP4_MEMORY_HOST;
    v1.ops = 1u << NVFP4_OP_GEMV;
    v1.sf_layouts = 1u << NVFP4_SF_LINEAR;
    v1.m_multiple = v1.n_multiple = v1.k_multiple = 1;
    std::memcpy(bytes.data(), &v1, kAbiV1InfoBytes);  // the 8 bytes after it stay 0xFF
  }
};
V1InfoAtEnd g_v1_info;
const nvfp4_kernel_info* v1_get(int) { return reinterpret_cast<const nvfp4_kernel_info*>(g_v1_info.bytes.data()); }

const nvfp4_problem* g_seen = nullptr;
unsigned char g_seen_bytes[kAbiV1ProblemBytes];
int v1_records(int, const nvfp4_problem* p) {
  g_seen = p;
  std::memcpy(g_seen_bytes, p, kAbiV1ProblemBytes);
  return NVFP4_OK;
}
int v1_reads_past(int, const nvfp4_problem* p) {
  const volatile uint32_t* out_type = &p->out_type;  // a version-1 kernel has no such field
  return *out_type == 12345u ? NVFP4_ERROR : NVFP4_OK;
}

nvfp4_problem gemv_problem() {
  static uint8_t data[64];
  static uint16_t c[4];
  nvfp4_problem p{};
  p.op = NVFP4_OP_GEMV;
  p.m = 2, p.n = 1, p.k = 16, p.l = 1;
  p.a = p.b = p.sfa = p.sfb = data;
  p.sf_layout = NVFP4_SF_LINEAR;
  p.alpha = 1.0f;
  p.c = c;
  p.out_type = NVFP4_OUT_FP16;
  p.alpha2 = 1.0f;
  return p;
}

TEST(AbiVersions, VersionOneInfoIsReadOnlyToItsEnd) {
  Registry r;
  r.add_provider(one, v1_get, v1_records, "unit-test");
  const Kernel& k = r.kernels().at(0);
  EXPECT_EQ(k.info->abi_version, 1u);
  EXPECT_EQ(k.info->out_types, 0u) << "read the bytes after a version-1 info";
  EXPECT_EQ(k.info->max_groups, 0u) << "read the bytes after a version-1 info";
  EXPECT_EQ(k.name(), "v1_at_end");
}

TEST(AbiVersions, VersionOneKernelGetsACopyOfTheVersionOnePrefixOnly) {
  Registry r;
  r.add_provider(one, v1_get, v1_records, "unit-test");
  const Kernel& k = r.kernels().at(0);
  const nvfp4_problem p = gemv_problem();
  g_seen = nullptr;
  ASSERT_EQ(k.run(p), NVFP4_OK);
  ASSERT_NE(g_seen, nullptr);
  EXPECT_NE(g_seen, &p) << "a version-1 kernel was handed the whole version-2 problem";
  EXPECT_EQ(std::memcmp(g_seen_bytes, &p, kAbiV1ProblemBytes), 0);
  // Problems version 1 cannot express are answered UNSUPPORTED on its behalf, without a call.
  const auto refused = [&](void (*change)(nvfp4_problem&), const char* what) {
    nvfp4_problem q = gemv_problem();
    change(q);
    g_seen = nullptr;
    EXPECT_EQ(k.run(q), NVFP4_UNSUPPORTED) << what;
    EXPECT_EQ(g_seen, nullptr) << what << " reached the version-1 kernel";
  };
  refused([](nvfp4_problem& q) { q.out_type = NVFP4_OUT_BF16; }, "BF16 output");
  refused([](nvfp4_problem& q) { q.out_type = NVFP4_OUT_FP32; }, "FP32 output");
  refused([](nvfp4_problem& q) { q.op = NVFP4_OP_DUAL_GEMM; }, "a dual GEMM");
  refused([](nvfp4_problem& q) { q.op = NVFP4_OP_GROUPED_GEMM; }, "a grouped GEMM");
  refused([](nvfp4_problem& q) { q.groups = 1; }, "groups");
  refused([](nvfp4_problem& q) { q.b2 = q.b; }, "a second B");
}

// AddressSanitizer builds: GCC says so with __SANITIZE_ADDRESS__, clang with __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define NVFP4_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NVFP4_TEST_ASAN 1
#endif
#endif
#if defined(NVFP4_TEST_ASAN)
// The copy is exactly as long as version 1's struct: a version-1 kernel reading past it reads
// past an allocation, which AddressSanitizer stops.
TEST(AbiVersionsDeathTest, ReadingPastTheVersionOneProblemIsCaught) {
  Registry r;
  r.add_provider(one, v1_get, v1_reads_past, "unit-test");
  const Kernel& k = r.kernels().at(0);
  EXPECT_DEATH(k.run(gemv_problem()), "heap-buffer-overflow");
}
#endif

TEST(AbiVersions, VersionTwoKernelGetsTheProblemItself) {
  static const nvfp4_kernel_info v2 = {2, "v2_kernel", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMV, 1u << NVFP4_SF_LINEAR,
                                       0, 1, 1, 1, 0, 1u << NVFP4_OUT_BF16, 0};
  Registry r;
  r.add_provider(one, [](int) { return &v2; }, v1_records, "unit-test");
  const nvfp4_problem p = gemv_problem();
  g_seen = nullptr;
  ASSERT_EQ(r.kernels().at(0).run(p), NVFP4_OK);
  EXPECT_EQ(g_seen, &p);
  EXPECT_TRUE(r.kernels().at(0).supports_out_type(NVFP4_OUT_BF16));
  EXPECT_FALSE(r.kernels().at(0).supports_out_type(NVFP4_OUT_FP16));
}

TEST(AbiVersions, VersionTwoDeclarationsAreChecked) {
  // Version-2 ops and the packed flag need version 2; unknown output types are refused.
  struct Bad {
    nvfp4_kernel_info info;
    const char* fragment;
  };
  static const Bad cases[] = {
      {{1, "v1_grouped", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GROUPED_GEMM, 2, 0, 1, 1, 1, 0, 0, 0}, "ABI version 2"},
      {{1, "v1_packed", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMM, 2, 0, 1, 1, 1, NVFP4_FLAG_GROUPS_PACKED, 0, 0},
       "flag bits 0x80"},
      {{2, "v2_out_types", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMM, 2, 0, 1, 1, 1, 0, 1u << 4, 0}, "out_types 0x10"},
      {{2, "v2_out_zero_bit", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMM, 2, 0, 1, 1, 1, 0, 1u, 0}, "out_types 0x1"},
      {{2, "v2_op_five", NVFP4_MEMORY_HOST, 1u << 5, 2, 0, 1, 1, 1, 0, 0, 0}, "ops 0x20"},
  };
  for (const Bad& b : cases) {
    static const nvfp4_kernel_info* current = nullptr;
    current = &b.info;
    Registry r;
    try {
      r.add_provider(one, [](int) { return current; }, no_run, "unit-test");
      ADD_FAILURE() << b.info.name << " accepted";
    } catch (const PluginError& e) {
      EXPECT_NE(std::string(e.what()).find(b.fragment), std::string::npos) << e.what();
    }
  }
  // And a version-2 kernel may declare everything version 2 defines.
  static const nvfp4_kernel_info all = {2, "v2_all", NVFP4_MEMORY_HOST, 0x1Eu, 6, 0, 1, 1, 1,
                                        NVFP4_FLAG_GROUPS_PACKED | NVFP4_FLAG_MMA_ACCUMULATE, 0xEu, 256};
  Registry r;
  r.add_provider(one, [](int) { return &all; }, no_run, "unit-test");
  EXPECT_EQ(r.kernels().at(0).info->max_groups, 256u);
  EXPECT_TRUE(r.kernels().at(0).groups_packed());
}

}  // namespace
}  // namespace nvfp4
