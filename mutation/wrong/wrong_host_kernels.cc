// The honest host kernel and its deliberately broken variants (see wrong_host_kernels.h).
#include "mutation/wrong/wrong_host_kernels.h"

#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "reference/formats.h"
#include "reference/fp16.h"
#include "reference/scale_layout.h"

namespace nvfp4::test {
namespace {

constexpr uint32_t kBothOps = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);

// What each kernel gets wrong.
enum Bug {
  kHonest,
  kHonestM4,             // honest, declares m_multiple 4 (and refuses the rest properly)
  kUnwritten,            // skips the last element of every batch
  kWritePastEnd,         // writes one element past the end of C
  kModifiesInput,        // flips bits of a[0] after computing
  kStaleCache,           // returns the result cached for the same A pointer
  kNondeterministic,     // every second call writes -0 where the result is +0
  kIgnoresUnsupported,   // declares m_multiple 4, computes any m anyway
  kTouchesCWhenRefusing, // declares m_multiple 4, refuses properly but writes C first
  kRefusesSupported,     // declares everything, refuses m > 3
  kWrongAnswer,          // one FP16 ulp off everywhere
  kReadsPadding,         // multiplies a zero by every scale cell of its tile row, padding included
  kCount
};

const nvfp4_kernel_info kInfos[kCount] = {
    {NVFP4_ABI_VERSION, "honest_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "honest_m4_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 4, 1, 1, 0},
    {NVFP4_ABI_VERSION, "unwritten_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "write_past_end_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "modifies_input_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "stale_cache_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "nondeterministic_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "ignores_unsupported_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 4, 1, 1, 0},
    {NVFP4_ABI_VERSION, "touches_c_when_refusing_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 4, 1, 1, 0},
    {NVFP4_ABI_VERSION, "refuses_supported_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "wrong_answer_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
    {NVFP4_ABI_VERSION, "reads_padding_host", NVFP4_MEMORY_HOST, kBothOps, kBothLayouts, 0, 1, 1, 1, 0},
};

float e2m1_value(uint8_t code) { return 0.5f * static_cast<float>(e2m1_twice(code)); }

float e4m3_value(uint8_t byte, bool signed_scales) {
  const ScaleValue v = e4m3_decode(byte, signed_scales ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3);
  if (v.nan) return NAN;
  return static_cast<float>(v.sign) * std::ldexp(static_cast<float>(v.sig), v.exp);
}

// One rounding of a float to FP16, nearest-even, through the reference's exact rounding.
uint16_t float_to_fp16(float f) {
  if (std::isnan(f)) return 0x7E00;
  if (std::isinf(f)) return f < 0 ? 0xFC00 : 0x7C00;
  int exp = 0;
  const float frac = std::frexp(std::fabs(f), &exp);  // |f| = frac * 2^exp, frac in [0.5, 1)
  const uint32_t sig = static_cast<uint32_t>(std::ldexp(frac, 24));
  const uint16_t h = fp16_round(std::signbit(f), sig, exp - 24);
  return (f == 0 && std::signbit(f)) ? 0x8000 : h;
}

int64_t sf_offset(const nvfp4_problem* p, int64_t rows, int64_t b, int64_t r, int64_t s) {
  const int64_t kb = (p->k + 15) / 16;
  return p->sf_layout == NVFP4_SF_PERMUTED ? sf_permuted_offset(rows, kb, b, r, s) : sf_linear_offset(rows, kb, b, r, s);
}

bool fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (!((info.ops >> p->op) & 1u) || !((info.sf_layouts >> p->sf_layout) & 1u)) return false;
  if (p->m % info.m_multiple || p->n % info.n_multiple || p->k % info.k_multiple) return false;
  return true;
}

}  // namespace

void honest_host_gemm(const nvfp4_problem* p, bool signed_scales) {
  const int64_t half_k = p->k / 2;
  for (int64_t b = 0; b < p->l; ++b)
    for (int64_t i = 0; i < p->m; ++i)
      for (int64_t j = 0; j < p->n; ++j) {
        float acc = 0;
        const uint8_t* arow = p->a + (b * p->m + i) * half_k;
        const uint8_t* brow = p->b + (b * p->n + j) * half_k;
        for (int64_t x = 0; x < p->k; ++x) {
          const float sa = e4m3_value(p->sfa[sf_offset(p, p->m, b, i, x / 16)], signed_scales);
          const float sb = e4m3_value(p->sfb[sf_offset(p, p->n, b, j, x / 16)], signed_scales);
          // Each product is exact in FP32 (at most 12 significant bits); only the sum rounds.
          acc += e2m1_value(e2m1_nibble(arow, x)) * sa * e2m1_value(e2m1_nibble(brow, x)) * sb;
        }
        p->c[(b * p->m + i) * p->n + j] = float_to_fp16(p->alpha * acc);
      }
}

int wrong_host_kernel_count() { return kCount; }

const nvfp4_kernel_info* wrong_host_kernel_get(int index) {
  return index >= 0 && index < kCount ? &kInfos[index] : nullptr;
}

int wrong_host_kernel_run(int index, const nvfp4_problem* p) {
  static std::map<std::tuple<const uint8_t*, int64_t, int64_t, int64_t, int64_t>, std::vector<uint16_t>> cache;
  static int nondeterministic_calls = 0;
  const Bug bug = static_cast<Bug>(index);
  const int64_t elems = p->l * p->m * p->n;
  if (bug == kRefusesSupported && p->m > 3) return NVFP4_UNSUPPORTED;
  if (bug == kTouchesCWhenRefusing && !fits(kInfos[index], p)) {
    p->c[0] = 0x3C00;
    return NVFP4_UNSUPPORTED;
  }
  if (bug != kIgnoresUnsupported && !fits(kInfos[index], p)) return NVFP4_UNSUPPORTED;
  if (bug == kStaleCache) {
    const auto key = std::make_tuple(p->a, p->m, p->n, p->k, p->l);
    const auto hit = cache.find(key);
    if (hit != cache.end()) {
      std::memcpy(p->c, hit->second.data(), static_cast<size_t>(elems) * 2);
      return NVFP4_OK;
    }
    honest_host_gemm(p, false);
    cache[key] = std::vector<uint16_t>(p->c, p->c + elems);
    return NVFP4_OK;
  }
  if (bug == kUnwritten) {
    // Compute into a scratch copy and write back all but the last element of each batch.
    std::vector<uint16_t> scratch(static_cast<size_t>(elems));
    nvfp4_problem q = *p;
    q.c = scratch.data();
    honest_host_gemm(&q, false);
    for (int64_t e = 0; e < elems; ++e)
      if ((e + 1) % (p->m * p->n) != 0) p->c[e] = scratch[static_cast<size_t>(e)];
    return NVFP4_OK;
  }
  honest_host_gemm(p, false);
  switch (bug) {
    case kWritePastEnd:
      p->c[elems] = 0x3C00;
      break;
    case kModifiesInput:
      const_cast<uint8_t*>(p->a)[0] ^= 0x11;
      break;
    case kNondeterministic:
      if (++nondeterministic_calls % 2 == 0)
        for (int64_t e = 0; e < elems; ++e)
          if (p->c[e] == 0) p->c[e] = 0x8000;
      break;
    case kWrongAnswer:
      for (int64_t e = 0; e < elems; ++e) p->c[e] = static_cast<uint16_t>(p->c[e] + 1);
      break;
    case kReadsPadding:
      if (p->sf_layout == NVFP4_SF_PERMUTED) {
        // Adds 0 * (every scale of row i's 4-block tile column), as a kernel that loads whole
        // tiles without masking would: harmless unless a padding cell is NaN.
        const int64_t kb = (p->k + 15) / 16, kt = (kb + 3) / 4;
        for (int64_t b = 0; b < p->l; ++b)
          for (int64_t i = 0; i < p->m; ++i) {
            float poisoned = 0;
            for (int64_t s = 0; s < kt * 4; ++s) poisoned += 0.0f * e4m3_value(p->sfa[sf_permuted_offset(p->m, kb, b, i, s)], false);
            for (int64_t j = 0; j < p->n; ++j)
              if (std::isnan(poisoned)) p->c[(b * p->m + i) * p->n + j] = 0x7E00;
          }
      }
      break;
    default:
      break;
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::test
