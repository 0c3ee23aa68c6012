// The exact reference on the GPU. Products are summed as integers in units of 2^-20, like the CPU
// reference: E2M1 codes become small integers (doubled values, |v| <= 12), each 16-element block
// is an integer dot product (dp4a), times the integer significands of its two scales, shifted
// into a 64-bit fixed-point accumulator. The final rounding is reference/scaled_round.h's, the
// same function the CPU reference uses.
#include "gpu_reference/exact_gemm_gpu.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/formats.h"
#include "reference/scaled_round.h"

namespace nvfp4 {
namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("GPU reference: ") + what + ": " + cudaGetErrorName(err) +
                             " (" + cudaGetErrorString(err) + ")");
  }
}

// Four int8 values' nonzero flags as 4 bits (bytes 0..3 -> bits 0..3): the multiply gathers the
// low bit of each byte into bits 24..27, and no two partial products overlap.
__device__ __forceinline__ uint32_t nonzero_bits4(uint32_t v) {
  return (((__vcmpne4(v, 0u) & 0x01010101u) * 0x01020408u) >> 24) & 0xFu;
}

// One block's scale, ready for the inner loop (uint2):
//  x: the signed integer multiplier sign * sig * 2^(exp + 9), so that a block's dot product of
//     doubled values times x_A times x_B is its exact contribution in units of 2^-20
//     ((a/2)(b/2) sig_a sig_b 2^(ea+eb) = dot * sig_a 2^(ea+9) * sig_b 2^(eb+9) * 2^-20);
//     |x| < 2^18, so dot * x_A fits 32 bits and one 32x32->64 multiply-add finishes the term.
//     0 for a zero or NaN scale (a NaN block contributes nothing to r, S, t, g).
//  y: bits 0-15 the block's nonzero values (cleared when x = 0), bits 16-23 tz(|x|),
//     bit 24 the scale is NaN.
__device__ __forceinline__ uint2 block_scale(uint8_t byte, ScaleSemantics semantics, uint32_t nonzero) {
  const ScaleValue v = e4m3_decode(byte, semantics);
  const int mult = v.nan ? 0 : v.sign * (v.sig << (v.exp + 9));
  const uint32_t tz = mult ? static_cast<uint32_t>(__ffs(mult) - 1) : 0u;
  return make_uint2(static_cast<uint32_t>(mult), (mult ? nonzero : 0u) | (tz << 16) | (v.nan ? 1u << 24 : 0u));
}

__device__ __forceinline__ uint32_t nonzero_bits16(const uint32_t* w) {
  return nonzero_bits4(w[0]) | (nonzero_bits4(w[1]) << 4) | (nonzero_bits4(w[2]) << 8) | (nonzero_bits4(w[3]) << 12);
}

// Doubled E2M1 magnitudes of codes 0..7 as bytes: {0, 1, 2, 3, 4, 6, 8, 12}.
constexpr uint32_t kMagLo = 0x03020100u, kMagHi = 0x0C080604u;

// Four E2M1 codes (the low 16 bits of w, element order) to four signed int8 values in one word:
// prmt looks the magnitudes up, a second prmt turns sign bits into 0xFF byte masks.
__device__ __forceinline__ uint32_t decode4(uint32_t w) {
  const uint32_t mag = __byte_perm(kMagLo, kMagHi, w & 0x7777u);
  const uint32_t neg = __byte_perm(0x0000FF00u, 0u, (w >> 3) & 0x1111u);
  return __vsub4(mag ^ neg, neg);
}

// One thread per (row, block): the block's 16 codes as int8 (zeros past k) and its packed scale.
__global__ void decode_rows(const uint8_t* __restrict__ packed, const uint8_t* __restrict__ sf,
                            int64_t rows, int64_t k, int64_t kb, ScaleSemantics semantics,
                            uint4* __restrict__ vals, uint2* __restrict__ scales) {
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= rows * kb) return;
  const int64_t row = id / kb, s = id % kb;
  const uint8_t* src = packed + row * (k / 2) + s * 8;
  const int64_t nbytes = k / 2 - s * 8 < 8 ? k / 2 - s * 8 : 8;
  uint8_t bytes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < nbytes; ++i) bytes[i] = src[i];
  uint32_t w[4];
  for (int q = 0; q < 4; ++q) w[q] = decode4(bytes[2 * q] | (uint32_t(bytes[2 * q + 1]) << 8));
  vals[id] = make_uint4(w[0], w[1], w[2], w[3]);
  scales[id] = block_scale(sf[id], semantics, nonzero_bits16(w));
}

