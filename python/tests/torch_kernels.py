"""NVFP4 kernels on the GPU for the GPU tests: torch eager (canonical and GPU MODE format), a CUDA
kernel compiled with torch.utils.cpp_extension.load_inline (GPU MODE format), a Triton kernel
(canonical), and the GPU MODE cheats a check must catch.

Every honest one sums in FP32 (any order) with exact products: a*sa and b*sb have at most 6
significant bits, so each product fits FP32 exactly; the result is rounded once to FP16.
"""
import torch

from nvfp4check import UNSUPPORTED
from nvfp4check.adapter import unpermute_scales

# Full FP32 in matmul: TF32 would round the operands (they are exact in FP32, not in TF32's 10 bits).
torch.backends.cuda.matmul.allow_tf32 = False
torch.set_float32_matmul_precision("highest")

_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
_luts = {}


def _e2m1_lut(device):
    if device not in _luts:
        _luts[device] = torch.tensor(_E2M1, dtype=torch.float32, device=device)
    return _luts[device]


def dequantize(packed, scales, k):
    """packed (l, rows, k/2) uint8 E2M1, scales (l, rows, kb) uint8 ue4m3 -> (values (l, rows, k)
    float32 with NaN scales zeroed, rows that use a NaN scale (l, rows))."""
    codes = torch.stack([packed & 15, packed >> 4], dim=-1).reshape(*packed.shape[:-1], k).long()
    sv = scales.view(torch.float8_e4m3fn).float().abs()  # ue4m3: the sign bit is ignored
    nan_rows = torch.isnan(sv).any(dim=-1)
    sv = torch.nan_to_num(sv, nan=0.0)
    return _e2m1_lut(packed.device)[codes] * sv.repeat_interleave(16, dim=-1)[..., :k], nan_rows


def nvfp4_matmul(a, b, sfa, sfb, k, alpha=1.0):
    """a (l, m, k/2), b (l, n, k/2), linear scales (l, m, kb), (l, n, kb), all uint8 on one device ->
    RN16(alpha * sum) as (l, m, n) float16. An output is NaN where its row or column uses a NaN scale."""
    av, a_nan = dequantize(a, sfa, k)
    bv, b_nan = dequantize(b, sfb, k)
    acc = torch.bmm(av, bv.transpose(1, 2))
    acc = acc.masked_fill(a_nan[:, :, None] | b_nan[:, None, :], float("nan"))
    return (acc * alpha).to(torch.float16)


# -- canonical ------------------------------------------------------------------------------------

