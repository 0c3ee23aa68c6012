#!/usr/bin/env bash
# The throughput goals' table in one run: every row for this build and a baseline build in turn
# on the same machine, with where each row's time went (the report's stage_seconds), the goal and
# whether it is met. Rows: the size classes and default schedules of the GPU kernels
# (scripts/throughput-bench.sh underneath), one grouped case with a 2.2 GiB packed B
# (corpus/large), the exact GPU reference at 4096^3 and 8192^3, and the campaign fuzzer's
# executions a second on one GPU. With --host, the 2-core machine's rows instead: the host
# mutation table's time, the small host GEMV beside the baseline, and 300 cases of every honest
# host kernel.
#
# Usage: scripts/throughput-table.sh --baseline PATH [--program PATH] [--seconds S]
#                                    [--long-seconds L] [--rows SPEC] [--skip STEPS]
#                                    [--fuzz-build DIR] [--large-baseline] [--host] [--json FILE]
#                                    [--reports DIR] [--jobs N] [--baseline-jobs N]
#   --baseline       the other build's nvfp4check (e.g. c8077b0's, where the goals were set)
#   --program        this build's nvfp4check (default build/gpu/cli/nvfp4check, or $NVFP4_BUILD's)
#   --seconds        seconds a row (default 5); --long-seconds for the medium GEMV and the grouped
#                    and dual schedules, whose lanes start slowly (default 12)
#   --rows           kernel:class:goal,... instead of the GPU rows below (class small, medium or
#                    schedule, as throughput-bench.sh's)
#   --skip           any of large,gpuref,fuzz (comma-separated)
#   --fuzz-build     a folder with fuzz/kernel_fuzzer and cli/nvfp4check of the fuzz-campaign
#                    preset (device-pack.sh --fuzz), for the fuzz row; without it the row says so
#   --large-baseline the 2.2 GiB case with the baseline too (c8077b0 took about 120 s)
#   The GPU reference's rows use each build's bench/gpu_reference_bench (its build tree's, or one
#   beside its nvfp4check); a build without one has no figure there.
#   --host           the host rows (for CI's 2-core machine) instead of the GPU ones
#   --reports DIR    keep the steps' own reports there (the large case's, the GPU reference's, the
#                    mutation table's: compare it with scripts/compare-mutants.py)
#   --jobs, --baseline-jobs  the rate rows' lanes for this build and for the baseline (default each
#                    program's own): with this build as the baseline too, one lane count beside another
# Each row's figures, its runs and stages, are appended to --json as one line each. The last lines
# are the table: row, this, baseline, ratio, the largest stages of this build (shares of the lanes'
# time), goal, met. Exit 0 when every row ran (met or not), 2 when a step could not run at all.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
prog=${NVFP4_BUILD:+$NVFP4_BUILD/cli/nvfp4check}
prog=${prog:-build/gpu/cli/nvfp4check}
baseline="" seconds=5 long=12 rows_spec="" skip="" fuzz_build="" large_baseline=0 host=0 json="" reports=""
jobs="" baseline_jobs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --program) prog=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --long-seconds) long=$2; shift 2 ;;
    --rows) rows_spec=$2; shift 2 ;;
    --skip) skip=$2; shift 2 ;;
    --fuzz-build) fuzz_build=$2; shift 2 ;;
    --large-baseline) large_baseline=1; shift ;;
    --host) host=1; shift ;;
    --json) json=$2; shift 2 ;;
    --reports) reports=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --baseline-jobs) baseline_jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "throughput-table: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$baseline" ] || { echo "throughput-table: --baseline PATH is required" >&2; exit 2; }
for p in "$prog" "$baseline"; do
  [ -x "$p" ] || { echo "throughput-table: $p is not an executable nvfp4check" >&2; exit 2; }
