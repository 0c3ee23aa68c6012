// Small NVFP4 problems for the kernels' unit tests: random data in SPEC's exact regime (so any
// FP32-accumulating kernel must agree bit for bit), the permuted copy of linear scales with NaN
// padding, and looking up a built-in kernel by name. Test-only; kernels never include it.
#pragma once

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/scale_layout.h"
#include "kernels/block_scaled_decode.h"
#include "kernels/registry.h"

namespace nvfp4 {

// One problem with LINEAR scales, as the tests build it.
struct SmallProblem {
  uint32_t op = NVFP4_OP_GEMM;
  int64_t m = 3, n = 5, k = 34, l = 2;
  float alpha = 1.0f;
  std::vector<uint8_t> a, b, sfa, sfb;  // sfa/sfb LINEAR
  int64_t kb() const { return (k + 15) / 16; }
  // The ABI's view of it with these tensors (the one place these tests fill the struct).
  nvfp4_problem abi(const uint8_t* pa, const uint8_t* pb, const uint8_t* psfa, const uint8_t* psfb, uint32_t layout,
                    uint16_t* pc, void* stream = nullptr) const {
    nvfp4_problem p{};
    p.op = op;
    p.m = m, p.n = n, p.k = k, p.l = l;
    p.a = pa, p.b = pb, p.sfa = psfa, p.sfb = psfb;
    p.sf_layout = layout;
    p.alpha = alpha;
    p.c = pc;
    p.stream = stream;
    return p;
  }
};

// Linear -> permuted, padding filled with NaN scale bytes so a kernel that reads it shows NaN.
// (The reference's converter: the kernels' own offset function is tested against SPEC's formula
// in host_kernels_test, independently.)
inline std::vector<uint8_t> to_permuted(const std::vector<uint8_t>& linear, int64_t rows, int64_t kb, int64_t l) {
  return sf_to_permuted(linear.data(), rows, kb, l, 0x7F);
}

// Random data whose sums stay in SPEC's exact regime: scales 0.5, 1, 2 (and their negatives).
inline SmallProblem random_problem(std::mt19937_64& rng, uint32_t op, int64_t m, int64_t n, int64_t k, int64_t l) {
  SmallProblem t;
  t.op = op;
  t.m = m, t.n = n, t.k = k, t.l = l;
  const uint8_t scales[6] = {0x30, 0x38, 0x40, 0xB0, 0xB8, 0xC0};
  t.a.resize(l * m * k / 2);
  t.b.resize(l * n * k / 2);
  for (auto& v : t.a) v = static_cast<uint8_t>(rng());
  for (auto& v : t.b) v = static_cast<uint8_t>(rng());
  t.sfa.resize(l * m * t.kb());
  t.sfb.resize(l * n * t.kb());
  for (auto& v : t.sfa) v = scales[rng() % 6];
  for (auto& v : t.sfb) v = scales[rng() % 6];
  return t;
}

// A built-in kernel by name; throws when the build has no such kernel.
inline const Kernel& builtin(const std::string& name) {
  static const Registry r = Registry::with_builtins();
  const Kernel* k = r.find(name);
  if (k == nullptr) throw std::runtime_error("no built-in kernel " + name);
  return *k;
}

}  // namespace nvfp4
