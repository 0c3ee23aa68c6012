// The probe's targeted families and random distributions (matrix_unit_vectors.h).
#include "probe/matrix_unit_vectors.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>

#include "reference/formats.h"
#include "reference/stable_hash.h"

namespace nvfp4 {
namespace {

// The splitmix64 generator: every random choice here derives from the seed through this.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    const uint64_t z = splitmix64(state);
    state += 0x9E3779B97F4A7C15ull;
    return z;
  }
  uint64_t below(uint64_t n) { return next() % n; }
  int range(int lo, int hi) { return lo + static_cast<int>(below(static_cast<uint64_t>(hi - lo + 1))); }
  bool chance(int num, int den) { return below(static_cast<uint64_t>(den)) < static_cast<uint64_t>(num); }
};

uint64_t mix(uint64_t a, uint64_t b) { return Rng(a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull)).next(); }

// Field layout of a floating-point format; emax is the largest exponent of a finite value.
struct Fields {
  int exp_bits, man_bits, bias, emin, emax;
};
constexpr Fields kFp16{5, 10, 15, -14, 15}, kBf16{8, 7, 127, -126, 127}, kE4m3{4, 3, 7, -6, 8},
    kFp32{8, 23, 127, -126, 127};

const Fields& fields(MmaOperand op) {
  switch (op) {
    case MmaOperand::fp16: return kFp16;
    case MmaOperand::bf16: return kBf16;
    case MmaOperand::e4m3: return kE4m3;
    case MmaOperand::s8: break;
  }
  throw std::logic_error("s8 has no floating-point fields");
}

uint32_t sign_bit(const Fields& f) { return 1u << (f.exp_bits + f.man_bits); }

// A normal value (-1)^neg * (1 + man / 2^man_bits) * 2^e, e clamped to the format's range.
uint32_t normal_bits(const Fields& f, bool neg, int e, uint32_t man) {
  e = std::clamp(e, f.emin, f.emax);
  man &= (1u << f.man_bits) - 1u;
  if (&f == &kE4m3 && e == f.emax) man = std::min(man, 6u);  // S.1111.111 is NaN
  return (neg ? sign_bit(f) : 0u) | (static_cast<uint32_t>(e + f.bias) << f.man_bits) | man;
}

uint32_t subnormal_bits(const Fields& f, bool neg, uint32_t man) {
  man &= (1u << f.man_bits) - 1u;
  if (!man) man = 1;
  return (neg ? sign_bit(f) : 0u) | man;
}

uint32_t random_normal(Rng& r, const Fields& f, int e) {
  return normal_bits(f, r.chance(1, 2), e, static_cast<uint32_t>(r.next()));
}

uint32_t float_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

double e2m1_value(uint8_t code) { return e2m1_twice(code) * 0.5; }

// Builds a ProbeTiles one tile at a time, with vectors placed on tile diagonals.
class TileBuilder {
 public:
  explicit TileBuilder(const InstructionInfo& instr) { t_.instr = &instr; }

  // A new zeroed tile of the family; returns its index.
  int64_t new_tile(const std::string& family) {
    const InstructionInfo& in = *t_.instr;
    t_.a.resize(t_.a.size() + static_cast<size_t>(in.m * in.k), 0);
    t_.b.resize(t_.b.size() + static_cast<size_t>(in.n * in.k), 0);
    t_.c.resize(t_.c.size() + static_cast<size_t>(in.m * in.n), 0);
    t_.family.push_back(family_index(family));
    diagonal_used_ = 0;
    return t_.count++;
  }
  uint32_t& a(int64_t t, int i, int x) { return t_.a[(t * t_.instr->m + i) * t_.instr->k + x]; }
  uint32_t& b(int64_t t, int j, int x) { return t_.b[(t * t_.instr->n + j) * t_.instr->k + x]; }
  uint32_t& c(int64_t t, int i, int j) { return t_.c[(t * t_.instr->m + i) * t_.instr->n + j]; }

  // One dot-product vector: output (d, d) of the current tile of this family, or a new tile.
  void vector(const std::string& family, const std::vector<uint32_t>& av, const std::vector<uint32_t>& bv,
              uint32_t cv) {
    const int diag = std::min(t_.instr->m, t_.instr->n);
    if (t_.count == 0 || diagonal_used_ == diag || t_.family_names[t_.family.back()] != family) {
      new_tile(family);
    }
    const int64_t t = t_.count - 1;
    const int d = diagonal_used_++;
    for (int x = 0; x < t_.instr->k; ++x) {
      a(t, d, x) = x < static_cast<int>(av.size()) ? av[x] : 0;
      b(t, d, x) = x < static_cast<int>(bv.size()) ? bv[x] : 0;
    }
    c(t, d, d) = cv;
  }

