// The honest tensor-core variants: NVFP4 GEMM/GEMV that adds on Hopper's matrix units in three
// different orders, written for clarity rather than speed. They declare NVFP4_FLAG_MMA_ACCUMULATE
// and must pass SPEC section 3's matrix-unit model on every case: a failure is either a false
// alarm of the oracle or a matrix-unit behaviour the model does not cover yet.
//
// Operands: every factor a*sa (and b*sb) is 0, NaN or a normal number in [2^-10, 2688] with at
// most 6 significant bits, so it is exact in FP16 and in BF16, and never an FP16 subnormal (whose
// products Hopper's mma.sync truncates). Elements past k and rows past m or n are zeros
// and never read, so no padding scale reaches a product. A NaN scale makes its factor NaN even
// for a zero element, and the MMA spreads it to every output of that row or column.
//
//   mma_f16           mma.sync m16n8k16 f16, one warp per 16 x 8 tile, k in order (16-element
//                     steps, which are exactly the scale blocks), alpha in FP64, one rounding.
//   mma_split_k_bf16  the same with BF16 operands, k cut into up to 6 ranges, each accumulated by
//                     its own warp; the FP32 partials go through global memory and are added by a
//                     second kernel in an order rotated per output element (deterministic).
//   wgmma_f16         wgmma.mma_async m64n32k16 (sm_90a), one warpgroup per 64 x 32 tile, both
//                     operands in shared memory in the no-swizzle K-major layout, k in chunks of
//                     64 (four wgmma per chunk), alpha in FP32.
//
// wgmma exists only on sm_90a. This file also builds for sm_100a (the default preset), where the
// wgmma device code is compiled out and the host refuses to launch it: on a device that is not
// compute capability 9.x the variant returns NVFP4_ERROR with a message. Not NVFP4_UNSUPPORTED:
// the ABI allows that only for problems outside the declared constraints, and min_sm cannot say
// "Hopper only". So on a Blackwell machine honest_cuda_wgmma_f16 shows as a loud error, by design.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "kernels/block_scaled_decode.h"
#include "mutation/honest/honest_variants.h"
#include "mutation/honest/rounding.h"
#include "kernels/tensor_core_layouts.h"

namespace nvfp4::honest {
namespace {

namespace tc = kern::tc;

// Two factors as one 32-bit register of f16x2 or bf16x2, element x in the low half (exact).
template <bool kBf16>
__device__ uint32_t pack(kern::FactorPair f) {
  if constexpr (kBf16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(f.lo, f.hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(f.lo, f.hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

template <bool kBf16>
__device__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// 16 x 8 tiles, n fastest: tile t of batch b starts at row m0 and column n0.
struct Tile16x8 {
  int64_t b, m0, n0;
};
__device__ Tile16x8 tile_16x8(const nvfp4_problem& p, int64_t t) {
  const int64_t tiles_n = (p.n + 7) / 8, tiles_m = (p.m + 15) / 16;
  return {t / (tiles_m * tiles_n), (t / tiles_n) % tiles_m * 16, t % tiles_n * 8};
}

// One warp: d += A[m0.., 16s..] * B[n0.., 16s..]^T for k16 steps s in [s_begin, s_end), in order.
// Each lane gathers its fragment elements straight from global memory (tensor_core_layouts.h).
template <bool kBf16>
__device__ void mma_steps(const nvfp4_problem& p, const Tile16x8& t, int64_t s_begin, int64_t s_end, float (&d)[4]) {
  const int lane = threadIdx.x % 32;
  for (int64_t s = s_begin; s < s_end; ++s) {
    uint32_t a[4], b[2];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const tc::RowCol q = tc::mma_a_pair(lane, r);
      a[r] = pack<kBf16>(kern::dequantized_pair(p.a, p.sfa, p.sf_layout, p.m, p.k, t.b, t.m0 + q.row, 16 * s + q.col));
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const tc::RowCol q = tc::mma_b_pair(lane, r);  // row: k, col: n
      b[r] = pack<kBf16>(kern::dequantized_pair(p.b, p.sfb, p.sf_layout, p.n, p.k, t.b, t.n0 + q.col, 16 * s + q.row));
    }
    mma_16816<kBf16>(d, a, b);
  }
}

constexpr int kWarpsPerBlock = 4;

// mma_f16: one warp per tile over all of k; the loop bounds are uniform over the warp, as
// mma.sync requires.
__global__ void mma_f16_kernel(nvfp4_problem p, int64_t tiles) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  const int64_t steps = (p.k + 15) / 16;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; w < tiles; w += warps) {
    const Tile16x8 t = tile_16x8(p, w);
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_steps<false>(p, t, 0, steps, d);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const tc::RowCol e = tc::mma_c_element(lane, i);
      const int64_t row = t.m0 + e.row, col = t.n0 + e.col;
      if (row < p.m && col < p.n)
        p.c[(t.b * p.m + row) * p.n + col] = kern::fp16_from_double(static_cast<double>(p.alpha) * d[i]);
    }
  }
}

// mma_split_k_bf16, first kernel: blockIdx.y = split, its warps accumulate k16 steps
// [steps*split/splits, steps*(split+1)/splits) of their tiles into partials[split][b][i][j].
__global__ void mma_split_k_kernel(nvfp4_problem p, int64_t tiles, int splits, float* partials) {
  const int lane = threadIdx.x % 32, split = blockIdx.y;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  const int64_t steps = (p.k + 15) / 16, outputs = p.l * p.m * p.n;
  const int64_t s_begin = steps * split / splits, s_end = steps * (split + 1) / splits;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; w < tiles; w += warps) {
    const Tile16x8 t = tile_16x8(p, w);
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_steps<true>(p, t, s_begin, s_end, d);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const tc::RowCol e = tc::mma_c_element(lane, i);
      const int64_t row = t.m0 + e.row, col = t.n0 + e.col;
      if (row < p.m && col < p.n) partials[split * outputs + (t.b * p.m + row) * p.n + col] = d[i];
    }
  }
}

