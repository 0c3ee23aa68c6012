#!/usr/bin/env bash
# Builds nvfp4check from scratch and runs every test (the README's test command, and CI's):
# install the Debian packages, configure and build the `default` preset, run ctest.
# GPU tests skip themselves on a machine without a CUDA device.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
# OpenMP's spinning workers burn the second core under ctest -j2; passive waiting costs nothing
# measurable in these tests and keeps parallel tests from starving each other.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# Last, so that ctest's summary ("100% tests passed, 0 tests failed out of N") ends the log.
exec ctest --preset default -j2 --output-on-failure