  ProbeTiles take() { return std::move(t_); }

 private:
  uint16_t family_index(const std::string& name) {
    for (size_t i = 0; i < t_.family_names.size(); ++i)
      if (t_.family_names[i] == name) return static_cast<uint16_t>(i);
    t_.family_names.push_back(name);
    return static_cast<uint16_t>(t_.family_names.size() - 1);
  }
  ProbeTiles t_;
  int diagonal_used_ = 0;
};

// --- targeted families --------------------------------------------------------------------

// Two normal operands of format op whose product is m * 2^e (m in [1, 2), its mantissa in a).
bool product_operands(MmaOperand op, int e, double m, uint32_t* a, uint32_t* b) {
  const Fields& f = fields(op);
  const int ea = (e + (e >= 0 ? 1 : 0)) / 2, eb = e - ea;
  if (ea < f.emin || ea > f.emax || eb < f.emin || eb > f.emax) return false;
  const uint32_t man = static_cast<uint32_t>(std::lround((m - 1.0) * (1 << f.man_bits)));
  *a = normal_bits(f, false, ea, man);
  *b = normal_bits(f, false, eb, 0);
  return operand_value(op, *a) * operand_value(op, *b) == std::ldexp(m, e);
}

uint32_t negate(const Fields& f, uint32_t bits) { return bits ^ sign_bit(f); }

// The reference exponent R of the targeted families: 2^R and 2^(R - d) must both be products of
// normal operands for every d the families use.
int reference_exponent(MmaOperand op) {
  switch (op) {
    case MmaOperand::fp16: return 4;
    case MmaOperand::bf16: return 0;
    case MmaOperand::e4m3: return 14;
    case MmaOperand::s8: break;
  }
  return 0;
}

