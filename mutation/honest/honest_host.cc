// The host honest variants. Each output element's k products a*sa*b*sb are formed exactly in
// FP32 (at most 12 significant bits, magnitude >= 2^-20) and then summed the variant's way.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/block_scaled_decode.h"
#include "kernels/problem_fits.h"
#include "mutation/honest/honest_dual.h"
#include "mutation/honest/honest_variants.h"
#include "mutation/honest/rounding.h"

namespace nvfp4::honest {
namespace {

using kern::e2m1_code;
using kern::e2m1_to_float;
using kern::e4m3_to_float;
using kern::fp16_from_double;
using kern::scale_offset;

float pairwise_sum(const float* v, int64_t count) {
  if (count == 1) return v[0];
  const int64_t half = count / 2;
  return pairwise_sum(v, half) + pairwise_sum(v + half, count - half);
}

// A fresh, seeded order for every call: run-to-run differences are the point of this variant
// (declared NONDETERMINISTIC); seeding from a call counter keeps a process reproducible.
uint64_t next_split_seed() {
  static std::atomic<uint64_t> calls{0};
  return 0x9E3779B97F4A7C15ull * (calls.fetch_add(1) + 1);
}

float split_k_sum(const float* v, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t chunks = std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(count, 8))(rng);
  // chunks-1 distinct cut points in [1, count).
  std::vector<int64_t> cuts;
  while (static_cast<int64_t>(cuts.size()) < chunks - 1) {
    const int64_t c = std::uniform_int_distribution<int64_t>(1, count - 1)(rng);
    if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(count);
  std::vector<float> partial;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    float s = 0.0f;
    for (int64_t x = cuts[c]; x < cuts[c + 1]; ++x) s += v[x];
    partial.push_back(s);
  }
  std::shuffle(partial.begin(), partial.end(), rng);
  float total = 0.0f;
  for (float s : partial) total += s;
  return total;
}

int run_host_dual(const nvfp4_problem* p) {
  const uint32_t out = kern::problem_out_type(p);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < p->l; ++b)
    for (int64_t i = 0; i < p->m; ++i)
      for (int64_t j = 0; j < p->n; ++j) dual_fp32_element<SiluForm::reciprocal>(*p, out, b, i, j);
  return NVFP4_OK;
}

}  // namespace

int run_host_variant(HostVariant v, const nvfp4_problem* p) {
  if (v == HostVariant::dual_fp32) return run_host_dual(p);
  const int64_t m = p->m, n = p->n, k = p->k, l = p->l, kb = (k + 15) / 16, row_bytes = k / 2;
  const bool signed_scales = v == HostVariant::signed_scales;
  const uint32_t layout = p->sf_layout;
  const float alpha = p->alpha;
  const uint64_t call_seed = v == HostVariant::split_k_random ? next_split_seed() : 0;

#pragma omp parallel
  {
    std::vector<float> prod(static_cast<size_t>(k));
    std::vector<float> a_deq(static_cast<size_t>(k));
    std::vector<uint16_t> a_half(static_cast<size_t>(k));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < l; ++b) {
      for (int64_t i = 0; i < m; ++i) {
        const uint8_t* a_row = p->a + (b * m + i) * row_bytes;
        // A's row dequantized once per row: a*sa (exact in FP32, and in FP16 too).
        for (int64_t x = 0; x < k; ++x) {
          const float sa = e4m3_to_float(p->sfa[scale_offset(layout, m, kb, b, i, x / 16)], signed_scales);
          a_deq[x] = e2m1_to_float(e2m1_code(a_row, x)) * sa;
          if (v == HostVariant::fp16_dequant) a_half[x] = fp16_from_double(a_deq[x]);
        }
        for (int64_t j = 0; j < n; ++j) {
          const uint8_t* b_row = p->b + (b * n + j) * row_bytes;
          for (int64_t x = 0; x < k; ++x) {
            const float sb = e4m3_to_float(p->sfb[scale_offset(layout, n, kb, b, j, x / 16)], signed_scales);
            prod[x] = a_deq[x] * (e2m1_to_float(e2m1_code(b_row, x)) * sb);
          }
          uint16_t out;
          switch (v) {
            case HostVariant::reverse: {
              float acc = 0.0f;
              for (int64_t x = k - 1; x >= 0; --x) acc += prod[x];
              out = fp16_from_double(alpha * acc);
              break;
            }
            case HostVariant::pairwise:
              out = fp16_from_double(alpha * pairwise_sum(prod.data(), k));
              break;
            case HostVariant::split_k_random: {
              const uint64_t seed = call_seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>((b * m + i) * n + j + 1));
              out = fp16_from_double(alpha * split_k_sum(prod.data(), k, seed));
              break;
            }
            case HostVariant::fp64: {
              double acc = 0.0;
              for (int64_t x = 0; x < k; ++x) acc += prod[x];
              out = fp16_from_double(static_cast<double>(alpha) * acc);
              break;
            }
            case HostVariant::truncating: {
              float acc = 0.0f;
              for (int64_t x = 0; x < k; ++x) acc = kern::add_toward_zero(acc, prod[x]);
              out = fp16_from_double(alpha * acc);
              break;
            }
            case HostVariant::fp16_dequant: {
              float acc = 0.0f;
              for (int64_t x = 0; x < k; ++x) {
                const float sb = e4m3_to_float(p->sfb[scale_offset(layout, n, kb, b, j, x / 16)], false);
                const uint16_t b_half = fp16_from_double(e2m1_to_float(e2m1_code(b_row, x)) * sb);
                acc = std::fma(kern::float_from_fp16(a_half[x]), kern::float_from_fp16(b_half), acc);
              }
              out = fp16_from_double(alpha * acc);
              break;
            }
            case HostVariant::forward:
            case HostVariant::signed_scales:
            default: {
              float acc = 0.0f;
              for (int64_t x = 0; x < k; ++x) acc += prod[x];
              out = fp16_from_double(alpha * acc);
              break;
            }
          }
          p->c[(b * m + i) * n + j] = out;
        }
      }
    }
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::honest
