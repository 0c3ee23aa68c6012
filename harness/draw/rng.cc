#include "harness/draw/rng.h"

#include <algorithm>
#include <cstring>

namespace nvfp4 {
namespace {

constexpr int kN = Rng::kWords, kM = 156;
constexpr uint64_t kMatrix = 0xB5026F5AA96619E9ull, kUpper = 0xFFFFFFFF80000000ull, kLower = 0x7FFFFFFFull;

inline uint64_t twisted(uint64_t here, uint64_t next, uint64_t far) {
  const uint64_t y = (here & kUpper) | (next & kLower);
  return far ^ (y >> 1) ^ ((next & 1u) ? kMatrix : 0);
}

// The recurrence of MT19937-64 over a whole state: each word reads words at distance 1 and 156,
// so the loops vectorize. Compiled twice on x86-64 (AVX2 and the baseline), picked at load time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void twist_state(uint64_t* x) {
  for (int i = 0; i < kN - kM; ++i) x[i] = twisted(x[i], x[i + 1], x[i + kM]);
  for (int i = kN - kM; i < kN - 1; ++i) x[i] = twisted(x[i], x[i + 1], x[i + kM - kN]);
  x[kN - 1] = twisted(x[kN - 1], x[0], x[kM - 1]);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void temper_words(const uint64_t* from, uint64_t* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = Rng::temper(from[i]);
}

}  // namespace

void Rng::seed(result_type value) {
  state_[0] = value;
  for (int i = 1; i < kN; ++i)
    state_[i] = 6364136223846793005ull * (state_[i - 1] ^ (state_[i - 1] >> 62)) + static_cast<uint64_t>(i);
  at_ = kN;
}

void Rng::twist() {
  twist_state(state_);
  at_ = 0;
}

void Rng::fill(uint64_t* out, std::size_t count) {
  while (count > 0) {
    if (at_ == kN) twist();
    const std::size_t take = std::min<std::size_t>(count, static_cast<std::size_t>(kN - at_));
    temper_words(state_ + at_, out, take);
    at_ += static_cast<int>(take);
    out += take;
    count -= take;
  }
}

void Rng::discard(unsigned long long count) {
  while (count > 0) {
    if (at_ == kN) twist();
    const unsigned long long take = std::min<unsigned long long>(count, static_cast<unsigned long long>(kN - at_));
    at_ += static_cast<int>(take);
    count -= take;
  }
}

bool operator==(const Rng& x, const Rng& y) {
  // Equal when they will draw the same: the same state at the same position.
  return x.at_ == y.at_ && std::memcmp(x.state_, y.state_, sizeof x.state_) == 0;
}

}  // namespace nvfp4
