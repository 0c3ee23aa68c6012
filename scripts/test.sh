#!/usr/bin/env bash
# Builds nvfp4check from scratch and runs every test (the README's test command, and CI's):
# install the Debian packages, configure and build the `default` preset, run ctest; then build
# the `fuzz` preset and run its fuzz tier (corpus replay under ASan/UBSan, smoke runs).
# GPU tests skip themselves on a machine without a CUDA device.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
# OpenMP's spinning workers burn the second core under ctest -j2; passive waiting costs nothing
# measurable in these tests and keeps parallel tests from starving each other.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# Every test cleans up after itself: the tests get a temporary folder of their own, and anything
# a passing run leaves in it fails the run (left in /tmp, such leftovers pile up run after run).
tests_tmp=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-tests.XXXXXX")
trap 'rm -rf "$tests_tmp"' EXIT
nothing_left() {
  local left
  left=$(cd "$tests_tmp" && find . -mindepth 1 -maxdepth 2 | sort | head -20)
  [ -z "$left" ] && return 0
  echo "test.sh: the tests passed but left these in their temporary folder $tests_tmp:" >&2
  echo "$left" >&2
  return 1
}
TMPDIR=$tests_tmp ctest --preset default -j2 --output-on-failure
nothing_left
# The libFuzzer tier (clang 14, ASan + UBSan): every corpus file replayed by the instrumented
# targets and a 20-second smoke run of each. NVFP4_SKIP_FUZZ=1 leaves it out of a local run.
if [ "${NVFP4_SKIP_FUZZ:-0}" = 1 ]; then
  echo "test.sh: NVFP4_SKIP_FUZZ=1: the libFuzzer tier is left out"
  exit 0
fi
cmake --preset fuzz
cmake --build --preset fuzz -j "$(nproc)"
# Last, so that ctest's summary ("100% tests passed, 0 tests failed out of N") ends the log.
TMPDIR=$tests_tmp ctest --preset fuzz -L fuzz -j2 --output-on-failure
nothing_left