// Running exact state of one output element (the fields of ExactElement, in 64 bits: enough for
// k <= 2^20, where every partial sum is below 2^63). NaN is the row's or column's, kept apart.
struct Acc {
  long long sum;
  unsigned long long abs_sum;
  int nonzero;
  int min_tz;  // 128: no nonzero product yet
};

__device__ __forceinline__ void acc_init(Acc& a) {
  a.sum = 0;
  a.abs_sum = 0;
  a.nonzero = 0;
  a.min_tz = 128;
}

// Adds one 16-element block to an accumulator: dot = sum a*b and adot = sum |a*b| over doubled
// values, sa/sb the blocks' block_scale(). av/bv are the block's values, read only on the rare
// path that can lower min_tz.
__device__ __forceinline__ void acc_block(Acc& acc, int dot, int adot, uint2 sa, uint2 sb, const uint32_t* av,
                                          const uint32_t* bv) {
  const int ma = static_cast<int>(sa.x), mb = static_cast<int>(sb.x);
  acc.sum += static_cast<long long>(dot * ma) * mb;
  acc.abs_sum += static_cast<unsigned long long>(static_cast<unsigned>(adot * abs(ma))) * static_cast<unsigned>(abs(mb));
  const int cnt = __popc(sa.y & sb.y & 0xFFFFu);  // nonzero products (0 when either scale is 0)
  acc.nonzero += cnt;
  // Every product of this block is a multiple of 2^(tz(ma) + tz(mb)); only when that is below the
  // running minimum can the block lower it, and then the exact minimum needs the products.
  const int base = static_cast<int>(((sa.y >> 16) & 0xFFu) + ((sb.y >> 16) & 0xFFu));
  if (cnt != 0 && base < acc.min_tz) {
    uint32_t bits = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
#pragma unroll
      for (int byte = 0; byte < 4; ++byte) {
        const int x = static_cast<int8_t>(av[w] >> (8 * byte));
        const int y = static_cast<int8_t>(bv[w] >> (8 * byte));
        bits |= static_cast<uint32_t>(abs(x * y));
      }
    }
    acc.min_tz = min(acc.min_tz, __ffs(bits) - 1 + base);
  }
}

__device__ __forceinline__ void acc_store(const Acc& acc, bool nan, float alpha, ExactElement* out, uint16_t* c) {
  ExactElement e;
  e.sum = acc.sum;
  e.abs_sum = acc.abs_sum;
  e.nonzero = acc.nonzero;
  e.min_tz = acc.min_tz;
  e.nan = nan;
  *out = e;
  *c = nan ? uint16_t(0x7E00) : round_scaled_sum(acc.sum, alpha);
}

__device__ __forceinline__ uint32_t abs4(uint32_t v) { return __vabsss4(v); }

// GEMM tile: 64 x 64 outputs per 256-thread block, 4 x 4 per thread (rows ty + 16 r, columns
// tx + 16 c), two scale blocks (32 elements) of A and B staged in shared memory per step.
constexpr int kTile = 64, kStepBlocks = 2, kWords = kStepBlocks * 4, kPad = kWords + 1;

