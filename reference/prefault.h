// Large per-output arrays (the reference's facts reach gigabytes on production shapes: 48 bytes
// an element, 805 MB at 4096 x 4096) are value-initialised by std::vector on one thread, and on a
// fresh mapping every 4 KiB page faults in turn: on the H200's host that resize took 397 ms for
// 805 MB, against 36 ms for the same pages faulted by 16 threads. PrefaultAllocator faults a large
// allocation's pages from every OpenMP thread before the vector writes it; it changes no value and
// no semantics of the vector.
//
// A case's reference is made and dropped every case, and glibc maps every block past 32 MiB alone
// and unmaps it on free (32 MiB is the most M_MMAP_THRESHOLD takes, and what `nvfp4check` sets),
// so a dual case of a million outputs (G's and U's facts and the silu values, 48 bytes each)
// faulted 150 MB of fresh pages every time: in a virtual machine, where a fault costs
// microseconds, most of the dual schedule's reference. Blocks past 32 MiB are therefore kept when
// freed, up to a bound, and handed to the next allocation they fit, their pages already there.
// Smaller ones stay malloc's, whose heap keeps them: kept here too, eight lanes' grouped cases
// (16-32 MiB facts) ran 4-8% slower on an H100's host, each lane mapping and faulting blocks that
// malloc would have reused.
#pragma once

#include <cstddef>
#include <memory>

namespace nvfp4 {

// Allocations of at least this many bytes are faulted in parallel; smaller ones are left alone.
constexpr size_t kPrefaultBytes = size_t(16) << 20;
// Allocations of at least this many bytes come from the kept blocks (large_block_allocate).
constexpr size_t kKeptBlockBytes = size_t(32) << 20;

// Touches one byte of every page of [p, p + bytes) from the OpenMP threads (a write of zero into
// memory that is about to be initialised).
void prefault_pages(void* p, size_t bytes);

// A block of at least `bytes` whose pages are in memory: a kept block that
// holds it and is at most four times as large, else a fresh mapping faulted by prefault_pages.
// Throws std::bad_alloc when nothing can be mapped.
void* large_block_allocate(size_t bytes);
// Gives back a block of large_block_allocate (bytes as asked for it): kept for a later allocation
// while the kept blocks stay within large_block_limit(), the oldest unmapped first, else unmapped.
void large_block_free(void* p, size_t bytes);
// What may be kept: a sixteenth of the machine's memory, at most 1 GiB, unless set (tests); setting
// it unmaps what is kept beyond it, and kDefaultLargeBlockLimit sets the default again.
size_t large_block_limit();
constexpr size_t kDefaultLargeBlockLimit = static_cast<size_t>(-1);
void set_large_block_limit(size_t bytes);
// Bytes kept now (tests).
size_t large_blocks_kept();

template <typename T>
struct PrefaultAllocator {
  using value_type = T;
  PrefaultAllocator() = default;
  template <typename U>
  PrefaultAllocator(const PrefaultAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    if (n * sizeof(T) >= kKeptBlockBytes) return static_cast<T*>(large_block_allocate(n * sizeof(T)));
    T* p = std::allocator<T>().allocate(n);
    if (n * sizeof(T) >= kPrefaultBytes) prefault_pages(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) >= kKeptBlockBytes) {
      large_block_free(p, n * sizeof(T));
    } else {
      std::allocator<T>().deallocate(p, n);
    }
  }
  template <typename U>
  bool operator==(const PrefaultAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const PrefaultAllocator<U>&) const { return false; }
};

}  // namespace nvfp4
