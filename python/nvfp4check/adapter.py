"""A Python callable as an nvfp4 kernel (SPEC.md sections 5 and 7).

KernelAdapter turns fn into what the ABI describes: an nvfp4_kernel_info and a call that takes one
nvfp4_problem (pointers into the runner's guarded buffers) and returns NVFP4_OK or
NVFP4_UNSUPPORTED. It builds fn's arguments over those buffers without copying them, so guards,
unchanged inputs and stale state are checked on what fn really did. It knows nothing of who drives
it: nc.check drives it in this process through the C API; a worker process may drive it for
`nvfp4check run --python`.

Formats:
  canonical  fn(p): p.op, p.m, p.n, p.k, p.l, p.alpha, p.sf_layout and the arrays
             p.a (l, m, k/2) and p.b (l, n, k/2) uint8, packed E2M1;
             p.sfa, p.sfb uint8 E4M3 scales: linear (l, rows, kb), or permuted
             (l, ceil(rows/128), ceil(kb/4), 32, 4, 4) = [b, i/128, s/4, i%32, (i%128)/32, s%4];
             p.c (l, m, n) float16, written in place.
             numpy arrays over the runner's host buffers (memory="host") or torch CUDA tensors
             over its device buffers (memory="cuda"). fn returns None or nc.UNSUPPORTED.
  gpumode    fn(data) with the tuple GPU MODE's nvfp4_gemv / nvfp4_gemm reference.py builds
             (github.com/gpu-mode/reference-kernels, problems/nvidia/nvfp4_{gemv,gemm}):
             (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c); fn returns the output tensor.
             `problem` names the GPU MODE problem (PROBLEMS): its op and, by default, the shape
             limits its task.yml states.

Declarations (op, sf_layouts, the shape multiples, min_sm, out types) are the adapter's to keep:
fn is never called with a problem outside them; the adapter answers NVFP4_UNSUPPORTED for it,
untouched. A CUDA fn runs with torch's current stream set to the runner's stream (stream="current")
or to the legacy default stream, as GPU MODE's harness runs everything (stream="legacy"), and may
return before its work ends; work on any stream not ordered after it is caught by the stream checks.
"""
import numbers

import numpy as np

from . import _abi, _capi
from ._abi import ceil_div

FORMATS = ("canonical", "gpumode")
STREAMS = ("current", "legacy")
# The only output type this build's suite judges (SPEC.md revision 3 adds bf16 and fp32).
OUT_TYPES = ("fp16",)

# GPU MODE's NVFP4 problems (gpu-mode/reference-kernels, problems/nvidia/<name>): the op, and the
# shape limits their task.yml states, as declarations. nvfp4_gemv: "M is divisible by
# mma_tiler_mn[0] defined in the kernel, K is divisible by 64" (its template_cute.py tiles M by
# 128, and every test and benchmark shape has M a multiple of 128). nvfp4_gemm: "M is divisible by
# mma_tiler_mn[0], N by mma_tiler_mn[1], K by 256" (its submission.py: mma_tiler_mnk = (128, 128,
# 256)). nvfp4_group_gemm and nvfp4_dual_gemm come with the grouped and dual ops.
PROBLEMS = {
    "nvfp4_gemv": {"op": "gemv", "m_multiple": 128, "n_multiple": 1, "k_multiple": 64},
    "nvfp4_gemm": {"op": "gemm", "m_multiple": 128, "n_multiple": 128, "k_multiple": 256},
}
LATER_PROBLEMS = ("nvfp4_group_gemm", "nvfp4_dual_gemm")


def problem_declarations(problem, op=None, m_multiple=None, n_multiple=None, k_multiple=None):
    """(op, m_multiple, n_multiple, k_multiple) for GPU MODE's problem (None: no problem), the
    given values overriding its task.yml's; ValueError for an unknown problem or an op it is not."""
    if problem is None:
        return (op, m_multiple or 1, n_multiple or 1, k_multiple or 1)
    if problem in LATER_PROBLEMS:
        raise ValueError(f"problem {problem!r} needs the {problem[6:].replace('_', ' ')} op, which this version "
                         f"does not check yet; known: {sorted(PROBLEMS)}")
    if problem not in PROBLEMS:
        raise ValueError(f"problem must be one of {sorted(PROBLEMS)}, not {problem!r}")
    d = PROBLEMS[problem]
    if op is not None and (op if isinstance(op, str) else tuple(op)) not in (d["op"], (d["op"],)):
        raise ValueError(f"problem {problem!r} is op {d['op']!r}, not {op!r}")
    return (d["op"], m_multiple or d["m_multiple"], n_multiple or d["n_multiple"], k_multiple or d["k_multiple"])


