// Fuzz target `reference`: small problems from the bytes (the suite's one draw, as the kernel
// fuzzer draws them, or a case file when the input is text), checked against
// code written here independently of reference/: the E2M1 and E4M3 decoders, both scale layouts
// and their round trips, and exact_gemm (every field the oracle uses, and the RN16 output) against
// a brute force that rounds by binary search over all FP16 values. The oracle must accept the
// reference's own output and reject it with one bit flipped.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "harness/draw/schedule.h"
#include "reference/exact_gemm.h"
#include "reference/oracle.h"
#include "reference/scale_layout.h"

namespace {

using nvfp4::i128;
using nvfp4::u128;

[[noreturn]] void fail(const nvfp4::Problem& p, const std::string& what) {
  std::fprintf(stderr,
               "reference fuzzer: %s\n  problem: %s m=%lld n=%lld k=%lld l=%lld layout=%s "
               "semantics=%s alpha=%a\n",
               what.c_str(), nvfp4::to_string(p.op), static_cast<long long>(p.m),
               static_cast<long long>(p.n), static_cast<long long>(p.k), static_cast<long long>(p.l),
               nvfp4::to_string(p.sf_layout), nvfp4::to_string(p.semantics),
               static_cast<double>(p.alpha));
  std::abort();
}

// ---- Decoders, from the bit fields as SPEC.md section 1 describes them ----

// Doubled E2M1 value: exponent field e (2 bits), mantissa m (1 bit); e == 0 is subnormal m/2,
// else 2^(e-1) * (1 + m/2); doubled that is m, or 2^(e-1) * (2 + m).
int e2m1_doubled(uint8_t code) {
  const int e = (code >> 1) & 3, m = code & 1;
  const int mag = e == 0 ? m : (1 << (e - 1)) * (2 + m);
  return (code & 8) ? -mag : mag;
}

struct Scale {
  bool nan;
  int64_t sig;  // signed significand
  int exp;      // value = sig * 2^exp
};

Scale e4m3(uint8_t byte, bool signed_semantics) {
  const int e = (byte >> 3) & 15, m = byte & 7;
  Scale s{e == 15 && m == 7, 0, 0};
  s.sig = e == 0 ? m : 8 + m;
  s.exp = e == 0 ? -9 : e - 10;
  if (signed_semantics && (byte & 0x80)) s.sig = -s.sig;
  return s;
}

void check_decoders(const nvfp4::Problem& p, const uint8_t* data, size_t size) {
  const bool signed_sem = p.semantics == nvfp4::ScaleSemantics::e4m3;
  for (size_t i = 0; i < size && i < 64; ++i) {
    const uint8_t byte = data[i];
    for (const uint8_t code : {uint8_t(byte & 0xF), uint8_t(byte >> 4)}) {
      if (nvfp4::e2m1_twice(code) != e2m1_doubled(code)) {
        fail(p, "e2m1_twice(" + std::to_string(code) + ") = " + std::to_string(nvfp4::e2m1_twice(code)) +
                    ", expected " + std::to_string(e2m1_doubled(code)));
      }
    }
    const Scale mine = e4m3(byte, signed_sem);
    const nvfp4::ScaleValue theirs = nvfp4::e4m3_decode(byte, p.semantics);
    const bool same = mine.nan == theirs.nan &&
                      (mine.nan || std::ldexp(double(mine.sig), mine.exp) ==
                                       std::ldexp(double(theirs.sign * theirs.sig), theirs.exp));
    if (!same) fail(p, "e4m3_decode(" + std::to_string(byte) + ") disagrees with the bit fields");
  }
}

// ---- Scale layouts ----

// The permuted layout as the physical tensor [l][Rt][Kt][32][4][4] of SPEC.md section 2.
int64_t permuted_index(int64_t rows, int64_t kb, int64_t b, int64_t i, int64_t s) {
  const int64_t rt = (rows + 127) / 128, kt = (kb + 3) / 4;
  return ((((b * rt + i / 128) * kt + s / 4) * 32 + i % 32) * 4 + (i % 128) / 32) * 4 + s % 4;
}

void check_layout(const nvfp4::Problem& p, const std::vector<uint8_t>& linear, int64_t rows,
                  uint8_t pad, const char* name) {
  const int64_t kb = p.kb(), l = p.l;
  const std::vector<uint8_t> perm = nvfp4::sf_to_permuted(linear.data(), rows, kb, l, pad);
  const int64_t bytes = l * ((rows + 127) / 128) * ((kb + 3) / 4) * 512;
  if (static_cast<int64_t>(perm.size()) != bytes || nvfp4::sf_permuted_bytes(rows, kb, l) != bytes) {
    fail(p, std::string(name) + ": permuted size is not l*Rt*Kt*512 = " + std::to_string(bytes));
  }
  std::vector<bool> covered(static_cast<size_t>(bytes), false);
  for (int64_t b = 0; b < l; ++b) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t s = 0; s < kb; ++s) {
        const int64_t off = permuted_index(rows, kb, b, i, s);
        const int64_t lin = (b * rows + i) * kb + s;
        if (nvfp4::sf_permuted_offset(rows, kb, b, i, s) != off ||
            nvfp4::sf_linear_offset(rows, kb, b, i, s) != lin) {
          fail(p, std::string(name) + ": offset function wrong at b=" + std::to_string(b) +
                      " i=" + std::to_string(i) + " s=" + std::to_string(s));
        }
        if (covered[off]) fail(p, std::string(name) + ": two scales share permuted offset " + std::to_string(off));
        covered[off] = true;
        if (perm[off] != linear[lin]) fail(p, std::string(name) + ": sf_to_permuted misplaced a scale");
      }
    }
  }
  const std::vector<bool> mask = nvfp4::sf_permuted_padding_mask(rows, kb, l);
  if (static_cast<int64_t>(mask.size()) != bytes) fail(p, std::string(name) + ": padding mask has the wrong size");
  for (int64_t off = 0; off < bytes; ++off) {
    if (mask[off] == covered[off]) fail(p, std::string(name) + ": padding mask wrong at " + std::to_string(off));
    if (!covered[off] && perm[off] != pad) fail(p, std::string(name) + ": padding cell not filled with the pad byte");
  }
  if (nvfp4::sf_to_linear(perm.data(), rows, kb, l) != linear) {
    fail(p, std::string(name) + ": permuted -> linear does not give the linear scales back");
  }
}

