# The package's tests. Environment (ctest sets it; see python/CMakeLists.txt):
#   NVFP4CHECK_LIBRARY       the C API library to test (else the package's own search)
#   NVFP4CHECK_PROGRAM       the nvfp4check program (tests that compare with the CLI skip without it)
#   NVFP4CHECK_WRONG_PLUGIN  harness/tests' plugin of wrong host kernels (the schedule test)
#   NVFP4CHECK_SOURCE_DIR    the repository (corpus/), default: two levels up
#   NVFP4CHECK_ALL_SKIPPED_EXIT  exit code when every selected test skipped (ctest's SKIP_RETURN_CODE)
import os
import shutil
import tempfile

import pytest

# ctest hands a GPU test one device in CTEST_RESOURCE_GROUP_0_GPUS ("id:N,slots:1"): make it the
# only one this process sees, before anything starts CUDA (as harness/process/ctest_gpu_resource.cc does).
_group = os.environ.get("CTEST_RESOURCE_GROUP_0_GPUS", "")
if "id:" in _group:
    os.environ["CUDA_VISIBLE_DEVICES"] = _group.split("id:")[1].split(",")[0]


def _plugin_installed():
    try:
        from importlib.metadata import entry_points

        eps = entry_points()
        group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
        return any(ep.value == "nvfp4check.pytest_plugin" for ep in group)
    except Exception:  # noqa: BLE001
        return False


# The fixture `nvfp4check`: registered by the entry point when the package is installed.
pytest_plugins = [] if _plugin_installed() else ["nvfp4check.pytest_plugin"]

SOURCE_DIR = os.environ.get("NVFP4CHECK_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def program():
    """The nvfp4check program, or None."""
    path = os.environ.get("NVFP4CHECK_PROGRAM")
    if path and os.path.exists(path):
        return path
    return shutil.which("nvfp4check")


@pytest.fixture
def case_dir(tmp_path):
    return str(tmp_path / "cases")


@pytest.fixture(autouse=True)
def _private_temporary_folder(tmp_path, monkeypatch):
    """What a test's replays and programs put in the temporary folder (a failing replay keeps its
    error maps there, by design) lands in the test's own tmp_path, under pytest's --basetemp,
    not in the machine's /tmp run after run."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))


def torch_cuda_reason():
    """Why the GPU tests cannot run here, or None."""
    try:
        import torch
    except ImportError as e:
        return f"torch cannot be imported ({e})"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    import nvfp4check as nc

    info = nc.build_info()
    if not info.get("cuda_build"):
        return f"{info['library']} was built without CUDA"
    if not info.get("cuda_device"):
        return f"the C API sees no CUDA device: {info.get('cuda_why')}"
    return None


_counts = {"ran": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    if report.skipped:
        _counts["skipped"] += 1
    elif report.when == "call":
        _counts["ran"] += 1


def pytest_sessionfinish(session, exitstatus):
    code = os.environ.get("NVFP4CHECK_ALL_SKIPPED_EXIT")
    if code and exitstatus == 0 and _counts["ran"] == 0 and _counts["skipped"] > 0:
        session.exitstatus = int(code)
