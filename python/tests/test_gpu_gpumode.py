"""GPU MODE-style submissions of corpus/python/gpumode, as submitted (marker gpu; skipped with the
reason without torch, CUDA or a CUDA build): each with its expected verdict and check, through
`nvfp4check run --python` (the program's default limits: the compile is the warm-up) and nc.check."""
import json
import os
import subprocess
import sys

import pytest

import nvfp4check as nc
from conftest import SOURCE_DIR, program

pytestmark = pytest.mark.gpu

GPUMODE = os.path.join(SOURCE_DIR, "corpus", "python", "gpumode")
STREAM_CHECKS = ("determinism", "stale-state", "unwritten-output", "oracle", "stream")


@pytest.fixture(scope="module")
def torch():
    from conftest import torch_cuda_reason

    reason = torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    import torch

    return torch


def run(tmp_path, name, *args):
    exe = program()
    if exe is None:
        pytest.skip("needs the nvfp4check program (NVFP4CHECK_PROGRAM)")
    report = tmp_path / f"{name}.json"
    r = subprocess.run([exe, "run", "--python", os.path.join(GPUMODE, name), "--seed", "11", "--case-dir",
                        str(tmp_path / "cases"), "--report", str(report), *args], capture_output=True, text=True,
                       env=dict(os.environ, NVFP4_PYTHON=os.environ.get("NVFP4_PYTHON", sys.executable)), timeout=1200)
    assert report.exists(), r.stdout + r.stderr
    return r, json.loads(report.read_text())["kernels"][0]


def load(name):
    sys.path.insert(0, GPUMODE)
    from nvfp4check.worker import load_function

    return load_function(os.path.join(GPUMODE, name), gpumode=True)


def test_load_inline_submission_passes_with_every_default(torch, tmp_path):
    r, k = run(tmp_path, "load_inline_gemv.py", "--problem", "nvfp4_gemv", "--seconds", "30")
    assert r.returncode == 0 and k["verdict"] == "pass", r.stdout + r.stderr
    assert k["warmup_seconds"] > 0 and k["stream"] == "current"


def test_two_stream_submission_fails_naming_the_streams_and_passes_on_legacy(torch, tmp_path):
    r, k = run(tmp_path, "two_stream_gemv.py", "--problem", "nvfp4_gemv", "--cases", "60")
    assert r.returncode == 1 and k["verdict"] == "fail", r.stdout + r.stderr
    check, notes = k["failure"]["check"], " ".join(k["failure"].get("notes", []))
    # Whichever check sees the race first (the oracle, when it shows on the first call), the run
    # the other way passes and the text names the ordering that is missing.
    assert check in STREAM_CHECKS, k["failure"]
    assert "run again with --stream legacy, passed" in notes, notes
    assert "not ordered after the work it put on torch's current stream" in notes, notes
    if check == "oracle":
        assert "race between two streams" in notes, notes
    r, k = run(tmp_path, "two_stream_gemv.py", "--problem", "nvfp4_gemv", "--cases", "60", "--stream", "legacy")
    # On the legacy stream only the SPEC's own defects remain (NaN scales are NaN here): it passes.
    assert r.returncode == 0 and k["verdict"] == "pass" and k["stream"] == "legacy", r.stdout + r.stderr


def test_two_stream_submission_through_nc_check(torch, tmp_path):
    r = nc.check(load("two_stream_gemv.py"), problem="nvfp4_gemv", cases=60, seed=13, case_dir=str(tmp_path / "c"))
    assert r.verdict == "fail" and r.failure.check in STREAM_CHECKS, r.failure
    assert "run again with stream='legacy', passed" in r.failure.text, r.failure.text
    assert any("run again with stream='legacy', passed" in n for n in r.failure.notes), r.failure.notes
    r = nc.check(load("two_stream_gemv.py"), problem="nvfp4_gemv", stream="legacy", cases=60, seed=13,
                 case_dir=str(tmp_path / "d"))
    assert r.verdict == "pass", r.failure


@pytest.mark.parametrize("name,problem", [("reference_group_gemm.py", "nvfp4_group_gemm"),
                                          ("reference_dual_gemm.py", "nvfp4_dual_gemm")])
@pytest.mark.parametrize("stream", ["current", "legacy"])
def test_plain_torch_references_of_the_new_problems_pass(torch, tmp_path, name, problem, stream):
    r, k = run(tmp_path, name, "--problem", problem, "--cases", "30", "--stream", stream)
    assert r.returncode == 0 and k["verdict"] == "pass", r.stdout + r.stderr
    assert k["cases"] - k.get("unsupported_cases", 0) > 0, k  # some cases were the problem's own op