void float_targeted(TileBuilder& tb, const InstructionInfo& in) {
  const MmaOperand op = in.model->operand;
  const Fields& f = fields(op);
  const int k = in.k, R = reference_exponent(op);
  const int p0 = in.model->kept_bits, frac = in.model->result_fraction_bits;
  const int dmax = std::min(40, R - 2 * f.emin);
  uint32_t ra, rb, sa, sb;
  const bool have_ref = product_operands(op, R, 1.0, &ra, &rb);
  if (!have_ref) throw std::logic_error("no reference product");
  auto vec = [&](std::initializer_list<std::pair<int, std::pair<uint32_t, uint32_t>>> slots) {
    std::vector<uint32_t> av(k, 0), bv(k, 0);
    for (const auto& s : slots) {
      av[s.first] = s.second.first;
      bv[s.first] = s.second.second;
    }
    return std::make_pair(av, bv);
  };
  const uint32_t c_ref = encode_fp32(std::ldexp(1.0, R));

  // Kept bits and the rounding of addends: 2^R - 2^R + m 2^(R - d), the small addend placed in
  // the second and in the last slot, both signs, C zero or holding the +2^R.
  for (double m : {1.0, 1.5, 1.75}) {
    for (int d = 1; d <= dmax; ++d) {
      if (!product_operands(op, R - d, m, &sa, &sb)) continue;
      for (bool neg : {false, true}) {
        const uint32_t s = neg ? negate(f, sa) : sa;
        const std::string fam = m == 1.0 ? "kept_bits" : "window_rounding";
        auto [av, bv] = vec({{0, {ra, rb}}, {1, {negate(f, ra), rb}}, {2, {s, sb}}});
        tb.vector(fam, av, bv, 0);
        auto [av2, bv2] = vec({{k - 1, {negate(f, ra), rb}}, {k / 2, {s, sb}}});
        tb.vector(fam + "_c_reference", av2, bv2, c_ref);
      }
    }
  }
  // C below the window of the products: C = +-2^(R - d), products +2^R - 2^R.
  for (int d = 1; d <= 40; ++d) {
    for (bool neg : {false, true}) {
      auto [av, bv] = vec({{0, {ra, rb}}, {k - 1, {negate(f, ra), rb}}});
      tb.vector("c_kept_bits", av, bv, encode_fp32((neg ? -1 : 1) * std::ldexp(1.0, R - d)));
    }
  }
  // Result rounding: 2^R + m 2^(R - frac - 2), m = 1..7 (quarters of the result's last place)
  // and the mirrored negative sums; with C zero or C = 2^R.
  for (int m = 1; m <= 7; ++m) {
    int sh = 0;
    const double mant = 2 * std::frexp(static_cast<double>(m), &sh);  // m = mant * 2^(sh - 1)
    if (!product_operands(op, R - frac - 2 + sh - 1, mant, &sa, &sb)) continue;
    for (bool neg : {false, true}) {
      const uint32_t big = neg ? negate(f, ra) : ra, small = neg ? negate(f, sa) : sa;
      auto [av, bv] = vec({{0, {big, rb}}, {5 % k, {small, sb}}});
      tb.vector("result_rounding", av, bv, 0);
      auto [av2, bv2] = vec({{3 % k, {small, sb}}});
      tb.vector("result_rounding_c", av2, bv2, neg ? (c_ref | 0x80000000u) : c_ref);
    }
  }
  // Where C enters: C = 2^R and n products of 2^(R - p0 - 1) each, all below a shared window;
  // summed first (C added after) they reach 2^(R - p0 - 1) n.
  if (product_operands(op, R - p0 - 1, 1.0, &sa, &sb)) {
    for (int n : {2, 4, 8, k / 2, k}) {
      std::vector<uint32_t> av(k, 0), bv(k, 0);
      for (int x = 0; x < n; ++x) {
        av[x] = sa;
        bv[x] = sb;
      }
      tb.vector("c_entry", av, bv, c_ref);
      tb.vector("c_entry", av, bv, c_ref | 0x80000000u);
    }
  }
  // Block size and order: 2^R at slot i, 2^(R - frac - 1) at slot j, -2^R at slot l. One fused
  // addition keeps the small term; chained blocks lose it when i's block is rounded first.
  if (product_operands(op, R - frac - 1, 1.0, &sa, &sb)) {
    std::vector<std::array<int, 3>> triples;
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j)
        for (int l = 0; l < k; ++l)
          if (i != j && j != l && i != l) triples.push_back({i, j, l});
    if (triples.size() > 4000) {  // k = 32: a fixed-seed sample
      Rng r(0xB10C5);
      for (size_t x = 0; x < 4000; ++x) std::swap(triples[x], triples[x + r.below(triples.size() - x)]);
      triples.resize(4000);
    }
    for (const auto& t : triples) {
      auto [av, bv] = vec({{t[0], {ra, rb}}, {t[1], {sa, sb}}, {t[2], {negate(f, ra), rb}}});
      tb.vector("block_triples", av, bv, 0);
    }
  }
  // Block size, second probe: 2^R at slot i, every other slot 2^(R - p0 - 1): below one shared
  // window, but a block without slot i sums them first.
  if (product_operands(op, R - p0 - 1, 1.0, &sa, &sb)) {
    for (int i = 0; i < k; ++i) {
      std::vector<uint32_t> av(k, sa), bv(k, sb);
      av[i] = ra;
      bv[i] = rb;
      tb.vector("block_smalls", av, bv, 0);
    }
  }
  // Carries: every product the largest significand squared, same sign, plus C just below 2^(R+2).
  {
    const uint32_t man = (1u << f.man_bits) - 1u;
    const int ea = (R + 1) / 2, eb = R - ea;
    for (bool neg : {false, true}) {
      for (int n : {k / 2, k}) {
        std::vector<uint32_t> av(k, 0), bv(k, 0);
        for (int x = 0; x < n; ++x) {
          av[x] = normal_bits(f, neg, ea, man);
          bv[x] = normal_bits(f, false, eb, man);
        }
        const double cmax = (neg ? -1 : 1) * (std::ldexp(1.0, R + 2) - std::ldexp(1.0, R + 2 - 24));
        tb.vector("carry", av, bv, encode_fp32(cmax));
        tb.vector("carry", av, bv, 0);
      }
    }
  }
  // Subnormal operands: a subnormal times a normal, against a C whose last bits fall inside or
  // below the window the product's exponent sets.
  {
    const int c_shift[] = {-20, -12, -6, -2, 0, 2};
    for (uint32_t man : {1u, 3u, 5u, (1u << f.man_bits) - 1u}) {
      for (int eb = f.emin; eb <= f.emax; eb += std::max(1, (f.emax - f.emin) / 12)) {
        const uint32_t sub = subnormal_bits(f, false, man), nb = normal_bits(f, true, eb, 0x5A5A5);
        const double p = operand_value(op, sub) * operand_value(op, nb);
        for (int cs : c_shift) {
          int pe = 0;
          std::frexp(p, &pe);
          // C with 24 random-looking bits, exponent relative to the product's.
          const double cv = std::ldexp(1.0 + 0x2A5A5A / 8388608.0, pe + cs);
          if (std::fabs(cv) > 1e38 || std::fabs(cv) < 1e-37) continue;
          auto [av, bv] = vec({{1, {sub, nb}}});
          tb.vector("subnormal_operand", av, bv, encode_fp32(cv));
          auto [av2, bv2] = vec({{k - 2, {nb ^ sign_bit(f), sub}}});  // subnormal in B
          tb.vector("subnormal_operand", av2, bv2, encode_fp32(-cv));
        }
      }
    }
  }
  // The evidence step (shared/evidence/mma_subnormal_probe.cu, section 6): C = acc * 2^-28,
  // product (-640 * 2^-14) * (-0.01171875 * 2^-14) with the second operand an FP16 subnormal,
  // beside the same product from normal operands and unscaled.
  if (op == MmaOperand::fp16) {
    const double acc = static_cast<double>(-32.258827209472656f);
    const uint32_t c28 = encode_fp32(std::ldexp(acc, -28)), c0 = encode_fp32(acc);
    const auto h = [&](double v) { return encode_operand(MmaOperand::fp16, v); };
    auto [a1, b1] = vec({{3, {h(std::ldexp(-640.0, -14)), h(std::ldexp(-0.01171875, -14))}}});
    tb.vector("evidence_seed11", a1, b1, c28);
    auto [a2, b2] = vec({{3, {h(std::ldexp(2.5, -14)), h(std::ldexp(3.0, -14))}}});
    tb.vector("evidence_seed11", a2, b2, c28);
    auto [a3, b3] = vec({{3, {h(2.5), h(3.0)}}});
    tb.vector("evidence_seed11", a3, b3, c0);
    auto [a4, b4] = vec({{3, {h(-640.0), h(-0.01171875)}}});
    tb.vector("evidence_seed11", a4, b4, c0);
  }
  // C subnormal in FP32, with zero products and with products.
  for (uint32_t cbits : {0x00000001u, 0x00400000u, 0x807FFFFFu, 0x00012345u}) {
    tb.vector("c_subnormal", std::vector<uint32_t>(k, 0), std::vector<uint32_t>(k, 0), cbits);
    auto [av, bv] = vec({{0, {normal_bits(f, false, f.emin, 1), normal_bits(f, false, 0, 0)}}});
    tb.vector("c_subnormal", av, bv, cbits);
  }
  // Specials and signed zeros.
  {
    const uint32_t one = normal_bits(f, false, 0, 0), zero = 0, neg_zero = sign_bit(f);
    const uint32_t nan = op == MmaOperand::e4m3 ? 0x7Fu : (((1u << f.exp_bits) - 1u) << f.man_bits) | 1u;
    tb.vector("specials", {nan}, {one}, 0);
    tb.vector("specials", {one}, {one}, 0x7FC00000u);  // C NaN
    tb.vector("specials", {one}, {one}, 0x7F800000u);  // C +Inf
    tb.vector("specials", {one}, {one}, 0xFF800000u);  // C -Inf
    tb.vector("specials", {zero}, {zero}, 0x80000000u);  // -0 + (+0)
    tb.vector("specials", {neg_zero}, {zero}, 0x80000000u);  // -0 + (-0)
    tb.vector("specials", {neg_zero, neg_zero}, {zero, zero}, 0x00000000u);
    tb.vector("specials", {neg_zero}, {neg_zero}, 0x80000000u);  // -0 + (+0)
    tb.vector("specials", std::vector<uint32_t>(k, neg_zero), std::vector<uint32_t>(k, zero), 0x80000000u);
    tb.vector("specials", std::vector<uint32_t>(k, neg_zero), std::vector<uint32_t>(k, zero), 0);
    tb.vector("specials", {one, negate(f, one)}, {one, one}, 0x80000000u);  // exact cancellation
    tb.vector("specials", {one, negate(f, one)}, {one, one}, 0);
    if (f.exp_bits >= 5) {
      const uint32_t inf = ((1u << f.exp_bits) - 1u) << f.man_bits;
      tb.vector("specials", {inf}, {one}, 0);
      tb.vector("specials", {inf}, {zero}, 0);
      tb.vector("specials", {inf, negate(f, inf)}, {one, one}, 0);
      tb.vector("specials", {inf}, {one}, 0xFF800000u);
    }
  }
  // Overflow of the FP32 result (bf16 reaches it): FLT_MAX + ulp, 3 * 2^127, -FLT_MAX - 2^103.
  if (op == MmaOperand::bf16) {
    const uint32_t two104a = normal_bits(f, false, 52, 0), two104b = normal_bits(f, false, 52, 0);
    tb.vector("overflow", {two104a}, {two104b}, 0x7F7FFFFFu);  // FLT_MAX + 2^104 = 2^128
    tb.vector("overflow", {normal_bits(f, false, 103 / 2, 0)}, {normal_bits(f, false, 103 - 103 / 2, 0)},
              0x7F7FFFFFu);  // FLT_MAX + 2^103: half an ulp
    tb.vector("overflow", {normal_bits(f, false, 127, 64)}, {normal_bits(f, false, 1, 0)}, 0);  // 3 * 2^127
    tb.vector("overflow", {normal_bits(f, true, 127, 127)}, {normal_bits(f, false, 0, 127)}, 0);
    tb.vector("overflow", {normal_bits(f, false, 52, 0)}, {normal_bits(f, true, 51, 0)}, 0xFF7FFFFFu);
  }
  // The alignment floor (bf16): 2^E - 2^s for E around -133 and s = E - 27..E - 22. A floor F
  // raises the window's bottom to 2^(max(E, F) - p), which decides whether 2^s survives the cut.
  if (op == MmaOperand::bf16) {
    for (int e = -137; e <= -129; ++e)
      for (int s = e - 27; s <= e - 22; ++s) {
        uint32_t pa, pb, qa, qb;
        if (!product_operands(op, e, 1.0, &pa, &pb) || !product_operands(op, s, 1.0, &qa, &qb)) continue;
        tb.vector("alignment_floor", {pa, negate(f, qa)}, {pb, qb}, 0);
        tb.vector("alignment_floor", {negate(f, pa), qa}, {pb, qb}, 0);
      }
  }
  // Results in FP32's subnormal range (bf16): tiny products, with and without a subnormal C.
  if (op == MmaOperand::bf16) {
    for (int e = -160; e <= -120; e += 4) {
      uint32_t pa, pb;
      if (!product_operands(op, e, 1.75, &pa, &pb)) continue;
      tb.vector("fp32_subnormal_result", {pa}, {pb}, 0);
      tb.vector("fp32_subnormal_result", {pa, negate(f, pa)}, {pb, normal_bits(f, false, 0, 1)}, 0);
      tb.vector("fp32_subnormal_result", {pa}, {pb}, 0x00012345u);
      tb.vector("fp32_subnormal_result", {pa}, {pb}, 0x80400001u);
    }
  }
}

