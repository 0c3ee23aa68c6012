// Guarded host buffers: writes just outside are seen by the guards, writes far outside fault.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "harness/process/device_buffers.h"
#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4 {
namespace {

TEST(HostGuards, IntactAfterWritesInside) {
  auto mem = KernelMemory::create(NVFP4_MEMORY_HOST);
  EXPECT_EQ(mem->stream(), nullptr);
  auto buf = mem->allocate(1001, GuardPattern::bytes);
  std::vector<uint8_t> data(1001);
  std::iota(data.begin(), data.end(), 0);
  buf->upload(data.data());
  for (int64_t x = 0; x < buf->size(); ++x) buf->data()[x] ^= 0xFF;
  EXPECT_TRUE(buf->check_guards(1).intact);
  const std::vector<uint8_t> back = buf->download(1);
  ASSERT_EQ(back.size(), data.size());
  EXPECT_EQ(back[7], static_cast<uint8_t>(7 ^ 0xFF));
}

TEST(HostGuards, SeeOneByteAfterTheEnd) {
  auto buf = make_host_memory()->allocate(37, GuardPattern::nan_fp16);
  std::vector<uint8_t> zeros(37, 0);
  buf->upload(zeros.data());
  buf->data()[37] = static_cast<uint8_t>(~guard_byte(GuardPattern::nan_fp16, 0));
  const GuardDamage d = buf->check_guards(1);
  ASSERT_FALSE(d.intact);
  EXPECT_FALSE(d.before);
  EXPECT_EQ(d.offset, 37);
  EXPECT_EQ(d.damaged_bytes, 1);
  EXPECT_NE(d.describe("c").find("after"), std::string::npos);
}

TEST(HostGuards, SeeAWriteBeforeTheStart) {
  auto buf = make_host_memory()->allocate(64, GuardPattern::nan_scales);
  std::vector<uint8_t> zeros(64, 0);
  buf->upload(zeros.data());
  buf->data()[-3] = 0x00;  // 0x00 is never a NaN-scale guard byte
  const GuardDamage d = buf->check_guards(1);
  ASSERT_FALSE(d.intact);
  EXPECT_TRUE(d.before);
  EXPECT_EQ(d.offset, -3);
}

TEST(HostGuards, UploadRestoresGuards) {
  auto buf = make_host_memory()->allocate(16, GuardPattern::bytes);
  std::vector<uint8_t> zeros(16, 0);
  buf->upload(zeros.data());
  buf->data()[16] ^= 1;
  EXPECT_FALSE(buf->check_guards(1).intact);
  buf->upload(zeros.data());
  EXPECT_TRUE(buf->check_guards(1).intact);
}

TEST(HostGuards, ScaleGuardsAreNaN) {
  for (int64_t x = 0; x < 64; ++x) EXPECT_EQ(guard_byte(GuardPattern::nan_scales, x) & 0x7F, 0x7F);
}

// Far beyond the guard region lies a PROT_NONE page: the write faults instead of corrupting
// whatever the allocator put there.
TEST(HostGuardsDeathTest, FarWriteFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto buf = make_host_memory()->allocate(100, GuardPattern::bytes);
        volatile uint8_t* p = buf->data();
        for (int64_t x = 0; x < (int64_t(1) << 20); x += 512) p[100 + x] = 1;
      },
      "");
}

// The worker writes a host input through its second view: an upload leaves it read-only, so the
// kernel's write still faults without a protection of its own.
TEST(HostGuardsDeathTest, AnInputStaysReadOnlyAcrossUploads) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto buf = make_host_memory()->allocate(100, GuardPattern::bytes);
  std::vector<uint8_t> first(100, 1), second(100, 2);
  buf->upload(first.data());
  buf->set_read_only(true);
  buf->upload(second.data());
  EXPECT_TRUE(std::equal(second.begin(), second.end(), buf->staged_data()));
  EXPECT_TRUE(buf->check_guards(1.0).intact);
  EXPECT_DEATH(
      {
        volatile uint8_t* p = buf->data();
        p[0] = 3;
      },
      "");
}

