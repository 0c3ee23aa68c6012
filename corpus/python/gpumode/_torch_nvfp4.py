"""Plain-torch NVFP4 decoding for this folder's reference submissions (written for nvfp4check):
E2M1 codes through a 16-entry table (element 2i in the LOW nibble of byte i), UE4M3 scales as
float8_e4m3fn with the sign bit ignored, each scale spread over its 16 elements. A row whose
scale is NaN gives NaN outputs, set after the matmul so no BLAS shortcut on zeros can lose it."""
import torch

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_tables = {}


def _table(device):
    t = _tables.get(str(device))
    if t is None:
        t = _tables[str(device)] = torch.tensor(_E2M1, dtype=torch.float32, device=device)
    return t


def dequantize(x, sf):
    """x [rows, k/2, l] float4_e2m1fn_x2 and its linear scales sf [rows, k/16, l] float8_e4m3fn
    (on any device) -> (values [l, rows, k] float32 with NaN-scale rows zeroed, NaN rows [l, rows])."""
    u = x.view(torch.uint8).permute(2, 0, 1)
    l, rows, half = u.shape
    codes = torch.stack((u & 0xF, u >> 4), dim=-1).reshape(l, rows, 2 * half).long()
    scales = sf.to(u.device).permute(2, 0, 1).to(torch.float32).abs()
    nan_rows = scales.isnan().any(dim=-1)
    scales = torch.nan_to_num(scales, nan=0.0).repeat_interleave(16, dim=-1)[..., :2 * half]
    return _table(u.device)[codes] * scales, nan_rows


def gemm_fp32(a, sfa, b, sfb):
    """sum over k of A*SA*B*SB in float32, [l, m, n], NaN where a scale used is NaN."""
    av, a_nan = dequantize(a, sfa)
    bv, b_nan = dequantize(b, sfb)
    acc = torch.matmul(av, bv.transpose(1, 2))
    return acc.masked_fill(a_nan[:, :, None] | b_nan[:, None, :], float("nan"))
