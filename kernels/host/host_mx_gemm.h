// The host MX engine for GEMV, GEMM, grouped and dual GEMM (SPEC.md section 1's block formats:
// NVFP4, MXFP4, MXFP8 E4M3 and E5M2, A and B each its own): elements and scales decoded from their bit fields, each product
// a*sa*b*sb formed in double (exact: at most 8 significant bits, exponents within +-300), summed
// in double block by block in k order (FP32 could not hold a block sum of E8M0 2^127 scales, whose
// cancellation to an ordinary number a correct kernel must still get), alpha and one rounding at
// the end to the output type. Kernels know only the ABI, so this is the kernels' own copy of the formats.
// `MxBug` plants one bug at a time for the mutants (mutation/mutants); MxBug::none is the
// built-in kernels' arithmetic.
#pragma once

#include <stdint.h>

#include <string.h>

#include <cmath>
#include <vector>

#include "kernels/block_scaled_decode.h"
#include "kernels/mx_bug.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern::mx {

// The ABI's operand format, 0 (a problem of an older version) being NVFP4.
inline uint32_t operand_format(uint32_t f) { return f == 0 ? uint32_t{NVFP4_FORMAT_NVFP4} : f; }
inline bool byte_elements(uint32_t f) { return f == NVFP4_FORMAT_MXFP8_E4M3 || f == NVFP4_FORMAT_MXFP8_E5M2; }
inline int64_t block_of(uint32_t f, MxBug bug) {
  return f == NVFP4_FORMAT_NVFP4 || bug == MxBug::block32_as_16 ? 16 : 32;
}
inline int64_t row_bytes(uint32_t f, int64_t k, MxBug bug) {
  return byte_elements(f) && bug != MxBug::mxfp8_as_nibbles ? k : k / 2;
}

// E8M0: 2^(e - 127) for e = 0..254 (0x00 is 2^-127, a float subnormal), 0xFF NaN.
inline double e8m0_to_double(uint32_t e, MxBug bug) {
  if (e == 0xFF) return bug == MxBug::nan_scale_ignored ? 1.0 : NAN;
  if (e == 0 && bug == MxBug::e8m0_zero_as_zero) return 0.0;
  // 2^(e - bias), -127..128: a normal double, built from its exponent field (ldexp was a tenth of
  // a grouped MX call's decoding).
  const uint64_t bits = static_cast<uint64_t>(static_cast<int>(e) - (bug == MxBug::e8m0_bias_126 ? 126 : 127) + 1023) << 52;
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

// E5M2 `s eeeee mm`, bias 15: field 0 subnormal m * 2^-16, field 31 Inf (m = 0) or NaN.
inline double e5m2_to_double(uint32_t byte) {
  const uint32_t e = (byte >> 2) & 31u, m = byte & 3u;
  const double sign = (byte & 0x80u) ? -1.0 : 1.0;
  if (e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), -16);
  return sign * std::ldexp(4.0 + m, static_cast<int>(e) - 17);
}

// Element x of a row of format f.
inline double element(uint32_t f, const uint8_t* row, int64_t x, MxBug bug) {
  if (!byte_elements(f) || bug == MxBug::mxfp8_as_nibbles) return e2m1_to_float(e2m1_code(row, x));
  if (f == NVFP4_FORMAT_MXFP8_E4M3 || bug == MxBug::e5m2_as_e4m3) return e4m3_to_float(row[x], true);
  return e5m2_to_double(row[x]);
}

// One operand of the problem: its format, data and scales in the problem's layout.
struct MxOperand {
  uint32_t format;
  const uint8_t *data, *scales;
  int64_t rows;
};

inline double scale(const MxOperand& o, uint32_t layout, int64_t k, int64_t b, int64_t i, int64_t s, MxBug bug) {
  const int64_t block = block_of(o.format, bug), kb = (k + block - 1) / block;
  if (bug == MxBug::neighbour_block_scale && s + 1 < kb) ++s;
  const uint8_t byte = o.scales[scale_offset(layout, o.rows, kb, b, i, s)];
  if (o.format == NVFP4_FORMAT_NVFP4) return e4m3_to_float(byte, false);
  return e8m0_to_double(byte, bug);
}

