#!/usr/bin/env bash
# `run --memory`, `--op`, glob patterns in `--kernel` and `--exclude` select the kernels a run
# checks, so that scripts name no kernels by hand: the kernels expected are read from `list`, so a
# new kernel is expected without editing this test.
# Usage: kernel_selection_test.sh NVFP4CHECK
set -uo pipefail
program=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$dir/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAILED: $*"; exit 1; }
# run_names CODE ARG...: a one-case run that must exit CODE; prints the report's kernel names.
run_names() {
  local code=$1
  shift
  rm -f "$dir/r.json"
  "$program" run --seed 1 --cases 1 --case-dir "$dir/cases" --report "$dir/r.json" "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  [ "$rc" = "$code" ] || { cat "$dir/out" "$dir/err" >&2; fail "run $*: exit $rc, expected $code"; }
  [ "$code" != 0 ] || python3 -c 'import json,sys; print(" ".join(k["name"] for k in json.load(open(sys.argv[1]))["kernels"]))' "$dir/r.json"
}
# listed AWK_CONDITION: the built-in kernels' names whose `list` row meets it ($2 memory, $3 ops).
listed() { "$program" list | awk "NR > 1 && /^[a-z]/ && ($1) {print \$1}" | paste -sd' ' -; }

want=$(listed '$2 == "cuda"')
[ -n "$want" ] || fail "list shows no CUDA kernel"
got=$(run_names 0 --memory cuda)
[ "$got" = "$want" ] || fail "--memory cuda checked [$got], expected [$want]"

want=$(listed '$2 == "host" && $3 ~ /(^|,)gemv(,|$)/')
got=$(run_names 0 --memory host --op gemv)
[ "$got" = "$want" ] || fail "--memory host --op gemv checked [$got], expected [$want]"

got=$(run_names 0 --kernel 'host_grouped_gemm_fp32*' --exclude '*_packed')
[ "$got" = "host_grouped_gemm_fp32" ] || fail "a pattern with an exclusion checked [$got]"

run_names 2 --kernel host_gemv_fp32 --memory cuda
grep -q 'kernel "host_gemv_fp32" runs in host memory' "$dir/err" || fail "a named host kernel under --memory cuda: $(cat "$dir/err")"
run_names 2 --kernel 'no_such_*'
grep -q 'no kernel matches "no_such_\*"' "$dir/err" || fail "a pattern matching nothing: $(cat "$dir/err")"
echo ok