done
prog=$(realpath "$prog") baseline=$(realpath "$baseline")
skipped() { [[ ",$skip," == *",$1,"* ]]; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out="$tmp/table.jsonl"
: >"$out"
status=0
echo "throughput-table: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); this $prog; baseline $baseline; $(nproc) cores"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

# Seconds since T0 (a `date +%s.%N`), to the hundredth.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}'; }

# A row of the table: name, this, baseline (or ""), unit, goal, "ge" (met at or above) or "le",
# the largest stages of this build, and what it rests on.
add() {
  python3 - "$@" >>"$out" <<'EOF'
import json, sys
name, this, base, unit, goal, sense, stages, note = sys.argv[1:]
num = lambda s: float(s) if s not in ("", "-") else None
print(json.dumps({"row": name, "this": num(this), "baseline": num(base), "unit": unit, "goal": float(goal),
                  "sense": sense, "stages": stages, "note": note}))
EOF
}

# Cases a second: throughput-bench.sh's rows, this build then the baseline, each at its
# program's default lanes or at --jobs and --baseline-jobs.
bench_rows() {  # spec (kernel:class:goal,...)
  local spec=$1 item kernel class goal secs rows lanes=()
  [ -n "$jobs" ] && lanes+=(--jobs "$jobs")
  [ -n "$baseline_jobs" ] && lanes+=(--baseline-jobs "$baseline_jobs")
  IFS=, read -r -a items <<<"$spec"
  for item in "${items[@]}"; do
    IFS=: read -r kernel class goal <<<"$item"
    secs=$seconds
    case "$kernel:$class" in *gemv*:medium|*grouped*:schedule|*dual*:schedule) secs=$long ;; esac
    rows="$tmp/rows-$kernel-$class.jsonl"
    bash scripts/throughput-bench.sh --program "$prog" --baseline "$baseline" --kernels "$kernel" --classes "$class" \
      --seconds "$secs" --no-variants --json "$rows" "${lanes[@]}" >"$tmp/bench.log" 2>&1
    # The host's speed once (hosts of one GPU machine differ; throughput-bench.sh measures it).
    [ -n "${host_said:-}" ] || { grep -m1 "^host: " "$tmp/bench.log" | sed 's/^/  /'; host_said=1; }
    grep -E "^(this|baseline) " "$tmp/bench.log" | sed 's/^/  /'
    python3 - "$rows" "$kernel" "$class" "$goal" "$secs" >>"$out" <<'EOF' || { echo "  $kernel $class: no rows"; tail -5 "$tmp/bench.log"; status=2; }
import json, sys
path, kernel, cls, goal, secs = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
by = {r["build"]: r for r in rows}
this, base = by["this"], by.get("baseline")
names = {"kernel": "calls", "buffers": "buffers", "channel": "channel", "reference": "reference", "data": "data",
         "judge": "judge", "save": "save", "start": "start", "rest": "rest"}
top = sorted(this["shares"].items(), key=lambda kv: -kv[1])[:3]
stages = ", ".join(f"{names[k]} {100 * v:.0f}%" for k, v in top if v > 0)
if this.get("runner_cpu_ms") is not None:
    stages += f"; {this['runner_cpu_ms']:.2f}+{this['kernels_cpu_ms']:.2f} CPU-ms a case"
# A run that did not pass is no rate of checked cases: no figure, no "met".
rate = lambda r: r["cases_per_s"] if r and r["verdict"] == "pass" else None
if this["verdict"] != "pass":
    stages = f"verdict {this['verdict']}; " + stages
print(json.dumps({"row": f"{kernel} {cls} {this['shape']}, {secs} s", "this": rate(this),
                  "baseline": rate(base), "unit": "cases/s", "goal": float(goal),
                  "sense": "ge", "stages": stages, "note": this["verdict"] + (" / " + base["verdict"] if base else ""),
                  "runs": rows}))
EOF
  done
}

# Wall seconds of one replay of the 2.2 GiB grouped case; its report and log are large-LABEL.*.
large_case() {  # program label -> "seconds verdict" (verdict: the exit status)
  local program=$1 label=$2 t0 rc
  t0=$(date +%s.%N)
  "$program" replay corpus/large/grouped_packed_b_2p2gib.case --kernel grouped_gemm_naive_packed \
    --report "$tmp/large-$label.json" >"$tmp/large-$label.log" 2>&1
  rc=$?
  echo "$(since "$t0") $rc"
}