def linear(p, which):
    sf, rows = (p.sfa, p.m) if which == "a" else (p.sfb, p.n)
    return sf if p.sf_layout == "linear" else unpermute_scales(sf, rows, (p.k + 15) // 16)


def torch_canonical(p):
    """Torch eager, canonical format, both ops and layouts."""
    p.c.copy_(nvfp4_matmul(p.a, p.b, linear(p, "a"), linear(p, "b"), p.k, p.alpha))


def torch_canonical_other_stream(p):
    """Computes on a stream of its own, not ordered after the runner's."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch_canonical(p)


# -- GPU MODE format ------------------------------------------------------------------------------

def gpumode_operands(data):
    """(a, b, sfa, sfb) as (l, rows, ...) uint8 from GPU MODE's tuple, b's padding rows dropped, and
    the linear scales taken from the permuted ones on the device (as a GPU kernel reads them)."""
    a, b, _, _, sfa_p, sfb_p, c = data
    m, half, l = a.shape
    n, k = c.shape[1], 2 * half
    kb = (k + 15) // 16
    a8 = a.view(torch.uint8).permute(2, 0, 1)
    b8 = b.view(torch.uint8).permute(2, 0, 1)[:, :n]
    # [32, 4, rest, 4, rest_k, l] -> [l, rest, rest_k, 32, 4, 4], then rows and blocks in order.
    sfa = unpermute_scales(sfa_p.view(torch.uint8).permute(5, 2, 4, 0, 1, 3), m, kb)
    sfb = unpermute_scales(sfb_p.view(torch.uint8).permute(5, 2, 4, 0, 1, 3), n, kb)
    return a8, b8, sfa, sfb, k


def torch_gpumode(data):
    """Torch eager, GPU MODE's custom_kernel(data) -> c."""
    c = data[6]
    a, b, sfa, sfb, k = gpumode_operands(data)
    c.copy_(nvfp4_matmul(a, b, sfa, sfb, k).permute(1, 2, 0))
    return c


_cached = {}


def cheat_cached_output(data):
    """Returns the output it computed before for the same a pointer and shape (the stale-state check)."""
    key = (data[0].data_ptr(), tuple(data[6].shape))
    if key not in _cached:
        a, b, sfa, sfb, k = gpumode_operands(data)
        _cached[key] = nvfp4_matmul(a, b, sfa, sfb, k).permute(1, 2, 0).clone()
    return _cached[key]


def cheat_returns_c_unwritten(data):
    """Returns c without writing it (the unwritten-output check)."""
    return data[6]


def cheat_other_stream_slow(data):
    """Writes c from a stream of its own, 50 ms late (the stream check: C changes after the
    runner's stream is done)."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        return torch_gpumode(data)


def cheat_other_stream(data):
    """Writes c from a stream of its own at once (the runner's poison comes back over it, or it
    lands after the runner's stream is done)."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        return torch_gpumode(data)


def torch_gpumode_legacy_stream(data):
    """Honest, on the legacy default stream (as a kernel<<<grid, block>>> without a stream is in
    GPU MODE's harness): allowed in the gpumode format."""
    with torch.cuda.stream(torch.cuda.default_stream()):
        return torch_gpumode(data)


# -- load_inline CUDA kernel, GPU MODE format -----------------------------------------------------

CUDA_SOURCE = r"""
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>
#include <cstdint>

__device__ float e2m1(unsigned c) {
  const float v[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  return (c & 8u) ? -v[c & 7u] : v[c & 7u];
}
// ue4m3: sign bit ignored, 0x7F/0xFF NaN, exponent 0 subnormal m * 2^-9.
__device__ float ue4m3(unsigned b) {
  const unsigned e = (b >> 3) & 15u, m = b & 7u;
  if ((b & 0x7Fu) == 0x7Fu) return __int_as_float(0x7fc00000);
  return e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8u + m), (int)e - 10);
}
__device__ long long sf_offset(long long rows, long long kb, long long b, long long i, long long s) {
  const long long mt = (rows + 127) / 128, kt = (kb + 3) / 4;
  return ((b * mt + i / 128) * kt + s / 4) * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 + s % 4;
}
// One thread per output; c is GPU MODE's [m, n, l] over a contiguous [l, m, n].
__global__ void nvfp4_gemm_kernel(const uint8_t* a, const uint8_t* b, const uint8_t* sfa, const uint8_t* sfb,
                                  __half* c, long long m, long long n, long long k, long long l, long long b_rows) {
  const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (idx >= l * m * n) return;
  const long long j = idx % n, i = (idx / n) % m, bt = idx / (m * n);
  const long long kb = (k + 15) / 16, row_bytes = k / 2;
  const uint8_t* ar = a + (bt * m + i) * row_bytes;
  const uint8_t* br = b + (bt * b_rows + j) * row_bytes;
  float acc = 0.f;
  for (long long s = 0; s < kb; ++s) {
    const float sa = ue4m3(sfa[sf_offset(m, kb, bt, i, s)]), sb = ue4m3(sfb[sf_offset(n, kb, bt, j, s)]);
    const long long end = min(16 * s + 16, k);
    for (long long x = 16 * s; x < end; ++x) {
      const unsigned ac = (x & 1) ? ar[x / 2] >> 4 : ar[x / 2] & 15u;
      const unsigned bc = (x & 1) ? br[x / 2] >> 4 : br[x / 2] & 15u;
      acc += e2m1(ac) * sa * e2m1(bc) * sb;
    }
  }
  c[(bt * m + i) * n + j] = __float2half_rn(acc);
}

void nvfp4_gemm_launch(int64_t a, int64_t b, int64_t sfa, int64_t sfb, int64_t c, int64_t m, int64_t n, int64_t k,
                       int64_t l, int64_t b_rows) {
  const long long outputs = l * m * n;
  const int threads = 128;
  const unsigned blocks = (unsigned)((outputs + threads - 1) / threads);
  nvfp4_gemm_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      (const uint8_t*)a, (const uint8_t*)b, (const uint8_t*)sfa, (const uint8_t*)sfb, (__half*)c, m, n, k, l, b_rows);
}
"""

CPP_SOURCE = ("void nvfp4_gemm_launch(int64_t a, int64_t b, int64_t sfa, int64_t sfb, int64_t c, int64_t m, "
              "int64_t n, int64_t k, int64_t l, int64_t b_rows);")


def load_cuda_extension(build_directory):
    from torch.utils.cpp_extension import load_inline

    return load_inline(name="nvfp4check_test_gemm", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                       functions=["nvfp4_gemm_launch"], build_directory=build_directory,
                       extra_cuda_cflags=["-O2"], verbose=False)


def cuda_gpumode(extension):
    """custom_kernel(data) of a GPU MODE submission calling the compiled kernel on torch's stream."""
    def custom_kernel(data):
        a, b, _, _, sfa_p, sfb_p, c = data
        m, half, l = a.shape
        extension.nvfp4_gemm_launch(a.data_ptr(), b.data_ptr(), sfa_p.data_ptr(), sfb_p.data_ptr(), c.data_ptr(),
                                    m, c.shape[1], 2 * half, l, b.shape[0])
        return c

    return custom_kernel


# -- Triton, canonical format, linear scales --------------------------------------------------------

def triton_canonical():
    """A Triton kernel (one program per output, FP32 sum of exact products) as a canonical fn."""
    import triton
    import triton.language as tl

    @triton.jit
    def e2m1(code):
        mag = code & 7
        v = tl.where(mag < 4, mag.to(tl.float32) * 0.5, tl.where(mag == 7, 6.0, (mag - 2).to(tl.float32)))
        return tl.where((code & 8) != 0, -v, v)

    @triton.jit
    def ue4m3(byte):
        b7 = byte & 0x7F
        e = b7 >> 3
        mant = b7 & 7
        bits = ((e + 120) << 23) | (mant << 20)  # (8 + m) * 2^(e - 10) as FP32 bits
        bits = tl.where(b7 == 0x7F, 0x7FC00000, bits)
        return tl.where(e == 0, mant.to(tl.float32) * 0.001953125, bits.to(tl.float32, bitcast=True))

    @triton.jit
    def nvfp4_dot_kernel(a_ptr, b_ptr, sfa_ptr, sfb_ptr, c_ptr, m, n, k, kb, alpha, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        j = pid % n
        i = (pid // n) % m
        bt = pid // (m * n)
        half = k // 2
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for x0 in range(0, k, BLOCK):
            x = x0 + tl.arange(0, BLOCK)
            mask = x < k
            ab = tl.load(a_ptr + (bt * m + i) * half + x // 2, mask=mask, other=0).to(tl.int32)
            bb = tl.load(b_ptr + (bt * n + j) * half + x // 2, mask=mask, other=0).to(tl.int32)
            ac = tl.where(x % 2 == 0, ab & 15, ab >> 4)
            bc = tl.where(x % 2 == 0, bb & 15, bb >> 4)
            sa = ue4m3(tl.load(sfa_ptr + (bt * m + i) * kb + x // 16, mask=mask, other=0).to(tl.int32))
            sb = ue4m3(tl.load(sfb_ptr + (bt * n + j) * kb + x // 16, mask=mask, other=0).to(tl.int32))
            acc += e2m1(ac) * sa * e2m1(bc) * sb
        total = tl.sum(acc, axis=0)
        tl.store(c_ptr + pid, (total * alpha).to(tl.float16))

    def triton_gemm(p):
        if p.sf_layout != "linear":
            return UNSUPPORTED
        kb = (p.k + 15) // 16
        nvfp4_dot_kernel[(p.l * p.m * p.n,)](p.a, p.b, p.sfa, p.sfb, p.c, p.m, p.n, p.k, kb, p.alpha, BLOCK=64)
        return None

    return triton_gemm
