"""A GPU MODE nvfp4_gemv submission that compiles its CUDA with torch load_inline on its first
call. Expected: pass `nvfp4check run --python load_inline_gemv.py --problem nvfp4_gemv` with every
default, the compile being its warm-up (python/tests/test_gpu_gpumode.py, scripts/gpu-check.sh)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gemv_cuda import gemv  # noqa: E402


def custom_kernel(data):
    return gemv(data)
