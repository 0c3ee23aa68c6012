// Decoder of the fuzzers' binary problem encoding (the format is described in fuzz_problem.h).
#include "fuzz/fuzz_problem.h"

#include "reference/stable_hash.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "reference/case_file.h"

namespace nvfp4 {
namespace {

// Reads bytes in order; past the end it reads 0 (header) or the filler (data).
class ByteStream {
 public:
  ByteStream(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : (pos_++, 0); }
  uint32_t u16() {
    const uint32_t lo = u8();
    return lo | (uint32_t(u8()) << 8);
  }
  uint32_t u32() {
    const uint32_t lo = u16();
    return lo | (u16() << 16);
  }
  // Data byte at stream position pos_: from the input, else filler(position).
  template <typename Filler>
  uint8_t data_byte(Filler filler) {
    const size_t p = pos_++;
    return p < size_ ? data_[p] : filler(p);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// A fixed mix of the position (murmur3's finalizer): the filler does not depend on the input,
// so a mutation of one byte changes one value only.
uint8_t position_hash(size_t p) {
  uint32_t x = static_cast<uint32_t>(p) * 0x9E3779B1u;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return static_cast<uint8_t>(x);
}

uint8_t filler_code_byte(size_t p) { return position_hash(p); }
// Scales in [0.5, 2): exponent fields 6 and 7, never NaN.
uint8_t filler_scale_byte(size_t p) { return static_cast<uint8_t>(0x30 | (position_hash(p) & 0x0F)); }

uint8_t map_scale(uint8_t byte, int mode) {
  switch (mode) {
    case 1: return static_cast<uint8_t>((byte & 0x8F) | 0x30);
    case 2: return (byte & 0x7F) == 0x7F ? static_cast<uint8_t>(byte ^ 0x01) : byte;
    case 3: return static_cast<uint8_t>(byte & 0x87);
    default: return byte;
  }
}

int64_t round_up(int64_t v, int64_t multiple) {
  return multiple > 1 ? (v + multiple - 1) / multiple * multiple : v;
}

bool kernel_has_op(const nvfp4_kernel_info& k, Op op) { return (k.ops >> uint32_t(op)) & 1u; }
bool kernel_has_layout(const nvfp4_kernel_info& k, SfLayout l) {
  return (k.sf_layouts >> uint32_t(l)) & 1u;
}

}  // namespace

bool decode_fuzz_input(const uint8_t* data, size_t size, Problem* out) {
  return decode_fuzz_input(data, size, FuzzDecodeOptions{}, out);
}

bool decode_fuzz_input(const uint8_t* data, size_t size, const FuzzDecodeOptions& options,
                       Problem* out) {
  const FuzzCaps& caps = options.caps;
  const nvfp4_kernel_info* kernel = options.kernel;
  ByteStream in(data, size);
  const uint8_t flags = in.u8();
  const bool keep_unsupported = (flags & 0x08) != 0;
  const bool fit = kernel != nullptr && !keep_unsupported;

  Problem p;
  p.op = (flags & 0x01) ? Op::gemm : Op::gemv;
  p.sf_layout = (flags & 0x02) ? SfLayout::permuted : SfLayout::linear;
  p.semantics = (flags & 0x04) ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
  if (kernel) {
    // The kernel cannot be told the semantics (the ABI has no field for it): its flag decides.
    p.semantics = (kernel->flags & NVFP4_FLAG_SIGNED_SCALES) ? ScaleSemantics::e4m3
                                                             : ScaleSemantics::ue4m3;
  }
  if (fit && !kernel_has_op(*kernel, p.op)) {
    const Op other = p.op == Op::gemm ? Op::gemv : Op::gemm;
    if (kernel_has_op(*kernel, other)) p.op = other;
  }
  if (fit && !kernel_has_layout(*kernel, p.sf_layout)) {
    const SfLayout other = p.sf_layout == SfLayout::linear ? SfLayout::permuted : SfLayout::linear;
    if (kernel_has_layout(*kernel, other)) p.sf_layout = other;
  }

  p.m = 1 + int64_t(in.u16()) % caps.max_m;
  p.n = 1 + int64_t(in.u16()) % caps.max_n;
  p.k = 2 * (1 + int64_t(in.u16()) % (caps.max_k / 2));
  p.l = 1 + int64_t(in.u8()) % caps.max_l;
  if (p.op == Op::gemv) p.n = 1;
  if (fit) {
    p.m = round_up(p.m, kernel->m_multiple);
    if (p.op == Op::gemm) p.n = round_up(p.n, kernel->n_multiple);
    p.k = round_up(p.k, std::lcm<int64_t>(2, std::max<int64_t>(1, kernel->k_multiple)));
  }

  switch ((flags >> 4) & 3) {
    case 0: p.alpha = 1.0f; break;
    case 1: p.alpha = std::ldexp(1.0f, static_cast<int8_t>(in.u8())); break;
    case 2: {
      const uint32_t bits = in.u32();
      float a;
      std::memcpy(&a, &bits, sizeof a);
      p.alpha = std::isfinite(a) ? a : 1.0f;
      break;
    }
    default: p.alpha = -1.0f; break;
  }
  if (fit && (kernel->flags & NVFP4_FLAG_UNIT_ALPHA)) p.alpha = 1.0f;

  // Cap before allocating anything: see FuzzCaps::max_products.
  if (p.l * p.m * p.n * p.k > caps.max_products) return false;
  if (!shape_error(p).empty()) return false;

  const int scale_mode = flags >> 6;
  auto fill_codes = [&](std::vector<uint8_t>& v, int64_t bytes) {
    v.resize(static_cast<size_t>(bytes));
    for (auto& byte : v) byte = in.data_byte(filler_code_byte);
  };
  auto fill_scales = [&](std::vector<uint8_t>& v, int64_t bytes) {
    v.resize(static_cast<size_t>(bytes));
    for (auto& byte : v) byte = map_scale(in.data_byte(filler_scale_byte), scale_mode);
  };
  fill_codes(p.a, p.a_bytes());
  fill_codes(p.b, p.b_bytes());
  fill_scales(p.sfa, p.sfa_bytes());
  fill_scales(p.sfb, p.sfb_bytes());
  *out = std::move(p);
  return true;
}

std::vector<uint8_t> encode_fuzz_input(const Problem& p) {
  std::vector<uint8_t> bytes;
  uint8_t flags = 0;
  if (p.op == Op::gemm) flags |= 0x01;
  if (p.sf_layout == SfLayout::permuted) flags |= 0x02;
  if (p.semantics == ScaleSemantics::e4m3) flags |= 0x04;
  uint32_t alpha_bits;
  std::memcpy(&alpha_bits, &p.alpha, sizeof alpha_bits);
  const bool unit = alpha_bits == 0x3F800000u, minus_unit = alpha_bits == 0xBF800000u;
  flags |= unit ? 0x00 : minus_unit ? 0x30 : 0x20;
  bytes.push_back(flags);
  auto u16 = [&](int64_t v) {
    bytes.push_back(static_cast<uint8_t>(v & 0xFF));
    bytes.push_back(static_cast<uint8_t>((v >> 8) & 0xFF));
  };
  u16(p.m - 1);
  u16(p.op == Op::gemv ? 0 : p.n - 1);
  u16(p.k / 2 - 1);
  bytes.push_back(static_cast<uint8_t>(p.l - 1));
  if (!unit && !minus_unit) {
    for (int s = 0; s < 32; s += 8) bytes.push_back(static_cast<uint8_t>(alpha_bits >> s));
  }
  for (const auto* v : {&p.a, &p.b, &p.sfa, &p.sfb}) bytes.insert(bytes.end(), v->begin(), v->end());
  return bytes;
}

bool looks_like_case_text(const uint8_t* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    const uint8_t c = data[i];
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) return false;
  }
  return true;
}

std::optional<Problem> load_case_or_fuzz_input(const uint8_t* data, size_t size,
                                               const std::string& name,
                                               const nvfp4_kernel_info* kernel) {
  if (looks_like_case_text(data, size)) {
    return parse_case(std::string(reinterpret_cast<const char*>(data), size), name);
  }
  FuzzDecodeOptions options;
  options.kernel = kernel;
  Problem p;
  if (!decode_fuzz_input(data, size, options, &p)) return std::nullopt;
  p.note = "decoded from kernel-fuzzer input " + name;
  return p;
}

std::optional<Problem> decode_fuzz_case(const std::string& bytes, const nvfp4_kernel_info* kernel,
                                        std::string* why) {
  FuzzDecodeOptions options;
  options.kernel = kernel;
  Problem p;
  if (!decode_fuzz_input(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), options, &p)) {
    if (why) {
      *why = "a kernel-fuzzer input whose problem is over the fuzzer's size caps (more than " +
             std::to_string(options.caps.max_products) + " products)";
    }
    return std::nullopt;
  }
  return p;
}

std::string content_hash_hex(const uint8_t* data, size_t size) {
  uint64_t h = fnv1a(std::string_view(reinterpret_cast<const char*>(data), size));
  static const char* kHex = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) s[static_cast<size_t>(i)] = kHex[h & 0xF];
  return s;
}

}  // namespace nvfp4
