// grouped_gemm_naive and grouped_gemm_naive_packed: simple correct CUDA NVFP4 grouped GEMMs (the
// mixture-of-experts layer's G GEMMs in one launch), gemm_naive's tiles per group: blockIdx.y is
// the group, blockIdx.x strides over its 8x8 output tiles, 4 k-lanes per output reduced in a
// fixed order. FP16, BF16 or FP32 out; both scale layouts; empty groups (m_g = 0) get no tile.
//
// grouped_gemm_naive reads each group's own pointers (the separate arrangement).
// grouped_gemm_naive_packed declares NVFP4_FLAG_GROUPS_PACKED and reads only the packed buffers,
// at the offsets of SPEC section 2, every one in 64 bits (a packed B passes 2^31 bytes at
// realistic expert counts): rows of A, SFA (linear) and C from M_g = m_0 + ... + m_(g-1), SFA
// (permuted) tiles from T_g = ceil(m_0/128) + ..., B and SFB as a batch of G. Each block sums
// M_g and T_g itself from the device copy of the group table.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/block_scaled_decode.h"
#include "kernels/builtin.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

constexpr int kTile = 8;                          // 8x8 outputs per block
constexpr int kLanes = 4;                         // threads splitting k per output
constexpr int kThreads = kTile * kTile * kLanes;  // 256
constexpr int64_t kMaxGroups = 65535;             // gridDim.y

// M_g and T_g of group g: the rows and the 128-row scale tiles of the groups before it.
__device__ void packed_origin(const nvfp4_group* groups, int64_t g, int64_t* row0, int64_t* tile0) {
  __shared__ long long rows[kThreads], tiles[kThreads];
  long long r = 0, t = 0;
  for (int64_t h = threadIdx.x; h < g; h += kThreads) {
    const int64_t m = groups[h].m;
    r += m;
    t += (m + 127) / 128;
  }
  rows[threadIdx.x] = r;
  tiles[threadIdx.x] = t;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      rows[threadIdx.x] += rows[threadIdx.x + half];
      tiles[threadIdx.x] += tiles[threadIdx.x + half];
    }
    __syncthreads();
  }
  *row0 = rows[0];
  *tile0 = tiles[0];
}

template <bool kPacked>
__global__ void grouped_gemm_naive_kernel(nvfp4_problem p, uint32_t out) {
  __shared__ float lane_sums[kLanes][kTile * kTile];
  const int64_t g = blockIdx.y;
  const nvfp4_group q = p.group_device[g];
  const int64_t m = q.m, n = q.n, k = q.k, kb = (k + 15) / 16, row_bytes = k / 2;
  // Where this group's operands start, and its scales' batch index (B's is g when packed).
  const uint8_t *a = q.a, *sfa = q.sfa, *b = q.b, *sfb = q.sfb;
  void* c = q.c;
  int64_t b_batch = 0, c0 = 0;
  if (kPacked) {
    int64_t row0 = 0, tile0 = 0;
    packed_origin(p.group_device, g, &row0, &tile0);
    a = p.a + row0 * row_bytes;
    sfa = p.sfa + (p.sf_layout == NVFP4_SF_LINEAR ? row0 * kb : tile0 * ((kb + 3) / 4) * 512);
    b = p.b;
    sfb = p.sfb;
    b_batch = g;
    c = p.c;
    c0 = row0 * n;
  }
  const int64_t tiles_m = (m + kTile - 1) / kTile, tiles_n = (n + kTile - 1) / kTile;
  const int out_idx = threadIdx.x % (kTile * kTile), lane = threadIdx.x / (kTile * kTile);
  for (int64_t tile = blockIdx.x; tile < tiles_m * tiles_n; tile += gridDim.x) {
    const int64_t i = (tile / tiles_n) * kTile + out_idx / kTile, j = (tile % tiles_n) * kTile + out_idx % kTile;
    float acc = 0.0f;
    if (i < m && j < n) {  // threads of the ragged edge still reach the barriers below
      const uint8_t* a_row = a + i * row_bytes;
      const uint8_t* b_row = b + (b_batch * n + j) * row_bytes;
      for (int64_t s = lane; s < kb; s += kLanes) {
        const float block_sum = block_products(a_row, b_row, s, k);
        const float sa = e4m3_to_float(sfa[scale_offset(p.sf_layout, m, kb, 0, i, s)], false);
        const float sb = e4m3_to_float(sfb[scale_offset(p.sf_layout, n, kb, b_batch, j, s)], false);
        acc += block_sum * (sa * sb);  // never skipped: a NaN scale must reach the output
      }
    }
    lane_sums[lane][out_idx] = acc;
    __syncthreads();
    if (lane == 0 && i < m && j < n) {
      float total = lane_sums[0][out_idx];
      for (int x = 1; x < kLanes; ++x) total += lane_sums[x][out_idx];
      store_scaled(c, c0 + i * n + j, out, q.alpha, total);
    }
    __syncthreads();  // lane_sums is reused by the next tile
  }
}

int run_grouped_gemm_naive(const nvfp4_problem* p);
int run_grouped_gemm_naive_packed(const nvfp4_problem* p);

constexpr uint32_t kBothLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kAllOutTypes = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);

}  // namespace

NVFP4_DEFINE_BUILTIN(grouped_gemm_naive) = {
    {NVFP4_ABI_VERSION, "grouped_gemm_naive", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GROUPED_GEMM, kBothLayouts, 90, 1, 1,
     1, 0, kAllOutTypes, static_cast<uint32_t>(kMaxGroups)},
    run_grouped_gemm_naive};
NVFP4_DEFINE_BUILTIN(grouped_gemm_naive_packed) = {
    {NVFP4_ABI_VERSION, "grouped_gemm_naive_packed", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GROUPED_GEMM, kBothLayouts,
     90, 1, 1, 1, NVFP4_FLAG_GROUPS_PACKED, kAllOutTypes, static_cast<uint32_t>(kMaxGroups)},
    run_grouped_gemm_naive_packed};

namespace {

template <bool kPacked>
int launch(const nvfp4_kernel_info& info, const nvfp4_problem* p) {
  if (!problem_fits(info, p) || p->op != NVFP4_OP_GROUPED_GEMM) return NVFP4_UNSUPPORTED;
  int64_t most_tiles = 0;
  for (int64_t g = 0; g < p->groups; ++g)
    most_tiles = std::max(most_tiles, ((p->group[g].m + kTile - 1) / kTile) * ((p->group[g].n + kTile - 1) / kTile));
  if (most_tiles == 0) return NVFP4_OK;  // every group empty: nothing to write
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(most_tiles, 4096)), static_cast<unsigned>(p->groups));
  grouped_gemm_naive_kernel<kPacked>
      <<<grid, kThreads, 0, static_cast<cudaStream_t>(p->stream)>>>(*p, problem_out_type(p));
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: launch failed: %s: %s\n", info.name, cudaGetErrorName(err), cudaGetErrorString(err));
    return NVFP4_ERROR;
  }
  return NVFP4_OK;
}

int run_grouped_gemm_naive(const nvfp4_problem* p) { return launch<false>(builtin_grouped_gemm_naive.info, p); }
int run_grouped_gemm_naive_packed(const nvfp4_problem* p) {
  return launch<true>(builtin_grouped_gemm_naive_packed.info, p);
}

}  // namespace
}  // namespace nvfp4::kern
