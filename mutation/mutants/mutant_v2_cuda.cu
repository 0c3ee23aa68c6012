// The CUDA mutant engine of ABI version 2's problems, the GPU twin of mutant_v2_host.cc: one
// thread per output element (element-order FP32 dot product, alpha, one rounding), GEMV/GEMM in
// any output type, dual GEMM with SiLU, and grouped GEMM with one grid row (blockIdx.y) per
// group, separate or packed. The bugs of mutant_bugs.h's version-2 sections behind a switch; with
// Bug::none a correct kernel (the ctl_cuda_*_unmutated controls). The CUDA twins matter for the
// classes only a GPU tier reaches: grouped_offsets_32bit needs a packed B past 2^31 bytes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "kernels/output_words.h"
#include "kernels/problem_fits.h"
#include "mutation/mutants/mutant_engines.h"

namespace nvfp4::mutants {
namespace {

constexpr int kThreads = 256;

__device__ float dot(const uint8_t* a_row, const uint8_t* sfa, int64_t a_rows, int64_t a_batch, int64_t i,
                     const uint8_t* b_row, const uint8_t* sfb, int64_t b_rows, int64_t b_batch, int64_t j, int64_t k,
                     uint32_t layout) {
  const int64_t kb = (k + 15) / 16;
  float acc = 0.0f;
  for (int64_t x = 0; x < k; ++x) {
    const float sa = kern::e4m3_to_float(sfa[kern::scale_offset(layout, a_rows, kb, a_batch, i, x / 16)], false);
    const float sb = kern::e4m3_to_float(sfb[kern::scale_offset(layout, b_rows, kb, b_batch, j, x / 16)], false);
    acc += (kern::e2m1_to_float(kern::e2m1_code(a_row, x)) * sa) * (kern::e2m1_to_float(kern::e2m1_code(b_row, x)) * sb);
  }
  return acc;
}

__device__ float through_fp16(double v) { return kern::float_from_fp16(kern::fp16_from_double(v)); }

__device__ void store(void* c, int64_t index, uint32_t out, double v, Bug bug) {
  if (bug == Bug::bf16_truncated && out == NVFP4_OUT_BF16) {
    static_cast<uint16_t*>(c)[index] = static_cast<uint16_t>(__float_as_uint(static_cast<float>(v)) >> 16);
  } else if (bug == Bug::fp32_through_fp16 && out == NVFP4_OUT_FP32) {
    static_cast<float*>(c)[index] = through_fp16(v);
  } else {
    kern::store_output(c, index, out, v);
  }
  mutant_output_word(c, index, out, bug);
}

__device__ double silu_product(double g, double u, Bug bug) {
  if (bug == Bug::dual_gate_up_swapped) {
    const double t = g;
    g = u, u = t;
  }
  if (bug == Bug::dual_silu_fp16) {
    const float gh = through_fp16(static_cast<float>(g));
    return static_cast<double>(through_fp16(gh / through_fp16(1.0f + through_fp16(expf(-gh))))) * u;
  }
  return g / (1.0 + exp(-g)) * u;
}

__global__ void dense_kernel(nvfp4_problem p, uint32_t out, Bug bug) {
  const int64_t m = p.m, n = p.n, k = p.k, row_bytes = k / 2, total = p.l * m * n;
  const bool dual = p.op == NVFP4_OP_DUAL_GEMM;
  const float alpha2 = bug == Bug::dual_alpha2_ignored ? 1.0f : p.alpha2;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e % n, i = (e / n) % m, b = e / (m * n);
    const uint8_t* a_row = p.a + (b * m + i) * row_bytes;
    const float acc = dot(a_row, p.sfa, m, b, i, p.b + (b * n + j) * row_bytes, p.sfb, n, b, j, k, p.sf_layout);
    if (!dual) {
      store(p.c, e, out, static_cast<double>(p.alpha) * acc, bug);
    } else {
      const double u =
          static_cast<double>(alpha2) * dot(a_row, p.sfa, m, b, i, p.b2 + (b * n + j) * row_bytes, p.sfb2, n, b, j, k, p.sf_layout);
      store(p.c, e, out, silu_product(static_cast<double>(p.alpha) * acc, u, bug), bug);
    }
  }
}

// M_g, T_g, and whether an earlier group is empty, summed by thread 0 (a mutant need not be fast).
struct Origin {
  int64_t row0, tile0;
  bool after_empty;
};
__device__ Origin origin_of(const nvfp4_group* groups, int64_t g) {
  __shared__ long long row0, tile0;
  __shared__ int after_empty;
  if (threadIdx.x == 0) {
    long long r = 0, t = 0;
    int e = 0;
    for (int64_t h = 0; h < g; ++h) {
      r += groups[h].m;
      t += (groups[h].m + 127) / 128;
      e |= groups[h].m == 0;
    }
    row0 = r, tile0 = t, after_empty = e;
  }
  __syncthreads();
  return {row0, tile0, after_empty != 0};
}

__global__ void grouped_kernel(nvfp4_problem p, uint32_t out, Bug bug, bool packed) {
  const int64_t g = blockIdx.y;
  const nvfp4_group q = p.group_device[g];
  const Origin o = origin_of(p.group_device, g);
  // The GPU form of a group loop ending at the first empty expert: groups after one do nothing.
  if (bug == Bug::grouped_stops_at_empty && (o.after_empty || q.m == 0)) return;
  const int64_t m = q.m, n = q.n, k = q.k, kb = (k + 15) / 16, row_bytes = k / 2;
  const float alpha = bug == Bug::grouped_alpha_of_first ? p.group_device[0].alpha : q.alpha;
  const uint8_t *a = q.a, *sfa = q.sfa, *bdata = q.b, *sfb = q.sfb;
  int64_t b_batch = 0, c0 = 0;
  void* c = q.c;
  if (packed) {
    a = p.a + o.row0 * row_bytes;
    sfa = p.sfa + (p.sf_layout == NVFP4_SF_LINEAR ? o.row0 * kb : o.tile0 * ((kb + 3) / 4) * 512);
    if (bug == Bug::grouped_offsets_32bit) {
      // int offset = g * n * k / 2: wraps (negative) once the packed B passes 2^31 bytes.
      bdata = p.b + static_cast<int32_t>(static_cast<uint32_t>(g) * static_cast<uint32_t>(n * row_bytes));
    } else {
      bdata = p.b + g * n * row_bytes;
    }
    sfb = p.sfb;
    b_batch = bug == Bug::grouped_next_expert_scales && g + 1 < p.groups ? g + 1 : g;
    c = p.c;
    c0 = o.row0 * n;
  }
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < m * n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / n, j = e % n;
    const float acc = dot(a + i * row_bytes, sfa, m, 0, i, bdata + j * row_bytes, sfb, n, b_batch, j, k, p.sf_layout);
    store(c, c0 + e, out, static_cast<double>(alpha) * acc, bug);
  }
}

