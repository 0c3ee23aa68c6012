"""A Python callable as an nvfp4 kernel (SPEC.md sections 5 and 7).

KernelAdapter turns fn into what the ABI describes: an nvfp4_kernel_info (version 2) and a call
that takes one nvfp4_problem (pointers into the runner's guarded buffers) and returns NVFP4_OK or
NVFP4_UNSUPPORTED. It builds fn's arguments over those buffers without copying them, so guards,
unchanged inputs and stale state are checked on what fn really did. It knows nothing of who drives
it: nc.check drives it in this process through the C API; a worker process may drive it for
`nvfp4check run --python`.

Formats:
  canonical  fn(p): p.op ("gemv", "gemm", "grouped_gemm", "dual_gemm"), p.m, p.n, p.k, p.l,
             p.alpha, p.sf_layout, p.out_type ("fp16", "bf16", "fp32") and the arrays
             p.a (l, m, k/2) and p.b (l, n, k/2) uint8, packed E2M1;
             p.sfa, p.sfb uint8 E4M3 scales: linear (l, rows, kb), or permuted
             (l, ceil(rows/128), ceil(kb/4), 32, 4, 4) = [b, i/128, s/4, i%32, (i%128)/32, s%4];
             p.c (l, m, n) of the output type (float16, float32; BF16 as uint16 bits in numpy,
             torch.bfloat16 on CUDA), written in place.
             dual_gemm adds p.b2, p.sfb2 (like p.b, p.sfb) and p.alpha2.
             quantize: p.x (l, m, k) of the input type p.in_type (float16, float32; BF16 as uint16
             bits in numpy, torch.bfloat16 on CUDA), read-only; p.q uint8 codes, (l, m, k/2) packed
             E2M1 (element 2i in the low nibble) for nvfp4 and mxfp4, (l, m, k) for the MXFP8
             formats; p.sfq uint8 scales, flat, in p.sf_layout (linear: l*m*kb bytes; permuted:
             l*ceil(m/128)*ceil(kb/4)*512, padding included), both written in place, or returned
             as (q, sfq) arrays or tensors of those bytes in any 1-byte dtype
             (torch.float8_e4m3fn, float8_e8m0fnu, float4_e2m1fn_x2 views of them too);
             p.format ("nvfp4", "mxfp4", "mxfp8_e4m3", "mxfp8_e5m2"), p.recipe (SPEC.md section 2),
             p.global_scale (a float; with FLAG_ROW_GLOBAL_SCALE an array of l*m float32, one per
             row; None for the MX formats), p.seed (stochastic rounding), p.sf_layout.
             p.a_format, p.b_format: the operand formats of the GEMM-family problems.
             out_type "nvfp4" (block-scaled output of gemm, grouped_gemm, dual_gemm; declared
             with out_types=("nvfp4",) and recipes): p.c is None, the result goes quantized
             along n into p.q (l, m, n/2) and p.sfq (flat, in p.sf_layout, n in place of k) by
             p.recipe with p.global_scale (a float); a grouped problem's groups each have their
             own .q, .sfq and .global_scale.
             grouped_gemm: p.groups, one Group per GEMM with .m .n .k .alpha .a .b .sfa .sfb .c
             (l = 1: .a (1, m, k/2), .c (1, m, n), ...), views of the group table's pointers, so
             into the packed buffers when p.packed; an empty group (m = 0) has NULL pointers and
             gets empty arrays. p.a, p.b, p.sfa, p.sfb, p.c are the packed buffers (A and C
             (1, sum m, .), B (G, n, k/2), SFB a batch of G, SFA linear (1, sum m, kb) or permuted
             (1, tiles, kt, 32, 4, 4)) when p.packed, else None; p.m is sum m, p.n, p.k the largest.
             numpy arrays over the runner's host buffers (memory="host") or torch CUDA tensors
             over its device buffers (memory="cuda"). fn returns None or nc.UNSUPPORTED.
  gpumode    fn(data) with the data GPU MODE's NVFP4 reference.py builds for custom_kernel
             (github.com/gpu-mode/reference-kernels, problems/nvidia/nvfp4_*), by op:
             gemv, gemm     (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c); returns c
             dual_gemm      (a, b1, b2, sfa, sfb1, sfb2, sfa_permuted, sfb1_permuted,
                             sfb2_permuted, c); returns c
             grouped_gemm   (abc_tensors, sfasfb_tensors, sfasfb_reordered_tensors,
                             problem_sizes); returns the list of the groups' c
             `problem` names the GPU MODE problem (PROBLEMS): its op and, by default, the shape
             limits its task.yml states. Their outputs are FP16 only.

Declarations (op, sf_layouts, the shape multiples (per group for grouped_gemm), min_sm, out
types, max_groups, the packed arrangement) are the adapter's to keep: fn is never called with a
problem outside them; the adapter answers NVFP4_UNSUPPORTED for it, untouched. A CUDA fn runs with
torch's current stream set to the runner's stream (stream="current") or to the legacy default
stream, as GPU MODE's harness runs everything (stream="legacy"), and may return before its work
ends; work on any stream not ordered after it is caught by the stream checks.
"""
import numbers

import numpy as np

from . import _abi, _capi
from ._abi import ceil_div

