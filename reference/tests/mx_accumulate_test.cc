// The GPU reference's arithmetic (reference/mx_accumulate.h) run on the CPU against exact_mx, the
// independent CPU reference: every field of every element (both accumulators limb by limb, t, g,
// NaN and Inf flags) on random problems of every format pair and on the edges (E8M0 0x00 and
// 0xFE in one row, 0xFF NaN scales, E5M2 Inf and NaN, E4M3 +-448, odd k, k past a chunk). Each
// problem goes through whole rows (mx_dot) and through the chunks of 32 elements in which the
// device's tiles hold them (mx_chunk_element, mx_chunk_scale, mx_add_segments).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "reference/exact_mx.h"
#include "reference/mx_accumulate.h"
#include "reference/tests/random_problem.h"

namespace nvfp4 {
namespace {

constexpr BlockFormat kFormats[] = {BlockFormat::nvfp4, BlockFormat::mxfp4, BlockFormat::mxfp8_e4m3,
                                    BlockFormat::mxfp8_e5m2};

const uint8_t* row_data(const MxOperand& op, int64_t row) {
  return op.data.data() + row * operand_row_bytes(op.format, op.k);
}
const uint8_t* row_scales(const MxOperand& op, int64_t row) { return op.scales.data() + row * op.kb(); }

// Whole rows decoded, then mx_dot per element.
std::vector<MxElement> by_whole_rows(const MxProblem& p) {
  auto decode = [&](const MxOperand& op, int64_t row, std::vector<int64_t>& v, std::vector<ScaleValue>& s) {
    v.resize(static_cast<size_t>(op.k));
    s.resize(static_cast<size_t>(op.kb()));
    for (int64_t x = 0; x < op.k; ++x) v[static_cast<size_t>(x)] = mx_element_int(op.format, row_data(op, row), x);
    for (int64_t b = 0; b < op.kb(); ++b)
      s[static_cast<size_t>(b)] = mx_scale(op.format, row_scales(op, row)[b], p.semantics);
  };
  std::vector<MxElement> out;
  std::vector<int64_t> av, bv;
  std::vector<ScaleValue> as, bs;
  for (int64_t b = 0; b < p.l; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        decode(p.a, b * p.m + i, av, as);
        decode(p.b, b * p.n + j, bv, bs);
        out.push_back(mx_dot(p.a.format, av.data(), as.data(), p.b.format, bv.data(), bs.data(), p.k));
      }
  return out;
}

// As the device's tiles: one chunk of each row at a time (rows padded like the shared arrays).
std::vector<MxElement> by_chunks(const MxProblem& p) {
  std::vector<MxElement> out;
  for (int64_t b = 0; b < p.l; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        const int64_t ra = b * p.m + i, rb = b * p.n + j;
        MxElement e;
        for (int64_t c0 = 0; c0 < p.k; c0 += kMxChunk) {
          int64_t av[kMxChunk + 1], bv[kMxChunk + 1];
          ScaleValue as[kMxChunkScales], bs[kMxChunkScales];
          for (int x = 0; x < kMxChunk; ++x) {
            av[x] = mx_chunk_element(p.a.format, row_data(p.a, ra), c0, x, p.k);
            bv[x] = mx_chunk_element(p.b.format, row_data(p.b, rb), c0, x, p.k);
          }
          for (int s = 0; s < kMxChunkScales; ++s) {
            as[s] = mx_chunk_scale(p.a.format, row_scales(p.a, ra), p.a.kb(), c0, s, p.semantics);
            bs[s] = mx_chunk_scale(p.b.format, row_scales(p.b, rb), p.b.kb(), c0, s, p.semantics);
          }
          mx_add_segments(e, p.a.format, av, as, p.b.format, bv, bs, c0, c0 + kMxChunk, p.k);
        }
        mx_finish(e);
        out.push_back(e);
      }
  return out;
}

std::string shape(const MxProblem& p) {
  return std::string(to_string(p.a.format)) + " x " + to_string(p.b.format) + " m=" + std::to_string(p.m) +
         " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) + " l=" + std::to_string(p.l) + " " +
         to_string(p.semantics);
}

// Both ways of the device algorithm give exact_mx's facts for every element.
void expect_same_as_exact_mx(const MxProblem& p) {
  const std::vector<MxElement> want = exact_mx(p);
  for (const auto& [name, got] : {std::make_pair("whole rows", by_whole_rows(p)), std::make_pair("chunks", by_chunks(p))}) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t x = 0; x < want.size(); ++x)
      ASSERT_TRUE(same_mx_facts(got[x], want[x]))
          << name << ", " << shape(p) << ", element " << x << "\n  exact_mx: " << describe_mx_facts(want[x])
          << "\n  mx_dot:   " << describe_mx_facts(got[x]);
  }
}

