"""The gpumode format is GPU MODE's own tuple: built from the same bytes as the canonical format, it
agrees with the construction in GPU MODE's reference.py (github.com/gpu-mode/reference-kernels,
problems/nvidia/nvfp4_gemm/reference.py at d7df8c4 and nvfp4_gemv/reference.py at 9a1d6c9,
generate_input and to_blocked), re-implemented here with their random draws replaced by given
bytes: dtypes, shapes, strides and contents. Needs torch (CPU tensors are enough)."""
import numpy as np
import pytest

from nvfp4check import _abi
from nvfp4check.adapter import KernelAdapter, Sizes, gpumode_data, gpumode_views

torch = pytest.importorskip("torch", reason="the gpumode format is made of torch tensors")
if not hasattr(torch, "float4_e2m1fn_x2") or not hasattr(torch, "float8_e4m3fn"):
    pytest.skip(f"torch {torch.__version__} has no float4_e2m1fn_x2 / float8_e4m3fn", allow_module_level=True)

FP4, FP8 = torch.float4_e2m1fn_x2, torch.float8_e4m3fn
SEED = 31337


def ceil_div(a, b):
    return (a + b - 1) // b


# --- GPU MODE's construction (reference.py), their randint draws replaced by our bytes ----------

def gpu_mode_scale_tensors(l, mn, sf_k, ref_bytes):
    """create_scale_factor_tensors(l, mn, sf_k): (ref [mn, sf_k, l] on the CPU, reordered
    [32, 4, rest_mn, 4, rest_k, l]). Reordered on uint8 views of the same bytes (index_put has no
    float8 kernel on every torch); their padding cells are random, ours zero here."""
    ref = ref_bytes.view(l, mn, sf_k)                                   # ref_shape = (l, mn, sf_k)
    ref_permuted = ref.permute(1, 2, 0)                                 # ref_permute_order = (1, 2, 0)
    atom_m, atom_k = (32, 4), 4
    mma_shape = (l, ceil_div(mn, atom_m[0] * atom_m[1]), ceil_div(sf_k, atom_k), atom_m[0], atom_m[1], atom_k)
    reordered = torch.zeros(mma_shape, dtype=torch.uint8).permute(3, 4, 1, 5, 2, 0)  # mma_permute_order
    i, j, b = torch.meshgrid(torch.arange(mn), torch.arange(sf_k), torch.arange(l), indexing="ij")
    mm, mm32, mm4 = i // (atom_m[0] * atom_m[1]), i % atom_m[0], (i % 128) // atom_m[0]
    kk, kk4 = j // atom_k, j % atom_k
    reordered[mm32, mm4, mm, kk4, kk, b] = ref_permuted[i, j, b]
    return ref_permuted.view(FP8), reordered.view(FP8)