FORMATS = ("canonical", "gpumode")
IN_TYPES = tuple(_abi.IN_TYPES)
BLOCK_FORMATS = tuple(_abi.BLOCK_FORMATS)
RECIPES = tuple(_abi.RECIPES)
# The recipes of each quantize output format (SPEC.md section 2).
FORMAT_RECIPES = {"nvfp4": ("te", "ref", "fast", "torchao")}
FORMAT_RECIPES.update({f: ("mx_rceil", "mx_floor", "mx_even") for f in ("mxfp4", "mxfp8_e4m3", "mxfp8_e5m2")})
STREAMS = ("current", "legacy")
OUT_TYPES = tuple(_abi.OUT_TYPES)
# What a GEMM-family kernel may declare it writes: the word types, and block-scaled NVFP4 output
# (SPEC.md section 2: p.q and p.sfq replace p.c).
DECLARABLE_OUT_TYPES = dict(_abi.OUT_TYPES, nvfp4=_abi.NVFP4_OUT_NVFP4)

# GPU MODE's NVFP4 problems (gpu-mode/reference-kernels, problems/nvidia/<name>): the op, and the
# shape limits their task.yml states, as declarations (for grouped_gemm, of every group).
# nvfp4_gemv: "M is divisible by mma_tiler_mn[0] defined in the kernel, K is divisible by 64" (its
# template_cute.py tiles M by 128, and every test and benchmark shape has M a multiple of 128).
# nvfp4_gemm and nvfp4_dual_gemm: "M is divisible by mma_tiler_mn[0], N by mma_tiler_mn[1], K by
# 256" (their submission.py: mma_tiler_mnk = (128, 128, 256); every test and benchmark shape
# agrees). nvfp4_group_gemm says the same of each group's M, N and K, but its own tests give
# groups M = 40, 56, 72, 76, ... (its CuTe submission masks the last M tile): M is not declared,
# only N (128) and K (256), which all its shapes keep.
PROBLEMS = {
    "nvfp4_gemv": {"op": "gemv", "m_multiple": 128, "n_multiple": 1, "k_multiple": 64},
    "nvfp4_gemm": {"op": "gemm", "m_multiple": 128, "n_multiple": 128, "k_multiple": 256},
    "nvfp4_dual_gemm": {"op": "dual_gemm", "m_multiple": 128, "n_multiple": 128, "k_multiple": 256},
    "nvfp4_group_gemm": {"op": "grouped_gemm", "m_multiple": 1, "n_multiple": 128, "k_multiple": 256},
}


def problem_declarations(problem, op=None, m_multiple=None, n_multiple=None, k_multiple=None):
    """(op, m_multiple, n_multiple, k_multiple) for GPU MODE's problem (None: no problem), the
    given values overriding its task.yml's; ValueError for an unknown problem or an op it is not."""
    if problem is None:
        return (op, m_multiple or 1, n_multiple or 1, k_multiple or 1)
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
    """A numpy array over host memory the runner owns (no copy; valid during the call). An empty
    shape, or NULL (an empty group's), gives an empty array."""
    import ctypes

    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    if count == 0 or not address:
        return np.empty(tuple(shape) if count == 0 else _emptied(shape), dtype=dtype)
    buf = (ctypes.c_uint8 * (count * dtype.itemsize)).from_address(address)
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


def _emptied(shape):
    # NULL with a nonzero shape: what an empty group's B and SFB are (the suite gives them no
    # buffer); the rows go to zero so the array is empty.
    return (shape[0], 0) + tuple(shape[2:])


class _CudaBytes:
    """__cuda_array_interface__ (version 2: no stream synchronisation) over device bytes."""

    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, address, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 2, "strides": None}


def cuda_tensor(torch, address, shape, dtype=None):
    """A torch CUDA tensor over device memory the runner owns (no copy; valid during the call).
    dtype: a torch dtype (float16, bfloat16, float32), default uint8. An empty shape, or NULL,
    gives an empty tensor (torch needs no memory for it)."""
    itemsize = 1 if dtype is None else torch.empty((), dtype=dtype).element_size()
    count = int(np.prod(shape))
    if count == 0 or not address:
        return torch.empty(tuple(shape) if count == 0 else _emptied(shape), dtype=dtype or torch.uint8,
                           device="cuda")
    t = torch.as_tensor(_CudaBytes(address, count * itemsize), device="cuda")
    if dtype is not None:
        t = t.view(dtype)
    return t.view(*shape)


# numpy dtype of each output type on the host: BF16 as its uint16 bits (numpy has no bfloat16).
HOST_OUT_DTYPES = {"fp16": np.float16, "bf16": np.uint16, "fp32": np.float32}


def torch_out_dtype(torch, out_type):
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[out_type]


def out_type_name(problem):
    """The problem's output type name; 0 (a problem built without the field) is FP16."""
    if problem.out_type == _abi.NVFP4_OUT_NVFP4:
        return "nvfp4"
    return _abi.OUT_TYPE_NAMES.get(problem.out_type or _abi.NVFP4_OUT_FP16, str(problem.out_type))


def _import_torch(why):
    try:
        import torch
    except ImportError as e:
        raise ImportError(f"{why} needs torch, which cannot be imported here: {e}") from e
    return torch


