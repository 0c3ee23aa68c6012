// gemm_tc: NVFP4 GEMM on FP16 tensor cores (mma.sync m16n8k16, FP32 accumulators), for Hopper,
// which has no FP4 tensor cores: operands are decoded in software into shared memory.
//
// Operands (SPEC section 1): a*sa has at most 6 significant bits and lies in [2^-10, 2688] (or is
// 0 or NaN), so it is exact and NORMAL in FP16, and both tiles hold exactly these values, unscaled.
// They must be normal: Hopper's mma.sync drops low bits of a product whose FP16 operand is
// subnormal (a tile holding value * 2^-14 has subnormal operands, which the tensor core aligns at
// emin: a bit of the exact result is lost; corpus/regressions/gemm_tc/ holds such a case).
// Decode: an E2M1 pair is first built as value * 2^-14 with integer ops (code 1 is an FP16
// subnormal there, fine for the CUDA-core HMUL2, which keeps subnormals), then multiplied by 2^14
// and by the scale, both exact. No single FP16 factor could do both: sa * 2^14 overflows FP16.
// Products (in [2^-20, 2^23), 12 bits) are exact on the tensor core; sums are FP32 in the MMA's
// own adder (aligned to the largest addend, truncated: not IEEE), so this kernel declares
// NVFP4_FLAG_MMA_ACCUMULATE and is judged by SPEC section 3's matrix-unit model. Every nonzero
// partial sum stays a multiple of 2^-20 (truncation only drops bits above that) of magnitude
// below k * 2^23: never an FP32 subnormal, never Inf. The epilogue is RN16(alpha * acc), alpha in
// FP32 (Inf there only when the true result is beyond FP32, so beyond FP16 too). NaN scales
// propagate through the products (NaN * 0 is NaN); padding scale cells (blocks past k) are
// replaced by 0 before they can be used.
//
// Tiling: 128 x 128 output tile per block of 256 threads (8 warps, 64 x 32 each), k in steps of
// 64 (4 scale blocks). Raw E2M1 bytes and scale words are staged by cp.async three steps deep;
// each step is decoded into one of two FP16 tile buffers (XOR-swizzled for ldmatrix) while the
// tensor cores work on the other. Within each group of 8 elements both tiles use the same pair
// order (element t, t+4), which leaves the dot products unchanged. Tails in m, n and k are
// handled in the kernel (zero-filled staging, predicated stores). When the tile grid would leave
// SMs idle, k is split and a second kernel adds the FP32 partials in a fixed order (IEEE adds of
// MMA results: covered by the same model). Two blocks per SM (128 registers). Measured on the
// H200 (bench/GPU_RESULTS.md, before the issue-12 fix added one HMUL2 per pair to the decode):
// 0.3-0.5x cuBLAS FP16, because each warp alternates decode and mma.sync (tensor pipe ~34% busy).
//
// The vector path needs k % 32 == 0 and 16-byte aligned A and B (and 4-byte aligned scale words);
// other problems stage through plain byte loads, same kernel otherwise.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "kernels/block_scaled_decode.h"
#include "kernels/builtin.h"
#include "kernels/cuda/fast_decode.cuh"
#include "kernels/cuda/gemm_tc_tile.cuh"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

using namespace fast;
using namespace tc_tile;

// One block = one 128x128 tile of one batch over steps [step_begin, step_end). partials == null:
// write C; else write the FP32 sums to partials[split][b][i][j].
template <bool kVector>
__global__ void __launch_bounds__(kThreads, 2)
    gemm_tc_kernel(nvfp4_problem p, int splits, float* partials) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t m = p.m, n = p.n, k = p.k;
  const int64_t steps = (k + kTileK - 1) / kTileK;
  const int64_t tiles_n = (n + kTileN - 1) / kTileN, tiles_m = (m + kTileM - 1) / kTileM;
  // blockIdx.x: n tile (fastest, so neighbouring blocks share the A tile in L2), then m tile,
  // then batch; blockIdx.y: k split.
  int64_t id = blockIdx.x;
  TileCoords t;
  t.n0 = (id % tiles_n) * kTileN;
  id /= tiles_n;
  t.m0 = (id % tiles_m) * kTileM;
  t.b = id / tiles_m;
  const int split = blockIdx.y;
  t.step_begin = steps * split / splits;
  t.step_end = steps * (split + 1) / splits;

  float acc[4][4][4];
  tile_mainloop<kVector>(p, t, smem, acc);

  // Epilogue. Fragment (mi, ni): c0,c1 at row g, columns 2q, 2q+1; c2,c3 at row g+8.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / 4, wn = warp % 4, g = lane / 4, q = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t i = t.m0 + 64 * wm + 16 * mi + g + 8 * h;
        const int64_t j = t.n0 + 32 * wn + 8 * ni + 2 * q;
        if (i >= m) continue;
        const float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
        if (partials == nullptr) {
          uint16_t* c = p.c + (t.b * m + i) * n + j;
          if (j < n) c[0] = __half_as_ushort(__float2half_rn(p.alpha * v0));
          if (j + 1 < n) c[1] = __half_as_ushort(__float2half_rn(p.alpha * v1));
        } else {
          float* w = partials + ((static_cast<int64_t>(split) * p.l + t.b) * m + i) * n + j;
          if (j < n) w[0] = v0;
          if (j + 1 < n) w[1] = v1;
        }
      }
}

