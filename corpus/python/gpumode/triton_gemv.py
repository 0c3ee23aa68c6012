"""A GPU MODE nvfp4_gemv submission in Triton (JIT-compiled on its first call): one program per
(row, batch), E2M1 nibbles and UE4M3 scales (sign bit ignored) decoded with integer ops, fp32 sums.
Expected: pass `--problem nvfp4_gemv` (python/tests/test_gpu_gpumode.py)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _e2m1(n):
    mag = n & 7
    e = mag >> 1
    m = mag & 1
    v = tl.where(e == 0, m.to(tl.float32) * 0.5, (1.0 + m.to(tl.float32) * 0.5) * tl.exp2((e - 1).to(tl.float32)))
    return tl.where((n & 8) != 0, -v, v)


@triton.jit
def _e4m3(b):
    e = (b >> 3) & 15
    m = (b & 7).to(tl.float32)
    v = tl.where(e == 0, m * 0.001953125, (1.0 + m * 0.125) * tl.exp2((e - 7).to(tl.float32)))
    return tl.where((b & 0x7F) == 0x7F, float("nan"), v)


@triton.jit
def _gemv(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, m, half_k, kb, b_rows, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    batch = tl.program_id(1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, half_k, BLOCK):
        j = start + tl.arange(0, BLOCK)
        ok = j < half_k
        x = tl.load(a_ptr + (batch * m + row) * half_k + j, mask=ok, other=0).to(tl.int32)
        y = tl.load(b_ptr + batch * b_rows * half_k + j, mask=ok, other=0).to(tl.int32)
        s = _e4m3(tl.load(sa_ptr + (batch * m + row) * kb + j // 8, mask=ok, other=0).to(tl.int32)) * \
            _e4m3(tl.load(sb_ptr + batch * b_rows * kb + j // 8, mask=ok, other=0).to(tl.int32))
        p = (_e2m1(x & 15) * _e2m1(y & 15) + _e2m1(x >> 4) * _e2m1(y >> 4)) * s
        acc += tl.where(ok, p, 0.0)
    tl.store(c_ptr + batch * m + row, tl.sum(acc, axis=0).to(tl.float16))


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    m, half_k, l = a.shape
    kb = sfa.shape[1]
    a8, b8 = a.view(torch.uint8).permute(2, 0, 1), b.view(torch.uint8).permute(2, 0, 1)
    sa, sb = sfa.view(torch.uint8).permute(2, 0, 1), sfb.view(torch.uint8).permute(2, 0, 1)
    _gemv[(m, l)](a8, b8, sa, sb, c, m, half_k, kb, b.shape[0], BLOCK=256)
    return c
