"""nc.reference is the C++ reference: on every hand-made case it gives exactly the bytes
`nvfp4check reference` writes, and the case's own expect line (computed with Python fractions by
scripts/make_hand_cases.py, independently of the C++)."""
import glob
import os
import subprocess

import numpy as np
import pytest

import nvfp4check as nc
from conftest import SOURCE_DIR, program

CASES = sorted(glob.glob(os.path.join(SOURCE_DIR, "corpus", "cases", "*.case")))


def expect_words(path):
    with open(path) as f:
        for line in f:
            key, _, value = line.split("#")[0].partition("=")
            if key.strip() == "expect":
                return np.array([int(w, 16) for w in value.split()], dtype=np.uint16)
    return None


def test_the_corpus_is_there():
    assert len(CASES) >= 10, f"no hand-made cases under {SOURCE_DIR}/corpus/cases"


@pytest.mark.parametrize("path", CASES, ids=[os.path.basename(c)[:-5] for c in CASES])
def test_reference_matches_the_program(path, tmp_path):
    out = nc.reference(path)
    assert out.dtype == np.float16 and out.ndim == 3
    expect = expect_words(path)
    if expect is not None:
        mine = out.reshape(-1).view(np.uint16)
        nan = np.isnan(out.reshape(-1)) & np.isnan(expect.view(np.float16))
        assert np.array_equal(mine[~nan], expect[~nan])
    exe = program()
    if exe is None:
        pytest.skip("the nvfp4check program is not available (set NVFP4CHECK_PROGRAM)")
    target = tmp_path / "out.f16"
    subprocess.run([exe, "reference", path, "--out", str(target)], check=True, capture_output=True)
    assert target.read_bytes() == out.astype("<f2").tobytes()


def test_seeded_case(tmp_path):
    # A case with only a seed gets its data from the harness's generator, as the program does.
    path = os.path.join(SOURCE_DIR, "cli", "tests", "seeded.case")
    out = nc.reference(path)
    exe = program()
    if exe is None:
        pytest.skip("the nvfp4check program is not available (set NVFP4CHECK_PROGRAM)")
    target = tmp_path / "out.f16"
    subprocess.run([exe, "reference", path, "--out", str(target)], check=True, capture_output=True)
    assert target.read_bytes() == out.astype("<f2").tobytes()


def test_bad_case_is_an_error():
    bad = os.path.join(SOURCE_DIR, "cli", "tests", "bad_cases", "odd_k.case")
    with pytest.raises(ValueError, match=r"odd_k\.case:[0-9]+: "):
        nc.reference(bad)


def test_wrong_expect_warns():
    with pytest.warns(RuntimeWarning, match="1 output"):
        nc.reference(os.path.join(SOURCE_DIR, "cli", "tests", "wrong_expect.case"))
