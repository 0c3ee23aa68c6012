#!/usr/bin/env bash
# scripts/cpu-by-thread.py finds a run's processes while it runs and tells them apart: the runner
# (whose comm is "exe", as it starts itself again) and the kernels' processes, each with the CPU it
# took in the window, also as JSON, threads born in the window included; --pid keeps to one
# process tree; exit 1 when nothing of the suite runs.
# Usage: cpu_by_thread_test.sh NVFP4CHECK SOURCE_DIR
set -uo pipefail
program=$1 source=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-cpu-by-thread.XXXXXX")
runner=""
trap '[ -n "$runner" ] && kill "$runner" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAIL: $*"; cat "$work/out" 2>/dev/null; exit 1; }

# Nothing of the suite running: no line of figures, exit 1.
python3 "$source/scripts/cpu-by-thread.py" --wait 0 --seconds 0.2 >"$work/out" 2>&1
rc=$?
# (A run of another test of the suite may be alive beside this one under ctest -j: then 0 is right.)
if [ "$rc" != 0 ]; then
  [ "$rc" = 1 ] && grep -q "no nvfp4check thread" "$work/out" || fail "with no run: exit $rc"
fi

"$program" run --kernel host_gemv_fp32 --shape 128x1x512 --seconds 60 --jobs 2 --seed 1 --case-dir "$work/cases" \
  --report "$work/r.json" >"$work/log" 2>&1 &
runner=$!
# Until both lanes' kernel processes are up (their parent is the runner), at most 60 s.
for _ in $(seq 600); do
  [ "$(pgrep -P "$runner" -f ' worker ' | wc -l)" -ge 2 ] && break
  kill -0 "$runner" 2>/dev/null || fail "the run ended early: $(tail -5 "$work/log")"
  sleep 0.1
done
python3 "$source/scripts/cpu-by-thread.py" --wait 0.5 --seconds 2 --rate 100 --pid "$runner" --json "$work/c.json" \
  >"$work/out" 2>&1 || fail "exit $?"
cat "$work/out"
python3 - "$work/c.json" <<'EOF' || fail "--json: $(cat "$work/c.json")"
import json, sys
c = json.load(open(sys.argv[1]))
sys.exit(not (c["seconds"] > 1 and c["by_role"].get("runner", 0) > 0 and c["by_role"].get("worker", 0) > 0))
EOF
# Threads born between the samples count: here the whole run starts after the first sample (a
# shell that waits, then becomes the run), as a runner's later threads do.
( sleep 2; exec "$program" run --kernel host_gemv_fp32 --shape 128x1x512 --seconds 6 --jobs 1 --seed 1 \
    --case-dir "$work/cases-late" --report "$work/late.json" >"$work/late.log" 2>&1 ) &
late=$!
python3 "$source/scripts/cpu-by-thread.py" --wait 0 --seconds 4.5 --pid "$late" --json "$work/late-c.json" \
  >"$work/late-out" 2>&1 || { rc=$?; cat "$work/late-out"; fail "a run started after the first sample: exit $rc"; }
wait "$late"
python3 - "$work/late-c.json" <<'EOF' || fail "a run started after the first sample: $(cat "$work/late-c.json")"
import json, sys
c = json.load(open(sys.argv[1]))
sys.exit(not (c["by_role"].get("runner", 0) > 0 and c["by_role"].get("worker", 0) > 0))
EOF
# --pid counts that process and what is below it alone: below a sleep, nothing of the run.
sleep 30 &
other=$!
python3 "$source/scripts/cpu-by-thread.py" --wait 0 --seconds 0.2 --pid "$other" >"$work/other" 2>&1
rc=$?
kill "$other" 2>/dev/null
[ "$rc" = 1 ] || { cat "$work/other"; fail "--pid of a sleep: exit $rc, not 1"; }
grep -Eq '^  runner \(all\) +threads +[0-9]+ +cores run' "$work/out" || fail "no line for the runner"
grep -Eq '^  worker \(all\) +threads +[2-9]' "$work/out" || fail "no line for two or more kernel threads"
grep -Eq 'CPU-ms a case' "$work/out" || fail "--rate gave no CPU-ms a case"
# Some CPU was taken in two seconds of a run of host cases.
awk '/^over/ { exit !($3 > 0) }' "$work/out" || fail "no CPU counted"
echo "ok"
