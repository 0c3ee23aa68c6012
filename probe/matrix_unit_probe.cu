// The probe's GPU side: one kernel per instruction, each executing the instruction exactly once per
// tile on operands taken bit for bit from global memory (matrix_unit_probe.h).
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16 / mma.m16n8k32", and the wgmma
// register fragment of A, which repeats the m16 layout once per warp of the warpgroup): lane =
// 4 g + t; A's four registers hold rows g, g + 8 at k = {2t, 2t + 1} and {2t + 8, 2t + 9} (16-bit
// types) or k = 4t..4t + 3 and 16 + 4t..16 + 4t + 3 (8-bit types); B's two registers hold column g
// at the same k; C and D hold (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1). The lower k of a
// pair is in the lower bits. The probe's "pairing" tiles check this on the hardware.
#include "probe/matrix_unit_probe.h"

#include <cuda_runtime.h>

#include <stdexcept>

namespace nvfp4 {
namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("matrix-unit probe: ") + what + ": " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ")");
}

__device__ __forceinline__ uint32_t pack16(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

__device__ __forceinline__ uint32_t load32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Operands of one m16 slice of A for 16-bit types: rows r0 and r0 + 8 of a row-major 16-wide A.
__device__ __forceinline__ void a_fragment16(const uint16_t* A, int r0, int t, uint32_t (&a)[4]) {
  a[0] = pack16(A[r0 * 16 + 2 * t], A[r0 * 16 + 2 * t + 1]);
  a[1] = pack16(A[(r0 + 8) * 16 + 2 * t], A[(r0 + 8) * 16 + 2 * t + 1]);
  a[2] = pack16(A[r0 * 16 + 2 * t + 8], A[r0 * 16 + 2 * t + 9]);
  a[3] = pack16(A[(r0 + 8) * 16 + 2 * t + 8], A[(r0 + 8) * 16 + 2 * t + 9]);
}

// The same for 8-bit types, 32 wide.
__device__ __forceinline__ void a_fragment8(const uint8_t* A, int r0, int t, uint32_t (&a)[4]) {
  a[0] = load32(A + r0 * 32 + 4 * t);
  a[1] = load32(A + (r0 + 8) * 32 + 4 * t);
  a[2] = load32(A + r0 * 32 + 16 + 4 * t);
  a[3] = load32(A + (r0 + 8) * 32 + 16 + 4 * t);
}

// C in, D out: rows r0 and r0 + 8 of a row-major 8-wide matrix.
__device__ __forceinline__ void load_c(const uint32_t* C, int r0, int t, uint32_t (&c)[4]) {
  c[0] = C[r0 * 8 + 2 * t];
  c[1] = C[r0 * 8 + 2 * t + 1];
  c[2] = C[(r0 + 8) * 8 + 2 * t];
  c[3] = C[(r0 + 8) * 8 + 2 * t + 1];
}
__device__ __forceinline__ void store_d(uint32_t* D, int r0, int t, const uint32_t (&d)[4]) {
  D[r0 * 8 + 2 * t] = d[0];
  D[r0 * 8 + 2 * t + 1] = d[1];
  D[(r0 + 8) * 8 + 2 * t] = d[2];
  D[(r0 + 8) * 8 + 2 * t + 1] = d[3];
}

constexpr int kWarpsPerBlock = 4;

// mma.sync m16n8k16 with FP32 accumulators; one warp per tile. kBf16 picks the operand type.
template <bool kBf16>
__global__ void mma_m16n8k16(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b,
                             const uint32_t* __restrict__ c, uint32_t* __restrict__ d, int64_t tiles) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (tile >= tiles) return;  // whole warps only
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint16_t* A = a + tile * 16 * 16;
  const uint16_t* B = b + tile * 8 * 16;
  uint32_t af[4], acc[4];
  a_fragment16(A, g, t, af);
  const uint32_t b0 = pack16(B[g * 16 + 2 * t], B[g * 16 + 2 * t + 1]);
  const uint32_t b1 = pack16(B[g * 16 + 2 * t + 8], B[g * 16 + 2 * t + 9]);
  load_c(c + tile * 128, g, t, acc);
  float f0 = __uint_as_float(acc[0]), f1 = __uint_as_float(acc[1]), f2 = __uint_as_float(acc[2]),
        f3 = __uint_as_float(acc[3]);
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3)
        : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3)
        : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "r"(b0), "r"(b1));
  }
  const uint32_t out[4] = {__float_as_uint(f0), __float_as_uint(f1), __float_as_uint(f2), __float_as_uint(f3)};
  store_d(d + tile * 128, g, t, out);
}