class _Unsupported:
    """What fn returns for a problem outside what it declares (it must have touched nothing)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "nvfp4check.UNSUPPORTED"

    def __reduce__(self):
        return (_Unsupported, ())


UNSUPPORTED = _Unsupported()


class KernelFailure(Exception):
    """A failure the adapter itself detects in what fn did (e.g. a gpumode fn returning a tensor of
    the wrong shape), reported as the runner check `check`."""

    def __init__(self, check, message):
        super().__init__(message)
        self.check = check
        self.message = message


# ---------------------------------------------------------------------------------------------
# Memory views without copies.

def host_array(address, shape, dtype=np.uint8):
    """A numpy array over host memory the runner owns (no copy; valid during the call)."""
    import ctypes

    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    buf = (ctypes.c_uint8 * (count * dtype.itemsize)).from_address(address)
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


class _CudaBytes:
    """__cuda_array_interface__ (version 2: no stream synchronisation) over device bytes."""

    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, address, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 2, "strides": None}


def cuda_tensor(torch, address, shape, dtype=None):
    """A torch CUDA tensor over device memory the runner owns (no copy; valid during the call)."""
    nbytes = int(np.prod(shape)) * (2 if dtype is not None and dtype == torch.float16 else 1)
    t = torch.as_tensor(_CudaBytes(address, nbytes), device="cuda")
    if dtype is not None:
        t = t.view(dtype)
    return t.view(*shape)


def _import_torch():
    try:
        import torch
    except ImportError as e:  # reported as the case's "exception", with this text
        raise ImportError("memory='cuda' and format='gpumode' need torch, which cannot be imported here: "
                          f"{e}") from e
    return torch


class Sizes:
    """Shapes of one problem's tensors (SPEC.md section 2)."""

    __slots__ = ("op", "m", "n", "k", "l", "kb", "half", "permuted", "sfa_shape", "sfb_shape")

    def __init__(self, problem):
        self.op = _abi.OP_NAMES.get(problem.op, str(problem.op))
        self.m, self.n, self.k, self.l = problem.m, problem.n, problem.k, problem.l
        self.kb = ceil_div(self.k, 16)
        self.half = self.k // 2
        self.permuted = problem.sf_layout == _abi.NVFP4_SF_PERMUTED
        self.sfa_shape = self.scale_shape(self.m)
        self.sfb_shape = self.scale_shape(self.n)

    def scale_shape(self, rows):
        if self.permuted:
            return (self.l, ceil_div(rows, 128), ceil_div(self.kb, 4), 32, 4, 4)
        return (self.l, rows, self.kb)


class Problem:
    """One problem as a canonical kernel sees it (see the module's docstring)."""

    __slots__ = ("op", "m", "n", "k", "l", "alpha", "sf_layout", "out_type", "a", "b", "sfa", "sfb", "c", "stream")

    def __repr__(self):
        return (f"Problem(op={self.op!r}, m={self.m}, n={self.n}, k={self.k}, l={self.l}, alpha={self.alpha!r}, "
                f"sf_layout={self.sf_layout!r})")


# ---------------------------------------------------------------------------------------------

def kernel_name(fn):
    """A valid kernel name ([a-z0-9_]+) from fn's name."""
    raw = getattr(fn, "__name__", "") or ""
    name = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in raw.lower())
    return name or "python_kernel"


def _names(value, table, what):
    if isinstance(value, str):
        value = (value,)
    bits = 0
    for v in value:
        if v not in table:
            raise ValueError(f"{what} must be one of {sorted(table)}, not {v!r}")
        bits |= 1 << table[v]
    if not bits:
        raise ValueError(f"no {what} given")
    return bits


