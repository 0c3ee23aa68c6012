// The one schedule: a pure function of (seed, kernel, index); its mix (plain, mixed, targeted,
// large, unsupported) as documented; shapes that leave the first tile in every dimension; and its
// targeted cases kill the tensor-core quirk of subnormal operands, shown here on the H200's
// measured matrix-unit model (reference/matrix_unit_model.h) without a GPU.
#include <gtest/gtest.h>

#include <chrono>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "harness/draw/schedule.h"
#include "reference/stable_hash.h"
#include "reference/case_file.h"
#include "reference/exact_gemm.h"
#include "reference/formats.h"
#include "reference/matrix_unit_model.h"
#include "reference/oracle.h"

namespace nvfp4 {
namespace {

nvfp4_kernel_info any_gemm() {
  nvfp4_kernel_info info{};
  info.abi_version = NVFP4_ABI_VERSION;
  info.memory = NVFP4_MEMORY_CUDA;
  info.ops = (1u << NVFP4_OP_GEMV) | (1u << NVFP4_OP_GEMM);
  info.sf_layouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
  info.m_multiple = info.n_multiple = info.k_multiple = 1;
  return info;
}

// A kernel declaring the MX formats gets every pair of them, mixed both ways, and scales that
// defeat cancellation: pairwise-distinct E8M0 exponents along each row and column of blocks
// (for the default scale class), 0x00 against 0xFE, NaN scales, E5M2 Inf and NaN elements and
// E4M3 elements at +-448.
TEST(MxSchedule, DrawsEveryFormatPairAndScalesThatDefeatCancellation) {
  nvfp4_kernel_info info = any_gemm();
  info.memory = NVFP4_MEMORY_HOST;
  info.out_types = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
  info.a_formats = info.b_formats =
      (1u << NVFP4_FORMAT_MXFP4) | (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);
  ScheduleOptions o;
  o.seed = 32;
  const Schedule schedule(info, "mx_kernel", o);
  std::set<std::pair<BlockFormat, BlockFormat>> pairs;
  int extremes = 0, nan_scales = 0, e5m2_specials = 0, e4m3_448 = 0, distinct_checked = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const ScheduledCase c = schedule.at(i);
    const Problem& p = c.problem;
    if (c.kind == CaseKind::unsupported) continue;
    ASSERT_TRUE(p.mx_operands()) << p.note;
    ASSERT_EQ(problem_error(p), "") << p.note;
    pairs.insert({p.a_format, p.b_format});
    nan_scales += std::count(p.sfa.begin(), p.sfa.end(), 0xFF) + std::count(p.sfb.begin(), p.sfb.end(), 0xFF) > 0;
    extremes += std::count(p.sfa.begin(), p.sfa.end(), 0x00) > 0 && std::count(p.sfb.begin(), p.sfb.end(), 0xFE) > 0;
    for (const auto& [f, v] : {std::make_pair(p.a_format, &p.a), std::make_pair(p.b_format, &p.b)}) {
      if (f == BlockFormat::mxfp8_e5m2)
        e5m2_specials += std::any_of(v->begin(), v->end(), [](uint8_t x) { return (x & 0x7C) == 0x7C; });
      if (f == BlockFormat::mxfp8_e4m3)
        e4m3_448 += std::any_of(v->begin(), v->end(), [](uint8_t x) { return (x & 0x7F) == 0x7E; });
    }
    if (c.spec.scales != ScaleDist::narrow || p.out_type != OutType::fp16) continue;
    // Within the FP16 window of 8 exponents: every row of blocks, and every column of up to 8 rows.
    const int64_t kb = p.kb();
    for (int64_t r = 0; r < p.l * p.m && kb <= 8; ++r) {
      std::set<uint8_t> row(p.sfa.begin() + r * kb, p.sfa.begin() + (r + 1) * kb);
      EXPECT_EQ(static_cast<int64_t>(row.size()), kb) << p.note << " row " << r;
    }
    for (int64_t s = 0; s < kb && p.m <= 8; ++s) {
      std::set<uint8_t> column;
      for (int64_t r = 0; r < p.m; ++r) column.insert(p.sfa[static_cast<size_t>(r * kb + s)]);
      EXPECT_EQ(static_cast<int64_t>(column.size()), p.m) << p.note << " block " << s;
    }
    ++distinct_checked;
  }
  EXPECT_EQ(pairs.size(), 9u);
  EXPECT_TRUE(pairs.count({BlockFormat::mxfp8_e4m3, BlockFormat::mxfp4}));
  EXPECT_TRUE(pairs.count({BlockFormat::mxfp4, BlockFormat::mxfp8_e4m3}));
  EXPECT_GT(extremes, 5);
  EXPECT_GT(nan_scales, 5);
  EXPECT_GT(e5m2_specials, 5);
  EXPECT_GT(e4m3_448, 5);
  EXPECT_GT(distinct_checked, 5);
  // A kernel of NVFP4 operands draws none of this.
  const Schedule nvfp4_only(any_gemm(), "nvfp4_kernel", o);
  for (int64_t i = 0; i < 50; ++i) EXPECT_FALSE(nvfp4_only.at(i).problem.mx_operands());
}

// MX cases of the large class exist only for a CUDA kernel in a process with the GPU reference
// (ScheduleOptions::gpu_reference): there they are drawn at the NVFP4 sizes, and nothing else of
// the schedule moves: an NVFP4 kernel's cases, a host kernel's, and every case of the other
// classes stay what they were without it.
TEST(MxSchedule, LargeClassOnlyWhereTheGpuReferenceJudgesACudaKernel) {
  nvfp4_kernel_info mx = any_gemm();
  mx.out_types = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
  mx.a_formats = mx.b_formats = (1u << NVFP4_FORMAT_NVFP4) | (1u << NVFP4_FORMAT_MXFP4) |
                                (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);
  nvfp4_kernel_info mx_host = mx;
  mx_host.memory = NVFP4_MEMORY_HOST;
  ScheduleOptions off, on;
  off.seed = on.seed = 3232;
  on.gpu_reference = true;
  const auto same = [](const ScheduledCase& x, const ScheduledCase& y) {
    return x.kind == y.kind && x.problem.op == y.problem.op && x.problem.m == y.problem.m && x.problem.n == y.problem.n &&
           x.problem.k == y.problem.k && x.problem.l == y.problem.l && x.problem.a == y.problem.a &&
           x.problem.sfb == y.problem.sfb && x.problem.a_format == y.problem.a_format;
  };
  int large_mx = 0, big_products = 0, moved = 0;
  const Schedule with(mx, "mx_cuda", on), without(mx, "mx_cuda", off);
  const Schedule host_with(mx_host, "mx_host", on), host_without(mx_host, "mx_host", off);
  for (int64_t i = 0; i < 800; ++i) {
    const ScheduledCase w = with.at(i), wo = without.at(i);
    EXPECT_FALSE(wo.kind == CaseKind::large && wo.problem.mx_operands()) << "case " << i;
    if (w.kind == CaseKind::large && w.problem.mx_operands()) {
      ++large_mx;
      const Problem& p = w.problem;
      ASSERT_EQ(problem_error(p), "") << "case " << i;
      big_products += p.l * p.m * p.n * p.k > small_shape_limits().max_products;
    }
    if (!same(w, wo)) {
      ++moved;
      // Only a case drawn large with MX operands differs (demoted to small without the reference).
      EXPECT_TRUE(w.kind == CaseKind::large && w.problem.mx_operands() && wo.kind == CaseKind::small) << "case " << i;
    }
    EXPECT_TRUE(same(host_with.at(i), host_without.at(i))) << "host kernel, case " << i;
  }
  std::printf("800 cases: %d large MX cases (%d past the small class's products), %d moved\n", large_mx, big_products,
              moved);
  EXPECT_GT(large_mx, 10);
  EXPECT_GT(big_products, 5);
  EXPECT_EQ(moved, large_mx);
  const Schedule nvfp4_with(any_gemm(), "nvfp4_cuda", on), nvfp4_without(any_gemm(), "nvfp4_cuda", off);
  for (int64_t i = 0; i < 400; ++i) EXPECT_TRUE(same(nvfp4_with.at(i), nvfp4_without.at(i))) << "NVFP4 kernel, case " << i;
}

TEST(Schedule, CaseIIsAPureFunctionOfSeedKernelAndIndex) {
  ScheduleOptions o;
  o.seed = 77;
  const Schedule a(any_gemm(), "k1", o), b(any_gemm(), "k1", o), other(any_gemm(), "k2", o);
  for (int64_t i : {0, 1, 5, 9, 63, 1000}) {
    const ScheduledCase x = a.at(i), y = b.at(i);
    EXPECT_EQ(x.problem.a, y.problem.a) << i;
    EXPECT_EQ(x.problem.sfb, y.problem.sfb) << i;
    EXPECT_EQ(x.stale_seed, y.stale_seed) << i;
    EXPECT_EQ(x.kind, y.kind) << i;
    EXPECT_EQ(x.data, y.data) << i;
  }
  EXPECT_NE(a.at(3).problem.a, other.at(3).problem.a) << "the kernel's name is part of the seed";
}

TEST(Schedule, MixAndShapesLeaveTheFirstTile) {
  ScheduleOptions o;
  o.seed = 20261201;
  nvfp4_kernel_info m8 = any_gemm();
  m8.m_multiple = 8;  // so that some cases are outside its constraints
  const Schedule s(m8, "mix", o);
  ScheduleStats stats;
  int64_t past_m = 0, past_n = 0, deep_k = 0, many_l = 0;
  for (int64_t i = 0; i < 800; ++i) {
    const ScheduledCase c = s.at(i);
    stats.add(c);
    const Problem& p = c.problem;
    if (c.data == DataClass::fine_cancel) {
      EXPECT_EQ(c.spec.name(), "fine_cancel/fine_cancel/one");
    }
    if (c.data == DataClass::nan_sparse) {
      EXPECT_EQ(c.spec.name(), "sparse/nan_block/one");
    }
    if (c.kind != CaseKind::unsupported) {
      EXPECT_EQ(p.m % 8, 0) << "inside the declared multiple";
    }
    past_m += p.m > 3 * 256;
    past_n += p.op == Op::gemm && p.n > 128;
    deep_k += p.k > 8192;
    many_l += p.l > 9;
  }
  std::printf("%s\npast 3x256 rows %lld, columns past 128 %lld, k > 8192 %lld, l > 9 %lld\n", stats.text().c_str(),
              (long long)past_m, (long long)past_n, (long long)deep_k, (long long)many_l);
  EXPECT_EQ(stats.by_kind["small"] + stats.by_kind["unsupported"] + stats.by_kind["large"], 800);
  EXPECT_EQ(stats.by_data["plain"] + stats.by_data["mixed"] + stats.by_data["fine-cancel"] + stats.by_data["nan-sparse"],
            800);
  // Shares of 16: small 13, unsupported 2, large 1; plain 8, mixed 6, each targeted class 1.
  EXPECT_GE(stats.by_data["plain"], 340);
  EXPECT_GE(stats.by_data["mixed"], 240);
  EXPECT_GE(stats.by_kind["unsupported"], 70);
  EXPECT_GE(stats.by_data["fine-cancel"] + stats.by_data["nan-sparse"], 70);
  EXPECT_GE(stats.by_kind["large"], 30);
  EXPECT_GT(past_m, 0);
  EXPECT_GT(past_n, 20);
  EXPECT_GT(deep_k, 0);
  EXPECT_GT(many_l, 0);
  // At least half the cases where bugs live: tile edges, tails, batches, padding.
  EXPECT_GT(stats.tile_edge * 2, stats.cases);
  EXPECT_GT(stats.k_tail * 2, stats.cases);
}

// FP16 bits of a value that FP16 holds exactly (a*sa, or a*sa * 2^-14).
uint16_t fp16_bits(double v) {
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);
  return fp16_round(v < 0, static_cast<u128>(std::ldexp(m, 53)), e - 53);
}

