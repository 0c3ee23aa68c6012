"""A submission that compiles when imported (load_inline at module level, as GPU MODE's seed GEMM
v1 does) and fails: ninja's output on stderr, the compiler's command line before its error, and
the RuntimeError torch raises. Expected: no kernel process starts, and the failure's first lines
carry the compiler's first error line (python/tests/test_warmup.py)."""
import sys

_NVCC = ("/usr/local/cuda/bin/nvcc --generate-dependencies-with-compile --dependency-output cuda.cuda.o.d "
         "-DTORCH_EXTENSION_NAME=seed_gemm_v1 -DTORCH_API_INCLUDE_EXTENSION_H " + " ".join(
             f"-isystem /usr/lib/python3/dist-packages/torch/include/part{x}" for x in range(40)) +
         " -c /root/.cache/torch_extensions/py311_cu128/seed_gemm_v1/cuda.cu -o cuda.cuda.o")
_OUTPUT = (
    "[1/3] c++ -MMD -MF main.o.d -c /root/.cache/torch_extensions/py311_cu128/seed_gemm_v1/main.cpp -o main.o\n"
    "[2/3] " + _NVCC + "\n"
    "FAILED: cuda.cuda.o\n" + _NVCC + "\n"
    "/root/.cache/torch_extensions/py311_cu128/seed_gemm_v1/cuda.cu:7:10: fatal error: cutlass/cutlass.h: "
    "No such file or directory\n"
    "    7 | #include <cutlass/cutlass.h>\n"
    "      |          ^~~~~~~~~~~~~~~~~~~\n"
    "compilation terminated.\n"
    "ninja: build stopped: subcommand failed.\n")
sys.stderr.write(_OUTPUT)  # torch's verbose build prints it as it goes
raise RuntimeError("Error building extension 'seed_gemm_v1': " + _OUTPUT)


def custom_kernel(data):  # never reached
    raise AssertionError("imported")