// Second kernel: output e = the FP32 sum of its partials, starting at a split picked by a hash of
// e and going round, so neighbouring outputs add in different orders; then alpha in FP32.
__global__ void split_k_reduce_kernel(const float* partials, int splits, int64_t outputs, float alpha, uint16_t* c) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < outputs;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int first = static_cast<int>((static_cast<uint32_t>(e) * 0x9E3779B1u >> 16) % static_cast<uint32_t>(splits));
    float sum = partials[first * outputs + e];
    for (int j = 1; j < splits; ++j) sum += partials[((first + j) % splits) * outputs + e];
    c[e] = __half_as_ushort(__float2half_rn(alpha * sum));
  }
}

// ---- wgmma -------------------------------------------------------------------------------

constexpr int kWgThreads = 128;          // one warpgroup
constexpr int kWgM = 64, kWgN = 32;      // output tile
constexpr int kWgChunk = 64;             // k per chunk: four k16 slabs, four wgmma
constexpr int kWgSlabs = kWgChunk / 16;

// The PTX of the asynchronous tensor-core path, compiled only where it exists (sm_90a). Elsewhere
// the host never launches the kernel (see the file comment); __trap() makes a mistake loud.
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void wgmma_commit_and_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#else
  __trap();
#endif
}
// Ordinary stores to shared memory become visible to the tensor core's (async proxy) reads.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
  __trap();
#endif
}
// Pins the accumulators around the asynchronous MMA, so the compiler neither reads them before
// the wait nor moves their initialisation past the first wgmma (CUTLASS's warpgroup_fence_operand).
__device__ __forceinline__ void fence_accumulators(float (&d)[16]) {
#pragma unroll
  for (int i = 0; i < 16; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d += A * B^T, A 64 x 16 and B 32 x 16 (K-major, no swizzle) as described by the descriptors.
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[16], uint64_t desc_a, uint64_t desc_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, accumulate, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(1)
      : "memory");
#else
  __trap();
#endif
}

// Decodes 8 consecutive elements [x, x+8) of row r (x a multiple of 8, so one scale block) into
// the 16 bytes the K-major layout keeps contiguous.
__device__ uint4 decode_8(const uint8_t* data, const uint8_t* scales, uint32_t layout, int64_t rows, int64_t k,
                          int64_t b, int64_t r, int64_t x) {
  uint4 v;
  v.x = pack<false>(kern::dequantized_pair(data, scales, layout, rows, k, b, r, x));
  v.y = pack<false>(kern::dequantized_pair(data, scales, layout, rows, k, b, r, x + 2));
  v.z = pack<false>(kern::dequantized_pair(data, scales, layout, rows, k, b, r, x + 4));
  v.w = pack<false>(kern::dequantized_pair(data, scales, layout, rows, k, b, r, x + 6));
  return v;
}

