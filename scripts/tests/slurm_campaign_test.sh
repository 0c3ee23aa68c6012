#!/usr/bin/env bash
# The Slurm campaign against a real Slurm: Debian's slurmctld, slurmd and munge started here in a
# private folder (scripts/slurm-private.sh: one node, select/cons_tres, two fake GPUs as mknod
# character devices in gres.conf), stopped when the test ends. Checks that
#   1. a 2-task array with --gres=gpu:1 gives each task its own device (CUDA_VISIBLE_DEVICES,
#      SLURM_JOB_GPUS) while both run, runs host kernels, finds the planted bug (a host kernel that
#      drops the k tail, mutation/wrong/broken_k_tail.h) and replays it with its kernel and plugin;
#   2. a task that Slurm cancels (scancel) is reported as CANCELLED, the campaign as incomplete
#      (exit 3), never a pass; resubmitting the folder runs only that shard and then passes.
# With `fuzz` (a libFuzzer build): 2 kernel-fuzzer workers over one corpus against the planted bug
# instead: the crash becomes a case file replayed with its kernel and plugin, exec/s per task, and
# a resubmitted round starts from the merged corpus.
# Exit 77 (ctest's skip) with the reason where Slurm cannot be installed or started.
# Usage: slurm_campaign_test.sh BUILD_DIR BROKEN_PLUGIN [fuzz]
set -uo pipefail
build=$(cd "$1" && pwd) plugin=$2 mode=${3:-run}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
scripts="$here/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-slurm-test.XXXXXX")
cleanup() { bash "$scripts/slurm-private.sh" stop "$work/slurm"; rm -rf "$work"; }
trap cleanup EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; for f in "$work"/c*/summary.txt; do [[ -f "$f" ]] && { echo "== $f"; cat "$f"; }; done; exit 1; }

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  [[ "$(id -u)" -eq 0 ]] || skip "Slurm and munge are not installed and this is not root (scripts/install-deps.sh installs them)"
  bash "$scripts/slurm-private.sh" install || skip "the Debian packages slurm-wlm and munge could not be installed"
fi
bash "$scripts/slurm-private.sh" start "$work/slurm" --gpus 2 --cpus 2
rc=$?
[[ $rc -eq 77 ]] && skip "the private Slurm did not start (see above)"
[[ $rc -eq 0 ]] || fail "slurm-private.sh start exited $rc"
source "$work/slurm/env"

# Waits for a round's exit-status (the finishing job's last act), at most $2 seconds.
wait_round() {
  local round=$1 limit=$2 t
  for (( t = 0; t < limit * 5; ++t )); do
    [[ -f "$round/exit-status" ]] && return 0
    sleep 0.2
  done
  squeue; fail "no exit-status in $round after $limit s"
}

if [[ $mode == fuzz ]]; then
  "$scripts/slurm-campaign.sh" submit --dir "$work/cf" --mode fuzz --tasks 2 --build "$build" --plugin "$plugin" \
    --kernel broken_k_tail_host --seconds 15 --seed 1130 --cpus-per-task 1 --wait > "$work/fuzz1.log" 2>&1
  rc=$?
  cat "$work/fuzz1.log"
  [[ $rc -eq 1 ]] || fail "the fuzz workers must find the planted bug (exit 1, got $rc)"
  summary="$work/cf/rounds/1/summary.txt"
  for i in 0 1; do
    grep -qE "^$i +[0-9]+_$i +COMPLETED .* [0-9]+ execs +[0-9.]+/s" "$summary" || fail "task $i: COMPLETED with its exec/s"
  done
  grep -qE "^executions: [1-9][0-9]* in all; coverage of the merged corpus: cov: [0-9]+ ft: [0-9]+" "$summary" ||
    fail "total executions and coverage"
  grep -qE "task-[01]-crash-[0-9a-f]+ \(found by task-[01]\)" "$summary" || fail "the crash and the task that found it"
  grep -qE -- "--kernel broken_k_tail_host --plugin $plugin  -> reproduced" "$summary" ||
    fail "the crash's case file replayed with its kernel and plugin reproduces"
  merged=$(find "$work/cf/corpus" -type f | wc -l)
  [[ $merged -gt 0 ]] || fail "no merged corpus in $work/cf/corpus"
  # Round 2 starts from the merged corpus of round 1.
  "$scripts/slurm-campaign.sh" submit --dir "$work/cf" --wait > "$work/fuzz2.log" 2>&1
  cat "$work/fuzz2.log"
  grep -qE "INFO: +seed corpus: files: ([0-9]+)" "$work/cf/rounds/2/logs/task-0.log" || fail "round 2 read no corpus"
  files=$(grep -oE "INFO: +seed corpus: files: [0-9]+" "$work/cf/rounds/2/logs/task-0.log" | head -1 | grep -oE "[0-9]+$")
  [[ $files -ge $merged ]] || fail "round 2 read $files inputs, fewer than round 1's merged corpus of $merged"
  echo "slurm fuzz campaign: 1 passed, 0 failed"
  exit 0
