// honest_cuda_cublas_grouped_f16: a grouped GEMM the way a framework without NVFP4 kernels runs
// one, every group's A*sa and B*sb dequantized to FP16 values and multiplied by ONE
// cublasGemmGroupedBatchedEx call on the tensor cores (FP32 accumulate and output), then alpha
// and one rounding to the output type. cuBLAS picks its own tiles, split-K and order: the suite
// must accept whatever it does under the Hopper matrix-unit rule (SPEC section 3, conditions A and
// B hold: a*sa is exact and normal in FP16, every product a multiple of 2^-20).
//
// For FP16 outputs cuBLAS writes C itself: FP16 operands and C, each group's alpha handed to
// cuBLAS, so D = RN_fp16(fl32(alpha * acc)): one FP32 multiply (SPEC's t' + 2 where alpha is not a
// power of two, exact where it is) and one rounding. Other outputs need an FP32 C and our
// epilogue, and cuBLAS's grouped call does not take every type combination its plain GEMM does
// (the H200's cuBLAS 13 answers NOT_SUPPORTED for FP16 operands with an FP32 C, and for
// CUBLAS_COMPUTE_32F_FAST_16F), so the first such call tries, in order: FP16 operands with
// CUBLAS_COMPUTE_32F; FP32 operands holding the same FP16 values with COMPUTE_32F_FAST_16F (the
// library converts them to FP16, exactly, for the tensor cores); and plain FP32 (IEEE FMA, still
// within the rule), and keeps the first that cuBLAS runs. cuBLAS is loaded on the first call
// (kernels/cuda/cuda_library.h): every other kernel of this plugin runs without it.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/block_scaled_decode.h"
#include "kernels/cuda/cuda_library.h"
#include "kernels/output_words.h"
#include "kernels/problem_fits.h"
#include "mutation/honest/honest_variants.h"

