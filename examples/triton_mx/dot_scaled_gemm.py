"""An MX GEMM in Triton through tl.dot_scaled, written as its author would write it, and checked
by nvfp4check (SPEC.md revision 4: MXFP4, MXFP8 E4M3 and E5M2 operands, any pair, E8M0 scales).

tl.dot_scaled takes MX operands as uint8 (E2M1 packed two to a byte along K, low nibble first;
FP8 one byte an element) with uint8 E8M0 scales, one per 32 elements: the suite's own layout
(section 2) with linear scales, so the kernel reads the suite's bytes as they are. On Blackwell
it maps to the block-scaled MMA; on Hopper (sm_90) Triton emulates it: the operands are upcast to
BF16 with their scales applied, then multiplied on the BF16 tensor cores.

    python3 examples/triton_mx/dot_scaled_gemm.py [CASES]

checks it and prints the report (exit status 0 pass, 1 fail)."""
import sys

import nvfp4check as nc

# The suite's format names and Triton's.
TRITON_FORMAT = {"mxfp4": "e2m1", "mxfp8_e4m3": "e4m3", "mxfp8_e5m2": "e5m2"}
MX_FORMATS = tuple(TRITON_FORMAT)


def make_kernel():
    """The canonical-format fn (nvfp4check.adapter): p.a (l, m, a_row) and p.b (l, n, b_row)
    uint8, p.sfa (l, m, kb) and p.sfb (l, n, kb) uint8 E8M0, p.c (l, m, n) written in place."""
    import triton
    import triton.language as tl

    @triton.jit
    def mx_gemm_kernel(a_ptr, b_ptr, sfa_ptr, sfb_ptr, c_ptr, M, N, K, KB, alpha,
                       A_FORMAT: tl.constexpr, B_FORMAT: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_m, pid_n, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        A_DIV: tl.constexpr = 2 if A_FORMAT == "e2m1" else 1
        B_DIV: tl.constexpr = 2 if B_FORMAT == "e2m1" else 1
        a_row = K // A_DIV
        b_row = K // B_DIV
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_ka = tl.arange(0, BLOCK_K // A_DIV)
        offs_kb = tl.arange(0, BLOCK_K // B_DIV)
        offs_s = tl.arange(0, BLOCK_K // 32)
        a_base = a_ptr + (batch * M + offs_m[:, None]) * a_row
        b_base = b_ptr + (batch * N + offs_n[None, :]) * b_row
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ka = k0 // A_DIV + offs_ka
            kb = k0 // B_DIV + offs_kb
            s = k0 // 32 + offs_s
            a = tl.load(a_base + ka[None, :], mask=(offs_m[:, None] < M) & (ka[None, :] < a_row), other=0)
            b = tl.load(b_base + kb[:, None], mask=(offs_n[None, :] < N) & (kb[:, None] < b_row), other=0)
            sa = tl.load(sfa_ptr + (batch * M + offs_m[:, None]) * KB + s[None, :],
                         mask=(offs_m[:, None] < M) & (s[None, :] < KB), other=127)
            sb = tl.load(sfb_ptr + (batch * N + offs_n[:, None]) * KB + s[None, :],
                         mask=(offs_n[:, None] < N) & (s[None, :] < KB), other=127)
            acc = tl.dot_scaled(a, sa, A_FORMAT, b, sb, B_FORMAT, acc)
        c = acc * alpha
        c_ptrs = c_ptr + (batch * M + offs_m[:, None]) * N + offs_n[None, :]
        tl.store(c_ptrs, c.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

    def triton_mx_gemm(p):
        kb = (p.k + 31) // 32
        grid = (triton.cdiv(p.m, 64), triton.cdiv(p.n, 64), p.l)
        mx_gemm_kernel[grid](p.a, p.b, p.sfa, p.sfb, p.c, p.m, p.n, p.k, kb, p.alpha,
                             A_FORMAT=TRITON_FORMAT[p.a_format], B_FORMAT=TRITON_FORMAT[p.b_format],
                             BLOCK_M=64, BLOCK_N=64, BLOCK_K=128)

    return triton_mx_gemm


# What the kernel declares, as its author would: both ops, linear scales (what dot_scaled
# reads), every MX pair, the three output types, accumulation on the tensor cores.
DECLARATION = dict(op=("gemv", "gemm"), memory="cuda", sf_layouts=("linear",), flags=nc.FLAG_MMA_ACCUMULATE,
                   name="triton_dot_scaled", out_types=("fp16", "bf16", "fp32"), a_formats=MX_FORMATS,
                   b_formats=MX_FORMATS)


def check(cases=200, seed=None, case_dir=None):
    return nc.check(make_kernel(), cases=cases, seed=seed, case_dir=case_dir, **DECLARATION)


def replay(case_file):
    return nc.replay(case_file, make_kernel(), **DECLARATION)


if __name__ == "__main__":
    report = check(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
    print(report)
    sys.exit(0 if report.verdict != "fail" else 1)