__global__ void __launch_bounds__(kWgThreads) wgmma_kernel(nvfp4_problem p, int64_t tiles) {
  // Slab s of the chunk: A at a_tile + s * 64*32 bytes, B at b_tile + s * 32*32 bytes.
  __shared__ __align__(128) unsigned char a_tile[kWgSlabs * kWgM * 32];
  __shared__ __align__(128) unsigned char b_tile[kWgSlabs * kWgN * 32];
  const int tid = threadIdx.x;
  const int64_t tiles_n = (p.n + kWgN - 1) / kWgN, tiles_m = (p.m + kWgM - 1) / kWgM;
  const int64_t chunks = (p.k + kWgChunk - 1) / kWgChunk;
  const uint32_t a_addr = static_cast<uint32_t>(__cvta_generic_to_shared(a_tile));
  const uint32_t b_addr = static_cast<uint32_t>(__cvta_generic_to_shared(b_tile));

  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / (tiles_m * tiles_n), m0 = (t / tiles_n) % tiles_m * kWgM, n0 = t % tiles_n * kWgN;
    float d[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) d[i] = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      __syncthreads();  // the previous chunk's wgmma (waited for by every thread) no longer reads
      // 8-element groups: A has 64 rows x 8 groups, B 32 x 8; group (row, g) covers k16 slab g/2,
      // half g%2 of it.
      for (int idx = tid; idx < (kWgM + kWgN) * 8; idx += kWgThreads) {
        const bool is_a = idx < kWgM * 8;
        const int row = (is_a ? idx : idx - kWgM * 8) / 8, g = idx % 8;
        const int64_t x = c * kWgChunk + 8 * g;
        const uint4 v = is_a ? decode_8(p.a, p.sfa, p.sf_layout, p.m, p.k, b, m0 + row, x)
                             : decode_8(p.b, p.sfb, p.sf_layout, p.n, p.k, b, n0 + row, x);
        unsigned char* slab = is_a ? a_tile + (g / 2) * tc::k_major_slab_bytes(kWgM)
                                   : b_tile + (g / 2) * tc::k_major_slab_bytes(kWgN);
        *reinterpret_cast<uint4*>(slab + tc::k_major_offset(row, 8 * (g % 2))) = v;
      }
      fence_proxy_async();
      __syncthreads();
      fence_accumulators(d);
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < kWgSlabs; ++s) {
        wgmma_m64n32k16(d, tc::wgmma_descriptor(a_addr + s * tc::k_major_slab_bytes(kWgM)),
                        tc::wgmma_descriptor(b_addr + s * tc::k_major_slab_bytes(kWgN)));
      }
      wgmma_commit_and_wait();
      fence_accumulators(d);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const tc::RowCol e = tc::wgmma_d_element(tid, i);
      const int64_t row = m0 + e.row, col = n0 + e.col;
      if (row < p.m && col < p.n)
        p.c[(b * p.m + row) * p.n + col] = __half_as_ushort(__float2half_rn(p.alpha * d[i]));
    }
  }
}

int launch_failed(const char* what, cudaError_t err) {
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err == cudaSuccess) return NVFP4_OK;
  std::fprintf(stderr, "nvfp4_honest: %s failed: %s: %s\n", what, cudaGetErrorName(err), cudaGetErrorString(err));
  return NVFP4_ERROR;
}

// Compute capability major of the current device, cached per device.
int device_major() {
  static std::mutex mutex;
  static int majors[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return -1;
  std::lock_guard<std::mutex> lock(mutex);
  if (majors[device] == 0 && cudaDeviceGetAttribute(&majors[device], cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return -1;
  return majors[device];
}

constexpr int64_t kMaxGrid = int64_t{1} << 16;

}  // namespace

int run_tensor_core_variant(CudaVariant v, const nvfp4_problem* p) {
  cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  const int64_t outputs = p->l * p->m * p->n;
  const int64_t tiles16x8 = p->l * ((p->m + 15) / 16) * ((p->n + 7) / 8);
  const unsigned warp_blocks = static_cast<unsigned>(std::min((tiles16x8 + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxGrid));
  switch (v) {
    case CudaVariant::mma_f16:
      mma_f16_kernel<<<warp_blocks, kWarpsPerBlock * 32, 0, stream>>>(*p, tiles16x8);
      return launch_failed("mma_f16_kernel launch", cudaSuccess);
    case CudaVariant::mma_split_k_bf16: {
      // Up to 6 ranges, at least one k16 step each, and at most 2^25 partials (128 MiB).
      const int64_t steps = (p->k + 15) / 16;
      const int splits = static_cast<int>(std::max<int64_t>(1, std::min({int64_t{6}, steps, (int64_t{1} << 25) / outputs})));
      float* partials = nullptr;
      cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partials), sizeof(float) * outputs * splits, stream);
      if (err != cudaSuccess) return launch_failed("cudaMallocAsync", err);
      mma_split_k_kernel<<<dim3(warp_blocks, static_cast<unsigned>(splits)), kWarpsPerBlock * 32, 0, stream>>>(
          *p, tiles16x8, splits, partials);
      if (launch_failed("mma_split_k_kernel launch", cudaSuccess) != NVFP4_OK) return NVFP4_ERROR;
      const unsigned blocks = static_cast<unsigned>(std::min((outputs + 255) / 256, kMaxGrid));
      split_k_reduce_kernel<<<blocks, 256, 0, stream>>>(partials, splits, outputs, p->alpha, p->c);
      if (launch_failed("split_k_reduce_kernel launch", cudaSuccess) != NVFP4_OK) return NVFP4_ERROR;
      return launch_failed("cudaFreeAsync", cudaFreeAsync(partials, stream));
    }
    case CudaVariant::wgmma_f16: {
      if (const int major = device_major(); major != 9) {
        std::fprintf(stderr,
                     "honest_cuda_wgmma_f16: wgmma.mma_async exists only on sm_90a (Hopper); this device has compute "
                     "capability major %d\n", major);
        return NVFP4_ERROR;
      }
      const int64_t tiles = p->l * ((p->m + kWgM - 1) / kWgM) * ((p->n + kWgN - 1) / kWgN);
      wgmma_kernel<<<static_cast<unsigned>(std::min(tiles, kMaxGrid)), kWgThreads, 0, stream>>>(*p, tiles);
      return launch_failed("wgmma_kernel launch", cudaSuccess);
    }
    default:
      return NVFP4_ERROR;
  }
}

}  // namespace nvfp4::honest
