"""The canonical format's views of MX operands (SPEC.md sections 1, 2 and 7, revision 4): A and B
may have different block formats, so each has its own bytes per row (MXFP8 one element a byte,
E2M1 two) and its own scale blocks per row (NVFP4 16 elements, MX 32). The adapter's views of a
mixed problem must cover exactly each operand's bytes, in both scale layouts, and p.a_format
and p.b_format must name the formats."""
import numpy as np
import pytest

from nvfp4check import _abi
from nvfp4check.adapter import canonical_problem, host_array


def ceil_div(a, b):
    return (a + b - 1) // b


def geometry(fmt, k):
    """(bytes per row, scale blocks per row), from SPEC.md section 1 directly."""
    return (k if fmt.startswith("mxfp8") else k // 2), ceil_div(k, 16 if fmt == "nvfp4" else 32)


def scale_bytes(rows, kb, l, permuted):
    return l * ceil_div(rows, 128) * ceil_div(kb, 4) * 512 if permuted else l * rows * kb


def host_view(address, shape, dtype="u8"):
    return host_array(address, shape, np.uint16 if dtype != "u8" else np.uint8)


PAIRS = [("mxfp8_e4m3", "mxfp4"), ("mxfp4", "mxfp8_e5m2"), ("nvfp4", "mxfp8_e4m3"), ("mxfp8_e5m2", "nvfp4"),
         ("mxfp4", "mxfp4")]


@pytest.mark.parametrize("a_fmt,b_fmt", PAIRS)
@pytest.mark.parametrize("permuted", [False, True])
def test_gemm_views_cover_each_operands_own_bytes(a_fmt, b_fmt, permuted):
    m, n, k, l = 3, 130, 66, 2
    (a_row, a_kb), (b_row, b_kb) = geometry(a_fmt, k), geometry(b_fmt, k)
    bufs = {name: np.arange(size, dtype=np.uint32).astype(np.uint8) for name, size in (
        ("a", l * m * a_row), ("b", l * n * b_row), ("sfa", scale_bytes(m, a_kb, l, permuted)),
        ("sfb", scale_bytes(n, b_kb, l, permuted)))}
    c = np.zeros((l, m, n), np.uint16)
    p = _abi.nvfp4_problem()
    p.op, p.m, p.n, p.k, p.l = _abi.NVFP4_OP_GEMM, m, n, k, l
    p.a, p.b, p.sfa, p.sfb = (bufs[x].ctypes.data for x in ("a", "b", "sfa", "sfb"))
    p.c = c.ctypes.data
    p.sf_layout = _abi.NVFP4_SF_PERMUTED if permuted else _abi.NVFP4_SF_LINEAR
    p.alpha = p.alpha2 = 1.0
    p.out_type = _abi.NVFP4_OUT_FP16
    p.a_format, p.b_format = _abi.BLOCK_FORMATS[a_fmt], _abi.BLOCK_FORMATS[b_fmt]
    q = canonical_problem(p, host_view, False)
    assert (q.a_format, q.b_format) == (a_fmt, b_fmt)
    assert q.a.shape == (l, m, a_row) and q.b.shape == (l, n, b_row)
    for name in ("a", "b", "sfa", "sfb"):
        view = getattr(q, name)
        assert view.size == bufs[name].size, name
        assert np.array_equal(view.reshape(-1), bufs[name]), name
    if not permuted:
        assert q.sfa.shape == (l, m, a_kb) and q.sfb.shape == (l, n, b_kb)
