// Block-scaled output: the reference and rule 8 (see the header).
#include "reference/block_scaled_output.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "reference/scale_layout.h"

namespace nvfp4 {

int64_t OutUnit::sfq_bytes(SfLayout layout) const {
  return layout == SfLayout::permuted ? sf_permuted_bytes(m, nb(), l) : sfq_linear_bytes();
}

std::vector<OutUnit> out_units(const Problem& p) {
  const auto scale = [&p](size_t g) {
    if (p.out_global_scale.empty()) return 1.0f;
    return p.out_global_scale[p.out_global_scale.size() == 1 ? 0 : g];
  };
  if (!op_is_grouped(p.op)) return {OutUnit{p.l, p.m, p.n, 0, scale(0)}};
  const std::vector<int64_t> offsets = group_output_offsets(p);
  std::vector<OutUnit> units;
  for (size_t g = 0; g < p.groups.size(); ++g)
    units.push_back(OutUnit{1, p.groups[g].m, p.groups[g].n, offsets[g], scale(g)});
  return units;
}

int64_t out_q_bytes(const Problem& p) {
  int64_t total = 0;
  for (const OutUnit& u : out_units(p)) total += u.q_bytes();
  return total;
}

int64_t out_sfq_bytes(const Problem& p) {
  int64_t total = 0;
  for (const OutUnit& u : out_units(p)) total += u.sfq_linear_bytes();
  return total;
}

std::string block_scaled_output_error(const Problem& p) {
  if (p.out_type != OutType::nvfp4)
    return p.out_global_scale.empty() ? std::string() : "out_global_scale is only for out_type nvfp4";
  if (p.op != Op::gemm && !op_is_grouped(p.op) && !op_is_dual(p.op))
    return "out_type nvfp4 (block-scaled output) is for gemm, grouped_gemm and dual_gemm";
  const uint32_t r = static_cast<uint32_t>(p.out_recipe);
  if (r < 1 || r > static_cast<uint32_t>(Recipe::torchao))
    return "out_recipe must be te, ref, fast or torchao (the recipes that make nvfp4)";
  const size_t groups = op_is_grouped(p.op) ? p.groups.size() : 1;
  if (p.out_global_scale.size() != 1 && p.out_global_scale.size() != groups)
    return "out_global_scale needs one value" + std::string(groups > 1 ? " or one per group" : "") + ", got " +
           std::to_string(p.out_global_scale.size());
  for (const float g : p.out_global_scale) {
    if (!std::isfinite(g) || !(g > 0)) return "out_global_scale must be finite and > 0";
  }
  // Q packs two codes a byte along n, like A along k.
  if (!op_is_grouped(p.op) && p.n % 2 != 0)
    return "n = " + std::to_string(p.n) + " must be even for out_type nvfp4 (Q packs two codes a byte)";
  for (size_t g = 0; g < p.groups.size(); ++g) {
    if (p.groups[g].n % 2 != 0)
      return "group " + std::to_string(g) + ": n = " + std::to_string(p.groups[g].n) +
             " must be even for out_type nvfp4 (Q packs two codes a byte)";
  }
  return {};
}

Problem unit_quantize_problem(const Problem& p, const ExactResult& ref, const OutUnit& u) {
  if (ref.out_type != OutType::nvfp4) throw std::invalid_argument("block-scaled output: the reference is not of out_type nvfp4");
  Problem q;
  q.op = Op::quantize;
  q.l = u.l, q.m = u.m, q.n = 1, q.k = u.n;
  q.sf_layout = p.sf_layout;
  q.in_type = InType::fp32;
  q.q_format = BlockFormat::nvfp4;
  q.recipe = p.out_recipe;
  const int64_t count = u.l * u.m * u.n;
  q.x.resize(static_cast<size_t>(count) * 4);
  for (int64_t e = 0; e < count; ++e) {
    const uint32_t w = ref.word(static_cast<size_t>(u.first + e));  // the FP32 value, little-endian
    for (int byte = 0; byte < 4; ++byte) q.x[static_cast<size_t>(e * 4 + byte)] = static_cast<uint8_t>(w >> (8 * byte));
  }
  return q;
}

QuantResult block_scaled_reference(const Problem& p, const ExactResult& ref, const OutUnit& u) {
  if (u.m == 0) return QuantResult{{}, {}, {}, {u.global_scale}};
  return quantize_reference(unit_quantize_problem(p, ref, u), std::vector<float>{u.global_scale});
}

void set_block_scaled_expect(Problem& p, const ExactResult& ref) {
  std::vector<uint8_t> q, sfq;
  for (const OutUnit& u : out_units(p)) {
    const QuantResult r = block_scaled_reference(p, ref, u);
    q.insert(q.end(), r.q.begin(), r.q.end());
    sfq.insert(sfq.end(), r.sfq.begin(), r.sfq.end());
  }
  p.expect.reset();
  p.expect_q = std::move(q);
  p.expect_sfq = std::move(sfq);
}

std::vector<uint8_t> block_scaled_expect_bytes(const Problem& p, const ExactResult& ref) {
  Problem copy;
  copy.op = p.op, copy.m = p.m, copy.n = p.n, copy.l = p.l, copy.sf_layout = p.sf_layout;
  copy.out_recipe = p.out_recipe, copy.out_global_scale = p.out_global_scale;
  for (const Group& g : p.groups) {
    Group shape;
    shape.m = g.m, shape.n = g.n, shape.k = g.k;
    copy.groups.push_back(shape);
  }
  set_block_scaled_expect(copy, ref);
  std::vector<uint8_t> bytes = *copy.expect_q;
  bytes.insert(bytes.end(), copy.expect_sfq->begin(), copy.expect_sfq->end());
  return bytes;
}

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// v rounded to binary32 toward -Inf / +Inf (the floats that bracket a long double).
float float_down(long double v) {
  float f = static_cast<float>(v);
  if (static_cast<long double>(f) > v) f = std::nextafter(f, -kInf);
  return f;
}
float float_up(long double v) {
  float f = static_cast<float>(v);
  if (static_cast<long double>(f) < v) f = std::nextafter(f, kInf);
  return f;
}

float fp32_value(uint32_t word) {
  float f;
  std::memcpy(&f, &word, sizeof f);
  return f;
}

// An element's possible FP32 values [lo, hi]; NaN elements are left out of the block (rule 7).
struct ValueRange {
  bool nan = false;
  float lo = 0, hi = 0;
};
ValueRange value_range(const OutputInterval& iv) {
  if (iv.nan) return {true, 0, 0};
  if (iv.exact) {
    const float v = fp32_value(iv.fp32);
    return {false, v, v};
  }
  if (std::isinf(iv.spread)) return {false, -kInf, kInf};
  return {false, float_down(iv.x - iv.spread), float_up(iv.x + iv.spread)};
}

int64_t sfq_offset(const Problem& p, const OutUnit& u, int64_t b, int64_t i, int64_t s) {
  return p.sf_layout == SfLayout::permuted ? sf_permuted_offset(u.m, u.nb(), b, i, s)
                                           : sf_linear_offset(u.m, u.nb(), b, i, s);
}

uint8_t get_code(const std::vector<uint8_t>& q, int64_t elem) {
  const uint8_t byte = q[static_cast<size_t>(elem / 2)];
  return elem % 2 ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0xF);
}

