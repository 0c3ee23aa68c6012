// Seeded generators of shapes and data. Every generator is a pure function of raw uniform draws
// (see Draws in generators.h): the Rng path and RapidCheck share the distributions, and a raw 0
// always gives the plainest choice so that shrinking ends in small, readable cases.
#include "harness/draw/generators.h"

#include "harness/ops/op_module.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/registry.h"
#include "reference/case_file.h"
#include "reference/formats.h"

namespace nvfp4 {
namespace {

const char* const kValueNames[] = {"uniform", "edge", "sparse", "one_sign", "alternating", "fine_cancel"};
const char* const kScaleNames[] = {"narrow",   "full",      "subnormal", "near_max",
                                   "sign_bit", "nan_block", "zero",      "fine_cancel"};

// fine_cancel's pair blocks of a row of kb blocks: the middle one and the last (one when kb <= 2).
bool fine_cancel_pair_block(int64_t s, int64_t kb) { return kb >= 2 && (s == kb / 2 || s == kb - 1); }
const char* const kAlphaNames[] = {"one", "pow2", "arbitrary"};

template <typename Enum, size_t N>
Enum parse_enum(const char* const (&names)[N], const std::string& word, const char* what) {
  for (size_t i = 0; i < N; ++i) {
    if (word == names[i]) return static_cast<Enum>(i);
  }
  std::string known;
  for (size_t i = 0; i < N; ++i) known += (i ? ", " : "") + std::string(names[i]);
  throw std::invalid_argument("unknown " + std::string(what) + " distribution '" + word +
                              "' (known: " + known + ")");
}

// Multiples a dimension must respect: k is always even on top of the kernel's k_multiple.
int64_t dim_multiple(uint32_t declared) { return declared > 1 ? declared : 1; }
int64_t k_multiple_of(const nvfp4_kernel_info& info) {
  return std::lcm<int64_t>(2, dim_multiple(info.k_multiple));
}

// v rounded up to a multiple of `multiple`, but not above max (then rounded down), and never
// below one multiple: a kernel whose multiple exceeds the limit still gets a supported shape.
int64_t fit_multiple(int64_t v, int64_t multiple, int64_t max) {
  int64_t r = (v + multiple - 1) / multiple * multiple;
  if (r > max) r = max / multiple * multiple;
  return std::max(r, multiple);
}

// One of m or n. Always two draws (category, then a uniform value) so that RapidCheck's picks
// stay aligned when a shrink changes the category. Category 0 is the edge value 1.
int64_t draw_dim(Draws& d, int64_t max, int64_t multiple) {
  std::vector<int64_t> edges;
  for (int64_t e : tile_edge_dims()) {
    if (e <= max) edges.push_back(e);
  }
  const uint64_t kUniformSlots = 6;  // about a quarter of the draws anywhere in [1, max]
  const uint64_t category = d.below(edges.size() + kUniformSlots);
  const int64_t uniform = 1 + static_cast<int64_t>(d.below(static_cast<uint64_t>(max)));
  const int64_t v = category < edges.size() ? edges[category] : uniform;
  return fit_multiple(v, multiple, std::max(max, multiple));
}

// k: even, weighted toward k = 2, a partial last 16-element block, 16-multiples that are not
// 64-multiples (a partial 4-block scale tile), multiples of 64 and their neighbours.
int64_t draw_k(Draws& d, int64_t max_k, int64_t multiple) {
  const uint64_t category = d.below(8);
  const int64_t r = static_cast<int64_t>(d.below(uint64_t(1) << 30));
  const int64_t max16 = std::max<int64_t>(1, max_k / 16), max64 = std::max<int64_t>(1, max_k / 64);
  int64_t k = 2;
  switch (category) {
    case 0: k = 2; break;
    case 1: k = 4 + 2 * (r % 14); break;                             // 4..30
    case 2: k = 16 * (r % max16) + 2 * (1 + (r / max16) % 7); break;  // k % 16 != 0
    case 3: k = 16 * (2 * (r % ((max16 + 1) / 2)) + 1); break;        // odd multiple of 16
    case 4: k = 64 * (1 + r % max64); break;
    case 5: k = 64 * (1 + r % max64) + ((r / max64) % 2 ? 2 : -2); break;
    default: k = 2 * (1 + r % std::max<int64_t>(1, max_k / 2)); break;
  }
  k = std::clamp<int64_t>(k, 2, std::max<int64_t>(2, max_k));
  return fit_multiple(k, multiple, std::max(max_k, multiple));
}

// Halves the largest dimension (keeping multiples) until the shape fits the cost limits.
void fit_limits(Shape& s, const nvfp4_kernel_info& info, const ShapeLimits& lim) {
  const int64_t mm = dim_multiple(info.m_multiple), km = k_multiple_of(info);
  const int64_t nm = op_n_is_one(s.op) ? 1 : dim_multiple(info.n_multiple);
  auto over = [&] {
    return s.l * s.m * s.n > lim.max_outputs || s.l * s.m * s.n * s.k > lim.max_products ||
           s.l * s.m * s.k > lim.max_elements || s.l * s.n * s.k > lim.max_elements;
  };
  while (over()) {
    if (s.l > 1) {
      s.l = (s.l + 1) / 2;
      continue;
    }
    // Shrink whichever of m, n, k is largest relative to its minimum.
    const double rm = double(s.m) / mm, rn = double(s.n) / nm, rk = double(s.k) / km;
    if (rm >= rn && rm >= rk && s.m > mm) {
      s.m = fit_multiple(s.m / 2, mm, s.m);
    } else if (rn >= rk && s.n > nm) {
      s.n = fit_multiple(s.n / 2, nm, s.n);
    } else if (s.k > km) {
      s.k = fit_multiple(s.k / 2, km, s.k);
    } else if (s.m > mm) {
      s.m = fit_multiple(s.m / 2, mm, s.m);
    } else {
      break;  // every dimension at its minimum: the kernel's multiples exceed the limits
    }
  }
}

// Narrow window: exponent fields 7 and 6 (scales in [0.5, 2)) from the low 4 raw bits; raw 0
// is 0x38 = 1.0. Tuned with the oracle (generators_test measures it): two binades keep every
// output of k <= 1024 in the exact regime (S < 2^24 g); four binades dropped that to about 82%.
uint8_t narrow_scale(uint8_t raw) {
  const uint8_t mantissa = raw & 7u, exponent = (raw & 8u) ? 6 : 7;
  return static_cast<uint8_t>(exponent << 3 | mantissa);
}

int64_t e2m1_elements(int64_t rows, int64_t k, int64_t l) { return l * rows * k; }

// Codes of `count` elements, code(raw) from one raw byte each, packed two to a byte into out as
// the pieces arrive. code is a mask or a compare for every distribution but edge's, so the loop
// vectorizes.
template <class Code>
void pack_codes(Draws& d, size_t count, std::vector<uint8_t>& out, Code code) {
  size_t e = 0;  // the next element
  d.bytes_to(count, [&](const uint8_t* raw, size_t size) {
    size_t i = 0;
    if (e % 2 == 1 && size > 0) {  // the high half of a byte the piece before began
      out[e / 2] |= static_cast<uint8_t>(code(raw[0]) << 4);
      ++e, i = 1;
    }
    uint8_t* to = out.data() + e / 2;
    const uint8_t* from = raw + i;
    const size_t pairs = (size - i) / 2;
    for (size_t q = 0; q < pairs; ++q) to[q] = static_cast<uint8_t>(code(from[2 * q]) | code(from[2 * q + 1]) << 4);
    e += 2 * pairs, i += 2 * pairs;
    if (i < size) out[e++ / 2] = code(raw[i]);
  });
}

// A nibble's code made negative where its magnitude is not zero (code | 8), for both nibbles of a
// byte at once where `mask` has their sign bits.
inline uint8_t negate_nonzero(uint8_t b, uint8_t mask) {
  const uint8_t low = static_cast<uint8_t>(((b & 0x07u) + 0x07u) & 0x08u);
  const uint8_t high = static_cast<uint8_t>(((b & 0x70u) + 0x70u) & 0x80u);
  return static_cast<uint8_t>(b | ((low | high) & mask));
}

// The place-dependent part of alternating and fine_cancel, applied to magnitudes drawn as for
// every other distribution (the same raw byte per element, so the same data as ever): alternating
// makes A's odd elements negative and B's elements 2 and 3 of every four, fine_cancel sets its two
// pair blocks of every row. Row by row over whole bytes: E2M1 data has an even k (every shape is
// checked or drawn so before its data are).
void place_codes(ValueDist dist, int64_t k, bool tensor_b, std::vector<uint8_t>& out) {
  if (k % 2 != 0) throw std::logic_error("E2M1 data drawn for an odd k = " + std::to_string(k));
  const int64_t kb = (k + 15) / 16, row_bytes = k / 2, rows = static_cast<int64_t>(out.size()) / row_bytes;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = out.data() + r * row_bytes;
    if (dist == ValueDist::alternating) {
      if (!tensor_b) {
        for (int64_t q = 0; q < row_bytes; ++q) row[q] = negate_nonzero(row[q], 0x80);
      } else {
        for (int64_t q = 1; q < row_bytes; q += 2) row[q] = negate_nonzero(row[q], 0x88);
      }
      continue;
    }
    if (kb < 2) continue;
    // The pair: elements 0 and 1 of the block, A +0.5 and -0.5 (codes 1 and 9), B 6 and 6 (codes
    // 7); the rest of the block 0.
    for (const int64_t block : {kb / 2, kb - 1}) {
      const int64_t first = 16 * block, last = std::min(k, first + 16);  // elements [first, last)
      row[first / 2] = tensor_b ? 0x77 : 0x91;
      std::fill(row + first / 2 + 1, row + last / 2, uint8_t{0});
    }
  }
}

// E2M1 codes of `count` elements drawn as raw bytes (one each), packed two to a byte into out as
// the pieces arrive. one_sign's codes are drawn positive: its sign is drawn after the data, so the
// caller sets it then (set_signs gives what the negative code of the same raw byte is).
void draw_codes(Draws& d, size_t count, ValueDist dist, int64_t k, bool tensor_b, std::vector<uint8_t>& out) {
  out.assign(count / 2, 0);
  // As e2m1_code_from_raw with the element's place at 0 and positive, written out so that the
  // packing loop vectorizes (drawing data was a third of a medium case's time in `run`).
  switch (dist) {
    case ValueDist::uniform:
      pack_codes(d, count, out, [](uint8_t raw) { return static_cast<uint8_t>(raw & 15u); });
      break;
    case ValueDist::edge: {
      uint8_t lut[256];
      for (int r = 0; r < 256; ++r) lut[r] = e2m1_code_from_raw(dist, static_cast<uint8_t>(r), 0, tensor_b, false);
      pack_codes(d, count, out, [&lut](uint8_t raw) { return lut[raw]; });
      break;
    }
    case ValueDist::sparse:
      pack_codes(d, count, out, [](uint8_t raw) { return static_cast<uint8_t>(raw >= 224 ? (raw - 224) & 15u : 0u); });
      break;
    case ValueDist::one_sign:
    case ValueDist::alternating:
      pack_codes(d, count, out, [](uint8_t raw) { return static_cast<uint8_t>(raw & 7u); });
      break;
    case ValueDist::fine_cancel:
      pack_codes(d, count, out, [](uint8_t raw) { return static_cast<uint8_t>(raw & 3u); });
      break;
  }
  if (dist == ValueDist::alternating || dist == ValueDist::fine_cancel) place_codes(dist, k, tensor_b, out);
}

// `count` scale bytes of dist, one raw byte each, mapped as they are drawn.
void draw_scales(Draws& d, size_t count, ScaleDist dist, std::vector<uint8_t>& out) {
  uint8_t lut[256];
  for (int r = 0; r < 256; ++r) lut[r] = scale_from_raw(dist, static_cast<uint8_t>(r));
  out.resize(count);
  uint8_t* to = out.data();
  d.bytes_to(count, [&](const uint8_t* raw, size_t size) {
    for (size_t i = 0; i < size; ++i) *to++ = lut[raw[i]];
  });
}

void set_signs(std::vector<uint8_t>& packed, bool negative);

}  // namespace