class KernelAdapter:
    """fn as an ABI kernel: .info (an nvfp4_kernel_info) and a call problem -> NVFP4_* code.

    op: "gemv", "gemm", or both as a tuple; None declares both (or the problem's op). sf_layouts:
    a tuple of "linear", "permuted" (None: both for canonical, permuted for gpumode). flags:
    SPEC.md section 5 bits. problem: a GPU MODE problem name (PROBLEMS; gpumode only), which sets
    op and the default multiples. stream: "current" or "legacy" (see the module's docstring).
    out_types: ("fp16",), the one output type of this version.
    A gpumode kernel always reads permuted scales and has no alpha (it declares
    FLAG_UNIT_ALPHA). The adapter refuses every problem outside the declaration on fn's behalf,
    so fn never sees one; fn returning UNSUPPORTED inside it is the suite's refused-supported.
    """

    # How long the runner's stream is held before C's poison is put back (gpumode on CUDA, see
    # _gpumode_cuda_hold): GPU clock cycles, about 4 ms at 2 GHz, like the runner's own hold.
    HOLD_CYCLES = 8_000_000

    def __init__(self, fn, *, op="gemv", memory="cuda", format="canonical", sf_layouts=None, flags=0, name=None,
                 m_multiple=None, n_multiple=None, k_multiple=None, min_sm=0, problem=None, stream="current",
                 out_types=None):
        if not callable(fn):
            raise TypeError(f"the kernel must be callable, not {type(fn).__name__}")
        if format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, not {format!r}")
        if problem is not None and format != "gpumode":
            raise ValueError(f"problem={problem!r} is a GPU MODE problem: it goes with format='gpumode'")
        op, m_multiple, n_multiple, k_multiple = problem_declarations(problem, op if problem is None or op != "gemv"
                                                                      else None, m_multiple, n_multiple, k_multiple)
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {STREAMS}, not {stream!r}")
        if out_types is not None:
            for t in (out_types,) if isinstance(out_types, str) else out_types:
                if t not in ("fp16", "bf16", "fp32"):
                    raise ValueError(f"out_types are fp16, bf16 or fp32, not {t!r}")
                if t not in OUT_TYPES:
                    raise ValueError(f"out type {t!r}: this version of the suite judges fp16 outputs only")
        if not isinstance(min_sm, numbers.Integral) or min_sm < 0:
            raise ValueError(f"min_sm must be a non-negative integer (e.g. 100 for sm_100), not {min_sm!r}")
        if memory not in _abi.MEMORIES:
            raise ValueError(f"memory must be one of {sorted(_abi.MEMORIES)}, not {memory!r}")
        if not isinstance(flags, numbers.Integral) or flags < 0 or flags & ~_abi.ALL_FLAGS:
            raise ValueError(f"flags must be a combination of nvfp4check.FLAG_* bits, not {flags!r}")
        for what, v in (("m_multiple", m_multiple), ("n_multiple", n_multiple), ("k_multiple", k_multiple)):
            if not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"{what} must be a positive integer, not {v!r}")
        if sf_layouts is None:
            sf_layouts = ("permuted",) if format == "gpumode" else ("linear", "permuted")
        if format == "gpumode":
            if isinstance(sf_layouts, str):
                sf_layouts = (sf_layouts,)
            if tuple(sf_layouts) != ("permuted",):
                raise ValueError("a gpumode kernel reads the permuted scale layout only (sf_layouts=('permuted',))")
            flags |= _abi.FLAG_UNIT_ALPHA
        self.fn = fn
        self.format = format
        self.memory = memory
        self.problem = problem
        self.stream_mode = stream
        self.name = name if name is not None else kernel_name(fn)
        self._name_bytes = self.name.encode()  # the info points at it: keep it alive
        self.info = _abi.nvfp4_kernel_info(
            abi_version=_abi.NVFP4_ABI_VERSION,
            name=self._name_bytes,
            memory=_abi.MEMORIES[memory],
            ops=_names(("gemv", "gemm") if op is None else op, _abi.OPS, "op"),
            sf_layouts=_names(sf_layouts, _abi.SF_LAYOUTS, "sf_layouts"),
            min_sm=int(min_sm),
            m_multiple=int(m_multiple),
            n_multiple=int(n_multiple),
            k_multiple=int(k_multiple),
            flags=int(flags),
        )
        self._torch = None
        self._cuda_streams = {}

    def __repr__(self):
        return f"KernelAdapter({self.name!r}, format={self.format!r}, memory={self.memory!r})"

    def declares(self, problem):
        """Whether problem (an nvfp4_problem) lies inside what the info declares, by the suite's
        own rule (harness/case_check.h's unsupported_reason, through the C API)."""
        return _capi.load().unsupported_reason(self.info, problem) == ""

    def __call__(self, problem):
        """Runs fn on one nvfp4_problem; returns NVFP4_OK or NVFP4_UNSUPPORTED. fn's exceptions and
        KernelFailure propagate (the driver reports them)."""
        if not self.declares(problem):
            # The declaration lives here, not in fn: fn is never handed what it did not promise.
            return _abi.NVFP4_UNSUPPORTED
        if self.format == "gpumode":
            return self._call_gpumode(problem)
        return self._call_canonical(problem)

    # -- canonical ------------------------------------------------------------------------------

    def _call_canonical(self, problem):
        s = Sizes(problem)
        p = Problem()
        p.op, p.m, p.n, p.k, p.l = s.op, s.m, s.n, s.k, s.l
        p.alpha = float(problem.alpha)
        p.sf_layout = _abi.SF_LAYOUT_NAMES.get(problem.sf_layout, str(problem.sf_layout))
        p.out_type = "fp16"
        if self.memory == "host":
            p.a = host_array(problem.a, (s.l, s.m, s.half))
            p.b = host_array(problem.b, (s.l, s.n, s.half))
            p.sfa = host_array(problem.sfa, s.sfa_shape)
            p.sfb = host_array(problem.sfb, s.sfb_shape)
            p.c = host_array(problem.c, (s.l, s.m, s.n), np.float16)
            p.stream = None
            return self._canonical_result(self.fn(p), p)
        torch = self._get_torch()
        p.a = cuda_tensor(torch, problem.a, (s.l, s.m, s.half))
        p.b = cuda_tensor(torch, problem.b, (s.l, s.n, s.half))
        p.sfa = cuda_tensor(torch, problem.sfa, s.sfa_shape)
        p.sfb = cuda_tensor(torch, problem.sfb, s.sfb_shape)
        p.c = cuda_tensor(torch, problem.c, (s.l, s.m, s.n), torch.float16)
        runner = self._stream(torch, problem.stream)
        if self.stream_mode == "legacy":
            # fn's work goes on the legacy default stream, ordered after the runner's stream's
            # uploads, and the runner's stream after it: what fn leaves there is its output.
            p.stream = torch.cuda.default_stream()
            p.stream.wait_stream(runner)
            with torch.cuda.stream(p.stream):
                out = self._canonical_result(self.fn(p), p)
            runner.wait_stream(p.stream)
            return out
        p.stream = runner
        with torch.cuda.stream(p.stream):
            return self._canonical_result(self.fn(p), p)

    @staticmethod
    def _canonical_result(out, p):
        if out is None or out is p.c:
            return _abi.NVFP4_OK
        if out is UNSUPPORTED:
            return _abi.NVFP4_UNSUPPORTED
        raise KernelFailure("kernel-error", f"a canonical kernel writes p.c in place and returns None (or "
                                            f"nvfp4check.UNSUPPORTED); it returned {type(out).__name__}")

    # -- gpumode --------------------------------------------------------------------------------

    def _call_gpumode(self, problem):
        torch = self._get_torch()
        s = Sizes(problem)
        if self.memory != "cuda":
            views = gpumode_views(torch, problem, s, device_tensors=False)
            data, write_back = gpumode_data(torch, views, s)
            return self._gpumode_result(torch, self.fn(data), data, write_back, s)
        stream = self._stream(torch, problem.stream)
        legacy = torch.cuda.default_stream()
        with torch.cuda.stream(stream):
            views = gpumode_views(torch, problem, s, device_tensors=True)
            data, write_back = gpumode_data(torch, views, s)
            self._gpumode_cuda_hold(torch, views["c"])
            # GPU MODE's harness runs everything on the legacy default stream, so a kernel launched
            # there (a <<<grid, block>>> without a stream) is honest: that stream is ordered after
            # the hold, and the runner's stream after whatever fn leaves on it. With
            # stream="legacy" torch's current stream is that stream too, as in their harness.
            legacy.wait_stream(stream)
            if self.stream_mode == "legacy":
                with torch.cuda.stream(legacy):
                    out = self.fn(data)
            else:
                out = self.fn(data)
            stream.wait_stream(legacy)
            return self._gpumode_result(torch, out, data, write_back, s)

    def _gpumode_cuda_hold(self, torch, c):
        # Building the tuple may wait for the runner's stream (the first GEMV fill of a shape comes
        # from the host), which undoes the runner's hold (work a kernel starts on a stream of its
        # own would find its inputs in place). So hold it again: the stream waits, then C gets its
        # poison back; a kernel working on a stream of its own wrote C before that (unwritten
        # output) or after the runner's stream was done (the stream check).
        poison = c.clone()  # same dtype: a bitwise copy, NaN payloads kept
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is not None:
            sleep(self.HOLD_CYCLES)
        c.copy_(poison)

    @staticmethod
    def _gpumode_result(torch, out, data, write_back, s):
        if out is UNSUPPORTED:
            return _abi.NVFP4_UNSUPPORTED
        c = data[6]
        want = (s.m, s.n, s.l)
        if not isinstance(out, torch.Tensor):
            raise KernelFailure("kernel-error", f"a gpumode kernel returns the output tensor c {list(want)} "
                                                f"(torch.float16); it returned {type(out).__name__}")
        if tuple(out.shape) != want or out.dtype != torch.float16:
            raise KernelFailure("kernel-error", f"a gpumode kernel returns the output tensor c {list(want)} "
                                                f"torch.float16; it returned shape {list(out.shape)} {out.dtype}")
        if not (out.data_ptr() == c.data_ptr() and out.stride() == c.stride() and out.device == c.device):
            c.copy_(out)  # on the runner's stream, like everything fn enqueued there
        for source, target in write_back:
            target.copy_(source)
        return _abi.NVFP4_OK

    # -- torch ----------------------------------------------------------------------------------

    def _get_torch(self):
        if self._torch is None:
            self._torch = _import_torch()
        return self._torch

    def _stream(self, torch, address):
        if not address:
            return torch.cuda.current_stream()
        stream = self._cuda_streams.get(address)
        if stream is None:
            # The runner makes a stream per case. torch keeps what was allocated on a stream (its
            # caching allocator's blocks, a cuBLAS workspace) for that stream only, so every 64 new
            # streams what dead ones hold is given back, before this call enqueues anything (the
            # runner synchronised the device after the last call; cudaFree waits for this call's
            # uploads, which only this one call in 64 notices).
            if len(self._cuda_streams) >= 64:
                self._cuda_streams.clear()
                torch.cuda.empty_cache()
                clear_workspaces = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
                if clear_workspaces is not None:
                    clear_workspaces()
            stream = torch.cuda.ExternalStream(address)
            self._cuda_streams[address] = stream
        return stream


