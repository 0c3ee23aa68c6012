#!/bin/sh
# `pip install --no-build-isolation` of the package into a fresh virtual environment that sees the
# system's numpy, pytest, setuptools and wheel (Debian's python3-* packages; no index is used), from
# a copy of python/ so the source tree stays clean; then a check through the installed package, its
# bundled library (NVFP4CHECK_LIBRARY is unset by then) and its pytest plugin.
#   pip_install_test.sh PYTHON_SOURCE_DIR WORK_DIR    (NVFP4CHECK_LIBRARY: the library to package)
set -eu
src=$1
work=$2
python=${NVFP4_PYTHON:-${NVFP4_PYTHON_DEFAULT:-/usr/bin/python3}}
rm -rf "$work"
mkdir -p "$work/pkg"
cp -r "$src/nvfp4check" "$src/setup.py" "$src/pyproject.toml" "$src/README.md" "$work/pkg/"
rm -rf "$work/pkg/nvfp4check/_lib" "$work/pkg/nvfp4check/__pycache__"
if ! "$python" -m venv --system-site-packages "$work/venv"; then
  echo "pip install test: skipped: $python cannot make a virtual environment (Debian: apt-get install python3-venv)"
  exit 77
fi
env -u PYTHONPATH "$work/venv/bin/python" -m pip install --no-build-isolation --no-index "$work/pkg"
cd "$work"
env -u NVFP4CHECK_LIBRARY -u PYTHONPATH "$work/venv/bin/python" - "$src/tests" "$work" <<'PY'
import os
import sys

sys.path.insert(0, sys.argv[1])
import numpy_kernels as K
import nvfp4check as nc

info = nc.build_info()
print("library:", info["library"])
assert info["library"].startswith(sys.argv[2] + "/venv/"), "the installed package must use its own library"
r = nc.check(K.honest_gemm, op="gemm", memory="host", cases=10, seed=1, case_dir=sys.argv[2] + "/cases")
print(r)
assert r.verdict == "pass", r
r = nc.check(K.k_tail_bug, op=("gemv", "gemm"), memory="host", cases=50, seed=1, case_dir=sys.argv[2] + "/cases")
assert r.verdict == "fail" and r.failure.check == "oracle", r
PY
env -u PYTHONPATH "$work/venv/bin/python" -m pytest -p no:cacheprovider --help | grep -q -- "--nvfp4check-seconds"
echo "pip install test: passed"
