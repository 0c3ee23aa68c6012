#!/usr/bin/env bash
# Slurm carried to a machine without its packages (scripts/slurm-bundle.sh): the private Slurm
# starts from the bundle alone (the system's daemons hidden from PATH), its daemons load the
# bundle's libslurmfull, and a job runs on a fake GPU without seeing the bundle's libraries.
# Exit 77 (ctest's skip) where Slurm is not installed here to be bundled, or cannot start.
# Usage: slurm_bundle_test.sh
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
scripts="$here/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-slurm-bundle.XXXXXX")
cleanup() { NVFP4_SLURM_BUNDLE="$work/bundle" bash "$scripts/slurm-private.sh" stop "$work/slurm"; rm -rf "$work"; }
trap cleanup EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; tail -5 "$work"/slurm/log/*.out 2>/dev/null; exit 1; }

[[ "$(id -u)" -eq 0 ]] || skip "not root: the private slurmd runs jobs as root"
bash "$scripts/slurm-bundle.sh" "$work/bundle"
rc=$?
[[ $rc -eq 77 ]] && skip "Slurm and munge are not installed here to be bundled"
[[ $rc -eq 0 ]] || fail "slurm-bundle.sh exited $rc"

# /usr/sbin holds the installed daemons: without it only the bundle's can start.
export PATH=/usr/bin:/bin
command -v slurmctld >/dev/null && fail "an installed slurmctld is still on PATH ($(command -v slurmctld))"
NVFP4_SLURM_BUNDLE="$work/bundle" bash "$scripts/slurm-private.sh" start "$work/slurm" --gpus 1 --cpus 2
rc=$?
[[ $rc -eq 77 ]] && skip "the private Slurm did not start from the bundle (see above)"
[[ $rc -eq 0 ]] || fail "slurm-private.sh start exited $rc"
source "$work/slurm/env"
[[ "$(command -v sbatch)" == "$work/bundle/bin/sbatch" ]] || fail "sbatch is not the bundle's: $(command -v sbatch)"
for d in slurmctld slurmd; do
  grep -q "$work/bundle/lib/libslurmfull.so" "/proc/$(cat "$work/slurm/run/$d.bgpid")/maps" ||
    fail "$d did not load the bundle's libslurmfull.so"
done

out="$work/job.out"
sbatch --gres=gpu:1 -o "$out" --wrap "echo gpu=\$CUDA_VISIBLE_DEVICES; grep -c '$work/bundle' /proc/self/maps; echo ld=\${LD_LIBRARY_PATH:-none}" >/dev/null ||
  fail "sbatch refused the job"
for _ in $(seq 100); do grep -q "^ld=" "$out" 2>/dev/null && break; sleep 0.2; done
cat "$out"
grep -q "^gpu=0$" "$out" || fail "the job did not get its GPU"
[[ "$(sed -n 2p "$out")" == 0 ]] || fail "the job's process maps the bundle's libraries"
# sbatch passes the submitter's environment on: the job's library path must be exactly that.
grep -qxF "ld=${LD_LIBRARY_PATH:-none}" "$out" || fail "the job's LD_LIBRARY_PATH is not the submitter's"
echo "slurm bundle: 1 passed, 0 failed"
