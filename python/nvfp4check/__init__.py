"""nvfp4check for Python kernels (SPEC.md section 7).

    import nvfp4check as nc
    report = nc.check(fn, op="gemv", memory="cuda", format="canonical")
    assert report.verdict != "fail", report.failure.text

The checks, the exact reference and the oracle are the suite's C++ ones, reached through a small
C API (libnvfp4check_capi.so) with ctypes; see nvfp4check.adapter for what fn is called with.
"""
from ._abi import (
    FLAG_EXACT,
    FLAG_FP16_ACCUMULATE,
    FLAG_GROUPS_PACKED,
    FLAG_MMA_ACCUMULATE,
    FLAG_NONDETERMINISTIC,
    FLAG_QUANT_2D,
    FLAG_ROW_GLOBAL_SCALE,
    FLAG_SATURATES,
    FLAG_SF_PADDING_KEPT,
    FLAG_SIGNED_SCALES,
    FLAG_STOCHASTIC,
    FLAG_UNIT_ALPHA,
)
from .adapter import UNSUPPORTED, KernelAdapter, KernelFailure
from .driver import Failure, Report, build_info, check, check_plugin, reference, replay

__version__ = "0.1.0"

__all__ = [
    "check", "replay", "reference", "check_plugin", "build_info", "UNSUPPORTED", "Report", "Failure",
    "KernelAdapter", "KernelFailure", "DEFAULT_SECONDS", "FLAG_SIGNED_SCALES", "FLAG_NONDETERMINISTIC",
    "FLAG_FP16_ACCUMULATE", "FLAG_SATURATES", "FLAG_EXACT", "FLAG_UNIT_ALPHA", "FLAG_MMA_ACCUMULATE",
    "FLAG_GROUPS_PACKED", "FLAG_QUANT_2D", "FLAG_ROW_GLOBAL_SCALE", "FLAG_STOCHASTIC", "FLAG_SF_PADDING_KEPT",
]


def __getattr__(name):
    # The engine's default length of a check, read from the C API when asked for (importing the
    # package loads no library).
    if name == "DEFAULT_SECONDS":
        from .driver import default

        return default("seconds")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
