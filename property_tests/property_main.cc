// Main of the property test binaries: picks the kernels under test, applies the budget, prints
// the RapidCheck seed, and saves the shrunk case of every failing property as a regression file.
//
// Arguments (besides gtest's):
//   --nvfp4-memory=host|cuda|all   which kernels to check (default all)
//   --nvfp4-plugin=PATH            also check a plugin's kernels (repeatable; env NVFP4_PLUGINS too)
//   --nvfp4-kernel=NAME            check only the named kernels (repeatable)
// Environment:
//   RC_PARAMS                      RapidCheck's own (ctest sets max_success per budget)
//   NVFP4_PROPERTY_BUDGET          "long" for 5000 cases per property, or a number of cases;
//                                  unset or "ci" keeps RC_PARAMS as it is
//   NVFP4_REGRESSIONS_DIR          where shrunk failing cases go (default corpus/regressions)
//   OMP_WAIT_POLICY                passive unless set (see main)
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>  // execv

#include "property_tests/property_support.h"

namespace {

using nvfp4::prop::MemoryFilter;

// Rewrites RC_PARAMS before RapidCheck first reads it: the budget's max_success, and max_size
// capped at 100 (Debian's RapidCheck build has a shift bug beyond it).
void apply_budget() {
  const char* rc = std::getenv("RC_PARAMS");
  std::istringstream in(rc ? rc : "");
  std::vector<std::string> kept;
  std::string word, max_success;
  while (in >> word) {
    if (word.rfind("max_success=", 0) == 0) {
      max_success = word.substr(12);
    } else if (word.rfind("max_size=", 0) == 0) {
      if (std::atoi(word.c_str() + 9) > 100) {
        std::fprintf(stderr, "nvfp4 property tests: %s capped to max_size=100\n", word.c_str());
        word = "max_size=100";
      }
      kept.push_back(word);
    } else {
      kept.push_back(word);
    }
  }
  if (const char* budget = std::getenv("NVFP4_PROPERTY_BUDGET"); budget && *budget) {
    const std::string b = budget;
    if (b == "long") {
      max_success = "5000";
    } else if (b != "ci") {
      char* end = nullptr;
      const long n = std::strtol(b.c_str(), &end, 10);
      if (*end != '\0' || n < 1) {
        std::fprintf(stderr, "NVFP4_PROPERTY_BUDGET must be ci, long or a number of cases, not '%s'\n", budget);
        std::exit(2);
      }
      max_success = std::to_string(n);
    }
  }
  if (!max_success.empty()) kept.push_back("max_success=" + max_success);
  std::string params;
  for (const std::string& w : kept) params += (params.empty() ? "" : " ") + w;
  setenv("RC_PARAMS", params.c_str(), 1);
}

// Saves the shrunk case when a property test fails (RapidCheck ran the minimal case last).
class RegressionSaver : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override {
    nvfp4::prop::clear_pending_regression();
    nvfp4::prop::take_exact_totals();
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const auto [exact, elements] = nvfp4::prop::take_exact_totals();
    if (elements > 0) {
      std::printf("exact-regime outputs: %lld of %lld (%.1f%%)\n", static_cast<long long>(exact),
                  static_cast<long long>(elements), 100.0 * double(exact) / double(elements));
    }
    if (info.result()->Failed()) {
      try {
        nvfp4::prop::save_pending_regression();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "nvfp4: could not save the shrunk case: %s\n", e.what());
      }
    }
    nvfp4::prop::clear_pending_regression();
  }
};

}  // namespace

int main(int argc, char** argv) {
  // OpenMP's default wait policy spins idle threads after every parallel region; properties call
  // small host kernels thousands of times, so the spinning took three quarters of the CPU (3x the
  // wall time on 2 cores). libgomp reads the policy when it loads, before main: set it and
  // restart once. (ctest's ENVIRONMENT cannot carry it: gtest_discover_tests splits a second
  // variable off the list.) An explicit OMP_WAIT_POLICY is left alone.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    // Could not restart: carry on with the spinning policy, just slower.
  }
  ::testing::InitGoogleTest(&argc, argv);
  MemoryFilter filter = MemoryFilter::all;
  std::vector<std::string> plugins, names;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--nvfp4-memory=host") {
      filter = MemoryFilter::host;
    } else if (arg == "--nvfp4-memory=cuda") {
      filter = MemoryFilter::cuda;
    } else if (arg == "--nvfp4-memory=all") {
      filter = MemoryFilter::all;
    } else if (arg.rfind("--nvfp4-plugin=", 0) == 0) {
      plugins.push_back(arg.substr(15));
    } else if (arg.rfind("--nvfp4-kernel=", 0) == 0) {
      names.push_back(arg.substr(15));
    } else {
      std::fprintf(stderr, "unknown argument '%s' (see property_main.cc)\n", arg.c_str());
      return 2;
    }
  }
  nvfp4::prop::configure_kernels(filter, plugins, names);
  apply_budget();
  // ctest discovers the tests with --gtest_list_tests and parses stdout: print nothing else then.
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();

  const auto& config = rc::detail::configuration();
  std::printf("nvfp4 property tests: RapidCheck seed %llu, %d cases per property, max_size %d "
              "(reproduce: RC_PARAMS=\"seed=%llu\")\n",
              static_cast<unsigned long long>(config.testParams.seed), config.testParams.maxSuccess,
              config.testParams.maxSize, static_cast<unsigned long long>(config.testParams.seed));
  std::printf("kernels under test:");
  for (const nvfp4::Kernel* k : nvfp4::prop::kernels()) std::printf(" %s", k->name().c_str());
  std::printf("%s\n", nvfp4::prop::kernels().empty() ? " none" : "");
  for (const std::string& why : nvfp4::prop::kernels_left_out()) std::printf("  left out: %s\n", why.c_str());
  std::printf("shrunk failing cases go to %s\n", nvfp4::prop::regressions_dir().c_str());
  std::fflush(stdout);

  ::testing::UnitTest::GetInstance()->listeners().Append(new RegressionSaver);
  return RUN_ALL_TESTS();
}
