"""A GPU MODE nvfp4_dual_gemm submission in plain torch: G = A B1 and U = A B2 decoded and
multiplied in FP32 (torch.matmul), c = silu(G) * U in FP32 rounded once to FP16. Everything on
torch's current stream. Expected: pass, with --stream current and legacy
(python/tests/test_gpu_gpumode.py)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _torch_nvfp4 import gemm_fp32  # noqa: E402


def custom_kernel(data):
    a, b1, b2, sfa, sfb1, sfb2, _, _, _, c = data
    gate = gemm_fp32(a, sfa, b1, sfb1)
    up = gemm_fp32(a, sfa, b2, sfb2)
    c.copy_((torch.nn.functional.silu(gate) * up).to(c.dtype).permute(1, 2, 0))
    return c