// The codes a value in [lo, hi] may take with encode factors in [os_lo, os_hi] (os >= 0): the
// values of the codes at the extremes of x * os, each product rounded once to binary32. False
// when some product is NaN (0 * Inf): then any code.
bool code_range(float lo, float hi, double os_lo, double os_hi, double* vmin, double* vmax) {
  *vmin = HUGE_VAL, *vmax = -HUGE_VAL;
  for (const float x : {lo, hi}) {
    for (const double os : {os_lo, os_hi}) {
      const float y = static_cast<float>(static_cast<double>(x) * os);
      if (std::isnan(y)) return false;
      const double v = e2m1_value(e2m1_code(y));
      *vmin = std::min(*vmin, v);
      *vmax = std::max(*vmax, v);
    }
  }
  return true;
}

// The interval rule of rule 8 for one block whose elements are `range`, counted into j.
void judge_interval_block(const Problem& p, const OutUnit& u, const std::vector<ValueRange>& range,
                          const std::vector<uint8_t>& q, const std::vector<uint8_t>& sfq, int64_t b, int64_t i,
                          int64_t s, BlockOutJudgement& j) {
  float amax_lo = 0, amax_hi = 0;
  for (const ValueRange& r : range) {
    if (r.nan) continue;
    const float low = r.lo <= 0 && r.hi >= 0 ? 0.0f : std::min(std::fabs(r.lo), std::fabs(r.hi));
    amax_lo = std::max(amax_lo, low);
    amax_hi = std::max(amax_hi, std::max(std::fabs(r.lo), std::fabs(r.hi)));
  }
  const uint8_t lo = nvfp4_scale_byte(p.out_recipe, u.global_scale, amax_lo);
  const uint8_t hi = nvfp4_scale_byte(p.out_recipe, u.global_scale, amax_hi);
  const uint8_t got = sfq[static_cast<size_t>(sfq_offset(p, u, b, i, s))];
  const bool first = j.interval_wrong_scales == 0 && j.interval_wrong_codes == 0;
  const auto record = [&] { j.b = b, j.i = i, j.s = s, j.scale_lo = lo, j.scale_hi = hi, j.actual_scale = got; };
  if (got < std::min(lo, hi) || got > std::max(lo, hi)) {
    if (first) record();
    ++j.interval_wrong_scales;
  }
  if ((got & 0x7F) == 0) return;  // a zero scale dequantizes the block to 0 whatever its codes
  const double os = nvfp4_encode_factor(p.out_recipe, u.global_scale, got);
  const double rel = p.out_recipe == Recipe::fast ? 0x1p-20 : 0;  // rule 7's window for `fast`
  for (size_t x = 0; x < range.size(); ++x) {
    if (range[x].nan) continue;  // a NaN element may take any code
    double vmin = 0, vmax = 0;
    if (!code_range(range[x].lo, range[x].hi, os * (1 - rel), os * (1 + rel), &vmin, &vmax)) continue;
    const int64_t col = s * 16 + static_cast<int64_t>(x);
    const uint8_t code = get_code(q, (b * u.m + i) * u.n + col);
    const double v = e2m1_value(code);
    if (v >= vmin && v <= vmax) continue;  // -0 == +0
    if (first && j.x < 0) {
      if (j.b < 0 || j.b != b || j.i != i || j.s != s) record();
      j.x = col, j.actual_code = code, j.code_lo = e2m1_code(static_cast<float>(vmin)),
      j.code_hi = e2m1_code(static_cast<float>(vmax));
      j.value_lo = range[x].lo, j.value_hi = range[x].hi;
    }
    ++j.interval_wrong_codes;
  }
}

}  // namespace

