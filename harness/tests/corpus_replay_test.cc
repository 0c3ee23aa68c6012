// Replays every case file under corpus/regressions/ through the runner (check_case), so a bug the
// property tests once shrank stays fixed. A file in corpus/regressions/<kernel>/ is replayed
// against that kernel when it is registered and can run here; otherwise (a CUDA kernel on a CPU
// machine, a test-only broken kernel) against every kernel here that takes its op: a case that
// once broke a kernel is a hard input for all of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "harness/tests/check_in_process.h"
#include "kernels/registry.h"
#include "reference/case_file.h"

#ifndef NVFP4_SOURCE_DIR
#define NVFP4_SOURCE_DIR "."
#endif

namespace nvfp4 {
namespace {

std::string corpus_dir() {
  if (const char* env = std::getenv("NVFP4_REGRESSIONS_DIR"); env && *env) return env;
  return std::string(NVFP4_SOURCE_DIR) + "/corpus/regressions";
}

std::vector<std::string> case_files() {
  std::vector<std::string> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(corpus_dir(), ec)) return files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(corpus_dir(), ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".case") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

const Registry& registry() {
  static const Registry reg = [] {
    Registry r = Registry::with_builtins();
    if (const char* env = std::getenv("NVFP4_PLUGINS")) {
      std::stringstream ss(env);
      std::string path;
      while (std::getline(ss, path, ':')) {
        if (!path.empty()) r.load_plugin(path);
      }
    }
    return r;
  }();
  return reg;
}

// The kernels a file is replayed against, with the problem as each is handed it (a kernel that
// lacks the case's scale layout gets the other one: the case's data is layout-free).
std::vector<std::pair<const Kernel*, Problem>> targets(const std::string& file, const Problem& p) {
  std::vector<std::pair<const Kernel*, Problem>> out;
  const std::string kernel_dir = std::filesystem::path(file).parent_path().filename().string();
  std::string why;
  if (const Kernel* k = registry().find(kernel_dir); k && kernel_runnable(*k, &why)) {
    out.emplace_back(k, p);
    return out;
  }
  for (const Kernel& k : registry().kernels()) {
    if (!kernel_runnable(k, &why) || !k.supports_op(static_cast<uint32_t>(p.op))) continue;
    Problem q = p;
    if (!k.supports_layout(static_cast<uint32_t>(q.sf_layout))) {
      q.sf_layout = q.sf_layout == SfLayout::linear ? SfLayout::permuted : SfLayout::linear;
    }
    // A problem never handed to the kernel (an output type it does not declare) checks nothing.
    if (!unsupported_reason(*k.info, q).empty() && !probes_refusal(*k.info, q)) continue;
    out.emplace_back(&k, q);
  }
  return out;
}

class CorpusReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusReplay, RunnerPassesOrRefusesAsDeclared) {
  const std::string& file = GetParam();
  Problem p;
  try {
    p = read_case_file(file);
  } catch (const CaseError& e) {
    FAIL() << "unreadable regression case: " << e.what();
  }
  const auto runs = targets(file, p);
  if (runs.empty()) GTEST_SKIP() << "no kernel here takes " << to_string(p.op) << " (" << file << ")";
  CaseOptions options;
  for (const auto& [kernel, problem] : runs) {
    const CaseOutcome r = check_in_process(*kernel, problem, options);
    // unsupported is the right answer for a case outside the kernel's declared constraints (a
    // regression of the unsupported-is-refused property); check_case fails a kernel that
    // refuses a case inside them.
    EXPECT_TRUE(r.verdict == CaseOutcome::Verdict::pass || r.verdict == CaseOutcome::Verdict::unsupported)
        << kernel->name() << " on " << file << ": " << check_of(r) << ": " << message_of(r);
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  // <kernel>_<hash>: unique and readable in ctest output.
  const std::filesystem::path path(info.param);
  std::string name = path.parent_path().filename().string() + "_" + path.stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Regressions, CorpusReplay, ::testing::ValuesIn(case_files()), test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CorpusReplay);

}  // namespace
}  // namespace nvfp4
