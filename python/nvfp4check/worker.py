"""python -m nvfp4check.worker FILE[:FUNCTION] [options]: checks a kernel defined in a Python file.

Imports FILE (a GPU MODE submission, a module with a canonical kernel), takes FUNCTION from it
(default custom_kernel) and runs nc.check on it, or nc.replay with --replay CASE. Prints the
failure text or a one-line verdict; exit code 0 pass or skipped, 1 a check failed, 2 bad usage or
input (SPEC.md section 6). With --serve-fd FD it is instead the kernel process of
`nvfp4check run --python` (harness/process/worker.h): the parent schedules and judges every case, this
process only calls the kernel, so a crash or hang of the kernel cannot take the parent with it.
"""
import argparse
import importlib
import importlib.util
import json
import os
import sys
import types

from . import _abi
from ._compile import LockWatch, describe_exception, end_gently_on_sigterm
from .adapter import PROBLEMS, STREAMS, KernelAdapter
from .driver import check, replay, serve

FLAG_NAMES = {
    "signed_scales": _abi.FLAG_SIGNED_SCALES,
    "nondeterministic": _abi.FLAG_NONDETERMINISTIC,
    "fp16_accumulate": _abi.FLAG_FP16_ACCUMULATE,
    "saturates": _abi.FLAG_SATURATES,
    "exact": _abi.FLAG_EXACT,
    "unit_alpha": _abi.FLAG_UNIT_ALPHA,
    "mma_accumulate": _abi.FLAG_MMA_ACCUMULATE,
    "groups_packed": _abi.FLAG_GROUPS_PACKED,
    "quant_2d": _abi.FLAG_QUANT_2D,
    "row_global_scale": _abi.FLAG_ROW_GLOBAL_SCALE,
    "stochastic": _abi.FLAG_STOCHASTIC,
    "sf_padding_kept": _abi.FLAG_SF_PADDING_KEPT,
}


class UsageError(Exception):
    pass


def _gpumode_task_module():
    """GPU MODE submissions `from task import input_t, output_t`; outside their harness there is
    no task.py, so this stands in for it (the same names as problems/nvidia/nvfp4_*/task.py)."""
    from typing import TypeVar

    task = types.ModuleType("task")
    task.input_t = TypeVar("input_t", bound=tuple)
    task.output_t = TypeVar("output_t")
    task.TestSpec = dict
    return task


def split_spec(spec, default_function="custom_kernel"):
    """"path/to/file.py:fn" -> ("path/to/file.py", "fn"); "pkg.module:fn" works too."""
    head, sep, tail = spec.rpartition(":")
    if sep and tail.isidentifier() and head:
        return head, tail
    return spec, default_function


def _have_task_module():
    """Whether `import task` works already: the submission's own task.py, or the stand-in an earlier
    submission of this process got (a module without a spec, which find_spec refuses to look at)."""
    if "task" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("task") is not None
    except (ImportError, ValueError):
        return False


def load_function(spec, default_function="custom_kernel", gpumode=False):
    """The callable FUNCTION of FILE (or of an importable module) in FILE[:FUNCTION]."""
    where, name = split_spec(spec, default_function)
    if where.endswith(".py") or os.sep in where or os.path.isfile(where):
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise UsageError(f"{where}: no such file")
        directory = os.path.dirname(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)  # its siblings (task.py, helpers) import as in its own folder
        if gpumode and not _have_task_module():
            sys.modules["task"] = _gpumode_task_module()
        module_name = "nvfp4check_kernel_" + "".join(ch if ch.isalnum() else "_" for ch in os.path.basename(path)[:-3])
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        raise UsageError(f"{where} defines no callable {name}")
    return fn


def _shape(text):
    try:
        dims = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) not in (3, 4):
        raise argparse.ArgumentTypeError(f"expected MxNxK or MxNxKxL, not {text!r}")
    return dims


