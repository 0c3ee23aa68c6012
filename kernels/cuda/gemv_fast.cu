// gemv_fast: a memory-bound NVFP4 GEMV for Hopper (no FP4 tensor cores: software decode).
//
// Fast path (k % 64 == 0, A 16-byte aligned, scales word aligned): persistent blocks, all
// resident (two per SM up to k = 16384). A block works on one batch at a time: that batch's B,
// decoded once into shared memory as FP16 pairs, and a balanced contiguous range of "quads": the
// rows {g*128 + c + 32q, q = 0..3} whose four permuted scale words are 16 contiguous bytes (one
// 16-byte load gives a quad's four scales of a 64-element unit). A thread handles one 64-element
// unit of a quad at a time: 8 x 16-byte loads of A (4 rows x 32 bytes) plus the scale load,
// streamed through a per-thread cp.async ring so that the next unit is in flight while one is
// decoded. The block's threads split k (threads_per_quad of them per quad, several quads side by
// side when rows are short) and reduce in a fixed order: deterministic.
// Measured on the H200 (bench/GPU_RESULTS.md): 2.6-3.6x the byte floor, issue/latency bound.
//
// Arithmetic (exact where SPEC section 1 says it can be): an E2M1 pair becomes FP16 value*2^-14
// with two integer ops; HFMA2 against B's FP16 values accumulates a 16-element block exactly
// (8 products per half, every partial sum a multiple of 2^-16 below 2^-5); the block sum goes to
// FP32 and is multiplied by sa * sb * 2^14 (exact) into the FP32 row accumulator. A NaN scale
// therefore reaches the output even when the block's values are all zero. alpha is applied last.
// No tensor cores here: its FP16 subnormals meet only CUDA-core HFMA2 (IEEE, exact).
//
// Other shapes (k % 64 != 0, misaligned pointers, k too large for the shared B) take a simple
// warp-per-row kernel with byte loads: same arithmetic contract, any shape.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "kernels/block_scaled_decode.h"
#include "kernels/builtin.h"
#include "kernels/cuda/fast_decode.cuh"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

using namespace fast;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kStages = 2;        // per-thread cp.async ring depth: one unit in flight while one is used
constexpr int kUnitChunks = 9;    // 16-byte chunks per unit: 4 rows x 2 of A, 1 of scales
constexpr int kUnitElems = 64;    // elements of one row in a unit = 4 scale blocks
constexpr size_t kRingBytes = size_t{kStages} * kUnitChunks * kThreads * 16;
constexpr size_t kReduceBytes = 2 * kWarps * 4 * sizeof(float);
constexpr size_t kMaxSmem = 227 * 1024;

// Shared memory of the fast kernel for a given k: ring, B pairs (2 bytes per element), B scales
// (one float per block), the reduction scratch.
size_t fast_smem_bytes(int64_t k) {
  return kRingBytes + static_cast<size_t>(k) * 2 + static_cast<size_t>(k / 16) * 4 + kReduceBytes;
}

// Dot product of one word (8 elements) of A with its B pairs, accumulated into a half2 exactly.
// The sign of A is folded into B (one XOR), A contributes only its magnitude bits.
__device__ __forceinline__ __half2 word_dot(uint32_t w, const uint4& bp, __half2 acc) {
  acc = __hfma2(half2_from_bits(pair_magnitude_bits<0>(w)), half2_from_bits(bp.x ^ pair_sign_bits<0>(w)), acc);
  acc = __hfma2(half2_from_bits(pair_magnitude_bits<1>(w)), half2_from_bits(bp.y ^ pair_sign_bits<1>(w)), acc);
  acc = __hfma2(half2_from_bits(pair_magnitude_bits<2>(w)), half2_from_bits(bp.z ^ pair_sign_bits<2>(w)), acc);
  acc = __hfma2(half2_from_bits(pair_magnitude_bits<3>(w)), half2_from_bits(bp.w ^ pair_sign_bits<3>(w)), acc);
  return acc;
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int idx) {
  return idx == 0 ? v.x : idx == 1 ? v.y : idx == 2 ? v.z : v.w;
}

__device__ __forceinline__ float lane_of(const float4& v, int idx) {
  return idx == 0 ? v.x : idx == 1 ? v.y : idx == 2 ? v.z : v.w;
}

// Named barrier for the threads_per_quad threads of one slot (ids 1.., 0 is __syncthreads).
__device__ __forceinline__ void slot_barrier(int slot, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(slot + 1), "r"(threads) : "memory");
}