BlockOutJudgement judge_block_scaled(const Problem& p, const ExactResult& ref, const Policy& policy, const OutUnit& u,
                                     const std::vector<uint8_t>& q, const std::vector<uint8_t>& sfq, uint8_t padding) {
  BlockOutJudgement j;
  if (static_cast<int64_t>(q.size()) != u.q_bytes() || static_cast<int64_t>(sfq.size()) != u.sfq_bytes(p.sf_layout))
    throw std::invalid_argument("judge_block_scaled: Q or SFQ has the wrong size for the output");
  if (u.m == 0) return j;
  const Problem qp = unit_quantize_problem(p, ref, u);
  const QuantResult qr = quantize_reference(qp, std::vector<float>{u.global_scale});
  // The unit's alpha, found once (a grouped problem's unit is one group).
  const float alpha = output_alpha(p, u.first);
  std::vector<ValueRange> range;
  for (int64_t b = 0; b < u.l; ++b) {
    for (int64_t i = 0; i < u.m; ++i) {
      for (int64_t s = 0; s < u.nb(); ++s) {
        range.clear();
        bool exact = true;
        for (int64_t col = s * 16; col < std::min(s * 16 + 16, u.n); ++col) {
          const OutputInterval iv = output_interval(p, ref, u.first + (b * u.m + i) * u.n + col, policy, alpha);
          exact = exact && (iv.nan || iv.exact);
          range.push_back(value_range(iv));
        }
        ++j.blocks;
        if (!exact) {
          judge_interval_block(p, u, range, q, sfq, b, i, s, j);
          continue;
        }
        ++j.exact_blocks;
        judge_quantize_block(qp, qr, q, sfq, b, i, s, j.rule7);
      }
    }
  }
  if (p.sf_layout == SfLayout::permuted) {
    const std::vector<bool> pad = sf_permuted_padding_mask(u.m, u.nb(), u.l);
    for (size_t at = 0; at < pad.size(); ++at) j.rule7.wrong_padding += pad[at] && sfq[at] != padding;
  }
  return j;
}

