// The quantize op's draws: a shape and options within what the kernel declares, and X from a
// seed by one of four classes aimed at a quantizer's decisions:
//   plain     values over a few binades, every block its own magnitude;
//   decision  block maxima where the scale lands on or next to a midpoint between neighbouring
//             scale bytes, half of them (NVFP4) where the association of the block scale's
//             product or quotient decides the byte; elements on and next to every E2M1 (or E4M3/E5M2)
//             rounding boundary of x * os, E8M0 binade edges;
//   edges     blocks that are all zero, hold -0, NaN or Inf elements, are tiny beside the tensor
//             (E4M3 subnormal or zero scales) or huge (the 448 clamp); tensors whose amax is Inf;
//   zero      a tensor of zeros (global amax 0), some of them -0.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "harness/ops/op_module.h"
#include "harness/draw/schedule.h"
#include "harness/process/device_buffers.h"
#include "kernels/host/fp16_from_float.h"
#include "reference/fp16.h"
#include "reference/quantize.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace quantize_op {
namespace {

constexpr const char* kClasses[] = {"plain", "decision", "edges", "zero"};
constexpr int kClassCount = 4;

// Picks one of the set bits of `bits` among [first, last] (raw 0: the lowest).
template <class E>
E pick(Draws& d, uint32_t bits, E first, E last) {
  std::vector<E> options;
  for (uint32_t v = static_cast<uint32_t>(first); v <= static_cast<uint32_t>(last); ++v)
    if ((bits >> v) & 1u) options.push_back(static_cast<E>(v));
  return options[d.below(options.size())];
}

int64_t draw_extent(Draws& d, int64_t max, int64_t multiple, const std::vector<int64_t>& edges) {
  int64_t v;
  if (d.below(3) == 0) v = edges[d.below(edges.size())];
  else v = 1 + static_cast<int64_t>(d.below(static_cast<uint64_t>(max)));
  return std::min(round_up(std::max<int64_t>(v, 1), multiple), round_up(max, multiple));
}

// RN of a float to the input type's word (FP16 and BF16 ties to even, NaN kept quiet).
uint32_t to_word(InType t, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (t == InType::fp32) return bits;
  if (t == InType::bf16) {
    if (std::isnan(v)) return (bits >> 16) | 0x40u;
    return (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  }
  return kern::fp16_from_float(v);
}

// The value of an input word (to_word's inverse).
float from_word(InType t, uint32_t w) {
  if (t == InType::fp16) return static_cast<float>(fp16_to_double(static_cast<uint16_t>(w)));
  const uint32_t bits = t == InType::bf16 ? w << 16 : w;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

float largest(InType t) { return t == InType::fp16 ? 65504.0f : t == InType::bf16 ? 3.38e38f : 3.4e38f; }

// E4M3 magnitudes by byte (0x00..0x7E), for the scale midpoints.
float e4m3_magnitude(int byte) {
  const int e = (byte >> 3) & 0xF, m = byte & 7;
  return e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(8 + m), e - 10);
}

float uniform(Rng& rng) { return static_cast<float>((rng() >> 11) * 0x1.0p-53); }

// Block maxima of the input type below `amax` (a tensor's or a row's, whose global scale gs is
// the recipe's for it) whose scale bytes the recipe's association of its block scale and the
// other one set apart (te's e4m3(RN(amax_b * RN(gs * c6))) against ref's and fast's
// e4m3(RN(gs * RN(amax_b * c6))); torchao's RN(RN(amax_b / 6) / pts) against RN(RN(amax_b *
// RN(1/6)) / pts), its own code on a CUDA tensor): the two differ by an ulp at most, so only where
// one lands on a midpoint between neighbouring bytes and the other beside it. The candidates: the
// in-type values around the one nearest 6 * m / gs (6 * m * pts), for every midpoint m. A kernel
// with one association under the other's recipe fails on such a block.
std::vector<float> split_maxima(InType t, Recipe r, float amax) {
  std::vector<float> out;
  const float gs = quantize_global_scale(r, amax);
  for (int byte = 1; byte < 126; ++byte) {
    const float mid = 0.5f * (e4m3_magnitude(byte) + e4m3_magnitude(byte + 1));
    const int64_t nearest = to_word(t, r == Recipe::torchao ? 6.0f * mid * gs : 6.0f * mid / gs);
    for (int64_t w = std::max<int64_t>(1, nearest - 2); w <= nearest + 2; ++w) {
      const float a = from_word(t, static_cast<uint32_t>(w));
      if (a < amax && nvfp4_scale_byte(r, gs, a) != nvfp4_scale_byte(r, gs, a, QuantVariant::other_association))
        out.push_back(a);
    }
  }
  return out;
}

// A decision tensor's (or row's) amax, held by one of its elements so that the global scale the
// blocks aim at is the one the kernel gets, and its split maxima. For NVFP4 under te, ref and
// fast, the first in-type value up from `target` that has split maxima: an FP32 amax has about 40
// of them, an FP16 or BF16 one none five times in six, but one of the next 22 words up always had
// some (200 draws of each type); 64 words is the bound. torchao the same with its own pair.
struct Peak {
  float amax;
  std::vector<float> split;
};
Peak decision_peak(const Problem& p, float target) {
  Peak k{from_word(p.in_type, to_word(p.in_type, target)), {}};
  if (p.q_format != BlockFormat::nvfp4) return k;
  for (int up = 0; up < 64 && (k.split = split_maxima(p.in_type, p.recipe, k.amax)).empty(); ++up)
    k.amax = from_word(p.in_type, to_word(p.in_type, k.amax) + 1);
  return k;
}

// Whether the class holds each tensor's (or row's) amax at an element: the decision class's
// NVFP4 scales aim at midpoints under the global scale of that amax.
bool pins_peak(const std::string& cls, const Problem& p) { return cls == "decision" && p.q_format == BlockFormat::nvfp4; }

// A block maximum for the decision class: its scale (amax * gs / 6, or amax / emax for MX) on,
// or one step beside, a midpoint between neighbouring scale bytes or an E8M0 binade edge.
float decision_amax(Rng& rng, const Problem& p, float tensor_amax) {
  const float step = 1.0f + std::ldexp(1.0f, -10) * static_cast<float>(static_cast<int>(rng() % 3) - 1);
  if (p.q_format != BlockFormat::nvfp4) {
    const float emax = p.q_format == BlockFormat::mxfp4 ? 6.0f : p.q_format == BlockFormat::mxfp8_e4m3 ? 448.0f : 57344.0f;
    return std::ldexp(emax, static_cast<int>(rng() % 40) - 30) * step;
  }
  const int byte = 1 + static_cast<int>(rng() % 125);
  const float mid = 0.5f * (e4m3_magnitude(byte) + e4m3_magnitude(byte + 1));
  return mid * tensor_amax / 448.0f * step;
}

// An element of a block whose maximum is amax: on or beside an E2M1 rounding boundary of x * os
// (os about 6 / amax), or uniform below amax.
float decision_element(Rng& rng, float amax) {
  static const float kBoundaries[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float sign = (rng() & 1) ? -1.0f : 1.0f;
  if (rng() % 3 == 0) return sign * amax * uniform(rng);
  const float b = kBoundaries[rng() % 7];
  const float nudge = 1.0f + std::ldexp(1.0f, -static_cast<int>(8 + rng() % 16)) * static_cast<float>(static_cast<int>(rng() % 3) - 1);
  return sign * amax * b / 6.0f * nudge;
}

// `split`: the decision class's split maxima under tensor_amax (split_maxima), half of its blocks'.
void fill_block(Rng& rng, const std::string& cls, const Problem& p, float tensor_amax, const std::vector<float>& split,
                std::vector<float>& v, int64_t from, int64_t count) {
  if (cls == "zero") {
    for (int64_t x = 0; x < count; ++x) v[from + x] = (rng() % 4 == 0) ? -0.0f : 0.0f;
    return;
  }
  float amax = tensor_amax * std::ldexp(1.0f, -static_cast<int>(rng() % 12));
  uint64_t edge = cls == "edges" ? rng() % 8 : 99;
  if (cls == "decision")
    amax = !split.empty() && rng() % 2 ? split[rng() % split.size()] : decision_amax(rng, p, tensor_amax);
  if (edge == 0) amax = 0;                                                                    // all-zero block
  if (edge == 1) amax = tensor_amax * std::ldexp(1.0f, -static_cast<int>(10 + rng() % 14));  // subnormal / zero scale
  amax = std::min(amax, largest(p.in_type));
  for (int64_t x = 0; x < count; ++x)
    v[from + x] = cls == "decision" ? decision_element(rng, amax) : ((rng() & 1) ? -1.0f : 1.0f) * amax * uniform(rng);
  if (count > 0) v[from + static_cast<int64_t>(rng() % static_cast<uint64_t>(count))] = (rng() & 1) ? -amax : amax;
  const int64_t at = from + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(count, 1)));
  if (edge == 2) v[at] = std::numeric_limits<float>::quiet_NaN();
  if (edge == 3) v[at] = -0.0f;
  if (edge == 4) v[at] = -std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

bool is_generator(const std::string& generator) {
  for (const char* c : kClasses)
    if (generator == std::string("quantize/") + c) return true;
  return false;
}

void draw(Draws& d, const nvfp4_kernel_info& info, const ShapeLimits& limits, CasePlan& plan) {
  Problem& p = plan.problem;
  p.op = Op::quantize;
  p.n = 1;
  p.alpha = 1.0f;
  // The format first among those with a declared recipe, then the recipe.
  uint32_t formats = 0;
  for (uint32_t f = 1; f <= 4; ++f)
    for (uint32_t r = 1; r <= 7; ++r)
      if (((info.q_formats ? info.q_formats : 2u) >> f & 1u) && (info.recipes >> r & 1u) &&
          recipe_fits(static_cast<Recipe>(r), static_cast<BlockFormat>(f)))
        formats |= 1u << f;
  if (formats == 0) throw std::invalid_argument("the kernel declares no recipe for a format it declares");
  p.q_format = pick(d, formats, BlockFormat::nvfp4, BlockFormat::mxfp8_e5m2);
  uint32_t recipes = 0;
  for (uint32_t r = 1; r <= 7; ++r)
    if ((info.recipes >> r & 1u) && recipe_fits(static_cast<Recipe>(r), p.q_format)) recipes |= 1u << r;
  p.recipe = pick(d, recipes, Recipe::te, Recipe::mx_even);
  p.in_type = pick(d, info.in_types, InType::fp16, InType::fp32);
  p.quant_2d = info.flags & NVFP4_FLAG_QUANT_2D;
  p.row_global_scale = info.flags & NVFP4_FLAG_ROW_GLOBAL_SCALE;
  if (info.flags & NVFP4_FLAG_STOCHASTIC) p.stochastic_seed = d.below(uint64_t(1) << 32);
  const int64_t km = std::lcm<int64_t>(packs_nibbles(p.q_format) ? 2 : 1, std::max<uint32_t>(1, info.k_multiple));
  const int64_t mm = std::max<uint32_t>(1, info.m_multiple);
  p.m = draw_extent(d, std::min<int64_t>(limits.max_m, 300), mm, {1, 15, 16, 17, 127, 128, 129, 255, 256});
  // k >= 2 for every format (an MXFP8 row may be odd, never a single element).
  p.k = std::max<int64_t>(round_up(2, km),
                          draw_extent(d, std::min<int64_t>(limits.max_k, 1024), km,
                                      {2, 14, 16, 18, 30, 31, 32, 33, 34, 62, 64, 66, 256, 1024}));
  p.l = 1 + static_cast<int64_t>(d.below(3));
  while (p.l * p.m * p.k > limits.max_elements && p.m > mm) p.m = std::max(mm, round_up(p.m / 2, mm));
  plan.spec = DataSpec{};
  p.generator = std::string("quantize/") + kClasses[d.below(kClassCount)];
}

uint64_t device_bytes(const Problem& p) {
  const int64_t sfq = std::max(p.sfq_bytes(), sf_permuted_bytes(p.m, p.qkb(), p.l));
  const int64_t scales = p.row_global_scale ? p.l * p.m * 4 : 4;
  return static_cast<uint64_t>(p.x_bytes() + scales + p.q_bytes() + sfq + 8 * kGuardBytes);
}

bool draw_huge_shape(uint64_t pick, const nvfp4_kernel_info& info, uint64_t device_free_bytes, Problem& p) {
  static const int64_t kWidths[] = {2688, 5120, 7168};
  const int64_t km = std::lcm<int64_t>(packs_nibbles(p.q_format) ? 2 : 1, std::max<uint32_t>(1, info.k_multiple));
  const int64_t mm = std::max<uint32_t>(1, info.m_multiple);
  Problem h = p;
  h.l = 1;
  // Two-byte X where the kernel takes it (4 GiB; FP32's 8 GiB would add 2 bytes an element
  // wherever X is held: the parent's X and stale X, the worker's X, its buffer and staging).
  if (h.in_type == InType::fp32 && (info.in_types >> NVFP4_IN_BF16 & 1u)) h.in_type = InType::bf16;
  if (h.in_type == InType::fp32 && (info.in_types >> NVFP4_IN_FP16 & 1u)) h.in_type = InType::fp16;
  h.k = round_up(kWidths[pick % 3], km);
  // The first rows whose elements' offsets pass 2^31, and a few more (0 to 7, within the
  // multiple): at k = 2688, m = 798,916 is where flashinfer's quantizer failed.
  const int64_t past = (int64_t(1) << 31) / h.k + 1;
  h.m = round_up(past + static_cast<int64_t>(pick / 3 % 8), mm);
  // Twice the call's bytes (CUDA contexts of the other lanes, the runtime's own) and 2 GiB more.
  if (2 * device_bytes(h) + (uint64_t(2) << 30) > device_free_bytes) return false;
  p = std::move(h);
  return true;
}

namespace {

// RN words of the input type from floats.
void store_words(const Problem& p, const float* v, int64_t count, uint8_t* out) {
  const size_t width = static_cast<size_t>(in_word_bytes(p.in_type));
  for (int64_t e = 0; e < count; ++e) {
    const uint32_t w = to_word(p.in_type, v[e]);
    std::memcpy(out + static_cast<size_t>(e) * width, &w, width);
  }
}

// The peaks a case's rows take: the tensor's, or with per-row global scales one for each of the 8
// binades below it a row's amax is drawn in. Only the decision class's NVFP4 amax is moved and
// pinned (decision_peak); another class's is the target itself, which no element need hold.
std::vector<Peak> case_peaks(const Problem& p, const std::string& cls, float tensor_amax) {
  std::vector<Peak> peaks;
  for (int e = 0; e < (p.row_global_scale ? 8 : 1); ++e) {
    const float target = tensor_amax * std::ldexp(1.0f, -e);
    peaks.push_back(pins_peak(cls, p) ? decision_peak(p, target) : Peak{target, {}});
  }
  return peaks;
}

// One of count elements from `from` set to +-amax, both drawn.
void pin(Rng& rng, float amax, std::vector<float>& v, int64_t from, int64_t count) {
  const int64_t at = from + static_cast<int64_t>(rng() % static_cast<uint64_t>(count));
  v[static_cast<size_t>(at)] = (rng() & 1) ? -amax : amax;
}

// fill_x past kRowSeededElements: row r's blocks from a generator seeded by (seed, r), rows in
// parallel, each row converted to words as it is drawn (no float copy of a 2^31-element X).
void fill_rows_seeded(Problem& p, const std::string& cls, Rng& rng, float tensor_amax) {
  const int64_t rows = p.l * p.m, bs = block_size(p.q_format), width = in_word_bytes(p.in_type);
  const uint64_t seed = *p.seed;
  p.x.resize(static_cast<size_t>(rows * p.k * width));
  // A tensor whose amax is Inf, as below, at an element drawn from the case's own generator.
  const bool inf_tensor = cls == "edges" && rng() % 8 == 0;
  const int64_t inf_at = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows * p.k));
  const bool inf_negative = rng() & 1;
  // The decision class's peaks, held as fill_x holds them: the tensor's at an element drawn here,
  // a row's at an element drawn from the row's own generator.
  const std::vector<Peak> peaks = case_peaks(p, cls, tensor_amax);
  const bool pins = pins_peak(cls, p);
  int64_t pin_at = -1;
  float pinned = 0;
  if (pins && !p.row_global_scale) {
    pin_at = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows * p.k));
    pinned = (rng() & 1) ? -peaks[0].amax : peaks[0].amax;
  }
