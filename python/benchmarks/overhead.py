"""What checking a kernel through Python costs: cases per second of the same C kernel checked as an
ABI plugin and called from a Python callable (canonical format), through the same case loop, the
same seed and shapes (so the same cases), on production-like shapes of 2^20 multiply-adds or more.

    python3 python/benchmarks/overhead.py                      # examples/plugin's host GEMV
    python3 python/benchmarks/overhead.py --plugin build/gpu/kernels/honest/libnvfp4_honest.so \\
        --kernel honest_cuda_warp_tree --shape 4096x1x4096 --shape 1024x256x1024   # CUDA (H200)

The Python side's extra work per kernel call is the adapter (numpy or torch views over the
runner's buffers, the problem object, for CUDA the stream) and one ctypes call back into the C
kernel: exactly what a Python kernel costs beyond its own arithmetic. Each measurement is taken
--repeat times, alternating, and the best of each is compared (a shared machine is noisy).
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))

import nvfp4check as nc  # noqa: E402
from nvfp4check import _abi  # noqa: E402


def build_example_plugin(directory):
    """examples/plugin/example_host_gemv.c as a shared library, against the repository's ABI header."""
    include = os.path.join(directory, "include")
    os.makedirs(include, exist_ok=True)
    link = os.path.join(include, "nvfp4check")
    if not os.path.exists(link):
        os.symlink(os.path.join(REPO, "kernels"), link)
    out = os.path.join(directory, "libexample_host_gemv.so")
    cc = os.environ.get("CC", "cc")
    subprocess.check_call([cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-I", include, "-o", out,
                           os.path.join(REPO, "examples", "plugin", "example_host_gemv.c"), "-lm"])
    return out


def plugin_kernel(path, name):
    """(info, a Python canonical fn that runs the plugin's kernel through ctypes)."""
    lib = ctypes.CDLL(path)
    lib.nvfp4_kernel_count.restype = ctypes.c_int
    lib.nvfp4_kernel_get.restype = ctypes.POINTER(_abi.nvfp4_kernel_info)
    lib.nvfp4_kernel_get.argtypes = [ctypes.c_int]
    lib.nvfp4_kernel_run.restype = ctypes.c_int
    lib.nvfp4_kernel_run.argtypes = [ctypes.c_int, ctypes.POINTER(_abi.nvfp4_problem)]
    for index in range(lib.nvfp4_kernel_count()):
        info = lib.nvfp4_kernel_get(index).contents
        if info.name.decode() == name:
            break
    else:
        raise SystemExit(f"{path} has no kernel {name}")
    run = lib.nvfp4_kernel_run
    cuda = info.memory == _abi.NVFP4_MEMORY_CUDA

    def address(x):
        return x.data_ptr() if cuda else x.ctypes.data

    def python_kernel(p):
        q = _abi.nvfp4_problem(op=_abi.OPS[p.op], m=p.m, n=p.n, k=p.k, l=p.l, a=address(p.a), b=address(p.b),
                               sfa=address(p.sfa), sfb=address(p.sfb), sf_layout=_abi.SF_LAYOUTS[p.sf_layout],
                               alpha=p.alpha, c=address(p.c), stream=p.stream.cuda_stream if cuda else None)
        rc = run(index, ctypes.byref(q))
        if rc == _abi.NVFP4_UNSUPPORTED:
            return nc.UNSUPPORTED
        if rc != _abi.NVFP4_OK:
            raise RuntimeError(f"{name} returned {rc}")
        return None

    return info, python_kernel


def parse_shape(text):
    dims = tuple(int(v) for v in text.lower().split("x"))
    if len(dims) == 3:
        dims += (1,)
    if len(dims) != 4:
        raise argparse.ArgumentTypeError(f"MxNxK or MxNxKxL, not {text!r}")
    return dims


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plugin", help="ABI plugin (default: build examples/plugin's host GEMV)")
    ap.add_argument("--kernel", default="example_host_gemv")
    ap.add_argument("--shape", type=parse_shape, action="append", help="MxNxK[xL] (repeatable)")
    ap.add_argument("--cases", type=int, default=20, help="cases per measurement")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    shapes = args.shape or [(1024, 1, 1024, 1), (2048, 1, 2048, 1), (4096, 1, 4096, 1)]

    with tempfile.TemporaryDirectory() as tmp:
        plugin = args.plugin or build_example_plugin(tmp)
        info, python_kernel = plugin_kernel(plugin, args.kernel)
        memory = "cuda" if info.memory == _abi.NVFP4_MEMORY_CUDA else "host"
        ops = tuple(op for op, bit in _abi.OPS.items() if info.ops >> bit & 1)
        layouts = tuple(lay for lay, bit in _abi.SF_LAYOUTS.items() if info.sf_layouts >> bit & 1)
        build = nc.build_info()
        print(f"seed {args.seed}, {args.cases} cases per measurement, best of {args.repeat}; kernel {args.kernel} "
              f"({memory}) from {plugin}; C API {build['library']}")
        print(f"{'shape':>18} {'MACs':>6} {'C plugin cases/s':>17} {'Python cases/s':>15} {'overhead':>9}")
        for m, n, k, l in shapes:
            common = dict(cases=args.cases, seed=args.seed, shape=(m, n, k, l), case_dir=os.path.join(tmp, "cases"))
            best_c = best_py = float("inf")
            for _ in range(args.repeat):
                rc = nc.check_plugin(plugin, args.kernel, **common)
                rp = nc.check(python_kernel, op=ops, memory=memory, sf_layouts=layouts, flags=info.flags,
                              name=args.kernel, m_multiple=info.m_multiple, n_multiple=info.n_multiple,
                              k_multiple=info.k_multiple, min_sm=info.min_sm, **common)
                for r in (rc, rp):
                    if r.verdict != "pass":
                        raise SystemExit(f"the kernel did not pass: {r}")
                assert rc.cases == rp.cases == args.cases
                best_c, best_py = min(best_c, rc.seconds), min(best_py, rp.seconds)
            macs = m * n * k * l
            print(f"{f'{m}x{n}x{k}x{l}':>18} 2^{macs.bit_length() - 1:<4} {args.cases / best_c:>17.1f} "
                  f"{args.cases / best_py:>15.1f} {100 * (best_py / best_c - 1):>8.1f}%")


if __name__ == "__main__":
    main()