namespace {

std::string hex2(unsigned v, int digits) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%0*X", digits, v);
  return buf;
}
std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
std::string scale_text(uint8_t byte) { return hex2(byte, 2) + " (" + num(e4m3_scale_value(byte)) + ")"; }
std::string code_text(uint8_t code) { return hex2(code, 1) + " (" + num(e2m1_value(code)) + ")"; }

std::string interval_text(const BlockOutJudgement& j) {
  std::string t = "; first wrong block outside the exact regime: batch " + std::to_string(j.b) + ", row " +
                  std::to_string(j.i) + ", block " + std::to_string(j.s) + " (columns " + std::to_string(j.s * 16) +
                  ".." + std::to_string(j.s * 16 + 15) + "): scale byte allowed " + scale_text(j.scale_lo) + " to " +
                  scale_text(j.scale_hi) + ", got " + scale_text(j.actual_scale);
  if (j.x >= 0)
    t += "; column " + std::to_string(j.x) + " (value in [" + num(j.value_lo) + ", " + num(j.value_hi) +
         "]): code allowed " + code_text(j.code_lo) + " to " + code_text(j.code_hi) + " with the scale written, got " +
         code_text(j.actual_code);
  return t;
}

}  // namespace

std::string block_scaled_failure_text(const Problem& p, const ExactResult& ref, const OutUnit& u,
                                      const BlockOutJudgement& j, const std::vector<uint8_t>& q,
                                      const std::vector<uint8_t>& sfq, uint8_t padding) {
  if (j.pass()) return "Q and SFQ are what rule 8 allows";
  std::string t = std::string("block-scaled output (recipe ") + to_string(p.out_recipe) + ", global scale " +
                  num(u.global_scale) + ")";
  if (op_is_grouped(p.op)) {
    const std::vector<OutUnit> units = out_units(p);
    for (size_t g = 0; g < units.size(); ++g) {
      if (units[g].first == u.first && units[g].m == u.m && units[g].m > 0) t += " of group " + std::to_string(g);
    }
  }
  t += ": " + std::to_string(j.blocks) + " blocks, " + std::to_string(j.exact_blocks) + " in the exact regime";
  if (!j.rule7.pass()) {
    const std::vector<float> gs{u.global_scale};
    t += "; the exact-regime blocks (rule 7, columns as elements): " +
         quantize_failure_text(unit_quantize_problem(p, ref, u), j.rule7, q, sfq, padding, &gs);
  }
  if (j.interval_wrong_scales || j.interval_wrong_codes)
    t += "; outside the exact regime: " + std::to_string(j.interval_wrong_scales) + " scale bytes and " +
         std::to_string(j.interval_wrong_codes) + " codes outside what the element intervals allow" + interval_text(j);
  return t;
}

