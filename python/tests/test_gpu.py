"""Python kernels on the GPU (marker gpu; skipped with the reason where torch, CUDA or a CUDA build of
the C API is missing). Honest torch-eager, load_inline CUDA and Triton kernels pass every check in
both formats; GPU MODE's cheats are each caught by the check named for them."""
import os

import pytest

import nvfp4check as nc

pytestmark = pytest.mark.gpu

SEED = 90210
BOTH = ("gemv", "gemm")
CASES = 24


@pytest.fixture(scope="module")
def tk():
    from conftest import torch_cuda_reason

    reason = torch_cuda_reason()
    if reason:
        pytest.skip(reason)
    import torch_kernels

    return torch_kernels


def check(fn, case_dir, **kw):
    kw.setdefault("cases", CASES)
    r = nc.check(fn, memory="cuda", seed=SEED, case_dir=case_dir, **kw)
    print(r)
    return r


def test_torch_eager_canonical_passes(tk, case_dir):
    r = check(tk.torch_canonical, case_dir, op=BOTH)
    assert r.verdict == "pass", r.failure


@pytest.mark.parametrize("op", ["gemv", "gemm"])
def test_torch_eager_gpumode_passes(tk, case_dir, op):
    r = check(tk.torch_gpumode, case_dir, op=op, format="gpumode")
    assert r.verdict == "pass", r.failure
    assert r.json["kernel"]["unsupported_cases"] > 0  # alpha != 1 and the other op: refused for it


def test_legacy_default_stream_is_honest_in_gpumode(tk, case_dir):
    r = check(tk.torch_gpumode_legacy_stream, case_dir, op="gemm", format="gpumode")
    assert r.verdict == "pass", r.failure


@pytest.fixture(scope="module")
def cuda_extension(tk, tmp_path_factory):
    from torch.utils import cpp_extension

    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError as e:
        pytest.skip(f"load_inline needs ninja: {e}")
    if cpp_extension.CUDA_HOME is None:
        pytest.skip("load_inline needs a CUDA toolkit (nvcc): torch found no CUDA_HOME")
    # A compile error past this point is a failure of the test, not a reason to skip it.
    return tk.load_cuda_extension(str(tmp_path_factory.mktemp("torch_extension")))


@pytest.mark.parametrize("op", ["gemv", "gemm"])
def test_load_inline_cuda_gpumode_passes(tk, cuda_extension, case_dir, op):
    r = check(tk.cuda_gpumode(cuda_extension), case_dir, op=op, format="gpumode", name="load_inline_gemm")
    assert r.verdict == "pass", r.failure


def test_triton_canonical_passes(tk, case_dir):
    try:
        fn = tk.triton_canonical()
    except ImportError as e:
        pytest.skip(f"triton cannot be imported: {e}")
    r = check(fn, case_dir, op=BOTH, sf_layouts=("linear",), name="triton_gemm")
    assert r.verdict == "pass", r.failure


# What work on a stream not ordered after the runner's can show as, by timing: it ran before the
# inputs and C's poison were in place (unwritten output, or a wrong answer from what was there) or
# after the runner's stream was done (the stream check).
OTHER_STREAM_CHECKS = {"stream", "unwritten-output", "oracle", "nan-padding"}

# (name, checks it may fail, replays allowed before the saved case must have failed again)
CHEATS = [
    ("cheat_cached_output", {"stale-state"}, 1),
    ("cheat_returns_c_unwritten", {"unwritten-output"}, 1),
    ("cheat_other_stream_slow", {"stream"}, 1),
    # Fast enough to finish within the runner's hold (its poison then comes back over the result),
    # or not: either way the other stream is caught (the set runner_cuda_test.cu accepts). Which
    # way a given call goes is a race between two streams, so one replay of the saved case can
    # lose it (seen once in 35 runs on an H200); a few tries must catch it.
    ("cheat_other_stream", OTHER_STREAM_CHECKS, 5),
]


@pytest.mark.parametrize("name,checks,tries", CHEATS, ids=[c[0] for c in CHEATS])
def test_gpumode_cheat_is_caught(tk, case_dir, name, checks, tries):
    r = check(getattr(tk, name), case_dir, op="gemm", format="gpumode")
    assert r.verdict == "fail"
    assert r.failure.check in checks, r.failure.text
    assert os.path.isfile(r.failure.case_file)
    # The saved case reproduces it.
    reports = []
    for _ in range(tries):
        tk._cached.clear()
        again = nc.replay(r.failure.case_file, getattr(tk, name), op="gemm", memory="cuda", format="gpumode",
                          case_dir=case_dir)
        reports.append(again)
        if again.verdict == "fail":
            break
    assert again.verdict == "fail" and again.failure.check in checks, reports


def test_canonical_other_stream_is_caught(tk, case_dir):
    r = check(tk.torch_canonical_other_stream, case_dir, op=BOTH)
    assert r.verdict == "fail" and r.failure.check in OTHER_STREAM_CHECKS, r


def test_cuda_exception_is_a_failed_case(tk, case_dir):
    def raises(p):
        raise RuntimeError("kernel launch failed")

    r = check(raises, case_dir, op="gemv", cases=2)
    assert r.failure.check == "exception" and "kernel launch failed" in r.failure.text


def test_canonical_arguments_are_views_of_the_runner_buffers(tk, case_dir):
    import torch

    seen = {}

    def inspect(p):
        seen["dtypes"] = {n: getattr(p, n).dtype for n in ("a", "b", "sfa", "sfb", "c")}
        seen["device"] = p.c.device.type
        seen["stream"] = torch.cuda.current_stream().cuda_stream == p.stream.cuda_stream
        return tk.torch_canonical(p)

    r = check(inspect, case_dir, op=BOTH, cases=2)
    assert r.verdict == "pass", r.failure
    assert seen["dtypes"]["a"] == torch.uint8 and seen["dtypes"]["c"] == torch.float16
    assert seen["device"] == "cuda" and seen["stream"]