// Integer mma.sync m16n8k32 s8 x s8 + s32, wrapping (no .satfinite).
__global__ void mma_m16n8k32_s8(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                                const uint32_t* __restrict__ c, uint32_t* __restrict__ d, int64_t tiles) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (tile >= tiles) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint8_t* A = a + tile * 16 * 32;
  const uint8_t* B = b + tile * 8 * 32;
  uint32_t af[4], acc[4];
  a_fragment8(A, g, t, af);
  const uint32_t b0 = load32(B + g * 32 + 4 * t), b1 = load32(B + g * 32 + 16 + 4 * t);
  load_c(c + tile * 128, g, t, acc);
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "r"(b0), "r"(b1));
  store_d(d + tile * 128, g, t, acc);
}

// The same at k = 16 (the GPU reference's shape): A's rows g, g + 8 at k = 4t..4t + 3, B's column
// g at the same k.
__global__ void mma_m16n8k16_s8(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                                const uint32_t* __restrict__ c, uint32_t* __restrict__ d, int64_t tiles) {
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (tile >= tiles) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint8_t* A = a + tile * 16 * 16;
  const uint8_t* B = b + tile * 8 * 16;
  const uint32_t a0 = load32(A + g * 16 + 4 * t), a1 = load32(A + (g + 8) * 16 + 4 * t);
  const uint32_t b0 = load32(B + g * 16 + 4 * t);
  uint32_t acc[4];
  load_c(c + tile * 128, g, t, acc);
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
               : "r"(a0), "r"(a1), "r"(b0));
  store_d(d + tile * 128, g, t, acc);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
// A shared-memory matrix descriptor for the no-swizzle K-major layout (8 rows x 16 bytes per core
// matrix): lbo bytes between core matrices adjacent in K, sbo between those adjacent in M or N.
__device__ __forceinline__ uint64_t smem_descriptor(const void* smem, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr >> 4) & 0x3FFFu) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32);
}
#endif

