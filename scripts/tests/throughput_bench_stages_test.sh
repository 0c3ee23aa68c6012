#!/usr/bin/env bash
# Where a run's time went is in its report: every kernel's stage_seconds holds each step of a
# case (drawing, the data, the reference, the buffers, each kernel call, the channel, judging,
# saving, the listeners and what no step holds), they add up to the lanes' time, `merge` sums the
# shards', and throughput-bench.sh turns them into shares that add up to 100%. This checks what
# the report says, not how fast anything is.
# Usage: throughput_bench_stages_test.sh NVFP4CHECK
set -uo pipefail
program=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-stages.XXXXXX")
trap 'rm -rf "$work"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAIL: $*"; exit 1; }
steps="draw generate reference save buffers:_lay-out buffers:_upload buffers:_read-back run_1 run_2 stale channel judge listeners other"

# check_stages REPORT LANES: every step present and >= 0, their sum the lanes' time (no more
# than LANES x the kernel's seconds, and most of it: the run does little outside its lanes).
check_stages() {
  python3 - "$1" "$2" "$steps" <<'EOF' || fail "$1: stage_seconds"
import json, sys
report, lanes, steps = sys.argv[1], int(sys.argv[2]), [s.replace("_", " ") for s in sys.argv[3].split()]
for k in json.load(open(report))["kernels"]:
    st = k.get("stage_seconds")
    if not st:
        sys.exit(f"{k['name']}: no stage_seconds")
    missing = [s for s in steps if s not in st]
    if missing:
        sys.exit(f"{k['name']}: stage_seconds lacks {missing}: {st}")
    if any(v < 0 for v in st.values()):
        sys.exit(f"{k['name']}: a negative step: {st}")
    total, wall = sum(st.values()), k["seconds"] * lanes
    if not (0.8 * wall <= total <= wall * 1.001 + 1e-3):
        sys.exit(f"{k['name']}: the steps add up to {total:.4f} s of {wall:.4f} s in {lanes} lane(s): {st}")
EOF
}

run() {  # NAME ARG...: nvfp4check run with a report, which must pass
  local name=$1
  shift
  "$program" run --kernel host_gemv_fp32 --seed 5 --case-dir "$work/cases" --report "$work/$name.json" "$@" \
    >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "$name: run exited $?"; }
}

run one --cases 24 --jobs 1
check_stages "$work/one.json" 1
run two --cases 24 --jobs 2
# Two lanes: the sum of both lanes' time, at most twice the run's.
python3 -c 'import json,sys; st=json.load(open(sys.argv[1]))["kernels"][0]["stage_seconds"]; sys.exit(0 if "channel" in st else 1)' \
  "$work/two.json" || fail "two lanes: no stage_seconds"

# Shards: merge sums every step.
run shard0 --cases 24 --jobs 1 --shard 0/2
run shard1 --cases 24 --jobs 1 --shard 1/2
"$program" merge "$work/shard0.json" "$work/shard1.json" --report "$work/merged.json" >"$work/merge.log" 2>&1 ||
  { cat "$work/merge.log"; fail "merge exited $?"; }
python3 - "$work/shard0.json" "$work/shard1.json" "$work/merged.json" <<'EOF' || fail "merge: stage_seconds"
import json, sys
a, b, m = (json.load(open(p))["kernels"][0].get("stage_seconds", {}) for p in sys.argv[1:])
if not m or set(m) != set(a) | set(b):
    sys.exit(f"merged steps {sorted(m)} are not the shards' {sorted(set(a) | set(b))}")
for s, v in m.items():
    if abs(v - a.get(s, 0) - b.get(s, 0)) > 1e-9:
        sys.exit(f"merged {s} = {v}, the shards' sum {a.get(s, 0) + b.get(s, 0)}")
EOF

# The benchmark's shares by class: from stage_seconds, adding up to 100%.
bash "$here/../throughput-bench.sh" --program "$program" --seconds 0.5 --jobs 1 --kernels host_gemv_fp32 \
  --json "$work/rows.jsonl" >"$work/bench.log" 2>&1 || { cat "$work/bench.log"; fail "throughput-bench exited $?"; }
cat "$work/bench.log"
python3 - "$work/rows.jsonl" <<'EOF' || fail "throughput-bench shares"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if sorted(r["class"] for r in rows) != ["medium", "small", "tiny"]:
    sys.exit(f"rows: {[(r['class'], r['jobs']) for r in rows]}")