template <bool kPermuted>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_fast_kernel(nvfp4_problem p, int tpq_log2, int blocks_per_batch) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* ring = reinterpret_cast<uint4*>(smem);  // [kStages][kUnitChunks][kThreads]
  const int64_t k = p.k, kb = k / 16, units = k / kUnitElems, m = p.m, row_bytes = k / 2;
  uint4* b_pairs = reinterpret_cast<uint4*>(smem + kRingBytes);  // [k/8]
  float* b_scales = reinterpret_cast<float*>(smem + kRingBytes + k * 2);  // [kb], times 2^14
  float* reduce = reinterpret_cast<float*>(smem + kRingBytes + k * 2 + kb * 4);  // [2][kWarps][4]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int tpq = 1 << tpq_log2, slots = kThreads >> tpq_log2;
  const int slot = tid >> tpq_log2, lt = tid & (tpq - 1);
  const int units_per_thread = static_cast<int>((units + tpq - 1) / tpq);
  const int64_t row_tiles = (m + 127) / 128, quads = row_tiles * 32;
  const int part = blockIdx.x % blocks_per_batch, batch_lanes = gridDim.x / blocks_per_batch;
  const int64_t q_begin = quads * part / blocks_per_batch, q_end = quads * (part + 1) / blocks_per_batch;
  const int64_t my_quads = q_end - q_begin > slot ? (q_end - q_begin - slot + slots - 1) / slots : 0;
  const int items = static_cast<int>(my_quads * units_per_thread);

  for (int64_t b = blockIdx.x / blocks_per_batch; b < p.l; b += batch_lanes) {
    __syncthreads();  // the previous batch's B is no longer read
    // B of batch b, decoded once: word w (elements 8w..8w+7) as its four FP16 pairs.
    const uint8_t* b_row = p.b + b * row_bytes;
    for (int64_t w = tid; w < k / 8; w += kThreads) {
      const uint8_t* src = b_row + 4 * w;
      const uint32_t word = src[0] | (uint32_t{src[1]} << 8) | (uint32_t{src[2]} << 16) | (uint32_t{src[3]} << 24);
      b_pairs[w] = word_to_pairs(word);
    }
    for (int64_t s = tid; s < kb; s += kThreads)
      b_scales[s] = e4m3_to_float(p.sfb[scale_offset(p.sf_layout, 1, kb, b, 0, s)], false) * 16384.0f;
    __syncthreads();

    // Row q of a quad, and all four rows, to C (rows past m do not exist).
    auto write_row = [&](int64_t quad, int q, float total) {
      const int64_t i = (quad / 32) * 128 + quad % 32 + 32 * q;
      if (i < m) p.c[b * m + i] = __half_as_ushort(__float2half_rn(p.alpha * total));
    };
    auto write_quad = [&](int64_t quad, const float (&total)[4]) {
      for (int q = 0; q < 4; ++q) write_row(quad, q, total[q]);
    };

    // Item t of this thread is unit j = t % units_per_thread of its quad t / units_per_thread;
    // both cursors (the one issuing, kStages - 1 items ahead, and the one computing) advance
    // incrementally so the loop has no 64-bit division.
    struct Cursor {
      int quad_index = 0, unit_index = 0, stage = 0;
      __device__ void advance(int units_per_thread) {
        if (++unit_index == units_per_thread) unit_index = 0, ++quad_index;
        if (++stage == kStages) stage = 0;
      }
    };
    auto issue = [&](const Cursor& cur, bool live) {
      const int64_t u = lt + static_cast<int64_t>(cur.unit_index) * tpq;
      if (live && u < units) {
        const int64_t quad = q_begin + slot + static_cast<int64_t>(cur.quad_index) * slots;
        uint4* dst = ring + static_cast<size_t>(cur.stage) * kUnitChunks * kThreads + tid;
        const int64_t g = quad / 32, c = quad % 32;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int64_t i = g * 128 + c + 32 * q;
          const bool valid = i < m;
          const uint8_t* src = valid ? p.a + (b * m + i) * row_bytes + u * 32 : p.a;
          cp_async_16(dst + (2 * q) * kThreads, src, valid ? 16 : 0);
          cp_async_16(dst + (2 * q + 1) * kThreads, valid ? src + 16 : p.a, valid ? 16 : 0);
        }
        uint4* sdst = dst + 8 * kThreads;
        if (kPermuted) {
          // Tile (b, g, u) is 512 bytes; row c of quarter q sits at c*16 + q*4: the quad's four
          // words are one 16-byte chunk (padding rows included: they are never used).
          cp_async_16(sdst, p.sfa + ((b * row_tiles + g) * units + u) * 512 + c * 16, 16);
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int64_t i = g * 128 + c + 32 * q;
            const bool valid = i < m;
            cp_async_4(reinterpret_cast<uint32_t*>(sdst) + q, valid ? p.sfa + (b * m + i) * kb + 4 * u : p.sfa,
                       valid ? 4 : 0);
          }
        }
      }
      cp_async_commit();  // always, so that the group count tracks items
    };

    Cursor ahead, cur;
    for (int s = 0; s < kStages - 1; ++s) {
      issue(ahead, s < items);
      ahead.advance(units_per_thread);
    }
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int it = 0; it < items; ++it) {
      issue(ahead, it + kStages - 1 < items);
      ahead.advance(units_per_thread);
      cp_async_wait<kStages - 1>();  // this thread's item `it` has landed (thread-private data)
      const int64_t u = lt + static_cast<int64_t>(cur.unit_index) * tpq;
      if (u < units) {
        const uint4* src = ring + static_cast<size_t>(cur.stage) * kUnitChunks * kThreads + tid;
        uint4 a[8];
#pragma unroll
        for (int c = 0; c < 8; ++c) a[c] = src[c * kThreads];
        const uint4 sc = src[8 * kThreads];
        float4 sa[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) sa[q] = ue4m3x4_to_float4(word_of(sc, q));
        const uint4* bp = b_pairs + u * 8;
        const float4 sb = reinterpret_cast<const float4*>(b_scales)[u];
#pragma unroll
        for (int blk = 0; blk < 4; ++blk) {
          const uint4 bw0 = bp[2 * blk], bw1 = bp[2 * blk + 1];
          const float sbv = lane_of(sb, blk);
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const uint4& chunk = a[2 * q + blk / 2];
            __half2 h = __float2half2_rn(0.0f);
            h = word_dot(word_of(chunk, 2 * (blk % 2)), bw0, h);
            h = word_dot(word_of(chunk, 2 * (blk % 2) + 1), bw1, h);
            const float2 f = __half22float2(h);
            // Never skipped: a NaN scale must reach the row even when the block is all zeros.
            acc[q] = fmaf(f.x + f.y, lane_of(sa[q], blk) * sbv, acc[q]);
          }
        }
      }
      if (cur.unit_index == units_per_thread - 1) {
        // The quad is done: reduce over the slot's threads in a fixed order, write C.
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int off = 16; off > 0; off /= 2) acc[q] += __shfl_xor_sync(0xFFFFFFFFu, acc[q], off);
        if (tpq == 32) {
          if (lane == 0) write_quad(q_begin + slot + static_cast<int64_t>(cur.quad_index) * slots, acc);
        } else {
          // Across the slot's warps through shared memory, double-buffered by quad parity: the
          // buffer written here is next written two quads later, after another barrier that
          // every reader of this one has passed. Threads lt < 4 sum row lt in warp order.
          float* red = reduce + (cur.quad_index % 2) * (kWarps * 4);
          if (lane == 0)
#pragma unroll
            for (int q = 0; q < 4; ++q) red[warp * 4 + q] = acc[q];
          slot_barrier(slot, tpq);
          if (lt < 4) {
            const int first_warp = (slot * tpq) / 32, nwarps = tpq / 32;
            float total = red[first_warp * 4 + lt];
            for (int w = 1; w < nwarps; ++w) total += red[(first_warp + w) * 4 + lt];
            write_row(q_begin + slot + static_cast<int64_t>(cur.quad_index) * slots, lt, total);
          }
        }
        acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
      }
      cur.advance(units_per_thread);
    }
    cp_async_wait<0>();  // nothing of this batch is still landing in the ring
  }
}

