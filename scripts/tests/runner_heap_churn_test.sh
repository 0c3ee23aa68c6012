#!/usr/bin/env bash
# The runner keeps the memory its cases free: glibc's default gives the top of the heap back to
# the kernel whenever 128 KiB lie free and takes it again for the next case, and each give-back
# interrupts every core running one of the runner's threads (40% of small host cases' throughput
# on 2 cores). Counted, not timed: the runner's brk calls over 200 small cases, which were about 6
# a case with the default and are a few dozen in all without the churn. Skipped (77) without strace.
# Usage: runner_heap_churn_test.sh NVFP4CHECK
set -uo pipefail
program=$1
command -v strace >/dev/null 2>&1 || { echo "no strace: skipped"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-heap.XXXXXX")
trap 'rm -rf "$work"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
strace -f -qq -e trace=brk -o "$work/trace" "$program" run --kernel host_gemv_fp32 --shape 128x1x512 --cases 200 \
  --jobs 1 --seed 1 --case-dir "$work/cases" --report "$work/r.json" >"$work/log" 2>&1
rc=$?
if [ "$rc" != 0 ]; then
  grep -q "ptrace\|Operation not permitted" "$work/log" && { echo "strace not permitted: skipped"; exit 77; }
  cat "$work/log"; echo "FAIL: run exited $rc"; exit 1
fi
# The runner is the first process traced (it starts itself once more, keeping its pid).
runner=$(head -1 "$work/trace" | cut -d' ' -f1)
n=$(awk -v p="$runner" '$1 == p && /brk\(/' "$work/trace" | wc -l)
echo "the runner's brk calls over 200 cases: $n"
[ "$n" -le 200 ] || { echo "FAIL: the runner's heap shrinks and grows with its cases ($n brk calls for 200)"; exit 1; }
