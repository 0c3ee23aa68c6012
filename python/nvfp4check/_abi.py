"""The kernel ABI of SPEC.md section 5 (kernels/nvfp4_kernel_abi.h) as ctypes structures.

Field for field the C header; build_info() of the C API reports the C sizes so a test can hold the
two together.
"""
import ctypes

NVFP4_ABI_VERSION = 3

NVFP4_OP_GEMV = 1
NVFP4_OP_GEMM = 2
NVFP4_OP_GROUPED_GEMM = 3
NVFP4_OP_DUAL_GEMM = 4
NVFP4_OP_QUANTIZE = 5
NVFP4_SF_LINEAR = 1
NVFP4_SF_PERMUTED = 2
NVFP4_MEMORY_HOST = 1
NVFP4_MEMORY_CUDA = 2
NVFP4_OUT_FP16 = 1
NVFP4_OUT_BF16 = 2
NVFP4_OUT_FP32 = 3
NVFP4_OUT_NVFP4 = 4  # block-scaled output (SPEC.md section 2)
NVFP4_FORMAT_NVFP4 = 1
NVFP4_FORMAT_MXFP4 = 2
NVFP4_FORMAT_MXFP8_E4M3 = 3
NVFP4_FORMAT_MXFP8_E5M2 = 4
NVFP4_IN_FP16 = 1
NVFP4_IN_BF16 = 2
NVFP4_IN_FP32 = 3
NVFP4_RECIPE_TE = 1
NVFP4_RECIPE_REF = 2
NVFP4_RECIPE_FAST = 3
NVFP4_RECIPE_TORCHAO = 4
NVFP4_RECIPE_MX_RCEIL = 5
NVFP4_RECIPE_MX_FLOOR = 6
NVFP4_RECIPE_MX_EVEN = 7
NVFP4_OK = 0
NVFP4_UNSUPPORTED = 1
NVFP4_ERROR = 2

FLAG_SIGNED_SCALES = 1 << 0     # e4m3 semantics; default ue4m3
FLAG_NONDETERMINISTIC = 1 << 1  # run-to-run bit differences allowed
FLAG_FP16_ACCUMULATE = 1 << 2   # judged with the fp16-accum policy
FLAG_SATURATES = 1 << 3         # clamps to the output type's largest finite value instead of +-Inf
FLAG_EXACT = 1 << 4             # accumulates exactly: judged with `exact`
FLAG_UNIT_ALPHA = 1 << 5        # supports alpha 1.0 only (alpha2, every group's too)
FLAG_MMA_ACCUMULATE = 1 << 6    # adds on matrix units (tensor cores): SPEC.md section 3
FLAG_GROUPS_PACKED = 1 << 7     # grouped GEMM in the packed arrangement: SPEC.md section 2
FLAG_QUANT_2D = 1 << 8          # NVFP4 quantize: one scale per 16 x 16 tile
FLAG_ROW_GLOBAL_SCALE = 1 << 9  # one global scale per row (per-token)
FLAG_STOCHASTIC = 1 << 10       # codes rounded stochastically from problem.seed
FLAG_SF_PADDING_KEPT = 1 << 11  # leaves SFQ's padding cells as they were
ALL_FLAGS = (FLAG_SIGNED_SCALES | FLAG_NONDETERMINISTIC | FLAG_FP16_ACCUMULATE | FLAG_SATURATES
             | FLAG_EXACT | FLAG_UNIT_ALPHA | FLAG_MMA_ACCUMULATE | FLAG_GROUPS_PACKED | FLAG_QUANT_2D
             | FLAG_ROW_GLOBAL_SCALE | FLAG_STOCHASTIC | FLAG_SF_PADDING_KEPT)

# What the C API's run callback returns to end a whole check at once (KeyboardInterrupt).
NVFP4CHECK_STOP = -1000

SF_LAYOUTS = {"linear": NVFP4_SF_LINEAR, "permuted": NVFP4_SF_PERMUTED}
MEMORIES = {"host": NVFP4_MEMORY_HOST, "cuda": NVFP4_MEMORY_CUDA}
OUT_TYPES = {"fp16": NVFP4_OUT_FP16, "bf16": NVFP4_OUT_BF16, "fp32": NVFP4_OUT_FP32}
OUT_TYPE_NAMES = {v: k for k, v in OUT_TYPES.items()}
OUT_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}  # bytes of one output word
SF_LAYOUT_NAMES = {v: k for k, v in SF_LAYOUTS.items()}
BLOCK_FORMATS = {"nvfp4": NVFP4_FORMAT_NVFP4, "mxfp4": NVFP4_FORMAT_MXFP4, "mxfp8_e4m3": NVFP4_FORMAT_MXFP8_E4M3,
                 "mxfp8_e5m2": NVFP4_FORMAT_MXFP8_E5M2}
BLOCK_FORMAT_NAMES = {v: k for k, v in BLOCK_FORMATS.items()}
IN_TYPES = {"fp16": NVFP4_IN_FP16, "bf16": NVFP4_IN_BF16, "fp32": NVFP4_IN_FP32}
IN_TYPE_NAMES = {v: k for k, v in IN_TYPES.items()}
RECIPES = {"te": NVFP4_RECIPE_TE, "ref": NVFP4_RECIPE_REF, "fast": NVFP4_RECIPE_FAST,
           "torchao": NVFP4_RECIPE_TORCHAO, "mx_rceil": NVFP4_RECIPE_MX_RCEIL, "mx_floor": NVFP4_RECIPE_MX_FLOOR,
           "mx_even": NVFP4_RECIPE_MX_EVEN}