// An empty group's stray tile, enqueued after the others: zeros on the row at its offset.
__global__ void empty_rows_kernel(nvfp4_problem p, uint32_t out) {
  const int64_t g = blockIdx.y;
  if (p.group_device[g].m != 0) return;
  const Origin o = origin_of(p.group_device, g);
  for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) kern::store_output(p.c, o.row0 * p.n + j, out, 0.0);
}

int launch_error(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return NVFP4_OK;
  std::fprintf(stderr, "CUDA v2 mutant: %s failed: %s\n", what, cudaGetErrorString(err));
  return NVFP4_ERROR;
}

}  // namespace

int run_cuda_v2_mutant(Bug bug, bool packed, const nvfp4_problem* p) {
  const cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  const uint32_t out = kern::problem_out_type(p);
  if (p->op != NVFP4_OP_GROUPED_GEMM) {
    const int64_t total = p->l * p->m * p->n;
    const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 1 << 16);
    dense_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(*p, out, bug);
    return launch_error("dense launch");
  }
  if (p->groups > 65535) return NVFP4_UNSUPPORTED;  // gridDim.y; the mutants declare no limit
  int64_t most = 0;
  for (int64_t g = 0; g < p->groups; ++g) most = std::max(most, p->group[g].m * p->group[g].n);
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((most + kThreads - 1) / kThreads, 4096))),
                  static_cast<unsigned>(p->groups));
  grouped_kernel<<<grid, kThreads, 0, stream>>>(*p, out, bug, packed);
  if (const int rc = launch_error("grouped launch"); rc != NVFP4_OK) return rc;
  if (bug == Bug::grouped_empty_writes_row && packed) {
    empty_rows_kernel<<<dim3(1, static_cast<unsigned>(p->groups)), kThreads, 0, stream>>>(*p, out);
    return launch_error("empty-rows launch");
  }
  return NVFP4_OK;
}

}  // namespace nvfp4::mutants
