// The large blocks behind the reference's per-output arrays: kept when freed and handed to the
// next allocation they fit, within a bound, and never two owners of one block.
#include "reference/prefault.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "reference/exact_gemm.h"

namespace nvfp4 {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

// Each test starts with nothing kept and a known bound, and leaves the default behind it.
class LargeBlocks : public ::testing::Test {
 protected:
  void SetUp() override {
    set_large_block_limit(0);
    set_large_block_limit(256 * kMiB);
  }
  void TearDown() override {
    set_large_block_limit(0);
    set_large_block_limit(kDefaultLargeBlockLimit);
  }
};

TEST_F(LargeBlocks, AFreedBlockServesTheNextAllocationItHolds) {
  void* p = large_block_allocate(20 * kMiB);
  std::memset(p, 0x5A, 20 * kMiB);
  large_block_free(p, 20 * kMiB);
  EXPECT_EQ(large_blocks_kept(), 20 * kMiB);
  void* q = large_block_allocate(18 * kMiB);
  EXPECT_EQ(q, p);
  EXPECT_EQ(large_blocks_kept(), 0u);
  // Freed by the size it was asked for, it goes back as the whole block it is.
  large_block_free(q, 18 * kMiB);
  EXPECT_EQ(large_blocks_kept(), 20 * kMiB);
}

TEST_F(LargeBlocks, ABlockOfMoreThanFourTimesTheNeedIsLeftKept) {
  void* big = large_block_allocate(100 * kMiB);
  large_block_free(big, 100 * kMiB);
  void* small = large_block_allocate(17 * kMiB);
  EXPECT_NE(small, big);
  EXPECT_EQ(large_blocks_kept(), 100 * kMiB);
  large_block_free(small, 17 * kMiB);
}

TEST_F(LargeBlocks, TheSmallestBlockThatHoldsItIsTaken) {
  void* a = large_block_allocate(40 * kMiB);
  void* b = large_block_allocate(24 * kMiB);
  large_block_free(a, 40 * kMiB);
  large_block_free(b, 24 * kMiB);
  void* c = large_block_allocate(20 * kMiB);
  EXPECT_EQ(c, b);
  large_block_free(c, 20 * kMiB);
}

TEST_F(LargeBlocks, WhatIsKeptStaysWithinTheBoundOldestGoingFirst) {
  set_large_block_limit(64 * kMiB);
  void* first = large_block_allocate(30 * kMiB);
  void* second = large_block_allocate(30 * kMiB);
  void* third = large_block_allocate(30 * kMiB);
  large_block_free(first, 30 * kMiB);
  large_block_free(second, 30 * kMiB);
  EXPECT_EQ(large_blocks_kept(), 60 * kMiB);
  large_block_free(third, 30 * kMiB);  // 90 MiB: the first freed is unmapped
  EXPECT_EQ(large_blocks_kept(), 60 * kMiB);
  void* again = large_block_allocate(30 * kMiB);
  EXPECT_TRUE(again == second || again == third);
  large_block_free(again, 30 * kMiB);
  // A block larger than the bound is never kept.
  void* huge = large_block_allocate(80 * kMiB);
  large_block_free(huge, 80 * kMiB);
  EXPECT_LE(large_blocks_kept(), 64 * kMiB);
}

TEST_F(LargeBlocks, ARecycledBlockStillGivesAVectorOfValueInitialisedElements) {
  const size_t count = kKeptBlockBytes / sizeof(ExactElement) + 1000;
  {
    ExactElements dirty(count);
    for (ExactElement& e : dirty) e.sum = 12345, e.nonzero = 7, e.nan = true;
  }
  ASSERT_GT(large_blocks_kept(), 0u);
  const ExactElements clean(count);
  EXPECT_EQ(large_blocks_kept(), 0u);  // it did come from the kept block
  for (size_t x = 0; x < count; x += 997) {
    ASSERT_EQ(clean[x].sum, 0) << x;
    ASSERT_EQ(clean[x].nonzero, 0) << x;
    ASSERT_FALSE(clean[x].nan) << x;
  }
}

TEST_F(LargeBlocks, SmallerArraysStayMallocs) {
  { const ExactElements below(kKeptBlockBytes / sizeof(ExactElement) - 1); }
  EXPECT_EQ(large_blocks_kept(), 0u);
}

TEST_F(LargeBlocks, ThreadsNeverShareABlock) {
  // Each thread fills its block with its own byte and checks it is still there before freeing.
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &bad] {
      for (int round = 0; round < 20; ++round) {
        const size_t bytes = (16 + (t + round) % 8) * kMiB;
        auto* p = static_cast<uint8_t*>(large_block_allocate(bytes));
        std::memset(p, t + 1, bytes);
        std::this_thread::yield();
        for (size_t at = 0; at < bytes; at += 4096)
          if (p[at] != t + 1) ++bad[static_cast<size_t>(t)];
        large_block_free(p, bytes);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "thread " << t;
  EXPECT_LE(large_blocks_kept(), 256 * kMiB);
}

}  // namespace
}  // namespace nvfp4