def scale_shape(rows, kb, l, permuted):
    """Shape of one operand's scales: linear (l, rows, kb), permuted (l, Mt, Kt, 32, 4, 4)."""
    if permuted:
        return (l, ceil_div(rows, 128), ceil_div(kb, 4), 32, 4, 4)
    return (l, rows, kb)


def operand_geometry(k, block_format):
    """(scale blocks per row, bytes per row) of a row of k elements of a block format (SPEC.md
    section 1: NVFP4 blocks of 16, MX blocks of 32; E2M1 two elements a byte, MXFP8 one)."""
    fmt = block_format or _abi.NVFP4_FORMAT_NVFP4
    block = 16 if fmt == _abi.NVFP4_FORMAT_NVFP4 else 32
    one_byte = fmt in (_abi.NVFP4_FORMAT_MXFP8_E4M3, _abi.NVFP4_FORMAT_MXFP8_E5M2)
    return ceil_div(k, block), k if one_byte else k // 2


class Sizes:
    """Shapes of one problem's tensors (SPEC.md section 2). For grouped_gemm, those of the packed
    buffers (m the groups' rows together, l = 1; B and SFB a batch of G) and .groups, one
    (m, n, k) per group. kb and half are A's scale blocks and bytes per row, b_kb and b_row B's
    (they differ when the operand formats do)."""

    __slots__ = ("op", "m", "n", "k", "l", "a_format", "b_format", "kb", "half", "b_kb", "b_row", "permuted", "out_type", "sfa_shape",
                 "sfb_shape", "groups", "b_batch")

    def __init__(self, problem):
        self.op = _abi.OP_NAMES.get(problem.op, str(problem.op))
        self.m, self.n, self.k, self.l = problem.m, problem.n, problem.k, problem.l
        self.a_format, self.b_format = problem.a_format, problem.b_format
        self.kb, self.half = operand_geometry(self.k, self.a_format)
        self.b_kb, self.b_row = operand_geometry(self.k, self.b_format)
        self.permuted = problem.sf_layout == _abi.NVFP4_SF_PERMUTED
        self.out_type = out_type_name(problem)
        self.groups = []
        self.b_batch = self.l
        if self.op == "grouped_gemm":
            table = problem.group
            self.groups = [(table[g].m, table[g].n, table[g].k) for g in range(problem.groups)]
            self.b_batch = len(self.groups)
        if self.op == "grouped_gemm" and self.permuted:
            # Packed SFA: every group starts on a 128-row tile (SPEC.md section 2).
            tiles = sum(ceil_div(m, 128) for m, _, _ in self.groups)
            self.sfa_shape = (1, tiles, ceil_div(self.kb, 4), 32, 4, 4)
        else:
            self.sfa_shape = scale_shape(self.m, self.kb, self.l, self.permuted)
        self.sfb_shape = scale_shape(self.n, self.b_kb, self.b_batch, self.permuted)

    def scale_shape(self, rows):
        return scale_shape(rows, self.kb, self.l, self.permuted)


class Problem:
    """One problem as a canonical kernel sees it (see the module's docstring)."""

    __slots__ = ("op", "m", "n", "k", "l", "alpha", "sf_layout", "out_type", "a", "b", "sfa", "sfb", "c", "stream",
                 "b2", "sfb2", "alpha2", "groups", "packed", "a_format", "b_format", "in_type", "x", "q", "sfq",
                 "format", "recipe", "global_scale", "seed")

    def __repr__(self):
        if self.op == "quantize":
            gs = self.global_scale if self.global_scale is None or isinstance(self.global_scale, float) else "per-row"
            return (f"Problem(op='quantize', m={self.m}, k={self.k}, l={self.l}, in_type={self.in_type!r}, "
                    f"format={self.format!r}, recipe={self.recipe!r}, sf_layout={self.sf_layout!r}, "
                    f"global_scale={gs!r}, seed={self.seed})")
        extra = ""
        if self.op == "grouped_gemm":
            extra = f", groups={self.groups!r}, packed={self.packed}"
        elif self.op == "dual_gemm":
            extra = f", alpha2={self.alpha2!r}"
        return (f"Problem(op={self.op!r}, m={self.m}, n={self.n}, k={self.k}, l={self.l}, alpha={self.alpha!r}, "
                f"sf_layout={self.sf_layout!r}, out_type={self.out_type!r}{extra})")


class Group:
    """One GEMM of a grouped problem (l = 1), as a canonical kernel sees it."""

    __slots__ = ("m", "n", "k", "alpha", "a", "b", "sfa", "sfb", "c", "q", "sfq", "global_scale")

    def __repr__(self):
        return f"Group(m={self.m}, n={self.n}, k={self.k}, alpha={self.alpha!r})"


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


