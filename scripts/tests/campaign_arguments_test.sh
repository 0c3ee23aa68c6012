#!/usr/bin/env bash
# The campaign scripts refuse at once, exit 2, what their tasks or workers would refuse or
# misread: slurm-campaign.sh an unknown kernel, a seed of 2^64 or more, a missing plugin and a
# shard count beyond `--shard`'s limit (before any task runs); fuzz-campaign.sh an option where a
# value belongs, and seeds or lengths that shell arithmetic or libFuzzer would wrap. A valid local
# campaign still runs and passes.
# Usage: campaign_arguments_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-campaign-args.XXXXXX")
trap 'rm -rf "$work"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
failures=0
fail() { echo "FAIL: $*"; failures=$(( failures + 1 )); }

# expect_refused NAME SAYS COMMAND...: exit 2, and the message says SAYS.
expect_refused() {
  local name=$1 says=$2 out rc
  shift 2
  out=$("$@" 2>&1)
  rc=$?
  [[ $rc -eq 2 ]] || fail "$name: exit $rc, not 2: $out"
  [[ "$out" == *"$says"* ]] || fail "$name: the message does not say '$says': $out"
}

n=0
slurm() { n=$(( n + 1 )); bash "$here/../slurm-campaign.sh" submit --dir "$work/c$n" --local --tasks 2 --cases 4 \
            --build "$build" "$@"; }
expect_refused "unknown kernel" "every task would refuse" slurm --kernel no_such_kernel --seed 3
expect_refused "seed 2^64" "every task would refuse" slurm --kernel host_gemv_fp32 --seed 18446744073709551616
expect_refused "missing plugin" "every task would refuse" slurm --plugin "$work/absent.so" --seed 3
expect_refused "too many shards" "every task would refuse" slurm --kernel host_gemv_fp32 --tasks 1048577 --seed 3
expect_refused "a memory that is none" "--memory must be host or cuda" slurm --memory gpu --seed 3
for (( i = 1; i <= n; ++i )); do
  [[ -d "$work/c$i/rounds/1" ]] && fail "refused campaign $i started a round"
done

fuzz() { bash "$here/../fuzz-campaign.sh" --build "$work/no-build" --workers 1 "$@"; }
expect_refused "an option as the kernel" "--kernel needs a value, not the option --seconds" fuzz --kernel --seconds 5
expect_refused "a 20-digit seed" "--seed needs" fuzz --seed 99999999999999999999
expect_refused "minutes past 2^31 s" "--minutes needs" fuzz --minutes 9999999999999999
expect_refused "seconds past 2^31" "--seconds needs" fuzz --seconds 3000000000
expect_refused "a memory that is none" "--memory must be host or cuda" fuzz --memory gpu

# A valid campaign is not refused: it runs and passes.
n=$(( n + 1 ))
out=$(bash "$here/../slurm-campaign.sh" submit --dir "$work/c$n" --local --tasks 2 --cases 4 --build "$build" \
        --kernel host_gemv_fp32 --seed 3 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "a valid local campaign: exit $rc: $out"
[[ "$out" == *"verdict: PASS"* ]] || fail "a valid local campaign does not say PASS: $out"

# Kernels chosen by their memory, as gpu-check.sh chooses the CUDA ones: no list of names.
n=$(( n + 1 ))
out=$(bash "$here/../slurm-campaign.sh" submit --dir "$work/c$n" --local --tasks 2 --cases 4 --build "$build" \
        --memory host --kernel 'host_gemv*' --seed 3 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "a campaign of the host kernels: exit $rc: $out"
[[ "$out" == *"in host memory"* && "$out" == *"verdict: PASS"* ]] || fail "a campaign of the host kernels: $out"
grep -q -- "--memory host" "$work/c$n"/rounds/1/logs/task-0.log || fail "the tasks do not run with --memory host"

[[ $failures -eq 0 ]] || exit 1
echo "campaign arguments: all refused as they should be"
