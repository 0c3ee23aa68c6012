"""The canonical format of SPEC.md revision 3 in host memory: grouped and dual GEMM problems and the
BF16 and FP32 outputs. Each problem is laid out here as the runner lays it out (SPEC.md section 2:
permuted scales with NaN padding, the packed arrangement with every group on a 128-row tile),
handed to the adapter as an nvfp4_problem, and computed by the numpy reference kernels on the
views the adapter builds; their output must be the suite's exact reference of the same problem
written as a case file (nc.reference). A view of the wrong bytes (a group's offset, a tile, a
word size) shows as a differing output."""
import ctypes

import numpy as np
import pytest

import numpy_kernels as K
import nvfp4check as nc
from nvfp4check import _abi
from nvfp4check.adapter import PROBLEMS, KernelAdapter

OUT_TYPES = ("fp16", "bf16", "fp32")
WORD = {"fp16": np.uint16, "bf16": np.uint16, "fp32": np.uint32}
POISON = {"fp16": 0x7D5B, "bf16": 0x7FA5, "fp32": 0x7FA5_A5A5}  # NaNs, as the runner's C poison


def ceil_div(a, b):
    return (a + b - 1) // b


class Operand:
    """One operand's random bytes: packed E2M1 (l, rows, k/2) and finite linear scales."""

    def __init__(self, rng, l, rows, k):
        self.rows, self.k, self.l = rows, k, l
        self.packed = rng.integers(0, 256, (l, rows, k // 2), dtype=np.uint8)
        # Scales 2^-3 .. 2^3 or so: sums stay in every output type's range, and exact in float64.
        self.scales = rng.integers(0x30, 0x48, (l, rows, ceil_div(k, 16)), dtype=np.uint8)

    def layout(self, permuted):
        """The scales as the runner hands them: linear, or permuted with NaN (0x7F) padding."""
        if not permuted:
            return self.scales.reshape(-1).copy()
        kb = ceil_div(self.k, 16)
        out = np.full(self.l * ceil_div(self.rows, 128) * ceil_div(kb, 4) * 512, 0x7F, dtype=np.uint8)
        b, i, s = np.meshgrid(np.arange(self.l), np.arange(self.rows), np.arange(kb), indexing="ij")
        out[_abi.sf_permuted_offset(self.rows, kb, b, i, s)] = self.scales
        return out


def hexbytes(x):
    return np.ascontiguousarray(x).tobytes().hex()


def address(x):
    return x.ctypes.data if x is not None and x.size else None


class Grouped:
    """A grouped problem in the runner's layout: separate buffers per group, or packed."""

    def __init__(self, seed, ms, n, k, packed, permuted, out_type, alphas=None):
        rng = np.random.default_rng(seed)
        print(f"grouped m={ms} n={n} k={k} packed={packed} permuted={permuted} {out_type} seed {seed}")
        self.ms, self.n, self.k, self.packed, self.permuted, self.out_type = ms, n, k, packed, permuted, out_type
        self.alphas = alphas or [1.0] * len(ms)
        self.ops = [(Operand(rng, 1, m, k), Operand(rng, 1, n, k)) if m else None for m in ms]
        word = WORD[out_type]
        self.keep = []  # every buffer the table points into stays alive here
        table = (_abi.nvfp4_group * len(ms))()
        kb, half = ceil_div(k, 16), k // 2
        if packed:
            rows = sum(ms)
            self.a = np.zeros((rows, half), np.uint8)
            self.c = np.full((rows, n), POISON[out_type], word)
            self.b = np.zeros((len(ms), n, half), np.uint8)
            sfb_set = ceil_div(n, 128) * ceil_div(kb, 4) * 512 if permuted else n * kb
            self.sfb = np.full(len(ms) * sfb_set, 0x7F, np.uint8)
            tiles = sum(ceil_div(m, 128) for m in ms)
            self.sfa = np.full(tiles * ceil_div(kb, 4) * 512 if permuted else rows * kb, 0x7F, np.uint8)
        row = tile = 0
        self.outputs = []
        for g, m in enumerate(ms):
            e = table[g]
            e.m, e.n, e.k, e.alpha = m, n, k, self.alphas[g]
            if not m:
                self.outputs.append(None)
                continue  # an empty group: NULL pointers
            a, b = self.ops[g]
            if packed:
                self.a[row:row + m] = a.packed[0]
                self.b[g] = b.packed[0]
                sfb = b.layout(permuted)
                self.sfb[g * sfb_set:(g + 1) * sfb_set] = sfb
                sfa = a.layout(permuted)
                at = tile * ceil_div(kb, 4) * 512 if permuted else row * kb
                self.sfa[at:at + sfa.size] = sfa
                c = self.c[row:row + m]
                e.a, e.b = address(self.a) + row * half, address(self.b) + g * n * half
                e.sfa, e.sfb = address(self.sfa) + at, address(self.sfb) + g * sfb_set
                e.c = address(self.c) + row * n * self.c.itemsize
            else:
                bufs = [a.packed.copy(), b.packed.copy(), a.layout(permuted), b.layout(permuted)]
                c = np.full((m, n), POISON[out_type], word)
                self.keep += bufs + [c]
                e.a, e.b, e.sfa, e.sfb = (address(x) for x in bufs)
                e.c = address(c)
            self.outputs.append(c)
            row += m
            tile += ceil_div(m, 128)
        self.table = table
        p = _abi.nvfp4_problem()
        p.op = _abi.NVFP4_OP_GROUPED_GEMM
        p.m, p.n, p.k, p.l = sum(ms), n, k, 1
        if packed:
            p.a, p.b, p.sfa, p.sfb, p.c = (address(x) for x in (self.a, self.b, self.sfa, self.sfb, self.c))
        p.sf_layout = _abi.NVFP4_SF_PERMUTED if permuted else _abi.NVFP4_SF_LINEAR
        p.alpha = 1.0
        p.out_type = _abi.OUT_TYPES[out_type]
        p.alpha2 = 1.0
        p.groups = len(ms)
        p.group = ctypes.cast(table, ctypes.POINTER(_abi.nvfp4_group))
        self.abi = p

    def case_text(self):
        lines = ["# nvfp4check case v1", "op = grouped_gemm", f"groups = {len(self.ms)}",
                 "group_m = " + " ".join(map(str, self.ms)), f"group_n = {self.n}", f"group_k = {self.k}",
                 "group_alpha = " + " ".join(repr(float(a)) for a in self.alphas),
                 f"sf_layout = {'permuted' if self.permuted else 'linear'}", f"out_type = {self.out_type}"]
        if self.packed:
            lines.append("packed = true")
        for g, ops in enumerate(self.ops):
            if ops:
                a, b = ops
                lines += [f"a.{g} = {hexbytes(a.packed)}", f"b.{g} = {hexbytes(b.packed)}",
                          f"sfa.{g} = {hexbytes(a.scales)}", f"sfb.{g} = {hexbytes(b.scales)}"]
        return "\n".join(lines) + "\n"


class Dual:
    """A dual GEMM problem in the runner's layout."""

    def __init__(self, seed, m, n, k, l, permuted, out_type, alpha=1.0, alpha2=1.0):
        rng = np.random.default_rng(seed)
        print(f"dual m={m} n={n} k={k} l={l} permuted={permuted} {out_type} seed {seed}")
        self.m, self.n, self.k, self.l, self.permuted, self.out_type = m, n, k, l, permuted, out_type
        self.alpha, self.alpha2 = alpha, alpha2
        self.a, self.b, self.b2 = Operand(rng, l, m, k), Operand(rng, l, n, k), Operand(rng, l, n, k)
        self.bufs = [self.a.packed, self.b.packed, self.b2.packed] + [x.layout(permuted) for x in
                                                                         (self.a, self.b, self.b2)]
        self.c = np.full((l, m, n), POISON[out_type], WORD[out_type])
        p = _abi.nvfp4_problem()
        p.op = _abi.NVFP4_OP_DUAL_GEMM
        p.m, p.n, p.k, p.l = m, n, k, l
        p.a, p.b, p.b2, p.sfa, p.sfb, p.sfb2 = (address(x) for x in self.bufs)
        p.sf_layout = _abi.NVFP4_SF_PERMUTED if permuted else _abi.NVFP4_SF_LINEAR
        p.alpha, p.alpha2 = alpha, alpha2
        p.c = address(self.c)
        p.out_type = _abi.OUT_TYPES[out_type]
        self.abi = p

    def case_text(self):
        return "\n".join([
            "# nvfp4check case v1", "op = dual_gemm", f"m = {self.m}", f"n = {self.n}", f"k = {self.k}",
            f"l = {self.l}", f"sf_layout = {'permuted' if self.permuted else 'linear'}",
            f"out_type = {self.out_type}", f"alpha = {self.alpha!r}", f"alpha2 = {self.alpha2!r}",
            f"a = {hexbytes(self.a.packed)}", f"b = {hexbytes(self.b.packed)}", f"b2 = {hexbytes(self.b2.packed)}",
            f"sfa = {hexbytes(self.a.scales)}", f"sfb = {hexbytes(self.b.scales)}",
            f"sfb2 = {hexbytes(self.b2.scales)}"]) + "\n"


def reference_of(tmp_path, problem):
    path = tmp_path / "case.txt"
    path.write_text(problem.case_text())
    return nc.reference(str(path))


def ulps_apart(got, want, out_type):
    """|difference| of the words as ordered integers (same sign assumed: the tests' values are
    not near zero), per element."""
    wide = np.int64
    return np.abs(got.view(WORD[out_type]).astype(wide) - want.view(WORD[out_type]).astype(wide))


GROUPED = [
    # group m values, n, k, packed, permuted
    ([40, 0, 130], 24, 96, True, True),
    ([40, 0, 130], 24, 96, False, True),
    ([3, 129, 1], 8, 34, True, False),
    ([5, 17], 9, 64, False, False),
]


@pytest.mark.parametrize("out_type", OUT_TYPES)
@pytest.mark.parametrize("ms,n,k,packed,permuted", GROUPED)
def test_grouped_views_give_the_reference(tmp_path, out_type, ms, n, k, packed, permuted):
    gp = Grouped(1000 + sum(ms) + k, ms, n, k, packed, permuted, out_type, alphas=[0.5, 2.0, 1.0, 4.0][:len(ms)])
    seen = {}

    def kernel(p):
        seen["p"] = p
        K.reference_grouped(p)

    flags = nc.FLAG_GROUPS_PACKED if packed else 0
    adapter = KernelAdapter(kernel, op="grouped_gemm", memory="host", flags=flags, out_types=(out_type,))
    assert adapter(gp.abi) == _abi.NVFP4_OK
    p = seen["p"]
    assert p.op == "grouped_gemm" and p.out_type == out_type and p.packed == packed and len(p.groups) == len(ms)
    assert (p.m, p.n, p.k, p.l) == (sum(ms), n, k, 1)
    want = reference_of(tmp_path, gp)
    dtype = K.round_to(np.zeros(1), out_type).dtype
    for g, (group, out, ref) in enumerate(zip(p.groups, gp.outputs, want)):
        assert (group.m, group.n, group.k) == (ms[g], n, k)
        assert group.c.shape == (1, ms[g], n) and group.c.dtype == dtype
        assert group.a.shape == (1, ms[g], k // 2) and group.a.dtype == np.uint8
        if ms[g] == 0:
            assert group.a.size == group.b.size == group.sfa.size == group.sfb.size == group.c.size == 0
            assert ref.size == 0
            continue
        # In place, over the runner's buffer: the group's C words are the reference's, bit for bit.
        assert group.c.ctypes.data == out.ctypes.data
        assert np.array_equal(out.view(WORD[out_type]), ref.reshape(ms[g], n).view(WORD[out_type])), f"group {g}"
    if packed:
        assert p.a.shape == (1, sum(ms), k // 2) and p.c.shape == (1, sum(ms), n) and p.b.shape[0] == len(ms)
        assert p.c.ctypes.data == gp.c.ctypes.data
    else:
        assert p.a is None and p.c is None


@pytest.mark.parametrize("out_type", OUT_TYPES)
@pytest.mark.parametrize("m,n,k,l,permuted", [(130, 24, 96, 2, True), (7, 5, 34, 1, False), (33, 1, 64, 3, True)])
def test_dual_views_give_the_reference(tmp_path, out_type, m, n, k, l, permuted):
    dp = Dual(2000 + m + k, m, n, k, l, permuted, out_type, alpha=0.5, alpha2=2.0)
    seen = {}

    def kernel(p):
        seen["p"] = p
        K.reference_dual(p)

    adapter = KernelAdapter(kernel, op="dual_gemm", memory="host", out_types=("fp16", "bf16", "fp32"))
    assert adapter(dp.abi) == _abi.NVFP4_OK
    p = seen["p"]
    assert p.op == "dual_gemm" and p.out_type == out_type and (p.alpha, p.alpha2) == (0.5, 2.0)
    assert p.b2.shape == p.b.shape == (l, n, k // 2) and p.sfb2.shape == p.sfb.shape
    assert p.c.ctypes.data == dp.c.ctypes.data and p.c.shape == (l, m, n)
    want = reference_of(tmp_path, dp)
    # silu in float64 is within 2^-52 of the exact value: one rounding may land one ulp apart.
    apart = ulps_apart(dp.c, want, out_type)
    assert apart.max() <= 1, apart.max()
    assert (apart == 0).mean() > 0.95


@pytest.mark.parametrize("out_type", OUT_TYPES)
def test_gemm_in_every_output_type_gives_the_reference(tmp_path, out_type):
    # A GEMM is a dual GEMM's first half: the case file and the layout of Dual without b2.
    dp = Dual(3000, 70, 9, 48, 2, True, out_type, alpha=2.0)
    dp.abi.op = _abi.NVFP4_OP_GEMM
    seen = {}

    def kernel(p):
        seen["p"] = p
        K.reference_gemm(p)

    assert KernelAdapter(kernel, op="gemm", memory="host", out_types=out_type)(dp.abi) == _abi.NVFP4_OK
    assert seen["p"].c.dtype == K.round_to(np.zeros(1), out_type).dtype and seen["p"].b2 is None
    text = "\n".join(line for line in dp.case_text().splitlines()
                     if not line.startswith(("b2 ", "sfb2 ", "alpha2 "))).replace("dual_gemm", "gemm")
    (tmp_path / "gemm.txt").write_text(text + "\n")
    want = nc.reference(str(tmp_path / "gemm.txt"))
    assert np.array_equal(dp.c.view(WORD[out_type]), want.view(WORD[out_type]))


def test_round_to_bf16_rounds_once_to_nearest_even():
    # 1 + 2^-8 is halfway between BF16's 1 and 1 + 2^-7: to even (1); a hair above goes up.
    x = np.array([1 + 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -30, 1 + 3 * 2.0 ** -8, 2.0 ** -133, 2.0 ** -134,
                  3 * 2.0 ** -135, (2 - 2.0 ** -8) * 2.0 ** 127, -(2 - 2.0 ** -7 + 2.0 ** -9) * 2.0 ** 127,
                  -(2 - 2.0 ** -9) * 2.0 ** 127, np.nan, -0.0])
    assert [hex(v) for v in K.round_to(x, "bf16")] == [
        "0x3f80", "0x3f81", "0x3f82", "0x1", "0x0", "0x1", "0x7f80", "0xff7f", "0xff80", "0x7fc0", "0x8000"]


# --- The declaration (SPEC.md section 7: the adapter answers NVFP4_UNSUPPORTED on fn's behalf) --

def never_called(p):
    raise AssertionError(f"called with {p!r}, outside the declaration")


def test_declared_info_is_version_3():
    a = KernelAdapter(never_called, op=("grouped_gemm", "dual_gemm"), memory="host", out_types=("bf16", "fp32"),
                      max_groups=8, flags=nc.FLAG_GROUPS_PACKED)
    info = a.info
    assert info.abi_version == 3
    assert info.ops == (1 << _abi.NVFP4_OP_GROUPED_GEMM) | (1 << _abi.NVFP4_OP_DUAL_GEMM)
    assert info.out_types == (1 << _abi.NVFP4_OUT_BF16) | (1 << _abi.NVFP4_OUT_FP32)
    assert info.max_groups == 8 and info.flags == nc.FLAG_GROUPS_PACKED
    default = KernelAdapter(never_called, memory="host")
    assert default.info.out_types == 1 << _abi.NVFP4_OUT_FP16 and default.info.max_groups == 0
    with pytest.raises(ValueError, match="out_types"):
        KernelAdapter(never_called, memory="host", out_types=("fp64",))
    with pytest.raises(ValueError, match="max_groups"):
        KernelAdapter(never_called, memory="host", max_groups=-1)
    with pytest.raises(ValueError, match="float16"):
        KernelAdapter(never_called, format="gpumode", op="gemm", out_types=("bf16",))


def refused(adapter, problem, why):
    assert why in adapter.unsupported_reason(problem)
    assert adapter(problem) == _abi.NVFP4_UNSUPPORTED


def test_out_types_are_declared():
    dp = Dual(4000, 8, 4, 32, 1, False, "bf16")
    refused(KernelAdapter(never_called, op="dual_gemm", memory="host"), dp.abi, "does not declare the bf16 output type")
    refused(KernelAdapter(never_called, op="dual_gemm", memory="host", out_types="fp32"), dp.abi, "does not declare the bf16 output type")
    assert (dp.c == POISON["bf16"]).all(), "a refused problem is untouched"
    # A version-1-style problem with out_type 0 is FP16.
    dp = Dual(4001, 8, 4, 32, 1, False, "fp16")
    dp.abi.out_type = 0
    assert KernelAdapter(K.reference_dual, op="dual_gemm", memory="host").declares(dp.abi)


def test_groups_and_per_group_multiples_are_declared():
    gp = Grouped(4002, [8, 12, 0], 16, 64, False, False, "fp16", alphas=[1.0, 1.0, 1.0])
    ok = KernelAdapter(K.reference_grouped, op="grouped_gemm", memory="host", m_multiple=4, n_multiple=16,
                       k_multiple=64, max_groups=3)
    assert ok.unsupported_reason(gp.abi) == ""
    refused(KernelAdapter(never_called, op="grouped_gemm", memory="host", max_groups=2), gp.abi, "max_groups 2")
    # The groups' m add up to 20, a multiple of 5 and of 10; group 0's 8 is not.
    refused(KernelAdapter(never_called, op="grouped_gemm", memory="host", m_multiple=5), gp.abi, "group 0: m = 8")
    refused(KernelAdapter(never_called, op="grouped_gemm", memory="host", n_multiple=32), gp.abi, "n = 16")
    refused(KernelAdapter(never_called, op="grouped_gemm", memory="host", k_multiple=128), gp.abi, "k = 64")
    gp.table[1].alpha = 0.5
    refused(KernelAdapter(never_called, op="grouped_gemm", memory="host", flags=nc.FLAG_UNIT_ALPHA), gp.abi,
            "group 1: alpha = 0.5")
    refused(KernelAdapter(never_called, op="dual_gemm", memory="host"), gp.abi, "does not declare op grouped_gemm")


def test_dual_n_multiple_and_alpha2_are_declared():
    dp = Dual(4003, 8, 12, 32, 1, False, "fp16", alpha2=0.5)
    refused(KernelAdapter(never_called, op="dual_gemm", memory="host", n_multiple=8), dp.abi, "n = 12")
    refused(KernelAdapter(never_called, op="dual_gemm", memory="host", flags=nc.FLAG_UNIT_ALPHA), dp.abi,
            "alpha2 = 0.5")
    assert KernelAdapter(K.reference_dual, op="dual_gemm", memory="host", n_multiple=4).declares(dp.abi)


def test_gpu_mode_problems_declare_their_task_yml_limits():
    group = KernelAdapter(never_called, problem="nvfp4_group_gemm", format="gpumode")
    assert group.ops == ("grouped_gemm",)
    assert (group.info.m_multiple, group.info.n_multiple, group.info.k_multiple) == (1, 128, 256)
    assert group.info.flags & nc.FLAG_UNIT_ALPHA and not group.info.flags & nc.FLAG_GROUPS_PACKED
    dual = KernelAdapter(never_called, problem="nvfp4_dual_gemm", format="gpumode", n_multiple=256)
    assert dual.ops == ("dual_gemm",)
    assert (dual.info.m_multiple, dual.info.n_multiple, dual.info.k_multiple) == (128, 256, 256)
    assert dual.info.flags & nc.FLAG_UNIT_ALPHA
    with pytest.raises(ValueError, match="is op 'dual_gemm'"):
        KernelAdapter(never_called, problem="nvfp4_dual_gemm", format="gpumode", op="gemm")


# --- Through the suite: live once the C++ call path hands these problems to kernels ------------

@pytest.mark.parametrize("op,out_types,flags", [
    ("grouped_gemm", ("fp16", "bf16", "fp32"), 0),
    ("grouped_gemm", ("fp16", "bf16", "fp32"), nc.FLAG_GROUPS_PACKED),
    ("dual_gemm", ("fp16", "bf16", "fp32"), 0),
    ("gemm", ("bf16", "fp32"), 0),
])
def test_reference_kernels_pass_the_suite(case_dir, op, out_types, flags):
    r = nc.check(K.reference_any, op=op, memory="host", out_types=out_types, flags=flags, cases=40, seed=77,
                 case_dir=case_dir)
    if r.verdict == "skipped" or r.cases == r.json["kernel"].get("unsupported_cases", 0):
        pytest.skip(f"this build's suite does not hand {op} / {out_types} problems to kernels yet: "
                    f"{r.skip_reason or 'every case unsupported'}")
    assert r.verdict == "pass", r.failure


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
def test_gpu_mode_problem_declarations_are_drawn_and_checked_on_the_host(case_dir, problem):
    """What --problem declares (the op, whole 128/256 tiles, permuted scales, unit alpha), given to a
    host kernel: the schedule draws those cases, large ones too (where halving a dimension of one
    128-tile gives the same tile back, the draw must shrink another), and the honest kernel passes."""
    d = PROBLEMS[problem]
    r = nc.check(K.reference_any, op=d["op"], memory="host", sf_layouts=("permuted",), flags=nc.FLAG_UNIT_ALPHA,
                 m_multiple=d["m_multiple"], n_multiple=d["n_multiple"], k_multiple=d["k_multiple"], cases=40,
                 seed=11, case_dir=case_dir)
    assert r.verdict == "pass", r.failure
    assert r.cases - r.json["kernel"].get("unsupported_cases", 0) > 20, r.json["kernel"]


def test_operand_formats_reach_the_declaration_check():
    # The C API's declaration check reads a problem's version-3 fields: an MX problem is inside a
    # declaration of exactly its formats (a Triton dot_scaled kernel was told otherwise), an
    # NVFP4 one is not.
    p = _abi.nvfp4_problem()
    p.op, p.m, p.n, p.k, p.l = _abi.NVFP4_OP_GEMM, 49, 17, 2, 6
    p.out_type, p.sf_layout = _abi.NVFP4_OUT_FP32, _abi.NVFP4_SF_LINEAR
    p.a_format, p.b_format = _abi.NVFP4_FORMAT_MXFP8_E5M2, _abi.NVFP4_FORMAT_MXFP4
    mx = KernelAdapter(never_called, op="gemm", memory="host", out_types="fp32", a_formats=("mxfp8_e5m2",),
                       b_formats=("mxfp4",))
    assert mx.unsupported_reason(p) == ""
    p.a_format = _abi.NVFP4_FORMAT_NVFP4
    refused(mx, p, "does not declare the nvfp4 format for A")


@pytest.mark.parametrize("op", ["gemm", "dual_gemm", "grouped_gemm"])
def test_python_kernel_writes_block_scaled_output(case_dir, op):
    # out_type "nvfp4": p.q, p.sfq, p.recipe and p.global_scale (per group for grouped_gemm)
    # replace p.c; an epilogue quantizing by te passes, the same without the global scale fails.
    decl = dict(op=op, memory="host", out_types=("nvfp4",), recipes=("te",))
    r = nc.check(K.nvfp4_out_te, cases=60, seed=12, case_dir=case_dir, **decl)
    assert r.verdict == "pass", r.failure
    assert r.cases - r.json["kernel"].get("unsupported_cases", 0) > 20, r.json["kernel"]
    r = nc.check(K.nvfp4_out_no_global_scale, cases=60, seed=12, case_dir=case_dir, **decl)
    assert r.verdict == "fail" and r.failure.check == "oracle", r


def test_nvfp4_output_declarations():
    with pytest.raises(ValueError, match="declares the recipes"):
        KernelAdapter(never_called, op="gemm", memory="host", out_types=("nvfp4",))
    with pytest.raises(ValueError, match="gemm, grouped_gemm and dual_gemm"):
        KernelAdapter(never_called, op="gemv", memory="host", out_types=("nvfp4",), recipes=("te",))
    with pytest.raises(ValueError, match="recipes of NVFP4 output"):
        KernelAdapter(never_called, op="gemm", memory="host", out_types=("nvfp4",), recipes=("mx_rceil",))
    a = KernelAdapter(never_called, op="gemm", memory="host", out_types=("bf16", "nvfp4"), recipes=("te", "fast"))
    assert a.info.out_types == (1 << _abi.NVFP4_OUT_BF16) | (1 << _abi.NVFP4_OUT_NVFP4)
    assert a.info.recipes == (1 << _abi.NVFP4_RECIPE_TE) | (1 << _abi.NVFP4_RECIPE_FAST)
