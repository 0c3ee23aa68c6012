// Host guarded buffers (mmap with PROT_NONE fences) and the guard patterns shared with CUDA.
#include "harness/device_buffers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/nvfp4_kernel_abi.h"

namespace nvfp4 {

void GuardDamage::record(bool in_before, int64_t at, uint8_t want, uint8_t got) {
  if (intact) {
    intact = false;
    before = in_before;
    offset = at;
    expected = want;
    actual = got;
  }
  ++damaged_bytes;
}

uint8_t guard_byte(GuardPattern pattern, int64_t index) {
  switch (pattern) {
    case GuardPattern::nan_scales:
      // Both E4M3 NaN encodings, so either semantics reads NaN.
      return index % 3 == 0 ? 0xFF : 0x7F;
    case GuardPattern::nan_fp16: {
      // FP16 NaN words 0x7E5A and 0xFDA5, little-endian: distinct from the runner's poisons.
      static const uint8_t kWords[4] = {0x5A, 0x7E, 0xA5, 0xFD};
      return kWords[index & 3];
    }
    case GuardPattern::bytes:
    default: {
      static const uint8_t kBytes[8] = {0xDE, 0xAD, 0xBE, 0xEF, 0x0B, 0xAD, 0xF0, 0x0D};
      return kBytes[index & 7];
    }
  }
}

std::string GuardDamage::describe(const std::string& buffer_name) const {
  if (intact) return buffer_name + ": guards intact";
  return fmt::format("{}: {} byte(s) of the guard {} the buffer were overwritten; the first at "
                     "offset {} from the buffer's start (expected 0x{:02x}, found 0x{:02x})",
                     buffer_name, damaged_bytes, before ? "before" : "after", offset, expected,
                     actual);
}

namespace {

// [PROT_NONE page][guard][data][guard, up to the page end][PROT_NONE page]. The data starts at a
// page offset of kGuardBytes, so it keeps the alignment kernels may rely on for vector loads.
class HostBuffer final : public GuardedBuffer {
 public:
  HostBuffer(int64_t bytes, GuardPattern pattern) : GuardedBuffer(bytes), pattern_(pattern) {
    page_ = sysconf(_SC_PAGESIZE);
    const int64_t inner = kGuardBytes + bytes + kGuardBytes;
    inner_ = (inner + page_ - 1) / page_ * page_;
    total_ = inner_ + 2 * page_;
    void* base = mmap(nullptr, static_cast<size_t>(total_), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<uint8_t*>(base);
    mprotect(base_, page_, PROT_NONE);
    mprotect(base_ + page_ + inner_, page_, PROT_NONE);
    region_ = base_ + page_;
    after_bytes_ = inner_ - kGuardBytes - bytes;
    write_guards();
  }
  ~HostBuffer() override { munmap(base_, static_cast<size_t>(total_)); }

  uint8_t* data() override { return region_ + kGuardBytes; }

  void upload(const uint8_t* src) override {
    if (size_ > 0) std::memcpy(data(), src, static_cast<size_t>(size_));
    write_guards();
  }

  std::vector<uint8_t> download(double) override {
    return std::vector<uint8_t>(data(), data() + size_);
  }

  void set_read_only(bool read_only) override {
    // From the page holding the data's first byte to the end of the region (the data starts at
    // kGuardBytes into it, a page boundary where pages are 4 KiB).
    uint8_t* first = base_ + (data() - base_) / page_ * page_;
    mprotect(first, static_cast<size_t>(region_ + inner_ - first), read_only ? PROT_READ : PROT_READ | PROT_WRITE);
  }

  GuardDamage check_guards(double) override {
    GuardDamage d;
    for (int64_t x = 0; x < kGuardBytes; ++x) {
      const uint8_t want = guard_byte(pattern_, x);
      if (region_[x] != want) d.record(true, x - kGuardBytes, want, region_[x]);
    }
    const uint8_t* after = data() + size_;
    for (int64_t x = 0; x < after_bytes_; ++x) {
      const uint8_t want = guard_byte(pattern_, x);
      if (after[x] != want) d.record(false, size_ + x, want, after[x]);
    }
    return d;
  }

 private:
  void write_guards() {
    for (int64_t x = 0; x < kGuardBytes; ++x) region_[x] = guard_byte(pattern_, x);
    uint8_t* after = data() + size_;
    for (int64_t x = 0; x < after_bytes_; ++x) after[x] = guard_byte(pattern_, x);
  }

  GuardPattern pattern_;
  int64_t page_ = 4096, inner_ = 0, total_ = 0, after_bytes_ = 0;
  uint8_t* base_ = nullptr;
  uint8_t* region_ = nullptr;
};

class HostMemory final : public KernelMemory {
 public:
  std::unique_ptr<GuardedBuffer> allocate(int64_t bytes, GuardPattern pattern) override {
    return std::make_unique<HostBuffer>(bytes, pattern);
  }
  void* stream() override { return nullptr; }
  // A host kernel has finished when it returns; a hang is the worker's watchdog's business.
  void synchronize(double) override {}
};

}  // namespace

std::unique_ptr<KernelMemory> make_host_memory() { return std::make_unique<HostMemory>(); }

std::unique_ptr<KernelMemory> KernelMemory::create(uint32_t memory) {
  if (memory == NVFP4_MEMORY_HOST) return make_host_memory();
  if (memory == NVFP4_MEMORY_CUDA) {
#if defined(NVFP4_HAVE_CUDA)
    return make_cuda_memory();
#else
    throw DeviceError("cuda-error", "this nvfp4check was built without CUDA (NVFP4_CUDA=OFF)");
#endif
  }
  throw std::invalid_argument(fmt::format("unknown kernel memory kind {}", memory));
}

#if !defined(NVFP4_HAVE_CUDA)
bool cuda_memory_available(std::string* why) {
  if (why) *why = "built without CUDA (NVFP4_CUDA=OFF)";
  return false;
}
#endif

}  // namespace nvfp4
