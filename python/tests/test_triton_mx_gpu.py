"""The Triton tl.dot_scaled MX GEMM of examples/triton_mx (a kernel written the way its authors
write one) through nc.check on the GPU (marker gpu; skipped where torch, CUDA or Triton is
missing). Its verdict is the kernel's own; what this test holds is that the check reaches one on
MX problems of every pair, and that a failure it reports comes back from its case file."""
import os
import sys

import pytest

pytestmark = pytest.mark.gpu

SEED = 3232
EXAMPLE = os.path.join(os.environ.get("NVFP4CHECK_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                       "examples", "triton_mx")


@pytest.fixture(scope="module")
def example():
    from conftest import torch_cuda_reason

    reason = torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    try:
        import triton  # noqa: F401
    except ImportError as e:
        pytest.skip(f"triton cannot be imported: {e}")
    sys.path.insert(0, EXAMPLE)
    import dot_scaled_gemm

    return dot_scaled_gemm


def test_dot_scaled_gemm_verdict_reproduces_from_its_case(example, case_dir):
    r = example.check(cases=100, seed=SEED, case_dir=case_dir)
    print(r)
    if r.verdict == "skipped":  # the schedule draws no problem this declaration takes
        pytest.skip(f"nc.check skipped the kernel: {r.skip_reason}")
    assert r.verdict in ("pass", "fail")
    if r.verdict == "fail":
        print(r.failure.text)
        again = example.replay(r.failure.case_file)
        print(again)
        assert again.verdict == "fail" and again.failure.check == r.failure.check, again.failure