namespace nvfp4::honest {
namespace {

constexpr int kThreads = 256;

// The cuBLAS functions this kernel calls (cublas_v2.h's names are macros for the _v2 symbols).
#define NVFP4_HONEST_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate_v2) X(cublasSetStream_v2) X(cublasGemmGroupedBatchedEx_64) X(cublasGetStatusName) X(cublasGetStatusString)

struct Cublas {
  NVFP4_HONEST_CUBLAS_FUNCTIONS(NVFP4_LIBRARY_POINTER)
};

const Cublas* cublas(std::string* error) {
  return kern::load_cuda_library<Cublas>("libcublas", CUBLAS_VER_MAJOR, error, [](void* lib, Cublas& a) {
    NVFP4_HONEST_CUBLAS_FUNCTIONS(NVFP4_LIBRARY_RESOLVE)
    return std::string();
  });
}

// The operand types cuBLAS is asked for, in the order they are tried.
struct Mode {
  cudaDataType operand, c;
  cublasComputeType_t compute;
  bool direct;  // cuBLAS writes the FP16 output itself, alpha included; no epilogue
  const char* text;
};
constexpr int kDirect = 0;  // FP16 outputs only
constexpr Mode kModes[] = {
    {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, true, "FP16 operands and C, each group's alpha in cuBLAS"},
    {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, false, "FP16 operands, FP32 C, CUBLAS_COMPUTE_32F"},
    {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16F, false,
     "FP32 operands of FP16 values, CUBLAS_COMPUTE_32F_FAST_16F"},
    {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, false, "FP32 operands, CUBLAS_COMPUTE_32F (no tensor cores)"},
};
constexpr int kModeCount = sizeof(kModes) / sizeof(kModes[0]);
size_t operand_bytes(int mode) { return kModes[mode].operand == CUDA_R_16F ? 2 : 4; }
constexpr int64_t kAlign = 8;  // elements: every group's scratch starts 16 bytes aligned for cuBLAS

// Where one non-empty group lives in the scratch buffers (offsets in elements).
struct GroupPlan {
  int64_t g;  // index into the problem's group table
  int64_t a_off, b_off, c_off;
};

__host__ __device__ inline int64_t round_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The plan, built on the device from group_device so that nothing is copied from the host (a
// pageable copy may wait for the stream). The host walks the same table in the same order to size
// the buffers and fill cuBLAS's shape arrays; one thread, since group counts are small.
__global__ void plan_kernel(const nvfp4_group* groups, int64_t count, GroupPlan* plan, const void** a_ptrs,
                            const void** b_ptrs, void** c_ptrs, char* a16, char* b16, float* c32, int64_t esize,
                            bool direct) {
  int64_t u = 0, a = 0, b = 0, c = 0;
  for (int64_t g = 0; g < count; ++g) {
    const nvfp4_group& q = groups[g];
    if (q.m == 0) continue;
    plan[u] = {g, a, b, c};
    // cuBLAS's A is our B (op T) and its B our A (op N); its C is our C transposed (n x m).
    a_ptrs[u] = b16 + b * esize;
    b_ptrs[u] = a16 + a * esize;
    c_ptrs[u] = direct ? q.c : static_cast<void*>(c32 + c);
    a += round_up(q.m * q.k), b += round_up(q.n * q.k), c += round_up(q.m * q.n);
    ++u;
  }
}

__device__ inline void store_pair(__half* out, float lo, float hi) {
  *reinterpret_cast<__half2*>(out) = __floats2half2_rn(lo, hi);  // even index: aligned
}
__device__ inline void store_pair(float* out, float lo, float hi) { *reinterpret_cast<float2*>(out) = {lo, hi}; }

// Each byte of A and B (two elements) to two exact factors (FP16 values, stored as T). A NaN scale
// gives NaN for every element of its block, zeros included (NaN * 0 is NaN), so every output that
// uses the block gets a NaN operand, which the MMA propagates. ue4m3: the scale's sign bit is ignored.
template <typename T>
__global__ void dequantize_kernel(const nvfp4_group* groups, const GroupPlan* plan, int64_t used, uint32_t layout,
                                  T* a16, T* b16) {
  for (int64_t u = blockIdx.y; u < used; u += gridDim.y) {
    const GroupPlan pl = plan[u];
    const nvfp4_group q = groups[pl.g];
    const int64_t row_bytes = q.k / 2, bytes = (q.m + q.n) * row_bytes;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < bytes;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const int64_t r = e / row_bytes, x = 2 * (e % row_bytes);
      const bool is_a = r < q.m;
      const int64_t row = is_a ? r : r - q.m;
      const kern::FactorPair f = is_a ? kern::dequantized_pair(q.a, q.sfa, layout, q.m, q.k, 0, row, x)
                                      : kern::dequantized_pair(q.b, q.sfb, layout, q.n, q.k, 0, row, x);
      T* out = is_a ? a16 + pl.a_off : b16 + pl.b_off;
      store_pair(out + row * q.k + x, f.lo, f.hi);
    }
  }
}

// C[i][j] = RN_out(alpha * acc): the product exact in double, one rounding (kern::store_scaled).
__global__ void epilogue_kernel(const nvfp4_group* groups, const GroupPlan* plan, int64_t used, uint32_t out_type,
                                const float* c32) {
  for (int64_t u = blockIdx.y; u < used; u += gridDim.y) {
    const GroupPlan pl = plan[u];
    const nvfp4_group q = groups[pl.g];
    const int64_t total = q.m * q.n;  // column-major n x m with ldc = n is row-major m x n
    for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
         o += static_cast<int64_t>(gridDim.x) * blockDim.x)
      kern::store_scaled(q.c, o, out_type, q.alpha, c32[pl.c_off + o]);
  }
}

// One per device, kept for the process (destroying handles from a static destructor could run
// after the CUDA runtime has shut down). `done` is recorded after each call's last use of the
// scratch; the next call, on whatever stream, waits for it first, so calls on different streams
// never share the buffers at once and growing them can free the old ones in stream order.
struct DeviceState {
  std::mutex mutex;
  const Cublas* api = nullptr;  // set with the handle
  cublasHandle_t handle = nullptr;
  cudaEvent_t done = nullptr;
  bool recorded = false;
  int mode = -1;    // index into kModes (not kDirect) once cuBLAS has run one
  int direct = -1;  // kDirect: -1 not tried yet, 0 refused by cuBLAS, 1 runs
  void *a16 = nullptr, *b16 = nullptr, *c32 = nullptr, *plan = nullptr, *a_ptrs = nullptr, *b_ptrs = nullptr,
       *c_ptrs = nullptr;
  size_t a16_cap = 0, b16_cap = 0, c32_cap = 0, plan_cap = 0, a_ptrs_cap = 0, b_ptrs_cap = 0, c_ptrs_cap = 0;
  // cuBLAS's host-side arrays, kept to avoid reallocating them on every call.
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int64_t> ms, ns, ks, lda, ldb, ldc, sizes;
  std::vector<float> alpha, beta;
};

int cuda_failed(const char* what, cudaError_t err) {
  std::fprintf(stderr, "honest_cuda_cublas_grouped_f16: %s: %s: %s\n", what, cudaGetErrorName(err),
               cudaGetErrorString(err));
  return NVFP4_ERROR;
}

// Makes *buf hold at least `need` bytes, in stream order after everything that used it.
cudaError_t grow(void** buf, size_t* cap, size_t need, cudaStream_t stream) {
  if (*cap >= need) return cudaSuccess;
  const size_t bytes = std::max(need, 2 * *cap);
  if (*buf != nullptr) {
    if (const cudaError_t err = cudaFreeAsync(*buf, stream); err != cudaSuccess) return err;
    *buf = nullptr, *cap = 0;
  }
  if (const cudaError_t err = cudaMallocAsync(buf, bytes, stream); err != cudaSuccess) return err;
  *cap = bytes;
  return cudaSuccess;
}

// CUBLAS_STATUS_NOT_SUPPORTED from cuBLAS is returned as kNotSupported, for the caller to try the next mode.
constexpr int kNotSupported = -1000;

int enqueue(DeviceState& s, const nvfp4_problem* p, cudaStream_t stream, int mode, bool probing) {
  const bool direct = kModes[mode].direct;
  // The host's walk of the table: the same order and offsets as plan_kernel's.
  int64_t used = 0, a_elems = 0, b_elems = 0, c_elems = 0, max_bytes = 0, max_out = 0;
  s.ta.clear(), s.tb.clear(), s.ms.clear(), s.ns.clear(), s.ks.clear(), s.lda.clear(), s.ldb.clear();
  s.ldc.clear(), s.sizes.clear(), s.alpha.clear(), s.beta.clear();
  for (int64_t g = 0; g < p->groups; ++g) {
    const nvfp4_group& q = p->group[g];
    if (q.m == 0) continue;
    ++used;
    a_elems += round_up(q.m * q.k), b_elems += round_up(q.n * q.k), c_elems += round_up(q.m * q.n);
    max_bytes = std::max(max_bytes, (q.m + q.n) * q.k / 2);
    max_out = std::max(max_out, q.m * q.n);
    s.ta.push_back(CUBLAS_OP_T), s.tb.push_back(CUBLAS_OP_N);
    s.ms.push_back(q.n), s.ns.push_back(q.m), s.ks.push_back(q.k);
    s.lda.push_back(q.k), s.ldb.push_back(q.k), s.ldc.push_back(q.n);
    // beta 0: C is never read. Direct: alpha is cuBLAS's; else our epilogue's.
    s.sizes.push_back(1), s.alpha.push_back(direct ? q.alpha : 1.0f), s.beta.push_back(0.0f);
  }
  if (used == 0) return NVFP4_OK;  // every group empty: nothing to write

  cudaError_t err;
  if (s.recorded && (err = cudaStreamWaitEvent(stream, s.done, 0)) != cudaSuccess)
    return cuda_failed("cudaStreamWaitEvent", err);
  const size_t n = static_cast<size_t>(used);
  const size_t esize = operand_bytes(mode);
  if ((err = grow(&s.a16, &s.a16_cap, esize * static_cast<size_t>(a_elems), stream)) != cudaSuccess ||
      (err = grow(&s.b16, &s.b16_cap, esize * static_cast<size_t>(b_elems), stream)) != cudaSuccess ||
      (err = grow(&s.c32, &s.c32_cap, direct ? 4 : 4 * static_cast<size_t>(c_elems), stream)) != cudaSuccess ||
      (err = grow(&s.plan, &s.plan_cap, sizeof(GroupPlan) * n, stream)) != cudaSuccess ||
      (err = grow(&s.a_ptrs, &s.a_ptrs_cap, sizeof(void*) * n, stream)) != cudaSuccess ||
      (err = grow(&s.b_ptrs, &s.b_ptrs_cap, sizeof(void*) * n, stream)) != cudaSuccess ||
      (err = grow(&s.c_ptrs, &s.c_ptrs_cap, sizeof(void*) * n, stream)) != cudaSuccess)
    return cuda_failed("growing the scratch (cudaMallocAsync)", err);

  auto* plan = static_cast<GroupPlan*>(s.plan);
  auto* a16 = static_cast<char*>(s.a16);
  auto* b16 = static_cast<char*>(s.b16);
  auto* c32 = static_cast<float*>(s.c32);
  plan_kernel<<<1, 1, 0, stream>>>(p->group_device, p->groups, plan, static_cast<const void**>(s.a_ptrs),
                                   static_cast<const void**>(s.b_ptrs), static_cast<void**>(s.c_ptrs), a16, b16, c32,
                                   static_cast<int64_t>(esize), direct);
  const unsigned grid_y = static_cast<unsigned>(std::min<int64_t>(used, 65535));
  const unsigned deq_x = static_cast<unsigned>(std::min<int64_t>((max_bytes + kThreads - 1) / kThreads, 1024));
  if (esize == 2)
    dequantize_kernel<<<dim3(deq_x, grid_y), kThreads, 0, stream>>>(
        p->group_device, plan, used, p->sf_layout, reinterpret_cast<__half*>(a16), reinterpret_cast<__half*>(b16));
  else
    dequantize_kernel<<<dim3(deq_x, grid_y), kThreads, 0, stream>>>(
        p->group_device, plan, used, p->sf_layout, reinterpret_cast<float*>(a16), reinterpret_cast<float*>(b16));
  if ((err = cudaGetLastError()) != cudaSuccess) return cuda_failed("plan or dequantize launch", err);

  cublasStatus_t st = s.api->cublasSetStream_v2(s.handle, stream);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = s.api->cublasGemmGroupedBatchedEx_64(s.handle, s.ta.data(), s.tb.data(), s.ms.data(), s.ns.data(), s.ks.data(),
                                       s.alpha.data(), static_cast<const void* const*>(s.a_ptrs), kModes[mode].operand,
                                       s.lda.data(), static_cast<const void* const*>(s.b_ptrs), kModes[mode].operand,
                                       s.ldb.data(), s.beta.data(), static_cast<void* const*>(s.c_ptrs), kModes[mode].c,
                                       s.ldc.data(), used, s.sizes.data(), kModes[mode].compute);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED && probing) {
    if (cudaEventRecord(s.done, stream) == cudaSuccess) s.recorded = true;
    return kNotSupported;
  }
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "honest_cuda_cublas_grouped_f16: cublasGemmGroupedBatchedEx_64 (%s): %s (%s)\n",
                 kModes[mode].text, s.api->cublasGetStatusName(st), s.api->cublasGetStatusString(st));
    // The dequantization was enqueued: later calls must still wait for it.
    if (cudaEventRecord(s.done, stream) == cudaSuccess) s.recorded = true;
    return NVFP4_ERROR;
  }

  if (direct) {
    if ((err = cudaEventRecord(s.done, stream)) != cudaSuccess) return cuda_failed("cudaEventRecord", err);
    s.recorded = true;
    return NVFP4_OK;
  }
  const unsigned epi_x = static_cast<unsigned>(std::min<int64_t>((max_out + kThreads - 1) / kThreads, 1024));
  epilogue_kernel<<<dim3(epi_x, grid_y), kThreads, 0, stream>>>(p->group_device, plan, used,
                                                                 kern::problem_out_type(p), c32);
  if ((err = cudaGetLastError()) != cudaSuccess) return cuda_failed("epilogue launch", err);
  if ((err = cudaEventRecord(s.done, stream)) != cudaSuccess) return cuda_failed("cudaEventRecord", err);
  s.recorded = true;
  return NVFP4_OK;
}

}  // namespace

