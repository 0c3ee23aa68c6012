"""A GPU MODE nvfp4_gemm submission through torch._scaled_mm, as their reference.py computes it
(scales in cuBLAS's blocked layout, which is the permuted tuple entry's memory). NVFP4
_scaled_mm needs sm_100: declared with --min-sm 100, it is skipped on an H200 with the reason.
Expected: skipped below sm_100 (python/tests/test_gpu_gpumode.py)."""
import torch

MIN_SM = 100


def custom_kernel(data):
    a, b, _, _, sfa_permuted, sfb_permuted, c = data
    for i in range(c.shape[2]):
        # The permuted [32, 4, Mt, 4, Kt, l] scales are, batch by batch, cuBLAS's blocked layout.
        sa = sfa_permuted[..., i].permute(2, 4, 0, 1, 3).contiguous().flatten()
        sb = sfb_permuted[..., i].permute(2, 4, 0, 1, 3).contiguous().flatten()
        c[:, :, i] = torch._scaled_mm(a[:, :, i], b[:, :, i].transpose(0, 1), sa, sb, bias=None,
                                      out_dtype=torch.float16)
    return c
