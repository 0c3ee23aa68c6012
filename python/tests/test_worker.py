"""python -m nvfp4check.worker FILE[:FUNCTION]: imports a kernel file and checks it; exit codes of
SPEC.md section 6; worker events for `nvfp4check run --python`."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "numpy_kernels.py")


def worker(*args, **kw):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(HERE), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "nvfp4check.worker", *args], capture_output=True, text=True,
                          env=env, **kw)


def test_passing_kernel_exits_0(tmp_path):
    r = worker(f"{KERNELS}:honest_gemv", "--memory", "host", "--cases", "20", "--seed", "5",
               "--case-dir", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS honest_gemv: 20 cases (seed 5)" in r.stdout


def test_failing_kernel_exits_1_with_the_failure_text(tmp_path):
    report = tmp_path / "report.json"
    r = worker(f"{KERNELS}:k_tail_bug", "--op", "gemv", "--op", "gemm", "--memory", "host", "--cases", "100",
               "--seed", "5", "--case-dir", str(tmp_path), "--report", str(report))
    assert r.returncode == 1, r.stdout + r.stderr
    assert 'FAIL k_tail_bug: check "oracle" (seed 5)' in r.stdout
    assert "nvfp4check replay " in r.stdout and "nvfp4check.replay(" in r.stdout
    case_file = json.loads(report.read_text())[0]["kernel"]["failure"]["case_file"]
    # --replay reproduces it.
    again = worker(f"{KERNELS}:k_tail_bug", "--memory", "host", "--replay", case_file, "--case-dir", str(tmp_path))
    assert again.returncode == 1 and 'check "oracle"' in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize("spec,message", [
    ("/no/such/file.py", "no such file"),
    (f"{KERNELS}:no_such_function", "defines no callable no_such_function"),
    (KERNELS, "defines no callable custom_kernel"),  # the GPU MODE default name
])
def test_usage_errors_exit_2(spec, message):
    r = worker(spec, "--memory", "host", "--cases", "1")
    assert r.returncode == 2
    assert message in r.stderr


def test_import_error_exits_2(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_here\n")
    r = worker(str(broken), "--memory", "host", "--cases", "1")
    assert r.returncode == 2 and "no_such_module_here" in r.stderr


def test_gpumode_submission_imports_task_without_their_harness(tmp_path):
    # GPU MODE submissions import their task.py; the worker stands in for it. (Importing only: a
    # gpumode check needs torch.)
    sub = tmp_path / "submission.py"
    sub.write_text("from task import input_t, output_t\n\ndef custom_kernel(data: input_t) -> output_t:\n"
                   "    raise RuntimeError('not run here')\n")
    sys.path.insert(0, os.path.dirname(HERE))
    try:
        from nvfp4check.worker import load_function
    finally:
        sys.path.pop(0)
    fn = load_function(str(sub), gpumode=True)
    assert fn.__name__ == "custom_kernel"


def test_two_gpumode_submissions_load_in_one_process(tmp_path):
    # The second finds the first's stand-in `task` module (no spec): it must reuse it, not fail.
    sys.path.insert(0, os.path.dirname(HERE))
    try:
        from nvfp4check.worker import load_function
    finally:
        sys.path.pop(0)
    fns = []
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        sub = folder / "submission.py"
        sub.write_text("from task import input_t, output_t\n\ndef custom_kernel(data: input_t) -> output_t:\n"
                       "    return None\n")
        fns.append(load_function(str(sub), gpumode=True))
    assert all(fn.__name__ == "custom_kernel" for fn in fns)


def program(*args):
    """`nvfp4check` itself (NVFP4CHECK_PROGRAM), with this package importable by its Python worker."""
    exe = os.environ.get("NVFP4CHECK_PROGRAM")
    if not exe:
        pytest.skip("NVFP4CHECK_PROGRAM does not name the nvfp4check program")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(HERE), env.get("PYTHONPATH")) if p)
    env["NVFP4_PYTHON"] = sys.executable
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env)


def test_run_python_judges_in_the_parent(tmp_path):
    # `nvfp4check run --python`: the function runs in Python's worker process, the program
    # schedules and judges; the report and exit codes are run's.
    report = tmp_path / "report.json"
    r = program("run", "--python", f"{KERNELS}:unwritten_bug", "--op", "gemm", "--memory", "host", "--cases", "5",
                "--seed", "5", "--case-dir", str(tmp_path), "--report", str(report))
    assert r.returncode == 1, r.stdout + r.stderr
    kernel = json.loads(report.read_text())["kernels"][0]
    assert kernel["verdict"] == "fail" and kernel["failure"]["check"] == "unwritten-output"
    assert os.path.exists(kernel["failure"]["case_file"])
    ok = program("run", "--python", f"{KERNELS}:honest_gemv", "--memory", "host", "--cases", "8", "--seed", "5",
                 "--case-dir", str(tmp_path), "--report", str(report))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(report.read_text())["kernels"][0]["cases"] == 8
    bad = program("run", "--python", f"{KERNELS}:no_such_function", "--memory", "host", "--cases", "1")
    assert bad.returncode == 2 and "no_such_function" in bad.stderr, bad.stdout + bad.stderr


def reproduce_line(output):
    lines = [line.split("reproduce: ", 1)[1] for line in output.splitlines() if line.startswith("  reproduce: ")]
    assert lines, output
    return lines[0]


def run_as_printed(line):
    """A printed command run by a shell as a person would paste it, nvfp4check on PATH."""
    exe = os.environ["NVFP4CHECK_PROGRAM"]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join((os.path.dirname(os.path.abspath(exe)), env.get("PATH", "")))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(HERE), env.get("PYTHONPATH")) if p)
    env["NVFP4_PYTHON"] = sys.executable
    return subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, env=env)


def test_reproduce_lines_of_run_python_and_replay_reproduce(tmp_path):
    # The line run prints replays the failing case with the same function, format and op; the
    # line replay prints then does it again.
    r = program("run", "--python", f"{KERNELS}:k_tail_bug", "--op", "gemm", "--memory", "host", "--cases", "60",
                "--seed", "5", "--case-dir", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    check = r.stdout.split('check "', 1)[1].split('"', 1)[0]
    line = reproduce_line(r.stdout)
    assert "--python" in line and "--op gemm" in line, line
    again = run_as_printed(line)
    assert again.returncode == 1, line + "\n" + again.stdout + again.stderr
    assert f'check "{check}"' in again.stdout, again.stdout
    third = run_as_printed(reproduce_line(again.stdout))
    assert third.returncode == 1 and f'check "{check}"' in third.stdout, third.stdout + third.stderr


def test_gpumode_without_torch_is_a_setup_error(tmp_path):
    # format='gpumode' needs torch, on the host too: where it cannot be imported the function is
    # never called, and that is a setup error (exit 2 before the first case, the adapter's
    # message), not the kernel's "exception" failure with a case file.
    try:
        import torch  # noqa: F401
        pytest.skip("torch is importable here")
    except ImportError:
        pass
    called = tmp_path / "called"
    sub = tmp_path / "gm.py"
    sub.write_text("from task import input_t, output_t\n\ndef custom_kernel(data: input_t) -> output_t:\n"
                   f"    open({str(called)!r}, 'w').close()\n    return data[-1]\n")
    cases = tmp_path / "cases"
    r = worker(str(sub), "--format", "gpumode", "--problem", "nvfp4_gemv", "--memory", "host", "--cases", "3",
               "--case-dir", str(cases))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "needs torch" in r.stderr and "FAIL" not in r.stdout, r.stdout + r.stderr
    for problem in ("nvfp4_gemv", "nvfp4_group_gemm", None):
        args = ["run", "--python", str(sub), "--format", "gpumode", "--memory", "host", "--cases", "3",
                "--case-dir", str(cases)] + (["--problem", problem] if problem else [])
        r = program(*args)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "needs torch" in r.stderr and "FAIL" not in r.stdout, r.stdout + r.stderr
    assert not called.exists(), "the function was called"
    assert not cases.exists() or not any(cases.rglob("*.case")), "a case was saved"
    sys.path.insert(0, os.path.dirname(HERE))
    try:
        import nvfp4check as nc
    finally:
        sys.path.pop(0)
    with pytest.raises(ImportError, match="needs torch"):
        nc.check(lambda data: data[-1], problem="nvfp4_gemv", memory="host", cases=3, case_dir=str(cases))
