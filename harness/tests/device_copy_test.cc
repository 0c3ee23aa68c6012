// Inputs' device copies (device_buffers.h): the copy restores the last upload, the comparison
// finds changed data and guards with their first byte, and small buffers or buffers not asked to
// keep a copy keep none. Without a CUDA device every test is skipped with the reason.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "harness/process/device_buffers.h"
#include "harness/process/device_copy.h"
#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4 {
namespace {

class DeviceCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_memory_available(&why)) GTEST_SKIP() << why;
    mem_ = KernelMemory::create(NVFP4_MEMORY_CUDA);
  }
  cudaStream_t stream() { return static_cast<cudaStream_t>(mem_->stream()); }
  // The comparison of `buf` against its device copy, run and waited for.
  std::optional<DeviceComparison> compare(GuardedBuffer& buf) {
    if (!buf.compare_async()) return std::nullopt;
    mem_->synchronize(10);
    return buf.compared(10);
  }
  // Expects `buf` to hold its last upload with its guards whole.
  void expect_unchanged(GuardedBuffer& buf) {
    const std::optional<DeviceComparison> c = compare(buf);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->changed, 0);
    EXPECT_TRUE(c->guards.intact);
  }
  std::unique_ptr<KernelMemory> mem_;
};

TEST_F(DeviceCopy, FindsChangesAndRestoresTheLastUpload) {
  const int64_t size = 300001;  // past the threshold, and not a multiple of 8
  auto buf = mem_->allocate(size, GuardPattern::nan_scales);
  buf->keep_device_copy();
  std::vector<uint8_t> data(static_cast<size_t>(size));
  for (int64_t x = 0; x < size; ++x) data[static_cast<size_t>(x)] = static_cast<uint8_t>(x * 7 + 1);
  buf->upload(data.data());
  expect_unchanged(*buf);

  // Zero 5000 data bytes from 1000, the last data byte, and three bytes of the guard after.
  ASSERT_EQ(cudaMemsetAsync(buf->data() + 1000, 0, 5000, stream()), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(buf->data() + size - 1, 0, 4, stream()), cudaSuccess);
  int64_t changed = 0, first = -1;
  for (int64_t x = 0; x < size; ++x) {
    const bool zeroed = (x >= 1000 && x < 6000) || x == size - 1;
    if (zeroed && data[static_cast<size_t>(x)] != 0) {
      ++changed;
      if (first < 0) first = x;
    }
  }
  std::optional<DeviceComparison> c = compare(*buf);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->changed, changed);
  EXPECT_EQ(c->first, first);
  EXPECT_EQ(c->was, data[static_cast<size_t>(first)]);
  EXPECT_EQ(c->now, 0);
  ASSERT_FALSE(c->guards.intact);
  EXPECT_FALSE(c->guards.before);
  EXPECT_EQ(c->guards.offset, size);
  EXPECT_EQ(c->guards.damaged_bytes, 3);  // NaN-scale guard bytes are never zero
  EXPECT_EQ(c->guards.expected, guard_byte(GuardPattern::nan_scales, 0));
  EXPECT_EQ(c->guards.actual, 0);

  ASSERT_TRUE(buf->restore());
  expect_unchanged(*buf);
  EXPECT_EQ(buf->download(10), data);
  EXPECT_TRUE(buf->check_guards(10).intact);
}

TEST_F(DeviceCopy, OnlyLargeInputsKeepOne) {
  std::vector<uint8_t> data(1 << 20, 0x5A);
  auto small = mem_->allocate(1000, GuardPattern::bytes);
  small->keep_device_copy();
  small->upload(data.data());
  EXPECT_FALSE(small->restore());
  EXPECT_FALSE(small->compare_async());
  auto output = mem_->allocate(1 << 20, GuardPattern::nan_fp16);  // never asked to keep one
  output->upload(data.data());
  EXPECT_FALSE(output->restore());
  EXPECT_FALSE(output->compare_async());
  mem_->synchronize(10);
  EXPECT_FALSE(output->compared(10).has_value());
}

