"""NVFP4 quantizers in torch for the GPU tests, written the way vLLM's ref_nvfp4_quant,
FlashInfer's ref_fp4_quant_te, TransformerEngine's NVFP4QuantizerRef and torchao's
nvfp4_quantize are: FP32 tensor arithmetic, the E4M3 scale by clamping to +-448 and casting to
torch.float8_e4m3fn (RN), an explicit round-to-nearest-even table for E2M1, two codes packed per
byte (element 2i in the low nibble) and handed over as torch.float4_e2m1fn_x2. The same recipes
as numpy_quantizers.py (SPEC.md section 2), on the canonical quantize problem with memory="cuda".
"""
import torch

FLT_MAX = torch.finfo(torch.float32).max
E4M3_MAX = 448.0


def as_float32(p):
    return p.x.float()  # float16, bfloat16 and float32 all convert exactly


def cast_to_fp4_codes(v):
    """RN onto E2M1 saturating to +-6 (Inf too), NaN to +6: the 4-bit codes, sign in bit 3."""
    mag = v.abs()
    code = torch.full_like(v, 7, dtype=torch.uint8)
    # From the top down, as the references' table of thresholds (ties to even at 0.25, 0.75, ...).
    for limit, c, inclusive in ((5.0, 6, True), (3.5, 5, False), (2.5, 4, True), (1.75, 3, False),
                                (1.25, 2, True), (0.75, 1, False), (0.25, 0, True)):
        below = mag <= limit if inclusive else mag < limit
        code = torch.where(below, torch.full_like(code, c), code)
    nan = torch.isnan(v)
    code = torch.where(torch.signbit(v) & ~nan, code | 8, code)
    return torch.where(nan, torch.full_like(code, 7), code)


def pack_fp4(codes):
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).contiguous()


def block_amax(x, rows=1):
    """(l, m, k) -> (l, m, kb): max |x| over each 1 x 16 block (or 16 x 16 tile), NaN ignored."""
    l, m, k = x.shape
    kb = -(-k // 16)
    a = torch.zeros((l, m, kb * 16), dtype=torch.float32, device=x.device)
    a[:, :, :k] = torch.where(torch.isnan(x), torch.zeros_like(x), x.abs())
    amax = a.view(l, m, kb, 16).amax(dim=3)
    if rows > 1:
        mt = -(-m // rows)
        padded = torch.zeros((l, mt * rows, kb), dtype=torch.float32, device=x.device)
        padded[:, :m] = amax
        tiles = padded.view(l, mt, rows, kb).amax(dim=2, keepdim=True).expand(l, mt, rows, kb)
        amax = tiles.reshape(l, mt * rows, kb)[:, :m].contiguous()
    return amax


def to_e4m3(v):
    """e4m3(v) as torch.float8_e4m3fn: clamped to +-448 first (torch's cast makes NaN of what
    lies beyond), NaN kept."""
    return v.clamp(min=-E4M3_MAX, max=E4M3_MAX).to(torch.float8_e4m3fn)


def global_scale(p):
    if isinstance(p.global_scale, float):
        return torch.tensor(p.global_scale, dtype=torch.float32, device=p.x.device)
    return p.global_scale.view(p.l, p.m, 1)


def to_blocked(scales, m, kb):
    """(l, m, kb) float8_e4m3fn scales -> the flat permuted 128x4 layout, padding 0 (torchao's and
    GPU MODE's to_blocked, batched)."""
    l = scales.shape[0]
    mt, kt = -(-m // 128), -(-kb // 4)
    padded = torch.zeros((l, mt * 128, kt * 4), dtype=torch.uint8, device=scales.device)
    padded[:, :m, :kb] = scales.view(torch.uint8)
    blocks = padded.view(l, mt, 4, 32, kt, 4).permute(0, 1, 4, 3, 2, 5)  # [b, i/128, s/4, i%32, i%128/32, s%4]
    return blocks.reshape(-1).view(torch.float8_e4m3fn)


def layout(p, scales):
    kb = scales.shape[2]
    if p.sf_layout == "linear":
        return scales.reshape(-1)
    return to_blocked(scales, p.m, kb)


def codes_of(p, x, os):
    y = x * os.repeat_interleave(16, dim=2)[:, :, :p.k]
    return pack_fp4(cast_to_fp4_codes(y))


def te_scales(x, gs, rows=1):
    amax = block_amax(x, rows)
    mult = gs * (1.0 / 6.0)  # RN(gs * RN(1/6)): torch rounds the python constant to FP32 first
    decode = to_e4m3(torch.clamp(amax * mult, max=FLT_MAX))
    sf = decode.float()
    os = torch.clamp(1.0 / (sf * (1.0 / gs)), max=FLT_MAX)
    return decode, os


def quantize_te(p, rows=1):
    """TransformerEngine's recipe; returns (q, sfq) as float4_e2m1fn_x2 and float8_e4m3fn."""
    x = as_float32(p)
    decode, os = te_scales(x, global_scale(p), rows)
    return codes_of(p, x, os).view(torch.float4_e2m1fn_x2), layout(p, decode)


def quantize_ref(p, approx=False):
    """vLLM's and FlashInfer's reference (recipe ref), written into p.q and p.sfq; approx: both
    reciprocals one ulp high, a model of rcp.approx (recipe fast)."""
    x = as_float32(p)
    gs = global_scale(p)
    amax = block_amax(x)

    def reciprocal(v):
        r = 1.0 / v
        if approx:
            r = torch.where(torch.isfinite(r) & (r != 0), torch.nextafter(r, torch.full_like(r, float("inf"))), r)
        return r

    scale = to_e4m3(gs * (amax * (1.0 / 6.0)))
    sf = scale.float()
    os = reciprocal(sf * reciprocal(gs))
    os = torch.where((amax if approx else sf) != 0, os, torch.zeros_like(os))
    p.q.copy_(codes_of(p, x, os))
    p.sfq.view(torch.float8_e4m3fn).copy_(layout(p, scale))


def quantize_fast(p):
    quantize_ref(p, approx=True)


def quantize_torchao(p, divide_by_number=False):
    """torchao's nvfp4_quantize with a per-tensor scale: the global scale is the decode scale.

    torchao writes `max_abs / F4_E2M1_MAX`, a tensor divided by a Python number, which PyTorch
    computes on a CUDA tensor as a multiply by the number's reciprocal (RN(amax * RN(1/6)); on the
    CPU it divides). The recipe (SPEC section 2) divides: the divisor is a tensor here, unless
    divide_by_number asks for torchao's expression as written."""
    x = as_float32(p)
    pts = global_scale(p)
    amax = block_amax(x)
    six = 6.0 if divide_by_number else torch.tensor(6.0, dtype=torch.float32, device=amax.device)
    block_scale = amax / six
    scaled = torch.clamp(block_scale / pts, min=torch.finfo(torch.float8_e4m3fn).tiny, max=E4M3_MAX)
    scale = scaled.to(torch.float8_e4m3fn)
    os = (1.0 / pts) / scale.float()
    p.q.copy_(codes_of(p, x, os))
    p.sfq.view(torch.float8_e4m3fn).copy_(layout(p, scale))


def quantize_linear_scales(p):
    """te's bytes with the scales always in the linear order, whatever the declared layout."""
    x = as_float32(p)
    decode, os = te_scales(x, global_scale(p))
    p.q.copy_(codes_of(p, x, os))
    flat = decode.reshape(-1).view(torch.uint8)
    p.sfq.zero_()
    p.sfq[:flat.numel()].copy_(flat)
