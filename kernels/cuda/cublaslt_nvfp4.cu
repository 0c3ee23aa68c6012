// cublaslt_nvfp4: NVIDIA's own NVFP4 GEMM, cuBLASLt's block-scaled matmul (CUDA_R_4F_E2M1 data,
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 scales, FP32 compute, FP16 output), reached through
// the ABI like any kernel so the suite checks the library exactly as it checks ours.
//
// Constraints declared in its info, and where they come from:
// - min_sm 100: block-scaled FP4 matmul runs on the 5th-generation tensor cores of compute
//   capability 10.0+ (tcgen05.mma kind::mxf4nvf4.block_scale; cuBLAS documentation,
//   https://docs.nvidia.com/cuda/cublas/#cublasltmatmul, narrow-precision data types). On the
//   H200 (9.0) kernel_runnable() reports it not runnable.
// - TN only, the only form cuBLASLt accepts for FP4 A and B (same section): A transposed, B not.
//   Our row-major C[m][n] = A[m][k] * B[n][k]^T is exactly that form once we let cuBLASLt compute
//   the column-major D = C^T (n x m, ld n) = op_T(B as k x n, ld k) * (A as k x m, ld k).
// - permuted scales only: VEC16_UE4M3 scale tensors use the 128x4 tile layout ("1D block scaling
//   factors layout" in the same documentation), which is SPEC section 2's permuted layout.
// - m, n, k multiples of 32: cuBLASLt's narrow-precision kernels need every matrix pointer and
//   dimension 16-byte aligned (cuBLAS documentation, "Tensor Core Usage" and the FP8/FP4
//   requirements of cublasLtMatmul), and 16 bytes are 32 FP4 elements; Megatron-Core documents
//   the same 32 for its FP4 GEMMs ("TMA requires a 16-byte aligned address ... 32 FP4 values",
//   https://docs.nvidia.com/megatron-core/developer-guide/latest/apidocs/core/core.fp4_utils.html).
//   Not verified on an sm_100 device here, so chosen on the safe side.
// - ue4m3 semantics (the scale's sign bit is ignored), FP32 accumulation, alpha through a host
//   pointer (CUBLASLT_POINTER_MODE_HOST), beta 0.
// Batches: cuBLASLt has no batch stride for VEC16 scale tensors (cublasLt.h of CUDA 13 defines
// none), so each batch is one cublasLtMatmul call with offset pointers, all on the problem's stream.
// The library is loaded on this kernel's first call, not linked: it is half a gigabyte whose
// loading costs every process that links it about half a second of CPU at start (the runner,
// each kernel's process, every test binary), and no other kernel uses it.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <map>
#include <mutex>

#include "kernels/builtin.h"
#include "kernels/cuda/cuda_library.h"
#include "kernels/problem_fits.h"

namespace nvfp4::kern {
namespace {

int run_cublaslt_nvfp4(const nvfp4_problem* p);

}  // namespace

NVFP4_DEFINE_BUILTIN(cublaslt_nvfp4) = {
    {NVFP4_ABI_VERSION, "cublaslt_nvfp4", NVFP4_MEMORY_CUDA, 1u << NVFP4_OP_GEMM, 1u << NVFP4_SF_PERMUTED, 100, 32,
     32, 32, 0},
    run_cublaslt_nvfp4};

namespace {

// The cuBLASLt functions this kernel calls.
#define NVFP4_CUBLASLT_FUNCTIONS(X)                                                                          \
  X(cublasLtCreate) X(cublasLtGetStatusName) X(cublasLtGetStatusString) X(cublasLtMatmul)                  \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)               \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)   \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)

struct CublasLt {
  NVFP4_CUBLASLT_FUNCTIONS(NVFP4_LIBRARY_POINTER)
};

const CublasLt* cublaslt(std::string* error) {
  return load_cuda_library<CublasLt>("libcublasLt", CUBLAS_VER_MAJOR, error, [](void* lib, CublasLt& a) {
    NVFP4_CUBLASLT_FUNCTIONS(NVFP4_LIBRARY_RESOLVE)
    return std::string();
  });
}

// Workspace for split-K algorithms; allocated stream-ordered per call (cudaMallocAsync), so calls
// on different streams never share one and nothing synchronises the device.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// One cuBLASLt handle per device, created on first use. Handles live until the process ends:
// destroying them from a static destructor could run after the CUDA runtime has shut down.
cublasLtHandle_t handle_for_current_device(const CublasLt& lt, std::string* error) {
  static std::mutex mutex;
  static std::map<int, cublasLtHandle_t> handles;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    *error = "cudaGetDevice failed";
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex);
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasLtHandle_t handle = nullptr;
  const cublasStatus_t st = lt.cublasLtCreate(&handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    *error = std::string("cublasLtCreate: ") + lt.cublasLtGetStatusName(st);
    return nullptr;
  }
  handles.emplace(device, handle);
  return handle;
}

// Largest power of two (<= 256) dividing every address base + t*stride: what cuBLASLt may assume.
uint32_t alignment_of(const void* base, int64_t stride_bytes) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(base) | static_cast<uint64_t>(stride_bytes) | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// Owns the cuBLASLt descriptors of one call and destroys them on every path out.
struct Descriptors {
  const CublasLt& lt;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref) lt.cublasLtMatmulPreferenceDestroy(pref);
    if (d) lt.cublasLtMatrixLayoutDestroy(d);
    if (b) lt.cublasLtMatrixLayoutDestroy(b);
    if (a) lt.cublasLtMatrixLayoutDestroy(a);
    if (op) lt.cublasLtMatmulDescDestroy(op);
  }
};

