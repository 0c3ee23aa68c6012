#include "reference/prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace nvfp4 {

void prefault_pages(void* p, size_t bytes) {
  constexpr int64_t kPage = 4096;
  volatile char* base = static_cast<volatile char*>(p);
  const int64_t n = static_cast<int64_t>(bytes);
#pragma omp parallel for schedule(static)
  for (int64_t at = 0; at < n; at += kPage) base[at] = 0;
}

namespace {

struct Block {
  void* p;
  size_t mapped;  // bytes of the mapping (whole pages)
};

// Blocks given back and kept (oldest first), and the mapped size of every block lent out (a
// kept block may be larger than the allocation it serves, and the vector frees it by its own size).
struct BlockCache {
  std::mutex mutex;
  std::atomic<size_t> limit{kDefaultLargeBlockLimit};  // set_large_block_limit's
  std::vector<Block> kept;
  size_t kept_bytes = 0;
  std::unordered_map<void*, size_t> lent;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: blocks may be freed during exit
  return *c;
}

// Moves the oldest kept blocks to `unmap` until the rest fit in `limit` (c.mutex held).
void keep_within(BlockCache& c, size_t limit, std::vector<Block>& unmap) {
  size_t drop = 0;
  while (c.kept_bytes > limit) {
    c.kept_bytes -= c.kept[drop].mapped;
    unmap.push_back(c.kept[drop++]);
  }
  c.kept.erase(c.kept.begin(), c.kept.begin() + static_cast<std::ptrdiff_t>(drop));
}

size_t page_round(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

size_t large_block_limit() {
  static const size_t limit = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const size_t memory = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
    return std::min<size_t>(size_t(1) << 30, memory / 16);
  }();
  const size_t set = cache().limit.load(std::memory_order_relaxed);
  return set != kDefaultLargeBlockLimit ? set : limit;
}

void set_large_block_limit(size_t bytes) {
  BlockCache& c = cache();
  std::vector<Block> unmap;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.limit.store(bytes, std::memory_order_relaxed);
    keep_within(c, large_block_limit(), unmap);
  }
  for (const Block& b : unmap) munmap(b.p, b.mapped);
}

size_t large_blocks_kept() {
  BlockCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.kept_bytes;
}

void* large_block_allocate(size_t bytes) {
  const size_t need = page_round(bytes);
  BlockCache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    // The smallest kept block that holds it, unless it would tie up more than four times the need.
    auto best = c.kept.end();
    for (auto it = c.kept.begin(); it != c.kept.end(); ++it)
      if (it->mapped >= need && it->mapped / 4 <= need && (best == c.kept.end() || it->mapped < best->mapped)) best = it;
    if (best != c.kept.end()) {
      const Block b = *best;
      c.kept.erase(best);
      c.kept_bytes -= b.mapped;
      c.lent.emplace(b.p, b.mapped);
      return b.p;
    }
  }
  void* p = mmap(nullptr, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  prefault_pages(p, need);
  std::lock_guard<std::mutex> lock(c.mutex);
  try {
    c.lent.emplace(p, need);
  } catch (...) {
    munmap(p, need);
    throw;
  }
  return p;
}

void large_block_free(void* p, size_t bytes) {
  if (p == nullptr) return;
  BlockCache& c = cache();
  std::vector<Block> unmap;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    const auto it = c.lent.find(p);
    const size_t mapped = it != c.lent.end() ? it->second : page_round(bytes);
    if (it != c.lent.end()) c.lent.erase(it);
    if (mapped > large_block_limit()) {
      unmap.push_back({p, mapped});
    } else {
      try {
        c.kept.push_back({p, mapped});
        c.kept_bytes += mapped;
      } catch (...) {
        unmap.push_back({p, mapped});
      }
      keep_within(c, large_block_limit(), unmap);
    }
  }
  for (const Block& b : unmap) munmap(b.p, b.mapped);  // outside the lock: unmapping flushes TLBs
}

}  // namespace nvfp4