MxOperand operand(BlockFormat f, int64_t rows, int64_t k, int64_t l) {
  MxOperand op;
  op.format = f;
  op.rows = rows, op.k = k, op.l = l;
  op.data.assign(static_cast<size_t>(op.data_bytes()), 0);
  op.scales.assign(static_cast<size_t>(op.scale_bytes()), f == BlockFormat::nvfp4 ? 0x38 : 0x7F);
  return op;
}

// Any bytes: elements of every code (Inf and NaN included) and scales of every byte, or (tame)
// finite elements and no NaN scale, so that the sums rather than the flags decide.
MxOperand random_operand(std::mt19937_64& rng, BlockFormat f, int64_t rows, int64_t k, int64_t l, bool tame) {
  MxOperand op = operand(f, rows, k, l);
  op.data = random_bytes(rng, op.data_bytes());
  op.scales = random_bytes(rng, op.scale_bytes());
  if (!tame) return op;
  for (auto& b : op.data)
    while ((f == BlockFormat::mxfp8_e4m3 && (b & 0x7F) == 0x7F) || (f == BlockFormat::mxfp8_e5m2 && ((b >> 2) & 31) == 31))
      b = static_cast<uint8_t>(rng());
  for (auto& s : op.scales)
    while (f == BlockFormat::nvfp4 ? (s & 0x7F) == 0x7F : s == 0xFF) s = static_cast<uint8_t>(rng());
  return op;
}

// The host's add (add_host, the exact reference's) and the device's (add, every limb visited)
// give the same limbs after every step of long random runs: values of both signs at every
// exponent the accumulator takes, and the runs of carries and borrows that cross limbs (a value
// just below a limb's boundary, then one unit more; zero crossed either way).
TEST(MxAccumulate, TheHostsAddIsTheDevicesLimbForLimb) {
  std::mt19937_64 rng(20261205);
  const auto same = [](const Kulisch& a, const Kulisch& b) {
    for (int w = 0; w < Kulisch::kLimbs; ++w)
      if (a.limb[w] != b.limb[w]) return false;
    return true;
  };
  for (int run = 0; run < 200; ++run) {
    Kulisch device, host;
    for (int step = 0; step < 400; ++step) {
      i128 v;
      int exp;
      switch (rng() % 4) {
        case 0:  // a wide value anywhere the sums stay in range (below 2^300)
          v = static_cast<i128>((static_cast<u128>(rng()) << 64 | rng()) >> (rng() % 128));
          exp = Kulisch::kLsbExp + static_cast<int>(rng() % 480);
          break;
        case 1:  // one unit at the bottom: a carry or borrow through every limb above
          v = 1;
          exp = Kulisch::kLsbExp;
          break;
        case 2:  // the accumulator's own value back (to zero, or past it by one unit)
          v = -1;
          exp = Kulisch::kLsbExp + 64 * static_cast<int>(rng() % Kulisch::kLimbs);
          break;
        default:  // small values at limb boundaries
          v = static_cast<i128>(rng() % 5);
          exp = Kulisch::kLsbExp + 64 * static_cast<int>(rng() % 8) - static_cast<int>(rng() % 2);
          if (exp < Kulisch::kLsbExp) exp = Kulisch::kLsbExp;
      }
      if (rng() % 2) v = -v;
      device.add(v, exp);
      host.add_host(v, exp);
      ASSERT_TRUE(same(device, host)) << "run " << run << ", step " << step << ": " << static_cast<double>(v)
                                      << " * 2^" << exp;
    }
  }
}