// C[b][i][j] before alpha, one element at a time straight from the bit fields: block sums (blocks
// of A's format; B's scale looked up per element) in double, accumulated in double. ba and bb:
// the batch of A and of B (a packed grouped call's B and SFB are a batch of G); sbb: the batch
// B's scales are read from (bb unless a bug says). The definition of the engine's arithmetic;
// run_mx computes the same words from rows decoded once (DecodedRows, dot_decoded).
inline double dot(const MxOperand& a, const MxOperand& bo, uint32_t layout, int64_t k, int64_t ba, int64_t bb, int64_t sbb,
                  int64_t i, int64_t j, MxBug bug) {
  const uint8_t* a_row = a.data + (ba * a.rows + i) * row_bytes(a.format, k, bug);
  const uint8_t* b_row = bo.data + (bb * bo.rows + j) * row_bytes(bo.format, k, bug);
  const int64_t block = block_of(a.format, bug), kb = (k + block - 1) / block, b_block = block_of(bo.format, bug);
  double acc = 0.0;
  for (int64_t t = 0; t < kb; ++t) {
    const int64_t s = bug == MxBug::blocks_reversed ? kb - 1 - t : t;
    const double sa = scale(a, layout, k, ba, i, s, bug);
    double sum = 0.0;
    for (int64_t x = s * block; x < k && x < (s + 1) * block; ++x) {
      const double sb = scale(bo, layout, k, sbb, j, x / b_block, bug);
      // Always multiplied: a NaN scale or element, or Inf * 0, gives NaN.
      sum += (element(a.format, a_row, x, bug) * sa) * (element(bo.format, b_row, x, bug) * sb);
    }
    acc += sum;
  }
  return acc;
}
inline double dot(const MxOperand& a, const MxOperand& bo, uint32_t layout, int64_t k, int64_t b, int64_t i, int64_t j,
                  MxBug bug) {
  return dot(a, bo, layout, k, b, b, b, i, j, bug);
}

// ---- rows decoded once ------------------------------------------------------------------------
//
// dot() decodes every element and scale again for each output element (n times for a row of A).
// DecodedRows holds a run of rows decoded once per call: each element as the exact double
// element() gives, each block's scale as scale() gives (bugs included), and for each chunk of 16
// elements (every block is one or two chunks) the facts that tell whether a block's sum is exact
// in double whatever the order of its additions.
constexpr int64_t kChunk = 16;
struct ChunkFacts {
  bool finite = true;  // no NaN or Inf element
  int hi = -100000;    // every |element| < 2^hi (the sentinel: no nonzero element)
  int lo = 100000;     // every element a multiple of 2^lo
};

// Bits of a finite nonzero double, as exponents: v < 2^top and v a multiple of 2^low.
inline void double_exponents(double v, int* top, int* low) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  const int field = static_cast<int>((bits >> 52) & 0x7FF);
  uint64_t mant = bits & ((uint64_t{1} << 52) - 1);
  if (field != 0) mant |= uint64_t{1} << 52;
  const int e = field == 0 ? -1074 : field - 1075;  // v = mant * 2^e
  *low = e + __builtin_ctzll(mant);
  *top = e + 64 - __builtin_clzll(mant);
}

struct DecodedRows {
  int64_t k = 0, kb = 0, chunks = 0, rows = 0;
  std::vector<double> value;       // rows * k
  std::vector<double> scales;      // rows * kb
  std::vector<ChunkFacts> facts;   // rows * chunks

  const double* row(int64_t r) const { return value.data() + r * k; }
  const double* row_scales(int64_t r) const { return scales.data() + r * kb; }
  const ChunkFacts* row_facts(int64_t r) const { return facts.data() + r * chunks; }
};