RECIPE_NAMES = {v: k for k, v in RECIPES.items()}


class nvfp4_kernel_info(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("memory", ctypes.c_uint32),
        ("ops", ctypes.c_uint32),
        ("sf_layouts", ctypes.c_uint32),
        ("min_sm", ctypes.c_uint32),
        ("m_multiple", ctypes.c_uint32),
        ("n_multiple", ctypes.c_uint32),
        ("k_multiple", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        # abi_version >= 2
        ("out_types", ctypes.c_uint32),   # bit set of NVFP4_OUT_*; 0 means FP16 only
        ("max_groups", ctypes.c_uint32),  # grouped GEMM: most groups per call, 0 = no limit
        # abi_version >= 3
        ("a_formats", ctypes.c_uint32),   # bit sets of NVFP4_FORMAT_*; 0 means NVFP4 only
        ("b_formats", ctypes.c_uint32),
        ("in_types", ctypes.c_uint32),    # quantize: bit set of NVFP4_IN_*
        ("q_formats", ctypes.c_uint32),   # quantize and NVFP4 output: formats it writes; 0 = NVFP4
        ("recipes", ctypes.c_uint32),     # quantize and NVFP4 output: bit set of NVFP4_RECIPE_*
    ]


class nvfp4_group(ctypes.Structure):
    # One GEMM of a grouped call, l = 1; m may be 0 (then every pointer is NULL).
    _fields_ = [
        ("m", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("a", ctypes.c_void_p),
        ("b", ctypes.c_void_p),
        ("sfa", ctypes.c_void_p),
        ("sfb", ctypes.c_void_p),
        ("c", ctypes.c_void_p),
        ("alpha", ctypes.c_float),
    ]


class nvfp4_group_out(ctypes.Structure):
    # Grouped GEMM with NVFP4 output: parallel to the group table.
    _fields_ = [
        ("q", ctypes.c_void_p),
        ("sfq", ctypes.c_void_p),
        ("global_scale", ctypes.c_float),
    ]


class nvfp4_problem(ctypes.Structure):
    # Pointers as c_void_p: reading one gives an int address (None for NULL).
    _fields_ = [
        ("op", ctypes.c_uint32),
        ("m", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("l", ctypes.c_int64),
        ("a", ctypes.c_void_p),
        ("b", ctypes.c_void_p),
        ("sfa", ctypes.c_void_p),
        ("sfb", ctypes.c_void_p),
        ("sf_layout", ctypes.c_uint32),
        ("alpha", ctypes.c_float),
        ("c", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
        # abi_version >= 2: a version-1 kernel never reads past here
        ("out_type", ctypes.c_uint32),
        ("b2", ctypes.c_void_p),
        ("sfb2", ctypes.c_void_p),
        ("alpha2", ctypes.c_float),
        ("groups", ctypes.c_int64),
        ("group", ctypes.POINTER(nvfp4_group)),          # G entries in host memory, else NULL
        ("group_device", ctypes.POINTER(nvfp4_group)),   # the same in device memory, else NULL
        # abi_version >= 3: a version-1 or version-2 kernel never reads past here
        ("a_format", ctypes.c_uint32),    # NVFP4_FORMAT_*; NVFP4 for every older kernel
        ("b_format", ctypes.c_uint32),
        ("in_type", ctypes.c_uint32),     # quantize: NVFP4_IN_*
        ("x", ctypes.c_void_p),           # quantize: the input, l*m*k words of in_type
        ("q", ctypes.c_void_p),           # quantize and NVFP4 output: codes and scales
        ("sfq", ctypes.c_void_p),
        ("q_format", ctypes.c_uint32),    # NVFP4_FORMAT_*
        ("recipe", ctypes.c_uint32),      # NVFP4_RECIPE_*
        ("global_scale", ctypes.c_void_p),  # const float *: 1 value, or l*m with FLAG_ROW_GLOBAL_SCALE; NULL for MX
        ("seed", ctypes.c_uint64),        # stochastic rounding
        ("group_out", ctypes.POINTER(nvfp4_group_out)),         # grouped GEMM with NVFP4 output
        ("group_out_device", ctypes.POINTER(nvfp4_group_out)),
    ]


# int (*)(void *user, const nvfp4_problem *problem)
RUN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(nvfp4_problem))


def ceil_div(a, b):
    return (a + b - 1) // b


def sf_permuted_offset(rows, kb, b, i, s):
    """Byte offset of scale (b, i, s) in the permuted 128x4 tile layout (SPEC.md section 2)."""
    mt, kt = ceil_div(rows, 128), ceil_div(kb, 4)
    return ((b * mt + i // 128) * kt + s // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + s % 4


def __getattr__(name):
    """OPS (op name -> NVFP4_OP_* value, in the op table's order) and OP_NAMES (the reverse) come
    from the C++ op table (reference/op_table.h) through the C API's build_info, so a new op needs
    no edit here. They are read on first use: importing the package needs no library."""
    if name not in ("OPS", "OP_NAMES"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _capi

    ops = {op: value for op, value in _capi.load().build_info()["ops"]}
    globals().update(OPS=ops, OP_NAMES={v: k for k, v in ops.items()})
    return globals()[name]
