"""The ctypes mirror of the kernel ABI (nvfp4check._abi) against the C header as this machine's
compiler lays it out (build_info() of the C API): a field added to one and not the other, or put
in another place, moves a size or an offset here."""
import ctypes
import os
import re

from conftest import SOURCE_DIR

import nvfp4check as nc
from nvfp4check import _abi


def test_struct_sizes_and_offsets_are_the_c_headers():
    info = nc.build_info()
    assert info["abi_version"] == _abi.NVFP4_ABI_VERSION == 3
    got = {
        "sizeof_kernel_info": ctypes.sizeof(_abi.nvfp4_kernel_info),
        "sizeof_problem": ctypes.sizeof(_abi.nvfp4_problem),
        "sizeof_group": ctypes.sizeof(_abi.nvfp4_group),
        "offsetof_problem_stream": _abi.nvfp4_problem.stream.offset,
        "offsetof_info_out_types": _abi.nvfp4_kernel_info.out_types.offset,
        "offsetof_problem_out_type": _abi.nvfp4_problem.out_type.offset,
        "offsetof_problem_alpha2": _abi.nvfp4_problem.alpha2.offset,
        "offsetof_problem_group": _abi.nvfp4_problem.group.offset,
        "offsetof_group_c": _abi.nvfp4_group.c.offset,
        "offsetof_group_alpha": _abi.nvfp4_group.alpha.offset,
        # version 3
        "sizeof_group_out": ctypes.sizeof(_abi.nvfp4_group_out),
        "offsetof_info_a_formats": _abi.nvfp4_kernel_info.a_formats.offset,
        "offsetof_info_recipes": _abi.nvfp4_kernel_info.recipes.offset,
        "offsetof_problem_a_format": _abi.nvfp4_problem.a_format.offset,
        "offsetof_problem_x": _abi.nvfp4_problem.x.offset,
        "offsetof_problem_global_scale": _abi.nvfp4_problem.global_scale.offset,
        "offsetof_problem_seed": _abi.nvfp4_problem.seed.offset,
        "offsetof_problem_group_out_device": _abi.nvfp4_problem.group_out_device.offset,
        "offsetof_group_out_global_scale": _abi.nvfp4_group_out.global_scale.offset,
    }
    want = {key: info.get(key) for key in got}
    assert got == want


def test_version_2_fields_are_appended_after_the_version_1_ones():
    # SPEC.md section 5: nothing is reordered, so a version-1 plugin reads its fields where it did.
    v1_info = [name for name, _ in _abi.nvfp4_kernel_info._fields_][:10]
    assert v1_info[-1] == "flags" and [f for f, _ in _abi.nvfp4_kernel_info._fields_][10:12] == ["out_types",
                                                                                                "max_groups"]
    fields = [name for name, _ in _abi.nvfp4_problem._fields_]
    assert fields.index("stream") == 12 and fields[13:20] == ["out_type", "b2", "sfb2", "alpha2", "groups", "group",
                                                              "group_device"]


def test_version_3_fields_are_appended_after_the_version_2_ones():
    info = [name for name, _ in _abi.nvfp4_kernel_info._fields_]
    assert info[12:] == ["a_formats", "b_formats", "in_types", "q_formats", "recipes"]
    fields = [name for name, _ in _abi.nvfp4_problem._fields_]
    assert fields[20:] == ["a_format", "b_format", "in_type", "x", "q", "sfq", "q_format", "recipe", "global_scale",
                           "seed", "group_out", "group_out_device"]
    assert [name for name, _ in _abi.nvfp4_group_out._fields_] == ["q", "sfq", "global_scale"]


def test_constants_are_the_headers():
    assert (_abi.NVFP4_OP_GROUPED_GEMM, _abi.NVFP4_OP_DUAL_GEMM) == (3, 4)
    assert (_abi.NVFP4_OUT_FP16, _abi.NVFP4_OUT_BF16, _abi.NVFP4_OUT_FP32) == (1, 2, 3)
    assert _abi.FLAG_GROUPS_PACKED == 1 << 7 and _abi.ALL_FLAGS == 0xFFF
    assert nc.FLAG_GROUPS_PACKED == _abi.FLAG_GROUPS_PACKED
    assert (nc.FLAG_QUANT_2D, nc.FLAG_ROW_GLOBAL_SCALE, nc.FLAG_STOCHASTIC, nc.FLAG_SF_PADDING_KEPT) == (
        1 << 8, 1 << 9, 1 << 10, 1 << 11)
    assert _abi.NVFP4_OP_QUANTIZE == 5
    assert set(_abi.OUT_TYPES) == {"fp16", "bf16", "fp32"}
    assert _abi.BLOCK_FORMATS == {"nvfp4": 1, "mxfp4": 2, "mxfp8_e4m3": 3, "mxfp8_e5m2": 4}
    assert _abi.IN_TYPES == {"fp16": 1, "bf16": 2, "fp32": 3}
    assert _abi.RECIPES == {"te": 1, "ref": 2, "fast": 3, "torchao": 4, "mx_rceil": 5, "mx_floor": 6, "mx_even": 7}


def test_op_names_are_the_cpp_op_table():
    # The rows of NVFP4_OP_TABLE in reference/op_table.h, `X(name, value, ...)`, read here as text:
    # the package's op names reach it through the C API, and must be those rows, in their order.
    with open(os.path.join(SOURCE_DIR, "reference", "op_table.h"), encoding="utf-8") as f:
        header = f.read()
    table = header[header.index("#define NVFP4_OP_TABLE(X)"):]
    table = table[:table.index("\n\n")]
    rows = [(name, int(value)) for name, value in re.findall(r"X\((\w+),\s*(\d+),", table)]
    assert len(rows) >= 5
    assert list(_abi.OPS.items()) == rows
    assert _abi.OP_NAMES == {value: name for name, value in rows}
    assert ("quantize", _abi.NVFP4_OP_QUANTIZE) in rows