// Split-k epilogue: C = RN16(alpha * (sum over splits, in split order)).
__global__ void gemm_tc_reduce_kernel(const float* partials, int splits, int64_t count, float alpha, uint16_t* c) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = partials[e];
    for (int s = 1; s < splits; ++s) sum += partials[s * count + e];
    c[e] = __half_as_ushort(__float2half_rn(alpha * sum));
  }
}

int run_gemm_tc(const nvfp4_problem* p);

}  // namespace

NVFP4_DEFINE_BUILTIN(gemm_tc) = {
    {NVFP4_ABI_VERSION, "gemm_tc", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GEMM,
     (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 90, 1, 1, 1, NVFP4_FLAG_MMA_ACCUMULATE, 0, 0},
    run_gemm_tc};

namespace {

bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

int cuda_failed(const char* what, cudaError_t err) {
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err == cudaSuccess) return NVFP4_OK;
  std::fprintf(stderr, "gemm_tc: %s failed: %s: %s\n", what, cudaGetErrorName(err), cudaGetErrorString(err));
  return NVFP4_ERROR;
}

struct DeviceState {
  int sms = 0;                       // 0: not initialised yet
  int blocks_per_sm = 1;
  cudaMemPool_t pool = nullptr;      // split-k partials: stream-ordered, kept between calls
};

// Split k when the tile grid leaves SMs idle: pick the split count with the best fill of the
// resident block slots, lightly penalising each extra split (its partials cost bandwidth).
int choose_splits(int64_t tiles, int64_t steps, int64_t slots) {
  if (tiles >= slots) return 1;
  int best = 1;
  double best_score = 0.0;
  for (int s = 1; s <= 16 && steps / s >= 8; ++s) {
    const int64_t blocks = tiles * s;
    const int64_t waves = (blocks + slots - 1) / slots;
    const double score = static_cast<double>(blocks) / static_cast<double>(waves * slots) / (1.0 + 0.05 * (s - 1));
    if (score > best_score + 1e-9) best_score = score, best = s;
  }
  return best;
}

int run_gemm_tc(const nvfp4_problem* p) {
  if (!problem_fits(builtin_gemm_tc.info, p)) return NVFP4_UNSUPPORTED;
  const cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess || device < 0 || device >= 64) return cuda_failed("cudaGetDevice", err);
  static std::mutex state_mutex;
  static DeviceState states[64];
  DeviceState state;
  {
    std::lock_guard<std::mutex> lock(state_mutex);
    DeviceState& s = states[device];
    if (s.sms == 0) {
      if ((err = cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess)
        return cuda_failed("cudaDeviceGetAttribute", err);
      for (auto fn : {gemm_tc_kernel<true>, gemm_tc_kernel<false>})
        if ((err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmemBytes))) != cudaSuccess)
          return cuda_failed("cudaFuncSetAttribute", err);
      if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&s.blocks_per_sm, gemm_tc_kernel<true>, kThreads,
                                                               kSmemBytes)) != cudaSuccess)
        return cuda_failed("cudaOccupancyMaxActiveBlocksPerMultiprocessor", err);
      s.blocks_per_sm = std::max(1, s.blocks_per_sm);
      cudaMemPoolProps props = {};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      if ((err = cudaMemPoolCreate(&s.pool, &props)) != cudaSuccess) return cuda_failed("cudaMemPoolCreate", err);
      uint64_t keep = UINT64_MAX;  // never hand memory back: later calls allocate without the driver
      cudaMemPoolSetAttribute(s.pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    state = s;
  }

  const int64_t m = p->m, n = p->n, k = p->k, kb = (k + 15) / 16;
  const int64_t tiles = p->l * ((m + kTileM - 1) / kTileM) * ((n + kTileN - 1) / kTileN);
  const int64_t steps = (k + kTileK - 1) / kTileK;
  if (tiles > 0x7FFFFFFF) return NVFP4_UNSUPPORTED;  // grid.x limit (far beyond any real problem)
  const int splits = choose_splits(tiles, steps, static_cast<int64_t>(state.sms) * state.blocks_per_sm);
  const bool scale_words = p->sf_layout == NVFP4_SF_PERMUTED || kb % 4 == 0;
  const bool vector = k % 32 == 0 && aligned(p->a, 16) && aligned(p->b, 16) && scale_words &&
                      aligned(p->sfa, 4) && aligned(p->sfb, 4);

  float* partials = nullptr;
  const int64_t outputs = p->l * m * n;
  if (splits > 1) {
    err = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&partials), sizeof(float) * outputs * splits,
                                  state.pool, stream);
    if (err != cudaSuccess) return cuda_failed("cudaMallocFromPoolAsync", err);
  }
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
  if (vector)
    gemm_tc_kernel<true><<<grid, kThreads, kSmemBytes, stream>>>(*p, splits, partials);
  else
    gemm_tc_kernel<false><<<grid, kThreads, kSmemBytes, stream>>>(*p, splits, partials);
  if (cuda_failed("gemm_tc_kernel launch", cudaSuccess) != NVFP4_OK) return NVFP4_ERROR;
  if (splits > 1) {
    const int64_t blocks = std::min<int64_t>((outputs + 255) / 256, int64_t{state.sms} * 8);
    gemm_tc_reduce_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(partials, splits, outputs, p->alpha, p->c);
    if (cuda_failed("gemm_tc_reduce_kernel launch", cudaSuccess) != NVFP4_OK) return NVFP4_ERROR;
    if ((err = cudaFreeAsync(partials, stream)) != cudaSuccess) return cuda_failed("cudaFreeAsync", err);
  }
  return NVFP4_OK;
}

}  // namespace
}  // namespace nvfp4::kern
