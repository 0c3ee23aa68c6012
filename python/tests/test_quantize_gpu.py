"""Quantizers written in torch the way vLLM's, FlashInfer's, TransformerEngine's and torchao's
references are (torch_quantizers.py), checked on the GPU (marker gpu; skipped with the reason
where torch, CUDA or a CUDA build of the C API is missing): each passes under its recipe, the
one with rcp.approx's last bit passes as `fast` and fails as `ref`, and one that writes linear
scales where it declares permuted ones fails."""
import re

import pytest

import nvfp4check as nc

pytestmark = pytest.mark.gpu

SEED = 4242
CASES = 60


@pytest.fixture(scope="module")
def tq():
    from conftest import torch_cuda_reason

    reason = torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    import torch_quantizers

    return torch_quantizers


def check(fn, recipe, case_dir, **kw):
    kw.setdefault("cases", CASES)
    r = nc.check(fn, op="quantize", memory="cuda", recipes=(recipe,), seed=SEED, case_dir=case_dir, **kw)
    print(r)
    return r


@pytest.mark.parametrize("name,recipe", [("quantize_te", "te"), ("quantize_ref", "ref"),
                                         ("quantize_torchao", "torchao"), ("quantize_fast", "fast")])
def test_torch_reference_quantizers_pass(tq, case_dir, name, recipe):
    r = check(getattr(tq, name), recipe, case_dir)
    assert r.verdict == "pass", r.failure


def test_torchao_as_written_fails_as_torchao_on_cuda_naming_the_association(tq, case_dir):
    # max_abs / 6.0 on a CUDA tensor is RN(amax * RN(1/6)), not the recipe's RN(amax / 6): the
    # decision class's blocks where the two give other scale bytes catch it, and the failure
    # says which operation the kernel did differently.
    def as_written(p):
        tq.quantize_torchao(p, divide_by_number=True)

    r = check(as_written, "torchao", case_dir)
    assert r.verdict == "fail" and r.failure.check == "oracle", r.failure
    assert "[other_association]" in r.failure.text, r.failure.text


def test_torch_te_with_tiles_and_per_row_scales_passes(tq, case_dir):
    def te_2d(p):
        return tq.quantize_te(p, rows=16)

    assert check(te_2d, "te", case_dir, flags=nc.FLAG_QUANT_2D).verdict == "pass"
    r = check(tq.quantize_te, "te", case_dir, flags=nc.FLAG_ROW_GLOBAL_SCALE)
    assert r.verdict == "pass", r.failure


def test_torch_rcp_approx_passes_as_fast_and_fails_as_ref(tq, case_dir):
    assert check(tq.quantize_fast, "fast", case_dir, cases=200).verdict == "pass"

    def fast_declared_ref(p):
        tq.quantize_fast(p)

    r = check(fast_declared_ref, "ref", case_dir, cases=200)
    assert r.verdict == "fail" and r.failure.check == "oracle", r.failure
    assert re.search(r"block \d+", r.failure.text), r.failure.text


def test_torch_linear_scales_declared_permuted_fail(tq, case_dir):
    r = check(tq.quantize_linear_scales, "te", case_dir, sf_layouts=("permuted",))
    assert r.verdict == "fail" and r.failure.check == "oracle", r.failure