void s8_targeted(TileBuilder& tb, const InstructionInfo& in) {
  const int k = in.k;
  auto u8 = [](int v) { return static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(v))); };
  tb.vector("wrap", {u8(1)}, {u8(1)}, 0x7FFFFFFFu);   // INT32_MAX + 1
  tb.vector("wrap", {u8(-1)}, {u8(1)}, 0x80000000u);  // INT32_MIN - 1
  std::vector<uint32_t> big(k, u8(-128)), big2(k, u8(-128));
  tb.vector("wrap", big, big2, 0x7FFFFFFFu);  // + 32 * 16384
  tb.vector("wrap", big, std::vector<uint32_t>(k, u8(127)), 0x80000000u);
  tb.vector("extremes", big, big2, 0);
  tb.vector("extremes", std::vector<uint32_t>(k, u8(127)), std::vector<uint32_t>(k, u8(-128)), 0);
  tb.vector("extremes", std::vector<uint32_t>(k, u8(127)), std::vector<uint32_t>(k, u8(127)), 0xFFFFFFFFu);
}

// Pairing tiles: A one-hot (row i holds k = (i + r m) % K), B codes that name their k, so a wrong
// register layout shows which k met which (the model and the exact value agree here).
void pairing_tiles(TileBuilder& tb, const InstructionInfo& in) {
  const MmaOperand op = in.model->operand;
  for (int r = 0; r * in.m < in.k || r == 0; ++r) {
    const int64_t t = tb.new_tile("pairing");
    for (int i = 0; i < in.m; ++i) {
      const int x = (i + r * in.m) % in.k;
      const double scale = op == MmaOperand::s8 ? 1.0 : (x < 16 ? 1.0 : 1.0 / 16);
      tb.a(t, i, x) = encode_operand(op, scale);
    }
    for (int j = 0; j < in.n; ++j)
      for (int x = 0; x < in.k; ++x) {
        const double code = op == MmaOperand::s8 ? (x + 1 + 32 * (j % 2)) : ((x % 16) + 1);
        tb.b(t, j, x) = encode_operand(op, (j % 2 && op != MmaOperand::s8) ? -code : code);
      }
  }
}

