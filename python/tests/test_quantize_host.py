"""Quantizers (SPEC.md revision 4, op "quantize") checked from Python in host memory: numpy
quantizers written the way vLLM's, FlashInfer's, TransformerEngine's and torchao's Python
references are (numpy_quantizers.py) pass nc.check under the recipe they follow; one with
rcp.approx's last bit passes as `fast` and fails as `ref`; one that writes linear scales where it
declares permuted ones fails. The hand cases (corpus/quantize) replay and give their expect bytes
through nc.reference."""
import glob
import json
import os
import re

import numpy as np
import pytest

import numpy_quantizers as Q
import nvfp4check as nc
from conftest import SOURCE_DIR
from nvfp4check import _abi
from nvfp4check.adapter import KernelAdapter

HAND_CASES = sorted(glob.glob(os.path.join(SOURCE_DIR, "corpus", "quantize", "*.case")))


def case_keys(path):
    keys = {}
    with open(path) as f:
        for line in f:
            if "=" in line and not line.startswith("#"):
                key, _, value = line.partition("=")
                keys[key.strip()] = value.strip()
    return keys


def quantize_2d(fn):
    def tiles(p):
        return fn(p, rows=16)
    tiles.__name__ = fn.__name__ + "_2d"
    return tiles


def check(fn, recipe, case_dir, flags=0, cases=120, seed=31, **declared):
    r = nc.check(fn, op="quantize", memory="host", recipes=(recipe,), flags=flags, cases=cases, seed=seed,
                 case_dir=case_dir, **declared)
    print(r)
    return r


def handed(r):
    """Cases the kernel was handed (not refused on its behalf)."""
    return r.cases - r.json["kernel"].get("unsupported_cases", 0)


@pytest.mark.parametrize("fn,recipe", [(Q.quantize_te, "te"), (Q.quantize_ref, "ref"),
                                       (Q.quantize_torchao, "torchao"), (Q.quantize_fast, "fast")])
def test_reference_quantizers_pass_under_their_recipe(case_dir, fn, recipe):
    r = check(fn, recipe, case_dir)
    assert r.verdict == "pass", r.failure
    assert handed(r) > 60, r.json["kernel"]


@pytest.mark.parametrize("fn,recipe,flags", [
    (quantize_2d(Q.quantize_te), "te", nc.FLAG_QUANT_2D),
    (Q.quantize_ref, "ref", nc.FLAG_ROW_GLOBAL_SCALE),
    (Q.quantize_te, "te", nc.FLAG_ROW_GLOBAL_SCALE),
])
def test_tiles_and_per_row_global_scales_pass(case_dir, fn, recipe, flags):
    r = check(fn, recipe, case_dir, flags=flags, cases=80)
    assert r.verdict == "pass", r.failure
    assert handed(r) > 40, r.json["kernel"]


