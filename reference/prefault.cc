#include "reference/prefault.h"

#include <cstdint>

namespace nvfp4 {

void prefault_pages(void* p, size_t bytes) {
  constexpr int64_t kPage = 4096;
  volatile char* base = static_cast<volatile char*>(p);
  const int64_t n = static_cast<int64_t>(bytes);
#pragma omp parallel for schedule(static)
  for (int64_t at = 0; at < n; at += kPage) base[at] = 0;
}

}  // namespace nvfp4