// A stale call's tensor moved from the device copy of its last upload (upload_rotated): the
// device holds the host's moved bytes, the guards are whole, the copy now holds the moved bytes
// (a compare finds nothing, a restore writes them again), and moving back gives the data again.
// Buffers without a copy, or a move of another size, do nothing.
TEST_F(DeviceCopy, UploadRotatedMovesTheLastUploadOnTheDevice) {
  TensorRotation r;
  r.l = 3, r.rows = 211, r.row_bytes = 520;  // 329,160 bytes: past the threshold
  r.block_bytes = 8, r.blocks = 60, r.blocks_by = 23, r.rows_by = 117, r.batches_by = 2, r.flip = 0x88;
  const int64_t size = r.bytes();
  std::vector<uint8_t> data(static_cast<size_t>(size));
  for (int64_t x = 0; x < size; ++x) data[static_cast<size_t>(x)] = static_cast<uint8_t>((x * 2654435761u) >> 11);
  std::vector<uint8_t> moved(data.size());
  copy_rotated(data.data(), r, moved.data());
  ASSERT_NE(moved, data);

  auto buf = mem_->allocate(size, GuardPattern::nan_scales);
  EXPECT_FALSE(buf->upload_rotated(r));  // nothing uploaded yet
  buf->keep_device_copy();
  buf->upload(data.data());
  TensorRotation other = r;
  other.rows = 210;
  EXPECT_FALSE(other.bytes() == size);
  EXPECT_FALSE(buf->upload_rotated(other));
  ASSERT_TRUE(buf->upload_rotated(r));
  EXPECT_EQ(buf->download(10), moved);
  EXPECT_TRUE(buf->check_guards(10).intact);
  expect_unchanged(*buf);
  ASSERT_EQ(cudaMemsetAsync(buf->data() + 100, 0, 4, stream()), cudaSuccess);
  ASSERT_TRUE(buf->restore());
  EXPECT_EQ(buf->download(10), moved);
  ASSERT_TRUE(buf->upload_rotated(undoing(r)));
  EXPECT_EQ(buf->download(10), data);
  EXPECT_TRUE(buf->check_guards(10).intact);

  // One row, no blocks to rotate, no flip: the batches alone move.
  TensorRotation batches;
  batches.l = 4, batches.rows = 1, batches.row_bytes = 70000, batches.batches_by = 3;
  std::vector<uint8_t> four(static_cast<size_t>(batches.bytes()));
  for (size_t x = 0; x < four.size(); ++x) four[x] = static_cast<uint8_t>(x / 70000 * 50 + x % 7);
  auto whole = mem_->allocate(batches.bytes(), GuardPattern::bytes);
  whole->keep_device_copy();
  whole->upload(four.data());
  ASSERT_TRUE(whole->upload_rotated(batches));
  std::vector<uint8_t> want(four.size());
  copy_rotated(four.data(), batches, want.data());
  EXPECT_EQ(whole->download(10), want);
  EXPECT_EQ(want[0], static_cast<uint8_t>(150));

  std::vector<uint8_t> few(1000, 0x5A);
  auto small = mem_->allocate(1000, GuardPattern::bytes);
  small->keep_device_copy();
  small->upload(few.data());
  TensorRotation one;
  one.rows = 10, one.row_bytes = 100, one.rows_by = 3;
  EXPECT_FALSE(small->upload_rotated(one));
}