__global__ void __launch_bounds__(256) gemm_exact(const uint4* __restrict__ av, const uint2* __restrict__ as,
                                                  const uint4* __restrict__ bv, const uint2* __restrict__ bs,
                                                  int64_t m, int64_t n, int64_t kb, float alpha,
                                                  ExactElement* __restrict__ out, uint16_t* __restrict__ c) {
  __shared__ uint32_t sa_vals[kTile][kPad], sb_vals[kTile][kPad];
  __shared__ uint2 sa_scale[kTile][kStepBlocks], sb_scale[kTile][kStepBlocks];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t batch = blockIdx.z;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile, col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const uint4* a_rows = av + batch * m * kb;
  const uint4* b_rows = bv + batch * n * kb;
  const uint2* a_sc = as + batch * m * kb;
  const uint2* b_sc = bs + batch * n * kb;

  Acc acc[4][4];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc_init(acc[r][q]);
  uint32_t row_nan = 0, col_nan = 0;  // bit r: a scale of row ty + 16 r is NaN; bit q: of column

  for (int64_t s0 = 0; s0 < kb; s0 += kStepBlocks) {
    // 64 rows x 2 blocks of uint4 for A (threads 0-127) and for B (threads 128-255).
    {
      const int half = threadIdx.x / 128, idx = threadIdx.x % 128;
      const int r = idx / kStepBlocks, blk = idx % kStepBlocks;
      const int64_t s = s0 + blk;
      const int64_t row = (half ? col0 : row0) + r, rows = half ? n : m;
      uint4 v = make_uint4(0, 0, 0, 0);
      uint2 sc = make_uint2(0, 0);
      if (s < kb && row < rows) {
        v = (half ? b_rows : a_rows)[row * kb + s];
        sc = (half ? b_sc : a_sc)[row * kb + s];
      }
      uint32_t(*vals)[kPad] = half ? sb_vals : sa_vals;
      vals[r][blk * 4 + 0] = v.x;
      vals[r][blk * 4 + 1] = v.y;
      vals[r][blk * 4 + 2] = v.z;
      vals[r][blk * 4 + 3] = v.w;
      (half ? sb_scale : sa_scale)[r][blk] = sc;
    }
    __syncthreads();
#pragma unroll
    for (int blk = 0; blk < kStepBlocks; ++blk) {
      uint32_t b[4][4], b_abs[4][4];
      uint2 b_sc4[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        b_sc4[q] = sb_scale[tx + 16 * q][blk];
        col_nan |= ((b_sc4[q].y >> 24) & 1u) << q;
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          b[q][w] = sb_vals[tx + 16 * q][blk * 4 + w];
          b_abs[q][w] = abs4(b[q][w]);
        }
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        uint32_t a[4], a_abs[4];
        const uint2 a_sc4 = sa_scale[ty + 16 * r][blk];
        row_nan |= ((a_sc4.y >> 24) & 1u) << r;
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          a[w] = sa_vals[ty + 16 * r][blk * 4 + w];
          a_abs[w] = abs4(a[w]);
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          int dot = 0;
          unsigned adot = 0;
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            dot = __dp4a(static_cast<int>(a[w]), static_cast<int>(b[q][w]), dot);
            adot = __dp4a(a_abs[w], b_abs[q][w], adot);
          }
          acc_block(acc[r][q], dot, static_cast<int>(adot), a_sc4, b_sc4[q], a, b[q]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int64_t i = row0 + ty + 16 * r, j = col0 + tx + 16 * q;
      if (i < m && j < n) {
        const int64_t idx = (batch * m + i) * n + j;
        acc_store(acc[r][q], ((row_nan >> r) | (col_nan >> q)) & 1u, alpha, out + idx, c + idx);
      }
    }
  }
}

__device__ __forceinline__ void acc_merge(Acc& a, const Acc& b) {
  a.sum += b.sum;
  a.abs_sum += b.abs_sum;
  a.nonzero += b.nonzero;
  a.min_tz = min(a.min_tz, b.min_tz);
}

__device__ __forceinline__ Acc acc_shfl_down(const Acc& a, int offset) {
  Acc b;
  b.sum = __shfl_down_sync(0xFFFFFFFFu, a.sum, offset);
  b.abs_sum = __shfl_down_sync(0xFFFFFFFFu, a.abs_sum, offset);
  b.nonzero = __shfl_down_sync(0xFFFFFFFFu, a.nonzero, offset);
  b.min_tz = __shfl_down_sync(0xFFFFFFFFu, a.min_tz, offset);
  return b;
}

