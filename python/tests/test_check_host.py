"""nc.check and nc.replay on numpy kernels in host memory: honest kernels pass, and each wrong one
is caught by the check that names its bug, with a saved case that nc.replay reproduces."""
import os

import numpy as np
import pytest

import numpy_kernels as K
import nvfp4check as nc

SEED = 20261201  # every check here is seeded; a failure's text names it too
BOTH = ("gemv", "gemm")


def test_honest_gemv_passes(case_dir):
    r = nc.check(K.honest_gemv, op="gemv", memory="host", cases=60, seed=SEED, case_dir=case_dir)
    assert r.verdict == "pass", r.failure
    assert r.cases == 60 and r.seed == SEED and r.failure is None
    # Every 8th case is a GEMM, which a GEMV kernel must refuse; it did.
    assert r.json["kernel"]["unsupported_cases"] > 0
    assert not os.listdir(case_dir), "passing cases' files are removed"


def test_honest_gemm_passes(case_dir):
    r = nc.check(K.honest_gemm, op="gemm", memory="host", cases=60, seed=SEED, case_dir=case_dir)
    assert r.verdict == "pass", r.failure
    assert r.json["kernel"]["exact_regime_share"] > 0.3  # most outputs must be bit-exact


def test_honest_kernel_with_declared_multiple_passes(case_dir):
    r = nc.check(K.refuses_m4, op=BOTH, memory="host", m_multiple=4, cases=40, seed=SEED, case_dir=case_dir)
    assert r.verdict == "pass", r.failure
    assert r.json["kernel"]["unsupported_cases"] > 0


def test_the_declaration_is_the_adapters(case_dir):
    """fn never sees a problem outside what nc.check declares: a GEMV that does not look at p.op,
    or at m, passes (the adapter refuses the GEMMs and other m on its behalf)."""
    seen = []

    def gemv_only(p):
        seen.append((p.op, p.m))
        p.c[...] = K.compute(p)

    r = nc.check(gemv_only, op="gemv", memory="host", m_multiple=4, cases=60, seed=SEED, case_dir=case_dir)
    assert r.verdict == "pass", r.failure
    assert r.json["kernel"]["unsupported_cases"] > 0  # the schedule did draw them
    assert seen and all(op == "gemv" and m % 4 == 0 for op, m in seen), seen
    r = nc.check(K.ignores_m4, op=BOTH, memory="host", m_multiple=4, cases=60, seed=SEED, case_dir=case_dir)
    assert r.verdict == "pass", r.failure


WRONG = [
    # kernel, the check that must catch it, extra declarations
    (K.nibble_order_bug, "oracle", {}),
    (K.k_tail_bug, "oracle", {}),
    (K.stale_cache_bug, "stale-state", {}),
    (K.modifies_input_bug, "inputs-modified", {}),
    (K.raises_bug, "exception", {}),
    (K.unwritten_bug, "unwritten-output", {}),
    (K.writes_past_end_bug, "guard", {}),
    (K.refuses_m4, "refused-supported", {}),  # refuses an m its (empty) declaration allows
    (K.returns_array_bug, "exception", {}),  # the adapter's complaint about what fn returned
]


