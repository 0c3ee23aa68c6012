#!/usr/bin/env bash
# A crash artifact of a campaign becomes case files that are replayed with the kernel and plugin
# the kernel fuzzer recorded (scripts/campaign-lib.sh), never a kernel name guessed from the case
# file's name (<kernel>-<op>-<shape>-<hash>.case). Runs with any build: the replay-only
# kernel_fuzzer exports as libFuzzer's does.
# Usage: campaign_replay_test.sh NVFP4CHECK KERNEL_FUZZER BROKEN_PLUGIN
set -uo pipefail
nvfp4check=$1 fuzzer=$2 plugin=$3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../campaign-lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-campaign-replay.XXXXXX")
trap 'rm -rf "$work"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAIL: $*"; [[ -f "$work/summary.txt" ]] && cat "$work/summary.txt"; exit 1; }

# A failing case of the planted k-tail bug, as a worker's crash artifact (text inputs are cases).
"$nvfp4check" run --plugin "$plugin" --kernel broken_k_tail_host --cases 1 --seed 2 --jobs 1 \
  --case-dir "$work/run-cases" > "$work/run.log" 2>&1
[[ $? -eq 1 ]] || fail "the planted bug was not found by run (see $work/run.log)"
mkdir -p "$work/crashes"
cp "$(ls "$work"/run-cases/broken_k_tail_host-*.case | head -1)" "$work/crashes/task-1-crash-0123456789abcdef"

export NVFP4_FUZZ_PLUGIN="$plugin" NVFP4_FUZZ_KERNEL=broken_k_tail_host,host_gemv_fp32
campaign_env=()
: > "$work/summary.txt"
campaign_replay_crashes kernel "$fuzzer" "$nvfp4check" "$work/crashes" "$work/cases" "$work/summary.txt"
cat "$work/summary.txt"
[[ $campaign_failures -eq 1 ]] || fail "expected 1 crash artifact, counted $campaign_failures"
[[ $campaign_reproduced -eq 1 ]] || fail "expected 1 reproduced case, got $campaign_reproduced"
grep -q "task-1-crash-0123456789abcdef (found by task-1)" "$work/summary.txt" || fail "the task that found it is not named"
grep -qE -- "replay .*broken_k_tail_host-[^ ]*\.case --kernel broken_k_tail_host --plugin $plugin  -> reproduced" \
  "$work/summary.txt" || fail "the broken kernel's case is not replayed with its kernel and plugin"
grep -qE -- "--kernel host_gemv_fp32  -> did NOT reproduce" "$work/summary.txt" ||
  fail "the built-in kernel's case is not replayed as built-in (no --plugin)"
echo "campaign replay: 1 passed, 0 failed"