namespace {

// Where unit u's Q and linear SFQ start among bytes in expect order.
struct UnitOffsets {
  std::vector<int64_t> q, sfq;
};
UnitOffsets unit_offsets(const std::vector<OutUnit>& units) {
  UnitOffsets o;
  int64_t q = 0, sfq = 0;
  for (const OutUnit& u : units) {
    o.q.push_back(q);
    q += u.q_bytes();
  }
  for (const OutUnit& u : units) {
    o.sfq.push_back(q + sfq);
    sfq += u.sfq_linear_bytes();
  }
  return o;
}

uint8_t block_code(const std::vector<uint8_t>& bytes, int64_t q_first, const OutUnit& u, const OutBlock& blk, int64_t c) {
  const int64_t e = (blk.b * u.m + blk.i) * u.n + blk.s * 16 + c;
  const uint8_t byte = bytes[static_cast<size_t>(q_first + e / 2)];
  return e % 2 ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0xF);
}

int64_t block_count(const OutUnit& u, const OutBlock& blk) { return std::min<int64_t>(16, u.n - blk.s * 16); }

}  // namespace

std::vector<OutBlock> first_out_blocks(const Problem& p, int64_t count) {
  std::vector<OutBlock> blocks;
  const std::vector<OutUnit> units = out_units(p);
  for (size_t x = 0; x < units.size(); ++x) {
    const OutUnit& u = units[x];
    for (int64_t at = 0; at < u.l * u.m * u.nb() && static_cast<int64_t>(blocks.size()) < count; ++at)
      blocks.push_back(OutBlock{x, at / (u.m * u.nb()), at / u.nb() % u.m, at % u.nb()});
  }
  return blocks;
}

std::string out_block_place(const Problem& p, const OutBlock& blk) {
  const int64_t n = op_is_grouped(p.op) ? p.groups[blk.unit].n : p.n;
  const std::string where = op_is_grouped(p.op) ? "group " + std::to_string(blk.unit) : "batch " + std::to_string(blk.b);
  return where + ", row " + std::to_string(blk.i) + ", block " + std::to_string(blk.s) + " (columns " +
         std::to_string(blk.s * 16) + ".." + std::to_string(std::min<int64_t>(n, blk.s * 16 + 16) - 1) + ")";
}

std::string out_block_words(const Problem& p, const std::vector<uint8_t>& bytes, const OutBlock& blk) {
  const std::vector<OutUnit> units = out_units(p);
  const UnitOffsets o = unit_offsets(units);
  const OutUnit& u = units[blk.unit];
  if (static_cast<int64_t>(bytes.size()) != out_q_bytes(p) + out_sfq_bytes(p))
    throw std::invalid_argument("out_block_words: the bytes are not Q and SFQ of the whole output");
  const uint8_t scale = bytes[static_cast<size_t>(o.sfq[blk.unit] + sf_linear_offset(u.m, u.nb(), blk.b, blk.i, blk.s))];
  std::string t = "scale " + scale_text(scale) + "; codes";
  for (int64_t c = 0; c < block_count(u, blk); ++c) t += " " + code_text(block_code(bytes, o.q[blk.unit], u, blk, c));
  return t;
}

OutBlockDiff compare_out_blocks(const Problem& p, const std::vector<uint8_t>& expected, const std::vector<uint8_t>& actual) {
  const int64_t total = out_q_bytes(p) + out_sfq_bytes(p);
  if (static_cast<int64_t>(expected.size()) != total || static_cast<int64_t>(actual.size()) != total)
    throw std::invalid_argument("compare_out_blocks: the bytes are not Q and SFQ of the whole output");
  OutBlockDiff d;
  const std::vector<OutUnit> units = out_units(p);
  const UnitOffsets o = unit_offsets(units);
  for (size_t x = 0; x < units.size(); ++x) {
    const OutUnit& u = units[x];
    for (int64_t at = 0; at < u.l * u.m * u.nb(); ++at) {
      const OutBlock blk{x, at / (u.m * u.nb()), at / u.nb() % u.m, at % u.nb()};
      ++d.blocks;
      const size_t sf = static_cast<size_t>(o.sfq[x] + at);
      bool same = expected[sf] == actual[sf];
      for (int64_t c = 0; c < block_count(u, blk) && same; ++c)
        same = block_code(expected, o.q[x], u, blk, c) == block_code(actual, o.q[x], u, blk, c);
      if (same) continue;
      if (d.differing++ == 0) d.first = blk;
    }
  }
  return d;
}

}  // namespace nvfp4