def test_group_gemm_submission_through_nc_check(torch, tmp_path):
    r = nc.check(load("reference_group_gemm.py"), problem="nvfp4_group_gemm", cases=30, seed=14,
                 case_dir=str(tmp_path / "c"))
    assert r.verdict == "pass", r.failure


def test_new_problems_data_is_the_references(torch, tmp_path):
    """The data fn gets, as reference.py builds it: nvfp4_dual_gemm's ten tensors all on the
    device; nvfp4_group_gemm's four lists, its linear scales on the CPU."""
    seen = {}

    def dual(data):
        seen["dual"] = [(t.device.type, t.dtype, tuple(t.shape), t.stride()) for t in data]
        data[9].zero_()
        return data[9]

    def group(data):
        abc, sf, sf_reordered, sizes = data
        seen["group"] = (sizes, [[t.device.type for t in x] for x in abc], [[t.device.type for t in x] for x in sf],
                         [[t.device.type for t in x] for x in sf_reordered])
        for _, _, c in abc:
            c.zero_()
        return [c for _, _, c in abc]

    # fn is only handed problems inside the declared limits, and its zeros fail the first of them.
    nc.check(dual, problem="nvfp4_dual_gemm", cases=6, seed=2, case_dir=str(tmp_path / "d"))
    nc.check(group, problem="nvfp4_group_gemm", cases=6, seed=2, case_dir=str(tmp_path / "g"))
    assert set(seen) == {"dual", "group"}, f"fn was handed only {sorted(seen)}"
    assert [d for d, _, _, _ in seen["dual"]] == ["cuda"] * 10
    (_, a_dtype, a_shape, _), c = seen["dual"][0], seen["dual"][9]
    assert a_dtype == torch.float4_e2m1fn_x2 and c[1] == torch.float16
    m, _, l = c[2]
    # sfa is (m, k/16, l), its blocks contiguous and its batches m*k/16 apart: reference.py's strides.
    _, _, sfa_shape, sfa_stride = seen["dual"][3]
    assert a_shape[0] == m and a_shape[2] == l and sfa_stride == (sfa_shape[1], 1, m * sfa_shape[1])
    sizes, abc, sf, sf_reordered = seen["group"]
    assert all(l == 1 for _, _, _, l in sizes)
    assert all(devices == ["cuda"] * 3 for devices in abc) and all(d == ["cpu"] * 2 for d in sf)
    assert all(d == ["cuda"] * 2 for d in sf_reordered)


def test_triton_submission_passes(torch, tmp_path):
    pytest.importorskip("triton")
    r = nc.check(load("triton_gemv.py"), problem="nvfp4_gemv", cases=40, seed=12, case_dir=str(tmp_path / "c"))
    assert r.verdict == "pass", r.failure


def test_scaled_mm_submission_declaring_sm_100_is_skipped_below_it(torch, tmp_path):
    major, minor = torch.cuda.get_device_capability()
    r, k = run(tmp_path, "scaled_mm_gemm.py", "--problem", "nvfp4_gemm", "--min-sm", "100", "--cases", "20")
    if major * 10 + minor < 100:
        assert r.returncode == 0 and k["verdict"] == "skipped", r.stdout + r.stderr
        assert "needs compute capability 10.0" in k["skip_reason"], k
    else:
        assert k["verdict"] == "pass", r.stdout + r.stderr


def test_problem_tuple_has_the_reference_devices_and_strides(torch, tmp_path):
    """reference.py's generate_input (since their 14fec19) puts every tensor on the device, the
    linear scales moved there with their strides; a and b are permuted views."""
    seen = {}

    def probe(data):
        seen["devices"] = [t.device.type for t in data]
        seen["sfa_stride"] = data[2].stride()
        seen["shape"] = [tuple(t.shape) for t in data]
        c = data[6]
        c.zero_()
        return c

    nc.check(probe, problem="nvfp4_gemv", cases=1, seed=1, case_dir=str(tmp_path / "c"), shape=(256, 1, 128, 2))
    assert seen["devices"] == ["cuda"] * 7
    m, kb, l = 256, 8, 2
    assert seen["shape"][2] == (m, kb, l) and seen["sfa_stride"] == (kb, 1, m * kb)
    assert seen["shape"][1] == (128, 64, l)