#pragma omp parallel
  {
    std::vector<float> v(static_cast<size_t>(p.k));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      Rng row_rng(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(r) + 1)));
      const Peak& peak = peaks[p.row_global_scale ? row_rng() % 8 : 0];
      for (int64_t s = 0; s * bs < p.k; ++s)
        fill_block(row_rng, cls, p, peak.amax, peak.split, v, s * bs, std::min(bs, p.k - s * bs));
      if (pins && p.row_global_scale) pin(row_rng, peak.amax, v, 0, p.k);
      if (pin_at >= 0 && pin_at / p.k == r) v[static_cast<size_t>(pin_at % p.k)] = pinned;
      if (inf_tensor && inf_at / p.k == r)
        v[static_cast<size_t>(inf_at % p.k)] =
            inf_negative ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
      store_words(p, v.data(), p.k, p.x.data() + r * p.k * width);
    }
  }
}

}  // namespace

void fill_x(Problem& p) {
  if (!is_generator(p.generator)) throw std::invalid_argument("a quantize case's generator is quantize/plain, "
                                                               "quantize/decision, quantize/edges or quantize/zero");
  const std::string cls = p.generator.substr(9);
  Rng rng(*p.seed);
  const int64_t rows = p.l * p.m, bs = block_size(p.q_format);
  float tensor_amax = std::ldexp(1.0f, static_cast<int>(rng() % 24) - 12) * (1.0f + uniform(rng));
  if (p.in_type == InType::fp32 && rng() % 8 == 0) tensor_amax = std::ldexp(1.0f, 100 + static_cast<int>(rng() % 27));
  tensor_amax = std::min(tensor_amax, largest(p.in_type) / 2);
  if (rows * p.k > kRowSeededElements) return fill_rows_seeded(p, cls, rng, tensor_amax);
  std::vector<float> v(static_cast<size_t>(rows * p.k));
  const std::vector<Peak> peaks = case_peaks(p, cls, tensor_amax);
  const bool pins = pins_peak(cls, p) && !v.empty();
  for (int64_t r = 0; r < rows; ++r) {
    const Peak& peak = peaks[p.row_global_scale ? rng() % 8 : 0];
    for (int64_t s = 0; s * bs < p.k; ++s)
      fill_block(rng, cls, p, peak.amax, peak.split, v, r * p.k + s * bs, std::min(bs, p.k - s * bs));
    if (pins && p.row_global_scale) pin(rng, peak.amax, v, r * p.k, p.k);
  }
  if (pins && !p.row_global_scale) pin(rng, peaks[0].amax, v, 0, static_cast<int64_t>(v.size()));
  // A tensor whose amax is Inf: every block's scale follows the recipe's Inf rule.
  if (cls == "edges" && rng() % 8 == 0 && !v.empty())
    v[rng() % v.size()] = (rng() & 1) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  p.x.resize(v.size() * static_cast<size_t>(in_word_bytes(p.in_type)));
  store_words(p, v.data(), static_cast<int64_t>(v.size()), p.x.data());
}

}  // namespace quantize_op
}  // namespace nvfp4