// --- random distributions --------------------------------------------------------------------

struct Distribution {
  const char* name;
  int weight;  // share of the tiles, in parts of the sum of weights
};

std::vector<Distribution> distributions(MmaOperand op) {
  if (op == MmaOperand::s8) return {{"s8_uniform", 60}, {"nvfp4", 40}};
  if (op == MmaOperand::bf16)
    return {{"spread", 40}, {"cancel", 15}, {"nvfp4", 20}, {"nvfp4_tile_scaled", 15}, {"subnormal", 8}, {"underflow", 2}};
  return {{"spread", 42}, {"cancel", 15}, {"nvfp4", 20}, {"nvfp4_tile_scaled", 15}, {"subnormal", 8}};
}

// Per-format exponent centres for the spread distribution: operands and products stay finite and
// the products stay in FP32's normal range.
std::pair<int, int> centre_range(MmaOperand op) {
  switch (op) {
    case MmaOperand::fp16: return {-10, 12};
    case MmaOperand::bf16: return {-40, 40};
    case MmaOperand::e4m3: return {-4, 6};
    case MmaOperand::s8: break;
  }
  return {0, 0};
}

double approx_dot(MmaOperand op, const uint32_t* a, const uint32_t* b, int k) {
  double s = 0;
  for (int x = 0; x < k; ++x) s += operand_value(op, a[x]) * operand_value(op, b[x]);
  return s;
}