// ---------------------------------------------------------------------------------------------
// DataSpec

std::string case_shape_error(const Shape& s) {
  Problem p;
  set_shape(p, s);
  if (std::string error = shape_error(p); !error.empty()) return error;
  // The same limit as a case file's: what the tensors need in both scale layouts, and C.
  const double bytes = double(p.a_bytes()) + double(p.b_bytes()) + 2.0 * (double(p.sfa_bytes()) + double(p.sfb_bytes())) +
                       2.0 * double(p.c_elems());
  if (bytes > double(kMaxCaseBytes))
    return fmt::format("its tensors would need {:.3g} GiB, more than the suite's limit of {} GiB per case",
                       bytes / double(int64_t(1) << 30), kMaxCaseBytes >> 30);
  return "";
}

std::vector<Op> declared_ops(const nvfp4_kernel_info& info, std::optional<Op> only) {
  std::vector<Op> ops;
  // A kernel is handed only the ops of its ABI version (SPEC section 5), whatever its ops bits
  // say: a version-1 kernel GEMV and GEMM.
  for (const OpModule& module : op_modules()) {
    const Op op = module.op;
    if (module.info().abi_version > info.abi_version) continue;
    if (((info.ops >> static_cast<uint32_t>(op)) & 1u) && (!only || *only == op)) ops.push_back(op);
  }
  return ops;
}

std::vector<Op> declared_gemv_gemm_ops(const nvfp4_kernel_info& info) {
  std::vector<Op> ops = declared_ops(info);
  ops.erase(std::remove_if(ops.begin(), ops.end(), [](Op op) { return op != Op::gemv && op != Op::gemm; }), ops.end());
  return ops;
}

std::vector<OutType> declared_out_type_list(const nvfp4_kernel_info& info) {
  std::vector<OutType> types;
  for (OutType t : {OutType::fp16, OutType::bf16, OutType::fp32, OutType::nvfp4})
    if ((declared_out_types(info) >> static_cast<uint32_t>(t)) & 1u) types.push_back(t);
  return types;
}

ScaleSemantics declared_semantics(const nvfp4_kernel_info& info) {
  return (info.flags & NVFP4_FLAG_SIGNED_SCALES) ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
}

void set_shape(Problem& p, const Shape& s) {
  p.op = s.op;
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.l = s.l;
}

std::string DataSpec::name() const {
  return std::string(kValueNames[static_cast<int>(values)]) + "/" +
         kScaleNames[static_cast<int>(scales)] + "/" + kAlphaNames[static_cast<int>(alpha)];
}