double e2m1(const std::vector<uint8_t>& packed, int64_t x) {
  const uint8_t code = (packed[x / 2] >> (4 * (x % 2))) & 15;
  return 0.5 * e2m1_twice(code);
}

double scale(uint8_t byte) {
  const ScaleValue v = e4m3_decode(byte, ScaleSemantics::ue4m3);
  return v.nan ? NAN : std::ldexp(static_cast<double>(v.sig), v.exp);
}

// A tensor-core GEMM on the H200's measured mma.sync f16 model: each 16-element block one
// instruction, k in order, operands a*sa and b*sb as FP16, times 2^-14 each when `scaled` (the old
// gemm_tc), the FP32 accumulator rounded once to FP16 at the end.
std::vector<uint16_t> tensor_core_gemm(const Problem& p, bool scaled) {
  std::vector<uint16_t> c(static_cast<size_t>(p.c_elems()));
  const double f = scaled ? std::ldexp(1.0, -14) : 1.0;
  const int64_t kb = p.kb();
  for (int64_t b = 0; b < p.l; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        uint32_t acc = 0;
        std::vector<uint8_t> arow(p.a.begin() + (b * p.m + i) * (p.k / 2), p.a.begin() + (b * p.m + i + 1) * (p.k / 2));
        std::vector<uint8_t> brow(p.b.begin() + (b * p.n + j) * (p.k / 2), p.b.begin() + (b * p.n + j + 1) * (p.k / 2));
        for (int64_t s = 0; s < kb; ++s) {
          uint32_t av[16] = {}, bv[16] = {};
          const double sa = scale(p.sfa[(b * p.m + i) * kb + s]), sb = scale(p.sfb[(b * p.n + j) * kb + s]);
          for (int64_t x = 16 * s; x < std::min(p.k, 16 * s + 16); ++x) {
            av[x % 16] = fp16_bits(e2m1(arow, x) * sa * f);
            bv[x % 16] = fp16_bits(e2m1(brow, x) * sb * f);
          }
          acc = matrix_unit_dot(kH200MmaF16, av, bv, acc);
        }
        float sum;
        std::memcpy(&sum, &acc, 4);
        // One rounding to FP16 of the FP32 accumulator scaled back (exact: a power of two).
        const double v = static_cast<double>(sum) / (f * f) * p.alpha;
        int e = 0;
        const double m = std::frexp(std::fabs(v), &e);
        c[(b * p.m + i) * p.n + j] = v == 0 ? 0 : fp16_round(v < 0, static_cast<u128>(std::ldexp(m, 53)), e - 53);
      }
  return c;
}

