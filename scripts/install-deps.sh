#!/usr/bin/env bash
# Installs the Debian packages nvfp4check builds and tests with. Idempotent; run as root
# (or with sudo) on a fresh Debian 12 machine. CUDA's nvcc is expected on the machine already.
set -euo pipefail
packages=(
  cmake ninja-build g++ clang-14 libclang-rt-14-dev libomp-14-dev
  googletest libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libpng-dev zip unzip
  # The Python package (python/) and its pytest tier, with Debian's interpreter /usr/bin/python3.
  python3 python3-numpy python3-pytest python3-setuptools python3-pip python3-wheel python3-venv
  # A JUnit consumer's parser, for the test of `--junit` (what CI dashboards read).
  python3-junitparser
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#packages[@]} packages present"
fi
# The `slurm` test's private cluster (scripts/slurm-private.sh): Debian's slurm-wlm and munge,
# installed without starting the system's daemons. Optional: without them that test skips.
if ! dpkg-query -W -f='${Status}' slurm-wlm 2>/dev/null | grep -q 'install ok installed' ||
   ! dpkg-query -W -f='${Status}' munge 2>/dev/null | grep -q 'install ok installed'; then
  echo "install-deps: installing slurm-wlm munge (the slurm test's private cluster)"
  bash "$(dirname "${BASH_SOURCE[0]}")/slurm-private.sh" install ||
    echo "install-deps: warning: slurm-wlm and munge not installed; the slurm test will skip"
fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: nvcc is at /usr/local/cuda/bin (not on PATH); the build finds it there"
fi