DataSpec DataSpec::parse(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t slash = name.find('/', start);
    parts.push_back(name.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (parts.size() != 3) {
    throw std::invalid_argument("generator '" + name +
                                "' must be VALUES/SCALES/ALPHA, e.g. uniform/narrow/one");
  }
  DataSpec s;
  s.values = parse_enum<ValueDist>(kValueNames, parts[0], "value");
  s.scales = parse_enum<ScaleDist>(kScaleNames, parts[1], "scale");
  s.alpha = parse_enum<AlphaDist>(kAlphaNames, parts[2], "alpha");
  return s;
}

const std::vector<DataSpec>& DataSpec::all() {
  static const std::vector<DataSpec> every = [] {
    std::vector<DataSpec> v;
    for (int a = 0; a < 6; ++a) {
      for (int b = 0; b < 8; ++b) {
        for (int c = 0; c < 3; ++c) {
          v.push_back({static_cast<ValueDist>(a), static_cast<ScaleDist>(b), static_cast<AlphaDist>(c)});
        }
      }
    }
    return v;
  }();
  return every;
}

// ---------------------------------------------------------------------------------------------
// Raw draws

uint64_t RngDraws::below(uint64_t bound) {
  if (bound <= 1) return 0;
  // Rejection sampling: accept x below the largest multiple of bound, so x % bound is uniform.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  uint64_t x = rng_();
  while (x >= limit) x = rng_();
  return x % bound;
}

void Draws::bytes_to(std::size_t count, const Take& take) {
  const std::vector<uint8_t> all = bytes(count);
  take(all.data(), all.size());
}

// Each 64-bit draw gives 8 bytes, low byte first; the last draw's unused bytes are dropped.
void RngDraws::fill(uint8_t* out, std::size_t count) {
  uint64_t words[512];
  while (count >= 8) {
    const std::size_t n = std::min<std::size_t>(count / 8, 512);
    rng_.fill(words, n);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    std::memcpy(out, words, 8 * n);  // a word's bytes are in memory low byte first already
#else
    for (std::size_t w = 0; w < n; ++w)
      for (int j = 0; j < 8; ++j) out[8 * w + j] = static_cast<uint8_t>(words[w] >> (8 * j));
#endif
    out += 8 * n;
    count -= 8 * n;
  }
  if (count > 0)
    for (uint64_t x = rng_(); count > 0; --count, x >>= 8) *out++ = static_cast<uint8_t>(x);
}

std::vector<uint8_t> RngDraws::bytes(std::size_t count) {
  std::vector<uint8_t> out(count);
  fill(out.data(), count);
  return out;
}

void RngDraws::bytes_to(std::size_t count, const Take& take) {
  // Whole draws per piece (a multiple of 8 bytes), so the pieces are the bytes of one bytes(count).
  constexpr size_t kPiece = 4096;
  uint8_t piece[kPiece];
  for (size_t done = 0; done < count;) {
    const size_t size = std::min(kPiece, count - done);
    fill(piece, size);
    take(piece, size);
    done += size;
  }
}

ByteDraws::ByteDraws(const uint8_t* data, std::size_t size)
    : data_(data), size_(size), rest_(fnv1a(std::string(reinterpret_cast<const char*>(data), size))),
      rest_draws_(rest_) {}

uint64_t ByteDraws::below(uint64_t bound) {
  if (bound <= 1) return 0;
  if (at_ >= size_) return rest_draws_.below(bound);
  uint64_t x = 0;
  int shift = 0;
  for (uint64_t span = bound - 1; span > 0 && at_ < size_; span >>= 8, shift += 8) x |= uint64_t(data_[at_++]) << shift;
  return x % bound;
}

std::vector<uint8_t> ByteDraws::bytes(std::size_t count) {
  const std::size_t own = std::min(count, size_ - std::min(at_, size_));
  std::vector<uint8_t> out(data_ + at_, data_ + at_ + own);
  at_ += own;
  if (own < count) {
    const std::vector<uint8_t> rest = rest_draws_.bytes(count - own);
    out.insert(out.end(), rest.begin(), rest.end());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Per-distribution maps

uint8_t e2m1_code_from_raw(ValueDist dist, uint8_t raw, int64_t x, bool tensor_b, bool negative) {
  switch (dist) {
    case ValueDist::uniform:
      return raw & 15u;
    case ValueDist::edge: {
      // Three in four from +-0, +-0.5, +-6 (codes 0/8, 1/9, 7/15); the rest from the others.
      static const uint8_t kEdge[16] = {0, 1, 7, 8, 9, 15, 0, 1, 7, 8, 9, 15, 2, 11, 5, 14};
      return kEdge[raw & 15u];
    }
    case ValueDist::sparse:
      // One element in eight drawn from all 16 codes, the rest zero.
      return raw >= 224 ? static_cast<uint8_t>((raw - 224) & 15u) : 0;
    case ValueDist::one_sign: {
      const uint8_t magnitude = raw & 7u;
      return magnitude && negative ? static_cast<uint8_t>(magnitude | 8u) : magnitude;
    }
    case ValueDist::fine_cancel:
      return raw & 3u;  // 0, 0.5, 1, 1.5 (the pair blocks are set by the caller)
    case ValueDist::alternating: {
      // A alternates every element, B every two: products then alternate in pairs, so sums
      // cancel (same signs in A and B would make every product positive).
      const uint8_t magnitude = raw & 7u;
      const bool minus = tensor_b ? ((x >> 1) & 1) : (x & 1);
      return magnitude && minus ? static_cast<uint8_t>(magnitude | 8u) : magnitude;
    }
  }
  return 0;
}

uint8_t scale_from_raw(ScaleDist dist, uint8_t raw) {
  switch (dist) {
    case ScaleDist::narrow:
    case ScaleDist::nan_block:
      return narrow_scale(raw);
    case ScaleDist::full:
      return static_cast<uint8_t>((0x38 + raw) % 0x7F);  // every positive non-NaN byte 0x00..0x7E
    case ScaleDist::subnormal:
      return static_cast<uint8_t>(1 + raw % 7);  // 0x01..0x07: m * 2^-9, zero excluded
    case ScaleDist::near_max:
      return static_cast<uint8_t>(0x7E - raw % 15);  // 0x70..0x7E: 128..448
    case ScaleDist::sign_bit:
      // Half the scales carry the sign bit (raw 0 does: the point of this distribution).
      return static_cast<uint8_t>(narrow_scale(raw) | ((raw & 16u) ? 0u : 0x80u));
    case ScaleDist::zero:
      return (raw & 1u) ? 0x80 : 0x00;  // +0 and -0
    case ScaleDist::fine_cancel:
      return static_cast<uint8_t>(1 + raw % 7);  // subnormal (the pair blocks are set by draw_data)
  }
  return 0x38;
}

float alpha_from_raw(AlphaDist dist, uint32_t raw) {
  switch (dist) {
    case AlphaDist::one:
      return 1.0f;
    case AlphaDist::pow2: {
      // +-2^e, e in [-6, 6]; raw 0 gives e = 0.
      const int e = static_cast<int>((raw % 13 + 6) % 13) - 6;
      return ((raw >> 8) & 1u) ? -std::ldexp(1.0f, e) : std::ldexp(1.0f, e);
    }
    case AlphaDist::arbitrary: {
      // +-(1 + f) * 2^e with a uniform 23-bit fraction f and e in [-16, 16]; raw 0 gives 1.
      const float significand = 1.0f + static_cast<float>(raw & 0x7FFFFFu) * 0x1p-23f;
      const int e = static_cast<int>(((raw >> 23) % 33 + 16) % 33) - 16;
      const float a = std::ldexp(significand, e);
      return (raw >> 31) ? -a : a;
    }
  }
  return 1.0f;
}

int e4m3_doubled(uint8_t byte) {
  const uint8_t sign = byte & 0x80u, mag = byte & 0x7Fu;
  if (mag == 0x7F) return -1;  // NaN
  if (mag == 0) return byte;
  const int e = mag >> 3, m = mag & 7;
  if (e == 0) {
    // m * 2^-9 doubled: 2m < 8 stays subnormal; otherwise (8 + (2m - 8)) * 2^(1 - 10), e = 1.
    return sign | (2 * m < 8 ? 2 * m : (1 << 3 | (2 * m - 8)));
  }
  if (e == 15 || (e == 14 && m == 7)) return -1;  // 2x > 448, or would be the NaN pattern
  return sign | ((e + 1) << 3 | m);
}

// ---------------------------------------------------------------------------------------------
// Shapes

const std::vector<int64_t>& tile_edge_dims() {
  static const std::vector<int64_t> edges = {1,  2,  3,   15,  16,  17,  31,  32,  33,
                                             63, 64, 65,  127, 128, 129, 255, 256, 257};
  return edges;
}

bool on_tile_edge(const Shape& s) {
  const auto& e = tile_edge_dims();
  auto edge = [&](int64_t v) { return v != 1 && std::find(e.begin(), e.end(), v) != e.end(); };
  return edge(s.m) || (!op_n_is_one(s.op) && edge(s.n)) || s.k % 64 != 0;
}

Shape draw_shape(Draws& d, Op op, const nvfp4_kernel_info& info, const ShapeLimits& limits) {
  // Draw order k, l, m, n: RapidCheck shrinks draws in order and redraws the data after each
  // accepted shrink, so k (which every output depends on) shrinks first while many rows still
  // carry the failure, and m and n shrink last, when a single row usually still fails.
  Shape s;
  s.op = op;
  s.k = draw_k(d, std::max<int64_t>(2, limits.max_k), k_multiple_of(info));
  // Batches 1-9, one in three a single batch; raw 0 gives 1.
  const int64_t l = static_cast<int64_t>(d.below(12));
  s.l = std::clamp<int64_t>(l < 4 ? 1 : l - 2, 1, std::max<int64_t>(1, limits.max_l));
  s.m = draw_dim(d, std::max<int64_t>(1, limits.max_m), dim_multiple(info.m_multiple));
  const int64_t n = draw_dim(d, std::max<int64_t>(1, limits.max_n), dim_multiple(info.n_multiple));
  s.n = op_n_is_one(op) ? 1 : n;
  fit_limits(s, info, limits);
  return s;
}

Shape draw_unsupported_shape(Draws& d, Op op, const nvfp4_kernel_info& info,
                             const ShapeLimits& limits) {
  Shape s = draw_shape(d, op, info, limits);
  // Which declared multiples can be broken: n not for GEMV (its n is 1 by definition), k
  // only when the multiple is more than the evenness every k has anyway.
  std::vector<char> dims;
  if (dim_multiple(info.m_multiple) > 1) dims.push_back('m');
  if (!op_n_is_one(op) && dim_multiple(info.n_multiple) > 1) dims.push_back('n');
  if (info.k_multiple > 2 || (info.k_multiple > 1 && info.k_multiple % 2 == 1)) dims.push_back('k');
  const uint64_t which = d.below(std::max<size_t>(1, dims.size()));
  const uint64_t quotient = d.below(4), offset_raw = d.below(uint64_t(1) << 30);
  if (dims.empty()) {
    s.m = 0;  // nothing the kernel declares can be violated
    return s;
  }
  auto break_multiple = [&](int64_t multiple) {
    // q * multiple + r with r in [1, multiple - 1]: never a multiple, never zero.
    return static_cast<int64_t>(quotient) * multiple + 1 + static_cast<int64_t>(offset_raw % (multiple - 1));
  };
  switch (dims[which]) {
    case 'm': s.m = break_multiple(info.m_multiple); break;
    case 'n': s.n = break_multiple(info.n_multiple); break;
    default: {
      // Even k that is not a multiple: 2 * (q * multiple + r) works for odd multiples; for even
      // ones keep the offset even and below the multiple.
      const int64_t km = info.k_multiple;
      int64_t k = static_cast<int64_t>(quotient) * std::lcm<int64_t>(2, km);
      if (km % 2 == 0) {
        k += 2 + 2 * static_cast<int64_t>(offset_raw % ((km - 2) / 2));
      } else {
        k += 2 * (1 + static_cast<int64_t>(offset_raw % (km - 1)));
      }
      s.k = k;
      break;
    }
  }
  return s;
}

Shape generate_shape(Rng& rng, Op op, const nvfp4_kernel_info& info, const ShapeLimits& limits) {
  RngDraws d(rng);
  return draw_shape(d, op, info, limits);
}

Shape generate_unsupported_shape(Rng& rng, Op op, const nvfp4_kernel_info& info,
                                 const ShapeLimits& limits) {
  RngDraws d(rng);
  return draw_unsupported_shape(d, op, info, limits);
}

namespace {

// m_g of a grouped problem: an expert with no tokens, one or two, a 128-row tile and its
// neighbours, two tiles and theirs, or a uniform count; raw 0 gives one row.
int64_t draw_group_m(Draws& d, int64_t max_m, int64_t multiple) {
  static const int64_t kEdges[] = {1, 0, 2, 127, 128, 129, 255, 256, 257};
  const uint64_t kUniformSlots = 4;
  const uint64_t category = d.below(9 + kUniformSlots);
  const int64_t uniform = 1 + static_cast<int64_t>(d.below(static_cast<uint64_t>(max_m)));
  const int64_t v = category < 9 ? kEdges[category] : uniform;
  return v == 0 ? 0 : fit_multiple(v, multiple, std::max(max_m, multiple));  // 0 is a multiple of anything
}

}  // namespace

void fit_group_limits(std::vector<Group>& groups, const nvfp4_kernel_info& info, const ShapeLimits& lim) {
  const bool packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  const int64_t mm = dim_multiple(info.m_multiple), nm = dim_multiple(info.n_multiple), km = k_multiple_of(info);
  // The measures of ShapeLimits over all groups: outputs, products, elements of the A's and of
  // the B's (a packed B keeps the slot of an empty group too).
  enum Measure { outputs, products, a_elements, b_elements };
  auto contribution = [&](const Group& g, Measure m) -> int64_t {
    switch (m) {
      case outputs: return g.m * g.n;
      case products: return g.m * g.n * g.k;
      case a_elements: return g.m * g.k;
      case b_elements: return packed || g.m > 0 ? g.n * g.k : 0;
    }
    return 0;
  };
  const int64_t caps[] = {lim.max_outputs, lim.max_products, lim.max_elements, lim.max_elements};
  // Which dimensions each measure grows with (m, n, k).
  static const bool kDims[4][3] = {{true, true, false}, {true, true, true}, {true, false, true}, {false, true, true}};
  while (true) {
    int over = -1;
    for (int m = 0; m < 4 && over < 0; ++m) {
      int64_t total = 0;
      for (const Group& g : groups) total += contribution(g, static_cast<Measure>(m));
      if (total > caps[m]) over = m;
    }
    if (over < 0) return;
    // The largest contributor that can still shrink, in its largest dimension relative to the
    // multiple it must keep. Packed groups share n and k: shrinking one shrinks all.
    int64_t best = -1, best_c = -1;
    for (size_t i = 0; i < groups.size(); ++i) {
      const Group& g = groups[i];
      const bool can = (kDims[over][0] && g.m > mm) || (kDims[over][1] && g.n > nm) || (kDims[over][2] && g.k > km);
      const int64_t c = contribution(g, static_cast<Measure>(over));
      if (can && c > best_c) best = static_cast<int64_t>(i), best_c = c;
    }
    if (best < 0) return;  // every group at its minimum: the multiples exceed the limits
    Group& g = groups[static_cast<size_t>(best)];
    const double rm = kDims[over][0] && g.m > mm ? double(g.m) / double(mm) : 0.0;
    const double rn = kDims[over][1] && g.n > nm ? double(g.n) / double(nm) : 0.0;
    const double rk = kDims[over][2] && g.k > km ? double(g.k) / double(km) : 0.0;
    if (rm >= rn && rm >= rk) {
      g.m = fit_multiple(g.m / 2, mm, g.m);
    } else if (rn >= rk) {
      const int64_t n = fit_multiple(g.n / 2, nm, g.n);
      if (packed) for (Group& q : groups) q.n = n;
      else g.n = n;
    } else {
      const int64_t k = fit_multiple(g.k / 2, km, g.k);
      if (packed) for (Group& q : groups) q.k = k;
      else g.k = k;
    }
  }
}

std::vector<Group> draw_grouped_shape(Draws& d, const nvfp4_kernel_info& info, const ShapeLimits& limits) {
  const bool packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  const int64_t mm = dim_multiple(info.m_multiple), nm = dim_multiple(info.n_multiple), km = k_multiple_of(info);
  const int64_t max_m = std::max<int64_t>(1, limits.max_m), max_n = std::max<int64_t>(1, limits.max_n);
  const int64_t max_k = std::max<int64_t>(2, limits.max_k);
  // G: 1-8 eleven times in sixteen, 9-64 four, 65-256 once (a layer of many experts); raw 0 is
  // one group. Never more than the kernel's max_groups.
  const uint64_t count_class = d.below(16);
  const int64_t r = static_cast<int64_t>(d.below(uint64_t(1) << 30));
  int64_t count = count_class < 11 ? 1 + r % 8 : count_class < 15 ? 9 + r % 56 : 65 + r % 192;
  if (info.max_groups > 0) count = std::min<int64_t>(count, info.max_groups);
  // Empty experts on top of the m_g = 0 edge: none forced half the time, else one group in four,
  // two in four, or (one case in sixteen) every group: a call with no tokens at all.
  const uint64_t empty_class = d.below(16);
  const uint64_t empty_in_4 = empty_class < 8 ? 0 : empty_class < 12 ? 1 : empty_class < 15 ? 2 : 4;
  // Packed: one k and one n for all groups, drawn first (k first, as in draw_shape).
  const int64_t shared_k = packed ? draw_k(d, max_k, km) : 2;
  const int64_t shared_n = packed ? draw_dim(d, max_n, nm) : 1;
  std::vector<Group> groups(static_cast<size_t>(count));
  for (Group& g : groups) {
    const bool empty = d.below(4) < empty_in_4;
    const int64_t m = draw_group_m(d, max_m, mm);
    g.m = empty ? 0 : m;
    g.k = packed ? shared_k : draw_k(d, max_k, km);
    g.n = packed ? shared_n : draw_dim(d, max_n, nm);
  }
  fit_group_limits(groups, info, limits);
  return groups;
}

void set_groups(Problem& p, std::vector<Group> groups, const nvfp4_kernel_info& info) {
  p.op = Op::grouped_gemm;
  p.groups = std::move(groups);
  p.packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  // The problem-level shape is unused by a grouped problem; kept at its defaults.
  p.m = p.n = p.l = 1;
  p.k = 2;
}

// ---------------------------------------------------------------------------------------------
// Data

DataSpec draw_spec(Draws& d) {
  DataSpec s;
  s.values = static_cast<ValueDist>(d.below(6));
  // Scales: narrow 9 in 16 (the exact regime, where every bug shows), the others 1 in 16 each,
  // full twice.
  const uint64_t sc = d.below(17);
  static const ScaleDist kScaleAfterNarrow[8] = {ScaleDist::full,      ScaleDist::subnormal,
                                                 ScaleDist::near_max,  ScaleDist::sign_bit,
                                                 ScaleDist::nan_block, ScaleDist::zero,
                                                 ScaleDist::full,      ScaleDist::fine_cancel};
  s.scales = sc < 9 ? ScaleDist::narrow : kScaleAfterNarrow[sc - 9];
  // alpha: 1 five in eight, a power of two two in eight, arbitrary one in eight.
  const uint64_t al = d.below(8);
  s.alpha = al < 5 ? AlphaDist::one : al < 7 ? AlphaDist::pow2 : AlphaDist::arbitrary;
  return s;
}

namespace {

// Every byte scale_from_raw gives for dist, in the order of the raw bytes that first give it,
// and each byte's index in that list (-1 when dist never gives it).
struct ScaleValues {
  std::vector<uint8_t> list;
  int index[256];
};

const ScaleValues& scale_values(ScaleDist dist) {
  static const std::vector<ScaleValues> all = [] {
    std::vector<ScaleValues> v(8);
    for (int dist = 0; dist < 8; ++dist) {
      ScaleValues& sv = v[static_cast<size_t>(dist)];
      std::fill(std::begin(sv.index), std::end(sv.index), -1);
      for (int raw = 0; raw < 256; ++raw) {
        const uint8_t byte = scale_from_raw(static_cast<ScaleDist>(dist), static_cast<uint8_t>(raw));
        if (sv.index[byte] < 0) {
          sv.index[byte] = static_cast<int>(sv.list.size());
          sv.list.push_back(byte);
        }
      }
    }
    return v;
  }();
  return all[static_cast<size_t>(dist)];
}

// The scales of earlier groups, and for each ring of values that one group's counter steps
// through (make_distinct) how many of them are known to be seen, so that a ring need not be
// stepped round to find it full or to find its next unseen value.
struct DistinctScales {
  struct Ring {
    uint64_t marked = 0;           // values of the ring known to be in `seen`
    std::vector<uint32_t> values;  // a small ring's values inserted, in order
    std::vector<uint32_t> next;    // a small ring once half full: the next value not marked (union-find)
  };
  std::set<std::vector<uint8_t>> seen;
  // Keyed by the ring's key (make_distinct) run-length encoded, (digit, count) pairs: a
  // bijection, so the same rings, and a key of thousands of equal digits compares in a step,
  // not thousands.
  std::map<std::vector<std::pair<uint16_t, uint32_t>>, Ring> rings;
};

void add_run(std::vector<std::pair<uint16_t, uint32_t>>& runs, uint16_t digit) {
  if (!runs.empty() && runs.back().first == digit) ++runs.back().second;
  else runs.emplace_back(digit, 1u);
}

// The first value at or after x (cyclically) that `next` has not marked; compresses the path.
uint32_t first_unmarked(std::vector<uint32_t>& next, uint32_t x) {
  uint32_t root = x;
  while (next[root] != root) root = next[root];
  while (next[x] != root) {
    const uint32_t after = next[x];
    next[x] = root;
    x = after;
  }
  return root;
}

// Makes one group's scales differ from every earlier group's (`seen`, which it joins), so that a
// kernel reading another expert's scales changes some output: steps the scales like a counter
// whose digits are the distribution's values (fine_cancel's fixed pair blocks left alone), to
// the first value not seen. A distribution with fewer combinations than groups gives up after
// |seen| + 1 steps. What the steps come to is the same however it is found: a full ring is
// known by its count, and a small ring half full or more finds its next unseen value through a
// union-find, so many small groups take near-linear time and every seed draws what it always did.
void make_distinct(std::vector<uint8_t>& scales, ScaleDist dist, int64_t kb, DistinctScales& state) {
  std::set<std::vector<uint8_t>>& seen = state.seen;
  const ScaleValues& sv = scale_values(dist);
  std::vector<size_t> free;
  free.reserve(scales.size());
  // The ring: kb and every byte the counter leaves alone (a stepped digit reads 256), run-length
  // encoded (DistinctScales::rings).
  std::vector<std::pair<uint16_t, uint32_t>> key;
  for (size_t i = 0; i < scales.size(); ++i) {
    const bool fixed = dist == ScaleDist::fine_cancel && fine_cancel_pair_block(static_cast<int64_t>(i) % kb, kb);
    const bool stepped = !fixed && sv.index[scales[i]] >= 0;
    if (stepped) free.push_back(i);
    add_run(key, stepped ? uint16_t{256} : uint16_t{scales[i]});
  }
  add_run(key, static_cast<uint16_t>(std::min<int64_t>(kb, 0xFFFF)));
  if (free.empty()) {
    seen.insert(scales);
    return;
  }
  // The ring's size, |values|^|free| (0: more than any number of groups could fill).
  const uint64_t base = sv.list.size();
  uint64_t size = 1;
  for (size_t x = 0; x < free.size() && size != 0; ++x) size = size > (uint64_t(1) << 40) / base ? 0 : size * base;
  constexpr uint64_t kIndexed = uint64_t(1) << 20;  // rings up to this size get a union-find
  DistinctScales::Ring& ring = state.rings[key];
  // The counter as a number (digits little-endian in free's order), when size != 0.
  const auto value = [&] {
    uint64_t x = 0;
    for (size_t f = free.size(); f-- > 0;) x = x * base + static_cast<uint64_t>(sv.index[scales[free[f]]]);
    return x;
  };
  const auto set_value = [&](uint64_t x) {
    for (const size_t i : free) scales[i] = sv.list[x % base], x /= base;
  };
  const auto mark = [&](uint64_t v) {
    ++ring.marked;
    if (!ring.next.empty()) ring.next[v] = static_cast<uint32_t>((v + 1) % size);
  };
  if (size != 0 && ring.marked >= size) {
    // Every step lands on a seen value: stepping would take |seen| + 1 of them.
    set_value((value() + (seen.size() + 1) % size) % size);
  } else if (size != 0 && size <= kIndexed && 2 * ring.marked >= size) {
    if (ring.next.empty()) {
      ring.next.resize(size);
      std::iota(ring.next.begin(), ring.next.end(), 0u);
      for (const uint32_t v : ring.values) ring.next[v] = static_cast<uint32_t>((v + 1) % size);
    }
    const uint64_t x = value();
    set_value(first_unmarked(ring.next, static_cast<uint32_t>(x)));
    // A value seen from a group of another kb is not marked yet: it is now.
    while (seen.count(scales)) {
      mark(value());
      if (ring.marked >= size) {
        set_value((x + (seen.size() + 1) % size) % size);
        break;
      }
      set_value(first_unmarked(ring.next, static_cast<uint32_t>(value())));
    }
  } else {
    for (size_t attempt = 0; attempt <= seen.size() && seen.count(scales); ++attempt) {
      for (const size_t i : free) {
        const size_t next = (static_cast<size_t>(sv.index[scales[i]]) + 1) % sv.list.size();
        scales[i] = sv.list[next];
        if (next != 0) break;  // no carry
      }
    }
  }
  if (!seen.insert(scales).second || size == 0) return;
  const uint64_t v = value();
  mark(v);
  if (size <= kIndexed) ring.values.push_back(static_cast<uint32_t>(v));
}

void set_signs(std::vector<uint8_t>& packed, bool negative) {
  for (uint8_t& byte : packed) {
    uint8_t out = 0;
    for (int shift : {0, 4}) {
      const uint8_t magnitude = (byte >> shift) & 7u;
      out |= static_cast<uint8_t>((magnitude && negative ? magnitude | 8u : magnitude) << shift);
    }
    byte = out;
  }
}

// A grouped problem's data: each non-empty group its own draw_data (own scales, own alpha),
// scales distinct between groups, alphas distinct from the previous group's when not all 1, and
// for nan_block one NaN in one group's used block (a kernel reading the next expert's scales, or
// one group's output from another's, shows it in the wrong group). Empty groups draw an alpha
// only.
void draw_dense_data(Draws& d, const DataSpec& spec, Problem& p, bool edges_allowed);

void draw_grouped_data(Draws& d, const DataSpec& spec, Problem& p) {
  DataSpec each = spec;
  if (each.scales == ScaleDist::nan_block) each.scales = ScaleDist::narrow;
  DistinctScales seen_sfa, seen_sfb;
  std::optional<float> previous_alpha;
  for (Group& g : p.groups) {
    if (g.m == 0) {
      g.a.clear(), g.b.clear(), g.sfa.clear(), g.sfb.clear();
      g.alpha = alpha_from_raw(spec.alpha, static_cast<uint32_t>(d.below(uint64_t(1) << 32)));
      continue;
    }
    Problem one;
    one.op = Op::gemm;
    one.m = g.m, one.n = g.n, one.k = g.k, one.l = 1;
    one.out_type = p.out_type;
    draw_dense_data(d, each, one, false);
    make_distinct(one.sfa, each.scales, g.kb(p.a_format), seen_sfa);
    make_distinct(one.sfb, each.scales, g.kb(p.b_format), seen_sfb);
    g.a = std::move(one.a), g.b = std::move(one.b), g.sfa = std::move(one.sfa), g.sfb = std::move(one.sfb);
    g.alpha = one.alpha;
    if (spec.alpha != AlphaDist::one && previous_alpha && *previous_alpha == g.alpha) g.alpha = -g.alpha;
    previous_alpha = g.alpha;
  }
  int64_t non_empty = 0;
  for (const Group& g : p.groups) non_empty += g.m > 0;
  if (spec.scales != ScaleDist::nan_block || non_empty == 0) return;
  int64_t pick = static_cast<int64_t>(d.below(static_cast<uint64_t>(non_empty)));
  for (Group& g : p.groups) {
    if (g.m == 0 || pick-- != 0) continue;
    const int64_t at = static_cast<int64_t>(d.below(static_cast<uint64_t>(g.sfa_bytes(p.a_format) + g.sfb_bytes(p.b_format))));
    uint8_t& cell = at < g.sfa_bytes(p.a_format) ? g.sfa[static_cast<size_t>(at)] : g.sfb[static_cast<size_t>(at - g.sfa_bytes(p.a_format))];
    cell = (at & 1) ? 0xFF : 0x7F;
    break;
  }
}

// The value of a scale byte (0 for NaN: a bound that ignores NaN blocks, whose outputs are NaN),
// from a table: a dual GEMM's range check reads one per element of A, B and B2, and libm's ldexp
// there was a sixth of drawing a dual case.
double scale_magnitude(uint8_t byte) {
  static const std::array<double, 256> table = [] {
    std::array<double, 256> t{};
    for (int b = 0; b < 256; ++b) {
      const ScaleValue v = e4m3_decode(static_cast<uint8_t>(b), ScaleSemantics::ue4m3);
      t[static_cast<size_t>(b)] = v.nan ? 0.0 : std::ldexp(static_cast<double>(v.sig), v.exp);
    }
    return t;
  }();
  return table[byte];
}

// sum_x A[b][i][x] * SA * B[b][j][x] * SB of one output element, in double (only its binary
// exponent is used); scales linear, as drawn. NaN blocks are left out.
double element_value(const Problem& p, int64_t b, int64_t i, int64_t j) {
  const int64_t kb = p.kb(), row = p.k / 2;
  const uint8_t* a = p.a.data() + (b * p.m + i) * row;
  const uint8_t* bb = p.b.data() + (b * p.n + j) * row;
  double sum = 0;
  for (int64_t x = 0; x < p.k; ++x) {
    const ScaleValue sa = e4m3_decode(p.sfa[static_cast<size_t>((b * p.m + i) * kb + x / 16)], p.semantics);
    const ScaleValue sb = e4m3_decode(p.sfb[static_cast<size_t>((b * p.n + j) * kb + x / 16)], p.semantics);
    if (sa.nan || sb.nan) continue;
    sum += e2m1_twice(e2m1_nibble(a, x)) * e2m1_twice(e2m1_nibble(bb, x)) * 0.25 * sa.sign * sb.sign *
           std::ldexp(static_cast<double>(sa.sig) * sb.sig, sa.exp + sb.exp);
  }
  return sum;
}

// Output-type edges (SPEC section 1) that plain data seldom reaches: alpha becomes the power of two
// that puts one output element at or just past the type's overflow threshold (edge 1: |alpha r|
// in [2^127, 2^128) once in three, else in [2^128, 2^129); the largest |r| of up to 16 elements
// from `at`), or among its subnormals and
// the half of the smallest one that rounds to zero (edge 2: the smallest nonzero |r| of those);
// `exp_raw` picks the binade and the sign. Other outputs of the case lie above and below it.
// Nothing changes when every element looked at is 0.
void move_alpha_to_an_edge(Problem& p, uint64_t edge, uint64_t at, uint64_t exp_raw) {
  const int64_t outputs = p.l * p.m * p.n;
  double chosen = 0;
  for (int64_t tries = 0; tries < std::min<int64_t>(outputs, 16); ++tries) {
    const int64_t e = static_cast<int64_t>((at + static_cast<uint64_t>(tries)) % static_cast<uint64_t>(outputs));
    const double r = std::fabs(element_value(p, e / (p.m * p.n), e / p.n % p.m, e % p.n));
    if (r != 0 && (chosen == 0 || (edge == 1 ? r > chosen : r < chosen))) chosen = r;
  }
  if (chosen == 0) return;
  // BF16's subnormals reach 2^-133 (2^-134 ties to zero), FP32's 2^-149 (2^-150).
  const int lowest = p.out_type == OutType::bf16 ? -134 : -150;
  const int target = edge == 1 ? (exp_raw % 3 == 0 ? 127 : 128)
                               : -127 - static_cast<int>(exp_raw % static_cast<uint64_t>(-127 - lowest + 1));
  const int alpha_exp = std::clamp(target - std::ilogb(chosen), -149, 127);
  p.alpha = std::ldexp((exp_raw >> 8) & 1u ? -1.0f : 1.0f, alpha_exp);
}

// |2v| of both E2M1 values of a byte, summed and the larger.
struct PairMagnitudes {
  uint8_t sum[256], most[256];
  PairMagnitudes() {
    for (int byte = 0; byte < 256; ++byte) {
      const int lo = std::abs(e2m1_twice(static_cast<uint8_t>(byte & 0xF)));
      const int hi = std::abs(e2m1_twice(static_cast<uint8_t>(byte >> 4)));
      sum[byte] = static_cast<uint8_t>(lo + hi);
      most[byte] = static_cast<uint8_t>(std::max(lo, hi));
    }
  }
};
const PairMagnitudes kPairMagnitudes;

// |G| and |U| of a dual GEMM kept below 2^120 (SPEC section 3, rule 6: an FP32 epilogue's G and U
// must be finite): bounded by the largest row sum of |a*sa| times the largest |b*sb|, each alpha
// moved down by powers of two until that bound times it is below 2^120. Taken a block at a time:
// every |a*sa| is a multiple of 2^-10 below 2^12, so a row's sum is exact in double (for any k
// below 2^31) in whatever order it is added, and a block's |2a| summed as an integer, times half
// its scale, is that block's exact share (an element at a time, this was nine tenths of drawing a
// dual case).
void keep_dual_in_fp32_range(Problem& p) {
  const int64_t kb = p.kb(), rows_a = p.l * p.m, row = p.k / 2;
  // Block s of a row: its bytes [8s, min(8s + 8, row)), its scale at s.
  const auto blocks = [&](const uint8_t* bytes, const uint8_t* scales, auto&& each) {
    for (int64_t s = 0; s < kb; ++s) {
      const uint8_t* at = bytes + s * 8;
      const int64_t count = std::min<int64_t>(8, row - s * 8);
      each(at, count, 0.5 * scale_magnitude(scales[s]));
    }
  };
  double a_max = 0;
  for (int64_t r = 0; r < rows_a; ++r) {
    double sum = 0;
    blocks(p.a.data() + r * row, p.sfa.data() + r * kb, [&](const uint8_t* at, int64_t count, double half_scale) {
      int block = 0;
      for (int64_t q = 0; q < count; ++q) block += kPairMagnitudes.sum[at[q]];
      sum += block * half_scale;
    });
    a_max = std::max(a_max, sum);
  }
  auto b_max = [&](const std::vector<uint8_t>& b, const std::vector<uint8_t>& sfb) {
    double most = 0;
    for (int64_t r = 0; r < p.l * p.n; ++r)
      blocks(b.data() + r * row, sfb.data() + r * kb, [&](const uint8_t* at, int64_t count, double half_scale) {
        int block = 0;
        for (int64_t q = 0; q < count; ++q) block = std::max<int>(block, kPairMagnitudes.most[at[q]]);
        most = std::max(most, block * half_scale);
      });
    return most;
  };
  auto fit = [](float& alpha, double bound) {
    const double top = std::fabs(static_cast<double>(alpha)) * bound;
    if (top >= 0x1p120) alpha = std::ldexp(alpha, -(std::ilogb(top) - 118));
  };
  fit(p.alpha, a_max * b_max(p.b, p.sfb));
  fit(p.alpha2, a_max * b_max(p.b2, p.sfb2));
}

}  // namespace

void draw_data(Draws& d, const DataSpec& spec, Problem& p) {
  if (p.mx_operands()) {
    draw_mx_data(d, spec, p);
    return;
  }
  if (op_is_grouped(p.op)) {
    draw_grouped_data(d, spec, p);
    return;
  }
  draw_dense_data(d, spec, p, true);
}

namespace {

// GEMV, GEMM and dual GEMM data, and one group's of a grouped GEMM (`edges` false there: a group's
// alpha stays as drawn, so that the draws of the groups after it do not move).
void draw_dense_data(Draws& d, const DataSpec& spec, Problem& p, bool edges_allowed) {
  const bool dual = op_is_dual(p.op);
  // The draws of GEMV and GEMM come first and in their old order; a dual problem's extra draws
  // (B2, SFB2, B2's sign, alpha2, silu's region) come with a bound of 1 otherwise, which draws
  // nothing, so a seed means the same GEMV or GEMM case as before dual GEMM existed.
  // Raw bytes of A, B, SFA, SFB, B2 and SFB2 (one per element or scale), each mapped as drawn.
  draw_codes(d, static_cast<size_t>(e2m1_elements(p.m, p.k, p.l)), spec.values, p.k, false, p.a);
  draw_codes(d, static_cast<size_t>(e2m1_elements(p.n, p.k, p.l)), spec.values, p.k, true, p.b);
  draw_scales(d, static_cast<size_t>(p.sfa_bytes()), spec.scales, p.sfa);
  draw_scales(d, static_cast<size_t>(p.sfb_bytes()), spec.scales, p.sfb);
  if (dual) draw_codes(d, static_cast<size_t>(e2m1_elements(p.n, p.k, p.l)), spec.values, p.k, true, p.b2);
  draw_scales(d, static_cast<size_t>(p.sfb2_bytes()), spec.scales, p.sfb2);
  const uint64_t signs = d.below(4);  // one_sign: bit 0 negates A, bit 1 negates B
  const uint64_t sign_b2 = d.below(dual ? 2 : 1);
  const uint64_t nan_at = d.below(static_cast<uint64_t>(p.sfa_bytes() + p.sfb_bytes() + p.sfb2_bytes()));
  const uint32_t alpha_raw = static_cast<uint32_t>(d.below(uint64_t(1) << 32));
  const uint32_t alpha2_raw = static_cast<uint32_t>(d.below(dual ? uint64_t(1) << 32 : 1));
  const uint64_t gate = d.below(dual ? 8 : 1);
  // BF16 and FP32 reach far past FP16's range: an arbitrary alpha is sometimes moved to the
  // bottom of theirs (subnormal outputs, alpha itself an FP32 subnormal at the extreme) or near
  // their top (overflow to Inf). FP16 problems draw nothing here.
  const bool wide = p.out_type != OutType::fp16 && spec.alpha == AlphaDist::arbitrary;
  const uint64_t range = d.below(wide ? 4 : 1), range_exp = d.below(wide ? 30 : 1);
  // BF16 and FP32 GEMV/GEMM outputs at their overflow threshold and among their subnormals, each
  // in two of five cases with a drawn alpha (pow2 or arbitrary: a case file's generator then
  // names it, so its seed reproduces it; move_alpha_to_an_edge). Drawn last: every FP16 case, and
  // every BF16/FP32 case that draws no edge, is what it was before.
  const bool edges = edges_allowed && !dual && p.out_type != OutType::fp16 && spec.alpha != AlphaDist::one;
  const uint64_t edge_class = d.below(edges ? 5 : 1);
  const uint64_t edge = edge_class == 0 ? 0 : edge_class <= 2 ? 1 : 2;
  const uint64_t edge_at = d.below(edge != 0 ? uint64_t(1) << 32 : 1);
  const uint64_t edge_exp = d.below(edge != 0 ? uint64_t(1) << 9 : 1);

  if (spec.values == ValueDist::one_sign) {  // drawn positive (draw_codes)
    if (signs & 1u) set_signs(p.a, true);
    if (signs & 2u) set_signs(p.b, true);
    if (sign_b2 != 0) set_signs(p.b2, true);
  }
  if (spec.scales == ScaleDist::fine_cancel) {
    const int64_t kb = p.kb();
    for (size_t i = 0; i < p.sfa.size(); ++i)
      if (fine_cancel_pair_block(static_cast<int64_t>(i) % kb, kb)) p.sfa[i] = 0x01;  // 2^-9
    for (auto* sfb : {&p.sfb, &p.sfb2})
      for (size_t i = 0; i < sfb->size(); ++i)
        if (fine_cancel_pair_block(static_cast<int64_t>(i) % kb, kb)) (*sfb)[i] = 0x6B;  // 88
  }
  // Dual GEMM: half the time G is pushed into one of silu's regions that plain data meets only
  // by chance: below -87 (an FP32 1 + exp(-G) overflows past -88.72: silu must not give NaN or
  // lose U's sign), large positive (silu(G) = G to the last bit), or near 0 (silu(G) ~ G/2).
  // All of G's products <= 0 or >= 0 make |G| grow with k; B's scales at 2^-9 make it small.
  // fine_cancel's pair structure is left alone. Raw 0 leaves G as drawn.
  if (dual && spec.values != ValueDist::fine_cancel && spec.scales != ScaleDist::fine_cancel) {
    if (gate == 1 || gate == 2 || gate == 3) {
      set_signs(p.a, false);
      set_signs(p.b, gate != 3);  // 1, 2: G <= 0; 3: G >= 0
    } else if (gate == 4) {
      std::fill(p.sfb.begin(), p.sfb.end(), uint8_t{0x01});
    }
  }
  if (spec.scales == ScaleDist::nan_block) {
    // Every scale of the linear layout is used by some output (n, m >= 1), so any position is a
    // used block. Both NaN encodings occur (0x7F and 0xFF), chosen by the position's parity.
    const int64_t at = static_cast<int64_t>(nan_at);
    uint8_t& cell = at < p.sfa_bytes()                    ? p.sfa[at]
                    : at < p.sfa_bytes() + p.sfb_bytes() ? p.sfb[at - p.sfa_bytes()]
                                                          : p.sfb2[at - p.sfa_bytes() - p.sfb_bytes()];
    cell = (at & 1) ? 0xFF : 0x7F;
  }
  p.alpha = alpha_from_raw(spec.alpha, alpha_raw);
  if (dual) p.alpha2 = alpha_from_raw(spec.alpha, alpha2_raw);
  // |alpha| < 2^17 from alpha_from_raw: 2^-(100..129) and 2^(80..109) keep it finite and non-zero.
  if (range == 1) p.alpha = std::ldexp(p.alpha, -100 - static_cast<int>(range_exp));
  if (range == 2) p.alpha = std::ldexp(p.alpha, 80 + static_cast<int>(range_exp));
  if (edge == 1 || edge == 2) move_alpha_to_an_edge(p, edge, edge_at, edge_exp);
  if (dual) keep_dual_in_fp32_range(p);
}

}  // namespace

void fill_data(Rng& rng, const DataSpec& spec, Problem& p) {
  RngDraws d(rng);
  draw_data(d, spec, p);
}

Problem generate_problem(Rng& rng, Op op, const nvfp4_kernel_info& info, const DataSpec& spec,
                         const ShapeLimits& limits) {
  RngDraws d(rng);
  const Shape s = draw_shape(d, op, info, limits);
  Problem p;
  set_shape(p, s);
  const bool linear = (info.sf_layouts >> NVFP4_SF_LINEAR) & 1u;
  const bool permuted = (info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u;
  const uint64_t layout_draw = d.below(2);
  p.sf_layout = linear && permuted ? (layout_draw ? SfLayout::linear : SfLayout::permuted)
                : linear           ? SfLayout::linear
                                   : SfLayout::permuted;
  p.semantics = declared_semantics(info);
  draw_data(d, spec, p);
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) p.alpha = 1.0f;  // the kernel declares alpha = 1 only
  return p;
}

void expand_seeded_case(Problem& p) {
  const bool grouped = op_is_grouped(p.op);
  bool all_empty = grouped;
  for (const Group& g : p.groups) all_empty = all_empty && g.m == 0;
  // Explicit data always wins. A grouped case whose every group is empty has all its data, but
  // its seed still names the groups' alphas.
  if (p.has_data() && !(all_empty && p.seed)) return;
  if (!p.seed) {
    throw std::invalid_argument(op_quantizes(p.op) ? "the case gives neither explicit data (x) nor a seed"
                                                      : "the case gives neither explicit data (a, b, sfa, sfb) nor a seed");
  }
  const std::string shape = shape_error(p);
  if (!shape.empty()) throw std::invalid_argument(shape);
  op_module(p.op).expand_seed(p);
}

void gemm_family::expand_seed(Problem& p) {
  const bool grouped = op_is_grouped(p.op);
  const DataSpec spec = p.generator.empty() ? DataSpec{} : DataSpec::parse(p.generator);
  // The draw reads the shape alone (op, m, n, k, l, the groups' m, n, k), never the case's data:
  // the expansion is a pure function of seed, generator and shape.
  Problem drawn = p;
  clear_expect(drawn);
  drawn.a.clear(), drawn.b.clear(), drawn.sfa.clear(), drawn.sfb.clear(), drawn.b2.clear(), drawn.sfb2.clear();
  for (Group& g : drawn.groups) g.a.clear(), g.b.clear(), g.sfa.clear(), g.sfb.clear();
  Rng rng(*p.seed);
  fill_data(rng, spec, drawn);
  // Keep each tensor the case gives with the right length; draw the others.
  bool all_drawn = true;
  auto keep_or_take = [&all_drawn](std::vector<uint8_t>& mine, std::vector<uint8_t>& drawn_bytes, int64_t want) {
    if (static_cast<int64_t>(mine.size()) != want) {
      mine = std::move(drawn_bytes);
    } else {
      all_drawn = false;
    }
  };
  if (grouped) {
    for (size_t i = 0; i < p.groups.size(); ++i) {
      Group &g = p.groups[i], &dg = drawn.groups[i];
      if (g.m > 0) {  // an empty group has no tensors to keep or take
        keep_or_take(g.a, dg.a, g.a_bytes(p.a_format));
        keep_or_take(g.b, dg.b, g.b_bytes(p.b_format));
        keep_or_take(g.sfa, dg.sfa, g.sfa_bytes(p.a_format));
        keep_or_take(g.sfb, dg.sfb, g.sfb_bytes(p.b_format));
      }
      if (spec.alpha != AlphaDist::one) g.alpha = dg.alpha;
    }
    p.data_from_seed = all_drawn;
    return;
  }
  keep_or_take(p.a, drawn.a, p.a_bytes());
  keep_or_take(p.b, drawn.b, p.b_bytes());
  keep_or_take(p.sfa, drawn.sfa, p.sfa_bytes());
  keep_or_take(p.sfb, drawn.sfb, p.sfb_bytes());
  if (op_is_dual(p.op)) {
    keep_or_take(p.b2, drawn.b2, p.b2_bytes());
    keep_or_take(p.sfb2, drawn.sfb2, p.sfb2_bytes());
  }
  p.data_from_seed = all_drawn;
  if (spec.alpha != AlphaDist::one) {
    p.alpha = drawn.alpha;
    if (op_is_dual(p.op)) p.alpha2 = drawn.alpha2;
  }
}

}  // namespace nvfp4