// Op, shape class, data class and layout are drawn independently: a kernel declaring GEMV and
// GEMM gets every data class, every scale distribution and alpha != 1 in its GEMV cases too (a
// bug in a GEMV path of its own must meet the data that shows it), and both layouts in each.
TEST(Schedule, EveryOpSeesEveryDataClassAndLayout) {
  ScheduleOptions o;
  o.seed = 20261202;
  const Schedule s(any_gemm(), "two_ops", o);
  std::map<std::string, int64_t> seen;
  const int64_t n = 4000;
  for (int64_t i = 0; i < n; ++i) {
    const ScheduledCase c = s.at(i);
    const std::string op = to_string(c.problem.op);
    ++seen[op];
    ++seen[op + " " + to_string(c.data)];
    ++seen[op + " " + to_string(c.kind)];
    ++seen[op + " " + to_string(c.problem.sf_layout)];
    const std::string spec = c.spec.name();  // values/scales/alpha
    const size_t a = spec.find('/'), b = spec.find('/', a + 1);
    ++seen[op + " scales " + spec.substr(a + 1, b - a - 1)];
    if (c.problem.alpha != 1.0f) ++seen[op + " alpha != 1"];
  }
  for (const std::string op : {"gemv", "gemm"}) {
    const double ops = double(seen[op]);
    EXPECT_NEAR(ops / n, 0.5, 0.05) << op;
    EXPECT_NEAR(seen[op + " plain"] / ops, 8.0 / 16, 0.05) << op;
    EXPECT_NEAR(seen[op + " mixed"] / ops, 6.0 / 16, 0.05) << op;
    EXPECT_NEAR(seen[op + " fine-cancel"] / ops, 1.0 / 16, 0.03) << op;
    EXPECT_NEAR(seen[op + " nan-sparse"] / ops, 1.0 / 16, 0.03) << op;
    EXPECT_NEAR(seen[op + " large"] / ops, 1.0 / 16, 0.03) << op;
    EXPECT_NEAR(seen[op + " linear"] / ops, 0.5, 0.05) << op;
    for (const std::string scales : {"full", "subnormal", "near_max", "sign_bit", "nan_block", "zero"})
      EXPECT_GE(seen[op + " scales " + scales], 40) << op << " " << scales;
    EXPECT_GE(seen[op + " alpha != 1"], 300) << op;
  }
}

// The kernel fuzzer's bytes back the same draw: what the schedule reaches, random inputs reach
// (every data class, scale distribution, op, layout, shape class), each input one case always, and
// a case outside the declaration only as the unsupported kind.
TEST(Schedule, FuzzInputsReachWhatTheScheduleDraws) {
  nvfp4_kernel_info m8 = any_gemm();
  m8.m_multiple = 8;
  const uint64_t seed = 20261203;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  RngDraws raw(rng);
  std::map<std::string, int> seen;
  for (int x = 0; x < 3000; ++x) {
    const std::vector<uint8_t> bytes = raw.bytes(raw.below(48));
    const DrawnCase c = draw_fuzz_case(bytes.data(), bytes.size(), &m8);
    const DrawnCase again = draw_fuzz_case(bytes.data(), bytes.size(), &m8);
    ASSERT_EQ(c.problem.a, again.problem.a);
    ASSERT_EQ(c.problem.sfb, again.problem.sfb);
    ASSERT_TRUE(problem_error(c.problem).empty()) << problem_error(c.problem);
    if (c.kind != CaseKind::unsupported) { ASSERT_EQ(c.problem.m % 8, 0) << "inside the declared multiple"; }
    ++seen[to_string(c.data)];
    ++seen[to_string(c.kind)];
    ++seen[to_string(c.problem.op)];
    ++seen[to_string(c.problem.sf_layout)];
    const std::string spec = c.spec.name();
    const size_t a = spec.find('/'), b = spec.find('/', a + 1);
    ++seen[spec.substr(a + 1, b - a - 1)];
  }
  for (const char* what : {"plain", "mixed", "fine-cancel", "nan-sparse", "small", "unsupported", "gemv", "gemm",
                           "linear", "permuted", "narrow", "full", "subnormal", "near_max", "sign_bit", "nan_block",
                           "zero", "fine_cancel"})
    EXPECT_GT(seen[what], 0) << what;
}

// A version-1 kernel's cases (GEMV and GEMM, FP16) are what they were before grouped GEMM, dual
// GEMM and the new output types joined the draw: seeds and saved case notes keep their meaning.
uint64_t schedule_hash(const nvfp4_kernel_info& info, const char* name, int64_t count) {
  ScheduleOptions o;
  o.seed = 424242;
  const Schedule s(info, name, o);
  std::string all;
  for (int64_t i = 0; i < count; ++i) {
    const ScheduledCase c = s.at(i);
    const Problem& p = c.problem;
    all += fmt::format("{} {} {} {} {} {} {} {} {} {} {} {}|", to_string(p.op), p.m, p.n, p.k, p.l,
                       to_string(p.sf_layout), p.alpha, to_string(c.kind), to_string(c.data), c.spec.name(),
                       *p.seed, c.stale_seed);
    all.append(p.a.begin(), p.a.end());
    all.append(p.b.begin(), p.b.end());
    all.append(p.sfa.begin(), p.sfa.end());
    all.append(p.sfb.begin(), p.sfb.end());
  }
  return fnv1a(all);
}

