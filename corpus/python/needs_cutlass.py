"""A CuTe DSL-style submission on a machine without the `cutlass` module: importing it fails.
Expected: exit 2, the message led by the missing module (python/tests/test_warmup.py)."""
import cutlass  # noqa: F401
import cutlass.cute as cute  # noqa: F401


def custom_kernel(data):
    raise AssertionError("never called")