TEST(MxAccumulate, RandomProblemsOfEveryFormatPairMatchExactMx) {
  std::mt19937_64 rng(20261202);
  int64_t problems = 0;
  for (const BlockFormat fa : kFormats)
    for (const BlockFormat fb : kFormats)
      for (int rep = 0; rep < 40; ++rep) {
        MxProblem p;
        p.m = 1 + rng() % 4, p.n = 1 + rng() % 3, p.l = 1 + rng() % 2;
        p.k = 1 + rng() % 200;
        if ((packs_nibbles(fa) || packs_nibbles(fb)) && p.k % 2) ++p.k;
        p.semantics = rng() % 2 ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
        const bool tame = rep % 2 == 0;
        p.a = random_operand(rng, fa, p.m, p.k, p.l, tame);
        p.b = random_operand(rng, fb, p.n, p.k, p.l, tame);
        expect_same_as_exact_mx(p);
        if (HasFatalFailure()) return;
        ++problems;
      }
  std::printf("%lld random problems, every format pair, matched exact_mx\n", static_cast<long long>(problems));
}

// One element's problem: A and B of one row each.
MxProblem one_row(BlockFormat fa, BlockFormat fb, int64_t k) {
  MxProblem p;
  p.op = Op::gemv;
  p.k = k;
  p.a = operand(fa, 1, k, 1);
  p.b = operand(fb, 1, k, 1);
  return p;
}

void set_element(MxOperand& op, int64_t x, uint8_t code) {
  if (!packs_nibbles(op.format)) {
    op.data[static_cast<size_t>(x)] = code;
    return;
  }
  uint8_t& b = op.data[static_cast<size_t>(x / 2)];
  b = x % 2 ? static_cast<uint8_t>((b & 0x0F) | (code << 4)) : static_cast<uint8_t>((b & 0xF0) | (code & 0x0F));
}