def canonical_problem(problem, view, packed):
    """The canonical format's Problem over one nvfp4_problem, every array a view(address, shape,
    dtype) of the runner's memory (numpy or torch; see KernelAdapter._views). packed: the kernel
    declares FLAG_GROUPS_PACKED, so a grouped problem comes in that arrangement."""
    if problem.op == _abi.NVFP4_OP_QUANTIZE:
        return quantize_problem(problem, view)
    s = Sizes(problem)
    p = Problem()
    p.op, p.m, p.n, p.k, p.l = s.op, s.m, s.n, s.k, s.l
    p.a_format = _abi.BLOCK_FORMAT_NAMES.get(problem.a_format or _abi.NVFP4_FORMAT_NVFP4, str(problem.a_format))
    p.b_format = _abi.BLOCK_FORMAT_NAMES.get(problem.b_format or _abi.NVFP4_FORMAT_NVFP4, str(problem.b_format))
    p.in_type = p.x = p.q = p.sfq = p.format = p.recipe = p.global_scale = p.seed = None
    p.alpha = float(problem.alpha)
    p.sf_layout = _abi.SF_LAYOUT_NAMES.get(problem.sf_layout, str(problem.sf_layout))
    p.out_type = s.out_type
    p.b2 = p.sfb2 = None
    p.alpha2 = 1.0
    p.groups, p.packed = None, False
    if s.op == "grouped_gemm":
        p.packed = bool(packed)
        p.groups = [group_views(problem.group[g], s, view) for g in range(problem.groups)]
    nvfp4_out = s.out_type == "nvfp4"
    if nvfp4_out:
        p.format, p.recipe = "nvfp4", _abi.RECIPE_NAMES.get(problem.recipe, str(problem.recipe))
    if s.op != "grouped_gemm" or p.packed:
        p.a = view(problem.a, (s.l, s.m, s.half))
        p.b = view(problem.b, (s.b_batch, s.n, s.b_row))
        p.sfa = view(problem.sfa, s.sfa_shape)
        p.sfb = view(problem.sfb, s.sfb_shape)
        if nvfp4_out:
            p.c = None
            p.q, p.sfq = nvfp4_out_views(problem.q, problem.sfq, s.m, s.n, s.l, s.permuted, view)
            p.global_scale = float(view(problem.global_scale, (1,), "fp32")[0])
        else:
            p.c = view(problem.c, (s.l, s.m, s.n), s.out_type)
    else:
        p.a = p.b = p.sfa = p.sfb = p.c = None
    if nvfp4_out and s.op == "grouped_gemm":
        for g, group in enumerate(p.groups):
            entry = problem.group_out[g]  # host memory, parallel to problem.group
            group.c = None
            group.q, group.sfq = nvfp4_out_views(entry.q if group.m else None, entry.sfq if group.m else None,
                                                 group.m, group.n, 1, s.permuted, view)
            group.global_scale = float(entry.global_scale)
    if s.op == "dual_gemm":
        p.b2 = view(problem.b2, (s.l, s.n, s.b_row))
        p.sfb2 = view(problem.sfb2, s.sfb_shape)
        p.alpha2 = float(problem.alpha2)
    return p


