// ABI version 2's problems for the kernels' unit tests: grouped GEMMs in both arrangements and
// dual GEMMs built from small exact-regime problems, laid out as the suite would hand them, and
// what each output must be, from the exact reference's sums (reference/exact_gemm.h) rounded here
// with helpers independent of the kernels' own (kernels/output_words.h). Test-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/tests/small_problems.h"
#include "reference/exact_gemm.h"
#include "reference/long_double_exp.h"
#include "reference/problem.h"

namespace nvfp4 {

inline int64_t out_bytes(uint32_t out_type) { return out_type == NVFP4_OUT_FP32 ? 4 : 2; }
inline const char* out_name(uint32_t t) { return t == NVFP4_OUT_FP32 ? "fp32" : t == NVFP4_OUT_BF16 ? "bf16" : "fp16"; }

// The reference's view of a SmallProblem with l batches (linear scales, ue4m3).
inline Problem reference_problem(const SmallProblem& t) {
  Problem p;
  p.op = t.op == NVFP4_OP_GEMV ? Op::gemv : Op::gemm;
  p.m = t.m, p.n = t.n, p.k = t.k, p.l = t.l;
  p.sf_layout = SfLayout::linear;
  p.alpha = t.alpha;
  p.a = t.a, p.b = t.b, p.sfa = t.sfa, p.sfb = t.sfb;
  return p;
}

// The exact value r * alpha of an element as a double: exact in the tests' regime (sums below
// 2^53 units of 2^-20, alpha a power of two).
inline double exact_value(const ExactElement& e, float alpha) {
  return std::ldexp(static_cast<double>(static_cast<int64_t>(e.sum)), -20) * static_cast<double>(alpha);
}

// v rounded to nearest even with p significant bits, exponent at least emin (the subnormal
// quantum 2^(emin - p + 1)), by scaling and nearbyint (the default rounding mode is to nearest
// even): no bit tricks shared with the kernels. Overflow is left to the caller.
inline double round_to_format(double v, int p, int emin) {
  if (v == 0 || std::isnan(v)) return v;
  int e;
  std::frexp(std::fabs(v), &e);  // |v| in [2^(e-1), 2^e)
  const int exp = std::max(e - 1, emin);
  const double quantum = std::ldexp(1.0, exp - p + 1);
  return std::nearbyint(v / quantum) * quantum;
}

// The output word(s) of `v` (exact) in out_type, as the bytes the kernel writes.
inline std::vector<uint8_t> expected_word(double v, uint32_t out_type) {
  std::vector<uint8_t> w(out_bytes(out_type));
  if (out_type == NVFP4_OUT_FP32) {
    const float f = static_cast<float>(v);  // one rounding, nearest even
    std::memcpy(w.data(), &f, 4);
    return w;
  }
  uint16_t bits;
  if (out_type == NVFP4_OUT_BF16) {
    const double r = round_to_format(v, 8, -126);
    const double limit = std::ldexp(2.0 - std::ldexp(1.0, -8), 127);  // SPEC section 1: Inf from here
    float f = std::fabs(v) >= limit ? (v < 0 ? -INFINITY : INFINITY) : static_cast<float>(r);  // r is a float
    uint32_t x;
    std::memcpy(&x, &f, 4);
    bits = static_cast<uint16_t>(x >> 16);  // exact: r has 8 significant bits
  } else {
    bits = 0;
    const double r = round_to_format(v, 11, -14);
    const double a = std::fabs(r);
    if (std::fabs(v) >= 65520.0) bits = 0x7C00;
    else if (a < std::ldexp(1.0, -14)) bits = static_cast<uint16_t>(a / std::ldexp(1.0, -24));
    else {
      int e;
      const double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
      bits = static_cast<uint16_t>(((e - 1 + 15) << 10) | (static_cast<int>(f * 2048) - 1024));
    }
    if (std::signbit(v)) bits |= 0x8000;  // IEEE: a negative value rounding to zero is -0
  }
  std::memcpy(w.data(), &bits, 2);
  return w;
}

// A value as the bytes of out_type, read back to double (for bounds).
inline double word_value(const uint8_t* w, uint32_t out_type) {
  if (out_type == NVFP4_OUT_FP32) {
    float f;
    std::memcpy(&f, w, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, w, 2);
  if (out_type == NVFP4_OUT_BF16) {
    const uint32_t x = uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double mag = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// ulp of the output type at magnitude x (SPEC section 1: the subnormal quantum below the normals).
inline double ulp_out(double x, uint32_t out_type) {
  const int p = out_type == NVFP4_OUT_FP32 ? 24 : out_type == NVFP4_OUT_BF16 ? 8 : 11;
  const int emin = out_type == NVFP4_OUT_FP16 ? -14 : -126;
  int e;
  std::frexp(x, &e);
  return std::ldexp(1.0, std::max(e - 1, emin) - p + 1);
}

// One grouped call built from groups of l = 1 problems, in the separate arrangement (each group's
// own buffers) and the packed one (SPEC section 2), with guard words past every output.
struct GroupedCase {
  std::vector<SmallProblem> groups;  // linear scales, l = 1
  uint32_t layout = NVFP4_SF_LINEAR, out_type = NVFP4_OUT_FP16;
  static constexpr uint8_t kGuard = 0xA5;  // C starts as this byte everywhere, and past the end
  static constexpr int64_t kGuardBytes = 64;
  // Separate: each group's buffers (scales in `layout`). Packed: the packed buffers.
  std::vector<std::vector<uint8_t>> a, b, sfa, sfb, c;
  std::vector<uint8_t> pa, pb, psfa, psfb, pc;
  std::vector<nvfp4_group> table;
  int64_t n = 0, k = 0, rows = 0;

  int64_t max_n() const {
    int64_t v = 0;
    for (const SmallProblem& g : groups) v = std::max(v, g.n);
    return v;
  }
  int64_t max_k() const {
    int64_t v = 0;
    for (const SmallProblem& g : groups) v = std::max(v, g.k);
    return v;
  }

  std::vector<uint8_t> scales(const std::vector<uint8_t>& linear, int64_t rows_, int64_t kb, int64_t l) const {
    if (rows_ == 0) return {};  // an empty group has no scales (and no tiles)
    return layout == NVFP4_SF_PERMUTED ? sf_to_permuted(linear.data(), rows_, kb, l, 0x7F) : linear;
  }

  // Lays the groups out in both arrangements (packed needs one n and one k).
  void lay_out(bool packed) {
    const size_t count = groups.size();
    a.assign(count, {}), b.assign(count, {}), sfa.assign(count, {}), sfb.assign(count, {}), c.assign(count, {});
    table.assign(count, {});
    rows = 0;
    for (const SmallProblem& g : groups) rows += g.m;
    n = max_n(), k = max_k();
    const int64_t w = out_bytes(out_type);
    if (!packed) {
      for (size_t g = 0; g < count; ++g) {
        const SmallProblem& t = groups[g];
        a[g] = t.a, b[g] = t.b;
        sfa[g] = scales(t.sfa, t.m, t.kb(), 1), sfb[g] = scales(t.sfb, t.n, t.kb(), 1);
        c[g].assign(t.m * t.n * w + kGuardBytes, kGuard);
        table[g] = {t.m, t.n, t.k, a[g].data(), b[g].data(), sfa[g].data(), sfb[g].data(), t.m ? c[g].data() : nullptr,
                    t.alpha};
      }
      return;
    }
    pa.clear(), pb.clear(), psfa.clear();
    std::vector<uint8_t> sfb_linear;
    for (const SmallProblem& t : groups) {
      pa.insert(pa.end(), t.a.begin(), t.a.end());
      pb.insert(pb.end(), t.b.begin(), t.b.end());
      const std::vector<uint8_t> s = scales(t.sfa, t.m, t.kb(), 1);  // permuted: ceil(m/128) tiles
      psfa.insert(psfa.end(), s.begin(), s.end());
      sfb_linear.insert(sfb_linear.end(), t.sfb.begin(), t.sfb.end());
    }
    psfb = scales(sfb_linear, n, (k + 15) / 16, static_cast<int64_t>(count));
    pa.resize(pa.size() + 1), psfa.resize(psfa.size() + 1);  // never empty, so never null
    pc.assign(rows * n * w + kGuardBytes, kGuard);
    int64_t row0 = 0, sfa0 = 0;
    for (size_t g = 0; g < count; ++g) {
      const SmallProblem& t = groups[g];
      const int64_t kb = t.kb();
      table[g] = {t.m,
                  t.n,
                  t.k,
                  pa.data() + row0 * (k / 2),
                  pb.data() + static_cast<int64_t>(g) * n * (k / 2),
                  psfa.data() + sfa0,
                  psfb.data() + (layout == NVFP4_SF_LINEAR ? static_cast<int64_t>(g) * n * kb
                                                           : static_cast<int64_t>(g) * ((n + 127) / 128) * ((kb + 3) / 4) * 512),
                  pc.data() + row0 * n * w,
                  t.alpha};
      row0 += t.m;
      sfa0 += layout == NVFP4_SF_LINEAR ? t.m * kb : ((t.m + 127) / 128) * ((kb + 3) / 4) * 512;
    }
  }

  nvfp4_problem abi(bool packed, void* stream = nullptr) const {
    nvfp4_problem p{};
    p.op = NVFP4_OP_GROUPED_GEMM;
    p.m = rows, p.n = n, p.k = k, p.l = 1;
    if (packed) p.a = pa.data(), p.b = pb.data(), p.sfa = psfa.data(), p.sfb = psfb.data();
    p.c = packed ? reinterpret_cast<uint16_t*>(const_cast<uint8_t*>(pc.data())) : nullptr;
    p.sf_layout = layout;
    p.alpha = 1.0f, p.alpha2 = 1.0f;
    p.stream = stream;
    p.out_type = out_type;
    p.groups = static_cast<int64_t>(groups.size());
    p.group = p.group_device = table.data();
    return p;
  }

  // Group g's output bytes as written (either arrangement).
  const uint8_t* output(bool packed, size_t g) const { return static_cast<const uint8_t*>(table[g].c); }
};

// Random grouped problems with empty groups and m_g around tile edges, one n and k when packed.
inline GroupedCase random_grouped(std::mt19937_64& rng, bool packed, const std::vector<int64_t>& ms) {
  GroupedCase gc;
  const int64_t n0 = 1 + static_cast<int64_t>(rng() % 20), k0 = 2 * (1 + static_cast<int64_t>(rng() % 90));
  const float alphas[4] = {1.0f, 0.5f, 2.0f, -0.25f};  // powers of two: the exact regime holds
  for (int64_t m : ms) {
    const int64_t n = packed ? n0 : 1 + static_cast<int64_t>(rng() % 20);
    const int64_t k = packed ? k0 : 2 * (1 + static_cast<int64_t>(rng() % 90));
    SmallProblem t = random_problem(rng, NVFP4_OP_GEMM, m, n, k, 1);
    t.alpha = alphas[rng() % 4];
    gc.groups.push_back(std::move(t));
  }
  return gc;
}

// "" when every group's output is RN_out(alpha_g * r) bit for bit and nothing past it changed,
// else the first difference.
inline std::string check_grouped(const GroupedCase& gc, bool packed) {
  const int64_t w = out_bytes(gc.out_type);
  for (size_t g = 0; g < gc.groups.size(); ++g) {
    const SmallProblem& t = gc.groups[g];
    if (t.m == 0) continue;
    const ExactResult exact = exact_gemm(reference_problem(t));
    const uint8_t* got = gc.output(packed, g);
    for (int64_t e = 0; e < t.m * t.n; ++e) {
      const std::vector<uint8_t> want = expected_word(exact_value(exact.elems[e], t.alpha), gc.out_type);
      const bool same = std::memcmp(got + e * w, want.data(), w) == 0 ||
                        (word_value(got + e * w, gc.out_type) == 0.0 && word_value(want.data(), gc.out_type) == 0.0);
      if (!same)
        return "group " + std::to_string(g) + " (m " + std::to_string(t.m) + ", n " + std::to_string(t.n) + ", k " +
               std::to_string(t.k) + ") element " + std::to_string(e) + " is " +
               std::to_string(word_value(got + e * w, gc.out_type)) + ", RN_" + out_name(gc.out_type) +
               " of the exact value is " + std::to_string(word_value(want.data(), gc.out_type));
    }
  }
  const auto untouched = [](const std::vector<uint8_t>& buf, size_t from) {
    for (size_t x = from; x < buf.size(); ++x)
      if (buf[x] != GroupedCase::kGuard) return false;
    return true;
  };
  if (packed) {
    if (!untouched(gc.pc, static_cast<size_t>(gc.rows * gc.n * w))) return "a write past the last group's rows";
  } else {
    for (size_t g = 0; g < gc.groups.size(); ++g)
      if (!untouched(gc.c[g], static_cast<size_t>(gc.groups[g].m * gc.groups[g].n * w)))
        return "a write past group " + std::to_string(g) + "'s output";
  }
  return "";
}

// A dual GEMM built from two problems sharing A (b2/sfb2 from the second), with alpha2.
struct DualCase {
  SmallProblem g, u;  // same A, m, n, k, l
  float alpha2 = 1.0f;
};

inline DualCase random_dual(std::mt19937_64& rng, int64_t m, int64_t n, int64_t k, int64_t l) {
  DualCase d;
  d.g = random_problem(rng, NVFP4_OP_GEMM, m, n, k, l);
  d.u = random_problem(rng, NVFP4_OP_GEMM, m, n, k, l);
  d.u.a = d.g.a, d.u.sfa = d.g.sfa;
  const float alphas[3] = {1.0f, 0.5f, -2.0f};
  d.g.alpha = alphas[rng() % 3];
  d.alpha2 = alphas[rng() % 3];
  d.u.alpha = d.alpha2;
  return d;
}

// "" when every output c of the dual GEMM meets SPEC section 3 rule 6 with G and U exact (E1 = E2
// = 0): |c - v| <= eta*|silu(G)*U| + ulp_out(|v| + B)/2, v = silu(G) * U computed in long double
// (far below the allowance), plus |silu(G)*U| where G < -87. Else the first element that does not.
inline std::string check_dual(const DualCase& d, const uint8_t* c, uint32_t out_type) {
  const ExactResult eg = exact_gemm(reference_problem(d.g)), eu = exact_gemm(reference_problem(d.u));
  const int64_t w = out_bytes(out_type);
  for (size_t e = 0; e < eg.elems.size(); ++e) {
    const long double G = exact_value(eg.elems[e], d.g.alpha), U = exact_value(eu.elems[e], d.alpha2);
    const long double silu = G / (1.0L + exp_ld(-G)), v = silu * U;  // exp_ld: the same bits on every host
    long double bound = std::ldexp(1.0L, -16) * std::fabs(v);
    if (G < -87) bound += std::fabs(v);
    const double got = word_value(c + e * w, out_type);
    const long double allowed = bound + ulp_out(static_cast<double>(std::fabs(v) + bound), out_type) / 2;
    // Rule 4: where the allowed interval reaches the overflow threshold, Inf of v's sign is also
    // accepted; where it lies wholly beyond, only that Inf is.
    const long double threshold = out_type == NVFP4_OUT_FP16   ? 65520.0L
                                  : out_type == NVFP4_OUT_BF16 ? std::ldexp(2.0L - std::ldexp(1.0L, -8), 127)
                                                               : std::ldexp(2.0L - std::ldexp(1.0L, -24), 127);
    const bool inf_ok = std::fabs(v) + allowed >= threshold && std::isinf(got) && std::signbit(got) == std::signbit(v);
    const bool inf_only = std::fabs(v) - allowed >= threshold;
    if (inf_ok) continue;
    if (inf_only || !(std::fabs(got - v) <= allowed))
      return "element " + std::to_string(e) + ": " + std::to_string(got) + " but silu(G)*U = " +
             std::to_string(static_cast<double>(v)) + " (G " + std::to_string(static_cast<double>(G)) + ", U " +
             std::to_string(static_cast<double>(U)) + "), allowed error " + std::to_string(static_cast<double>(allowed));
  }
  return "";
}

inline nvfp4_problem dual_abi(const DualCase& d, const uint8_t* a, const uint8_t* b, const uint8_t* sfa,
                              const uint8_t* sfb, const uint8_t* b2, const uint8_t* sfb2, uint32_t layout, void* c,
                              uint32_t out_type, void* stream = nullptr) {
  nvfp4_problem p = d.g.abi(a, b, sfa, sfb, layout, static_cast<uint16_t*>(c), stream);
  p.op = NVFP4_OP_DUAL_GEMM;
  p.b2 = b2, p.sfb2 = sfb2, p.alpha2 = d.alpha2;
  p.out_type = out_type;
  return p;
}

}  // namespace nvfp4
