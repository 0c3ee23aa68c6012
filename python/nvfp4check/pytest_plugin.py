"""A pytest plugin (registered through the pytest11 entry point): kernel packages check their
kernels from their own test suites with a budget set on the command line.

    def test_my_gemv(nvfp4check):
        nvfp4check.check(my_gemv, op="gemv", memory="cuda")

Options: --nvfp4check-seconds S / --nvfp4check-cases N (per check; default about
nvfp4check.DEFAULT_SECONDS), --nvfp4check-seed S (default: one from the clock per session,
printed in the header), --nvfp4check-case-dir DIR (default ./nvfp4check-cases). A failing check
fails the test with the suite's failure text: the case file, `nvfp4check replay FILE --kernel
NAME` and the nvfp4check.replay call that reproduce it.
"""
import os

import pytest

_SEED_KEY = "nvfp4check_seed"


def pytest_addoption(parser):
    group = parser.getgroup("nvfp4check", "nvfp4check: NVFP4 kernel checks")
    group.addoption("--nvfp4check-seconds", type=float, default=None, help="time budget of each check (seconds)")
    group.addoption("--nvfp4check-cases", type=int, default=None, help="cases per check")
    group.addoption("--nvfp4check-seed", type=int, default=None, help="seed of every check (default: from the clock)")
    group.addoption("--nvfp4check-case-dir", default=None, help="where cases are saved (default ./nvfp4check-cases)")


def _seed(config):
    seed = config.getoption("--nvfp4check-seed", default=None)
    if seed is None:
        seed = getattr(config, _SEED_KEY, None)
        if seed is None:
            from . import _capi

            seed = _capi.load().clock_seed()  # the engine's clock seed, as `nvfp4check run` takes it
            setattr(config, _SEED_KEY, seed)
    return seed


def pytest_report_header(config):
    origin = "given" if config.getoption("--nvfp4check-seed", default=None) is not None else "from the clock"
    seed = _seed(config)
    return f"nvfp4check: seed {seed} ({origin}; repeat with --nvfp4check-seed {seed})"


class Checker:
    """nvfp4check.check / replay with the session's budget and seed; a failure fails the test."""

    def __init__(self, config):
        from .driver import default as driver_default

        self.seconds = config.getoption("--nvfp4check-seconds", default=None)
        self.cases = config.getoption("--nvfp4check-cases", default=None)
        self.seed = _seed(config)
        self.case_dir = config.getoption("--nvfp4check-case-dir", default=None) or os.path.join(
            str(config.rootpath), driver_default("case_dir"))

    def check(self, fn, **kwargs):
        from . import driver

        kwargs.setdefault("seed", self.seed)
        kwargs.setdefault("case_dir", self.case_dir)
        if "cases" not in kwargs and "seconds" not in kwargs:
            kwargs["cases"], kwargs["seconds"] = self.cases, self.seconds
        report = driver.check(fn, **kwargs)
        self._judge(report)
        return report

    def replay(self, path, fn, **kwargs):
        from . import driver

        kwargs.setdefault("case_dir", self.case_dir)
        report = driver.replay(path, fn, **kwargs)
        self._judge(report)
        return report

    @staticmethod
    def _judge(report):
        if report.verdict == "fail":
            pytest.fail(report.failure.text, pytrace=False)


@pytest.fixture
def nvfp4check(request):
    """A Checker: .check(fn, ...) and .replay(path, fn, ...) fail the test on a failed check."""
    return Checker(request.config)