// A grouped case's buffers, five a group, in the thousands: a process has at most
// vm.max_map_count memory areas (65,530 by default), and buffers viewed twice take more of them,
// so past a bound buffers are anonymous again. 22,000 buffers, a 4,400-group case, once failed.
TEST(HostGuards, AsManyBuffersAsAGroupedCaseOfThousandsOfGroups) {
  std::unique_ptr<KernelMemory> memory = make_host_memory();
  std::vector<std::unique_ptr<GuardedBuffer>> all;
  const std::vector<uint8_t> bytes(64, 7);
  for (int x = 0; x < 22000; ++x) {
    all.push_back(memory->allocate(64 + x % 7, GuardPattern::bytes));
    all.back()->upload(bytes.data());
    if (x < 1040) all.back()->set_read_only(true);  // as a call protects its first inputs
  }
  for (int x = 0; x < 22000; x += 997) {
    all[static_cast<size_t>(x)]->upload(bytes.data());
    ASSERT_TRUE(std::equal(bytes.begin(), bytes.end(), all[static_cast<size_t>(x)]->staged_data())) << x;
  }
}

// One call of a 7,000-group case asks for 35,001 buffers: with fence pages each, the kernel's
// process ran out of memory areas and the honest kernel was failed as a crash. Past the first
// thousands, a call's buffers share blocks; their guards still show a write out of bounds, and
// each stays apart from its neighbours.
TEST(HostGuards, ACallOfTensOfThousandsOfBuffersSharesBlocksAndKeepsItsGuards) {
  std::unique_ptr<KernelMemory> memory = make_host_memory();
  constexpr int kBuffers = 70000;
  std::vector<KernelMemory::Request> asked;
  for (int x = 0; x < kBuffers; ++x)
    asked.push_back({1 + x % 97, x % 3 == 0 ? GuardPattern::nan_scales : GuardPattern::bytes});
  std::vector<std::unique_ptr<GuardedBuffer>> all = memory->allocate_all(asked);
  ASSERT_EQ(all.size(), asked.size());
  for (int x = 0; x < kBuffers; ++x) {
    const std::vector<uint8_t> bytes(static_cast<size_t>(asked[x].bytes), static_cast<uint8_t>(x));
    all[x]->upload(bytes.data());
  }
  for (int x = 0; x < kBuffers; x += 331) {
    const std::vector<uint8_t> bytes(static_cast<size_t>(asked[x].bytes), static_cast<uint8_t>(x));
    ASSERT_TRUE(std::equal(bytes.begin(), bytes.end(), all[x]->staged_data())) << x;
    ASSERT_TRUE(all[x]->check_guards(1.0).intact) << x;
  }
  // A byte written just past one shared buffer and one just before another: each shows in its
  // own guard, and the buffers beside them are untouched.
  const int past = kBuffers - 5, before = kBuffers - 2;
  all[past]->data()[asked[past].bytes] ^= 0x55;
  all[before]->data()[-1] ^= 0x55;
  const GuardDamage d_past = all[past]->check_guards(1.0), d_before = all[before]->check_guards(1.0);
  EXPECT_FALSE(d_past.intact);
  EXPECT_FALSE(d_past.before);
  EXPECT_EQ(d_past.offset, asked[past].bytes);
  EXPECT_FALSE(d_before.intact);
  EXPECT_TRUE(d_before.before);
  EXPECT_EQ(d_before.offset, -1);
  for (int x : {past - 1, past + 1, before - 1, before + 1}) EXPECT_TRUE(all[x]->check_guards(1.0).intact) << x;
}

TEST(CudaMemory, ExplainsWhenItCannotBeUsed) {
  std::string why;
  if (!cuda_memory_available(&why)) {
    EXPECT_FALSE(why.empty());
    EXPECT_THROW(KernelMemory::create(NVFP4_MEMORY_CUDA), DeviceError);
  }
  EXPECT_THROW(KernelMemory::create(99), std::invalid_argument);
}

}  // namespace
}  // namespace nvfp4
