"""NVFP4 kernels written with numpy (host memory, canonical format): an honest one, and variants
that each have one bug a particular check of the suite must catch.

The honest kernel dequantizes to FP32 (a*sa and b*sb are exact there: at most 6 significant
bits), sums with FP32 matmul (any order is allowed) and rounds once to FP16. An output is NaN
exactly where a scale its row or column uses is NaN (SPEC.md section 3 rule 1); NaN scales are
zeroed before the matmul, since a BLAS may skip zero operands and so lose a NaN.
"""
import ctypes

import numpy as np

import nvfp4check as nc

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def e4m3_table(signed):
    """The 256 E4M3FN scale bytes as float32 (NaN for 0x7F and 0xFF); ue4m3 ignores the sign bit."""
    t = np.empty(256, dtype=np.float32)
    for byte in range(256):
        e, m = (byte >> 3) & 15, byte & 7
        if byte & 0x7F == 0x7F:
            v = np.nan
        elif e == 0:
            v = m * 2.0 ** -9
        else:
            v = (8 + m) * 2.0 ** (e - 10)
        t[byte] = -v if signed and byte & 0x80 else v
    return t


UE4M3 = e4m3_table(False)


def codes(packed, k, swap_nibbles=False):
    """(..., k/2) packed bytes -> (..., k) E2M1 codes; element 2i is the LOW nibble of byte i."""
    low, high = packed & 0x0F, packed >> 4
    if swap_nibbles:
        low, high = high, low
    return np.stack([low, high], axis=-1).reshape(*packed.shape[:-1], k)


def linear_scales(p, which, rows):
    """The (l, rows, kb) scale bytes of p.sfa or p.sfb in linear order, whatever p's layout."""
    return to_linear({"a": p.sfa, "b": p.sfb, "b2": p.sfb2}[which], rows, p.k, p.l, p.sf_layout)