TEST(Schedule, Version1DrawIsUnchanged) {
  nvfp4_kernel_info v1 = any_gemm();
  v1.abi_version = 1;
  nvfp4_kernel_info unit_m8 = v1;
  unit_m8.ops = 1u << NVFP4_OP_GEMM;
  unit_m8.m_multiple = 8;
  unit_m8.flags = NVFP4_FLAG_UNIT_ALPHA;
  // The values the draw gave before those ops existed (commit 6d3dcf5); a v2 kernel declaring
  // GEMV and GEMM with FP16 only draws the same.
  EXPECT_EQ(schedule_hash(v1, "v1", 400), 0xa495cb9829a9cc9eull);
  EXPECT_EQ(schedule_hash(unit_m8, "unit_m8", 400), 0x63bb195221562c57ull);
  EXPECT_EQ(schedule_hash(any_gemm(), "v2", 400), 0x9b9727ddbcf09d89ull);
}

constexpr uint32_t kAllOutTypes = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);

nvfp4_kernel_info grouped_kernel(uint32_t flags = 0, uint32_t max_groups = 0) {
  nvfp4_kernel_info info = any_gemm();
  info.ops = 1u << NVFP4_OP_GROUPED_GEMM;
  info.flags = flags;
  info.max_groups = max_groups;
  return info;
}

bool is_multiple(int64_t v, uint32_t multiple) { return multiple <= 1 || v % multiple == 0; }

// The draw for a grouped kernel: one group and over a hundred, empty experts and calls with no
// tokens at all, m_g on the tile edges, each group its own n and k; every case valid once its
// seed is expanded, and counted by ScheduleStats.
TEST(Schedule, GroupedDrawReachesFewAndManyGroupsEmptyExpertsAndTileEdges) {
  ScheduleOptions o;
  o.seed = 20261210;
  const Schedule s(grouped_kernel(), "grouped", o);
  ScheduleStats stats;
  std::set<int64_t> edges_seen;
  int one = 0, many = 0, with_empty = 0, all_empty = 0, own_n = 0, own_k = 0;
  for (int64_t i = 0; i < 2000; ++i) {
    const ScheduledCase c = s.at(i);
    const Problem& p = c.problem;
    ASSERT_EQ(p.op, Op::grouped_gemm);
    ASSERT_EQ(problem_error(p), "") << i;
    ASSERT_TRUE(p.has_data()) << i;
    EXPECT_FALSE(p.packed);
    stats.add(c);
    one += p.groups.size() == 1;
    many += p.groups.size() >= 100;
    bool empty = false, every = true;
    for (const Group& g : p.groups) {
      empty = empty || g.m == 0;
      every = every && g.m == 0;
      for (int64_t e : {0, 1, 127, 128, 129})
        if (g.m == e) edges_seen.insert(e);
      own_n += g.n != p.groups[0].n;
      own_k += g.k != p.groups[0].k;
    }
    with_empty += empty;
    all_empty += every;
  }
  std::printf("%s\n", stats.text().c_str());
  EXPECT_GE(one, 100);
  EXPECT_GE(many, 10);
  EXPECT_GE(with_empty, 400);
  EXPECT_GE(all_empty, 20);
  EXPECT_EQ(edges_seen.size(), 5u);
  EXPECT_GT(own_n, 0);
  EXPECT_GT(own_k, 0);
  EXPECT_EQ(stats.grouped, 2000);
  EXPECT_EQ(stats.all_empty, all_empty);
  EXPECT_GT(stats.by_groups["65-256"], 0);
}

// Each group its own scales (no two non-empty groups share SFA where the distribution has the
// values for it) and, when alpha is drawn, an alpha of its own: a kernel that reads another
// expert's scales or alpha changes an output.
TEST(Schedule, GroupsHaveTheirOwnScalesAndAlphas) {
  ScheduleOptions o;
  o.seed = 20261211;
  const Schedule s(grouped_kernel(), "grouped_data", o);
  int compared = 0, distinct_alphas = 0;
  for (int64_t i = 0; i < 1500; ++i) {
    const ScheduledCase c = s.at(i);
    const Problem& p = c.problem;
    const ScaleDist sd = c.spec.scales;
    std::map<size_t, int> per_size;
    for (const Group& g : p.groups) per_size[g.sfa.size()] += g.m > 0;
    const bool enough_values = sd != ScaleDist::zero && sd != ScaleDist::subnormal && sd != ScaleDist::fine_cancel;
    for (size_t x = 0; x < p.groups.size(); ++x) {
      for (size_t y = x + 1; y < p.groups.size(); ++y) {
        const Group &gx = p.groups[x], &gy = p.groups[y];
        if (gx.m == 0 || gy.m == 0 || gx.sfa.size() != gy.sfa.size() || !enough_values || per_size[gx.sfa.size()] > 15)
          continue;
        ++compared;
        EXPECT_NE(gx.sfa, gy.sfa) << "case " << i << " groups " << x << " and " << y;
      }
    }
    std::optional<float> previous;
    std::set<float> alphas;
    for (const Group& g : p.groups) {
      if (g.m == 0) continue;
      if (c.spec.alpha != AlphaDist::one && previous) { EXPECT_NE(g.alpha, *previous) << "case " << i; }
      previous = g.alpha;
      alphas.insert(g.alpha);
    }
    distinct_alphas += alphas.size() >= 2;
  }
  EXPECT_GE(compared, 1000);
  EXPECT_GE(distinct_alphas, 50);
}

// A GROUPS_PACKED kernel gets one n and one k in every case, its probes included (groups of
// several n or k cannot be laid out packed); otherwise every group respects the multiples.
TEST(Schedule, PackedKernelsGetOneNAndOneKAndMultiplesHoldPerGroup) {
  ScheduleOptions o;
  o.seed = 20261212;
  for (const uint32_t flags : {uint32_t{NVFP4_FLAG_GROUPS_PACKED}, uint32_t{0}}) {
    nvfp4_kernel_info info = grouped_kernel(flags);
    info.m_multiple = 4, info.n_multiple = 8, info.k_multiple = 32;
    const Schedule s(info, "packed", o);
    int unsupported = 0, differing = 0;
    for (int64_t i = 0; i < 1000; ++i) {
      const ScheduledCase c = s.at(i);
      const Problem& p = c.problem;
      ASSERT_EQ(problem_error(p), "") << i;
      EXPECT_EQ(p.packed, flags != 0);
      bool broken = false;
      for (const Group& g : p.groups) {
        if (flags) {
          EXPECT_EQ(g.n, p.groups[0].n) << i;
          EXPECT_EQ(g.k, p.groups[0].k) << i;
        }
        differing += g.n != p.groups[0].n || g.k != p.groups[0].k;
        broken = broken || !is_multiple(g.m, 4) || !is_multiple(g.n, 8) || !is_multiple(g.k, 32);
      }
      if (c.kind == CaseKind::unsupported) {
        ++unsupported;
        EXPECT_TRUE(broken) << "case " << i << ": a probe breaks a declared multiple";
      } else {
        EXPECT_FALSE(broken) << "case " << i;
      }
    }
    EXPECT_GE(unsupported, 60);
    if (!flags) { EXPECT_GT(differing, 100); }
  }
}

