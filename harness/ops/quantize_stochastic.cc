// The statistical part of rule 7 for stochastic quantizers.
//
// The model: for an element whose y = x * os (the binary32 product the kernel forms) lies strictly
// between grid neighbours lo < |y| < hi (step = hi - lo), an honest kernel writes hi with
// probability f = (|y| - lo) / step, independently over seeds and elements. With N seeds and
// U_e the number of seeds that round element e up, the mean of the dequantized codes is
// lo + step * U_e / N, so |mean - |y|| <= t * step is |U_e - N f| <= N t. Hoeffding's inequality
// for n independent draws in [0, 1] gives P(|sum - mean sum| >= a) <= 2 exp(-2 a^2 / n). The
// suite tests, at a per-test false-alarm probability delta:
//   an element:  |U_e - N f_e|            <= sqrt(N ln(2/delta) / 2)       + N slack
//   a block:     |sum_e (U_e - N f_e)|    <= sqrt(N n_b ln(2/delta) / 2)   + N n_b slack
//   the tensor:  the same over all n off-grid elements;
// a block whose honest probability of giving the same codes under every seed is at most delta
// must vary (that probability is at most (prod_e max(f_e, 1 - f_e))^(N-1)), and a block whose
// honest probability of all-zero codes under every seed is at most delta must not be all zero
// (prod_e (1 - f_e)^N over elements with |y| < 0.5; 0 where any |y| >= 0.5). delta is the
// case's false-alarm probability kStochasticFalseAlarm = 1e-9 divided by the number of tests
// (Bonferroni), so 20,000 honest cases raise a false alarm with probability below 2e-5. slack
// = 2^-8 lets a draw's probability of rounding up differ from f that much (a generator with 8
// random bits; the `fast` recipe's os window moves y by 2^-20 relative, far less).
//
// N = 32 seeds: the biased source the mutants model (up with probability f^2: E[f - f^2] = 1/6
// for f uniform) lies past the tensor bound from about 64 off-grid elements (bound 0.085 there,
// at delta about 1e-12); a constant source is caught in any block with one element near the
// middle of its step (max(f, 1-f) <= 0.51) or a few anywhere; a stochastic case costs 32 more
// calls, a quantizer call being small beside the GEMM cases.
#include "harness/ops/quantize_stochastic.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "reference/scale_layout.h"
#include "reference/stable_hash.h"