// ---- Rounding to FP16 by search: the binary16 patterns 0..0x7C00 are ordered by value ----

int width(u128 v) {
  const uint64_t hi = static_cast<uint64_t>(v >> 64), lo = static_cast<uint64_t>(v);
  return hi ? 128 - __builtin_clzll(hi) : lo ? 64 - __builtin_clzll(lo) : 0;
}

// Sign of x1*2^e1 - x2*2^e2, exactly.
int compare(u128 x1, int e1, u128 x2, int e2) {
  if (x1 == 0 || x2 == 0) return (x1 != 0) - (x2 != 0);
  const int top1 = width(x1) + e1, top2 = width(x2) + e2;
  if (top1 != top2) return top1 < top2 ? -1 : 1;
  // Same top bit: shifting the one with the larger exponent down to the other's fits in 128 bits.
  if (e1 > e2) x1 <<= (e1 - e2);
  else x2 <<= (e2 - e1);
  return (x1 > x2) - (x1 < x2);
}

// Positive finite binary16 h (and 0x7C00 read as 2^16) as sig * 2^exp.
void fp16_value(uint16_t h, u128* sig, int* exp) {
  const int e = h >> 10, f = h & 0x3FF;
  *sig = e == 0 ? f : (f | 0x400);
  *exp = e == 0 ? -24 : e - 25;
}