// Every code of an element of format f (16 for E2M1 nibbles, 256 for bytes) as element() decodes
// it, with the facts ChunkFacts keeps: a row is then decoded by lookup.
struct CodeTable {
  bool nibbles = false;
  double value[256];
  bool finite[256], nonzero[256];
  int top[256], low[256];
  CodeTable(uint32_t f, MxBug bug) : nibbles(!byte_elements(f) || bug == MxBug::mxfp8_as_nibbles) {
    for (int c = 0; c < (nibbles ? 16 : 256); ++c) {
      const uint8_t byte = static_cast<uint8_t>(nibbles ? c | c << 4 : c);  // element 0 of a one-byte row
      const double v = element(f, &byte, 0, bug);
      value[c] = v;
      finite[c] = std::isfinite(v);
      nonzero[c] = finite[c] && v != 0.0;
      top[c] = low[c] = 0;
      if (nonzero[c]) double_exponents(v, &top[c], &low[c]);
    }
  }
};

// Every nonzero finite element of the table lies below 2^top and is a multiple of 2^low; the most
// top - low over them (0 where no code is nonzero).
inline int element_span(const CodeTable& t) {
  int top = -100000, low = 100000;
  for (int c = 0; c < (t.nibbles ? 16 : 256); ++c)
    if (t.nonzero[c]) {
      top = t.top[c] > top ? t.top[c] : top;
      low = t.low[c] < low ? t.low[c] : low;
    }
  return top < low ? 0 : top - low;
}

// Rows [r0, r0 + count) of operand o: data of batch data_batch, scales of batch scale_batch.
// exponents false: only the chunks' finite flags are kept (hi and lo stay at their sentinels), for
// formats whose spans fit (formats_fit).
inline void decode_rows(const MxOperand& o, uint32_t layout, int64_t k, int64_t data_batch, int64_t scale_batch,
                        int64_t r0, int64_t count, MxBug bug, bool parallel, DecodedRows& d, bool exponents = true) {
  const int64_t block = block_of(o.format, bug);
  d.k = k, d.kb = (k + block - 1) / block, d.chunks = (k + kChunk - 1) / kChunk, d.rows = count;
  d.value.resize(static_cast<size_t>(count * k));
  d.scales.resize(static_cast<size_t>(count * d.kb));
  d.facts.assign(static_cast<size_t>(count * d.chunks), ChunkFacts{});
  const int64_t bytes = row_bytes(o.format, k, bug);
  const CodeTable codes(o.format, bug);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < count; ++r) {
    const uint8_t* data = o.data + (data_batch * o.rows + r0 + r) * bytes;
    double* v = d.value.data() + r * k;
    ChunkFacts* f = d.facts.data() + r * d.chunks;
    for (int64_t x = 0; x < k; ++x) {
      const uint32_t c = codes.nibbles ? e2m1_code(data, x) : data[x];
      v[x] = codes.value[c];
      ChunkFacts& cf = f[x / kChunk];
      if (!codes.finite[c]) {
        cf.finite = false;
      } else if (exponents && codes.nonzero[c]) {
        cf.hi = codes.top[c] > cf.hi ? codes.top[c] : cf.hi;
        cf.lo = codes.low[c] < cf.lo ? codes.low[c] : cf.lo;
      }
    }
    for (int64_t s = 0; s < d.kb; ++s) d.scales[static_cast<size_t>(r * d.kb + s)] = scale(o, layout, k, scale_batch, r0 + r, s, bug);
  }
}