// Any shape: one warp per output row, lanes over scale blocks, byte loads. Each block sum of
// products (multiples of 1/4, at most 576 in magnitude) is exact in FP32, as is its product with
// sa*sb; the warp then reduces in a fixed shuffle order.
__global__ void gemv_any_shape_kernel(nvfp4_problem p) {
  const int64_t m = p.m, k = p.k, kb = (k + 15) / 16, row_bytes = k / 2, rows = p.l * m;
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; row < rows;
       row += warps) {
    const int64_t b = row / m, i = row % m;
    const uint8_t* a_row = p.a + row * row_bytes;
    const uint8_t* x_row = p.b + b * row_bytes;
    float acc = 0.0f;
    for (int64_t s = lane; s < kb; s += 32) {
      const float block_sum = block_products(a_row, x_row, s, k);
      const float sa = e4m3_to_float(p.sfa[scale_offset(p.sf_layout, m, kb, b, i, s)], false);
      const float sb = e4m3_to_float(p.sfb[scale_offset(p.sf_layout, 1, kb, b, 0, s)], false);
      acc = fmaf(block_sum, sa * sb, acc);
    }
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, off);
    if (lane == 0) p.c[row] = __half_as_ushort(__float2half_rn(p.alpha * acc));
  }
}

int run_gemv_fast(const nvfp4_problem* p);

}  // namespace

