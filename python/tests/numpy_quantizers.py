"""NVFP4 quantizers in numpy, written the way the projects' Python references are (vLLM's
ref_nvfp4_quant, FlashInfer's ref_fp4_quant_te, torchao's nvfp4_quantize): FP32 array arithmetic
step by step, an explicit round-to-nearest-even table for E2M1, the E4M3 scale by rounding the
float to the E4M3 grid. Written from the recipe table of SPEC.md section 2 and the operation
sequences in shared/evidence/quantizer-recipes.md, independently of the suite's C++ reference,
so that nc.check on them tests the adapter, the declarations and the oracle together.

Each kernel takes the canonical quantize problem (nvfp4check.adapter): p.x (l, m, k) (BF16 as
uint16 bits), p.q (l, m, k/2) and p.sfq (flat, in p.sf_layout), written in place; rows=16 makes
it TransformerEngine's 16 x 16 tile quantizer (declared with FLAG_QUANT_2D).
"""
import numpy as np

F32 = np.float32
FLT_MAX = F32(np.finfo(np.float32).max)
C6 = F32(1.0) / F32(6.0)  # RN(1/6), 0x3E2AAAAB


def as_float32(x, in_type):
    """The input words as float32 (every FP16, BF16 and FP32 value is exactly one)."""
    if in_type == "bf16":
        return (np.asarray(x, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(x).astype(np.float32)


def e2m1_codes(v):
    """RN (ties to even) onto E2M1 {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating to +-6 (Inf too), NaN
    to +6: the 4-bit codes, sign in bit 3 (-0 keeps it, as the hardware's cvt does)."""
    mag = np.abs(v)
    code = np.select(
        [mag <= 0.25, mag < 0.75, mag <= 1.25, mag < 1.75, mag <= 2.5, mag < 3.5, mag <= 5.0],
        [0, 1, 2, 3, 4, 5, 6], default=7).astype(np.uint8)
    nan = np.isnan(v)
    code = np.where(np.signbit(v) & ~nan, code | 0x8, code)
    return np.where(nan, np.uint8(0x7), code).astype(np.uint8)


def e4m3_byte(v):
    """e4m3(v): RN onto E4M3 saturating to +-448 (Inf too), NaN to 0x7F, -0 to 0x80."""
    v = np.asarray(v, dtype=np.float32)
    nan = np.isnan(v)
    mag = np.minimum(np.abs(np.where(nan, F32(0), v)).astype(np.float64), 448.0)
    # The quantum of the binade (subnormals: 2^-9); dividing by a power of two is exact, and
    # np.rint rounds half to even.
    e = np.floor(np.log2(np.maximum(mag, 2.0 ** -6)))
    quantum = np.exp2(e - 3)
    r = np.rint(mag / quantum) * quantum
    e = np.floor(np.log2(np.maximum(r, 2.0 ** -6)))  # a round up may enter the next binade
    normal = r >= 2.0 ** -6
    byte = np.where(normal, (e + 7) * 8 + (r / np.exp2(e) - 1) * 8, r / 2.0 ** -9).astype(np.uint8)
    byte = np.where(np.signbit(v) & ~nan, byte | 0x80, byte)
    return np.where(nan, np.uint8(0x7F), byte).astype(np.uint8)


def e4m3_value(byte):
    """The float32 value of E4M3 bytes (0x7F/0xFF NaN)."""
    b = np.asarray(byte, dtype=np.uint8)
    exp = (b >> 3) & 0xF
    man = (b & 0x7).astype(np.float64)
    mag = np.where(exp == 0, man * 2.0 ** -9, (1 + man / 8) * np.exp2(exp.astype(np.float64) - 7))
    mag = np.where((b & 0x7F) == 0x7F, np.nan, mag)
    return np.where(b & 0x80, -mag, mag).astype(np.float32)


def pack_e2m1(codes):
    """(..., k) 4-bit codes -> (..., k/2) bytes, element 2i in the low nibble."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def permuted_offsets(l, m, kb):
    """Byte offset of every linear scale (b, i, s) in the permuted 128x4 layout (SPEC section 2)."""
    b, i, s = np.meshgrid(np.arange(l), np.arange(m), np.arange(kb), indexing="ij")
    mt, kt = -(-m // 128), -(-kb // 4)
    return ((b * mt + i // 128) * kt + s // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + s % 4


def store_scales(p, scales):
    """scales (l, m, kb) into p.sfq in p's layout; the permuted layout's padding cells 0x00."""
    if p.sf_layout == "linear":
        p.sfq[:] = scales.reshape(-1)
        return
    p.sfq[:] = 0
    l, m, kb = scales.shape
    p.sfq[permuted_offsets(l, m, kb).reshape(-1)] = scales.reshape(-1)


def blocks(x, rows=1):
    """x (l, m, k) float32 -> the block amax (l, m, kb), NaN elements ignored, over 1 x 16 blocks
    or with rows=16 over 16 x 16 tiles (written for each of the tile's rows)."""
    l, m, k = x.shape
    kb = -(-k // 16)
    padded = np.zeros((l, m, kb * 16), dtype=np.float32)
    padded[:, :, :k] = np.where(np.isnan(x), F32(0), np.abs(x))
    amax = padded.reshape(l, m, kb, 16).max(axis=3)
    if rows > 1:
        for i0 in range(0, m, rows):
            amax[:, i0:i0 + rows, :] = amax[:, i0:i0 + rows, :].max(axis=1, keepdims=True)
    return amax


def per_block(values, k):
    """(l, m, kb) -> (l, m, k): each block's value for each of its elements."""
    return np.repeat(values, 16, axis=2)[:, :, :k]


def global_scale_of(p):
    """The global scale as an array broadcasting over (l, m, 1)."""
    if isinstance(p.global_scale, float):
        return F32(p.global_scale)
    return np.asarray(p.global_scale, dtype=np.float32).reshape(p.l, p.m, 1)


def finish(p, x, os, scale_bytes):
    """The codes e2m1(RN(x * os)) into p.q and the scale bytes into p.sfq."""
    with np.errstate(over="ignore", invalid="ignore"):
        y = (x * per_block(os, p.k)).astype(np.float32)
    p.q[...] = pack_e2m1(e2m1_codes(y))
    store_scales(p, scale_bytes)


def quantize_te(p, rows=1):
    """TransformerEngine's NVFP4 recipe (its NVFP4QuantizerRef order): the scale from
    amax_b * (gs * 1/6), the encode factor 1 / (sf * (1/gs)), FLT_MAX clamps."""
    x = as_float32(p.x, p.in_type)
    gs = global_scale_of(p)
    amax = blocks(x, rows)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        mult = (gs * C6).astype(np.float32)
        sf32 = np.minimum((amax * mult).astype(np.float32), FLT_MAX)
        scale = e4m3_byte(sf32)
        sf = e4m3_value(scale)
        decode = (F32(1) / gs).astype(np.float32)
        os = np.minimum((F32(1) / (sf * decode).astype(np.float32)).astype(np.float32), FLT_MAX)
    finish(p, x, os, scale)


def _reciprocal(v):
    """1/v in FP32; 0 where v is 0 (vLLM's and FlashInfer's get_reciprocal)."""
    with np.errstate(divide="ignore"):
        return np.where(v == 0, F32(0), (F32(1) / v).astype(np.float32)).astype(np.float32)


def quantize_ref(p, reciprocal=None, rows=1):
    """vLLM's ref_nvfp4_quant and FlashInfer's ref_fp4_quant: scale = gs * (amax_b * 1/6) to
    E4M3, output_scale = 1 / (scale * (1/gs)), 0 where the scale is 0; clamp to +-6, RNE table."""
    rcp = reciprocal or (lambda v: (F32(1) / v).astype(np.float32))
    x = as_float32(p.x, p.in_type)
    gs = global_scale_of(p)
    amax = blocks(x, rows)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        scale = e4m3_byte((gs * (amax * C6).astype(np.float32)).astype(np.float32))
        sf = e4m3_value(scale)
        d = (sf * rcp(gs)).astype(np.float32)
        os = np.where(sf != 0, rcp(d), F32(0)).astype(np.float32)
    finish(p, x, os, scale)


def approx_reciprocal(v):
    """rcp.approx.ftz as a model: the RN reciprocal moved one ulp up (the instruction is within
    one ulp of it)."""
    v = np.asarray(v, dtype=np.float32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        r = (F32(1) / v).astype(np.float32)
        return np.where(np.isfinite(r) & (r != 0), np.nextafter(r, np.float32(np.inf)), r).astype(np.float32)


def quantize_fast(p, rows=1):
    """TensorRT-LLM's (and FlashInfer's, vLLM's kernels') default NVFP4 quantizer: ref's
    arithmetic with both reciprocals rcp.approx, os 0 where the block is all zero."""
    x = as_float32(p.x, p.in_type)
    gs = global_scale_of(p)
    amax = blocks(x, rows)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        scale = e4m3_byte((gs * (amax * C6).astype(np.float32)).astype(np.float32))
        sf = e4m3_value(scale)
        os = approx_reciprocal((sf * approx_reciprocal(gs)).astype(np.float32))
        os = np.where(amax != 0, os, F32(0)).astype(np.float32)
    finish(p, x, os, scale)


def quantize_torchao(p, rows=1):
    """torchao's nvfp4_quantize: the global scale is a decode scale pts; block_scale =
    amax_b / 6, s = block_scale / pts clamped to [2^-6, 448] then E4M3; the data scaled by
    (1/pts) / sf."""
    x = as_float32(p.x, p.in_type)
    pts = global_scale_of(p)
    amax = blocks(x, rows)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        s = ((amax / F32(6)).astype(np.float32) / pts).astype(np.float32)
        s = np.clip(s, F32(2.0 ** -6), F32(448))  # NaN stays NaN, as torch.clamp
        scale = e4m3_byte(s)
        sf = e4m3_value(scale)
        os = ((F32(1) / pts).astype(np.float32) / sf).astype(np.float32)
    finish(p, x, os, scale)


def quantize_linear_scales(p):
    """te's bytes, but the scales always written in the linear order (vLLM PR #42089's bug when
    the consumer reads the permuted layout)."""
    layout = p.sf_layout
    p.sf_layout = "linear"
    scratch = p.sfq
    l, m = p.l, p.m
    kb = -(-p.k // 16)
    p.sfq = np.zeros(l * m * kb, dtype=np.uint8)
    try:
        quantize_te(p)
        scratch[:] = 0
        scratch[:p.sfq.size] = p.sfq
    finally:
        p.sfq, p.sf_layout = scratch, layout