def parser():
    p = argparse.ArgumentParser(prog="python -m nvfp4check.worker", description=__doc__.split("\n\n")[0])
    p.add_argument("kernel", metavar="FILE[:FUNCTION]", help="Python file (or module) and function (default custom_kernel)")
    # --format is how the kernel is called (canonical, gpumode) and, for a quantizer, a format it
    # writes (SPEC.md section 6): the value says which.
    p.add_argument("--format", choices=("canonical", "gpumode") + tuple(_abi.BLOCK_FORMATS), action="append",
                   dest="format_words", default=[],
                   help="canonical (default) or gpumode (with --problem); a quantizer's output format (repeatable)")
    p.add_argument("--in-type", choices=tuple(_abi.IN_TYPES), action="append", dest="in_types",
                   help="a quantizer's input type (repeatable; default all)")
    p.add_argument("--recipe", choices=tuple(_abi.RECIPES), action="append", dest="recipes",
                   help="a recipe the quantizer follows (repeatable; required with --op quantize)")
    p.add_argument("--a-format", choices=tuple(_abi.BLOCK_FORMATS), action="append", dest="a_formats")
    p.add_argument("--b-format", choices=tuple(_abi.BLOCK_FORMATS), action="append", dest="b_formats")
    p.add_argument("--op", choices=tuple(_abi.OPS), action="append",
                   help="op the kernel declares (repeatable; default gemv, both for --replay, the problem's)")
    p.add_argument("--problem", choices=sorted(PROBLEMS),
                   help="a GPU MODE problem (gpumode format): its reference.py's tuple, op and task.yml's limits")
    p.add_argument("--stream", choices=STREAMS, default="current",
                   help="torch's current stream during the call: the runner's, or the legacy default stream")
    p.add_argument("--out-type", choices=("fp16", "bf16", "fp32"), action="append", dest="out_types",
                   help="an output type the kernel declares (repeatable; default fp16)")
    p.add_argument("--max-groups", type=int, default=0,
                   help="grouped GEMM: the most groups the kernel takes in one call (default 0: no limit)")
    p.add_argument("--memory", choices=("host", "cuda"), default="cuda")
    p.add_argument("--sf-layout", choices=("linear", "permuted"), action="append", dest="sf_layouts")
    p.add_argument("--flag", choices=sorted(FLAG_NAMES), action="append", default=[], help="a declared flag (repeatable)")
    p.add_argument("--flags", type=int, default=0, help="declared flags as a number (SPEC.md section 5 bits)")
    p.add_argument("--name", help="kernel name (default: FUNCTION, lowercased)")
    p.add_argument("--m-multiple", type=int, help="declared: m is a multiple of this (default 1, or the problem's)")
    p.add_argument("--n-multiple", type=int, help="declared: n is a multiple of this (default 1, or the problem's)")
    p.add_argument("--k-multiple", type=int, help="declared: k is a multiple of this (default 1, or the problem's)")
    p.add_argument("--min-sm", type=int, default=0)
    p.add_argument("--cases", type=int)
    p.add_argument("--seconds", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--case-dir")
    p.add_argument("--policy")
    p.add_argument("--timeout", type=float)
    p.add_argument("--shape", type=_shape, help="every case of this shape, MxNxK or MxNxKxL")
    # --input: the same, under the name a person replaying inputs may reach for first.
    p.add_argument("--replay", "--input", metavar="CASE", action="append", default=[], dest="replay",
                   help="replay saved cases instead (repeatable)")
    p.add_argument("--report", help="write the JSON report(s) here")
    p.add_argument("--serve-fd", type=int, help="serve the kernel to a parent `nvfp4check run` over this descriptor")
    return p


def program_args(args):
    """How `nvfp4check replay --python` reaches this function with these declarations."""
    path, colon, function = args.kernel.partition(":")
    if os.path.exists(path):
        path = os.path.abspath(path)  # the line must work from any directory
    out = ["--python", path + colon + function, "--format", args.format, "--memory", args.memory]
    if args.problem:
        out += ["--problem", args.problem]
    if args.stream != "current":
        out += ["--stream", args.stream]
    for t in args.out_types or []:
        out += ["--out-type", t]
    for op in args.op or ([] if args.problem else ["gemv"]):
        out += ["--op", op]
    for option, values in (("--in-type", args.in_types), ("--recipe", args.recipes), ("--format", args.formats),
                           ("--a-format", args.a_formats), ("--b-format", args.b_formats)):
        for v in values or []:
            out += [option, v]
    for layout in args.sf_layouts or []:
        out += ["--sf-layout", layout]
    for name in args.flag:
        out += ["--flag", name]
    if args.flags:
        out += ["--flags", str(args.flags)]
    for what in ("m_multiple", "n_multiple", "k_multiple"):
        if (getattr(args, what) or 1) > 1:
            out += ["--" + what.replace("_", "-"), str(getattr(args, what))]
    if args.min_sm:
        out += ["--min-sm", str(args.min_sm)]
    if args.max_groups:
        out += ["--max-groups", str(args.max_groups)]
    if args.name:
        out += ["--name", args.name]
    return out


def _refuse(fd, why):
    """A kernel process that cannot start says why to its parent, which puts it in the failure
    (otherwise the parent sees only an exit status, the compiler's words far up on stderr)."""
    try:
        from . import _capi
        _capi.load().serve_refused(fd, why)
    except Exception:  # noqa: BLE001 - no C API here: the parent still sees the exit status
        pass


def main(argv=None):
    args = parser().parse_args(argv)
    calling = [w for w in args.format_words if w in ("canonical", "gpumode")]
    args.format = calling[-1] if calling else None
    args.formats = [w for w in args.format_words if w not in ("canonical", "gpumode")]
    # A submission may compile when imported or on its first call: SIGTERM lets that compile end
    # cleanly, and a wait on a compiler's lock that a dead process left is ended and named.
    end_gently_on_sigterm()
    LockWatch().start()
    if args.format is None:
        args.format = "gpumode" if args.problem else "canonical"
    try:
        if args.problem and args.format != "gpumode":
            raise UsageError(f"--problem {args.problem} is a GPU MODE problem: --format gpumode")
        try:
            fn = load_function(args.kernel, gpumode=args.format == "gpumode")
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever importing the file raised
            raise UsageError(f"cannot import {args.kernel}: {describe_exception(*sys.exc_info())}") from e
        flags = args.flags
        for name in args.flag:
            flags |= FLAG_NAMES[name]
        op = tuple(args.op) if args.op else (None if args.replay or args.problem else "gemv")
        adapter = KernelAdapter(fn, op=op, memory=args.memory, format=args.format, sf_layouts=args.sf_layouts,
                                flags=flags, name=args.name, m_multiple=args.m_multiple, n_multiple=args.n_multiple,
                                k_multiple=args.k_multiple, min_sm=args.min_sm, problem=args.problem,
                                stream=args.stream, out_types=args.out_types, max_groups=args.max_groups,
                                in_types=args.in_types, formats=args.formats or None, recipes=args.recipes,
                                a_formats=args.a_formats, b_formats=args.b_formats)
        if args.serve_fd is not None:
            return serve(adapter, args.serve_fd, timeout_s=args.timeout or 30.0)
        if args.replay:
            reports = [replay(path, adapter, case_dir=args.case_dir, policy=args.policy, timeout_s=args.timeout)
                       for path in args.replay]
        else:
            reports = [check(adapter, cases=args.cases, seconds=args.seconds or None, seed=args.seed, case_dir=args.case_dir,
                             policy=args.policy, timeout_s=args.timeout, shape=args.shape,
                             program_args=program_args(args))]
    except (UsageError, ValueError, TypeError, ImportError, SyntaxError) as e:
        print(f"nvfp4check.worker: {e}", file=sys.stderr)
        if args.serve_fd is not None:
            _refuse(args.serve_fd, str(e))
        return 2
    for r in reports:
        print(r)
    if args.report:
        with open(args.report, "w") as out:
            json.dump([r.json for r in reports], out, indent=2)
    return 1 if any(r.verdict == "fail" for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