NVFP4_DEFINE_BUILTIN(gemv_fast) = {
    {NVFP4_ABI_VERSION, "gemv_fast", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GEMV,
     (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 90, 1, 1, 1, 0},
    run_gemv_fast};

namespace {

bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

int launch_failed(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return NVFP4_OK;
  std::fprintf(stderr, "gemv_fast: %s failed: %s: %s\n", what, cudaGetErrorName(err), cudaGetErrorString(err));
  return NVFP4_ERROR;
}

// Device facts the launch needs, read once per device.
struct DeviceFacts {
  int sms = 0;  // 0: not read yet (and the kernels' shared memory limit not raised yet)
};

int run_gemv_fast(const nvfp4_problem* p) {
  if (!problem_fits(builtin_gemv_fast.info, p)) return NVFP4_UNSUPPORTED;
  const cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return launch_failed("cudaGetDevice");
  static std::mutex facts_mutex;
  static DeviceFacts facts[64];
  if (device < 0 || device >= 64) return NVFP4_ERROR;
  int sms;
  {
    std::lock_guard<std::mutex> lock(facts_mutex);
    if (facts[device].sms == 0) {
      if (cudaDeviceGetAttribute(&facts[device].sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        return launch_failed("cudaDeviceGetAttribute");
      // Opt in once to the largest dynamic shared memory the fast kernel may ask for.
      if (cudaFuncSetAttribute(gemv_fast_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kMaxSmem)) != cudaSuccess ||
          cudaFuncSetAttribute(gemv_fast_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kMaxSmem)) != cudaSuccess)
        return launch_failed("cudaFuncSetAttribute");
    }
    sms = facts[device].sms;
  }

  const int64_t k = p->k;
  const bool permuted = p->sf_layout == NVFP4_SF_PERMUTED;
  const bool fast = k % kUnitElems == 0 && fast_smem_bytes(k) <= kMaxSmem && aligned(p->a, 16) &&
                    aligned(p->sfa, permuted ? 16 : 4);
  if (!fast) {
    const int64_t rows = p->l * p->m;
    const int64_t blocks = std::min<int64_t>((rows + 7) / 8, int64_t{1} << 20);
    gemv_any_shape_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(*p);
    return launch_failed("gemv_any_shape_kernel launch");
  }

  // Threads per quad: enough to cover a row's units in one pass, at least a warp, at most the
  // block; short rows put several quads side by side in the block.
  const int64_t units = k / kUnitElems;
  int tpq_log2 = 5;
  while ((int64_t{1} << tpq_log2) < units && tpq_log2 < 8) ++tpq_log2;
  // As many resident blocks as fit (two per SM when B is small enough), all of them busy at
  // once: spread them over the batches, each batch's blocks taking balanced slices of its quads.
  const size_t smem = fast_smem_bytes(k);
  int per_sm = 1;
  const cudaError_t occ = permuted
      ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_fast_kernel<true>, kThreads, smem)
      : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_fast_kernel<false>, kThreads, smem);
  if (occ != cudaSuccess) return launch_failed("cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int64_t resident = static_cast<int64_t>(sms) * std::max(1, per_sm);
  const int64_t blocks_per_batch = std::max<int64_t>(1, resident / p->l);
  const int64_t batch_lanes = std::min<int64_t>(p->l, std::max<int64_t>(1, resident / blocks_per_batch));
  const unsigned grid = static_cast<unsigned>(blocks_per_batch * batch_lanes);
  if (permuted)
    gemv_fast_kernel<true><<<grid, kThreads, smem, stream>>>(*p, tpq_log2, static_cast<int>(blocks_per_batch));
  else
    gemv_fast_kernel<false><<<grid, kThreads, smem, stream>>>(*p, tpq_log2, static_cast<int>(blocks_per_batch));
  return launch_failed("gemv_fast_kernel launch");
}

}  // namespace
}  // namespace nvfp4::kern
