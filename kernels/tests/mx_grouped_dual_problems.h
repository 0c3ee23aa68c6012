// Grouped and dual GEMM problems with block-format operands of any pair of SPEC's four formats for
// the kernels' unit tests (host core and CUDA kernels alike), and their buffers as the ABI takes
// them: ragged groups with an empty one, k not a multiple of 32 (odd where both operands are
// MXFP8), E8M0 exponents distinct along every row of blocks and between groups, permuted padding
// holding NaN scales. The words a kernel wrote are judged by the exact reference and SPEC's
// oracle (rules 5, 6 and 9). Test-only.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "kernels/nvfp4_kernel_abi.h"
#include "kernels/tests/mx_problems.h"
#include "reference/exact_gemm.h"
#include "reference/oracle.h"

namespace nvfp4 {

// A k both operands can take: even where one packs E2M1 nibbles, else odd.
inline int64_t mx_test_k(BlockFormat fa, BlockFormat fb, int64_t k) {
  const bool nibbles = packs_nibbles(fa) || packs_nibbles(fb);
  return nibbles ? k + k % 2 : k | 1;
}

// A grouped problem (groups of m 5, 0, 130, 3; n and k per group, or one n and k when packed).
inline Problem mx_grouped_problem(std::mt19937_64& rng, BlockFormat fa, BlockFormat fb, OutType out, SfLayout layout,
                                  bool packed) {
  Problem p;
  p.op = Op::grouped_gemm;
  p.a_format = fa, p.b_format = fb;
  p.out_type = out;
  p.sf_layout = layout;
  p.packed = packed;
  const int64_t ms[] = {5, 0, 130, 3}, ns[] = {3, 2, 17, 1}, ks[] = {34, 64, 96, 40};
  const float alphas[] = {1.0f, 2.0f, 0.5f, -0.75f};
  int salt = 0;
  for (int g = 0; g < 4; ++g) {
    Group q;
    q.m = ms[g];
    q.n = packed ? 6 : ns[g];
    q.k = mx_test_k(fa, fb, packed ? 72 : ks[g]);
    q.alpha = alphas[g];
    salt += 13;
    if (q.m > 0) {
      MxOperand a, b;
      fill_operand(a, fa, q.m, q.k, 1, rng, salt);
      fill_operand(b, fb, q.n, q.k, 1, rng, salt + 5);
      q.a = a.data, q.sfa = a.scales, q.b = b.data, q.sfb = b.scales;
    }
    p.groups.push_back(q);
  }
  return p;
}

// A dual problem: B2 of B's format, alpha 0.5 and alpha2 -1.5; E8M0 exponents within 2^-20..2^20,
// far below the 2^120 where rule 6 stops bounding G and U.
inline Problem mx_dual_problem(std::mt19937_64& rng, BlockFormat fa, BlockFormat fb, OutType out, SfLayout layout) {
  Problem p;
  p.op = Op::dual_gemm;
  p.a_format = fa, p.b_format = fb;
  p.out_type = out;
  p.sf_layout = layout;
  p.m = 33, p.n = 7, p.l = 2, p.k = mx_test_k(fa, fb, 72);
  p.alpha = 0.5f, p.alpha2 = -1.5f;
  MxOperand a, b, b2;
  fill_operand(a, fa, p.m, p.k, p.l, rng, 0);
  fill_operand(b, fb, p.n, p.k, p.l, rng, 11);
  fill_operand(b2, fb, p.n, p.k, p.l, rng, 23);
  p.a = a.data, p.sfa = a.scales, p.b = b.data, p.sfb = b.scales, p.b2 = b2.data, p.sfb2 = b2.scales;
  return p;
}

// The buffers of one call of p: `place` puts a buffer where the kernel reads it (host memory, or
// a device copy) and returns that address; the group table lives in `groups` (host memory; a CUDA
// kernel's device copy is the caller's). `outputs` lists the buffers holding C, in group order.
struct MxCallBuffers {
  std::vector<std::vector<uint8_t>> bufs;  // every buffer; `outputs` index into it
  std::vector<size_t> outputs;
  std::vector<nvfp4_group> groups;
  nvfp4_problem abi{};
};

inline void lay_out_mx_call(const Problem& p, MxCallBuffers& call, const std::function<uint8_t*(std::vector<uint8_t>&)>& place) {
  const bool permuted = p.sf_layout == SfLayout::permuted;
  const int64_t word = out_word_bytes(p.out_type);
  call.bufs.reserve(64);  // stable addresses: `place` may keep pointers into them
  const auto add = [&call, &place](std::vector<uint8_t> v) {
    call.bufs.push_back(std::move(v));
    return place(call.bufs.back());
  };
  const auto scales = [&](const std::vector<uint8_t>& linear, int64_t rows, BlockFormat f, int64_t k, int64_t l) {
    if (!permuted || rows == 0) return linear;
    return sf_to_permuted(linear.data(), rows, operand_kb(f, k), l, 0xFF);  // E4M3 and E8M0 NaN
  };
  nvfp4_problem& abi = call.abi;
  abi.op = static_cast<uint32_t>(p.op);
  abi.sf_layout = static_cast<uint32_t>(p.sf_layout);
  abi.out_type = static_cast<uint32_t>(p.out_type);
  abi.a_format = static_cast<uint32_t>(p.a_format), abi.b_format = static_cast<uint32_t>(p.b_format);
  abi.alpha = p.alpha, abi.alpha2 = p.op == Op::dual_gemm ? p.alpha2 : 1.0f;
  if (p.op != Op::grouped_gemm) {
    abi.m = p.m, abi.n = p.n, abi.k = p.k, abi.l = p.l;
    abi.a = add(p.a), abi.b = add(p.b);
    abi.sfa = add(scales(p.sfa, p.m, p.a_format, p.k, p.l)), abi.sfb = add(scales(p.sfb, p.n, p.b_format, p.k, p.l));
    if (p.op == Op::dual_gemm) abi.b2 = add(p.b2), abi.sfb2 = add(scales(p.sfb2, p.n, p.b_format, p.k, p.l));
    call.outputs.push_back(call.bufs.size());
    abi.c = reinterpret_cast<uint16_t*>(add(std::vector<uint8_t>(static_cast<size_t>(p.c_elems() * word), 0xA5)));
    return;
  }
  abi.l = 1, abi.alpha = 1.0f;
  abi.groups = static_cast<int64_t>(p.groups.size());
  for (const Group& q : p.groups) abi.m += q.m, abi.n = std::max(abi.n, q.n), abi.k = std::max(abi.k, q.k);
  call.groups.assign(p.groups.size(), nvfp4_group{});
  if (p.packed) {
    const PackedLayout L = packed_layout(p);
    PackedData d = pack_groups(p, 0xFF);
    abi.a = add(d.a), abi.b = add(d.b);
    abi.sfa = add(permuted ? d.sfa_permuted : d.sfa_linear), abi.sfb = add(permuted ? d.sfb_permuted : d.sfb_linear);
    call.outputs.push_back(call.bufs.size());
    abi.c = reinterpret_cast<uint16_t*>(add(std::vector<uint8_t>(static_cast<size_t>(L.c_elems() * word), 0xA5)));
    // The table points into the packed buffers at each group's offsets, as the harness's does.
    for (size_t g = 0; g < p.groups.size(); ++g) {
      const Group& q = p.groups[g];
      const int64_t sfa0 = permuted ? L.sfa_permuted_offset(g) : L.sfa_linear_offset(g);
      const int64_t sfb0 = permuted ? L.sfb_permuted_offset(g) : L.sfb_linear_offset(g);
      call.groups[g] = {q.m,           q.n,           q.k,
                        abi.a + L.a_offset(g), abi.b + L.b_offset(g), abi.sfa + sfa0,
                        abi.sfb + sfb0, reinterpret_cast<uint8_t*>(abi.c) + L.c_offset(g) * word, q.alpha};
    }
  } else {
    for (size_t g = 0; g < p.groups.size(); ++g) {
      const Group& q = p.groups[g];
      nvfp4_group& t = call.groups[g];
      t.m = q.m, t.n = q.n, t.k = q.k, t.alpha = q.alpha;
      if (q.m == 0) continue;
      t.a = add(q.a), t.b = add(q.b);
      t.sfa = add(scales(q.sfa, q.m, p.a_format, q.k, 1)), t.sfb = add(scales(q.sfb, q.n, p.b_format, q.k, 1));
      call.outputs.push_back(call.bufs.size());
      t.c = add(std::vector<uint8_t>(static_cast<size_t>(q.c_elems() * word), 0xA5));
    }
  }
  abi.group = call.groups.data();
}

// C's words from the output buffers (read back into call.bufs), groups one after another.
inline std::vector<uint32_t> mx_call_words(const Problem& p, const MxCallBuffers& call) {
  const int64_t word = out_word_bytes(p.out_type);
  std::vector<uint32_t> words;
  for (const size_t b : call.outputs) {
    const std::vector<uint8_t>& c = call.bufs[b];
    for (size_t e = 0; e + static_cast<size_t>(word) <= c.size(); e += static_cast<size_t>(word)) {
      uint32_t w = 0;
      for (int64_t y = 0; y < word; ++y) w |= uint32_t{c[e + static_cast<size_t>(y)]} << (8 * y);
      words.push_back(w);
    }
  }
  return words;
}

}  // namespace nvfp4
