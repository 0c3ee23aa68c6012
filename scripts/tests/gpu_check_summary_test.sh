#!/usr/bin/env bash
# scripts/gpu-check.sh ends with every step's outcome on one line each, so that a caller that
# keeps only the output's tail (a device call) still has the run's fresh seed and each verdict:
# here with stand-ins for nvidia-smi and the program, a run that passes and one that fails, each
# followed by a step that prints more lines than the tail keeps.
# Usage: gpu_check_summary_test.sh SOURCE_DIR
set -uo pipefail
src=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-gpucheck.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A copy of the script in a tree of its own: it works from its folder's parent, where a build
# carried from another machine (.carry) would otherwise be unpacked.
mkdir -p "$work/tree/scripts" "$work/tree/build/gpu/cli" "$work/bin"
cp "$src/scripts/gpu-check.sh" "$work/tree/scripts/"
cat > "$work/bin/nvidia-smi" <<'SH'
#!/bin/sh
case "$1" in -L) echo "GPU 0: stand-in (UUID: GPU-0)" ;; *) echo "0, stand-in, 0, 1 MiB" ;; esac
SH
# The program: `run` writes a report whose one kernel passes or fails (STAND_IN_VERDICT) and a
# table; `mutants` prints forty lines and its killed line.
cat > "$work/tree/build/gpu/cli/nvfp4check" <<'SH'
#!/bin/sh
cmd=$1; shift
report=""
while [ $# -gt 0 ]; do [ "$1" = --report ] && report=$2; shift; done
case "$cmd" in
  run)
    v=${STAND_IN_VERDICT:-pass}
    printf '{"kernels": [{"name": "stand_in", "verdict": "%s", "cases": 12}]}\n' "$v" > "$report"
    echo "kernel  cases verdict"; echo "stand_in  12  $v"
    [ "$v" = pass ] ;;
  mutants)
    echo "mutant  this suite"
    for x in $(seq 40); do echo "mut_$x  KILLED oracle @1"; done
    echo "killed: this suite 40/40"
    printf '{}\n' > "$report" ;;
esac
SH
chmod +x "$work/bin/nvidia-smi" "$work/tree/build/gpu/cli/nvfp4check"

for verdict in pass fail; do
  PATH="$work/bin:$PATH" OUT="$work/out-$verdict" NVFP4_RUN_SEED=4242 NVFP4_RUN_SECONDS=1 \
    NVFP4_MUTANTS_SEED=77 STAND_IN_VERDICT=$verdict bash "$work/tree/scripts/gpu-check.sh" run mutants \
    > "$work/$verdict.txt" 2>&1
  rc=$?
  want_rc=$([ $verdict = pass ] && echo 0 || echo 1)
  [ $rc -eq "$want_rc" ] || fail "$verdict: exit $rc, want $want_rc: $(tail -5 "$work/$verdict.txt")"
  tail -n 6 "$work/$verdict.txt" > "$work/$verdict-tail.txt"
  grep -qx "run: seed 4242, 1 s: 1 $verdict of 1 kernels, 12 cases; exit $want_rc" "$work/$verdict-tail.txt" ||
    fail "$verdict: the tail has no run line with the seed: $(cat "$work/$verdict-tail.txt")"
  grep -q "^mutants: seed 77, as declared: killed: this suite 40/40" "$work/$verdict-tail.txt" ||
    fail "$verdict: the tail has no mutants line: $(cat "$work/$verdict-tail.txt")"
  grep -qx "gpu-check.sh run mutants: exit $want_rc" "$work/$verdict-tail.txt" ||
    fail "$verdict: the last line: $(tail -1 "$work/$verdict.txt")"
done
echo "ok: gpu-check.sh's last lines name the run's seed and every step's outcome"