// C for an output: zero, a value near cancelling the dot, or a random value near 2^e.
uint32_t random_c(Rng& r, MmaOperand op, const uint32_t* a, const uint32_t* b, int k, int e) {
  const int pick = r.range(0, 7);
  if (pick == 0) return 0;
  if (pick <= 2) {
    const double d = approx_dot(op, a, b, k);
    if (d != 0 && std::isfinite(d) && std::fabs(d) < 1e37 && std::fabs(d) > 1e-37) {
      const uint32_t bits = float_bits(static_cast<float>(-d));
      return bits + static_cast<uint32_t>(r.range(-3, 3));  // a few ulps off exact cancellation
    }
  }
  e = std::clamp(e, -125, 126);
  return normal_bits(kFp32, r.chance(1, 2), e, static_cast<uint32_t>(r.next()));
}

void spread_tile(Rng& r, TileBuilder& tb, int64_t t, const InstructionInfo& in, bool cancel) {
  const MmaOperand op = in.model->operand;
  const Fields& f = fields(op);
  const auto [lo, hi] = centre_range(op);
  static const int kWidths[] = {0, 1, 3, 8, 16, 30};
  const int w = kWidths[r.below(6)];
  const int ca = r.range(lo, hi), cb = r.range(lo, hi);
  auto operand = [&](int centre) -> uint32_t {
    if (r.chance(1, 8)) return 0;
    return random_normal(r, f, centre + r.range(-w / 2, w / 2));
  };
  for (int i = 0; i < in.m; ++i)
    for (int x = 0; x < in.k; ++x) tb.a(t, i, x) = operand(ca);
  for (int j = 0; j < in.n; ++j)
    for (int x = 0; x < in.k; ++x) tb.b(t, j, x) = operand(cb);
  if (cancel) {
    // Pairs of products that nearly cancel: a' = -a, b' = b with its last bits changed.
    for (int i = 0; i < in.m; ++i)
      for (int x = 0; x + 1 < in.k; x += 2) tb.a(t, i, x + 1) = tb.a(t, i, x) ^ sign_bit(f);
    for (int j = 0; j < in.n; ++j)
      for (int x = 0; x + 1 < in.k; x += 2)
        tb.b(t, j, x + 1) = tb.b(t, j, x) ? tb.b(t, j, x) ^ static_cast<uint32_t>(r.range(0, 3)) : 0;
  }
  for (int i = 0; i < in.m; ++i)
    for (int j = 0; j < in.n; ++j) {
      const int e = ca + cb + (cancel ? -f.man_bits - r.range(0, 6) : r.range(-w, w) + r.range(0, 4));
      tb.c(t, i, j) = random_c(r, op, &tb.a(t, i, 0), &tb.b(t, j, 0), in.k, e);
    }
}

