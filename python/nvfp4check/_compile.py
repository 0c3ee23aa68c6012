"""Kernels that compile on their first call: what the failure of a compiler says first, and the
compiler's cache left locked by an earlier crash.

describe_exception puts the compiler's own last lines and the file they name before the
traceback (torch's load_inline "Error building extension" with ninja's output, Triton's
CompilationError, a missing module such as CuTe DSL's `cutlass`).

LockWatch runs beside a kernel process: when its main thread waits on torch_extensions' lock file
(torch.utils.file_baton.FileBaton.wait, which spins while the file exists) and that file is older
than this process and no live process has it open, the lock was left by a process that died while
compiling, and will never be released: the wait is ended with StaleCompilerLock, which names the
file and the command that removes it. The file is not removed here: a process of another user or
of another container (another PID namespace) may hold it without this process being able to see
it in /proc. A lock some live process holds is reported once on stderr and waited for.
"""
import os
import re
import sys
import threading
import time
import traceback

_ERROR_LINE = re.compile(r"(error|Error|ERROR|FAILED|fatal|undefined reference|No such file)")


# A compiler's own diagnostic (nvcc, gcc, clang: "FILE:LINE:COL: error: ...", "fatal error: ...").
_DIAGNOSTIC = re.compile(r"\berror\b\s*:")


def _compiler_lines(output, keep=12):
    """The lines of a compiler's output that say what failed: from the compiler's first `error:`
    line (ninja's "FAILED:" and the compiler's long command line come before it), else from the
    first line that looks like an error, at most `keep` of them; else the last `keep` lines."""
    lines = [ln.rstrip() for ln in output.splitlines() if ln.strip()]
    own = [i for i, ln in enumerate(lines) if "Error building extension" not in ln]
    first = next((i for i in own if _DIAGNOSTIC.search(lines[i])), None)
    if first is None:
        first = next((i for i in own if _ERROR_LINE.search(lines[i])), None)
    if first is None:
        return lines[-keep:]
    return lines[first:first + keep]


def _user_frame(tb):
    """(file, line) of the innermost frame outside Python's and torch's libraries, or None."""
    found = None
    for frame, lineno in traceback.walk_tb(tb):
        path = frame.f_code.co_filename
        if "site-packages" in path or "dist-packages" in path or path.startswith("<") or "/lib/python" in path:
            continue
        if os.path.dirname(os.path.abspath(path)) == os.path.dirname(os.path.abspath(__file__)):
            continue
        found = (path, lineno)
    return found


def compile_summary(value, tb):
    """The lines that lead the message of a compile failure, or None for other exceptions."""
    where = _user_frame(tb)
    at = f" (called at {where[0]}:{where[1]})" if where else ""
    text = str(value)
    name = type(value).__name__
    if isinstance(value, StaleCompilerLock):
        return text + at
    if isinstance(value, ModuleNotFoundError):
        hint = {"cutlass": " (CuTe DSL: the nvidia-cutlass-dsl package)", "triton": " (the triton package)",
                "torch": " (the torch package)"}.get((value.name or "").split(".")[0], "")
        return f"module {value.name!r} is not installed for {sys.executable}{hint}{at}"
    if "Error building extension" in text or "Error compiling objects for extension" in text:
        ext = re.search(r"extension '([^']+)'", text)
        head = f"compile error: torch's cpp_extension could not build {ext.group(1)!r}" if ext else \
            "compile error: torch's cpp_extension could not build the extension"
        return head + at + "; the compiler said:\n    " + "\n    ".join(_compiler_lines(text))
    if name in ("CompilationError", "CompileTimeAssertionFailure") or type(value).__module__.startswith(
            ("triton.compiler", "cutlass")):
        return f"compile error ({type(value).__module__}.{name}){at}:\n    " + "\n    ".join(_compiler_lines(text))
    return None


def describe_exception(etype, value, tb):
    """The traceback, led by the compiler's own words when the exception is a compile failure."""
    formatted = "".join(traceback.format_exception(etype, value, tb)).rstrip()
    summary = compile_summary(value, tb) if value is not None else None
    return f"{summary}\n\n{formatted}" if summary else formatted


# ---------------------------------------------------------------------------------------------

class StaleCompilerLock(RuntimeError):
    """Raised in the main thread when it waits on a compiler's lock that nobody will release."""

    message = "a compiler cache lock left by a dead process"

    def __init__(self, *args):
        super().__init__(*(args or (StaleCompilerLock.message,)))


def _holders(path):
    """PIDs of the processes this one can see that have path open."""
    real = os.path.realpath(path)
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == real:
                        pids.append(int(pid))
                        break
                except OSError:
                    continue
        except OSError:
            continue
    return pids


def _waited_lock(frame):
    """The lock file a FileBaton.wait frame (or one of its callers) spins on, or None."""
    while frame is not None:
        owner = frame.f_locals.get("self")
        path = getattr(owner, "lock_file_path", None)
        if frame.f_code.co_name == "wait" and isinstance(path, str):
            return path
        frame = frame.f_back
    return None


class LockWatch:
    """Watches the main thread for a wait on a stale compiler lock (see the module's docstring)."""

    def __init__(self, patience_s=10.0, poll_s=1.0, started=None):
        self.patience_s = patience_s
        self.poll_s = poll_s
        self.started = started if started is not None else _process_start_time()
        self.main = threading.main_thread().ident
        self._told = set()
        self._thread = threading.Thread(target=self._run, name="nvfp4check-lock-watch", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        waiting_since = {}
        while True:
            time.sleep(self.poll_s)
            frame = sys._current_frames().get(self.main)
            path = _waited_lock(frame)
            if path is None:
                waiting_since.clear()
                continue
            since = waiting_since.setdefault(path, time.monotonic())
            if time.monotonic() - since < self.patience_s:
                continue
            try:
                mtime = os.stat(path).st_mtime
            except OSError:
                continue  # released meanwhile
            holders = _holders(path)
            if holders:
                if path not in self._told:
                    self._told.add(path)
                    print(f"nvfp4check: waiting for the compiler's cache lock {path}, held by process "
                          f"{', '.join(map(str, holders))}", file=sys.stderr, flush=True)
                continue
            if mtime >= self.started:
                continue  # made since this process started: a process that may still be starting
            age = time.time() - mtime
            StaleCompilerLock.message = (
                f"the compiler's cache is locked by {path}, left {age:.0f} s ago by a process that died while it "
                f"compiled (no live process has it open; this one waited {time.monotonic() - since:.0f} s): "
                f"torch's cpp_extension waits on it forever. Remove it and run again: rm {path}")
            _raise_in(self.main, StaleCompilerLock)
            waiting_since.clear()


def _raise_in(thread_id, exc_type):
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))


def _process_start_time():
    """This process's start as a Unix time (from /proc), else now."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


# ---------------------------------------------------------------------------------------------

def end_gently_on_sigterm(grace_s=5.0):
    """SIGTERM (the runner stopping this process, or its parent gone) raises SystemExit in the main
    thread, so the `finally` of a compile in progress runs (torch's cpp_extension then kills ninja
    and releases its lock); if the process is still there after grace_s (stuck in a driver call),
    SIGALRM's default action ends it."""
    import signal

    def handler(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.alarm(max(1, int(grace_s)))
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
