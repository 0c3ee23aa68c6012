"""Where dot_scaled_gemm.py's kernel goes wrong, outside the suite: its FP32 output on chosen E8M0
scales (unit, distinct 2^-10..2^10, 0x00 against 0xFE, 0x00 alone, 2^-27 against 2^27, a NaN
scale) against float64 sums of the exact products (math.fsum: one rounding). For reading a
failure of nc.check by its cause: Triton's BF16 emulation on Hopper applies each scale to the
elements before the MMA, where 2^-127 (0x00) and 2^127 leave BF16's exact range.

    python3 examples/triton_mx/probe_scales.py      (on a CUDA machine with torch and Triton)"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dot_scaled_gemm as ex  # noqa: E402

E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
def e2m1(c): v = E2M1[c & 7]; return -v if c & 8 else v
def e4m3(b):
    s = -1.0 if b & 0x80 else 1.0; e = (b >> 3) & 15; m = b & 7
    if (b & 0x7F) == 0x7F: return math.nan
    return s * (m * 2.0**-9 if e == 0 else (8 + m) * 2.0**(e - 10))
def e5m2(b):
    s = -1.0 if b & 0x80 else 1.0; e = (b >> 2) & 31; m = b & 3
    if e == 31: return math.nan if m else s * math.inf
    return s * (m * 2.0**-16 if e == 0 else (4 + m) * 2.0**(e - 17))
def elems(fmt, row, k):
    if fmt == "mxfp4": return [e2m1((row[x // 2] >> (4 * (x % 2))) & 15) for x in range(k)]
    f = e4m3 if fmt == "mxfp8_e4m3" else e5m2
    return [f(int(v)) for v in row[:k]]
def e8m0(b): return math.nan if b == 255 else 2.0 ** (int(b) - 127)

class P: pass

def run(fa, fb, m, n, k, sa_fn, sb_fn, rng, label):
    kb = (k + 31) // 32
    def data(fmt, rows):
        nb = k // 2 if fmt == "mxfp4" else k
        d = rng.integers(0, 256, (1, rows, nb), dtype=np.uint8)
        if fmt == "mxfp8_e4m3": d[(d & 0x7F) == 0x7F] ^= 1
        if fmt == "mxfp8_e5m2": d[(d & 0x7C) == 0x7C] ^= 4
        return d
    A, B = data(fa, m), data(fb, n)
    SA = np.array([[[sa_fn(i, s) for s in range(kb)] for i in range(m)]], np.uint8)
    SB = np.array([[[sb_fn(j, s) for s in range(kb)] for j in range(n)]], np.uint8)
    p = P(); p.op = "gemm"; p.m, p.n, p.k, p.l, p.alpha = m, n, k, 1, 1.0
    p.a_format, p.b_format, p.sf_layout, p.out_type = fa, fb, "linear", "fp32"
    p.a, p.b = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    p.sfa, p.sfb = torch.from_numpy(SA).cuda(), torch.from_numpy(SB).cuda()
    p.c = torch.full((1, m, n), float("nan"), dtype=torch.float32, device="cuda")
    try:
        ex.make_kernel()(p); torch.cuda.synchronize()
    except Exception as e:
        print(f"{label} {fa} x {fb}: ERROR {type(e).__name__}: {str(e)[-600:]}"); return
    got = p.c.cpu().numpy()[0]
    worst, bad, nanmis = 0.0, 0, 0
    ea = [elems(fa, A[0, i], k) for i in range(m)]; eb = [elems(fb, B[0, j], k) for j in range(n)]
    first = None
    for i in range(m):
        for j in range(n):
            terms = [ea[i][x] * e8m0(SA[0, i, x // 32]) * eb[j][x] * e8m0(SB[0, j, x // 32]) for x in range(k)]
            if any(math.isnan(t) for t in terms): exp = math.nan
            else:
                try: exp = math.fsum(terms)
                except (OverflowError, ValueError): exp = math.nan
            g = float(got[i, j]); S = sum(abs(t) for t in terms if not math.isnan(t))
            if math.isnan(exp) or math.isnan(g):
                if math.isnan(exp) != math.isnan(g): nanmis += 1; first = first or (i, j, exp, g)
                continue
            err = abs(g - exp) / S if S else abs(g)
            if err > 2.0**-20 or (S == 0 and g != 0): bad += 1; first = first or (i, j, exp, g)
            worst = max(worst, err if S else 0)
    print(f"{label} {fa} x {fb}: {m}x{n}x{k} worst |err|/S {worst:.3g}, {bad} beyond 2^-20 S, {nanmis} NaN mismatches; first {first}")

rng = np.random.default_rng(7)
pairs = [("mxfp4", "mxfp4"), ("mxfp8_e4m3", "mxfp4"), ("mxfp4", "mxfp8_e5m2"), ("mxfp8_e5m2", "mxfp8_e4m3")]
for fa, fb in pairs:
    run(fa, fb, 64, 64, 128, lambda i, s: 127, lambda j, s: 127, rng, "unit scales")
    run(fa, fb, 64, 64, 128, lambda i, s: 117 + (3 * i + 7 * s) % 21, lambda j, s: 117 + (5 * j + 3 * s) % 21, rng, "distinct 2^-10..2^10")
    run(fa, fb, 16, 16, 64, lambda i, s: 0x00 if s == 0 else 127, lambda j, s: 0xFE if s == 0 else 127, rng, "0x00 vs 0xFE")
    run(fa, fb, 16, 16, 64, lambda i, s: 0x00 if s == 0 else 127, lambda j, s: 127, rng, "0x00 vs 1")
    run(fa, fb, 16, 16, 64, lambda i, s: 100, lambda j, s: 154, rng, "2^-27 vs 2^27")
    run(fa, fb, 16, 16, 64, lambda i, s: 0xFF if (i, s) == (0, 0) else 127, lambda j, s: 127, rng, "NaN scale")
