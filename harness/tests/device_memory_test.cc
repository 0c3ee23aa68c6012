// The suite's own device memory running short is the suite's error, never the kernel's: with the
// device's memory held by this test but for a margin, a case whose buffers need more than the
// margin first has the suite's pooled blocks given back, and passes an honest kernel where that
// is enough; where it is not, the run ends in the suite's error, naming the device memory, and no
// verdict is given. Holding the device's memory, it runs alone (RUN_SERIAL). Without a CUDA
// device it is skipped with the reason.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/draw/generators.h"
#include "harness/process/device_buffers.h"
#include "harness/tests/check_in_process.h"
#include "harness/tests/scratch_dir.h"

namespace nvfp4 {
namespace {

// A GEMV-shaped GEMM whose A holds `a_mib` MiB (k = 8192), the rest small.
Problem problem_with_a(int64_t a_mib, uint64_t seed) {
  Problem p;
  p.op = Op::gemm;
  p.k = 8192;
  p.m = a_mib * (int64_t(1) << 20) * 2 / p.k;
  p.n = 1;
  p.l = 1;
  Rng rng(seed);
  std::printf("problem gemm %ldx1x8192 (A %ld MiB) from seed %lu\n", static_cast<long>(p.m), static_cast<long>(a_mib),
              static_cast<unsigned long>(seed));
  fill_data(rng, DataSpec{}, p);
  return p;
}

// Device memory held until destroyed: everything free but about `margin` bytes.
class DeviceHog {
 public:
  explicit DeviceHog(size_t margin) {
    for (size_t chunk = size_t(1) << 30; chunk >= (size_t(2) << 20); chunk /= 2) {
      for (;;) {
        size_t free = 0, total = 0;
        if (cudaMemGetInfo(&free, &total) != cudaSuccess || free < margin + chunk) break;
        void* p = nullptr;
        if (cudaMalloc(&p, chunk) != cudaSuccess) {
          (void)cudaGetLastError();
          break;
        }
        held_.push_back(p);
        held_bytes_ += chunk;
      }
    }
    size_t free = 0, total = 0;
    (void)cudaMemGetInfo(&free, &total);
    std::printf("holding %zu MiB of the device's %zu; %zu MiB free\n", held_bytes_ >> 20, total >> 20, free >> 20);
  }
  ~DeviceHog() {
    for (void* p : held_) cudaFree(p);
  }

 private:
  std::vector<void*> held_;
  size_t held_bytes_ = 0;
};

class DeviceMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_memory_available(&why)) GTEST_SKIP() << why;
    // The exact reference on the host: the runner's GPU reference would need the memory held.
    setenv("NVFP4_GPU_REFERENCE_THRESHOLD", "1e30", 1);
  }
  static CaseOptions options() {
    CaseOptions o;
    o.case_dir = test::scratch_dir("device-memory-test").string();
    o.stale_seed = 5;
    return o;
  }
};

TEST_F(DeviceMemory, ShortDeviceMemoryIsTheSuitesErrorAfterThePoolIsGivenBack) {
  const Kernel& k = builtin("gemm_naive");
  // Fills the suite's pool with a 256 MiB A's blocks (they stay there after the case).
  const CaseOutcome first = check_in_process(k, problem_with_a(256, 1), options());
  ASSERT_EQ(first.verdict, CaseOutcome::Verdict::pass) << check_of(first) << ": " << message_of(first);
  const DeviceHog hog(size_t(64) << 20);
  // 128 MiB: more than is free, less than the pool holds. Its blocks are of another size, so
  // the pool's go back to the device first, and the honest kernel passes.
  const CaseOutcome second = check_in_process(k, problem_with_a(128, 2), options());
  EXPECT_EQ(second.verdict, CaseOutcome::Verdict::pass) << check_of(second) << ": " << message_of(second);
  // 1 GiB: more than the pool and the margin together. No verdict: the run's error.
  try {
    const CaseOutcome third = check_in_process(k, problem_with_a(1024, 3), options());
    ADD_FAILURE() << "a case the device had no memory for was judged: " << check_of(third) << ": "
                  << message_of(third);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    std::printf("the suite's error: %s\n", what.c_str());
    EXPECT_NE(what.find("ran out of device or pinned memory"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaMalloc of a guarded buffer"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace nvfp4