// GPU MODE's problems declare whole tiles (m and n multiples of 128, k of 256): every op's draw
// still ends, its large cases within the large class's limits where the multiples allow, and every
// case it does not mean as a probe keeps the multiples.
TEST(Schedule, TileSizedMultiplesDrawLargeCasesForEveryOp) {
  ScheduleOptions o;
  o.seed = 11;
  for (const uint32_t op : {NVFP4_OP_GEMV, NVFP4_OP_GEMM, NVFP4_OP_GROUPED_GEMM, NVFP4_OP_DUAL_GEMM}) {
    nvfp4_kernel_info info = any_gemm();
    info.ops = 1u << op;
    info.sf_layouts = 1u << NVFP4_SF_PERMUTED;
    info.flags = NVFP4_FLAG_UNIT_ALPHA;
    info.m_multiple = op == NVFP4_OP_GROUPED_GEMM ? 1 : 128;
    info.n_multiple = op == NVFP4_OP_GEMV ? 1 : 128;
    info.k_multiple = op == NVFP4_OP_GEMV ? 64 : 256;
    const Schedule s(info, fmt::format("tiles{}", op), o);
    const ShapeLimits lim = large_shape_limits();
    int large = 0;
    for (int64_t i = 0; i < 400; ++i) {
      const ScheduledCase c = s.at(i);
      const Problem& p = c.problem;
      ASSERT_EQ(problem_error(p), "") << "op " << op << " case " << i;
      if (c.kind == CaseKind::unsupported) continue;
      if (p.groups.empty()) {
        EXPECT_TRUE(is_multiple(p.m, info.m_multiple) && is_multiple(p.n, info.n_multiple) &&
                    is_multiple(p.k, info.k_multiple))
            << "op " << op << " case " << i << ": " << p.m << "x" << p.n << "x" << p.k;
      }
      if (c.kind != CaseKind::large || !p.groups.empty()) continue;
      ++large;
      EXPECT_LE(p.l * p.m * p.n * p.k, lim.max_products) << "op " << op << " case " << i;
      EXPECT_LE(p.l * p.m * p.k, lim.max_elements) << "op " << op << " case " << i;
    }
    if (op != NVFP4_OP_GROUPED_GEMM) {
      EXPECT_GT(large, 5) << "op " << op;
    }
  }
}

// Whatever multiples a kernel declares (odd, whole tiles, past the small class's limits), every
// op's draw ends and every case is a valid problem.
TEST(Schedule, EveryDeclaredMultipleDrawsValidCases) {
  ScheduleOptions o;
  o.seed = 5;
  for (const uint32_t op : {NVFP4_OP_GEMV, NVFP4_OP_GEMM, NVFP4_OP_GROUPED_GEMM, NVFP4_OP_DUAL_GEMM}) {
    for (const uint32_t mm : {1u, 3u, 128u, 1024u}) {
      for (const uint32_t nm : {1u, 128u, 512u}) {
        for (const uint32_t km : {2u, 256u, 1024u}) {
          nvfp4_kernel_info info = any_gemm();
          info.ops = 1u << op;
          info.m_multiple = mm, info.n_multiple = nm, info.k_multiple = km;
          const Schedule s(info, "multiples", o);
          for (int64_t i = 0; i < 32; ++i) {
            ASSERT_EQ(problem_error(s.at(i).problem), "")
                << "op " << op << " multiples " << mm << "/" << nm << "/" << km << " case " << i;
          }
        }
      }
    }
  }
}

TEST(Schedule, MaxGroupsIsRespectedAndProbed) {
  ScheduleOptions o;
  o.seed = 20261213;
  const Schedule s(grouped_kernel(0, 4), "max4", o);
  int over = 0, four = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const ScheduledCase c = s.at(i);
    ASSERT_EQ(problem_error(c.problem), "") << i;
    const size_t g = c.problem.groups.size();
    if (c.kind == CaseKind::unsupported) {
      EXPECT_GT(g, 4u) << i;
      ++over;
    } else {
      EXPECT_LE(g, 4u) << i;
      four += g == 4;
    }
  }
  EXPECT_GE(over, 60);
  EXPECT_GE(four, 50);
}

// A kernel allowing many groups (the CUDA naive kernels: 65535) is not probed with a case past
// its limit: that would be 65536 groups, which once made one draw run for minutes. Every case
// stays within the schedule's 256 groups and is drawn quickly.
TEST(Schedule, ALargeMaxGroupsIsNotProbedWithAHugeCase) {
  ScheduleOptions o;
  o.seed = 1796129764082443693ull;  // the seed whose case 0 of such a kernel took minutes
  const Schedule s(grouped_kernel(0, 65535), "grouped_gemm_naive", o);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < 300; ++i) {
    const ScheduledCase c = s.at(i);
    ASSERT_EQ(problem_error(c.problem), "") << i;
    EXPECT_LE(c.problem.groups.size(), 256u) << i;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60.0);
}