if [ "$host" = 0 ]; then
  gpu_rows="gemv_naive:small:5000,gemm_tc:small:5000,gemv_naive:medium:2000,gemm_tc:medium:2000"
  gpu_rows+=",gemv_naive:schedule:2000,gemm_tc:schedule:1000,grouped_gemm_tc:schedule:1000,dual_gemm_naive:schedule:1000"
  echo "== rows: cases/s, this then the baseline"
  bench_rows "${rows_spec:-$gpu_rows}"
  if ! skipped large; then
    echo "== the 2.2 GiB grouped case (corpus/large), grouped_gemm_naive_packed"
    read -r t rc <<<"$(large_case "$prog" this)"
    stages=$(python3 -c 'import json,sys
k=json.load(open(sys.argv[1]))["kernels"][0]; st=k.get("stage_seconds",{})
print(", ".join(f"{n} {v:.2f} s" for n,v in sorted(st.items(), key=lambda kv:-kv[1])[:3]))' "$tmp/large-this.json" 2>/dev/null)
    echo "  this: $t s, exit $rc; $stages"
    [ "$rc" = 0 ] || { tail -5 "$tmp/large-this.log"; status=2; }
    bt="" brc=""
    if [ "$large_baseline" = 1 ]; then
      read -r bt brc <<<"$(large_case "$baseline" baseline)"
      echo "  baseline: $bt s, exit $brc"
    fi
    # A replay that did not pass measured nothing the goal is about: no figure, no "met".
    [ "$rc" = 0 ] || { t="-" stages="exit $rc"; }
    [ "${brc:-0}" = 0 ] || bt="-"
    add "grouped case, 2.2 GiB packed B (replay)" "$t" "$bt" s 15 le "$stages" "exit $rc${brc:+ / $brc}"
  fi
  if ! skipped gpuref; then
    echo "== the exact GPU reference (bench/gpu_reference_bench --only gemm --formats nvfp4 --repeat 3)"
    # 8192^3's compute and 4096^3's time with copies, medians, from a build's gpu_reference_bench
    # (in its build tree, or beside its nvfp4check); builds before the MX formats take no --formats.
    gpuref() {  # program label -> "compute_8192 total_4096", or nothing
      local dir bench
      dir=$(dirname "$1")
      for bench in "$dir/../bench/gpu_reference_bench" "$dir/gpu_reference_bench"; do [ -x "$bench" ] && break; done
      [ -x "$bench" ] || { echo "  $2: no gpu_reference_bench beside $1" >&2; return; }
      timeout 300 "$bench" --only gemm --formats nvfp4 --repeat 3 --json "$tmp/gpuref-$2.json" >"$tmp/gpuref-$2.log" 2>&1 ||
        timeout 300 "$bench" --only gemm --repeat 3 --json "$tmp/gpuref-$2.json" >"$tmp/gpuref-$2.log" 2>&1 ||
        { echo "  $2: gpu_reference_bench failed: $(tail -1 "$tmp/gpuref-$2.log")" >&2; return; }
      sed "s/^/  $2: /" "$tmp/gpuref-$2.log" >&2
      python3 -c 'import json,sys
r=[x for x in json.load(open(sys.argv[1])) if x.get("a_format", "nvfp4") == "nvfp4" and x.get("b_format", "nvfp4") == "nvfp4"]
f=lambda n: next(x for x in r if x["m"]==n and x["n"]==n and x["k"]==n)
print(f(8192)["compute_ms"], f(4096)["total_ms"])' "$tmp/gpuref-$2.json"
    }
    read -r c8 t4 <<<"$(gpuref "$prog" this)"
    read -r bc8 bt4 <<<"$(gpuref "$baseline" baseline)"
    if [ -n "${c8:-}" ]; then
      add "exact GPU reference 8192^3, compute" "$c8" "${bc8:-}" ms 50 le "" "median of 3"
      add "exact GPU reference 4096^3, with copies" "$t4" "${bt4:-}" ms 300 le "" "median of 3"
    else
      status=2
    fi
  fi
  if ! skipped fuzz; then
    echo "== the campaign fuzzer on gemv_naive, one GPU, 60 s"
    if [ -n "$fuzz_build" ] && [ -x "$fuzz_build/fuzz/kernel_fuzzer" ]; then
      timeout 200 bash scripts/fuzz-campaign.sh --build "$fuzz_build" --gpus 1 --kernel gemv_naive --seconds 60 \
        --seed 1 --out "$tmp/fuzz" >"$tmp/fuzz.log" 2>&1
      rate=$(sed -n 's/^total: [0-9]* executions, \([0-9]*\) exec\/s$/\1/p' "$tmp/fuzz/summary.txt" 2>/dev/null)
      grep -E "^total:|^coverage" "$tmp/fuzz/summary.txt" 2>/dev/null | sed 's/^/  /'
      if [ -n "$rate" ]; then add "campaign fuzzer, gemv_naive, one GPU" "$rate" "" exec/s 1000 ge "" "60 s, seed 1"
      else tail -5 "$tmp/fuzz.log"; status=2; fi
    else
      echo "  no fuzz-campaign build given (--fuzz-build): the row is not measured"
    fi
  fi
else
  echo "== the small host GEMV, one lane, this then the baseline, 5 runs of 4 s each"
  bash scripts/throughput-bench.sh --program "$prog" --baseline "$baseline" --kernels host_gemv_fp32 --classes small \
    --jobs 1 --seconds 4 --repeat 5 --json "$tmp/host-gemv.jsonl" >"$tmp/bench.log" 2>&1
  grep -E "^(this|baseline|  )" "$tmp/bench.log" | sed 's/^/  /'
  python3 - "$tmp/host-gemv.jsonl" >>"$out" <<'EOF' || { tail -5 "$tmp/bench.log"; status=2; }
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda b: statistics.median(r["cases_per_s"] for r in rows if r["build"] == b)
this, base = med("this"), med("baseline")
print(json.dumps({"row": "host small GEMV 128x1x512, one lane, median of 5", "this": this, "baseline": base,
                  "unit": "cases/s", "goal": 2 * base, "sense": "ge", "stages": "",
                  "note": "goal: 2x the baseline's (the issue names 1042af3)", "runs": rows}))
EOF
  echo "== 300 cases of every honest host kernel (run --kernel K --cases 300 --seed 1)"
  slowest="" worst=0 failed=""
  for k in $("$prog" list 2>/dev/null | awk '$1 ~ /^host_/ {print $1}'); do
    t0=$(date +%s.%N)
    "$prog" run --kernel "$k" --cases 300 --seed 1 --case-dir "$tmp/cases" --report "$tmp/h.json" >"$tmp/h.log" 2>&1
    rc=$?
    t=$(since "$t0")
    echo "  $k: $t s, exit $rc"
    [ "$rc" = 0 ] || { status=2; failed+=" $k"; }
    if awk -v a="$t" -v b="$worst" 'BEGIN {exit !(a > b)}'; then worst=$t slowest=$k; fi
  done
  # A run that did not pass checked less than 300 cases: the row has no figure then.
  [ -z "$failed" ] || worst="-"
  [ -n "$slowest" ] && add "slowest honest host kernel, 300 cases ($slowest)" "$worst" "" s 10 le \
    "${failed:+exit not 0:$failed}" "wall seconds"
  echo "== the host mutation table (mutants --memory host --seed 20261204 --budget 200)"
  t0=$(date +%s.%N)
  "$prog" mutants --memory host --seed 20261204 --budget 200 --report "$tmp/mutants.json" \
    --case-dir "$tmp/mutant-cases" >"$tmp/mutants.log" 2>&1
  rc=$?
  t=$(since "$t0")
  grep -E "^killed|SURVIVED" "$tmp/mutants.log" | tail -3 | sed 's/^/  /'
  echo "  $t s, exit $rc"
  # Exit 1 is a surviving mutant or a false alarm: the table is not the one the goal times.
  [ "$rc" = 0 ] || t="-"
  add "host mutation table, $(nproc) cores" "$t" "" s 300 le "exit $rc" "exit $rc"
fi

[ -n "$json" ] && cat "$out" >>"$json"  # appended, as throughput-bench.sh does
if [ -n "$reports" ]; then
  mkdir -p "$reports"
  for f in large-this.json large-baseline.json gpuref-this.json gpuref-baseline.json mutants.json; do [ -f "$tmp/$f" ] && cp "$tmp/$f" "$reports/"; done
fi
echo "== the table"
[ -n "$jobs$baseline_jobs" ] &&
  echo "lanes of the rate rows: this build ${jobs:-at its default}, the baseline ${baseline_jobs:-${jobs:-at its default}}"
python3 - "$out" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
fmt = lambda v: "-" if v is None else f"{v:,.1f}"
print(f"{'row':64} {'this':>10} {'baseline':>10} {'ratio':>7} {'goal':>16} {'met':>4}  largest stages of this")
for r in rows:
    ratio = ""
    if r["this"] and r["baseline"]:
        x = r["this"] / r["baseline"] if r["sense"] == "ge" else r["baseline"] / r["this"]
        ratio = f"{x:.2f}x"
    met = "-" if r["this"] is None else ("yes" if (r["this"] >= r["goal"] if r["sense"] == "ge" else r["this"] <= r["goal"]) else "NO")
    goal = ("<= " if r["sense"] == "le" else ">= ") + f"{r['goal']:,.0f} {r['unit']}"
    print(f"{r['row'][:64]:64} {fmt(r['this']):>10} {fmt(r['baseline']):>10} {ratio:>7} {goal:>16} {met:>4}  {r['stages']}")
EOF
exit $status
