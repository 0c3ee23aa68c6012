"""A canonical host GEMV that appends a line to $NVFP4_IMPORT_LOG each time it is imported: a run
must import it once (python/tests/test_warmup.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tests"))
with open(os.environ["NVFP4_IMPORT_LOG"], "a") as log:
    log.write(f"{os.getpid()}\n")

from numpy_kernels import honest_gemv  # noqa: E402,F401