// UNIT_ALPHA: alpha, alpha2 and every group's alpha are 1 in every case but the probes, which
// reach a group alpha != 1 and an alpha2 != 1.
// The huge tier of a packed grouped CUDA kernel: about one grouped case in 64 where the device
// has the memory, every one with `always`; its packed B passes 2^31 bytes by a few experts, every
// expert from the one that straddles 2^31 on has tokens, and the data is drawn when the case is
// checked. Every other case is the case drawn without the tier; a kernel of the separate
// arrangement, a host kernel or a device without room never draws it.
TEST(Schedule, PackedGroupedKernelsDrawAHugeTierPast2To31BytesOfB) {
  const nvfp4_kernel_info packed = grouped_kernel(NVFP4_FLAG_GROUPS_PACKED);
  ScheduleOptions plain;
  plain.seed = 20261204;
  ScheduleOptions roomy = plain;
  roomy.device_free_bytes = uint64_t(139) << 30;  // an H200
  const Schedule without(packed, "packed", plain), with(packed, "packed", roomy);
  int64_t huge = 0;
  std::set<int64_t> widths;
  for (int64_t i = 0; i < 1280; ++i) {
    const ScheduledCase a = without.at(i), b = with.at(i);
    ASSERT_NE(a.kind, CaseKind::huge);
    if (b.kind != CaseKind::huge) {
      ASSERT_EQ(b.problem.groups.size(), a.problem.groups.size()) << i;
      for (size_t g = 0; g < a.problem.groups.size(); ++g) EXPECT_EQ(b.problem.groups[g].b, a.problem.groups[g].b) << i;
      continue;
    }
    ++huge;
    const Problem& p = b.problem;
    ASSERT_EQ(p.op, Op::grouped_gemm);
    const int64_t expert = p.groups[0].n * (p.groups[0].k / 2);
    const int64_t packed_b = static_cast<int64_t>(p.groups.size()) * expert;  // an empty expert keeps its slot
    EXPECT_GT(packed_b, int64_t(1) << 31) << i;
    EXPECT_LT(packed_b - (int64_t(1) << 31), 11 * expert) << i << ": just past 2^31 bytes, by a few experts";
    for (size_t g = 0; g < p.groups.size(); ++g) {
      EXPECT_EQ(p.groups[g].n, p.groups[0].n);
      EXPECT_EQ(p.groups[g].k, p.groups[0].k);
      EXPECT_LE(p.groups[g].m, 3);
      if (static_cast<int64_t>(g + 1) * expert > (int64_t(1) << 31)) {
        EXPECT_GE(p.groups[g].m, 1) << i << " group " << g;
      }
      EXPECT_TRUE(p.groups[g].b.empty()) << "a huge case's data is drawn when it is checked";
    }
    EXPECT_EQ(p.seed, a.problem.seed) << "the same data seed as without the tier";
    EXPECT_NE(p.note.find("huge"), std::string::npos) << p.note;
    widths.insert(p.groups[0].k);
  }
  // Every case of this kernel is grouped: 1280 / 64 = 20 expected, fewer than 6 or more than 40
  // with probability < 1e-4 (cases drawn just outside the declaration never are).
  EXPECT_GE(huge, 6);
  EXPECT_LE(huge, 40);
  EXPECT_EQ(widths, (std::set<int64_t>{4096, 5120, 7168}));

  ScheduleOptions always = roomy;
  always.huge = HugeTier::always;
  ScheduleOptions short_of_room = always;
  short_of_room.device_free_bytes = uint64_t(6) << 30;  // B twice and 2 GiB do not fit
  nvfp4_kernel_info host = packed;
  host.memory = NVFP4_MEMORY_HOST;
  const Schedule every(packed, "packed", always), cramped(packed, "packed", short_of_room),
      separate(grouped_kernel(), "separate", always), host_always(host, "host", always);
  int64_t drawn = 0;
  for (int64_t i = 0; i < 40; ++i) {
    EXPECT_NE(cramped.at(i).kind, CaseKind::huge);
    EXPECT_NE(separate.at(i).kind, CaseKind::huge);
    EXPECT_NE(host_always.at(i).kind, CaseKind::huge);
    const ScheduledCase c = every.at(i);
    drawn += c.kind == CaseKind::huge;
    EXPECT_TRUE(c.kind == CaseKind::huge || c.kind == CaseKind::unsupported) << i;
  }
  EXPECT_GE(drawn, 30);
}

TEST(Schedule, UnitAlphaKernelsGetAlphaOneOutsideTheirProbes) {
  ScheduleOptions o;
  o.seed = 20261214;
  nvfp4_kernel_info info = any_gemm();
  info.ops |= (1u << NVFP4_OP_GROUPED_GEMM) | (1u << NVFP4_OP_DUAL_GEMM);
  info.flags = NVFP4_FLAG_UNIT_ALPHA;
  const Schedule s(info, "unit", o);
  int group_probe = 0, alpha2_probe = 0;
  for (int64_t i = 0; i < 3000; ++i) {
    const ScheduledCase c = s.at(i);
    const Problem& p = c.problem;
    bool group_alpha = false;
    for (const Group& g : p.groups) group_alpha = group_alpha || g.alpha != 1.0f;
    if (c.kind == CaseKind::unsupported) {
      group_probe += group_alpha;
      alpha2_probe += p.alpha2 != 1.0f;
      continue;
    }
    EXPECT_EQ(p.alpha, 1.0f) << i;
    EXPECT_EQ(p.alpha2, 1.0f) << i;
    EXPECT_FALSE(group_alpha) << i;
  }
  EXPECT_GT(group_probe, 10);
  EXPECT_GT(alpha2_probe, 10);
}

// G of dual GEMM for output (0, 0, j), in doubles (exact enough to tell silu's regions apart).
double dual_gate(const Problem& p, int64_t j) {
  double sum = 0;
  for (int64_t x = 0; x < p.k; ++x) {
    const ScaleValue sa = e4m3_decode(p.sfa[static_cast<size_t>(x / 16)], p.semantics);
    const ScaleValue sb = e4m3_decode(p.sfb[static_cast<size_t>(j * p.kb() + x / 16)], p.semantics);
    if (sa.nan || sb.nan) return std::nan("");
    const double a = e2m1_twice(e2m1_nibble(p.a.data(), x)) / 2.0;
    const double b = e2m1_twice(e2m1_nibble(p.b.data() + j * (p.k / 2), x)) / 2.0;
    sum += a * b * sa.sign * std::ldexp(sa.sig, sa.exp) * sb.sign * std::ldexp(sb.sig, sb.exp);
  }
  return double(p.alpha) * sum;
}

// Dual GEMM draws a second B of its own, alpha2, and reaches silu's hard regions: G below -87
// (FP32 exp overflows past -88.72), large positive, and near 0.
TEST(Schedule, DualDrawsItsOwnSecondBAndReachesSilusRegions) {
  ScheduleOptions o;
  o.seed = 20261215;
  nvfp4_kernel_info info = any_gemm();
  info.ops = 1u << NVFP4_OP_DUAL_GEMM;
  const Schedule s(info, "dual", o);
  int own_b2 = 0, alpha2 = 0, below_87 = 0, large = 0, near_zero = 0;
  for (int64_t i = 0; i < 1500; ++i) {
    const ScheduledCase c = s.at(i);
    const Problem& p = c.problem;
    ASSERT_EQ(p.op, Op::dual_gemm);
    ASSERT_EQ(problem_error(p), "") << i;
    ASSERT_EQ(p.b2.size(), p.b.size());
    ASSERT_EQ(p.sfb2.size(), p.sfb.size());
    own_b2 += p.b.size() >= 8 && p.b2 != p.b;
    EXPECT_FALSE(p.b.size() >= 8 && p.b2 == p.b && p.sfb2 == p.sfb) << i;
    alpha2 += p.alpha2 != 1.0f;
    for (int64_t j = 0; j < std::min<int64_t>(p.n, 4); ++j) {
      const double g = dual_gate(p, j);
      below_87 += g < -87;
      large += g > 87;
      near_zero += g != 0 && std::fabs(g) < 1;
    }
  }
  std::printf("G < -87: %d, G > 87: %d, 0 < |G| < 1: %d\n", below_87, large, near_zero);
  EXPECT_GE(own_b2, 500);
  EXPECT_GE(alpha2, 100);
  EXPECT_GE(below_87, 100);
  EXPECT_GE(large, 100);
  EXPECT_GE(near_zero, 100);
}