// GEMV: a warp per output row reads the packed A row directly (decoding in registers, so A is
// read once, as a memory-bound kernel would) against B's decoded column; lanes split the blocks
// and meet in a shuffle reduction.
template <bool kAligned>
__global__ void gemv_exact(const uint8_t* __restrict__ a, const uint8_t* __restrict__ sfa,
                           const uint4* __restrict__ bv, const uint2* __restrict__ bs, int64_t m, int64_t k,
                           int64_t kb, ScaleSemantics semantics, float alpha, ExactElement* __restrict__ out,
                           uint16_t* __restrict__ c) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t batch = blockIdx.y;
  if (row >= m) return;  // whole warps leave together
  const uint8_t* a_row = a + (batch * m + row) * (k / 2);
  const uint8_t* sf_row = sfa + (batch * m + row) * kb;
  const uint4* b_col = bv + batch * kb;
  const uint2* b_sc = bs + batch * kb;
  Acc acc;
  acc_init(acc);
  uint32_t nan = 0;
  for (int64_t s = lane; s < kb; s += 32) {
    uint32_t lo, hi;
    if (kAligned) {  // k % 16 == 0: every row starts 8-byte aligned and every block is whole
      const uint2 raw = __ldg(reinterpret_cast<const uint2*>(a_row) + s);
      lo = raw.x;
      hi = raw.y;
    } else {
      uint8_t bytes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const int64_t nbytes = k / 2 - s * 8 < 8 ? k / 2 - s * 8 : 8;
      for (int64_t i = 0; i < nbytes; ++i) bytes[i] = a_row[s * 8 + i];
      lo = bytes[0] | (uint32_t(bytes[1]) << 8) | (uint32_t(bytes[2]) << 16) | (uint32_t(bytes[3]) << 24);
      hi = bytes[4] | (uint32_t(bytes[5]) << 8) | (uint32_t(bytes[6]) << 16) | (uint32_t(bytes[7]) << 24);
    }
    const uint32_t av[4] = {decode4(lo & 0xFFFFu), decode4(lo >> 16), decode4(hi & 0xFFFFu), decode4(hi >> 16)};
    const uint4 b4 = __ldg(b_col + s);
    const uint32_t bw[4] = {b4.x, b4.y, b4.z, b4.w};
    int dot = 0;
    unsigned adot = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      dot = __dp4a(static_cast<int>(av[w]), static_cast<int>(bw[w]), dot);
      adot = __dp4a(abs4(av[w]), abs4(bw[w]), adot);
    }
    const uint2 sa = block_scale(sf_row[s], semantics, nonzero_bits16(av));
    const uint2 sb = __ldg(b_sc + s);
    nan |= (sa.y | sb.y) >> 24;
    acc_block(acc, dot, static_cast<int>(adot), sa, sb, av, bw);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    acc_merge(acc, acc_shfl_down(acc, offset));
    nan |= __shfl_down_sync(0xFFFFFFFFu, nan, offset);
  }
  if (lane == 0) acc_store(acc, (nan & 1u) != 0, alpha, out + batch * m + row, c + batch * m + row);
}

// A device allocation freed on scope exit, so a throwing check leaks nothing.
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  explicit DeviceArray(size_t count) {
    check_cuda(cudaMalloc(&ptr, count == 0 ? 1 : count * sizeof(T)), "cudaMalloc");
  }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

template <typename T>
void upload(DeviceArray<T>& dst, const std::vector<T>& src, cudaStream_t stream) {
  check_cuda(cudaMemcpyAsync(dst.ptr, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice, stream),
             "copy to device");
}

}  // namespace

bool gpu_reference_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why) *why = err != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorName(err) : "no CUDA device";
    return false;
  }
  return true;
}

