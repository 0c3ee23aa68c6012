"""The ctypes mirror of the kernel ABI (nvfp4check._abi) against the C header as this machine's
compiler lays it out (build_info() of the C API): a field added to one and not the other, or put
in another place, moves a size or an offset here."""
import ctypes

import nvfp4check as nc
from nvfp4check import _abi


def test_struct_sizes_and_offsets_are_the_c_headers():
    info = nc.build_info()
    assert info["abi_version"] == _abi.NVFP4_ABI_VERSION == 2
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
    }
    want = {key: info.get(key) for key in got}
    assert got == want


def test_version_2_fields_are_appended_after_the_version_1_ones():
    # SPEC.md section 5: nothing is reordered, so a version-1 plugin reads its fields where it did.
    v1_info = [name for name, _ in _abi.nvfp4_kernel_info._fields_][:10]
    assert v1_info[-1] == "flags" and [f for f, _ in _abi.nvfp4_kernel_info._fields_][10:] == ["out_types",
                                                                                              "max_groups"]
    fields = [name for name, _ in _abi.nvfp4_problem._fields_]
    assert fields.index("stream") == 12 and fields[13:] == ["out_type", "b2", "sfb2", "alpha2", "groups", "group",
                                                            "group_device"]


def test_constants_are_the_headers():
    assert (_abi.NVFP4_OP_GROUPED_GEMM, _abi.NVFP4_OP_DUAL_GEMM) == (3, 4)
    assert (_abi.NVFP4_OUT_FP16, _abi.NVFP4_OUT_BF16, _abi.NVFP4_OUT_FP32) == (1, 2, 3)
    assert _abi.FLAG_GROUPS_PACKED == 1 << 7 and _abi.ALL_FLAGS == 0xFF
    assert nc.FLAG_GROUPS_PACKED == _abi.FLAG_GROUPS_PACKED
    assert set(_abi.OPS) == {"gemv", "gemm", "grouped_gemm", "dual_gemm"}
    assert set(_abi.OUT_TYPES) == {"fp16", "bf16", "fp32"}