TEST(MxAccumulate, EdgesMatchExactMx) {
  // E8M0 0x00 (2^-127) and 0xFE (2^127) in one row, against both extremes: products from 2^-286
  // to 2^286 in one accumulator, and a cancellation at 2^254 leaving 1.5.
  for (const BlockFormat f : {BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e5m2, BlockFormat::mxfp4}) {
    MxProblem p = one_row(f, f, 96);
    const uint8_t big = f == BlockFormat::mxfp8_e4m3 ? 0x7E : f == BlockFormat::mxfp8_e5m2 ? 0x7B : 0x7;
    const uint8_t one = f == BlockFormat::mxfp8_e4m3 ? 0x38 : f == BlockFormat::mxfp8_e5m2 ? 0x3C : 0x2;
    const uint8_t tiny = 0x01;  // the smallest subnormal (E2M1: 0.5)
    set_element(p.a, 0, big), set_element(p.b, 0, one);
    set_element(p.a, 1, tiny), set_element(p.b, 1, tiny);
    set_element(p.a, 32, static_cast<uint8_t>(big | (packs_nibbles(f) ? 0x8 : 0x80))), set_element(p.b, 32, one);
    set_element(p.a, 64, one), set_element(p.b, 64, one);
    p.a.scales = {0xFE, 0x00, 0x7F};
    p.b.scales = {0xFE, 0xFE, 0x00};
    expect_same_as_exact_mx(p);
    p.b.scales = {0x00, 0xFE, 0x7F};
    expect_same_as_exact_mx(p);
  }
  // NaN scale 0xFF: the element is NaN; the other blocks' sums still count.
  {
    MxProblem p = one_row(BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4, 64);
    set_element(p.a, 3, 0x38), set_element(p.b, 3, 0x2);
    set_element(p.a, 40, 0x40), set_element(p.b, 40, 0x3);
    p.a.scales = {0x7F, 0xFF};
    expect_same_as_exact_mx(p);
    p.a.scales = {0xFF, 0x80};
    expect_same_as_exact_mx(p);
  }
  // E5M2 Inf and NaN: +Inf alone, Infs of both signs, Inf times a zero element or a zero NVFP4
  // scale, an Inf under a NaN scale, NaN; E4M3 +-448 and its NaN.
  {
    MxProblem p = one_row(BlockFormat::mxfp8_e5m2, BlockFormat::mxfp8_e5m2, 64);
    for (int x = 0; x < 64; ++x) set_element(p.b, x, 0x3C);
    set_element(p.a, 5, 0x7C);
    expect_same_as_exact_mx(p);
    set_element(p.a, 6, 0xFC);
    expect_same_as_exact_mx(p);
    set_element(p.a, 6, 0), set_element(p.b, 5, 0x80);
    expect_same_as_exact_mx(p);
    set_element(p.b, 5, 0xBC);
    p.a.scales = {0x7F, 0xFF};
    set_element(p.a, 33, 0xFC);
    expect_same_as_exact_mx(p);
    set_element(p.a, 7, 0x7E);  // NaN
    expect_same_as_exact_mx(p);
  }
  {
    MxProblem p = one_row(BlockFormat::mxfp8_e5m2, BlockFormat::nvfp4, 32);
    set_element(p.a, 2, 0x7C), set_element(p.b, 2, 0x2);
    p.b.scales = {0x38, 0x00};  // the Inf's block has a zero scale: Inf * 0
    set_element(p.a, 20, 0x7C), set_element(p.b, 20, 0x2);
    expect_same_as_exact_mx(p);
    p.b.scales = {0xB8, 0x38};  // a negative scale (e4m3 semantics) turns +Inf into -Inf
    p.semantics = ScaleSemantics::e4m3;
    expect_same_as_exact_mx(p);
  }
  {
    MxProblem p = one_row(BlockFormat::mxfp8_e4m3, BlockFormat::mxfp8_e4m3, 33);  // odd k
    for (int x = 0; x < 33; ++x) set_element(p.a, x, x % 2 ? 0x7E : 0xFE), set_element(p.b, x, 0x7E);
    p.a.scales = {0xFE, 0x00};
    p.b.scales = {0x90, 0x01};
    expect_same_as_exact_mx(p);
    set_element(p.a, 32, 0x7F);
    expect_same_as_exact_mx(p);
  }
  // MXFP8 with every k from 1 to 70 (a chunk and a partial second), mixed with MXFP4 where even.
  std::mt19937_64 rng(448);
  for (int64_t k = 1; k <= 70; ++k)
    for (const BlockFormat fb : {BlockFormat::mxfp8_e5m2, BlockFormat::mxfp4, BlockFormat::nvfp4}) {
      if (packs_nibbles(fb) && k % 2) continue;
      MxProblem p;
      p.m = 2, p.n = 2, p.k = k;
      p.a = random_operand(rng, BlockFormat::mxfp8_e4m3, 2, k, 1, k % 3 != 0);
      p.b = random_operand(rng, fb, 2, k, 1, k % 3 != 0);
      expect_same_as_exact_mx(p);
      std::swap(p.a, p.b);
      expect_same_as_exact_mx(p);
      if (HasFatalFailure()) return;
    }
}

// Deep rows: many blocks of exponents over the whole E8M0 range, so that carries and borrows run
// across the accumulator's limbs.
TEST(MxAccumulate, DeepRowsAcrossTheWholeExponentRangeMatchExactMx) {
  std::mt19937_64 rng(254);
  for (int rep = 0; rep < 12; ++rep) {
    MxProblem p;
    p.m = 3, p.n = 2, p.k = 4096 + 2 * rep;
    p.a = random_operand(rng, kFormats[rep % 4], p.m, p.k, 1, true);
    p.b = random_operand(rng, kFormats[(rep / 4 + rep) % 4], p.n, p.k, 1, true);
    expect_same_as_exact_mx(p);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace nvfp4
