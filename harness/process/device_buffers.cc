// Host guarded buffers (mmap with PROT_NONE fences) and the guard patterns shared with CUDA.
#include "harness/process/device_buffers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
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

void write_guard_pattern(uint8_t* at, int64_t count, GuardPattern pattern) {
  // The patterns repeat every 3, 4 or 8 bytes: 24 bytes (a common multiple), then doubling copies
  // (every copy starts at a multiple of 24, so the pattern continues).
  const int64_t first = std::min<int64_t>(count, 24);
  for (int64_t x = 0; x < first; ++x) at[x] = guard_byte(pattern, x);
  for (int64_t done = first; done < count;) {
    const int64_t n = std::min(done, count - done);
    std::memcpy(at + done, at, static_cast<size_t>(n));
    done += n;
  }
}

GuardDamage GuardedBuffer::staged_guard_damage() const {
  GuardDamage d;
  const uint8_t* before = staged_region();
  const uint8_t* after = before + kGuardBytes + size_;
  // memcmp against the expected pattern first (almost always intact); only a damaged region is
  // walked byte by byte.
  const int64_t after_n = after_bytes();
  thread_local std::vector<uint8_t> expect[3];
  std::vector<uint8_t>& want = expect[static_cast<int>(pattern_)];
  const int64_t need = std::max(kGuardBytes, after_n);
  if (static_cast<int64_t>(want.size()) < need) {
    want.resize(static_cast<size_t>(need));
    write_guard_pattern(want.data(), need, pattern_);
  }
  const bool before_ok = std::memcmp(before, want.data(), kGuardBytes) == 0;
  const bool after_ok = std::memcmp(after, want.data(), static_cast<size_t>(after_n)) == 0;
  for (int64_t x = 0; x < kGuardBytes && !before_ok; ++x)
    if (before[x] != want[x]) d.record(true, x - kGuardBytes, want[x], before[x]);
  for (int64_t x = 0; x < after_n && !after_ok; ++x)
    if (after[x] != want[x]) d.record(false, size_ + x, want[x], after[x]);
  return d;
}

std::vector<uint8_t> GuardedBuffer::download(double timeout_s) {
  fetch_async();
  wait(timeout_s);
  return std::vector<uint8_t>(staged_data(), staged_data() + size_);
}

GuardDamage GuardedBuffer::check_guards(double timeout_s) {
  fetch_async();
  wait(timeout_s);
  return staged_guard_damage();
}

std::vector<std::unique_ptr<GuardedBuffer>> KernelMemory::allocate_all(const std::vector<Request>& requests) {
  std::vector<std::unique_ptr<GuardedBuffer>> all;
  all.reserve(requests.size());
  for (const Request& r : requests) all.push_back(allocate(r.bytes, r.pattern));
  return all;
}

std::string GuardDamage::describe(const std::string& buffer_name) const {
  if (intact) return buffer_name + ": guards intact";
  return fmt::format("{}: {} byte(s) of the guard {} the buffer were overwritten; the first at "
                     "offset {} from the buffer's start (expected 0x{:02x}, found 0x{:02x})",
                     buffer_name, damaged_bytes, before ? "before" : "after", offset, expected,
                     actual);
}

