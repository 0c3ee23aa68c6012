"""A kernel whose first call fails to compile, as torch's load_inline reports it: a RuntimeError
"Error building extension" carrying ninja's output. Expected: fail, check "exception", the text
led by the compiler's error line and the file (python/tests/test_warmup.py)."""


def custom_kernel(p):
    raise RuntimeError(
        "Error building extension 'nvfp4_gemv_v1': [1/3] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=nvfp4_gemv_v1 "
        "-c /root/.cache/torch_extensions/py311_cu128/nvfp4_gemv_v1/main.cpp -o main.o\n"
        "[2/3] /usr/local/cuda/bin/nvcc -c /root/.cache/torch_extensions/py311_cu128/nvfp4_gemv_v1/cuda.cu -o cuda.cuda.o\n"
        "FAILED: cuda.cuda.o\n"
        "/root/.cache/torch_extensions/py311_cu128/nvfp4_gemv_v1/cuda.cu:3:10: fatal error: cutlass/cutlass.h: "
        "No such file or directory\n"
        "    3 | #include <cutlass/cutlass.h>\n"
        "compilation terminated.\n"
        "ninja: build stopped: subcommand failed.\n")