// NVFP4 data as the kernels feed it: E2M1 values times an E4M3 scale per 16 elements, converted
// exactly to the operand format (e4m3: times a power of two; s8: the doubled E2M1 integers), and
// C a partial sum on the data's grid. tile_scale multiplies operands by 2^-14 and C by 2^-28 (e4m3:
// 2^-4 and 2^-8): the old gemm_tc tiling that made FP16 operands subnormal.
void nvfp4_tile(Rng& r, TileBuilder& tb, int64_t t, const InstructionInfo& in, bool tile_scale) {
  const MmaOperand op = in.model->operand;
  static const int kDensity[] = {16, 8, 2};  // nonzero in 16ths
  const int density = kDensity[r.below(3)];
  // FP16/BF16: 2^-14 (gemm_tc's old tiling); e4m3: 2^-4, as far as its grid of 2^-9 allows.
  const int tile_exp = op == MmaOperand::e4m3 ? -4 : -14;
  auto fill = [&](uint32_t* row) {
    for (int blk = 0; blk * 16 < in.k; ++blk) {
      double scale;
      if (op == MmaOperand::e4m3) {
        scale = std::ldexp(1.0, r.range(-4, 4));
      } else if (op == MmaOperand::s8) {
        scale = 1;
      } else {
        uint8_t byte;
        do byte = static_cast<uint8_t>(r.below(0x7F)); while (byte == 0);
        const ScaleValue s = e4m3_decode(byte, ScaleSemantics::ue4m3);
        scale = std::ldexp(static_cast<double>(s.sig), s.exp);
      }
      for (int x = blk * 16; x < std::min(in.k, blk * 16 + 16); ++x) {
        const uint8_t code = r.below(16) < static_cast<uint64_t>(density) ? static_cast<uint8_t>(r.below(16)) : 0;
        double v = op == MmaOperand::s8 ? e2m1_twice(code) : e2m1_value(code) * scale;
        if (tile_scale) v = std::ldexp(v, tile_exp);
        row[x] = encode_operand(op, v);
      }
    }
  };
  for (int i = 0; i < in.m; ++i) fill(&tb.a(t, i, 0));
  for (int j = 0; j < in.n; ++j) fill(&tb.b(t, j, 0));
  for (int i = 0; i < in.m; ++i)
    for (int j = 0; j < in.n; ++j) {
      if (op == MmaOperand::s8) {
        tb.c(t, i, j) = static_cast<uint32_t>(r.range(-(1 << 20), 1 << 20));
        continue;
      }
      if (r.chance(1, 4)) {
        tb.c(t, i, j) = 0;
        continue;
      }
      // A partial sum of earlier blocks: a multiple of 2^-20 (e4m3 data: of 2^-10) below
      // 2^(width - 20), truncated to FP32 as a matrix-unit chain would leave it.
      const int width = r.range(1, 40);
      const uint64_t units = (r.next() >> (64 - width)) | 1u;
      double v = std::ldexp(static_cast<double>(units), op == MmaOperand::e4m3 ? -10 : -20);
      if (r.chance(1, 2)) v = -v;
      if (tile_scale) v = std::ldexp(v, 2 * tile_exp);
      uint32_t bits = float_bits(static_cast<float>(v));
      if (std::fabs(static_cast<double>(static_cast<float>(v))) > std::fabs(v)) --bits;  // toward zero
      tb.c(t, i, j) = bits;
    }
}

// Subnormal operands in A, normal ones in B large enough that products stay FP32-normal.
void subnormal_tile(Rng& r, TileBuilder& tb, int64_t t, const InstructionInfo& in) {
  const MmaOperand op = in.model->operand;
  const Fields& f = fields(op);
  const int b_lo = op == MmaOperand::bf16 ? 60 : 0, b_hi = op == MmaOperand::bf16 ? 120 : f.emax;
  const int cb = r.range(b_lo, b_hi);
  for (int i = 0; i < in.m; ++i)
    for (int x = 0; x < in.k; ++x) {
      const int pick = r.range(0, 5);
      tb.a(t, i, x) = pick == 0 ? 0 : pick <= 2 ? subnormal_bits(f, r.chance(1, 2), static_cast<uint32_t>(r.next()))
                                                : random_normal(r, f, f.emin + r.range(0, 6));
    }
  for (int j = 0; j < in.n; ++j)
    for (int x = 0; x < in.k; ++x) tb.b(t, j, x) = r.chance(1, 8) ? 0 : random_normal(r, f, cb + r.range(-3, 0));
  for (int i = 0; i < in.m; ++i)
    for (int j = 0; j < in.n; ++j)
      tb.c(t, i, j) = random_c(r, op, &tb.a(t, i, 0), &tb.b(t, j, 0), in.k, f.emin + cb + r.range(-14, 4));
}

// bf16 products and C in FP32's subnormal range: outside the rule's domain, recorded apart.
void underflow_tile(Rng& r, TileBuilder& tb, int64_t t, const InstructionInfo& in) {
  const Fields& f = fields(in.model->operand);
  for (int i = 0; i < in.m; ++i)
    for (int x = 0; x < in.k; ++x) tb.a(t, i, x) = r.chance(1, 8) ? 0 : random_normal(r, f, r.range(-80, -60));
  for (int j = 0; j < in.n; ++j)
    for (int x = 0; x < in.k; ++x) tb.b(t, j, x) = r.chance(1, 8) ? 0 : random_normal(r, f, r.range(-80, -60));
  for (int i = 0; i < in.m; ++i)
    for (int j = 0; j < in.n; ++j)
      tb.c(t, i, j) = r.chance(1, 3) ? 0 : static_cast<uint32_t>(r.next() & 0x807FFFFFu);  // subnormal C
}

