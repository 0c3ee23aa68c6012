"""nc.check, nc.replay and nc.reference (SPEC.md section 7): the C++ suite driving a KernelAdapter
in this process, through the C API.

The run callback is the only Python on the C++ side's path. It catches everything fn raises
(ctypes would swallow it) and hands the traceback to C, where the case fails with check
"exception" and keeps its case file; KeyboardInterrupt ends the check and is raised again here.
"""
import os
import sys
import tempfile
import warnings

import numpy as np

from . import _abi, _capi
from ._compile import describe_exception
from .adapter import KernelAdapter, KernelFailure



class Failure:
    """The first failure of a check: the runner's check name, the saved case, the text to print, and
    the notes found out about it afterwards (a second run of the case)."""

    __slots__ = ("check", "case_file", "message", "text", "error_map", "element", "notes")

    def __init__(self, check, case_file, message, text, error_map=None, element=None, notes=()):
        self.check = check
        self.case_file = case_file
        self.message = message
        self.text = text
        self.error_map = error_map
        self.element = element
        self.notes = list(notes)

    def add_note(self, note):
        """Adds what was found out about the failure: to its notes, and as a line of its text, as
        the program shows its listeners' notes. The check's message stays its own."""
        self.notes.append(note)
        self.text = self.text.rstrip("\n") + "\n  note: " + note + "\n"

    def __repr__(self):
        return f"Failure(check={self.check!r}, case_file={self.case_file!r})"

    def __str__(self):
        return self.text


class Report:
    """What a check or a replay found: verdict "pass" | "fail" | "skipped", cases, seed, failure."""

    def __init__(self, raw, replay_call):
        kernel = raw.get("kernel", {})
        self.json = raw
        self.name = kernel.get("name")
        self.verdict = kernel.get("verdict", "fail")
        self.cases = kernel.get("cases", 0)
        self.seed = raw.get("seed")
        self.seconds = kernel.get("seconds", 0.0)
        self.warmup_seconds = kernel.get("warmup_seconds", 0.0)  # the warm-up call, not in `seconds`
        self.skip_reason = kernel.get("skip_reason")
        self.command = raw.get("command")
        self.failure = None
        f = kernel.get("failure")
        if f is not None:
            text = raw.get("failure_text") or f"FAIL {self.name}: check \"{f.get('check')}\"\n  {f.get('message')}\n"
            if f.get("case_file"):
                text += f"  reproduce in Python: {replay_call(f['case_file'])}\n"
            self.failure = Failure(f.get("check"), f.get("case_file"), f.get("message"), text, f.get("error_map"),
                                   f.get("element"), f.get("notes", ()))

    @property
    def ok(self):
        """True unless a check failed (a skipped check is not a failure)."""
        return self.verdict != "fail"

    def __repr__(self):
        extra = f", failure={self.failure!r}" if self.failure else ""
        return f"Report(name={self.name!r}, verdict={self.verdict!r}, cases={self.cases}, seed={self.seed}{extra})"

    def __str__(self):
        if self.failure:
            return self.failure.text
        line = f"{self.verdict.upper()} {self.name}: {self.cases} cases"
        if self.seed is not None:
            line += f" (seed {self.seed})"
        if self.skip_reason:
            line += f": {self.skip_reason}"
        return line


def _callback(adapter, capi, serving=False):
    """The ABI callback over adapter, and a dict where an interrupt is kept for re-raising. A
    serving kernel process ends at an interrupt (SIGTERM from the runner, once fn's `finally`
    blocks, a compiler's among them, have run)."""
    state = {"interrupt": None}

    def run(_user, problem_ptr):
        try:
            return adapter(problem_ptr.contents)
        except KernelFailure as f:
            capi.kernel_failed(f.check, f.message)
        except Exception:  # noqa: BLE001 - every error of fn is a failed case, never a crash
            capi.kernel_failed("exception", _user_traceback())
        except BaseException as e:  # KeyboardInterrupt, SystemExit: stop the check
            if serving:
                sys.stderr.flush()
                os._exit(e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 130)
            state["interrupt"] = e
            return _abi.NVFP4CHECK_STOP
        return _abi.NVFP4_ERROR

    return _abi.RUN_FN(run), state


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_traceback():
    """The traceback of the exception being handled, without the frames of this package above fn."""
    etype, value, tb = sys.exc_info()
    while tb is not None and os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) == _PACKAGE_DIR:
        if tb.tb_next is None:
            break  # raised inside the package itself (e.g. by the adapter): keep that frame
        tb = tb.tb_next
    return describe_exception(etype, value, tb)