fi

# ---- 1. GPUs per task, host kernels, the planted bug found and replayed. ----
# Held, then released: both tasks start in one scheduling pass, so they hold their GPUs at once.
"$scripts/slurm-campaign.sh" submit --dir "$work/c1" --mode run --tasks 2 --build "$build" --plugin "$plugin" \
  --kernel host_gemv_fp32 --kernel broken_k_tail_host --cases 60 --seed 5 --jobs 1 \
  --gpus-per-task 1 --cpus-per-task 1 --sbatch-arg=--hold || fail "submit refused"
round="$work/c1/rounds/1"
scontrol release "$(cat "$round/array-job")"
wait_round "$round" 120
cat "$round/summary.txt"
[[ "$(cat "$round/exit-status")" == 1 ]] || fail "the planted bug must make the campaign exit 1"
declare -A seen=()
for i in 0 1; do
  dev=$(sed -n 's/^cuda_visible_devices=//p' "$round/tasks/$i.start")
  gpus=$(sed -n 's/^slurm_job_gpus=//p' "$round/tasks/$i.start")
  [[ "$dev" =~ ^[01]$ ]] || fail "task $i saw CUDA_VISIBLE_DEVICES='$dev', not one of the node's two GPUs"
  [[ "$dev" == "$gpus" ]] || fail "task $i: CUDA_VISIBLE_DEVICES=$dev but SLURM_JOB_GPUS=$gpus"
  [[ -z "${seen[$dev]:-}" ]] || fail "tasks ${seen[$dev]} and $i were both given GPU $dev"
  seen[$dev]=$i
done
grep -qE "^0 .* COMPLETED +[01] " "$round/summary.txt" && grep -qE "^1 .* COMPLETED +[01] " "$round/summary.txt" ||
  fail "both tasks COMPLETED with their device in the table"
grep -qE "host_gemv_fp32 +60 +pass" "$round/summary.txt" || fail "the host kernel's 60 cases pass in the merged report"
first=$(grep -oE "FAIL broken_k_tail_host: first failure at case [0-9]+ \(shard [01]/2\)" "$round/summary.txt") ||
  fail "the merged report names the planted bug's first failure and its shard"
index=$(grep -oE "case [0-9]+" <<< "$first" | grep -oE "[0-9]+")
grep -qE -- "broken_k_tail_host: case $index, check \"[a-z-]+\", found by shard $(( index % 2 ))/2 \(task $(( index % 2 ))\)" \
  "$round/summary.txt" || fail "the shard that found it is named"
grep -qE -- "replay [^ ]+\.case --kernel broken_k_tail_host --plugin $plugin  -> reproduced" "$round/summary.txt" ||
  fail "the failure is replayed with its kernel and plugin, and reproduces"

# ---- 2. A cancelled task is CANCELLED, never a pass; resubmitting finishes the campaign. ----
"$scripts/slurm-campaign.sh" submit --dir "$work/c2" --tasks 2 --build "$build" --kernel host_gemv_fp32 \
  --cases 2000 --seed 7 --jobs 1 --sbatch-arg=--hold || fail "submit refused"
round="$work/c2/rounds/1"
array=$(cat "$round/array-job")
scontrol release "$array"
for (( t = 0; t < 300; ++t )); do [[ -f "$round/tasks/1.start" ]] && break; sleep 0.1; done
[[ -f "$round/tasks/1.start" ]] || fail "task 1 never started"
scancel "${array}_1"
wait_round "$round" 120
cat "$round/summary.txt"
[[ -f "$round/tasks/1.end" ]] && fail "task 1 ended by itself before scancel reached it: make its shard longer"
[[ "$(cat "$round/exit-status")" == 3 ]] || fail "a cancelled task must make the campaign incomplete (exit 3)"
grep -qE "^1 +${array}_1 +CANCELLED" "$round/summary.txt" || fail "task 1 is reported as CANCELLED"
grep -q "NOT MERGED: shard(s) 1 of 2" "$round/summary.txt" || fail "the merge says which shard is missing"
grep -q "verdict: INCOMPLETE, not a pass: task 1 CANCELLED" "$round/summary.txt" || fail "the verdict is not a pass"
grep -q "PASS" "$round/summary.txt" && fail "a campaign with a cancelled task says PASS"

"$scripts/slurm-campaign.sh" submit --dir "$work/c2" --wait > "$work/resubmit.log" 2>&1
rc=$?
cat "$work/resubmit.log"
[[ $rc -eq 0 ]] || fail "the resubmitted campaign must pass (exit $rc)"
[[ "$(cat "$work/c2/rounds/2/task-ids")" == 1 ]] || fail "the resubmit runs only the missing shard 1"
grep -qE "host_gemv_fp32 +2000 +pass" "$work/c2/summary.txt" || fail "the merged report covers all 2000 cases"
echo "slurm campaign: 2 passed, 0 failed"
