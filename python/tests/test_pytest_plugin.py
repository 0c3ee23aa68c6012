"""The pytest plugin: a kernel package's own test runs a check with the budget and seed of the
command line, and a failure prints the case file and how to replay it."""
import os

pytest_plugins = ["pytester"]

HERE = os.path.dirname(os.path.abspath(__file__))

TEST_FILE = f"""
import sys
sys.path.insert(0, {HERE!r})
import numpy_kernels as K

def test_honest(nvfp4check):
    r = nvfp4check.check(K.honest_gemv, op="gemv", memory="host")
    assert r.cases == 7 and r.seed == 99

def test_wrong(nvfp4check):
    nvfp4check.check(K.k_tail_bug, op=("gemv", "gemm"), memory="host")
"""


def test_budget_seed_and_failure_text(pytester):
    pytester.makepyfile(test_kernels=TEST_FILE)
    plugin = [] if pytester_has_plugin(pytester) else ["-p", "nvfp4check.pytest_plugin"]
    result = pytester.runpytest_subprocess(*plugin, "--nvfp4check-cases", "7", "--nvfp4check-seed", "99",
                                           "--nvfp4check-case-dir", str(pytester.path / "cases"))
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "nvfp4check: seed 99 (given" in out
    assert 'FAIL k_tail_bug: check "oracle" (seed 99)' in out
    assert "case file: " + str(pytester.path / "cases") in out
    # A test's function is reached from Python only: the line to paste is Python's.
    assert "reproduce: nvfp4check replay " not in out
    assert "reproduce in Python: nvfp4check.replay(" in out


def pytester_has_plugin(pytester):
    # With the package installed, its entry point registers the plugin in every pytest run.
    from conftest import _plugin_installed

    return _plugin_installed()


CLOCK_FILE = f"""
import sys
sys.path.insert(0, {HERE!r})
import numpy_kernels as K

def test_seed(nvfp4check):
    r = nvfp4check.check(K.honest_gemv, op="gemv", memory="host", cases=2)
    print("seed of the check:", r.seed)
"""


def test_clock_seed_is_the_engines_and_one_per_session(pytester):
    # No --nvfp4check-seed: the engine's clock seed (nanoseconds since the epoch, as `nvfp4check
    # run` takes it), shown in the header and used by the session's every check.
    import re
    import time

    pytester.makepyfile(test_clock=CLOCK_FILE)
    plugin = [] if pytester_has_plugin(pytester) else ["-p", "nvfp4check.pytest_plugin"]
    before = time.time_ns()
    result = pytester.runpytest_subprocess(*plugin, "-s", "--nvfp4check-case-dir", str(pytester.path / "cases"))
    after = time.time_ns()
    out = result.stdout.str()
    header = re.search(r"nvfp4check: seed (\d+) \(from the clock; repeat with --nvfp4check-seed (\d+)\)", out)
    assert header, out
    seed = int(header.group(1))
    assert header.group(2) == header.group(1)
    assert before <= seed <= after
    assert f"seed of the check: {seed}" in out