def to_linear(sf, rows, k, l, layout):
    """(l, rows, kb) scale bytes in linear order from sf in the given layout."""
    kb = (k + 15) // 16
    if layout == "linear" or rows == 0:
        return sf.reshape(l, rows, kb)
    b = np.arange(l)[:, None, None]
    i = np.arange(rows)[None, :, None]
    s = np.arange(kb)[None, None, :]
    mt, kt = (rows + 127) // 128, (kb + 3) // 4
    offset = ((b * mt + i // 128) * kt + s // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + s % 4
    return sf.reshape(-1)[offset]


def round_to(x, out_type):
    """float64 values rounded once to nearest-even in the output type, as the array p.c holds
    them (float16, float32, or BF16 as uint16 bits); NaN stays NaN, beyond the range is Inf."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if out_type == "fp16":
            return x.astype(np.float16)  # numpy rounds a double to half once
        if out_type == "fp32":
            return x.astype(np.float32)
        # BF16: 8 significant bits, FP32's exponents, subnormal steps of 2^-133. Scaling by the
        # power of two `step` is exact, so np.rint (half to even) rounds once.
        _, e = np.frexp(np.where(np.isfinite(x), x, 0.0))
        step = np.ldexp(1.0, np.maximum(e - 8, -133))
        v = np.rint(x / step) * step
        v = np.where(np.abs(v) >= 2.0 ** 128, np.copysign(np.inf, x), v)
        bits = (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        return np.where(np.isnan(x), np.uint16(0x7FC0), bits)


def products(a, sfa, b, sfb, k, layout, l, rows_a, rows_b):
    """(sum over x of A*SA*B*SB as float64 (l, rows_a, rows_b), NaN where a scale used is NaN).
    Exact for the small k of the tests: products are multiples of 2^-20 below 2^43."""
    av, a_nan = dequantize(a.reshape(l, rows_a, k // 2), to_linear(sfa, rows_a, k, l, layout), k)
    bv, b_nan = dequantize(b.reshape(l, rows_b, k // 2), to_linear(sfb, rows_b, k, l, layout), k)
    acc = np.matmul(av.astype(np.float64), bv.astype(np.float64).transpose(0, 2, 1))
    acc[a_nan[:, :, None] | b_nan[:, None, :]] = np.nan
    return acc


def reference_gemm(p):
    """Any GEMV or GEMM in any output type: alpha times the float64 sum, rounded once."""
    acc = products(p.a, p.sfa, p.b, p.sfb, p.k, p.sf_layout, p.l, p.m, p.n)
    p.c[...] = round_to(np.float64(np.float32(p.alpha)) * acc, p.out_type)


def reference_grouped(p):
    """grouped_gemm in any output type and arrangement: each group on its own views (which point
    into the packed buffers when p.packed)."""
    assert p.op == "grouped_gemm"
    for g in p.groups:
        if g.m == 0:
            assert g.a.size == g.c.size == 0
            continue
        acc = products(g.a, g.sfa, g.b, g.sfb, g.k, p.sf_layout, 1, g.m, g.n)
        g.c[...] = round_to(np.float64(np.float32(g.alpha)) * acc, p.out_type)


def silu(x):
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-x))


def reference_dual(p):
    """dual_gemm in any output type: silu(alpha * A B1) * (alpha2 * A B2) in float64, rounded once."""
    assert p.op == "dual_gemm"
    gate = np.float64(np.float32(p.alpha)) * products(p.a, p.sfa, p.b, p.sfb, p.k, p.sf_layout, p.l, p.m, p.n)
    up = np.float64(np.float32(p.alpha2)) * products(p.a, p.sfa, p.b2, p.sfb2, p.k, p.sf_layout, p.l, p.m, p.n)
    with np.errstate(invalid="ignore"):
        p.c[...] = round_to(silu(gate) * up, p.out_type)


def reference_any(p):
    """Every op, every output type."""
    {"grouped_gemm": reference_grouped, "dual_gemm": reference_dual}.get(p.op, reference_gemm)(p)


def dequantize(packed, scales, k, swap_nibbles=False, keep=None):
    """(values (l, rows, k) float32 with NaN scales zeroed, NaN mask (l, rows))."""
    sv = UE4M3[scales]
    nan_rows = np.isnan(sv).any(axis=-1)
    sv = np.where(np.isnan(sv), np.float32(0), sv)
    values = E2M1[codes(packed, k, swap_nibbles)] * np.repeat(sv, 16, axis=-1)[..., :k]
    if keep is not None:
        values[..., keep:] = 0
    return values, nan_rows


def compute(p, swap_a_nibbles=False, keep=None):
    """C = RN16(alpha * FP32 sum) as float16 (l, m, n)."""
    av, a_nan = dequantize(p.a, linear_scales(p, "a", p.m), p.k, swap_a_nibbles, keep)
    bv, b_nan = dequantize(p.b, linear_scales(p, "b", p.n), p.k, False, keep)
    acc = np.matmul(av, bv.transpose(0, 2, 1))
    acc[a_nan[:, :, None] | b_nan[:, None, :]] = np.nan
    with np.errstate(over="ignore"):  # beyond 65520 is Inf, as it should be
        return (np.float32(p.alpha) * acc).astype(np.float16)


def honest_gemv(p):
    """Declared for op "gemv": refuses a GEMM, as a kernel must refuse what it does not declare."""
    if p.op != "gemv":
        return nc.UNSUPPORTED
    p.c[...] = compute(p)
    return None


def honest_gemm(p):
    """Declared for op "gemm"."""
    if p.op != "gemm":
        return nc.UNSUPPORTED
    p.c[...] = compute(p)
    return None


def honest_any(p):
    """Declared for both ops (and any output type: FP32 sums, rounded once to it)."""
    if p.out_type != "fp16":
        return reference_any(p)
    p.c[...] = compute(p)


def nibble_order_bug(p):
    """Reads element 2i of A from the HIGH nibble (B right): the oracle sees it. (Swapped in both
    operands, the pairs would still meet their partners and the sum would not change.)"""
    p.c[...] = compute(p, swap_a_nibbles=True)


def k_tail_bug(p):
    """Drops the last k % 16 elements (only whole scale blocks): the oracle sees it where k % 16 != 0."""
    p.c[...] = compute(p, keep=(p.k // 16) * 16)


_cache = {}


def stale_cache_bug(p):
    """Returns the result it cached for the same A pointer and shape: the stale-state check sees it."""
    key = (p.a.ctypes.data, p.m, p.n, p.k, p.l)
    if key not in _cache:
        _cache[key] = compute(p)
    p.c[...] = _cache[key]


def modifies_input_bug(p):
    """Flips bits of its input A after computing: the inputs-modified check sees it."""
    p.c[...] = compute(p)
    p.a.reshape(-1)[0] ^= 0x11


class KernelBug(RuntimeError):
    pass


def raises_bug(p):
    """Raises: the case fails with check "exception" and the traceback."""
    raise KernelBug(f"this kernel cannot do k={p.k}")


def unwritten_bug(p):
    """Leaves the last output of every batch unwritten: the unwritten-output check sees it."""
    out = compute(p)
    p.c[:, :-1, :] = out[:, :-1, :]
    p.c[:, -1, :-1] = out[:, -1, :-1]


def writes_past_end_bug(p):
    """Writes one FP16 past the end of C through a raw pointer: the guard check sees it."""
    p.c[...] = compute(p)
    ctypes.memmove(p.c.ctypes.data + p.c.nbytes, b"\x00\x3c", 2)


def refuses_m4(p):
    """Honest, declared with m_multiple=4: refuses other m, touching nothing."""
    if p.m % 4:
        return nc.UNSUPPORTED
    p.c[...] = compute(p)
    return None


def ignores_m4(p):
    """Declared with m_multiple=4 but computes any m: the ignored-unsupported check sees it."""
    p.c[...] = compute(p)


def returns_array_bug(p):
    """Returns its result instead of writing p.c: a kernel-error with the contract in the message."""
    return compute(p)


def reads_padding_bug(p):
    """Adds 0 * every scale cell of its row's tile row, padding included (a kernel loading whole
    tiles unmasked): harmless unless a padding cell is NaN, which the runner sees to. Mirrors
    reads_padding_host of harness/tests/wrong_host_kernels.cc."""
    out = compute(p)
    if p.sf_layout == "permuted":
        rows = np.arange(p.m)
        cells = UE4M3[p.sfa][:, rows // 128, :, rows % 32, (rows % 128) // 32, :]  # (m, l, Kt, 4)
        poisoned = np.isnan(cells).any(axis=(2, 3)).T  # (l, m)
        out[poisoned] = np.float16(np.nan)
    p.c[...] = out


def _result_fp32(p, u):
    """Unit u's (p itself, or a group of p) FP32 result before any output rounding: the float64
    sum (exact for the tests' small k) rounded once to FP32, as an FP32 epilogue holds it."""
    rows_a, rows_b, l = (u.m, u.n, 1) if u is not p else (p.m, p.n, p.l)
    alpha = np.float64(np.float32(u.alpha))
    gate = alpha * products(u.a, u.sfa, u.b, u.sfb, u.k, p.sf_layout, l, rows_a, rows_b)
    if p.op != "dual_gemm":
        with np.errstate(over="ignore"):  # beyond FP32's range is Inf, as an FP32 epilogue holds it
            return gate.astype(np.float32)
    up = np.float64(np.float32(p.alpha2)) * products(p.a, p.sfa, p.b2, p.sfb2, p.k, p.sf_layout, l, rows_a, rows_b)
    with np.errstate(invalid="ignore", over="ignore"):
        return (silu(gate) * up).astype(np.float32)


def nvfp4_out_te(p, ignore_global_scale=False):
    """GEMM, grouped GEMM or dual GEMM writing block-scaled NVFP4 output (SPEC.md section 2), as a
    fused epilogue does: each row's FP32 results quantized along n in blocks of 16 by
    TransformerEngine's recipe with the output global scale. ignore_global_scale: the public bug
    of a quantizer without one (every block with amax above 2688 clipped)."""
    import types

    import numpy_quantizers as Q

    for u in p.groups if p.op == "grouped_gemm" else [p]:
        if u.m == 0:
            continue
        x = _result_fp32(p, u)
        l = x.shape[0]
        shim = types.SimpleNamespace(x=x, in_type="fp32", q=u.q, sfq=u.sfq, sf_layout=p.sf_layout, l=l, m=u.m,
                                     k=u.n, global_scale=1.0 if ignore_global_scale else float(u.global_scale))
        Q.quantize_te(shim)
    return None


def nvfp4_out_no_global_scale(p):
    return nvfp4_out_te(p, ignore_global_scale=True)