def _replay_call(adapter):
    fn = getattr(adapter.fn, "__name__", "fn")
    ops = [name for name, bit in _abi.OPS.items() if adapter.info.ops >> bit & 1]
    op = repr(ops[0]) if len(ops) == 1 else repr(tuple(ops))
    # Every declaration that is not the default, so the line replays under the same ones.
    extra = f", flags={adapter.info.flags}" if adapter.info.flags else ""
    layouts = tuple(name for name, bit in _abi.SF_LAYOUTS.items() if adapter.info.sf_layouts >> bit & 1)
    default_layouts = ("permuted",) if adapter.format == "gpumode" else ("linear", "permuted")
    if tuple(sorted(layouts)) != tuple(sorted(default_layouts)):
        extra += f", sf_layouts={layouts!r}"
    for what in ("m_multiple", "n_multiple", "k_multiple", "min_sm"):
        value = getattr(adapter.info, what)
        if value not in (0, 1):
            extra += f", {what}={value}"
    if adapter.stream_mode != "current":
        extra += f", stream={adapter.stream_mode!r}"
    if adapter.out_types != ("fp16",):
        extra += f", out_types={adapter.out_types!r}"
    if adapter.info.max_groups:
        extra += f", max_groups={adapter.info.max_groups}"
    for what in ("in_types", "formats", "recipes", "a_formats", "b_formats"):
        if getattr(adapter, what):
            extra += f", {what}={getattr(adapter, what)!r}"
    return lambda path: (f"nvfp4check.replay({path!r}, {fn}, op={op}, memory={adapter.memory!r}, "
                         f"format={adapter.format!r}{extra})")


def default(what):
    """The engine's default of `what` ("seconds": a check's length with neither cases nor seconds;
    "case_dir"): one value for the program and Python."""
    return _capi.load().build_info()["default_" + what]


def _shape_option(shape):
    if shape is None:
        return None
    if isinstance(shape, dict):
        return shape
    dims = tuple(int(v) for v in shape)
    if len(dims) not in (3, 4):
        raise ValueError(f"shape is (m, n, k) or (m, n, k, l), not {shape!r}")
    return dict(zip(("m", "n", "k", "l"), dims + (1,) * (4 - len(dims))))


def _adapter(fn, **declared):
    """fn itself when it is a KernelAdapter, else fn adapted with these declarations."""
    return fn if isinstance(fn, KernelAdapter) else KernelAdapter(fn, **declared)


def _prepare(adapter, capi):
    """What calling fn needs (torch), imported before the first case: missing, it is a setup error
    (ImportError), not a failure of fn, which would never be called. A CUDA function where the
    suite has no device is skipped, never called: nothing is needed then."""
    if adapter.memory == "cuda" and not capi.build_info().get("cuda_device"):
        return
    adapter.prepare()


def _finish(raw, adapter, state):
    if state["interrupt"] is not None:
        raise state["interrupt"]
    if "error" in raw:
        raise ValueError(raw["error"])
    return Report(raw, _replay_call(adapter))


def _declared(op, format, problem):
    """op and format with their defaults: a GPU MODE problem sets both."""
    if format is None:
        format = "gpumode" if problem is not None else "canonical"
    if op is None and problem is None:
        op = "gemv"
    return op, format


def _other_stream_note(adapter, report, replay_one):
    """A failure a stream ordering explains, run again with torch's current stream the other one:
    the sentence to add to its text when that passes."""
    f = report.failure
    if f is None or adapter.memory != "cuda" or not f.case_file:
        return None
    mine = adapter.stream_mode
    other = "legacy" if mine == "current" else "current"
    note = _capi.load().stream_note(f.check, mine, f"stream={other!r}")
    if not note:
        return None  # no stream ordering explains a failure of this check
    adapter.stream_mode = other
    try:
        again = replay_one(f.case_file)
    finally:
        adapter.stream_mode = mine
    return note if again.verdict == "pass" else None


