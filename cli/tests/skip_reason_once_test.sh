#!/usr/bin/env bash
# A skip reason several kernels share is given once, naming the kernels it applies to: on a
# machine without a GPU the same long device error used to be printed twice per CUDA kernel.
# Three grouped/dual kernels under `--op gemv` share "does not support gemv", wherever it runs.
# Usage: skip_reason_once_test.sh NVFP4CHECK
set -uo pipefail
program=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$dir/tmp"
mkdir -p "$TMPDIR"
"$program" run --seed 1 --cases 1 --op gemv --kernel host_grouped_gemm_fp32 --kernel host_dual_gemm_fp32 \
  --kernel host_grouped_gemm_fp32_packed --case-dir "$dir/cases" >"$dir/out" 2>"$dir/err"
rc=$?
cat "$dir/out" "$dir/err"
[ "$rc" = 0 ] || { echo "FAILED: exit $rc, expected 0"; exit 1; }
# Once in the table (stdout), once in the progress lines (stderr).
for stream in out err; do
  n=$(grep -o "does not support gemv" "$dir/$stream" | wc -l)
  [ "$n" = 1 ] || { echo "FAILED: the reason is given $n times on std$stream, expected once"; exit 1; }
done
grep -qx "skipped 3 kernels (host_grouped_gemm_fp32, host_dual_gemm_fp32, host_grouped_gemm_fp32_packed): does not support gemv" \
  "$dir/out" || { echo "FAILED: no line naming the three kernels and their reason"; exit 1; }
grep -q "host_dual_gemm_fp32: skipped, 0 cases in [0-9.]* s (as host_grouped_gemm_fp32)" "$dir/err" ||
  { echo "FAILED: the second kernel's progress line does not refer to the first"; exit 1; }
echo "ok"
