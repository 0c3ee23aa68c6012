#!/usr/bin/env bash
# Installs the nvfp4check Python package (python/) with pip, offline: no index, no build isolation
# (setuptools and wheel come from the interpreter's environment).
#
#   scripts/python-install.sh [--venv DIR] [--system] [--python PYTHON]
#
#   --venv DIR   (default: .venv) a virtual environment with --system-site-packages, so it sees
#                Debian's python3-numpy, -pytest, -setuptools and -wheel: Debian's interpreter is
#                "externally managed" (PEP 668) and pip may not install into it directly.
#   --system     into PYTHON's own site-packages instead (e.g. the GPU machine's Python with torch,
#                which no virtual environment needs); adds --break-system-packages where PYTHON is
#                externally managed.
#   --python P   the interpreter (default /usr/bin/python3 where it exists, else python3).
#
# The C API library packaged is $NVFP4CHECK_LIBRARY, else the newest build/*/python/
# libnvfp4check_capi.so, else one setup.py builds with cmake (python/setup.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=/usr/bin/python3
[ -x "$python" ] || python=python3
venv=.venv
mode=venv
while [[ $# -gt 0 ]]; do
  case "$1" in
    --venv) venv="$2"; mode=venv; shift 2 ;;
    --system) mode=system; shift ;;
    --python) python="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "python-install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
pip_args=(install --no-build-isolation --no-index ./python)
if [ "$mode" = venv ]; then
  "$python" -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip "${pip_args[@]}"
  echo "python-install: installed into $venv (activate with: source $venv/bin/activate)"
  "$venv/bin/python" -c 'import nvfp4check as nc; print("nvfp4check", nc.__version__, "library", nc.build_info()["library"])'
else
  managed=$("$python" -c 'import os, sysconfig; print(os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))')
  [ "$managed" = True ] && pip_args+=(--break-system-packages)
  "$python" -m pip "${pip_args[@]}"
  (cd /tmp && "$python" -c 'import nvfp4check as nc; print("nvfp4check", nc.__version__, "library", nc.build_info()["library"])')
fi