def check(fn, op=None, memory="cuda", format=None, sf_layouts=None, flags=0, name=None, cases=None,
          seconds=None, seed=None, case_dir=None, *, policy=None, timeout_s=None, shape=None, m_multiple=None,
          n_multiple=None, k_multiple=None, min_sm=0, keep_passing_cases=False, program_args=None, problem=None,
          stream="current", out_types=None, max_groups=0, in_types=None, formats=None, recipes=None, a_formats=None,
          b_formats=None):
    """Checks fn on seeded generated cases with every check of `nvfp4check run`, up to the first
    failure, and returns a Report. fn is called as the format says (see nvfp4check.adapter).

    cases / seconds bound the check (neither: about default("seconds"), the program's default too);
    seed None takes one from the clock and prints it. Every case is saved to case_dir (default
    default("case_dir"), the program's) before it
    runs and kept when it fails, with a PNG error map beside it. policy overrides the oracle
    policy the flags call for ("fp32", "exact", "fp16-accum", "allclose:RTOL:ATOL", "ulp:N");
    shape=(m, n, k[, l]) checks only that shape (production shapes); fn may also be a
    KernelAdapter. op defaults to "gemv", format to "canonical"; problem (a GPU MODE problem,
    "nvfp4_gemv", "nvfp4_gemm", "nvfp4_dual_gemm" or "nvfp4_group_gemm") means format "gpumode",
    its op and its task.yml's multiples. out_types (default ("fp16",)) and max_groups (grouped_gemm;
    0: no limit) are declared like the rest. A quantizer (op="quantize") declares recipes, and
    in_types and formats where not all input types or not NVFP4 (see KernelAdapter).
    stream "legacy" runs fn with torch's current stream the legacy default stream, as GPU MODE's
    harness does; a determinism, stale-state, unwritten-output, stream or oracle failure of a CUDA
    fn is run once more the other way, and the text says when that passes and which ordering is missing. program_args: how `nvfp4check replay` reaches fn
    (["--python", FILE:FN, ...]), for a "reproduce:" line of the program's beside Python's own.
    """
    op, format = _declared(op, format, problem)
    adapter = _adapter(fn, op=op, memory=memory, format=format, sf_layouts=sf_layouts, flags=flags, name=name,
                       m_multiple=m_multiple, n_multiple=n_multiple, k_multiple=k_multiple, min_sm=min_sm,
                       problem=problem, stream=stream, out_types=out_types, max_groups=max_groups, in_types=in_types,
                       formats=formats, recipes=recipes, a_formats=a_formats, b_formats=b_formats)
    capi = _capi.load()
    _prepare(adapter, capi)
    run, state = _callback(adapter, capi)
    # No seed: the engine takes one from the clock and prints it; the report says which.
    seed = None if seed is None else int(seed)
    options = {"cases": cases, "seconds": seconds, "seed": seed, "case_dir": case_dir, "policy": policy,
               "timeout_s": timeout_s, "shape": _shape_option(shape), "keep_passing_cases": keep_passing_cases,
               "replay_args": list(program_args) if program_args else None, "warmup": True}
    raw = capi.check(adapter.info, run, options)
    report = _finish(raw, adapter, state)
    note = _other_stream_note(adapter, report, lambda path: replay(path, adapter, case_dir=os.path.join(
        case_dir or default("case_dir"), "other-stream"), policy=policy, timeout_s=timeout_s))
    if note:
        report.failure.add_note(note)
    return report


def replay(path, fn, op=None, memory="cuda", format=None, flags=0, *, sf_layouts=None, name=None,
           case_dir=None, policy=None, timeout_s=None, m_multiple=None, n_multiple=None, k_multiple=None, min_sm=0,
           problem=None, stream="current", out_types=None, max_groups=0, in_types=None, formats=None, recipes=None,
           a_formats=None, b_formats=None):
    """Runs one saved case (a case file or a binary fuzz input) through every check, like
    `nvfp4check replay`, and returns a Report. op None declares both ops (or the problem's).
    case_dir: where a failure's error map and stale-state case go (default: a fresh temporary
    folder, removed when nothing was written there)."""
    format = format or ("gpumode" if problem is not None else "canonical")
    adapter = _adapter(fn, op=op, memory=memory, format=format, sf_layouts=sf_layouts, flags=flags, name=name,
                       m_multiple=m_multiple, n_multiple=n_multiple, k_multiple=k_multiple, min_sm=min_sm,
                       problem=problem, stream=stream, out_types=out_types, max_groups=max_groups, in_types=in_types,
                       formats=formats, recipes=recipes, a_formats=a_formats, b_formats=b_formats)
    capi = _capi.load()
    _prepare(adapter, capi)
    run, state = _callback(adapter, capi)
    # As `nvfp4check replay`: nothing is written into the current folder unless asked; a failure's
    # text names its error map in the temporary folder, which goes when nothing was written there.
    temporary = tempfile.mkdtemp(prefix="nvfp4check-replay-") if case_dir is None else None
    options = {"case_dir": case_dir or temporary, "policy": policy, "timeout_s": timeout_s}
    try:
        raw = capi.replay(os.fspath(path), adapter.info, run, options)
    finally:
        if temporary is not None and not os.listdir(temporary):
            os.rmdir(temporary)
    return _finish(raw, adapter, state)