// wgmma m64n8k16 (kType 0: f16, 1: bf16) or m64n8k32 e4m3 (kType 2); one warpgroup per tile, B in
// shared memory, A in registers or (kASmem) in shared memory as well.
template <int kType, bool kASmem>
__global__ void __launch_bounds__(128) wgmma_m64n8(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                                                   const uint32_t* __restrict__ c, uint32_t* __restrict__ d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBytes = kType == 2 ? 1 : 2;  // bytes per operand
  constexpr int kK = kType == 2 ? 32 : 16;
  constexpr int kPerRow = 16 / kBytes;  // operands in one 16-byte core-matrix row
  __shared__ __align__(128) uint8_t sb[256];
  __shared__ __align__(128) uint8_t sa[kASmem ? 64 * kK * kBytes : 16];
  const int64_t tile = blockIdx.x;
  const uint8_t* A = a + tile * 64 * kK * kBytes;
  const uint8_t* B = b + tile * 8 * kK * kBytes;
  const int tid = threadIdx.x;
  // B: column n, k = x goes to core matrix x / kPerRow (128 bytes apart), row n, byte
  // (x % kPerRow) * kBytes. The one 8-column group makes SBO unused; it is set equal to LBO.
  for (int e = tid; e < 8 * kK; e += 128) {
    const int n = e / kK, x = e % kK;
    uint8_t* dst = sb + (x / kPerRow) * 128 + n * 16 + (x % kPerRow) * kBytes;
    for (int y = 0; y < kBytes; ++y) dst[y] = B[(n * kK + x) * kBytes + y];
  }
  if constexpr (kASmem) {
    // A: row r, k = x goes to core matrix (r / 8, x / kPerRow): K neighbours 128 bytes apart (LBO),
    // 8-row groups 256 bytes apart (SBO).
    for (int e = tid; e < 64 * kK; e += 128) {
      const int r = e / kK, x = e % kK;
      uint8_t* dst = sa + ((r / 8) * 2 + x / kPerRow) * 128 + (r % 8) * 16 + (x % kPerRow) * kBytes;
      for (int y = 0; y < kBytes; ++y) dst[y] = A[(r * kK + x) * kBytes + y];
    }
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic writes -> async proxy
  __syncthreads();
  const int warp = tid / 32, lane = tid & 31, g = lane >> 2, t = lane & 3, r0 = warp * 16 + g;
  uint32_t af[4] = {0, 0, 0, 0}, acc[4];
  if constexpr (!kASmem) {
    if constexpr (kType == 2) {
      a_fragment8(A, r0, t, af);
    } else {
      a_fragment16(reinterpret_cast<const uint16_t*>(A), r0, t, af);
    }
  }
  load_c(c + tile * 512, r0, t, acc);
  float f0 = __uint_as_float(acc[0]), f1 = __uint_as_float(acc[1]), f2 = __uint_as_float(acc[2]),
        f3 = __uint_as_float(acc[3]);
  const uint64_t desc_b = smem_descriptor(sb, 128, 128), desc_a = smem_descriptor(sa, 128, 256);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  if constexpr (kASmem) {
    if constexpr (kType == 0) {
      asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;\n"
                   : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3)
                   : "l"(desc_a), "l"(desc_b));
    } else if constexpr (kType == 1) {
      asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;\n"
                   : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3)
                   : "l"(desc_a), "l"(desc_b));
    } else {
      asm volatile("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, %4, %5, 1, 1, 1;\n"
                   : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3)
                   : "l"(desc_a), "l"(desc_b));
    }
  } else if constexpr (kType == 0) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1, 0;\n"
        : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3)
        : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "l"(desc_b));
  } else if constexpr (kType == 1) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1, 0;\n"
        : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3)
        : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "l"(desc_b));
  } else {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1;\n"
        : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3)
        : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "l"(desc_b));
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  const uint32_t out[4] = {__float_as_uint(f0), __float_as_uint(f1), __float_as_uint(f2), __float_as_uint(f3)};
  store_d(d + tile * 512, r0, t, out);
#else
  // Built for an architecture without wgmma (sm_100a): never launched there, see instruction_available.
  __trap();
#endif
}

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  explicit DeviceArray(size_t n) { check_cuda(cudaMalloc(&ptr, n * sizeof(T) + 16), "cudaMalloc"); }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

template <typename T>
std::vector<T> narrow(const std::vector<uint32_t>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(v[i]);
  return out;
}

template <typename T>
void upload(DeviceArray<T>& dst, const std::vector<T>& src) {
  check_cuda(cudaMemcpy(dst.ptr, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice), "copy to device");
}

}  // namespace

bool instruction_available(const InstructionInfo& instr, std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why) *why = err != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorName(err) : "no CUDA device";
    return false;
  }
  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, 0);
  if (err != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceProperties: ") + cudaGetErrorName(err);
    return false;
  }
  const int sm = prop.major * 10 + prop.minor;
  const bool hopper = sm == 90, blackwell = sm == 100;
  if (instr.needs_sm90a && !hopper) {
    if (why) *why = std::string(instr.name) + " needs sm_90a (wgmma); this device is sm_" + std::to_string(sm);
    return false;
  }
  if (!hopper && !blackwell) {
    if (why) *why = "this build has code for sm_90a and sm_100a only; the device is sm_" + std::to_string(sm);
    return false;
  }
  return true;
}