void s8_uniform_tile(Rng& r, TileBuilder& tb, int64_t t, const InstructionInfo& in) {
  for (int i = 0; i < in.m; ++i)
    for (int x = 0; x < in.k; ++x) tb.a(t, i, x) = static_cast<uint32_t>(r.next() & 0xFFu);
  for (int j = 0; j < in.n; ++j)
    for (int x = 0; x < in.k; ++x) tb.b(t, j, x) = static_cast<uint32_t>(r.next() & 0xFFu);
  for (int i = 0; i < in.m; ++i)
    for (int j = 0; j < in.n; ++j) tb.c(t, i, j) = static_cast<uint32_t>(r.next());
}

}  // namespace

uint32_t encode_fp32(double value) {
  const float f = static_cast<float>(value);
  if (static_cast<double>(f) != value && !std::isnan(value)) throw std::invalid_argument("not exact in FP32");
  return float_bits(f);
}

uint32_t encode_operand(MmaOperand op, double value) {
  if (op == MmaOperand::s8) {
    if (value != std::trunc(value) || value < -128 || value > 127) throw std::invalid_argument("not an int8");
    return static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(value)));
  }
  if (op == MmaOperand::bf16) {
    const uint32_t bits = encode_fp32(value);
    if (bits & 0xFFFFu) throw std::invalid_argument("not exact in bf16");
    return bits >> 16;
  }
  if (op == MmaOperand::e4m3) {
    static const std::map<double, uint32_t> kCodes = [] {
      std::map<double, uint32_t> m;
      for (uint32_t c = 0; c < 256; ++c) {
        const double v = operand_value(MmaOperand::e4m3, c);
        if (!std::isnan(v) && !(v == 0 && c != 0 && c != 0x80)) m.emplace(v == 0 && c == 0x80 ? -0.0 : v, c);
      }
      return m;
    }();
    const auto it = kCodes.find(value);
    if (it == kCodes.end()) throw std::invalid_argument("not exact in e4m3");
    return std::signbit(value) && value == 0 ? 0x80u : it->second;
  }
  // fp16: through FP32 (exact for every fp16 value), then the fields.
  const uint32_t bits = encode_fp32(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int e = static_cast<int>((bits >> 23) & 0xFF) - 127;
  const uint32_t man = bits & 0x7FFFFFu;
  if (value == 0) return sign;
  if (e >= -14) {
    if (e > 15 || (man & 0x1FFFu)) throw std::invalid_argument("not exact in fp16");
    return sign | (static_cast<uint32_t>(e + 15) << 10) | (man >> 13);
  }
  // fp16 subnormal: value = m * 2^-24.
  const double m = std::ldexp(std::fabs(value), 24);
  if (m != std::trunc(m) || m >= 1024) throw std::invalid_argument("not exact in fp16");
  return sign | static_cast<uint32_t>(m);
}

ProbeTiles targeted_tiles(const InstructionInfo& instr) {
  TileBuilder tb(instr);
  pairing_tiles(tb, instr);
  if (instr.model->operand == MmaOperand::s8) {
    s8_targeted(tb, instr);
  } else {
    float_targeted(tb, instr);
  }
  return tb.take();
}

ProbeTiles random_tiles(const InstructionInfo& instr, uint64_t seed, int64_t vectors) {
  TileBuilder tb(instr);
  const int64_t per_tile = instr.m * instr.n;
  const int64_t tiles = (vectors + per_tile - 1) / per_tile;
  const std::vector<Distribution> dists = distributions(instr.model->operand);
  int total_weight = 0;
  for (const Distribution& d : dists) total_weight += d.weight;
  int64_t done = 0;
  for (size_t di = 0; di < dists.size(); ++di) {
    const int64_t share = di + 1 == dists.size() ? tiles - done : tiles * dists[di].weight / total_weight;
    for (int64_t s = 0; s < share; ++s) {
      const int64_t t = tb.new_tile(dists[di].name);
      Rng r(mix(mix(seed, static_cast<uint64_t>(instr.id)), static_cast<uint64_t>(t)));
      const std::string name = dists[di].name;
      if (name == "spread") spread_tile(r, tb, t, instr, false);
      else if (name == "cancel") spread_tile(r, tb, t, instr, true);
      else if (name == "nvfp4") nvfp4_tile(r, tb, t, instr, false);
      else if (name == "nvfp4_tile_scaled") nvfp4_tile(r, tb, t, instr, true);
      else if (name == "subnormal") subnormal_tile(r, tb, t, instr);
      else if (name == "underflow") underflow_tile(r, tb, t, instr);
      else s8_uniform_tile(r, tb, t, instr);
    }
    done += share;
  }
  return tb.take();
}

}  // namespace nvfp4
