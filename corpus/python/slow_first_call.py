"""A canonical host kernel whose first call in each process takes FIRST_CALL_S seconds, as a
kernel that compiles on its first call does (torch load_inline, Triton): with the default limits of
`nvfp4check run --python` it must pass, the wait being its warm-up, not a hang.
Expected: pass (python/tests/test_warmup.py)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tests"))
import numpy_kernels  # noqa: E402  (the suite's own numpy reference kernel)

FIRST_CALL_S = float(os.environ.get("SLOW_FIRST_CALL_S", "45"))
# Like a compiler's cache: the first process to call "compiles" and leaves this file; a later
# process "loads" it in a second. Unset: every process compiles.
CACHE = os.environ.get("SLOW_FIRST_CALL_CACHE")
_loaded = False


def custom_kernel(p):
    global _loaded
    if not _loaded:
        if CACHE and os.path.exists(CACHE):
            time.sleep(1)
        else:
            time.sleep(FIRST_CALL_S)
            if CACHE:
                open(CACHE, "w").close()
        _loaded = True
    p.c[...] = numpy_kernels.compute(p)
