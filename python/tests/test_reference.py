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


BITS = {"fp16": (np.uint16, np.float16), "bf16": (np.uint16, None), "fp32": (np.uint32, np.float32)}


def case_keys(path):
    keys = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.split("#")[0].partition("=")
            if key.strip():
                keys[key.strip()] = value.strip()
    return keys


def expect_words(path):
    """The expect words of a case (a grouped case's expect.G lines in group order), or None."""
    keys = case_keys(path)
    bits = BITS[keys.get("out_type", "fp16")][0]
    lines = [keys["expect"]] if "expect" in keys else \
        [keys[f"expect.{g}"] for g in range(int(keys.get("groups", 0))) if f"expect.{g}" in keys]
    if not lines:
        return None
    return np.array([int(w, 16) for line in lines for w in line.split()], dtype=bits)


def is_nan(words, out_type):
    if out_type == "bf16":
        return (words & 0x7FFF) > 0x7F80
    return np.isnan(words.view(BITS[out_type][1]))


def test_the_corpus_is_there():
    assert len(CASES) >= 10, f"no hand-made cases under {SOURCE_DIR}/corpus/cases"


@pytest.mark.parametrize("path", CASES, ids=[os.path.basename(c)[:-5] for c in CASES])
def test_reference_matches_the_program(path, tmp_path):
    out = nc.reference(path)
    out_type = case_keys(path).get("out_type", "fp16")
    parts = out if isinstance(out, list) else [out]
    assert all(p.ndim == 3 and p.dtype == np.dtype({"fp16": np.float16, "bf16": np.uint16, "fp32": np.float32}[out_type])
               for p in parts)
    flat = np.concatenate([p.reshape(-1) for p in parts]) if parts else np.zeros(0)
    expect = expect_words(path)
    if expect is not None:
        mine = flat.view(BITS[out_type][0])
        nan = is_nan(mine, out_type) & is_nan(expect, out_type)  # any NaN payload is right
        assert np.array_equal(mine[~nan], expect[~nan])
    exe = program()
    if exe is None:
        pytest.skip("the nvfp4check program is not available (set NVFP4CHECK_PROGRAM)")
    target = tmp_path / "out.f16"
    subprocess.run([exe, "reference", path, "--out", str(target)], check=True, capture_output=True)
    assert target.read_bytes() == flat.tobytes()


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