// A call's small buffers share an arena: side by side, each between its own guards (the one
// after runs on to the next region), their uploads and fetches joined; a large buffer keeps a
// block of its own and its device copy. A write one byte past a buffer, or into the padding
// before the next, is that buffer's damaged guard; what the device holds is what was uploaded.
TEST_F(DeviceCopy, SmallBuffersShareAnArenaAndKeepTheirGuards) {
  const std::vector<KernelMemory::Request> asked = {
      {1000, GuardPattern::bytes}, {37, GuardPattern::nan_fp16}, {300001, GuardPattern::nan_scales},
      {64, GuardPattern::nan_scales}};
  std::vector<std::unique_ptr<GuardedBuffer>> b = mem_->allocate_all(asked);
  ASSERT_EQ(b.size(), asked.size());
  const auto at = [&](size_t x) { return reinterpret_cast<uintptr_t>(b[x]->data()); };
  // 2 x 4096 guard bytes and the data, to a multiple of 512; the large one elsewhere.
  EXPECT_EQ(at(1) - at(0), 9216u);
  EXPECT_EQ(at(3) - at(1), 8704u);
  EXPECT_TRUE(at(2) < at(0) || at(2) > at(3));
  for (size_t x = 0; x < b.size(); ++x) EXPECT_EQ(at(x) % 256, 0u) << x;
  b[2]->keep_device_copy();

  std::vector<std::vector<uint8_t>> data;
  for (size_t x = 0; x < asked.size(); ++x) {
    data.emplace_back(static_cast<size_t>(asked[x].bytes));
    for (size_t y = 0; y < data[x].size(); ++y) data[x][y] = static_cast<uint8_t>(y * 13 + x * 71 + 5);
    b[x]->upload(data[x].data());
  }
  mem_->flush();
  // On the stream after the flush, the device holds the uploads.
  std::vector<uint8_t> seen(37);
  ASSERT_EQ(cudaMemcpyAsync(seen.data(), b[1]->data(), 37, cudaMemcpyDeviceToHost, stream()), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(b[0]->data() + 1000, 0, 1, stream()), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(b[1]->data() + 37 + kGuardBytes + 10, 0, 2, stream()), cudaSuccess);
  for (const auto& x : b) x->fetch_async();
  mem_->synchronize(10);
  EXPECT_EQ(seen, data[1]);
  for (size_t x = 0; x < b.size(); ++x)
    EXPECT_TRUE(std::equal(data[x].begin(), data[x].end(), b[x]->staged_data())) << x;
  const GuardDamage d0 = b[0]->staged_guard_damage();
  ASSERT_FALSE(d0.intact);
  EXPECT_FALSE(d0.before);
  EXPECT_EQ(d0.offset, 1000);
  EXPECT_EQ(d0.damaged_bytes, 1);
  const GuardDamage d1 = b[1]->staged_guard_damage();
  ASSERT_FALSE(d1.intact);
  EXPECT_EQ(d1.offset, 37 + kGuardBytes + 10);
  EXPECT_EQ(d1.damaged_bytes, 2);
  EXPECT_TRUE(b[2]->staged_guard_damage().intact);
  EXPECT_TRUE(b[3]->staged_guard_damage().intact);

  // Uploaded again, each alone: the guards are whole again, the data read back one at a time.
  for (size_t x = 0; x < b.size(); ++x) b[x]->upload(data[x].data());
  for (size_t x = 0; x < b.size(); ++x) {
    EXPECT_EQ(b[x]->download(10), data[x]) << x;
    EXPECT_TRUE(b[x]->check_guards(10).intact) << x;
  }
}

// The copy is masked: none of its 8-byte words is the data's word at that place, so a kernel
// whose offset wraps into the copy reads garbage; restore unmasks it exactly.
TEST_F(DeviceCopy, TheCopyIsMasked) {
  const int64_t size = (1 << 20) + 3;
  std::vector<uint8_t> data(static_cast<size_t>(size));
  for (int64_t x = 0; x < size; ++x) data[static_cast<size_t>(x)] = static_cast<uint8_t>((x * 2654435761u) >> 13);
  const int64_t rounded = (size + 7) / 8 * 8;
  uint8_t *region = nullptr, *copy = nullptr;
  ASSERT_EQ(cudaMalloc(&region, rounded), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&copy, rounded), cudaSuccess);
  // On the memory's stream (a non-blocking one), before the kernels that read it.
  ASSERT_EQ(cudaMemcpyAsync(region, data.data(), size, cudaMemcpyHostToDevice, stream()), cudaSuccess);
  const uint64_t salt = 0x1234;
  ASSERT_EQ(device_copy::keep(region, copy, size, salt, stream()), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(region, 0, rounded, stream()), cudaSuccess);
  ASSERT_EQ(device_copy::restore(region, copy, size, salt, stream()), cudaSuccess);
  std::vector<uint8_t> kept(static_cast<size_t>(rounded)), back(static_cast<size_t>(rounded));
  ASSERT_EQ(cudaMemcpyAsync(kept.data(), copy, rounded, cudaMemcpyDeviceToHost, stream()), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), region, rounded, cudaMemcpyDeviceToHost, stream()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream()), cudaSuccess);
  int64_t same_words = 0;
  for (int64_t w = 0; w + 8 <= size; w += 8)
    same_words += std::equal(data.begin() + w, data.begin() + w + 8, kept.begin() + w);
  EXPECT_EQ(same_words, 0);
  for (int64_t x = 0; x < size; x += 4099)
    EXPECT_EQ(static_cast<uint8_t>(kept[static_cast<size_t>(x)] ^ device_copy::mask_byte(x, salt)),
              data[static_cast<size_t>(x)]);
  back.resize(static_cast<size_t>(size));
  EXPECT_EQ(back, data);
  cudaFree(region);
  cudaFree(copy);
}

}  // namespace
}  // namespace nvfp4