ExactResult exact_gemm_gpu(const Problem& p, GpuReferenceTiming* timing) {
  const auto start = std::chrono::steady_clock::now();
  if (const std::string err = problem_error(p); !err.empty()) throw std::invalid_argument(err);
  if (p.k > kGpuReferenceMaxK) {
    throw std::invalid_argument("GPU reference: k = " + std::to_string(p.k) + " exceeds 2^20");
  }
  const int64_t kb = p.kb();
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } stream_guard{stream};

  DeviceArray<uint8_t> d_a(p.a.size()), d_b(p.b.size()), d_sfa(p.sfa.size()), d_sfb(p.sfb.size());
  upload(d_a, p.a, stream);
  upload(d_b, p.b, stream);
  upload(d_sfa, p.sfa, stream);
  upload(d_sfb, p.sfb, stream);
  const int64_t elems = p.c_elems();
  DeviceArray<ExactElement> d_out(elems);
  DeviceArray<uint16_t> d_c(elems);

  auto decode = [&](const DeviceArray<uint8_t>& packed, const DeviceArray<uint8_t>& sf, int64_t rows,
                    DeviceArray<uint4>& vals, DeviceArray<uint2>& scales) {
    const int64_t count = rows * kb;
    const int threads = 256;
    decode_rows<<<static_cast<unsigned>((count + threads - 1) / threads), threads, 0, stream>>>(
        packed.ptr, sf.ptr, rows, p.k, kb, p.semantics, vals.ptr, scales.ptr);
    check_cuda(cudaGetLastError(), "decode_rows launch");
  };

  cudaEvent_t events[3];
  for (cudaEvent_t& e : events) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  struct EventGuard {
    cudaEvent_t* e;
    ~EventGuard() {
      for (int i = 0; i < 3; ++i) cudaEventDestroy(e[i]);
    }
  } event_guard{events};
  check_cuda(cudaEventRecord(events[0], stream), "cudaEventRecord");
  DeviceArray<uint4> d_bv(p.l * p.n * kb);
  DeviceArray<uint2> d_bs(p.l * p.n * kb);
  decode(d_b, d_sfb, p.l * p.n, d_bv, d_bs);
  if (p.n == 1) {
    check_cuda(cudaEventRecord(events[1], stream), "cudaEventRecord");
    const int warps = 8;
    const dim3 grid(static_cast<unsigned>((p.m + warps - 1) / warps), static_cast<unsigned>(p.l));
    if (p.k % 16 == 0) {
      gemv_exact<true><<<grid, warps * 32, 0, stream>>>(d_a.ptr, d_sfa.ptr, d_bv.ptr, d_bs.ptr, p.m, p.k, kb,
                                                        p.semantics, p.alpha, d_out.ptr, d_c.ptr);
    } else {
      gemv_exact<false><<<grid, warps * 32, 0, stream>>>(d_a.ptr, d_sfa.ptr, d_bv.ptr, d_bs.ptr, p.m, p.k, kb,
                                                         p.semantics, p.alpha, d_out.ptr, d_c.ptr);
    }
    check_cuda(cudaGetLastError(), "gemv_exact launch");
  } else {
    DeviceArray<uint4> d_av(p.l * p.m * kb);
    DeviceArray<uint2> d_as(p.l * p.m * kb);
    decode(d_a, d_sfa, p.l * p.m, d_av, d_as);
    check_cuda(cudaEventRecord(events[1], stream), "cudaEventRecord");
    if ((p.m + kTile - 1) / kTile > 65535 || p.l > 65535) {
      throw std::invalid_argument("GPU reference: m or l too large for one launch");
    }
    const dim3 grid(static_cast<unsigned>((p.n + kTile - 1) / kTile), static_cast<unsigned>((p.m + kTile - 1) / kTile),
                    static_cast<unsigned>(p.l));
    gemm_exact<<<grid, 256, 0, stream>>>(d_av.ptr, d_as.ptr, d_bv.ptr, d_bs.ptr, p.m, p.n, kb, p.alpha, d_out.ptr,
                                         d_c.ptr);
    check_cuda(cudaGetLastError(), "gemm_exact launch");
    check_cuda(cudaEventRecord(events[2], stream), "cudaEventRecord");
    check_cuda(cudaStreamSynchronize(stream), "gemm_exact");  // before d_av / d_as go away
  }
  if (p.n == 1) check_cuda(cudaEventRecord(events[2], stream), "cudaEventRecord");
  ExactResult result;
  result.elems.resize(elems);
  result.c.resize(elems);
  check_cuda(cudaMemcpyAsync(result.elems.data(), d_out.ptr, elems * sizeof(ExactElement), cudaMemcpyDeviceToHost,
                             stream),
             "copy elements back");
  check_cuda(cudaMemcpyAsync(result.c.data(), d_c.ptr, elems * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream),
             "copy output back");
  check_cuda(cudaStreamSynchronize(stream), "GPU reference");
  if (timing) {
    check_cuda(cudaEventElapsedTime(&timing->decode_ms, events[0], events[1]), "cudaEventElapsedTime");
    check_cuda(cudaEventElapsedTime(&timing->compute_ms, events[1], events[2]), "cudaEventElapsedTime");
    timing->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return result;
}

ExactResult exact_gemm_auto(const Problem& p, double threshold) {
  if (threshold < 0) {
    const char* env = std::getenv("NVFP4_GPU_REFERENCE_THRESHOLD");
    threshold = env ? std::strtod(env, nullptr) : static_cast<double>(int64_t(1) << 26);
  }
  const double work = static_cast<double>(p.l) * p.m * p.n * p.k;
  if (work >= threshold && p.k <= kGpuReferenceMaxK && gpu_reference_available(nullptr)) return exact_gemm_gpu(p);
  return exact_gemm(p);
}

}  // namespace nvfp4
