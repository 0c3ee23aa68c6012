"""A file whose import never ends (a compile waiting forever): stopped at --warmup-timeout
(python/tests/test_warmup.py)."""
import time

time.sleep(3600)


def custom_kernel(data):  # never reached
    raise AssertionError("imported")
