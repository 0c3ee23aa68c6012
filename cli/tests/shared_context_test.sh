#!/usr/bin/env bash
# A CUDA kernel's lanes in one MPS context (`run --shared-context mps`), on a GPU:
# - an honest kernel passes there as it does with a context per lane, its report says "mps", and
#   the run leaves no MPS process or directory behind;
# - a kernel that faults (an illegal address) on some cases fails at the same case, with the same
#   check, as with a context per lane (`--shared-context off`), although under MPS its fault
#   reached every lane: the suite reran the lost cases alone, and its failure says so where the
#   failing case was one of them.
# Skipped (77) with the reason where there is no CUDA device or no nvidia-cuda-mps-control.
# Usage: shared_context_test.sh NVFP4CHECK BROKEN_K_TAIL_PLUGIN
set -euo pipefail
nvfp4check=$1
plugin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# ctest's resource spec hands this test one GPU: "id:N,slots:1".
if [[ -n "${CTEST_RESOURCE_GROUP_0_GPUS:-}" ]]; then
  id=${CTEST_RESOURCE_GROUP_0_GPUS#id:}
  export CUDA_VISIBLE_DEVICES=${id%%,*}
fi
if ! command -v nvidia-cuda-mps-control >/dev/null; then
  echo "SKIP: nvidia-cuda-mps-control is not on PATH"
  exit 77
fi
"$nvfp4check" run --kernel gemv_naive --cases 1 --seed 1 --jobs 1 --case-dir "$work/probe" \
  --report "$work/probe.json" >/dev/null 2>&1 || true
if ! python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["kernels"][0]["verdict"] != "pass")' \
  "$work/probe.json" 2>/dev/null; then
  echo "SKIP: no CUDA device where gemv_naive can run"
  exit 77
fi
mkdir -p "$work/tmp"
export TMPDIR=$work/tmp
field() {  # field REPORT PYTHON-EXPRESSION-ON-k (the first kernel)
  python3 -c "import json,sys; k=json.load(open(sys.argv[1]))['kernels'][0]; print($2)" "$1"
}
mps_left() {  # MPS processes started for a directory under $work
  for f in /proc/[0-9]*/environ; do
    p=${f#/proc/}; p=${p%/environ}
    case "$(cat "/proc/$p/comm" 2>/dev/null)" in nvidia-cuda-mps*) ;; *) continue ;; esac
    tr '\0' '\n' < "$f" 2>/dev/null | grep -q "^CUDA_MPS_PIPE_DIRECTORY=$work/" && echo "$p"
  done
  true
}

echo "== honest gemv_naive, 4 lanes in one MPS context"
"$nvfp4check" run --kernel gemv_naive --cases 300 --seed 3 --jobs 4 --shared-context mps \
  --case-dir "$work/cases" --report "$work/honest.json" > "$work/honest.log" 2>&1 || {
  cat "$work/honest.log"; echo "FAIL: the honest kernel failed under MPS"; exit 1; }
[[ "$(field "$work/honest.json" 'k["verdict"], k["cases"], k["context"], k.get("context_reruns", 0)')" == \
   "pass 300 mps 0" ]] || { cat "$work/honest.json"; echo "FAIL: honest report"; exit 1; }
left=$(mps_left)
[[ -z "$left" ]] || { echo "FAIL: MPS processes left behind: $left"; exit 1; }
[[ -z "$(ls -A "$work/tmp")" ]] || { ls -la "$work/tmp"; echo "FAIL: the MPS directory was left behind"; exit 1; }

echo "== faulting_tail_cuda: with a context per lane, then in one MPS context"
for mode in off mps; do
  set +e
  "$nvfp4check" run --plugin "$plugin" --kernel faulting_tail_cuda --cases 400 --seed 11 --jobs 4 \
    --shared-context "$mode" --case-dir "$work/cases-$mode" --report "$work/fault-$mode.json" > "$work/fault-$mode.log" 2>&1
  rc=$?
  set -e
  [[ $rc -eq 1 ]] || { cat "$work/fault-$mode.log"; echo "FAIL: exit $rc with --shared-context $mode, not 1"; exit 1; }
done
off=$(field "$work/fault-off.json" 'k["failure"]["case_index"], k["failure"]["check"], k["context"]')
mps=$(field "$work/fault-mps.json" 'k["failure"]["case_index"], k["failure"]["check"], k["context"]')
echo "off: $off; mps: $mps"
[[ "${off% own}" == "${mps% mps}" && "$off" == *" own" && "$mps" == *" mps" ]] ||
  { cat "$work/fault-mps.log"; echo "FAIL: the shared context changed the failure"; exit 1; }
[[ "$(field "$work/fault-mps.json" 'k["context_reruns"] >= 1')" == True ]] || { echo "FAIL: no rerun counted"; exit 1; }
# The failure says it was rerun alone when the failing case itself was running as the shared
# context was lost. A lane may also start it only after a later case's fault (another lane's) had
# ended the sharing: it then runs in a context of its own, and its failure is plainly its own,
# without the note. Either way it must not be called a fault that passed alone.
if ! grep -q "failed again alone" "$work/fault-mps.log"; then
  if grep -q "passed (so may its replay)" "$work/fault-mps.log"; then
    cat "$work/fault-mps.log"; echo "FAIL: the failing case is called a fault that did not reproduce alone"; exit 1
  fi
  echo "the failing case ran after the shared context was lost: no rerun note"
fi
# The case it names fails on replay (the fault is that case's).
case_file=$(field "$work/fault-mps.json" 'k["failure"]["case_file"]')
set +e
"$nvfp4check" replay "$case_file" --plugin "$plugin" --kernel faulting_tail_cuda > "$work/replay.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$work/replay.log"; echo "FAIL: replay of the named case: exit $rc, not 1"; exit 1; }
left=$(mps_left)
[[ -z "$left" ]] || { echo "FAIL: MPS processes left behind after the fault: $left"; exit 1; }
[[ -z "$(ls -A "$work/tmp")" ]] || { ls -la "$work/tmp"; echo "FAIL: the MPS directory was left behind"; exit 1; }
echo "PASS"
