"""The two-stream mistake: the scales are copied on torch's current stream, and the kernel is
launched with a bare <<<grid, block>>> on the legacy default stream, unordered against that copy.
In GPU MODE's harness both are the legacy stream and it passes. Expected: fail by default, with
whichever check sees the race first (oracle when it shows on the first call; determinism,
stale-state or unwritten-output otherwise) and the text naming the streams: "run again with
--stream legacy, passed" and the missing ordering; pass with --stream legacy
(python/tests/test_gpu_gpumode.py, scripts/gpu-check.sh)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _gemv_cuda import gemv  # noqa: E402


def custom_kernel(data):
    return gemv(data, legacy_stream=True, scales_on_current_stream=True)