# ---------------------------------------------------------------------------------------------
# GPU MODE's tuple (problems/nvidia/nvfp4_gemv and nvfp4_gemm, reference.py generate_input):
#   a      [m, k/2, l] float4_e2m1fn_x2, physically [l, m, k/2] (permute(1, 2, 0))
#   b      [n, k/2, l] likewise; for GEMV n is padded to 128 rows (their b_ref has 128 rows so
#          torch._scaled_mm can run; only row 0 is the vector)
#   sfa    [m, ceil(k/16), l] float8_e4m3fn on the device (sfa_ref_cpu.to("cuda")), physically [l, m, kb]
#   sfb    [n, ceil(k/16), l] likewise (GEMV: 128 rows)
#   sfa_permuted [32, 4, ceil(m/128), 4, ceil(kb/4), l] float8_e4m3fn on the device, the permute
#          (3, 4, 1, 5, 2, 0) of a contiguous [l, Mt, Kt, 32, 4, 4]: SPEC's permuted layout
#   sfb_permuted likewise with n (GEMV: the 128 padded rows are one tile)
#   c      [m, n, l] float16, physically [l, m, n]

def gpumode_views(torch, problem, s, device_tensors):
    """The runner's buffers as flat-shaped uint8 (and C as FP16 bits) tensors, no copies."""
    if device_tensors:
        def view(address, shape, dtype=None):
            return cuda_tensor(torch, address, shape, dtype)
    else:
        def view(address, shape, dtype=None):
            return torch.from_numpy(host_array(address, shape, np.float16 if dtype is not None else np.uint8))
    return {
        "a": view(problem.a, (s.l, s.m, s.half)),
        "b": view(problem.b, (s.l, s.n, s.half)),
        "sfa": view(problem.sfa, s.sfa_shape),
        "sfb": view(problem.sfb, s.sfb_shape),
        "c": view(problem.c, (s.l, s.m, s.n), torch.float16),
    }