@pytest.mark.parametrize("fn,check,extra", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_wrong_kernel_is_caught_by_its_check(fn, check, extra, case_dir, monkeypatch):
    r = nc.check(fn, op=BOTH, memory="host", cases=100, seed=SEED, case_dir=case_dir, **extra)
    assert r.verdict == "fail"
    assert r.failure.check == check, r.failure.text
    # The case was saved before it ran, and the text says how to reproduce it.
    assert os.path.isfile(r.failure.case_file)
    text = r.failure.text
    assert f"FAIL {fn.__name__}: check \"{check}\" (seed {SEED})" in text
    assert f"case file: {r.failure.case_file}" in text
    # A Python callback cannot be reached from the program: the line to paste is Python's.
    assert "reproduce: nvfp4check replay" not in text
    line = text.split("reproduce in Python: ", 1)[1].splitlines()[0]
    assert line.startswith(f"nvfp4check.replay({r.failure.case_file!r}, {fn.__name__}, "), line

    # The printed line, run as printed, reproduces the failure with the same check.
    if fn is K.stale_cache_bug:
        K._cache.clear()  # a fresh process would not have the cache either
    monkeypatch.chdir(case_dir)  # the line names no case directory: its error map goes to a temporary one
    again = eval(line, {"nvfp4check": nc, fn.__name__: fn})
    assert again.verdict == "fail" and again.failure.check == check, (line, again)


def test_exception_text_is_the_traceback(case_dir):
    r = nc.check(K.raises_bug, op="gemv", memory="host", cases=3, seed=SEED, case_dir=case_dir)
    assert r.failure.check == "exception"
    assert "during: run 1" in r.failure.text
    assert "Traceback (most recent call last):" in r.failure.message
    assert "numpy_kernels.KernelBug: this kernel cannot do k=" in r.failure.message
    assert "raise KernelBug(" in r.failure.text
    # The adapter's and driver's own frames are not part of it: the first frame is the kernel's.
    assert "adapter.py" not in r.failure.message


def test_oracle_failure_draws_an_error_map(case_dir):
    r = nc.check(K.nibble_order_bug, op=BOTH, memory="host", cases=20, seed=SEED, case_dir=case_dir)
    assert r.failure.check == "oracle"
    assert r.failure.error_map and r.failure.error_map.endswith(".png")
    with open(r.failure.error_map, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    element = r.failure.element
    assert element is not None and element["expected"] != element["actual"]


def test_replay_writes_nothing_into_the_current_folder(case_dir, tmp_path, monkeypatch):
    r = nc.check(K.nibble_order_bug, op=BOTH, memory="host", cases=20, seed=SEED, case_dir=case_dir)
    assert r.failure.check == "oracle"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    again = nc.replay(r.failure.case_file, K.nibble_order_bug, op=BOTH, memory="host")
    assert again.failure.check == "oracle"
    assert list(cwd.iterdir()) == [], "a replay wrote into the current folder"
    # The failure still says where its error map is.
    assert again.failure.error_map and os.path.isfile(again.failure.error_map), again.failure.text
    assert f"error map: {again.failure.error_map}" in again.failure.text
    assert nc.replay(r.failure.case_file, K.honest_any, op=BOTH, memory="host").verdict == "pass"
    assert list(cwd.iterdir()) == []


def test_same_seed_same_cases(case_dir):
    a = nc.check(K.k_tail_bug, op=BOTH, memory="host", cases=100, seed=7, case_dir=case_dir)
    b = nc.check(K.k_tail_bug, op=BOTH, memory="host", cases=100, seed=7, case_dir=case_dir)
    assert a.failure.case_file == b.failure.case_file  # its name is a hash of the case's text
    assert a.cases == b.cases


def test_keyboard_interrupt_stops_the_check(case_dir):
    calls = []

    def interrupted(p):
        calls.append(p.m)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        nc.check(interrupted, op="gemv", memory="host", cases=10, seed=SEED, case_dir=case_dir)
    assert len(calls) == 1


def test_arguments_are_views_of_the_runner_buffers(case_dir):
    seen = {}

    def inspect(p):
        seen["types"] = {name: (type(getattr(p, name)).__name__, getattr(p, name).dtype.name, getattr(p, name).shape)
                         for name in ("a", "b", "sfa", "sfb", "c")}
        seen["owns"] = [getattr(p, name).base is not None for name in ("a", "b", "sfa", "sfb", "c")]
        seen["shape"] = (p.op, p.m, p.n, p.k, p.l, p.sf_layout, p.alpha)
        return K.honest_gemv(p)

    r = nc.check(inspect, op="gemv", memory="host", cases=1, seed=SEED, case_dir=case_dir)
    assert r.verdict == "pass", r.failure
    op, m, n, k, l, layout, alpha = seen["shape"]
    assert op == "gemv" and n == 1 and layout in ("linear", "permuted") and isinstance(alpha, float)
    t = seen["types"]
    assert t["a"] == ("ndarray", "uint8", (l, m, k // 2))
    assert t["b"] == ("ndarray", "uint8", (l, 1, k // 2))
    assert t["c"] == ("ndarray", "float16", (l, m, 1))
    kb = (k + 15) // 16
    if layout == "linear":
        assert t["sfa"][2] == (l, m, kb)
    else:
        assert t["sfa"][2] == (l, (m + 127) // 128, (kb + 3) // 4, 32, 4, 4)
    assert all(seen["owns"]), "numpy views over the runner's memory, not copies"


def test_cuda_kernel_is_skipped_without_cuda(case_dir):
    if nc.build_info().get("cuda_device"):
        pytest.skip("this machine has a usable CUDA device")
    r = nc.check(K.honest_gemv, op="gemv", memory="cuda", cases=3, seed=SEED, case_dir=case_dir)
    assert r.verdict == "skipped" and r.skip_reason
    assert r.ok


def test_bad_arguments_are_errors(case_dir):
    with pytest.raises(ValueError, match="op must be one of"):
        nc.check(K.honest_gemv, op="gemx", memory="host", cases=1, seed=1)
    with pytest.raises(ValueError, match="format"):
        nc.check(K.honest_gemv, memory="host", format="tensorrt", cases=1, seed=1)
    with pytest.raises(ValueError, match="flags"):
        nc.check(K.honest_gemv, memory="host", flags=1 << 20, cases=1, seed=1)
    with pytest.raises(ValueError, match="invalid name"):
        nc.check(K.honest_gemv, memory="host", name="Not A Name", cases=1, seed=1, case_dir=case_dir)
    with pytest.raises(ValueError, match="policy"):
        nc.check(K.honest_gemv, memory="host", policy="roughly", cases=1, seed=1, case_dir=case_dir)
    with pytest.raises(ValueError, match="limit of 4 GiB per case"):
        nc.check(K.honest_gemm, op="gemm", memory="host", shape=(65536, 65536, 1024), cases=1, seed=1)
    with pytest.raises(ValueError, match="no_such.case"):
        nc.replay(os.path.join(case_dir, "no_such.case"), K.honest_gemv, memory="host")


def test_policy_override_is_applied(case_dir):
    # One FP16 ulp off everywhere fails fp32 but passes a loose allclose.
    def one_ulp_off(p):
        out = K.compute(p)
        bits = out.view(np.uint16)
        finite = np.isfinite(out) & (out != 0)
        bits[finite] += 1
        p.c[...] = out

    # Small k: the FP32 sum is within an ulp of RN16, so the shifted output is within a few.
    strict = nc.check(one_ulp_off, op=BOTH, memory="host", cases=10, seed=SEED, case_dir=case_dir,
                      shape=(32, 16, 64))
    assert strict.failure.check == "oracle"
    loose = nc.check(one_ulp_off, op=BOTH, memory="host", cases=10, seed=SEED, case_dir=case_dir,
                     shape=(32, 16, 64), policy="ulp:4")
    assert loose.verdict == "pass", loose.failure


def test_shape_option_checks_one_shape(case_dir):
    shapes = []

    def record(p):
        shapes.append((p.m, p.n, p.k, p.l))
        return K.honest_gemm(p)

    r = nc.check(record, op="gemm", memory="host", cases=4, seed=SEED, case_dir=case_dir, shape=(96, 8, 272, 2))
    assert r.verdict == "pass", r.failure
    # The first call is the warm-up, on the smallest declared problem; every case has the shape.
    assert shapes[0] == (1, 1, 64, 1) and set(shapes[1:]) == {(96, 8, 272, 2)}, shapes


def test_adapter_refuses_by_the_suites_own_rule():
    # A gpumode kernel cannot refuse, so its adapter refuses on its behalf: exactly the problems the
    # suite counts as undeclared. n_multiple constrains GEMMs only (a GEMV's n is 1 by definition).
    from nvfp4check import _abi
    from nvfp4check.adapter import KernelAdapter

    a = KernelAdapter(lambda data: None, op=BOTH, memory="host", format="gpumode", n_multiple=8, k_multiple=64)

    def problem(op, n, k=64):
        return _abi.nvfp4_problem(op=_abi.OPS[op], m=4, n=n, k=k, l=1, sf_layout=_abi.NVFP4_SF_PERMUTED, alpha=1.0)

    assert a.declares(problem("gemv", 1))
    assert a.declares(problem("gemm", 16))
    assert not a.declares(problem("gemm", 12))
    assert not a.declares(problem("gemv", 1, k=96))