uint16_t round_by_search(bool negative, u128 mag, int exp) {
  if (mag == 0) return 0;  // an exact zero is +0
  int lo = 0, hi = 0x7C00;  // invariant: value(lo) <= x, and x < value(hi + 1) or hi == 0x7C00
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    u128 s;
    int e;
    fp16_value(static_cast<uint16_t>(mid), &s, &e);
    if (compare(s, e, mag, exp) <= 0) lo = mid;
    else hi = mid - 1;
  }
  int h = lo;
  if (h < 0x7C00) {
    u128 s1, s2;
    int e1, e2;
    fp16_value(static_cast<uint16_t>(h), &s1, &e1);
    fp16_value(static_cast<uint16_t>(h + 1), &s2, &e2);
    const u128 twice_mid = s1 + (s2 << (e2 - e1));  // midpoint = twice_mid * 2^(e1-1)
    const int c = compare(mag, exp, twice_mid, e1 - 1);
    if (c > 0 || (c == 0 && (h & 1))) ++h;  // ties to even
  }
  return static_cast<uint16_t>((negative ? 0x8000 : 0) | h);  // h == 0x7C00 is Inf
}

// ---- Brute-force exact GEMM ----

void check_exact_gemm(const nvfp4::Problem& p) {
  const nvfp4::ExactResult ref = nvfp4::exact_gemm(p);
  if (static_cast<int64_t>(ref.elems.size()) != p.c_elems() || static_cast<int64_t>(ref.c.size()) != p.c_elems()) {
    fail(p, "exact_gemm returned the wrong number of elements");
  }
  const bool signed_sem = p.semantics == nvfp4::ScaleSemantics::e4m3;
  const int64_t kb = p.kb();
  int alpha_exp = 0;
  const double alpha_frac = std::frexp(static_cast<double>(p.alpha), &alpha_exp);
  const int64_t alpha_sig = static_cast<int64_t>(std::ldexp(alpha_frac, 24));  // exact: FP32 has 24 bits
  alpha_exp -= 24;
  for (int64_t b = 0; b < p.l; ++b) {
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        i128 sum = 0;
        u128 abs_sum = 0;
        int64_t nonzero = 0;
        int min_tz = 128;
        bool nan = false;
        for (int64_t x = 0; x < p.k; ++x) {
          const Scale sa = e4m3(p.sfa[(b * p.m + i) * kb + x / 16], signed_sem);
          const Scale sb = e4m3(p.sfb[(b * p.n + j) * kb + x / 16], signed_sem);
          if (sa.nan || sb.nan) {
            nan = true;  // the element must be NaN; its NaN blocks add nothing to r, S, t, g
            continue;
          }
          const uint8_t abyte = p.a[(b * p.m + i) * (p.k / 2) + x / 2];
          const uint8_t bbyte = p.b[(b * p.n + j) * (p.k / 2) + x / 2];
          const int av = e2m1_doubled((x & 1) ? abyte >> 4 : abyte & 0xF);
          const int bv = e2m1_doubled((x & 1) ? bbyte >> 4 : bbyte & 0xF);
          // (av/2)(bv/2) sa sb in units of 2^-20: the exponent below is >= -9-9-2+20 = 0.
          const i128 units = i128(av * bv) * sa.sig * sb.sig * (i128(1) << (sa.exp + sb.exp + 18));
          if (units == 0) continue;
          const u128 mag = units < 0 ? u128(-units) : u128(units);
          sum += units;
          abs_sum += mag;
          ++nonzero;
          int tz = 0;
          while (!((mag >> tz) & 1)) ++tz;
          if (tz < min_tz) min_tz = tz;
        }
        const int64_t idx = (b * p.m + i) * p.n + j;
        const nvfp4::ExactElement& e = ref.elems[idx];
        const std::string at = " at b=" + std::to_string(b) + " i=" + std::to_string(i) + " j=" + std::to_string(j);
        if (e.nan != nan) fail(p, "NaN flag wrong" + at);
        if (e.sum != sum) fail(p, "exact sum wrong" + at);
        if (e.abs_sum != abs_sum) fail(p, "sum of |products| wrong" + at);
        if (e.nonzero != nonzero) fail(p, "count of nonzero products wrong" + at);
        if (e.min_tz != min_tz) fail(p, "power of two dividing the products wrong" + at);
        uint16_t expected;
        if (nan) {
          expected = 0x7E00;
        } else {
          const u128 sum_mag = sum < 0 ? u128(-sum) : u128(sum);
          const u128 alpha_mag = static_cast<u128>(alpha_sig < 0 ? -alpha_sig : alpha_sig);
          expected = round_by_search((sum < 0) != (alpha_sig < 0), sum_mag * alpha_mag, alpha_exp - 20);
        }
        if (ref.c[idx] != expected) {
          char buf[96];
          std::snprintf(buf, sizeof buf, "RN16 output 0x%04x, brute force 0x%04x", ref.c[idx], expected);
          fail(p, buf + at);
        }
        if (nvfp4::round_result(e, p.alpha) != expected) fail(p, "round_result disagrees with exact_gemm's c" + at);
      }
    }
  }

  // The oracle accepts the exact output under every policy that can judge it, and rejects it
  // under `exact` with the last bit of one element flipped (unless that element must be NaN).
  for (const char* policy : {"fp32", "exact", "fp16-accum"}) {
    const nvfp4::OracleSummary s = nvfp4::judge(p, ref, ref.c.data(), nvfp4::Policy::parse(policy));
    if (s.any_failure()) fail(p, std::string("the oracle (") + policy + ") rejects the exact output");
  }
  std::vector<uint16_t> flipped = ref.c;
  const size_t victim = static_cast<size_t>(p.c_elems() / 2);
  flipped[victim] ^= 1;
  const nvfp4::OracleSummary s = nvfp4::judge(p, ref, flipped.data(), nvfp4::Policy::parse("exact"));
  const bool must_fail = !ref.elems[victim].nan;
  if (s.any_failure() != must_fail) {
    fail(p, std::string("the exact policy ") + (must_fail ? "accepts" : "rejects") +
                " a flipped bit at element " + std::to_string(victim));
  }
}

