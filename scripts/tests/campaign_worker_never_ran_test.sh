#!/usr/bin/env bash
# A fuzz campaign whose workers never run is not a pass: a fuzzer that exits non-zero without an
# artifact (a sanitizer refusing the address space, a library the machine lacks) is not a
# finding. slurm-campaign.sh: a FAILED task, and a round in which nothing was executed is
# INCOMPLETE (exit 3); fuzz-campaign.sh (one host): exit 2, the setup's failure. Stand-in
# fuzzers (shell scripts) play the workers, on this machine (--local): no Slurm is needed.
# Usage: campaign_worker_never_ran_test.sh NVFP4CHECK
set -uo pipefail
nvfp4check=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-never-ran.XXXXXX")
trap 'rm -rf "$work"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAIL: $*"; cat "$work"/*/summary.txt 2>/dev/null; exit 1; }

# build DIR BODY: a build folder whose kernel_fuzzer runs BODY (and names max_total_time, as
# only a libFuzzer build's does).
build() {
  mkdir -p "$1/fuzz" "$1/cli"
  ln -sf "$(cd "$(dirname "$nvfp4check")" && pwd)/$(basename "$nvfp4check")" "$1/cli/nvfp4check"
  printf '#!/bin/sh\n# -max_total_time\n%s\n' "$2" > "$1/fuzz/kernel_fuzzer"
  chmod +x "$1/fuzz/kernel_fuzzer"
}
campaign() {
  "$here/../slurm-campaign.sh" submit --dir "$work/$1" --mode fuzz --build "$work/$1-build" --tasks 2 \
    --kernel host_gemv_fp32 --seconds 3 --seed 7 --cpus-per-task 1 --local --wait > "$work/$1.log" 2>&1
}

# Exits 1 at start, no artifact: each task FAILED with the fuzzer's own words in its log.
build "$work/refused-build" 'echo "==1==ERROR: AddressSanitizer failed to allocate 0x1000 bytes of shadow" >&2; exit 1'
campaign refused
rc=$?
[[ $rc -eq 3 ]] || fail "refused workers: exit $rc, want 3 (INCOMPLETE)"
grep -q "verdict: INCOMPLETE, not a pass" "$work/refused/summary.txt" || fail "refused workers: not INCOMPLETE"
grep -qE "^0 .*FAILED" "$work/refused/summary.txt" || fail "refused workers: task 0 not FAILED"
grep -q "AddressSanitizer failed" "$work/refused/rounds/1/logs/task-0.log" || fail "the fuzzer's message is not in the task log"
grep -q "without an artifact: not a finding" "$work/refused/rounds/1/logs/task-0.log" || fail "the task log does not say why"

# Exits 0 having executed nothing: the tasks completed, but the round checked nothing.
build "$work/idle-build" 'exit 0'
campaign idle
rc=$?
[[ $rc -eq 3 ]] || fail "idle workers: exit $rc, want 3 (INCOMPLETE)"
grep -q "no executions in this round: nothing was checked" "$work/idle/summary.txt" || fail "idle workers: no reason given"
# The one-host campaign with the same two stand-ins.
one_host() {
  "$here/../fuzz-campaign.sh" --build "$work/$1-build" --kernel host_gemv_fp32 --workers 2 --seconds 3 --seed 7 \
    --no-seeds --out "$work/one-$1" > "$work/one-$1.log" 2>&1
}
one_host refused
rc=$?
[[ $rc -eq 2 ]] || fail "one host, refused workers: exit $rc, want 2"
grep -q "workers that stopped without running to the end: 2 of 2" "$work/one-refused/summary.txt" ||
  fail "one host, refused workers: not named in the summary"
grep -q "without an artifact: not a finding" "$work/one-refused/logs/worker-0.log" || fail "one host: the worker log does not say why"
one_host idle
rc=$?
[[ $rc -eq 2 ]] || fail "one host, idle workers: exit $rc, want 2"
grep -q "no executions: nothing was checked" "$work/one-idle/summary.txt" || fail "one host, idle workers: no reason given"
echo "campaign workers that never ran: 4 passed, 0 failed"