int fail(const std::string& what) {
  std::fprintf(stderr, "cublaslt_nvfp4: %s\n", what.c_str());
  return NVFP4_ERROR;
}

#define NVFP4_CUBLASLT_TRY(call)                                                                       \
  do {                                                                                               \
    const cublasStatus_t status_ = (call);                                                           \
    if (status_ != CUBLAS_STATUS_SUCCESS)                                                            \
      return fail(std::string(#call) + " failed: " + lt.cublasLtGetStatusName(status_) + " (" +      \
                  lt.cublasLtGetStatusString(status_) + ")");                                        \
  } while (0)

int run_cublaslt_nvfp4(const nvfp4_problem* p) {
  if (!problem_fits(builtin_cublaslt_nvfp4.info, p)) return NVFP4_UNSUPPORTED;
  std::string error;
  const CublasLt* api = cublaslt(&error);
  if (api == nullptr) return fail(error);
  const CublasLt& lt = *api;
  cublasLtHandle_t handle = handle_for_current_device(lt, &error);
  if (handle == nullptr) return fail(error);
  cudaStream_t stream = static_cast<cudaStream_t>(p->stream);

  const int64_t m = p->m, n = p->n, k = p->k, l = p->l, kb = k / 16;
  const int64_t a_batch = m * k / 2, b_batch = n * k / 2, c_batch = m * n * 2;
  const int64_t sfa_batch = (m + 127) / 128 * ((kb + 3) / 4) * 512, sfb_batch = (n + 127) / 128 * ((kb + 3) / 4) * 512;

  // cuBLASLt's A is our B (op T), its B is our A (op N), its D is our C transposed.
  Descriptors desc{lt};
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
  const cublasLtPointerMode_t host_pointers = CUBLASLT_POINTER_MODE_HOST;
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &host_pointers,
                                                       sizeof host_pointers));
  const cublasLtMatmulMatrixScale_t vec16 = CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec16, sizeof vec16));
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec16, sizeof vec16));
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatrixLayoutCreate(&desc.a, CUDA_R_4F_E2M1, k, n, k));
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatrixLayoutCreate(&desc.b, CUDA_R_4F_E2M1, k, m, k));
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatrixLayoutCreate(&desc.d, CUDA_R_16F, n, m, n));

  // Tell the heuristic how aligned the pointers of every batch really are (default: 256 bytes).
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulPreferenceCreate(&desc.pref));
  const size_t workspace_bytes = kWorkspaceBytes;
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace_bytes, sizeof workspace_bytes));
  const uint32_t align_a = alignment_of(p->b, b_batch), align_b = alignment_of(p->a, a_batch);
  const uint32_t align_cd = alignment_of(p->c, c_batch);
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                             &align_a, sizeof align_a));
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                             &align_b, sizeof align_b));
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                             &align_cd, sizeof align_cd));
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                             &align_cd, sizeof align_cd));

  // The heuristic only needs the descriptors; scale pointers are set per batch below.
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  NVFP4_CUBLASLT_TRY(lt.cublasLtMatmulAlgoGetHeuristic(handle, desc.op, desc.a, desc.b, desc.d, desc.d, desc.pref, 1,
                                                       &heuristic, &found));
  if (found == 0) {
    return fail("cuBLASLt offers no NVFP4 algorithm for m=" + std::to_string(m) + " n=" + std::to_string(n) +
                " k=" + std::to_string(k) + " on this device");
  }

  void* workspace = nullptr;
  cudaError_t err = cudaMallocAsync(&workspace, kWorkspaceBytes, stream);
  if (err != cudaSuccess) return fail(std::string("cudaMallocAsync of the workspace: ") + cudaGetErrorName(err));
  const float alpha = p->alpha, beta = 0.0f;
  int result = NVFP4_OK;
  for (int64_t t = 0; t < l && result == NVFP4_OK; ++t) {
    const void* sf_a = p->sfb + t * sfb_batch;  // cuBLASLt's A is our B
    const void* sf_b = p->sfa + t * sfa_batch;
    cublasStatus_t st = lt.cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sf_a, sizeof sf_a);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = lt.cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sf_b, sizeof sf_b);
    uint16_t* c = p->c + t * m * n;
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = lt.cublasLtMatmul(handle, desc.op, &alpha, p->b + t * b_batch, desc.a, p->a + t * a_batch, desc.b, &beta, c,
                             desc.d, c, desc.d, &heuristic.algo, workspace, kWorkspaceBytes, stream);
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
      result = fail("cublasLtMatmul of batch " + std::to_string(t) + " failed: " + lt.cublasLtGetStatusName(st));
    }
  }
  // Freed in stream order, after the matmuls that use it; no device-wide synchronisation.
  err = cudaFreeAsync(workspace, stream);
  if (result == NVFP4_OK && err != cudaSuccess)
    result = fail(std::string("cudaFreeAsync of the workspace: ") + cudaGetErrorName(err));
  return result;
}

}  // namespace
}  // namespace nvfp4::kern