// The problems the brute force above covers: GEMV and GEMM with FP16 output, in either layout and
// either scale semantics (the first draw picks), within reference_fuzz_shape_limits. Binary input
// is the draws of the suite's one draw (ByteDraws), so this fuzzer meets every data class the
// schedule has; text is a case file, so the kernel fuzzer's seeds and saved cases are inputs too.
std::optional<nvfp4::Problem> reference_problem(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const nvfp4::ShapeLimits limits = nvfp4::reference_fuzz_shape_limits();
  std::optional<nvfp4::Problem> p;
  if (nvfp4::is_case_text(bytes)) {
    p = nvfp4::fuzz_input_problem(bytes, nullptr, limits);
  } else {
    nvfp4::ByteDraws d(data, size);
    nvfp4_kernel_info info{};
    info.abi_version = NVFP4_ABI_VERSION;
    info.ops = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
    info.out_types = 1u << NVFP4_OUT_FP16;
    info.sf_layouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
    info.m_multiple = info.n_multiple = info.k_multiple = 1;
    if (d.below(2)) info.flags |= NVFP4_FLAG_SIGNED_SCALES;
    p = nvfp4::draw_case(d, info, nvfp4::CaseConstraints{}, limits).problem;
  }
  const bool covered = p && (p->op == nvfp4::Op::gemv || p->op == nvfp4::Op::gemm) &&
                       p->out_type == nvfp4::OutType::fp16 && p->l * p->m * p->n * p->k <= limits.max_products;
  return covered ? p : std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::optional<nvfp4::Problem> problem = reference_problem(data, size);
  if (!problem) return 0;
  const nvfp4::Problem& p = *problem;
  check_decoders(p, data, size);
  check_layout(p, p.sfa, p.m, p.sfb.empty() ? 0x7F : p.sfb[0], "sfa");
  check_layout(p, p.sfb, p.n, p.sfa[0], "sfb");
  check_exact_gemm(p);
  return 0;
}
