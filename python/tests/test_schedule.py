"""The case schedule of nc.check is `nvfp4check run`'s: a Python kernel and a plugin kernel with the
same name and declarations get the same cases from the same seed. (The Python loop lives in the
C API's call of the engine's check_kernel, the program's through run_suite: this test holds them
together.)"""
import json
import os
import subprocess

import pytest

import numpy_kernels as K
import nvfp4check as nc
from conftest import program

SEED = 4242
CASES = 48


def test_same_cases_as_run(tmp_path):
    exe, plugin = program(), os.environ.get("NVFP4CHECK_WRONG_PLUGIN")
    if exe is None or not plugin or not os.path.exists(plugin):
        pytest.skip("needs the nvfp4check program and the wrong-kernels plugin (NVFP4CHECK_PROGRAM, "
                    "NVFP4CHECK_WRONG_PLUGIN)")
    report_file = tmp_path / "run.json"
    # honest_m4_host: an honest host kernel declaring both ops, both layouts and m_multiple 4.
    subprocess.run([exe, "run", "--plugin", plugin, "--kernel", "honest_m4_host", "--seed", str(SEED), "--cases",
                    str(CASES), "--case-dir", str(tmp_path / "run-cases"), "--report", str(report_file)],
                   check=True, capture_output=True)
    cli = json.loads(report_file.read_text())["kernels"][0]

    py = nc.check(K.refuses_m4, op=("gemv", "gemm"), memory="host", m_multiple=4, name="honest_m4_host",
                  cases=CASES, seed=SEED, case_dir=str(tmp_path / "py-cases")).json["kernel"]
    assert cli["verdict"] == py["verdict"] == "pass"
    # Shapes, refusals and data: elements and exact-regime elements are sums over the cases drawn
    # (the reference decides the regime), so equal sums mean the same cases were drawn.
    for key in ("cases", "unsupported_cases", "skipped_cases", "exact_regime_share"):
        assert cli[key] == py[key], key


def test_same_first_failure_as_run(tmp_path):
    """A kernel that fails only on some cases (reading NaN padding) fails at the same case, saved
    under the same name with the same text, in `run` and in nc.check."""
    exe, plugin = program(), os.environ.get("NVFP4CHECK_WRONG_PLUGIN")
    if exe is None or not plugin or not os.path.exists(plugin):
        pytest.skip("needs the nvfp4check program and the wrong-kernels plugin")
    seed = 1  # its first failure is the 6th case (the linear-layout and unpadded cases before it pass)
    # Eight lanes: the first failure and the count are those of one lane, whatever the lanes finish.
    run = subprocess.run([exe, "run", "--plugin", plugin, "--kernel", "reads_padding_host", "--seed", str(seed),
                          "--jobs", "8", "--cases", "200", "--case-dir", str(tmp_path / "run-cases"),
                          "--report", str(tmp_path / "run.json")], capture_output=True, text=True)
    assert run.returncode == 1, run.stdout + run.stderr
    cli = json.loads((tmp_path / "run.json").read_text())["kernels"][0]
    py = nc.check(K.reads_padding_bug, op=("gemv", "gemm"), memory="host", name="reads_padding_host", cases=200,
                  seed=seed, case_dir=str(tmp_path / "py-cases"))
    assert py.failure.check == cli["failure"]["check"]
    assert py.cases == cli["cases"]
    assert cli["cases"] > 1, "the bug should not show on the very first case"
    cli_case, py_case = cli["failure"]["case_file"], py.failure.case_file
    assert os.path.basename(cli_case) == os.path.basename(py_case)
    with open(cli_case) as a, open(py_case) as b:
        assert a.read() == b.read()