// The output type is drawn among the declared ones: a BF16-only kernel never gets FP16, a kernel
// of all three gets each (FP32 too), and a version-1 kernel gets FP16 GEMV and GEMM only,
// whatever its later fields would say.
TEST(Schedule, OutTypesAndOpsFollowTheDeclaration) {
  ScheduleOptions o;
  o.seed = 20261216;
  nvfp4_kernel_info bf16 = any_gemm();
  bf16.out_types = 1u << NVFP4_OUT_BF16;
  nvfp4_kernel_info all = any_gemm();
  all.ops |= (1u << NVFP4_OP_GROUPED_GEMM) | (1u << NVFP4_OP_DUAL_GEMM);
  all.out_types = kAllOutTypes;
  nvfp4_kernel_info v1 = all;
  v1.abi_version = 1;
  std::map<std::string, int> seen;
  for (const auto& [name, info] : {std::pair{"bf16", bf16}, std::pair{"all", all}, std::pair{"v1", v1}}) {
    const Schedule s(info, name, o);
    for (int64_t i = 0; i < 1200; ++i) {
      const Problem p = s.at(i).problem;
      ASSERT_EQ(problem_error(p), "") << name << " " << i;
      ++seen[std::string(name) + " " + to_string(p.out_type)];
      ++seen[std::string(name) + " " + to_string(p.op)];
      // alpha at the bottom or the top of BF16's range: subnormal outputs, overflow to Inf
      if (p.op != Op::grouped_gemm && std::fabs(p.alpha) < 0x1p-90f) ++seen[std::string(name) + " tiny alpha"];
      if (p.op != Op::grouped_gemm && std::fabs(p.alpha) > 0x1p60f) ++seen[std::string(name) + " huge alpha"];
    }
  }
  EXPECT_GE(seen["bf16 tiny alpha"], 5);
  EXPECT_GE(seen["bf16 huge alpha"], 5);
  EXPECT_EQ(seen["v1 tiny alpha"] + seen["v1 huge alpha"], 0) << "FP16 problems keep alpha where FP16 shows it";
  EXPECT_EQ(seen["bf16 bf16"], 1200);
  for (const char* t : {"fp16", "bf16", "fp32"}) EXPECT_GE(seen[std::string("all ") + t], 300) << t;
  for (const char* op : {"gemv", "gemm", "grouped_gemm", "dual_gemm"}) EXPECT_GE(seen[std::string("all ") + op], 200) << op;
  EXPECT_EQ(seen["v1 fp16"], 1200);
  EXPECT_EQ(seen["v1 gemv"] + seen["v1 gemm"], 1200);
}

// BF16 and FP32 outputs get the attention FP16 gets: in a BF16-only and an FP32-only kernel's
// schedule, about one case in twelve has an output that overflows the type (Inf is the only right
// answer, so a kernel clamping to the largest finite value fails) and about one in twelve a
// nonzero output among the type's subnormals (a kernel flushing them to zero fails).
TEST(Schedule, Bf16AndFp32OutputsReachOverflowAndSubnormals) {
  ScheduleOptions o;
  o.seed = 20261202;
  for (const OutType type : {OutType::bf16, OutType::fp32}) {
    nvfp4_kernel_info info = any_gemm();
    info.out_types = 1u << static_cast<uint32_t>(type);
    const Schedule s(info, "edges", o);
    const OutFormat f = out_format(type);
    const uint32_t min_normal = 1u << (f.precision - 1);  // the word of 2^-126
    int overflow = 0, subnormal = 0, cases = 0;
    for (int64_t i = 0; i < 400; ++i) {
      const ScheduledCase c = s.at(i);
      if (c.kind != CaseKind::small) continue;
      ++cases;
      const ExactResult ref = exact_gemm(c.problem);
      bool inf = false, sub = false;
      for (size_t e = 0; e < ref.size(); ++e) {
        const uint32_t w = ref.word(e) & ~f.sign_bit;
        inf = inf || w == f.inf;
        sub = sub || (w != 0 && w < min_normal);
      }
      overflow += inf;
      subnormal += sub;
    }
    std::printf("%s: %d cases, %d with an overflowing output, %d with a subnormal one\n", to_string(type), cases,
                overflow, subnormal);
    EXPECT_GE(overflow, cases / 16) << to_string(type);
    EXPECT_GE(subnormal, cases / 16) << to_string(type);
  }
}

// SPEC section 3 rule 6: drawn dual cases keep |G| and |U| below 2^120, where an FP32 epilogue's
// G and U are finite, also with the alphas drawn for BF16 and FP32 outputs (up to 2^126).
TEST(Schedule, DualCasesKeepGAndUInsideFp32sRange) {
  ScheduleOptions o;
  o.seed = 20261203;
  nvfp4_kernel_info info = any_gemm();
  info.ops = 1u << NVFP4_OP_DUAL_GEMM;
  info.out_types = kAllOutTypes;
  const Schedule s(info, "dual_range", o);
  int huge_alpha = 0;
  long double largest = 0;
  for (int64_t i = 0; i < 1500; ++i) {
    const ScheduledCase c = s.at(i);
    const Problem& p = c.problem;
    if (c.kind == CaseKind::large) continue;
    // Below 2^60 no alpha reaches 2^120 (|G| and |U| of a small case stay below 2^48).
    if (std::fabs(p.alpha) <= 0x1p60f && std::fabs(p.alpha2) <= 0x1p60f) continue;
    ++huge_alpha;
    const ExactResult ref = exact_gemm(p);
    for (size_t e = 0; e < ref.size(); ++e) {
      const long double g = std::fabs(static_cast<long double>(ref.elems[e].sum) * p.alpha * 0x1p-20L);
      const long double u = std::fabs(static_cast<long double>(ref.elems2[e].sum) * p.alpha2 * 0x1p-20L);
      largest = std::max({largest, g, u});
      ASSERT_LT(g, 0x1p120L) << "case " << i << " element " << e << " alpha " << p.alpha;
      ASSERT_LT(u, 0x1p120L) << "case " << i << " element " << e << " alpha2 " << p.alpha2;
    }
  }
  std::printf("%d cases with an alpha above 2^60; largest |G| or |U| %Lg\n", huge_alpha, largest);
  EXPECT_GE(huge_alpha, 10);
  EXPECT_GT(largest, 0x1p100L);
}

