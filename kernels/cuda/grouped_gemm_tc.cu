// grouped_gemm_tc: NVFP4 grouped GEMM (a mixture-of-experts layer's G GEMMs) on FP16 tensor
// cores, gemm_tc's 128 x 128 tiles per group (kernels/cuda/gemm_tc_tile.cuh: the same staging,
// decode to normal FP16 operands, mma.sync m16n8k16 with FP32 accumulators) in ONE launch for
// all groups. Declares NVFP4_FLAG_MMA_ACCUMULATE, like gemm_tc, and is judged by the same
// matrix-unit model (SPEC section 3); the epilogue is alpha_g * acc rounded once to FP16, BF16 or
// FP32 (kernels/output_words.h). Separate arrangement: each group's own pointers.
//
// The tile -> group map is built on the device, on the problem's stream, by a one-block kernel:
// the prefix sums of the groups' tile counts (empty groups have none), 64-bit. Each block of the
// main kernel then finds its group by binary search in that prefix, so no host copy of a table is
// needed and groups of any count, shape and k share one grid. No split-k: the grouped problems
// this is for (many experts, large n and k) fill the device with tiles.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "kernels/block_scaled_decode.h"
#include "kernels/builtin.h"
#include "kernels/cuda/gemm_tc_tile.cuh"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

using namespace tc_tile;

constexpr int kMapThreads = 1024;

int64_t tiles_of(int64_t m, int64_t n) { return ((m + kTileM - 1) / kTileM) * ((n + kTileN - 1) / kTileN); }

// first[g] = tiles of groups 0..g-1, first[G] = all tiles. One block: each thread scans a
// contiguous chunk of groups, thread 0 scans the chunk totals, then the chunks are written.
__global__ void tile_map_kernel(const nvfp4_group* groups, int64_t count, int64_t* first) {
  __shared__ long long chunk_total[kMapThreads];
  const int64_t per = (count + kMapThreads - 1) / kMapThreads;
  const int64_t begin = threadIdx.x * per, end = begin + per < count ? begin + per : count;
  long long sum = 0;
  for (int64_t g = begin; g < end; ++g) sum += ((groups[g].m + kTileM - 1) / kTileM) * ((groups[g].n + kTileN - 1) / kTileN);
  chunk_total[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long run = 0;
    for (int t = 0; t < kMapThreads; ++t) {
      const long long here = chunk_total[t];
      chunk_total[t] = run;
      run += here;
    }
    first[count] = run;
  }
  __syncthreads();
  long long run = chunk_total[threadIdx.x];
  for (int64_t g = begin; g < end; ++g) {
    first[g] = run;
    run += ((groups[g].m + kTileM - 1) / kTileM) * ((groups[g].n + kTileN - 1) / kTileN);
  }
}

template <bool kVector>
__global__ void __launch_bounds__(kThreads, 2)
    grouped_gemm_tc_kernel(nvfp4_problem p, const int64_t* first, int64_t tiles, uint32_t out) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ long long group_of_tile;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    if (threadIdx.x == 0) {
      // The last group g with first[g] <= tile: empty groups share their successor's first, and
      // the search passes over them.
      int64_t lo = 0, hi = p.groups - 1;
      while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (first[mid] <= tile) lo = mid;
        else hi = mid - 1;
      }
      group_of_tile = lo;
    }
    __syncthreads();
    const int64_t g = group_of_tile;
    const nvfp4_group q = p.group_device[g];
    // This group as an l = 1 problem, the form the tile code reads.
    nvfp4_problem v = {};
    v.m = q.m, v.n = q.n, v.k = q.k, v.l = 1;
    v.a = q.a, v.b = q.b, v.sfa = q.sfa, v.sfb = q.sfb;
    v.sf_layout = p.sf_layout;
    const int64_t local = tile - first[g], tiles_n = (q.n + kTileN - 1) / kTileN;
    TileCoords t;
    t.b = 0;
    t.n0 = (local % tiles_n) * kTileN;  // n fastest: neighbouring blocks share the A tile in L2
    t.m0 = (local / tiles_n) * kTileM;
    t.step_begin = 0;
    t.step_end = (q.k + kTileK - 1) / kTileK;
    float acc[4][4][4];
    tile_mainloop<kVector>(v, t, smem, acc);

    // Epilogue. Fragment (mi, ni): c0,c1 at row r, columns 2c, 2c+1; c2,c3 at row r+8.
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = warp / 4, wn = warp % 4, r = lane / 4, c = lane % 4;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t i = t.m0 + 64 * wm + 16 * mi + r + 8 * h;
          const int64_t j = t.n0 + 32 * wn + 8 * ni + 2 * c;
          if (i >= q.m) continue;
          if (j < q.n) store_scaled(q.c, i * q.n + j, out, q.alpha, acc[mi][ni][2 * h]);
          if (j + 1 < q.n) store_scaled(q.c, i * q.n + j + 1, out, q.alpha, acc[mi][ni][2 * h + 1]);
        }
    // The next tile's staging reuses shared memory and group_of_tile.
    __syncthreads();
  }
}