for r in rows:
    shares = r["shares"]
    if abs(sum(shares.values()) - 1) > 1e-9 or min(shares.values()) < 0:
        sys.exit(f"{r['class']}: shares {shares} do not add up to 1")
    # A medium case's reference is computed during the kernel's calls (case_check.h): its share
    # is what the calls did not hide, often none. Smaller cases compute it before the calls.
    if r["op"] != "gemv" or shares["kernel"] <= 0 or (r["class"] != "medium" and shares["reference"] <= 0):
        sys.exit(f"{r['class']}: op {r['op']}, shares {shares}")
    # The lanes' time a case is the stages' sum over the cases; the cores, the run's CPU over its
    # wall time: one lane and its kernel's process keep at least a fifth of a core busy and at
    # most both (and what the machine has).
    expect = 1e3 * sum(r["stages"].values()) / r["cases"]
    if abs(r["ms_per_case"] - expect) > 1e-9 * max(1.0, expect) or r["ms_per_case"] <= 0:
        sys.exit(f"{r['class']}: ms_per_case {r['ms_per_case']}, the stages give {expect}")
    import os
    if not (0.2 <= r["cores"] <= 2 * (os.cpu_count() or 1)):
        sys.exit(f"{r['class']}: cores {r['cores']}")
    # The host's speed, from the build's case_work_bench beside the program: in every row, and
    # the same one (measured once, before the rows).
    if not (r["host_reference_us"] and r["host_reference_us"] > 0 and r["host_reference_us"] == rows[0]["host_reference_us"]):
        sys.exit(f"{r['class']}: host_reference_us {r.get('host_reference_us')}")
EOF
grep -qE "^host: .*, [0-9]+ cores; speed: grouped_gemm_tc's exact reference on one thread, [0-9.]+ us a case" \
  "$work/bench.log" || fail "throughput-bench: no host line with its speed"
# Short rows are not sampled for their CPU; a row of 3 s or more says what a case costs the CPU in
# the runner and in its kernel's process, from those processes alone. Its row is appended to the
# same file, after the 0.5 s rows: --json keeps what an earlier run put there.
python3 -c 'import json,sys; sys.exit(any(json.loads(l)["runner_cpu_ms"] is not None for l in open(sys.argv[1])))' \
  "$work/rows.jsonl" || fail "a 0.5 s row has CPU figures"
bash "$here/../throughput-bench.sh" --program "$program" --seconds 3 --jobs 1 --kernels host_gemv_fp32 --classes small \
  --json "$work/rows.jsonl" >"$work/cpu.log" 2>&1 || { cat "$work/cpu.log"; fail "throughput-bench (3 s) exited $?"; }
cat "$work/cpu.log"
python3 - "$work/rows.jsonl" <<'EOF' || fail "throughput-bench CPU-ms a case"
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if len(rows) != 4 or sorted(r["class"] for r in rows[:3]) != ["medium", "small", "tiny"]:
    sys.exit(f"--json did not append the 3 s row to the 0.5 s rows: {[(r['class'], r['seconds']) for r in rows]}")
r = rows[-1]
runner, kernels = r["runner_cpu_ms"], r["kernels_cpu_ms"]
if not (runner and runner > 0 and kernels and kernels > 0):
    sys.exit(f"CPU-ms a case: runner {runner}, kernels {kernels}")
# Together no more cores than the machine has (a little over for the window's edges).
if (runner + kernels) * r["cases_per_s"] / 1e3 > 1.2 * (os.cpu_count() or 1):
    sys.exit(f"CPU-ms a case: runner {runner}, kernels {kernels} at {r['cases_per_s']} cases/s")
EOF
grep -qE " [0-9]+\.[0-9]{2}\+[0-9]+\.[0-9]{2} " "$work/cpu.log" || fail "throughput-bench: no cpu-ms column"
# A program carried alone (no build around it) still gets the host's speed, from the baseline's
# build, and the line says whose bench measured it.
mkdir -p "$work/alone" && cp "$program" "$work/alone/nvfp4check"
NVFP4_BUILD= bash "$here/../throughput-bench.sh" --program "$work/alone/nvfp4check" --baseline "$program" --seconds 0.3 \
  --jobs 1 --kernels host_gemv_fp32 --classes tiny --no-variants >"$work/alone.log" 2>&1 ||
  { cat "$work/alone.log"; fail "throughput-bench with a program alone exited $?"; }
grep -qE "^host: .*; speed: grouped_gemm_tc's exact reference on one thread, [0-9.]+ us a case \(.*/bench/case_work_bench: none beside $work/alone/nvfp4check;" \
  "$work/alone.log" || { head -2 "$work/alone.log"; fail "throughput-bench: a program alone got no host speed from its baseline's build"; }
echo "stage_seconds: present, adding up, merged and shared"
