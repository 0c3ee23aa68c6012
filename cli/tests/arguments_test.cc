// The commands' defaults that depend on the machine: the CPUs counted, and run's lanes from them.
#include "cli/arguments.h"

#include <sched.h>

#include <gtest/gtest.h>

namespace nvfp4::cli {
namespace {

TEST(UsableCpus, FollowsTheAffinityMaskNotTheMachine) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  const int count = CPU_COUNT(&all);
  EXPECT_EQ(usable_cpus(), static_cast<unsigned>(count));
  if (count < 2) GTEST_SKIP() << "one CPU: a mask of one cannot be told from the machine";
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const unsigned pinned = usable_cpus();  // as in a one-CPU Slurm task or under `taskset -c N`
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(pinned, 1u);
  EXPECT_EQ(usable_cpus(), static_cast<unsigned>(count));
}

TEST(DefaultRunJobs, ThreeQuartersOfTheCpusSharedAmongTheGpusFromTwoToTwelve) {
  EXPECT_EQ(default_run_jobs(16, 0), 12);   // the device hosts: one GPU, 16 cores
  EXPECT_EQ(default_run_jobs(16, 1), 12);
  EXPECT_EQ(default_run_jobs(2, 0), 2);     // CI's machine: three quarters of 2 is 1, and 2 at least
  EXPECT_EQ(default_run_jobs(1, 0), 2);
  EXPECT_EQ(default_run_jobs(8, 0), 6);
  EXPECT_EQ(default_run_jobs(16, 2), 6);    // two GPUs share the 12
  EXPECT_EQ(default_run_jobs(128, 8), 12);  // 96 among 8 GPUs
  EXPECT_EQ(default_run_jobs(256, 1), 12);  // at most 12 a GPU
  EXPECT_EQ(default_run_jobs(4, 4), 2);
}

}  // namespace
}  // namespace nvfp4::cli