// Elements [x0, x1) of a block of A (scale sa; B's scales looked up per chunk) summed as dot()
// sums them when that sum is exact, or false. Exact: no NaN or Inf among the elements and scales,
// and every product lies in [2^lo, 2^hi) with hi - lo + 5 <= 53 (a block holds at most 32
// products, so every partial sum, in any order, is a multiple of 2^lo below 2^53 * 2^lo). Then
// every addition of dot()'s is exact and so is this one's, each chunk's products summed in four
// independent lanes and times the chunk's sa * sb (at most 8 significant bits). An exact sum of
// zero is +0, as dot()'s (it starts at +0 and RN never makes -0 from it). spans_fit: the formats
// alone bound every block's products within those 53 bits (formats_fit below); only finiteness is
// then left to look at.
inline bool exact_block_sum(const double* a, const ChunkFacts* fa, double sa, const double* b, const ChunkFacts* fb,
                            const double* sbs, int b_shift, int64_t x0, int64_t x1, double* out, bool spans_fit = false) {
  if (!std::isfinite(sa)) return false;
  int hi = -100000, lo = 100000;
  for (int64_t c0 = x0; c0 < x1; c0 += kChunk) {
    const ChunkFacts &ca = fa[c0 / kChunk], &cb = fb[c0 / kChunk];
    const double s = sa * sbs[c0 >> b_shift];
    if (!ca.finite || !cb.finite || !std::isfinite(s)) return false;
    if (spans_fit || s == 0.0 || ca.hi < -90000 || cb.hi < -90000) continue;  // no bound to find, or every product zero
    int s_top, s_low;
    double_exponents(s, &s_top, &s_low);
    hi = ca.hi + cb.hi + s_top > hi ? ca.hi + cb.hi + s_top : hi;
    lo = ca.lo + cb.lo + s_low < lo ? ca.lo + cb.lo + s_low : lo;
  }
  if (hi > -90000 && hi - lo + 5 > 53) return false;
  double sum = 0.0;
  for (int64_t c0 = x0; c0 < x1; c0 += kChunk) {
    const int64_t c1 = c0 + kChunk < x1 ? c0 + kChunk : x1;
    double lane[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t x = c0;
    for (; x + 4 <= c1; x += 4)
      for (int q = 0; q < 4; ++q) lane[q] += a[x + q] * b[x + q];
    for (; x < c1; ++x) lane[0] += a[x] * b[x];
    sum += ((lane[0] + lane[1]) + (lane[2] + lane[3])) * (sa * sbs[c0 >> b_shift]);
  }
  *out = sum + 0.0;  // -0 (a zero scale times a negative sum) as +0
  return true;
}

// Whether the formats alone keep every block sum exact (exact_block_sum's bound): A's block lies
// inside one of B's, so a block has one scale product sa * sb (each scale at most 4 significant
// bits: 8), and its elements' spans with those 8 bits and the 5 of 32 terms fit in 53 bits. True
// for NVFP4 and MXFP4 with either, and MXFP8 E4M3 with E4M3 (18 + 18 + 8 + 5 = 49); E5M2 beside
// E4M3 or E5M2 (32 bits of span) is not.
inline bool formats_fit(const MxOperand& a, const MxOperand& b, MxBug bug) {
  if (block_of(a.format, bug) > block_of(b.format, bug)) return false;
  return element_span(CodeTable(a.format, bug)) + element_span(CodeTable(b.format, bug)) + 8 + 5 <= 53;
}

// dot() over decoded rows: row ra of A (its scales and chunk facts) and row rb of B.
inline double dot_decoded(const DecodedRows& a, int64_t ra, const DecodedRows& b, int64_t rb, int64_t k, int64_t block,
                          int b_shift, MxBug bug, bool spans_fit = false) {
  const double *av = a.row(ra), *bv = b.row(rb), *sas = a.row_scales(ra), *sbs = b.row_scales(rb);
  const ChunkFacts *fa = a.row_facts(ra), *fb = b.row_facts(rb);
  const int64_t kb = a.kb;
  double acc = 0.0;
  for (int64_t t = 0; t < kb; ++t) {
    const int64_t s = bug == MxBug::blocks_reversed ? kb - 1 - t : t;
    const double sa = sas[s];
    const int64_t x0 = s * block, x1 = (s + 1) * block < k ? (s + 1) * block : k;
    double sum = 0.0;
    if (!exact_block_sum(av, fa, sa, bv, fb, sbs, b_shift, x0, x1, &sum, spans_fit)) {
      for (int64_t x = x0; x < x1; ++x) sum += (av[x] * sa) * (bv[x] * sbs[x >> b_shift]);
    }
    acc += sum;
  }
  return acc;
}

// Rows per decoded tile: about 2^21 elements (16 MiB of doubles) at a time, at least one row.
inline int64_t tile_rows(int64_t k) { return k >= (int64_t{1} << 21) ? 1 : (int64_t{1} << 21) / k; }

// C[i][j] = alpha * dot for i < m, j < n of one GEMM (a batch, a group, or a dual problem's G and
// U with b2 non-null): A's rows from batch ba, B's data from batch bb and scales from sbb. store
// receives (i, j, G before alpha, U before alpha). rows: rows decoded at a time (0: tile_rows).
template <class Store>
inline void gemm_decoded(const MxOperand& a, const MxOperand& b, const MxOperand* b2, uint32_t layout, int64_t m,
                         int64_t n, int64_t k, int64_t ba, int64_t bb, int64_t sbb, MxBug bug, bool parallel,
                         Store store, int64_t rows = 0) {
  // B's scale of element x is sbs[x >> b_shift]: a block is 16 or 32 elements, and a division
  // by a run-time block size in the dot products' loops was a sixth of this kernel's time.
  const int64_t block = block_of(a.format, bug);
  const int b_shift = __builtin_ctzll(static_cast<uint64_t>(block_of(b.format, bug)));
  if (rows <= 0) rows = tile_rows(k);
  const bool spans_fit = formats_fit(a, b, bug);  // B2 has B's format
  DecodedRows da, db, db2;
  for (int64_t i0 = 0; i0 < m; i0 += rows) {
    const int64_t mi = m - i0 < rows ? m - i0 : rows;
    decode_rows(a, layout, k, ba, ba, i0, mi, bug, parallel, da, !spans_fit);
    for (int64_t j0 = 0; j0 < n; j0 += rows) {
      const int64_t nj = n - j0 < rows ? n - j0 : rows;
      decode_rows(b, layout, k, bb, sbb, j0, nj, bug, parallel, db, !spans_fit);
      if (b2 != nullptr) decode_rows(*b2, layout, k, bb, sbb, j0, nj, bug, parallel, db2, !spans_fit);
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
      for (int64_t i = 0; i < mi; ++i)
        for (int64_t j = 0; j < nj; ++j) {
          const double g = dot_decoded(da, i, db, j, k, block, b_shift, bug, spans_fit);
          const double u = b2 != nullptr ? dot_decoded(da, i, db2, j, k, block, b_shift, bug, spans_fit) : 0.0;
          store(i0 + i, j0 + j, g, u);
        }
    }
  }
}

// Whether p lies inside what info declares for an MX problem of the GEMM family (GEMV, GEMM,
// grouped and dual GEMM): problem_fits' checks with the declared formats, every k >= 1 and even
// where an operand packs E2M1 nibbles.
inline bool mx_problem_fits(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (p == nullptr || p->op < NVFP4_OP_GEMV || p->op > NVFP4_OP_DUAL_GEMM) return false;
  const uint32_t fa = operand_format(p->a_format), fb = operand_format(p->b_format);
  if (fa < NVFP4_FORMAT_NVFP4 || fa > NVFP4_FORMAT_MXFP8_E5M2 || fb < NVFP4_FORMAT_NVFP4 || fb > NVFP4_FORMAT_MXFP8_E5M2)
    return false;
  if (!((info.a_formats >> fa) & 1u) || !((info.b_formats >> fb) & 1u)) return false;
  if (problem_out_type(p) == NVFP4_OUT_NVFP4) return false;  // NVFP4 output quantizes NVFP4 results only
  const bool nibbles = !byte_elements(fa) || !byte_elements(fb);
  const auto k_ok = [nibbles](int64_t k) { return k >= 1 && (!nibbles || k % 2 == 0); };
  // problem_fits checks everything else for an even k (a row of odd k is at most k + 1 bytes).
  nvfp4_problem even = *p;
  even.k += even.k % 2;
  if (p->op != NVFP4_OP_GROUPED_GEMM) return k_ok(p->k) && problem_fits(info, &even);
  if (p->groups < 1 || p->group == nullptr || p->groups > (int64_t{1} << 24)) return false;
  std::vector<nvfp4_group> groups(p->group, p->group + p->groups);
  for (nvfp4_group& q : groups) {
    if (!k_ok(q.k)) return false;
    q.k += q.k % 2;
  }
  even.group = groups.data();
  return problem_fits(info, &even);
}

// The whole GEMV, GEMM or dual GEMM with one bug (none for the built-in kernels). Dual GEMM: G
// and U each in double with its own alpha, then silu(G) * U in FP32 (output_words.h).
inline int run_mx(const nvfp4_kernel_info& info, const nvfp4_problem* p, MxBug bug) {
  if (!mx_problem_fits(info, p) || p->op == NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const MxOperand a{operand_format(p->a_format), p->a, p->sfa, p->m};
  const MxOperand b{operand_format(p->b_format), p->b, p->sfb, p->n};
  const MxOperand b2{operand_format(p->b_format), p->b2, p->sfb2, p->n};
  const int64_t m = p->m, n = p->n, k = p->k, l = p->l;
  const uint32_t out = problem_out_type(p), layout = p->sf_layout;
  const bool dual = p->op == NVFP4_OP_DUAL_GEMM;
  const bool parallel = l * m * n * k >= (int64_t(1) << 18);
  for (int64_t bt = 0; bt < l; ++bt)
    gemm_decoded(a, b, dual ? &b2 : nullptr, layout, m, n, k, bt, bt, bt, bug, parallel,
                 [&](int64_t i, int64_t j, double g_sum, double u_sum) {
                   const int64_t at = (bt * m + i) * n + j;
                   const double g = static_cast<double>(p->alpha) * g_sum;
                   if (!dual) {
                     store_output(p->c, at, out, g);
                   } else {
                     const double u = static_cast<double>(p->alpha2) * u_sum;
                     store_silu_product(p->c, at, out, static_cast<float>(g), static_cast<float>(u));
                   }
                 });
  return NVFP4_OK;
}

// Grouped GEMM, every group an l = 1 GEMM of the problem's formats with its own alpha. Separate
// arrangement: each group's own pointers. Packed (NVFP4_FLAG_GROUPS_PACKED, SPEC section 2): A
// and C rows from M_g = m_0 + ... + m_(g-1) (rows of the format's bytes), B and SFB a batch of G,
// SFA linear rows from M_g or permuted tiles from T_g = ceil(m_0/128) + ... + ceil(m_(g-1)/128),
// with A's kb = ceil(k / block of A's format). MxBug::group0_scales (packed) reads every group's
// scales without its offset, as group 0's.
inline int run_mx_grouped(const nvfp4_kernel_info& info, const nvfp4_problem* p, MxBug bug) {
  if (!mx_problem_fits(info, p) || p->op != NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const uint32_t fa = operand_format(p->a_format), fb = operand_format(p->b_format);
  const uint32_t out = problem_out_type(p), layout = p->sf_layout;
  const bool packed = info.flags & NVFP4_FLAG_GROUPS_PACKED;
  const bool group0 = bug == MxBug::group0_scales;
  int64_t row0 = 0, tile0 = 0;  // M_g and T_g
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    const int64_t m = q.m, n = q.n, k = q.k, kba = (k + block_of(fa, bug) - 1) / block_of(fa, bug);
    MxOperand a{fa, q.a, q.sfa, m}, b{fb, q.b, q.sfb, n};
    int64_t b_batch = 0, c0 = 0;
    void* c = q.c;
    if (packed) {
      const int64_t sfa0 = layout == NVFP4_SF_LINEAR ? row0 * kba : tile0 * ((kba + 3) / 4) * 512;
      a = {fa, p->a + row0 * row_bytes(fa, k, bug), p->sfa + (group0 ? 0 : sfa0), m};
      b = {fb, p->b, p->sfb, n};
      b_batch = g;
      c = p->c;
      c0 = row0 * n;
    }
    row0 += m;
    tile0 += (m + 127) / 128;
    const int64_t sfb_batch = group0 ? 0 : b_batch;  // the bug: SFB's batch 0 (B's data stay group g's)
    gemm_decoded(a, b, nullptr, layout, m, n, k, 0, b_batch, sfb_batch, bug, m * n * k >= (int64_t(1) << 18),
                 [&](int64_t i, int64_t j, double g_sum, double) {
                   store_output(c, c0 + i * n + j, out, static_cast<double>(q.alpha) * g_sum);
                 });
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::kern::mx
