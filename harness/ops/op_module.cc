// The list of op modules, one per row of the op table, and the GEMM family's module.
#include "harness/ops/op_module.h"

#include "gpu_reference/exact_gemm_gpu.h"
#include "harness/ops/block_scaled_output.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>

namespace nvfp4 {
namespace {

// GEMV, GEMM, grouped and dual GEMM share their buffers, oracle and stale data.
constexpr OpModule gemm_family_module(Op op) {
  return {op,
          gemm_family::unsupported_reason,
          gemm_family::probes_refusal,
          gemm_family::lay_out,
          gemm_family::point_abi,
          gemm_family::judge,
          gemm_family::unwritten,
          gemm_family::stale_variant,
          gemm_family::shape_text,
          [](const Problem& p) {
            return block_scaled_out::applies(p) ? block_scaled_out::output_words(p) : p.c_elems();
          },
          gemm_family::stale_in_place,
          gemm_family::stale_in_buffers,
          // On the GPU where one is available and the problem is large.
          [](const Problem& p) { return exact_gemm_auto(p); },
          judge_words,
          judge_output,
          gemm_family::draw,
          gemm_family::draw_data,
          gemm_family::expand_seed};
}

std::vector<OpModule> registered_modules() {
  // One per row of the op table, in its order.
  std::vector<OpModule> list = {
#define NVFP4_OP_MODULE_ENTRY(name, value, version, traits, tensors) modules::name,
      NVFP4_OP_TABLE(NVFP4_OP_MODULE_ENTRY)
#undef NVFP4_OP_MODULE_ENTRY
  };
  // A module defined for another op than its row's name says stops every program at its first
  // use of an op (the draws follow the table's order).
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].op != kOpTable[i].op)
      throw std::logic_error(std::string("harness/ops: modules::") + kOpTable[i].name + " is the module of another op");
  return list;
}

}  // namespace

int64_t InputTensor::size() const {
  if (!in_pieces) return static_cast<int64_t>((borrowed ? *borrowed : bytes).size());
  int64_t n = 0;
  for (const Piece& x : pieces) n += x.size;
  return n;
}

void InputTensor::write_to(uint8_t* dst) const {
  if (!in_pieces && borrowed && rotated) {
    copy_rotated(borrowed->data(), *rotated, dst);
    return;
  }
  if (!in_pieces) {
    const std::vector<uint8_t>& v = borrowed ? *borrowed : bytes;
    if (!v.empty()) std::memcpy(dst, v.data(), v.size());
    return;
  }
  for (const Piece& x : pieces) {
    if (x.data)
      std::memcpy(dst, x.data, static_cast<size_t>(x.size));
    else
      std::memset(dst, x.fill, static_cast<size_t>(x.size));
    dst += x.size;
  }
}

namespace {

// Whether was[y] ^ flip == now[y] for every y < size, without a branch a byte.
bool same_flipped(const uint8_t* was, uint8_t flip, const uint8_t* now, int64_t size) {
  uint8_t differ = 0;
  for (int64_t y = 0; y < size; ++y) differ |= static_cast<uint8_t>(was[y] ^ flip ^ now[y]);
  return differ == 0;
}

// Counts the bytes of now[0, size) that differ from was (each XORed with flip), or from `fill`
// where was is null, memcmp first (almost always equal); `at` is the range's offset in the tensor.
void compare_range(const uint8_t* was, uint8_t fill, const uint8_t* now, int64_t size, int64_t at,
                   InputTensor::Difference& d, uint8_t flip = 0) {
  if (size <= 0) return;
  if (was && flip == 0 && std::memcmp(was, now, static_cast<size_t>(size)) == 0) return;
  if (was && flip != 0 && same_flipped(was, flip, now, size)) return;
  if (!was) {
    static constexpr int64_t kChunk = 1 << 16;
    thread_local std::vector<uint8_t> same;
    if (same.size() != static_cast<size_t>(kChunk) || same[0] != fill) same.assign(static_cast<size_t>(kChunk), fill);
    bool equal = true;
    for (int64_t x = 0; x < size && equal; x += kChunk)
      equal = std::memcmp(now + x, same.data(), static_cast<size_t>(std::min(kChunk, size - x))) == 0;
    if (equal) return;
  }
  for (int64_t y = 0; y < size; ++y) {
    const uint8_t w = was ? static_cast<uint8_t>(was[y] ^ flip) : fill;
    if (now[y] != w && d.count++ == 0) d.first = at + y, d.was = w, d.now = now[y];
  }
}

}  // namespace

InputTensor::Difference InputTensor::compare(const uint8_t* now) const {
  Difference d;
  if (!in_pieces && borrowed && rotated) {
    // Run by run, in the order of the moved tensor, so the first difference is the first byte.
    each_rotated_run(*rotated, [&](int64_t to, int64_t from, int64_t count) {
      compare_range(borrowed->data() + from, 0, now + to, count, to, d, rotated->flip);
    });
    return d;
  }
  if (!in_pieces) {
    const std::vector<uint8_t>& v = borrowed ? *borrowed : bytes;
    compare_range(v.data(), 0, now, static_cast<int64_t>(v.size()), 0, d);
    return d;
  }
  int64_t at = 0;
  for (const Piece& x : pieces) {
    compare_range(x.data, x.fill, now + at, x.size, at, d);
    at += x.size;
  }
  return d;
}

// The GEMM family's ops share their module.
const OpModule modules::gemv = gemm_family_module(Op::gemv);
const OpModule modules::gemm = gemm_family_module(Op::gemm);
const OpModule modules::grouped_gemm = gemm_family_module(Op::grouped_gemm);
const OpModule modules::dual_gemm = gemm_family_module(Op::dual_gemm);

const std::vector<OpModule>& op_modules() {
  static const std::vector<OpModule> list = registered_modules();
  return list;
}

const OpModule& op_module(Op op) {
  for (const OpModule& m : op_modules())
    if (m.op == op) return m;
  throw std::invalid_argument("no module for op " + std::to_string(static_cast<uint32_t>(op)));
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpModule& m : op_modules()) names.push_back(m.info().name);
  return names;
}

}  // namespace nvfp4