def gpu_mode_tuple(op, a_bytes, b_bytes, sfa_bytes, sfb_bytes, c_bits, m, n_rows, k, l):
    a_ref = a_bytes.view(l, m, k // 2).permute(1, 2, 0).view(FP4)
    b_ref = b_bytes.view(l, n_rows, k // 2).permute(1, 2, 0).view(FP4)
    c_ref = c_bits.permute(1, 2, 0)
    sf_k = ceil_div(k, 16)
    sfa_ref_cpu, sfa_permuted = gpu_mode_scale_tensors(l, m, sf_k, sfa_bytes)
    sfb_ref_cpu, sfb_permuted = gpu_mode_scale_tensors(l, n_rows, sf_k, sfb_bytes)
    return (a_ref, b_ref, sfa_ref_cpu, sfb_ref_cpu, sfa_permuted, sfb_permuted, c_ref)


def to_blocked(input_matrix):
    """reference.py's to_blocked: one batch's [rows, cols] scales in cuBLAS's blocked layout."""
    rows, cols = input_matrix.shape
    n_row_blocks, n_col_blocks = ceil_div(rows, 128), ceil_div(cols, 4)
    blocks = input_matrix.view(n_row_blocks, 128, n_col_blocks, 4).permute(0, 2, 1, 3)
    rearranged = blocks.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16)
    return rearranged.flatten()


# --- One problem in the runner's layout (SPEC.md section 2), in numpy buffers we own ------------

class HostProblem:
    def __init__(self, op, m, n, k, l, seed):
        rng = np.random.default_rng(seed)
        print(f"{op} m={m} n={n} k={k} l={l} from seed {seed}")
        self.op, self.m, self.n, self.k, self.l = op, m, n, k, l
        kb = ceil_div(k, 16)
        self.a = rng.integers(0, 256, (l, m, k // 2), dtype=np.uint8)
        self.b = rng.integers(0, 256, (l, n, k // 2), dtype=np.uint8)
        self.sfa_lin = rng.integers(0, 0x7F, (l, m, kb), dtype=np.uint8)  # finite scales
        self.sfb_lin = rng.integers(0, 0x7F, (l, n, kb), dtype=np.uint8)
        self.sfa = self.permuted(self.sfa_lin, m, kb)
        self.sfb = self.permuted(self.sfb_lin, n, kb)
        self.c = np.full((l, m, n), 0x7D5B, dtype=np.uint16)  # the runner's poison
        p = _abi.nvfp4_problem()
        p.op = _abi.OPS[op]
        p.m, p.n, p.k, p.l = m, n, k, l
        p.a, p.b, p.sfa, p.sfb = (x.ctypes.data for x in (self.a, self.b, self.sfa, self.sfb))
        p.sf_layout = _abi.NVFP4_SF_PERMUTED
        p.alpha = 1.0
        p.c = self.c.ctypes.data
        p.stream = None
        self.abi = p

    @staticmethod
    def permuted(lin, rows, kb):
        """SPEC.md's permuted layout, padding cells NaN (0x7F) as the runner fills them."""
        l = lin.shape[0]
        out = np.full(l * ceil_div(rows, 128) * ceil_div(kb, 4) * 512, 0x7F, dtype=np.uint8)
        b, i, s = np.meshgrid(np.arange(l), np.arange(rows), np.arange(kb), indexing="ij")
        out[_abi.sf_permuted_offset(rows, kb, b, i, s)] = lin
        return out


def both_formats(hp):
    s = Sizes(hp.abi)
    data, _ = gpumode_data(torch, gpumode_views(torch, hp.abi, s, device_tensors=False), s)
    seen = {}

    def canonical(p):
        seen["p"] = p

    KernelAdapter(canonical, op=hp.op, memory="host", format="canonical")(hp.abi)
    return data, seen["p"]


def raw(t):
    return t.view(torch.uint8) if t.dtype != torch.float16 else t.view(torch.int16)


SHAPES = [("gemm", 200, 72, 160, 3), ("gemm", 256, 128, 256, 2), ("gemv", 300, 1, 96, 2), ("gemv", 128, 1, 256, 1)]


@pytest.mark.parametrize("op,m,n,k,l", SHAPES)
def test_gpumode_tuple_is_gpu_modes(op, m, n, k, l):
    hp = HostProblem(op, m, n, k, l, SEED + m)
    ours, canonical = both_formats(hp)
    kb = ceil_div(k, 16)
    n_rows = 128 if op == "gemv" else n  # their GEMV pads b (and sfb) to 128 rows
    b_bytes = torch.from_numpy(np.ascontiguousarray(hp.b))
    sfb_bytes = torch.from_numpy(np.ascontiguousarray(hp.sfb_lin))
    if op == "gemv":
        pad = torch.zeros((l, n_rows, k // 2), dtype=torch.uint8)
        pad[:, :1] = b_bytes
        b_bytes = pad
        pad = torch.full((l, n_rows, kb), 0x7F, dtype=torch.uint8)
        pad[:, :1] = sfb_bytes
        sfb_bytes = pad
    theirs = gpu_mode_tuple(op, torch.from_numpy(hp.a), b_bytes, torch.from_numpy(hp.sfa_lin), sfb_bytes,
                            torch.from_numpy(hp.c.view(np.float16)), m, n_rows, k, l)
    names = ("a", "b", "sfa", "sfb", "sfa_permuted", "sfb_permuted", "c")
    for name, mine, gm in zip(names, ours, theirs):
        assert mine.dtype == gm.dtype, name
        assert tuple(mine.shape) == tuple(gm.shape), name
        assert mine.stride() == gm.stride(), name
    a, b, sfa, sfb, sfa_p, sfb_p, c = ours
    assert torch.equal(raw(a), raw(theirs[0]))
    assert torch.equal(raw(sfa), raw(theirs[2]))
    assert torch.equal(raw(c), raw(theirs[6]))
    if op == "gemv":
        # Row 0 of b and sfb is the vector; the other 127 rows are padding (ours: fixed codes, NaN scales).
        assert torch.equal(raw(b)[:1], raw(theirs[1])[:1])
        assert torch.equal(raw(sfb)[:1], raw(theirs[3])[:1])
        assert bool((raw(sfb)[1:] == 0x7F).all())
    else:
        assert torch.equal(raw(b), raw(theirs[1]))
        assert torch.equal(raw(sfb), raw(theirs[3]))
    # The permuted scales agree on every used cell; the padding cells are NaN (theirs: random).
    for mine, gm, rows in ((sfa_p, theirs[4], m), (sfb_p, theirs[5], n)):
        mine_u8, gm_u8 = raw(mine), raw(gm)
        i, s, bb = torch.meshgrid(torch.arange(rows), torch.arange(kb), torch.arange(l), indexing="ij")
        at = (i % 32, (i % 128) // 32, i // 128, s % 4, s // 4, bb)
        assert torch.equal(mine_u8[at], gm_u8[at])
        used = torch.zeros_like(mine_u8, dtype=torch.bool)
        used[at] = True
        assert bool((mine_u8[~used] == 0x7F).all())
    # Zero copies: GPU MODE's a, the permuted scales and c are the runner's buffers themselves, and
    # so are the canonical arrays.
    assert a.data_ptr() == hp.a.ctypes.data == canonical.a.ctypes.data
    assert sfa_p.data_ptr() == hp.sfa.ctypes.data == canonical.sfa.ctypes.data
    assert c.data_ptr() == hp.c.ctypes.data == canonical.c.ctypes.data
    # Canonical and gpumode see the same bytes.
    assert np.array_equal(canonical.a, raw(a).permute(2, 0, 1).numpy())
    assert np.array_equal(canonical.sfa.reshape(-1), raw(sfa_p).permute(5, 2, 4, 0, 1, 3).reshape(-1).numpy())


def test_permuted_scales_are_cublas_blocked_layout():
    # With m a multiple of 128 and k/16 of 4 (no padding), to_blocked of each batch's linear scales,
    # what GPU MODE's reference hands torch._scaled_mm, is that batch's slice of our permuted buffer.
    hp = HostProblem("gemm", 256, 128, 256, 2, SEED)
    ours, _ = both_formats(hp)
    sfa = ours[2]
    per_batch = len(hp.sfa) // hp.l
    for b in range(hp.l):
        blocked = raw(to_blocked(sfa[:, :, b].contiguous()))
        assert np.array_equal(blocked.numpy(), hp.sfa[b * per_batch:(b + 1) * per_batch])


def test_gpumode_kernel_result_is_copied_into_c():
    # A GPU MODE kernel returns its output; when it is not c itself it is copied into the runner's C.
    hp = HostProblem("gemm", 130, 9, 64, 2, SEED)

    def returns_ones(data):
        return torch.ones(data[6].shape, dtype=torch.float16)

    rc = KernelAdapter(returns_ones, op="gemm", memory="host", format="gpumode")(hp.abi)
    assert rc == _abi.NVFP4_OK
    assert (hp.c.view(np.float16) == 1).all()


def test_gpumode_refuses_what_it_does_not_declare():
    hp = HostProblem("gemm", 130, 9, 64, 2, SEED)
    called = []
    adapter = KernelAdapter(lambda data: called.append(1), op="gemm", memory="host", format="gpumode",
                            m_multiple=128)
    assert adapter(hp.abi) == _abi.NVFP4_UNSUPPORTED and not called
    assert (hp.c == 0x7D5B).all()


# --- nvfp4_group_gemm and nvfp4_dual_gemm (their reference.py at f83cb92) -------------------------

def gm_strides(shape):
    """Strides of GPU MODE's [rows, cols, l] tensors: the permute(1, 2, 0) of a contiguous [l, rows, cols]."""
    rows, cols, l = shape
    return (cols, 1, rows * cols)


def gm_permuted_shape(rows, kb, l):
    return (32, 4, ceil_div(rows, 128), 4, ceil_div(kb, 4), l)


def same_scales(permuted, linear):
    """permuted [32, 4, Mt, 4, Kt, l] holds linear [rows, kb, l] at every used cell."""
    rows, kb, l = linear.shape
    i, s, bb = torch.meshgrid(torch.arange(rows), torch.arange(kb), torch.arange(l), indexing="ij")
    return torch.equal(raw(permuted)[i % 32, (i % 128) // 32, i // 128, s % 4, s // 4, bb], raw(linear))


@pytest.mark.parametrize("packed", [False, True])
def test_group_gemm_data_is_gpu_modes(packed):
    from test_new_ops_host import Grouped

    ms, n, k = [40, 0, 130], 24, 96
    gp = Grouped(SEED, ms, n, k, packed, True, "fp16")
    s = Sizes(gp.abi)
    abc, sf, sf_reordered, sizes = gpumode_data(torch, gpumode_views(torch, gp.abi, s, device_tensors=False), s)[0]
    assert sizes == [(m, n, k, 1) for m in ms]
    kb = ceil_div(k, 16)
    for g, m in enumerate(ms):
        (a, b, c), (sfa, sfb), (sfa_r, sfb_r) = abc[g], sf[g], sf_reordered[g]
        assert (a.dtype, b.dtype, c.dtype, sfa.dtype, sfa_r.dtype) == (FP4, FP4, torch.float16, FP8, FP8)
        assert tuple(a.shape) == (m, k // 2, 1) and tuple(b.shape) == ((n if m else 0), k // 2, 1)
        assert tuple(c.shape) == (m, n, 1) and tuple(sfa.shape) == (m, kb, 1)
        assert tuple(sfa_r.shape) == gm_permuted_shape(m, kb, 1)
        assert sfa.device.type == "cpu"  # their sfa_ref_cpu stays there
        if not m:
            continue
        assert a.stride() == gm_strides(a.shape) and c.stride() == gm_strides(c.shape)
        assert sfa.stride() == gm_strides(sfa.shape) and sfb.stride() == gm_strides(sfb.shape)
        op_a, op_b = gp.ops[g]
        assert np.array_equal(raw(a).permute(2, 0, 1).numpy(), op_a.packed)
        assert np.array_equal(raw(b).permute(2, 0, 1).numpy(), op_b.packed)
        assert np.array_equal(raw(sfa).permute(2, 0, 1).numpy(), op_a.scales)
        assert same_scales(sfa_r, sfa) and same_scales(sfb_r, sfb)
        assert c.data_ptr() == gp.outputs[g].ctypes.data  # the runner's C, no copy


def test_dual_gemm_data_is_gpu_modes():
    from test_new_ops_host import Dual

    m, n, k, l = 130, 24, 96, 2
    dp = Dual(SEED, m, n, k, l, True, "fp16")
    s = Sizes(dp.abi)
    data, _ = gpumode_data(torch, gpumode_views(torch, dp.abi, s, device_tensors=False), s)
    assert len(data) == 10
    a, b1, b2, sfa, sfb1, sfb2, sfa_r, sfb1_r, sfb2_r, c = data
    kb = ceil_div(k, 16)
    assert [t.dtype for t in data] == [FP4] * 3 + [FP8] * 6 + [torch.float16]
    assert [tuple(t.shape) for t in (a, b1, b2, sfa, sfb1, sfb2, c)] == [
        (m, k // 2, l), (n, k // 2, l), (n, k // 2, l), (m, kb, l), (n, kb, l), (n, kb, l), (m, n, l)]
    assert all(t.stride() == gm_strides(t.shape) for t in (a, b1, b2, sfa, sfb1, sfb2, c))
    assert tuple(sfa_r.shape) == gm_permuted_shape(m, kb, l) and tuple(sfb2_r.shape) == gm_permuted_shape(n, kb, l)
    assert np.array_equal(raw(b2).permute(2, 0, 1).numpy(), dp.b2.packed)
    assert np.array_equal(raw(sfb2).permute(2, 0, 1).numpy(), dp.b2.scales)
    assert same_scales(sfa_r, sfa) and same_scales(sfb1_r, sfb1) and same_scales(sfb2_r, sfb2)
    assert a.data_ptr() == dp.bufs[0].ctypes.data and c.data_ptr() == dp.c.ctypes.data


def test_group_gemm_result_is_the_list_of_cs():
    from test_new_ops_host import Grouped

    gp = Grouped(SEED, [3, 0, 5], 8, 32, False, True, "fp16")

    def returns_ones(data):
        return [torch.ones(c.shape, dtype=torch.float16) for _, _, c in data[0]]

    assert KernelAdapter(returns_ones, problem="nvfp4_group_gemm", memory="host", format="gpumode",
                         n_multiple=1, k_multiple=1)(gp.abi) == _abi.NVFP4_OK
    assert all((c.view(np.float16) == 1).all() for c in gp.outputs if c is not None)
    with pytest.raises(Exception, match="list of the 3 groups"):
        KernelAdapter(lambda data: data[0][0][2], problem="nvfp4_group_gemm", memory="host", format="gpumode",
                      n_multiple=1, k_multiple=1)(gp.abi)