// Grouped and dual cases are pure functions of the seed, and a seed-only case file of one (what
// a big failing case is saved as) expands to the same data.
TEST(Schedule, GroupedAndDualCasesReplayFromTheirSeed) {
  ScheduleOptions o;
  o.seed = 20261217;
  nvfp4_kernel_info info = any_gemm();
  info.ops = (1u << NVFP4_OP_GROUPED_GEMM) | (1u << NVFP4_OP_DUAL_GEMM);
  info.out_types = kAllOutTypes;
  const Schedule s(info, "replay", o), again(info, "replay", o);
  for (int64_t i = 0; i < 300; ++i) {
    const Problem p = s.at(i).problem;
    const Problem q = again.at(i).problem;
    ASSERT_EQ(write_case(p), write_case(q)) << i;
    ASSERT_TRUE(p.data_from_seed || (p.op == Op::grouped_gemm && std::all_of(p.groups.begin(), p.groups.end(), [](const Group& g) { return g.m == 0; })))
        << i;
    Problem seed_only = p;
    seed_only.a.clear(), seed_only.b.clear(), seed_only.sfa.clear(), seed_only.sfb.clear();
    seed_only.b2.clear(), seed_only.sfb2.clear();
    for (Group& g : seed_only.groups) g.a.clear(), g.b.clear(), g.sfa.clear(), g.sfb.clear();
    Problem back = parse_case(write_case(seed_only), "seed-only.case");
    expand_seeded_case(back);
    ASSERT_EQ(problem_error(back), "") << i;
    EXPECT_EQ(write_case(back), write_case(p)) << i;
  }
}

// The seed-only text of a drawn case (what replay hashes for its stale data) is the text of the
// same case with its tensors cleared, for every op and output type of the GEMM family; a case
// whose data are not its seed's has none.
TEST(Schedule, SeedOnlyTextIsTheTextOfTheCaseWithoutItsData) {
  ScheduleOptions o;
  o.seed = 20261219;
  nvfp4_kernel_info info = any_gemm();
  info.ops |= (1u << NVFP4_OP_GROUPED_GEMM) | (1u << NVFP4_OP_DUAL_GEMM);
  info.out_types = kAllOutTypes | (1u << NVFP4_OUT_NVFP4);
  const Schedule s(info, "seed_only", o);
  int seeded = 0;
  for (int64_t i = 0; i < 300; ++i) {
    Problem p = s.at(i).problem;
    if (!p.data_from_seed) continue;
    ++seeded;
    Problem cleared = p;
    for (std::vector<uint8_t>* v : {&cleared.a, &cleared.b, &cleared.sfa, &cleared.sfb, &cleared.b2, &cleared.sfb2}) v->clear();
    for (Group& g : cleared.groups) g.a.clear(), g.b.clear(), g.sfa.clear(), g.sfb.clear();
    ASSERT_EQ(write_case(p, CaseText::seed_only), write_case(cleared)) << i;
    const bool holds_data = p.op != Op::grouped_gemm || std::any_of(p.groups.begin(), p.groups.end(), [](const Group& g) { return g.m > 0; });
    if (holds_data) {
      ASSERT_NE(write_case(p, CaseText::seed_only), write_case(p)) << i;
    }
    p.data_from_seed = false;
    EXPECT_THROW(write_case(p, CaseText::seed_only), std::invalid_argument) << i;
  }
  EXPECT_GT(seeded, 250);
}

// The kernel fuzzer's generic kernel declares every op and output type: random inputs reach
// grouped and dual problems and BF16 and FP32 outputs, every one valid.
TEST(Schedule, FuzzInputsReachGroupedDualAndEveryOutTypeForTheGenericKernel) {
  Rng rng(20261218);
  RngDraws raw(rng);
  std::map<std::string, int> seen;
  for (int x = 0; x < 1500; ++x) {
    const std::vector<uint8_t> bytes = raw.bytes(raw.below(64));
    const DrawnCase c = draw_fuzz_case(bytes.data(), bytes.size(), nullptr);
    ASSERT_EQ(problem_error(c.problem), "") << x;
    ASSERT_TRUE(c.problem.has_data()) << x;
    ++seen[to_string(c.problem.op)];
    ++seen[to_string(c.problem.out_type)];
  }
  for (const char* what : {"gemv", "gemm", "grouped_gemm", "dual_gemm", "fp16", "bf16", "fp32"})
    EXPECT_GE(seen[what], 100) << what;
}

// The targeted cases of the schedule make the subnormal-operand quirk show in the exact regime;
// the same matrix unit fed normal operands passes them (the measured Hopper rule).
TEST(Schedule, TargetedCasesCatchSubnormalOperandsOnTheMeasuredMatrixUnit) {
  ScheduleOptions o;
  o.seed = 11;
  o.large_tail = false;
  const Schedule s(any_gemm(), "gemm_tc", o);
  const Policy hopper = Policy::parse("matrix-unit:90");
  int targeted = 0, caught = 0;
  for (int64_t i = 0; i < 16 * 90; ++i) {
    const ScheduledCase c = s.at(i);
    if (c.data != DataClass::fine_cancel || c.kind != CaseKind::small) continue;
    Problem p = c.problem;
    if (p.m * p.n * p.l * p.k > (int64_t(1) << 20)) continue;  // keep the test quick
    const ExactResult ref = exact_gemm(p);
    ++targeted;
    const std::vector<uint16_t> honest = tensor_core_gemm(p, false);
    const OracleSummary h = judge(p, ref, honest.data(), hopper);
    ASSERT_FALSE(h.any_failure()) << "case " << i << ": normal operands must pass, first failing (" << h.first_i
                                  << "," << h.first_j << ")";
    caught += judge(p, ref, tensor_core_gemm(p, true).data(), hopper).any_failure();
  }
  std::printf("targeted cases: %d, the subnormal-operand kernel caught in %d\n", targeted, caught);
  EXPECT_GE(targeted, 20);
  EXPECT_GT(caught * 2, targeted) << "most targeted cases must catch it";
}

}  // namespace
}  // namespace nvfp4