# Rows 1-127 of a GEMV's padded b: fixed arbitrary codes (their b_ref has random ones there), so a
# kernel that reads the wrong row of b gets a wrong answer. Drawn once from a fixed seed.
_GEMV_B_FILL_SEED = 0x6E76_6670


_gemv_b_fill_cache = {}


def _gemv_b_fill(torch, shape, device):
    key = (shape, str(device))
    fill = _gemv_b_fill_cache.get(key)
    if fill is None:
        g = torch.Generator().manual_seed(_GEMV_B_FILL_SEED)
        fill = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g).to(device)
        _gemv_b_fill_cache.clear()  # one shape at a time is all a check needs
        _gemv_b_fill_cache[key] = fill
    return fill


def unpermute_scales(permuted_u8, rows, kb):
    """[l, Mt, Kt, 32, 4, 4] -> [l, rows, kb] (linear order): row i = Mt*128 + (i%128)/32*32 + i%32."""
    l, mt, kt = permuted_u8.shape[:3]
    return permuted_u8.permute(0, 1, 4, 3, 2, 5).reshape(l, mt * 128, kt * 4)[:, :rows, :kb]


def gpumode_data(torch, views, s):
    """(tuple for fn, [(source, target)] copies to make after fn: GEMV b's row 0 goes back into the
    runner's b, so a kernel that writes its input is seen by the inputs-modified check)."""
    fp4, fp8 = torch.float4_e2m1fn_x2, torch.float8_e4m3fn
    device = views["a"].device
    a = views["a"].view(fp4).permute(1, 2, 0)
    write_back = []
    if s.op == "gemv":
        b_rows = 128
        padded = torch.empty((s.l, b_rows, s.half), dtype=torch.uint8, device=device)
        padded[:, 1:, :] = _gemv_b_fill(torch, (s.l, b_rows - 1, s.half), device)
        padded[:, 0, :] = views["b"][:, 0, :]
        b = padded.view(fp4).permute(1, 2, 0)
        write_back.append((padded[:, 0, :], views["b"][:, 0, :]))
    else:
        b_rows = s.n
        b = views["b"].view(fp4).permute(1, 2, 0)
    sfa_permuted = views["sfa"].view(fp8).permute(3, 4, 1, 5, 2, 0)
    sfb_permuted = views["sfb"].view(fp8).permute(3, 4, 1, 5, 2, 0)
    # The linear scales, contiguous as [l, rows, kb] and handed over as the [rows, kb, l] permute,
    # live where the rest does: reference.py builds them on the CPU and moves them to the device
    # (sfa_ref_cpu.to("cuda"), which keeps the strides; since their commit 14fec19 "Fix: to gpu
    # scales"). For a GEMV the 127 padded rows of sfb are the permuted layout's padding: NaN
    # scales, which only the padded columns read.
    sfa = unpermute_scales(views["sfa"], s.m, s.kb).contiguous().view(fp8).permute(1, 2, 0)
    sfb = unpermute_scales(views["sfb"], b_rows, s.kb).contiguous().view(fp8).permute(1, 2, 0)
    c = views["c"].permute(1, 2, 0)
    return (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c), write_back