int run_cublas_grouped(const nvfp4_problem* p) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess || device < 0 || device >= 64) return cuda_failed("cudaGetDevice", err);
  static DeviceState states[64];
  DeviceState& s = states[device];
  // Held for the whole call: the handle, the scratch and `done` are shared by every caller.
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.handle == nullptr) {
    std::string error;
    const Cublas* api = cublas(&error);
    if (api == nullptr) {
      std::fprintf(stderr, "honest_cuda_cublas_grouped_f16: %s\n", error.c_str());
      return NVFP4_ERROR;
    }
    if (const cublasStatus_t st = api->cublasCreate_v2(&s.handle); st != CUBLAS_STATUS_SUCCESS) {
      s.handle = nullptr;
      std::fprintf(stderr, "honest_cuda_cublas_grouped_f16: cublasCreate: %s\n", api->cublasGetStatusName(st));
      return NVFP4_ERROR;
    }
    s.api = api;
  }
  if (s.done == nullptr && (err = cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming)) != cudaSuccess) {
    s.done = nullptr;
    return cuda_failed("cudaEventCreateWithFlags", err);
  }
  const auto stream = static_cast<cudaStream_t>(p->stream);
  if (kern::problem_out_type(p) == NVFP4_OUT_FP16 && s.direct != 0) {
    const int rc = enqueue(s, p, stream, kDirect, s.direct < 0);
    if (rc != kNotSupported) {
      if (rc == NVFP4_OK && !s.ms.empty()) s.direct = 1;
      return rc;
    }
    s.direct = 0;
    std::fprintf(stderr, "honest_cuda_cublas_grouped_f16: cuBLAS refuses %s; FP16 outputs go through the epilogue\n",
                 kModes[kDirect].text);
  }
  if (s.mode >= 0) return enqueue(s, p, stream, s.mode, false);
  for (int mode = kDirect + 1; mode < kModeCount; ++mode) {
    const int rc = enqueue(s, p, stream, mode, true);
    if (rc == kNotSupported) continue;
    // A call with every group empty never reaches cuBLAS, so it settles nothing.
    if (rc == NVFP4_OK && !s.ms.empty()) {
      s.mode = mode;
      if (mode > kDirect + 1) std::fprintf(stderr, "honest_cuda_cublas_grouped_f16: cuBLAS runs the grouped GEMM with %s\n",
                                 kModes[mode].text);
    }
    return rc;
  }
  std::fprintf(stderr, "honest_cuda_cublas_grouped_f16: cublasGemmGroupedBatchedEx_64 supports none of the operand types tried\n");
  return NVFP4_ERROR;
}

}  // namespace nvfp4::honest