namespace {

// A host buffer's memory: the fenced mapping the kernel is handed, [PROT_NONE page][region]
// [PROT_NONE page], and, where the region is a memory file, the same region mapped a second time,
// writable, for the worker's own writes (else `writer` is the region itself).
struct HostMapping {
  uint8_t* base = nullptr;    // the first fence page
  uint8_t* writer = nullptr;  // the region, writable whatever the kernel's view allows
  bool shared = false;        // writer is a second mapping (unmapped with the buffer)
  bool read_only = false;     // the kernel's view of the data and the guard after it
};

// Mappings kept for reuse, by total size. One with a second mapping keeps its protection: the
// next buffer of its size is most often the same case's input again, which then needs none.
std::mutex g_host_pool_mutex;
std::multimap<int64_t, HostMapping> g_host_pool;  // total bytes -> mapping
int64_t g_host_pool_bytes = 0;
constexpr int64_t kHostPoolLimit = int64_t(256) << 20;
// Each kept mapping holds two or three of the process's memory areas (below), so the pool is
// bounded by count as well as by bytes: 256 MiB of small buffers would be 60,000 areas.
constexpr size_t kHostPoolCount = 4096;

// Mappings with a second view in existence (lent or pooled), and how many there may be. A process
// has at most vm.max_map_count (65,530 by default) memory areas, and a buffer with two views takes
// three where an anonymous one takes two (the fences of neighbours merge): a grouped case of
// thousands of groups, five buffers a group, ran out at 4,000 groups with every buffer viewed
// twice, against over 8,000 before. A call protects at most kMaxProtected inputs (kernel_call.cc),
// so buffers past a couple of thousand gain nothing from a second view: they are anonymous.
std::atomic<int64_t> g_shared_mappings{0};
constexpr int64_t kMaxSharedMappings = 2048;

// [PROT_NONE page][inner bytes][PROT_NONE page], all of it PROT_NONE for now.
uint8_t* reserve_fenced(int64_t page, int64_t inner) {
  void* base = mmap(nullptr, static_cast<size_t>(inner + 2 * page), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  return static_cast<uint8_t*>(base);
}

// The region of a reservation anonymous and writable in place, the fences staying PROT_NONE: a
// mapping without a second view. On failure the reservation is unmapped.
HostMapping anonymous_region(uint8_t* base, int64_t page, int64_t inner) {
  if (mmap(base + page, static_cast<size_t>(inner), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
           -1, 0) == MAP_FAILED) {
    munmap(base, static_cast<size_t>(inner + 2 * page));
    throw std::bad_alloc();
  }
  HostMapping m;
  m.base = base;
  m.writer = base + page;
  return m;
}

// A fenced mapping of `inner` bytes between two fence pages, its region a memory file mapped a
// second time for the worker's writes where memfd_create is there and kMaxSharedMappings allows,
// else anonymous memory.
HostMapping map_host(int64_t page, int64_t inner) {
  uint8_t* base = reserve_fenced(page, inner);
  uint8_t* region = base + page;
  const bool may_share = g_shared_mappings.fetch_add(1) < kMaxSharedMappings;
  const int fd = may_share ? memfd_create("nvfp4-host-buffer", MFD_CLOEXEC) : -1;
  if (fd >= 0) {
    void* writer = MAP_FAILED;
    if (ftruncate(fd, inner) == 0 &&
        mmap(region, static_cast<size_t>(inner), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED)
      writer = mmap(nullptr, static_cast<size_t>(inner), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);  // the mappings keep the file
    if (writer != MAP_FAILED) {
      HostMapping m;
      m.base = base;
      m.writer = static_cast<uint8_t*>(writer);
      m.shared = true;
      return m;
    }
  }
  --g_shared_mappings;
  return anonymous_region(base, page, inner);
}

void unmap_host(const HostMapping& m, int64_t page, int64_t inner) {
  if (m.shared) {
    munmap(m.writer, static_cast<size_t>(inner));
    --g_shared_mappings;
  }
  munmap(m.base, static_cast<size_t>(inner + 2 * page));
}

// What the host buffers share: the region the kernel is handed, [guard][data][guard], its
// guards checked in place after the call.
class HostRegionBuffer : public GuardedBuffer {
 public:
  using GuardedBuffer::GuardedBuffer;
  uint8_t* data() override { return region_ + kGuardBytes; }
  const uint8_t* staged_data() const override { return region_ + kGuardBytes; }

 protected:
  const uint8_t* staged_region() const override { return region_; }
  int64_t after_bytes() const override { return after_bytes_; }
  void wait(double) override {}
  // Both guards, written through `writer`: the region itself, or a writable view of it.
  void write_guards(uint8_t* writer) {
    write_guard_pattern(writer, kGuardBytes, pattern_);
    write_guard_pattern(writer + kGuardBytes + size_, after_bytes_, pattern_);
  }

  uint8_t* region_ = nullptr;
  int64_t after_bytes_ = 0;
};

// [PROT_NONE page][guard][data][guard, up to the page end][PROT_NONE page]. The data starts at a
// page offset of kGuardBytes, so it keeps the alignment kernels may rely on for vector loads.
// The worker writes (uploads, guards) through the writable second mapping where there is one, so
// an input made read-only for a call stays so until its buffer ends, however often it is written
// again: each mprotect flushes the TLB of every core that runs one of the process's threads (an
// interrupt each, dear in a virtual machine), and toggling an input's protection around each
// upload was a third to two fifths of a grouped host kernel's process's time.
class HostBuffer final : public HostRegionBuffer {
 public:
  HostBuffer(int64_t bytes, GuardPattern pattern) : HostRegionBuffer(bytes, pattern) {
    page_ = sysconf(_SC_PAGESIZE);
    const int64_t inner = kGuardBytes + bytes + kGuardBytes;
    inner_ = (inner + page_ - 1) / page_ * page_;
    total_ = inner_ + 2 * page_;
    {
      std::lock_guard<std::mutex> lock(g_host_pool_mutex);
      auto it = g_host_pool.find(total_);
      if (it != g_host_pool.end()) {
        mapping_ = it->second;
        g_host_pool_bytes -= total_;
        g_host_pool.erase(it);
      }
    }
    if (!mapping_.base) mapping_ = map_host(page_, inner_);
    region_ = mapping_.base + page_;
    after_bytes_ = inner_ - kGuardBytes - bytes;
    write_guards(mapping_.writer);
  }
  ~HostBuffer() override {
    if (!mapping_.shared) set_read_only(false);  // the next one writes its guards in place
    std::lock_guard<std::mutex> lock(g_host_pool_mutex);
    if (g_host_pool_bytes + total_ <= kHostPoolLimit && g_host_pool.size() < kHostPoolCount) {
      g_host_pool.emplace(total_, mapping_);
      g_host_pool_bytes += total_;
    } else {
      unmap_host(mapping_, page_, inner_);
    }
  }

  void upload_from(const std::function<void(uint8_t*)>& fill) override {
    if (!mapping_.shared) set_read_only(false);  // an input may still be read-only from its last call
    fill(mapping_.writer + kGuardBytes);
    write_guards(mapping_.writer);
  }

  void set_read_only(bool read_only) override {
    if (read_only == mapping_.read_only) return;
    mapping_.read_only = read_only;
    // From the page holding the data's first byte to the end of the region (the data starts at
    // kGuardBytes into it, a page boundary where pages are 4 KiB).
    uint8_t* first = mapping_.base + (data() - mapping_.base) / page_ * page_;
    mprotect(first, static_cast<size_t>(region_ + inner_ - first), read_only ? PROT_READ : PROT_READ | PROT_WRITE);
  }

 private:
  int64_t page_ = 4096, inner_ = 0, total_ = 0;
  HostMapping mapping_;
};

// One writable anonymous block between two fence pages, shared by the buffers of a call past
// kMaxFencedBuffers, each region [guard][data][guard] at shared_region_bytes' steps.
class HostBlock {
 public:
  explicit HostBlock(int64_t bytes)
      : page_(sysconf(_SC_PAGESIZE)), inner_((bytes + page_ - 1) / page_ * page_),
        mapping_(anonymous_region(reserve_fenced(page_, inner_), page_, inner_)) {}
  ~HostBlock() { unmap_host(mapping_, page_, inner_); }
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;
  uint8_t* region() const { return mapping_.writer; }  // the first writable byte

 private:
  int64_t page_, inner_;
  HostMapping mapping_;
};

// A buffer in a shared block: no fence pages of its own and never read-only, its guards checked
// after the call like every buffer's.
class HostBlockBuffer final : public HostRegionBuffer {
 public:
  HostBlockBuffer(int64_t bytes, GuardPattern pattern, std::shared_ptr<HostBlock> block, uint8_t* region,
                  int64_t length)
      : HostRegionBuffer(bytes, pattern), block_(std::move(block)) {
    region_ = region;
    after_bytes_ = length - kGuardBytes - bytes;
    write_guards(region_);
  }
  void upload_from(const std::function<void(uint8_t*)>& fill) override {
    fill(data());
    write_guards(region_);
  }

 private:
  std::shared_ptr<HostBlock> block_;  // unmapped with its last buffer
};

// A call's buffers past this many share blocks instead of having fence pages each. A fenced
// buffer takes two or three of the process's memory areas, and a process has at most
// vm.max_map_count of them (65,530 by default): a grouped case of 7,000 groups, five buffers a
// group, ran the kernel's process out of them, and the honest kernel was failed as a crash. The
// first buffers (a call's inputs come first, and a call protects at most its first 1,040) keep
// their fences; past them a write out of bounds still shows in the guards, a read no longer
// faults.
constexpr size_t kMaxFencedBuffers = 8192;

class HostMemory final : public KernelMemory {
 public:
  std::unique_ptr<GuardedBuffer> allocate(int64_t bytes, GuardPattern pattern) override {
    return std::make_unique<HostBuffer>(bytes, pattern);
  }
  std::vector<std::unique_ptr<GuardedBuffer>> allocate_all(const std::vector<Request>& requests) override {
    std::vector<std::unique_ptr<GuardedBuffer>> all;
    all.reserve(requests.size());
    std::shared_ptr<HostBlock> block;
    int64_t used = 0, capacity = 0;
    for (size_t x = 0; x < requests.size(); ++x) {
      const Request& r = requests[x];
      if (x < kMaxFencedBuffers) {
        all.push_back(allocate(r.bytes, r.pattern));
        continue;
      }
      const int64_t length = shared_region_bytes(r.bytes);
      if (!block || used + length > capacity) {
        // The next block holds as many of the remaining requests as fit in kSharedBlockBytes (one
        // larger than that alone): a call of a few buffers past the limit maps no more than it uses.
        int64_t want = 0;
        for (size_t y = x; y < requests.size(); ++y) {
          const int64_t next = shared_region_bytes(requests[y].bytes);
          if (want > 0 && want + next > kSharedBlockBytes) break;
          want += next;
        }
        block = std::make_shared<HostBlock>(want);
        used = 0;
        capacity = want;
      }
      all.push_back(std::make_unique<HostBlockBuffer>(r.bytes, r.pattern, block, block->region() + used, length));
      used += length;
    }
    return all;
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
    throw DeviceError(DeviceError::Kind::cuda_error, "this nvfp4check was built without CUDA (NVFP4_CUDA=OFF)");
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
