// The suite's random engine: the sequence of std::mt19937_64 (seeded the same way, so every seed
// draws the cases it always drew), with a bulk fill that twists the state as whole blocks. Drawing
// the 4M elements of a medium case was a third of its time in `run`, most of it libstdc++'s
// one-word-at-a-time twist compiled for the baseline instruction set; the block twist below is
// compiled for AVX2 as well and picked at load time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvfp4 {

class Rng {
 public:
  using result_type = uint64_t;
  static constexpr result_type default_seed = 5489u;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type(0); }

  explicit Rng(result_type value = default_seed) { seed(value); }
  void seed(result_type value);

  result_type operator()() {
    if (at_ == kWords) twist();
    return temper(state_[at_++]);
  }
  // The next `count` draws, in order: the same words as `count` calls of operator().
  void fill(uint64_t* out, std::size_t count);
  void discard(unsigned long long count);

  friend bool operator==(const Rng& x, const Rng& y);
  friend bool operator!=(const Rng& x, const Rng& y) { return !(x == y); }

  // MT19937-64's state size and output function, shared with the block fill (rng.cc).
  static constexpr int kWords = 312;
  static result_type temper(result_type z) {
    z ^= (z >> 29) & 0x5555555555555555ull;
    z ^= (z << 17) & 0x71D67FFFEDA60000ull;
    z ^= (z << 37) & 0xFFF7EEE000000000ull;
    return z ^ (z >> 43);
  }

 private:
  void twist();

  uint64_t state_[kWords];
  int at_ = kWords;
};

}  // namespace nvfp4