namespace nvfp4::quantize_op {
namespace {

constexpr double kGrid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

// One element's place between its grid neighbours: off_grid only where both differ.
struct Place {
  bool off_grid = false;
  int below = 0;  // lo's index on the grid
  double y = 0, lo = 0, step = 0, f = 0;
};
Place place_of(float x, float os) {
  Place pl;
  const float y = static_cast<float>(static_cast<double>(x) * static_cast<double>(os));
  pl.y = y;
  const double a = std::fabs(pl.y);
  if (!(a < 6.0)) return pl;  // NaN, or saturated: both neighbours are 6
  // The lower neighbour's index, counted (a loop's exit mispredicts on every element).
  const int c = (a >= 0.5) + (a >= 1) + (a >= 1.5) + (a >= 2) + (a >= 3) + (a >= 4);
  if (kGrid[c] == a) return pl;
  pl.off_grid = true;
  pl.below = c;
  pl.lo = kGrid[c];
  pl.step = kGrid[c + 1] - kGrid[c];
  pl.f = (a - pl.lo) / pl.step;
  return pl;
}

// What one block did over the seeds.
struct BlockStats {
  int64_t b = 0, i = 0, s = 0;
  int64_t off_grid = 0;
  double sum_dev = 0;  // sum_e (U_e - N f_e)
  double log_same = 0, log_zero = 0;  // ln of the honest probabilities of "constant" and "all zero"
  bool varied = false, all_zero = true, nonzero_input = false;
  int64_t worst_x = -1;  // the element furthest from its expectation
  double worst_dev = 0, worst_y = 0, worst_mean = 0, worst_expected = 0;
};

BlockStats block_stats(const Problem& p, const QuantResult& ref, const std::vector<SeedRun>& runs, int64_t b, int64_t i,
                       int64_t s) {
  const double n = static_cast<double>(runs.size());
  BlockStats st{b, i, s};
  const int64_t row = b * p.m + i, x0 = s * 16, count = std::min<int64_t>(p.k - x0, 16);
  const float os = ref.os[static_cast<size_t>(sf_linear_offset(p.m, p.qkb(), b, i, s))];
  float in[16];
  Place pl[16];
  // The lower neighbour's index (7 where the element is on the grid, or past the block's end: no
  // code counts as up there).
  uint8_t below[16], first[16];
  uint16_t up[16] = {};
  for (int64_t j = 0; j < 16; ++j) below[j] = 7;
  for (int64_t j = 0; j < count; ++j) {
    in[j] = quantize_input(p, row * p.k + x0 + j);
    pl[j] = place_of(in[j], os);
    if (pl[j].off_grid) below[j] = static_cast<uint8_t>(pl[j].below);
  }
  // Every run's codes, one pass over the block's bytes each (element 2j is byte j's low nibble;
  // x0 and count are even): how often each element rounded up, whether any code is nonzero, and
  // whether any differs from run 0's other than as a zero of the other sign. The codes are
  // unpacked into 16 lanes, zero past the block's end, so that the counting loop has a fixed
  // length and is vectorized.
  const size_t at = static_cast<size_t>(row * (p.k / 2) + x0 / 2);
  const size_t bytes = static_cast<size_t>(count / 2);
  const auto unpack = [bytes](const uint8_t* q, uint8_t* c) {
    uint8_t b[8] = {};
    std::memcpy(b, q, bytes);
    for (int j = 0; j < 8; ++j) c[2 * j] = b[j] & 0x0F, c[2 * j + 1] = b[j] >> 4;
  };
  unpack(runs[0].q.data() + at, first);
  unsigned nonzero = 0, varied = 0;
  for (const SeedRun& r : runs) {
    uint8_t c[16];
    unpack(r.q.data() + at, c);
    for (int j = 0; j < 16; ++j) {
      const unsigned m = c[j] & 7u, f = first[j] & 7u;
      nonzero |= m;
      varied |= (c[j] != first[j]) & (m + f != 0);
      up[j] = static_cast<uint16_t>(up[j] + (m > below[j]));
    }
  }
  st.all_zero = nonzero == 0;
  st.varied = varied != 0;
  for (int64_t j = 0; j < count; ++j) {
    if (in[j] != 0 && !std::isnan(in[j])) st.nonzero_input = true;
    // A NaN element (or a NaN product) may take any code: it never makes a zero block unlikely.
    const bool nan = std::isnan(in[j]) || std::isnan(static_cast<double>(in[j]) * os);
    const Place& e = pl[j];
    const double p_zero = nan ? 1 : e.off_grid ? (e.lo == 0 ? 1 - e.f : 0) : (e.y == 0 && std::isfinite(in[j]) ? 1 : 0);
    // n ln(p_zero) (ln 1 = 0 and ln 0 = -inf without the call).
    if (p_zero == 0) st.log_zero = -HUGE_VAL;
    else if (p_zero != 1) st.log_zero += n * std::log(p_zero);
    if (!e.off_grid) continue;
    ++st.off_grid;
    st.log_same += (n - 1) * std::log(std::max(e.f, 1 - e.f));
    const double dev = static_cast<double>(up[j]) - n * e.f;
    st.sum_dev += dev;
    if (std::fabs(dev) > std::fabs(st.worst_dev) || st.worst_x < 0) {
      st.worst_x = x0 + j, st.worst_dev = dev, st.worst_y = e.y, st.worst_expected = n * e.f;
      st.worst_mean = (e.y < 0 ? -1 : 1) * (e.lo + e.step * static_cast<double>(up[j]) / n);
    }
  }
  return st;
}

// Hoeffding's bound on |sum of n draws - its expectation| at false-alarm probability delta,
// with the slack per draw.
double bound(double draws, double log_2_over_delta) {
  return std::sqrt(draws * log_2_over_delta / 2) + draws * kStochasticSlack;
}

std::string where(const BlockStats& st) {
  return fmt::format("block (batch {}, row {}, block {})", st.b, st.i, st.s);
}

std::string block_failure(const BlockStats& st, double n, double log_2_over_delta) {
  const double log_delta = std::log(2.0) - log_2_over_delta;
  if (st.nonzero_input && st.all_zero && st.log_zero <= log_delta)
    return fmt::format("all zero: {} has nonzero elements but every code is zero under all {} seeds (an honest "
                       "stochastic rounding does that with probability e^{:.1f})",
                       where(st), n, st.log_zero);
  if (st.off_grid > 0 && !st.varied && st.log_same <= log_delta)
    return fmt::format("constant: {} has {} element(s) off the E2M1 grid but the same codes under all {} seeds (an "
                       "honest random source does that with probability at most e^{:.1f}): the random source "
                       "ignores the seed",
                       where(st), st.off_grid, n, st.log_same);
  const double element_bound = bound(n, log_2_over_delta);
  if (st.worst_x >= 0 && std::fabs(st.worst_dev) > element_bound)
    return fmt::format("biased: {} element {}: x*os = {} but the mean of its dequantized codes over {} seeds is {} "
                       "(rounded up {:+.1f} times off the {:.1f} expected, bound {:.1f})",
                       where(st), st.worst_x, st.worst_y, n, st.worst_mean, st.worst_dev, st.worst_expected, element_bound);
  const double block_bound = bound(n * static_cast<double>(st.off_grid), log_2_over_delta);
  if (std::fabs(st.sum_dev) > block_bound)
    return fmt::format("biased: {}: its {} off-grid elements rounded up {:+.1f} times off the expected count over {} "
                       "seeds (bound {:.1f})",
                       where(st), st.off_grid, st.sum_dev, n, block_bound);
  return "";
}

}  // namespace

uint64_t other_seed(uint64_t case_seed, int i) {
  const uint64_t s = splitmix64(case_seed ^ (0x5EEDull + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull));
  return s == case_seed ? s + 1 : s;
}

std::string stochastic_failure(const Problem& p, const QuantResult& ref, const std::vector<SeedRun>& runs,
                               uint8_t padding) {
  std::vector<QuantOutput> outputs;
  for (const SeedRun& r : runs) outputs.push_back({&r.q, &r.sfq});
  const std::vector<QuantJudgement> judged = judge_quantize_each(p, ref, outputs, padding);
  for (size_t r = 0; r < runs.size(); ++r)
    if (!judged[r].pass())
      return fmt::format("with seed {}: {}", runs[r].seed,
                         quantize_failure_text(p, judged[r], runs[r].q, runs[r].sfq, padding));
  if (runs.size() < 2 || p.q_format != BlockFormat::nvfp4) return "";
  std::vector<BlockStats> blocks;
  int64_t off_grid = 0;
  for (int64_t b = 0; b < p.l; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t s = 0; s < p.qkb(); ++s) {
        blocks.push_back(block_stats(p, ref, runs, b, i, s));
        off_grid += blocks.back().off_grid;
      }
  // Bonferroni over every test of the case: one per element, three per block, one for the tensor.
  const double tests = static_cast<double>(off_grid + 3 * static_cast<int64_t>(blocks.size()) + 1);
  const double log_2_over_delta = std::log(2.0 * tests / kStochasticFalseAlarm), n = static_cast<double>(runs.size());
  double sum_dev = 0;
  for (const BlockStats& st : blocks) {
    if (std::string why = block_failure(st, n, log_2_over_delta); !why.empty()) return "stochastic rounding, " + why;
    sum_dev += st.sum_dev;
  }
  const double tensor_bound = bound(n * static_cast<double>(off_grid), log_2_over_delta);
  if (off_grid == 0 || std::fabs(sum_dev) <= tensor_bound) return "";
  const auto worst = std::max_element(blocks.begin(), blocks.end(), [&](const BlockStats& a, const BlockStats& b) {
    return a.sum_dev * sum_dev < b.sum_dev * sum_dev;  // furthest in the tensor's direction
  });
  return fmt::format("stochastic rounding biased: the tensor's {} off-grid elements rounded up {:+.1f} times off the "
                     "expected count over {} seeds (bound {:.1f}, {:.3f} of a draw each); furthest {} ({:+.1f})",
                     off_grid, sum_dev, n, tensor_bound, sum_dev / (n * static_cast<double>(off_grid)), where(*worst),
                     worst->sum_dev);
}

std::optional<Finding> stochastic_finding(const Problem& p, const QuantResult& ref, const std::vector<uint64_t>& seeds,
                                          const std::vector<CallObservation>& obs, uint8_t padding) {
  std::vector<SeedRun> runs;
  const size_t q = static_cast<size_t>(p.q_bytes());
  for (size_t r = 0; r < obs.size() && r < seeds.size(); ++r) {
    const std::vector<uint32_t>& c = obs[r].c.words();
    if (c.size() < q) continue;
    runs.push_back({seeds[r], std::vector<uint8_t>(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(q)),
                    std::vector<uint8_t>(c.begin() + static_cast<std::ptrdiff_t>(q), c.end())});
  }
  std::string why = stochastic_failure(p, ref, runs, padding);
  if (why.empty()) return std::nullopt;
  return Finding{Check::oracle, std::move(why)};
}

}  // namespace nvfp4::quantize_op
