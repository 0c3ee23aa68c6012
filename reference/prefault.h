// Large per-output arrays (the reference's facts reach gigabytes on production shapes: 48 bytes
// an element, 805 MB at 4096 x 4096) are value-initialised by std::vector on one thread, and on a
// fresh mapping every 4 KiB page faults in turn: on the H200's host that resize took 397 ms for
// 805 MB, against 36 ms for the same pages faulted by 16 threads. PrefaultAllocator faults a large
// allocation's pages from every OpenMP thread before the vector writes it; it changes no value and
// no semantics of the vector.
#pragma once

#include <cstddef>
#include <memory>

namespace nvfp4 {

// Allocations of at least this many bytes are faulted in parallel; smaller ones are left alone.
constexpr size_t kPrefaultBytes = size_t(16) << 20;

// Touches one byte of every page of [p, p + bytes) from the OpenMP threads (a write of zero into
// memory that is about to be initialised).
void prefault_pages(void* p, size_t bytes);

template <typename T>
struct PrefaultAllocator {
  using value_type = T;
  PrefaultAllocator() = default;
  template <typename U>
  PrefaultAllocator(const PrefaultAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator
  T* allocate(size_t n) {
    T* p = std::allocator<T>().allocate(n);
    if (n * sizeof(T) >= kPrefaultBytes) prefault_pages(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, size_t n) { std::allocator<T>().deallocate(p, n); }
  template <typename U>
  bool operator==(const PrefaultAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const PrefaultAllocator<U>&) const { return false; }
};

}  // namespace nvfp4