std::vector<uint32_t> run_on_device(const ProbeTiles& tiles) {
  const InstructionInfo& in = *tiles.instr;
  std::vector<uint32_t> d(static_cast<size_t>(tiles.outputs()));
  if (tiles.count == 0) return d;
  DeviceArray<uint32_t> dc(tiles.c.size()), dd(d.size());
  upload(dc, tiles.c);
  const int64_t n = tiles.count;
  const bool eight_bit = in.model->operand == MmaOperand::e4m3 || in.model->operand == MmaOperand::s8;
  if (eight_bit) {
    DeviceArray<uint8_t> da(tiles.a.size()), db(tiles.b.size());
    upload(da, narrow<uint8_t>(tiles.a));
    upload(db, narrow<uint8_t>(tiles.b));
    const unsigned mma_blocks = static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
    if (in.id == ProbeInstruction::mma_s8) {
      mma_m16n8k32_s8<<<mma_blocks, 32 * kWarpsPerBlock>>>(da.ptr, db.ptr, dc.ptr, dd.ptr, n);
    } else if (in.id == ProbeInstruction::mma_s8_k16) {
      mma_m16n8k16_s8<<<mma_blocks, 32 * kWarpsPerBlock>>>(da.ptr, db.ptr, dc.ptr, dd.ptr, n);
    } else if (in.id == ProbeInstruction::wgmma_e4m3) {
      wgmma_m64n8<2, false><<<static_cast<unsigned>(n), 128>>>(da.ptr, db.ptr, dc.ptr, dd.ptr);
    } else {
      wgmma_m64n8<2, true><<<static_cast<unsigned>(n), 128>>>(da.ptr, db.ptr, dc.ptr, dd.ptr);
    }
    check_cuda(cudaGetLastError(), "kernel launch");
    check_cuda(cudaDeviceSynchronize(), in.name);
  } else {
    DeviceArray<uint16_t> da(tiles.a.size()), db(tiles.b.size());
    upload(da, narrow<uint16_t>(tiles.a));
    upload(db, narrow<uint16_t>(tiles.b));
    const unsigned mma_blocks = static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock);
    const uint8_t* a8 = reinterpret_cast<const uint8_t*>(da.ptr);
    const uint8_t* b8 = reinterpret_cast<const uint8_t*>(db.ptr);
    switch (in.id) {
      case ProbeInstruction::mma_f16:
        mma_m16n8k16<false><<<mma_blocks, 32 * kWarpsPerBlock>>>(da.ptr, db.ptr, dc.ptr, dd.ptr, n);
        break;
      case ProbeInstruction::mma_bf16:
        mma_m16n8k16<true><<<mma_blocks, 32 * kWarpsPerBlock>>>(da.ptr, db.ptr, dc.ptr, dd.ptr, n);
        break;
      case ProbeInstruction::wgmma_f16:
        wgmma_m64n8<0, false><<<static_cast<unsigned>(n), 128>>>(a8, b8, dc.ptr, dd.ptr);
        break;
      case ProbeInstruction::wgmma_bf16:
        wgmma_m64n8<1, false><<<static_cast<unsigned>(n), 128>>>(a8, b8, dc.ptr, dd.ptr);
        break;
      case ProbeInstruction::wgmma_f16_ss:
        wgmma_m64n8<0, true><<<static_cast<unsigned>(n), 128>>>(a8, b8, dc.ptr, dd.ptr);
        break;
      case ProbeInstruction::wgmma_bf16_ss:
        wgmma_m64n8<1, true><<<static_cast<unsigned>(n), 128>>>(a8, b8, dc.ptr, dd.ptr);
        break;
      default: throw std::logic_error("not a 16-bit instruction");
    }
    check_cuda(cudaGetLastError(), "kernel launch");
    check_cuda(cudaDeviceSynchronize(), in.name);
  }
  check_cuda(cudaMemcpy(d.data(), dd.ptr, d.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost), "copy to host");
  return d;
}

std::string device_description() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  return std::string(prop.name) + ", sm_" + std::to_string(prop.major * 10 + prop.minor) + ", driver " +
         std::to_string(driver) + ", runtime " + std::to_string(runtime);
}

}  // namespace nvfp4