def nvfp4_out_views(q, sfq, m, n, l, permuted, view):
    """Q (l, m, n/2) and SFQ (flat, in the problem's scale layout) of block-scaled NVFP4 output:
    section 2's quantize layout with n in place of k."""
    kb = ceil_div(n, 16)
    sfq_bytes = l * ceil_div(m, 128) * ceil_div(kb, 4) * 512 if permuted else l * m * kb
    return view(q, (l, m, n // 2)), view(sfq, (sfq_bytes,))


def quantize_sizes(problem):
    """(Q's shape, SFQ's bytes, global scales) of a quantize problem (SPEC.md section 2)."""
    fmt = _abi.BLOCK_FORMAT_NAMES.get(problem.q_format, str(problem.q_format))
    m, k, l = problem.m, problem.k, problem.l
    kb = ceil_div(k, 16 if fmt == "nvfp4" else 32)
    q_shape = (l, m, k // 2) if fmt in ("nvfp4", "mxfp4") else (l, m, k)
    if problem.sf_layout == _abi.NVFP4_SF_PERMUTED:
        sfq_bytes = l * ceil_div(m, 128) * ceil_div(kb, 4) * 512
    else:
        sfq_bytes = l * m * kb
    return q_shape, sfq_bytes


def quantize_problem(problem, view, row_scales=False):
    """The canonical Problem of a quantize problem. view(address, shape, dtype name) as for
    canonical_problem; row_scales: the kernel declares
    FLAG_ROW_GLOBAL_SCALE (l*m global scales)."""
    p = Problem()
    p.op, p.m, p.n, p.k, p.l = "quantize", problem.m, 1, problem.k, problem.l
    p.alpha, p.alpha2 = 1.0, 1.0
    p.sf_layout = _abi.SF_LAYOUT_NAMES.get(problem.sf_layout, str(problem.sf_layout))
    p.out_type = None
    p.a = p.b = p.sfa = p.sfb = p.c = p.b2 = p.sfb2 = p.groups = None
    p.packed = False
    p.a_format = p.b_format = None
    p.in_type = _abi.IN_TYPE_NAMES.get(problem.in_type, str(problem.in_type))
    p.format = _abi.BLOCK_FORMAT_NAMES.get(problem.q_format, str(problem.q_format))
    p.recipe = _abi.RECIPE_NAMES.get(problem.recipe, str(problem.recipe))
    p.seed = int(problem.seed)
    q_shape, sfq_bytes = quantize_sizes(problem)
    p.x = view(problem.x, (p.l, p.m, p.k), p.in_type)
    p.q = view(problem.q, q_shape)
    p.sfq = view(problem.sfq, (sfq_bytes,))
    if not problem.global_scale:
        p.global_scale = None
    elif row_scales:
        p.global_scale = view(problem.global_scale, (p.l * p.m,), "fp32")
    else:
        p.global_scale = float(view(problem.global_scale, (1,), "fp32")[0])
    return p


def group_views(entry, s, view):
    """A Group over one nvfp4_group entry: its own pointers, which point into the packed buffers in
    the packed arrangement. An empty group's arrays are empty, whatever its pointers."""
    g = Group()
    g.m, g.n, g.k, g.alpha = entry.m, entry.n, entry.k, float(entry.alpha)
    a_kb, a_row = operand_geometry(g.k, s.a_format)
    b_kb, b_row = operand_geometry(g.k, s.b_format)

    def at(address):
        return address if g.m else None

    g.a = view(at(entry.a), (1, g.m, a_row))
    g.b = view(at(entry.b), (1, g.n, b_row))
    g.sfa = view(at(entry.sfa), scale_shape(g.m, a_kb, 1, s.permuted))
    g.sfb = view(at(entry.sfb), scale_shape(g.n, b_kb, 1, s.permuted))
    g.c = None if s.out_type == "nvfp4" else view(at(entry.c), (1, g.m, g.n), s.out_type)
    g.q = g.sfq = g.global_scale = None  # block-scaled output: canonical_problem sets them
    return g


def quantize_declarations(ops, in_types, formats, recipes, call_format, nvfp4_out=False):
    """(in_types, formats, recipes) a kernel declares, tuples (None where it declares no quantize
    op and no NVFP4 output); ValueError for a declaration that names nothing or a recipe of no
    declared format. nvfp4_out: the kernel writes block-scaled NVFP4 output, whose recipes it
    declares too (the NVFP4 ones)."""
    def names(value, table, what):
        value = (value,) if isinstance(value, str) else tuple(value)
        for v in value:
            if v not in table:
                raise ValueError(f"{what} must be among {tuple(table)}, not {v!r}")
        return value

    if nvfp4_out:
        if call_format != "canonical":
            raise ValueError("a kernel writing NVFP4 output takes the canonical format")
        if "quantize" in ops or "gemv" in ops:
            raise ValueError("NVFP4 output is written by gemm, grouped_gemm and dual_gemm kernels (SPEC.md section 2)")
        if in_types or formats:
            raise ValueError("in_types and formats declare a quantizer: they go with op='quantize'")
        if not recipes:
            raise ValueError("a kernel writing NVFP4 output declares the recipes it follows (recipes=('te',), ...)")
        return None, None, names(recipes, FORMAT_RECIPES["nvfp4"], "recipes of NVFP4 output")
    if "quantize" not in ops:
        for what, v in (("in_types", in_types), ("formats", formats), ("recipes", recipes)):
            if v:
                raise ValueError(f"{what} declares a quantizer: it goes with op='quantize'")
        return None, None, None
    if call_format != "canonical":
        raise ValueError("a quantize kernel takes the canonical format")
    if not recipes:
        raise ValueError("a quantize kernel declares the recipes it follows (recipes=('te',), ...: SPEC.md section 2)")
    in_types = names(in_types or IN_TYPES, IN_TYPES, "in_types")
    formats = names(formats or ("nvfp4",), BLOCK_FORMATS, "formats")
    recipes = names(recipes, RECIPES, "recipes")
    for r in recipes:
        if not any(r in FORMAT_RECIPES[f] for f in formats):
            raise ValueError(f"recipe {r!r} quantizes to none of the declared formats {formats}")
    return in_types, formats, recipes


class KernelAdapter:
    """fn as an ABI kernel: .info (an nvfp4_kernel_info) and a call problem -> NVFP4_* code.

    op: an op name ("gemv", "gemm", "grouped_gemm", "dual_gemm") or a tuple of them; None
    declares gemv and gemm (or the problem's op). sf_layouts: a tuple of "linear", "permuted"
    (None: both for canonical, permuted for gpumode). flags: SPEC.md section 5 bits
    (FLAG_GROUPS_PACKED: grouped problems come in the packed arrangement). problem: a GPU MODE
    problem name (PROBLEMS; gpumode only), which sets op and the default multiples. stream:
    "current" or "legacy" (see the module's docstring). out_types: a tuple of "fp16", "bf16",
    "fp32" (None: fp16; gpumode: fp16 only). max_groups: the most groups of a grouped call
    (0: no limit). The multiples hold for every group of a grouped problem. A quantizer (op
    "quantize") declares recipes (required), in_types (default all three) and formats (default
    ("nvfp4",)), and with flags FLAG_QUANT_2D, FLAG_ROW_GLOBAL_SCALE, FLAG_STOCHASTIC,
    FLAG_SF_PADDING_KEPT what it does. a_formats, b_formats: the operand formats of GEMMs.
    A gpumode kernel always reads permuted scales and has no alpha (it declares
    FLAG_UNIT_ALPHA). The adapter refuses every problem outside the declaration on fn's behalf,
    so fn never sees one; fn returning UNSUPPORTED inside it is the suite's refused-supported.
    """

    # How long the runner's stream is held before C's poison is put back (gpumode on CUDA, see
    # _gpumode_cuda_hold): GPU clock cycles, about 4 ms at 2 GHz, like the runner's own hold.
    HOLD_CYCLES = 8_000_000

    def __init__(self, fn, *, op="gemv", memory="cuda", format="canonical", sf_layouts=None, flags=0, name=None,
                 m_multiple=None, n_multiple=None, k_multiple=None, min_sm=0, problem=None, stream="current",
                 out_types=None, max_groups=0, in_types=None, formats=None, recipes=None, a_formats=None,
                 b_formats=None):
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
        if out_types is None:
            out_types = ("fp16",)
        elif isinstance(out_types, str):
            out_types = (out_types,)
        for t in out_types:
            if t not in DECLARABLE_OUT_TYPES:
                raise ValueError(f"out_types are fp16, bf16, fp32 or nvfp4, not {t!r}")
        if format == "gpumode" and tuple(out_types) != ("fp16",):
            raise ValueError("GPU MODE's problems write float16 outputs: a gpumode kernel declares out_types=('fp16',)")
        if not isinstance(min_sm, numbers.Integral) or min_sm < 0:
            raise ValueError(f"min_sm must be a non-negative integer (e.g. 100 for sm_100), not {min_sm!r}")
        if not isinstance(max_groups, numbers.Integral) or max_groups < 0:
            raise ValueError(f"max_groups must be a non-negative integer (0: no limit), not {max_groups!r}")
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
        self.out_types = tuple(out_types)
        ops = ("gemv", "gemm") if op is None else (op,) if isinstance(op, str) else tuple(op)
        quant = quantize_declarations(ops, in_types, formats, recipes, format, "nvfp4" in out_types)
        self.in_types, self.formats, self.recipes = quant
        self.a_formats = tuple(a_formats) if a_formats else None
        self.b_formats = tuple(b_formats) if b_formats else None
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
            out_types=_names(out_types, DECLARABLE_OUT_TYPES, "out_types"),
            max_groups=int(max_groups),
            a_formats=_names(a_formats, _abi.BLOCK_FORMATS, "a_formats") if a_formats else 0,
            b_formats=_names(b_formats, _abi.BLOCK_FORMATS, "b_formats") if b_formats else 0,
            in_types=_names(quant[0], _abi.IN_TYPES, "in_types") if quant[0] else 0,
            q_formats=_names(quant[1], _abi.BLOCK_FORMATS, "formats") if quant[1] else 0,
            recipes=_names(quant[2], _abi.RECIPES, "recipes") if quant[2] else 0,
        )
        self._torch = None
        self._cuda_streams = {}

    def __repr__(self):
        return f"KernelAdapter({self.name!r}, format={self.format!r}, memory={self.memory!r})"

    @property
    def ops(self):
        """The declared op names."""
        return tuple(name for name, bit in _abi.OPS.items() if self.info.ops >> bit & 1)

    def unsupported_reason(self, problem):
        """Why problem (an nvfp4_problem) lies outside what the info declares, "" when inside: the
        suite's own rule (harness/judge/case_check.h's unsupported_reason, through the C API), so a
        Python kernel is held to exactly what an ABI kernel with the same info would be."""
        return _capi.load().unsupported_reason(self.info, problem)

    def declares(self, problem):
        """Whether problem (an nvfp4_problem) lies inside what the info declares."""
        return self.unsupported_reason(problem) == ""

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

    def _views(self, torch):
        """view(address, shape, dtype name) over the runner's memory: "u8" or an output (or
        quantize input) type name."""
        if self.memory == "host":
            return lambda address, shape, dtype="u8": host_array(address, shape, HOST_OUT_DTYPES.get(dtype, np.uint8))
        return lambda address, shape, dtype="u8": cuda_tensor(torch, address, shape, None if dtype == "u8"
                                                              else torch_out_dtype(torch, dtype))

    def _problem(self, problem, torch):
        if problem.op == _abi.NVFP4_OP_QUANTIZE:
            return quantize_problem(problem, self._views(torch), self.info.flags & _abi.FLAG_ROW_GLOBAL_SCALE)
        return canonical_problem(problem, self._views(torch), self.info.flags & _abi.FLAG_GROUPS_PACKED)

    def _call_canonical(self, problem):
        torch = None if self.memory == "host" else self._get_torch()
        if self.memory == "host":
            p = self._problem(problem, torch)
            p.stream = None
            return self._canonical_result(self.fn(p), p)
        runner = self._stream(torch, problem.stream)
        with torch.cuda.stream(runner):
            # On the runner's stream: reading a global scale into a float waits for its upload.
            p = self._problem(problem, torch)
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
        if out is UNSUPPORTED:
            return _abi.NVFP4_UNSUPPORTED
        if p.op == "quantize":
            if out is not None:
                _store_quantized(out, p)
            return _abi.NVFP4_OK
        if out is None or out is p.c:
            return _abi.NVFP4_OK
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
            self._gpumode_cuda_hold(torch, views["outputs"])
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

    def _gpumode_cuda_hold(self, torch, outputs):
        # Building the tuple may wait for the runner's stream (the first GEMV fill of a shape comes
        # from the host; a grouped problem's linear scales go to the host), which undoes the
        # runner's hold (work a kernel starts on a stream of its own would find its inputs in
        # place). So hold it again: the stream waits, then C gets its poison back; a kernel
        # working on a stream of its own wrote C before that (unwritten output) or after the
        # runner's stream was done (the stream check).
        poison = [c.clone() for c in outputs]  # same dtype: a bitwise copy, NaN payloads kept
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is not None:
            sleep(self.HOLD_CYCLES)
        for c, saved in zip(outputs, poison):
            c.copy_(saved)

    @staticmethod
    def _gpumode_result(torch, out, data, write_back, s):
        if out is UNSUPPORTED:
            return _abi.NVFP4_UNSUPPORTED
        if s.op == "grouped_gemm":
            targets = [c for _, _, c in data[0]]
            what = f"the list of the {len(targets)} groups' output tensors c [m, n, 1] (torch.float16)"
            if not isinstance(out, (list, tuple)) or len(out) != len(targets):
                got = f"{type(out).__name__} of {len(out)}" if isinstance(out, (list, tuple)) else type(out).__name__
                raise KernelFailure("kernel-error", f"a gpumode grouped kernel returns {what}; it returned {got}")
            outs = list(out)
        else:
            targets = [data[-1]]
            what = f"the output tensor c {list(targets[0].shape)} (torch.float16)"
            outs = [out]
        for g, (o, c) in enumerate(zip(outs, targets)):
            where = f" (group {g})" if s.op == "grouped_gemm" else ""
            if not isinstance(o, torch.Tensor):
                raise KernelFailure("kernel-error", f"a gpumode kernel returns {what}; it returned "
                                                    f"{type(o).__name__}{where}")
            if tuple(o.shape) != tuple(c.shape) or o.dtype != torch.float16:
                raise KernelFailure("kernel-error", f"a gpumode kernel returns {what}; it returned shape "
                                                    f"{list(o.shape)} {o.dtype}{where}")
        for o, c in zip(outs, targets):
            if c.numel() and not (o.data_ptr() == c.data_ptr() and o.stride() == c.stride() and o.device == c.device):
                c.copy_(o)  # on the runner's stream, like everything fn enqueued there
        for source, target in write_back:
            target.copy_(source)
        return _abi.NVFP4_OK

    # -- torch ----------------------------------------------------------------------------------

    def _torch_needed_by(self):
        """What needs torch to call fn: format='gpumode' (its tensors, on the host too) or
        memory='cuda'; None when nothing does."""
        if self.format == "gpumode":
            return f"format='gpumode' (with memory={self.memory!r})"
        return "memory='cuda'" if self.memory == "cuda" else None

    def prepare(self):
        """Imports what calling fn needs, before the first case: a machine without it is a setup
        error (ImportError, the worker's exit 2), not a failure of fn, which was never called."""
        if self._torch_needed_by() is not None:
            self._get_torch()

    def _get_torch(self):
        if self._torch is None:
            self._torch = _import_torch(self._torch_needed_by() or "this call")
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


def _count(t):
    return t.size if isinstance(t, np.ndarray) else t.numel()


def _bytes_of(t):
    """A 1-byte-per-element array or tensor as flat uint8 (torch's float8 and float4_x2 dtypes
    included), or None when it is not one."""
    if isinstance(t, np.ndarray):
        return t.reshape(-1).view(np.uint8) if t.dtype.itemsize == 1 else None
    if not callable(getattr(t, "element_size", None)) or t.element_size() != 1:
        return None
    import torch
    return t.view(torch.uint8).reshape(-1)  # bytes first: float4 and float8 dtypes have few ops


def _store_quantized(out, p):
    """A quantizer that returns (q, sfq) instead of writing p.q and p.sfq: their bytes are copied
    into the runner's buffers (SFQ in the problem's layout, padding included)."""
    what = (f"a quantize kernel writes p.q and p.sfq in place and returns None, or returns (q, sfq) of "
            f"{_count(p.q)} and {_count(p.sfq)} bytes (any 1-byte dtype)")
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise KernelFailure("kernel-error", f"{what}; it returned {type(out).__name__}")
    for got, target, name in ((out[0], p.q, "q"), (out[1], p.sfq, "sfq")):
        if got is target:
            continue
        flat = _bytes_of(got)
        want = target.reshape(-1)
        if flat is None or _count(flat) != _count(want):
            raise KernelFailure("kernel-error", f"{what}; its {name} is {type(got).__name__} "
                                                f"{tuple(getattr(got, 'shape', ()))} {getattr(got, 'dtype', '')}")
        if isinstance(want, np.ndarray):
            want[...] = np.asarray(flat)
        else:
            want.copy_(flat)


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
# nvfp4_dual_gemm: (a, b1, b2, sfa, sfb1, sfb2, sfa_permuted, sfb1_permuted, sfb2_permuted, c),
#   each as above (b2 and its scales like b1's; every tensor on the device).
# nvfp4_group_gemm: (abc_tensors, sfasfb_tensors, sfasfb_reordered_tensors, problem_sizes), lists
#   with one entry per group: (a, b, c) as above with l = 1; (sfa, sfb) the linear scales, which
#   this problem's reference.py leaves on the CPU; (sfa_permuted, sfb_permuted) on the device;
#   (m, n, k, 1). Each group's tensors are its own (the separate arrangement of SPEC section 2).

def gpumode_views(torch, problem, s, device_tensors):
    """The runner's buffers as flat-shaped uint8 (and C as FP16 bits) tensors, no copies. "outputs"
    lists the C tensors (a grouped problem's, one per group)."""
    if device_tensors:
        def view(address, shape, dtype=None):
            return cuda_tensor(torch, address, shape, dtype)
    else:
        def view(address, shape, dtype=None):
            return torch.from_numpy(host_array(address, shape, np.float16 if dtype is not None else np.uint8))
    if s.op == "grouped_gemm":
        groups = []
        for g in range(problem.groups):
            e = problem.group[g]
            m, n, k = e.m, e.n, e.k
            kb = ceil_div(k, 16)

            def at(address, m=m):
                return address if m else None  # an empty group: empty tensors

            groups.append({
                "m": m, "n": n, "k": k, "kb": kb,
                "a": view(at(e.a), (1, m, k // 2)),
                "b": view(at(e.b), (1, n, k // 2)),
                "sfa": view(at(e.sfa), scale_shape(m, kb, 1, True)),
                "sfb": view(at(e.sfb), scale_shape(n, kb, 1, True)),
                "c": view(at(e.c), (1, m, n), torch.float16),
            })
        return {"groups": groups, "outputs": [g["c"] for g in groups]}
    views = {
        "a": view(problem.a, (s.l, s.m, s.half)),
        "b": view(problem.b, (s.l, s.n, s.half)),
        "sfa": view(problem.sfa, s.sfa_shape),
        "sfb": view(problem.sfb, s.sfb_shape),
        "c": view(problem.c, (s.l, s.m, s.n), torch.float16),
    }
    if s.op == "dual_gemm":
        views["b2"] = view(problem.b2, (s.l, s.n, s.half))
        views["sfb2"] = view(problem.sfb2, s.sfb_shape)
    views["outputs"] = [views["c"]]
    return views


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


def _linear_scales(torch, permuted_u8, rows, kb):
    """GPU MODE's linear scales [rows, kb, l] float8_e4m3fn, contiguous as [l, rows, kb], from
    the runner's permuted buffer (a copy: the runner keeps them in the permuted layout only)."""
    return unpermute_scales(permuted_u8, rows, kb).contiguous().view(torch.float8_e4m3fn).permute(1, 2, 0)


def _permuted_scales(torch, permuted_u8):
    return permuted_u8.view(torch.float8_e4m3fn).permute(3, 4, 1, 5, 2, 0)


def _fp4(torch, packed_u8):
    return packed_u8.view(torch.float4_e2m1fn_x2).permute(1, 2, 0)


def gpumode_data(torch, views, s):
    """(data for fn, [(source, target)] copies to make after fn: GEMV b's row 0 goes back into the
    runner's b, so a kernel that writes its input is seen by the inputs-modified check)."""
    if s.op == "grouped_gemm":
        return gpumode_group_data(torch, views), []
    if s.op == "dual_gemm":
        return gpumode_dual_data(torch, views, s), []
    fp4 = torch.float4_e2m1fn_x2
    device = views["a"].device
    a = _fp4(torch, views["a"])
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
        b = _fp4(torch, views["b"])
    sfa_permuted = _permuted_scales(torch, views["sfa"])
    sfb_permuted = _permuted_scales(torch, views["sfb"])
    # The linear scales, contiguous as [l, rows, kb] and handed over as the [rows, kb, l] permute,
    # live where the rest does: reference.py builds them on the CPU and moves them to the device
    # (sfa_ref_cpu.to("cuda"), which keeps the strides; since their commit 14fec19 "Fix: to gpu
    # scales"). For a GEMV the 127 padded rows of sfb are the permuted layout's padding: NaN
    # scales, which only the padded columns read.
    sfa = _linear_scales(torch, views["sfa"], s.m, s.kb)
    sfb = _linear_scales(torch, views["sfb"], b_rows, s.kb)
    c = views["c"].permute(1, 2, 0)
    return (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c), write_back


def gpumode_dual_data(torch, views, s):
    """nvfp4_dual_gemm's tuple: every tensor on the device (their sfa_ref_cpu.to("cuda") and the
    others likewise), linear scales with the strides of the [rows, kb, l] permute."""
    return (_fp4(torch, views["a"]), _fp4(torch, views["b"]), _fp4(torch, views["b2"]),
            _linear_scales(torch, views["sfa"], s.m, s.kb), _linear_scales(torch, views["sfb"], s.n, s.kb),
            _linear_scales(torch, views["sfb2"], s.n, s.kb),
            _permuted_scales(torch, views["sfa"]), _permuted_scales(torch, views["sfb"]),
            _permuted_scales(torch, views["sfb2"]), views["c"].permute(1, 2, 0))


def gpumode_group_data(torch, views):
    """nvfp4_group_gemm's tuple of four lists. Their linear scales stay on the CPU (reference.py
    builds sfa_ref_cpu there and hands it over as is; only the reordered ones go to the device)."""
    abc, sf, sf_reordered, sizes = [], [], [], []
    for g in views["groups"]:
        abc.append((_fp4(torch, g["a"]), _fp4(torch, g["b"]), g["c"].permute(1, 2, 0)))
        sf.append((_linear_scales(torch, g["sfa"], g["m"], g["kb"]).cpu(),
                   _linear_scales(torch, g["sfb"], g["n"], g["kb"]).cpu()))
        sf_reordered.append((_permuted_scales(torch, g["sfa"]), _permuted_scales(torch, g["sfb"])))
        sizes.append((g["m"], g["n"], g["k"], 1))
    return (abc, sf, sf_reordered, sizes)