def test_declared_input_types_and_layouts_only_are_handed_over(case_dir):
    seen = set()

    def te_bf16_linear(p):
        seen.add((p.in_type, p.sf_layout, p.format, p.recipe, p.x.dtype.name))
        assert p.x.shape == (p.l, p.m, p.k) and p.q.shape == (p.l, p.m, p.k // 2) and p.q.dtype == np.uint8
        assert p.sfq.shape == (p.l * p.m * -(-p.k // 16),) and isinstance(p.global_scale, float)
        Q.quantize_te(p)

    r = check(te_bf16_linear, "te", case_dir, cases=60, in_types=("bf16",), sf_layouts=("linear",))
    assert r.verdict == "pass", r.failure
    assert seen == {("bf16", "linear", "nvfp4", "te", "uint16")}


def test_rcp_approx_passes_as_fast_and_fails_as_ref(case_dir):
    assert check(Q.quantize_fast, "fast", case_dir, cases=200).verdict == "pass"

    def fast_declared_ref(p):
        Q.quantize_fast(p)

    r = check(fast_declared_ref, "ref", case_dir, cases=200)
    assert r.verdict == "fail"
    assert r.failure.check == "oracle", r.failure
    assert re.search(r"block \d+", r.failure.text), r.failure.text
    assert r.failure.case_file and os.path.exists(r.failure.case_file)


def test_linear_scales_declared_permuted_fail(case_dir):
    r = check(Q.quantize_linear_scales, "te", case_dir, cases=100, sf_layouts=("permuted",))
    assert r.verdict == "fail"
    assert r.failure.check == "oracle", r.failure
    # The same bytes where the linear layout is declared are right.
    r = check(Q.quantize_linear_scales, "te", case_dir, cases=60, sf_layouts=("linear",))
    assert r.verdict == "pass", r.failure


def test_a_quantizer_may_return_q_and_sfq(case_dir):
    def returns(p):
        q, sfq = np.empty_like(p.q), np.empty_like(p.sfq)
        real_q, real_sfq = p.q, p.sfq
        p.q, p.sfq = q, sfq
        Q.quantize_te(p)
        p.q, p.sfq = real_q, real_sfq
        return q.view(np.int8), sfq

    r = check(returns, "te", case_dir, cases=40)
    assert r.verdict == "pass", r.failure

    def wrong_size(p):
        return p.q, p.sfq[:-1]

    r = check(wrong_size, "te", case_dir, cases=5)
    assert r.verdict == "fail" and "returns (q, sfq)" in r.failure.text, r.failure


def test_declarations_are_version_3():
    a = KernelAdapter(Q.quantize_te, op="quantize", memory="host", in_types=("bf16", "fp32"),
                      formats=("nvfp4",), recipes=("te", "torchao"), flags=nc.FLAG_QUANT_2D | nc.FLAG_SF_PADDING_KEPT)
    info = a.info
    assert info.abi_version == 3 and info.ops == 1 << _abi.NVFP4_OP_QUANTIZE
    assert info.in_types == (1 << _abi.NVFP4_IN_BF16) | (1 << _abi.NVFP4_IN_FP32)
    assert info.q_formats == 1 << _abi.NVFP4_FORMAT_NVFP4
    assert info.recipes == (1 << _abi.NVFP4_RECIPE_TE) | (1 << _abi.NVFP4_RECIPE_TORCHAO)
    assert info.flags == nc.FLAG_QUANT_2D | nc.FLAG_SF_PADDING_KEPT
    default = KernelAdapter(Q.quantize_te, op="quantize", memory="host", recipes="te")
    assert default.info.in_types == 0b1110 and default.info.q_formats == 1 << _abi.NVFP4_FORMAT_NVFP4
    with pytest.raises(ValueError, match="recipes"):
        KernelAdapter(Q.quantize_te, op="quantize", memory="host")
    with pytest.raises(ValueError, match="mx_rceil"):
        KernelAdapter(Q.quantize_te, op="quantize", memory="host", recipes=("mx_rceil",))
    with pytest.raises(ValueError, match="op='quantize'"):
        KernelAdapter(Q.quantize_te, op="gemm", memory="host", recipes=("te",))
    with pytest.raises(ValueError, match="in_types"):
        KernelAdapter(Q.quantize_te, op="quantize", memory="host", recipes=("te",), in_types=("fp64",))


@pytest.mark.parametrize("path", HAND_CASES, ids=os.path.basename)
def test_hand_cases_give_their_expect_bytes(path):
    keys = case_keys(path)
    q, sfq = nc.reference(path)
    l, m = int(keys["l"]), int(keys["m"])
    assert q.dtype == np.uint8 and sfq.dtype == np.uint8
    assert q.shape[:2] == (l, m) and sfq.shape[:2] == (l, m)
    assert q.tobytes().hex() == keys["expect_q"]
    assert sfq.tobytes().hex() == keys["expect_sfq"]


KERNELS = {"te": Q.quantize_te, "ref": Q.quantize_ref, "torchao": Q.quantize_torchao, "fast": Q.quantize_fast}


@pytest.mark.parametrize("path", [p for p in HAND_CASES if case_keys(p).get("recipe") in KERNELS
                                  and "stochastic_seed" not in case_keys(p)],
                         ids=os.path.basename)
def test_hand_cases_replay_with_the_numpy_quantizers(path, tmp_path):
    keys = case_keys(path)
    flags = 0
    for key, flag in (("quant_2d", nc.FLAG_QUANT_2D), ("row_global_scale", nc.FLAG_ROW_GLOBAL_SCALE)):
        if keys.get(key) in ("true", "1"):
            flags |= flag
    fn = KERNELS[keys["recipe"]]
    if flags & nc.FLAG_QUANT_2D:
        fn = quantize_2d(fn)
    r = nc.replay(path, fn, op="quantize", memory="host", recipes=(keys["recipe"],), flags=flags,
                  case_dir=str(tmp_path))
    assert r.verdict == "pass", r.failure


QUANTIZERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "numpy_quantizers.py")


def test_run_python_checks_a_quantizer_from_its_declaration(tmp_path):
    # `nvfp4check run --python FILE:FN --op quantize --in-type T --recipe R --format F` (SPEC.md
    # section 6): the declaration travels to the worker, the program schedules and judges.
    from test_worker import program

    report = tmp_path / "report.json"
    r = program("run", "--python", f"{QUANTIZERS}:quantize_te", "--memory", "host", "--op", "quantize", "--in-type",
                "bf16", "--recipe", "te", "--format", "nvfp4", "--cases", "30", "--seed", "5", "--case-dir",
                str(tmp_path), "--report", str(report))
    assert r.returncode == 0, r.stdout + r.stderr
    kernel = json.loads(report.read_text())["kernels"][0]
    assert kernel["verdict"] == "pass" and kernel["cases"] == 30, kernel
    bad = program("run", "--python", f"{QUANTIZERS}:quantize_fast", "--memory", "host", "--op", "quantize",
                  "--recipe", "ref", "--cases", "200", "--seed", "5", "--case-dir", str(tmp_path), "--report",
                  str(report))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    failure = json.loads(report.read_text())["kernels"][0]["failure"]
    assert failure["check"] == "oracle"
    # The reproduce line names the declaration again, and replays to the same failure.
    line = [x.split("reproduce: ", 1)[1] for x in bad.stdout.splitlines() if x.startswith("  reproduce: ")][0]
    assert "--recipe ref" in line and "--op quantize" in line, line
