#!/usr/bin/env bash
# throughput-table.sh's table: each row measured for this build and the baseline, the ratio, the
# goal and whether it is met, from the rows' own figures (host kernels stand in for the GPU's;
# the large case, the GPU reference and the fuzzer are skipped here). This checks the table, not
# how fast anything is.
# Usage: throughput_table_test.sh NVFP4CHECK
set -uo pipefail
program=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-table.XXXXXX")
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAIL: $*"; exit 1; }

# Bad usage: no baseline, or one that is not a program.
bash "$here/../throughput-table.sh" --program "$program" >"$work/u1.log" 2>&1
[ $? -eq 2 ] && grep -q -- "--baseline PATH is required" "$work/u1.log" || { cat "$work/u1.log"; fail "no baseline: not exit 2"; }
bash "$here/../throughput-table.sh" --program "$program" --baseline "$work/none" >"$work/u2.log" 2>&1
[ $? -eq 2 ] && grep -q "is not an executable" "$work/u2.log" || { cat "$work/u2.log"; fail "a missing baseline: not exit 2"; }

# A goal of one case a second is met, one of 10^9 is not; the baseline is the same program.
bash "$here/../throughput-table.sh" --program "$program" --baseline "$program" --seconds 0.5 --long-seconds 0.5 \
  --rows host_gemv_fp32:small:1,host_gemm_fp32:schedule:1000000000 --skip large,gpuref,fuzz \
  --json "$work/table.jsonl" >"$work/table.log" 2>&1 || { cat "$work/table.log"; fail "throughput-table exited $?"; }
cat "$work/table.log"
python3 - "$work/table.jsonl" <<'PY' || fail "the table's rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if [r["row"].split(",")[0] for r in rows] != ["host_gemv_fp32 small 128x1x512", "host_gemm_fp32 schedule drawn"]:
    sys.exit(f"rows: {[r['row'] for r in rows]}")
for r in rows:
    if not (r["this"] > 0 and r["baseline"] > 0 and r["unit"] == "cases/s" and r["note"] == "pass / pass"):
        sys.exit(f"row {r}")
    builds = sorted(x["build"] for x in r["runs"])
    if builds != ["baseline", "this"]:
        sys.exit(f"{r['row']}: runs of {builds}")
    if not r["stages"] or "%" not in r["stages"]:
        sys.exit(f"{r['row']}: no stages")
PY
# The printed table: the met goal "yes", the missed one "NO", each with a ratio.
grep -E "^host_gemv_fp32 small 128x1x512, 0.5 s .* [0-9.]+x +>= 1 cases/s +yes " "$work/table.log" ||
  fail "the small GEMV's line"
grep -E "^host_gemm_fp32 schedule drawn, 0.5 s .* [0-9.]+x .* NO " "$work/table.log" || fail "the schedule's line"
echo "throughput-table: rows, ratios and goals"

# One lane count beside another: this build at 2 lanes, the same program as the baseline at 1,
# each row's figures at its own lanes, with the ratio between them.
bash "$here/../throughput-table.sh" --program "$program" --baseline "$program" --seconds 0.5 --long-seconds 0.5 \
  --rows host_gemv_fp32:small:1 --skip large,gpuref,fuzz --jobs 2 --baseline-jobs 1 \
  --json "$work/lanes.jsonl" >"$work/lanes.log" 2>&1 || { cat "$work/lanes.log"; fail "throughput-table --jobs exited $?"; }
python3 - "$work/lanes.jsonl" <<'PY' || { cat "$work/lanes.log"; fail "the rows at two lane counts"; }
import json, sys
(row,) = [json.loads(l) for l in open(sys.argv[1])]
jobs = {x["build"]: x["jobs"] for x in row["runs"]}
if jobs != {"this": "2", "baseline": "1"}:
    sys.exit(f"lanes of the runs: {jobs}")
if not (row["this"] > 0 and row["baseline"] > 0):
    sys.exit(f"figures: {row}")
PY
grep -q "^lanes of the rate rows: this build 2, the baseline 1$" "$work/lanes.log" && grep -E "^  this .* 2 .* [0-9.]+x" "$work/lanes.log" >/dev/null ||
  { cat "$work/lanes.log"; fail "no lanes line, or no ratio of 2 lanes to the baseline's 1"; }
echo "throughput-table: one lane count beside another"