def serve(fn, fd, *, op="gemv", memory="cuda", format="canonical", sf_layouts=None, flags=0, name=None,
          timeout_s=30.0, m_multiple=None, n_multiple=None, k_multiple=None, min_sm=0):
    """Serves fn as the kernel process of `nvfp4check run --python` over the channel fd: the parent
    schedules and judges every case; this process only calls fn and reports what it left behind.
    Returns the exit code."""
    adapter = _adapter(fn, op=op, memory=memory, format=format, sf_layouts=sf_layouts, flags=flags, name=name,
                       m_multiple=m_multiple, n_multiple=n_multiple, k_multiple=k_multiple, min_sm=min_sm)
    capi = _capi.load()
    _prepare(adapter, capi)  # before the parent is told the kernel: a setup error ends the run with exit 2
    run, state = _callback(adapter, capi, serving=True)
    code = capi.serve(adapter.info, run, fd, float(timeout_s))
    if state["interrupt"] is not None:
        raise state["interrupt"]
    return code


def check_plugin(plugin, kernel, cases=None, seconds=None, seed=None, case_dir=None, *, op=None, policy=None,
                 timeout_s=None, shape=None):
    """A kernel of an ABI plugin (a shared library, as for `nvfp4check run --plugin`) through the same
    case loop in this process: the baseline the Python overhead is measured against."""
    seed = None if seed is None else int(seed)
    options = {"op": op, "cases": cases, "seconds": seconds, "seed": seed, "case_dir": case_dir,
               "policy": policy, "timeout_s": timeout_s, "shape": _shape_option(shape)}
    raw = _capi.load().check_plugin(os.fspath(plugin), kernel, options)
    if "error" in raw:
        raise ValueError(raw["error"])
    return Report(raw, lambda path: f"nvfp4check replay {path} --plugin {plugin} --kernel {kernel}")


# numpy dtype of each output type: BF16 as its uint16 bits (numpy has no bfloat16).
_OUT_DTYPES = {"fp16": "<f2", "bf16": "<u2", "fp32": "<f4"}


def reference(path):
    """The exact output of a case file, like `nvfp4check reference`: numpy of shape (l, m, n) in
    the case's output type (float16, float32, or BF16 as uint16 bits); for a grouped case a list
    with one (1, m_g, n_g) array per group; for a quantize case (q, sfq), numpy uint8: Q as
    (l, m, k/2) packed E2M1 or (l, m, k) MXFP8 codes, SFQ (l, m, kb) in linear order. Warns when
    the case's own expect lines disagree."""
    header, words = _capi.load().reference(os.fspath(path))
    if "error" in header:
        raise ValueError(header["error"])
    raw = np.frombuffer(words, dtype=np.uint16).tobytes() if words is not None else b""
    if header.get("op") == "quantize":
        return _quantize_reference(header, raw)
    out = np.frombuffer(raw, dtype=np.dtype(_OUT_DTYPES[header.get("out_type", "fp16")])).copy()
    if header.get("expect_mismatches"):
        warnings.warn(f"{path}: {header['expect_mismatches']} output(s) differ from the case's expect line; "
                      "either the case or the reference is wrong", RuntimeWarning, stacklevel=2)
    if "groups" in header:
        parts, at = [], 0
        for m, n in header["groups"]:
            parts.append(out[at:at + m * n].reshape(1, m, n))
            at += m * n
        return parts
    return out.reshape(header["l"], header["m"], header["n"])


def _quantize_reference(header, raw):
    l, m, kb = header["l"], header["m"], header["kb"]
    q_bytes, sfq_bytes = header["q_bytes"], header["sfq_bytes"]
    out = np.frombuffer(raw, dtype=np.uint8)
    q = out[:q_bytes].copy().reshape(l, m, q_bytes // max(1, l * m))
    sfq = out[q_bytes:q_bytes + sfq_bytes].copy().reshape(l, m, kb)
    return q, sfq


def build_info():
    """What the loaded C API was built with: {"version", "cuda_build", "cuda_device", ...}."""
    capi = _capi.load()
    info = capi.build_info()
    info["library"] = capi.path
    return info