int run_grouped_gemm_tc(const nvfp4_problem* p);

}  // namespace

NVFP4_DEFINE_BUILTIN(grouped_gemm_tc) = {
    {NVFP4_ABI_VERSION, "grouped_gemm_tc", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GROUPED_GEMM,
     (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 90, 1, 1, 1, NVFP4_FLAG_MMA_ACCUMULATE,
     (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32), 0},
    run_grouped_gemm_tc};

namespace {

bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

int cuda_failed(const char* what, cudaError_t err) {
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err == cudaSuccess) return NVFP4_OK;
  std::fprintf(stderr, "grouped_gemm_tc: %s failed: %s: %s\n", what, cudaGetErrorName(err), cudaGetErrorString(err));
  return NVFP4_ERROR;
}

struct DeviceState {
  bool ready = false;
  cudaMemPool_t pool = nullptr;  // the tile map: stream-ordered, kept between calls
};

int run_grouped_gemm_tc(const nvfp4_problem* p) {
  if (!problem_fits(builtin_grouped_gemm_tc.info, p) || p->op != NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  const cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  int64_t tiles = 0;
  bool vector = true;  // the 16-byte staging path, for the whole launch
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    if (q.m == 0) continue;
    tiles += tiles_of(q.m, q.n);
    const int64_t kb = (q.k + 15) / 16;
    const bool scale_words = p->sf_layout == NVFP4_SF_PERMUTED || kb % 4 == 0;
    vector = vector && q.k % 32 == 0 && aligned(q.a, 16) && aligned(q.b, 16) && scale_words && aligned(q.sfa, 4) &&
             aligned(q.sfb, 4);
  }
  if (tiles == 0) return NVFP4_OK;  // every group empty: nothing to write

  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess || device < 0 || device >= 64) return cuda_failed("cudaGetDevice", err);
  static std::mutex state_mutex;
  static DeviceState states[64];
  cudaMemPool_t pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_mutex);
    DeviceState& s = states[device];
    if (!s.ready) {
      for (auto fn : {grouped_gemm_tc_kernel<true>, grouped_gemm_tc_kernel<false>})
        if ((err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmemBytes))) != cudaSuccess)
          return cuda_failed("cudaFuncSetAttribute", err);
      cudaMemPoolProps props = {};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      if ((err = cudaMemPoolCreate(&s.pool, &props)) != cudaSuccess) return cuda_failed("cudaMemPoolCreate", err);
      uint64_t keep = UINT64_MAX;  // never hand memory back: later calls allocate without the driver
      cudaMemPoolSetAttribute(s.pool, cudaMemPoolAttrReleaseThreshold, &keep);
      s.ready = true;
    }
    pool = s.pool;
  }

  int64_t* first = nullptr;
  err = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&first), sizeof(int64_t) * (p->groups + 1), pool, stream);
  if (err != cudaSuccess) return cuda_failed("cudaMallocFromPoolAsync", err);
  tile_map_kernel<<<1, kMapThreads, 0, stream>>>(p->group_device, p->groups, first);
  if (cuda_failed("tile_map_kernel launch", cudaSuccess) != NVFP4_OK) return NVFP4_ERROR;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tiles, 0x7FFFFFFF));
  const uint32_t out = problem_out_type(p);
  if (vector)
    grouped_gemm_tc_kernel<true><<<grid, kThreads, kSmemBytes, stream>>>(*p, first, tiles, out);
  else
    grouped_gemm_tc_kernel<false><<<grid, kThreads, kSmemBytes, stream>>>(*p, first, tiles, out);
  if (cuda_failed("grouped_gemm_tc_kernel launch", cudaSuccess) != NVFP4_OK) return NVFP4_ERROR;
  if ((err = cudaFreeAsync(first, stream)) != cudaSuccess) return cuda_failed("cudaFreeAsync", err);
  return NVFP4_OK;
}

}  // namespace
}  // namespace nvfp4::kern
