#!/usr/bin/env bash
# A replay's verdict says what was checked: a case never handed to the kernel (an op it does not
# declare, a version-1 kernel) is skipped with its reason, counted apart from the checked ones,
# and a replay that checked nothing exits 2. A replay writes nothing into the folder it runs in.
# Usage: replay_honest_test.sh NVFP4CHECK CORPUS_CASES V1_PLUGIN MUTANTS_PLUGIN MUTANT
set -euo pipefail
program=$1 cases=$2 v1_plugin=$3 mutants=$4 mutant=$5
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/cwd" "$dir/tmp"
cd "$dir/cwd"
export TMPDIR="$dir/tmp"
grouped=$cases/grouped_separate_ragged.case dual=$cases/dual_silu_fp16.case gemm=$cases/odd_gemm_m129_n7_k80_l3.case

fail() { echo "FAILED: $*"; exit 1; }
# replay NAME CODE ARG...: runs a replay with a JSON report, which must exit CODE.
replay() {
  local name=$1 code=$2
  shift 2
  set +e
  "$program" replay --report "$dir/$name.json" "$@" >"$dir/$name.out" 2>"$dir/$name.err"
  local rc=$?
  set -e
  cat "$dir/$name.out" "$dir/$name.err"
  [ "$rc" = "$code" ] || fail "$name: exit $rc, expected $code"
}
# field NAME KEY: the first kernel's KEY in the report of NAME.
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kernels"][0].get(sys.argv[2], 0))' "$dir/$1.json" "$2"; }
expect_field() { [ "$(field "$1" "$2")" = "$3" ] || fail "$1: $2 is $(field "$1" "$2"), expected $3"; }

# A GEMM-only kernel named for grouped and dual cases: neither is handed to it.
replay gemm_only 2 "$grouped" "$dual" --kernel host_gemm_fp32
expect_field gemm_only verdict skipped
expect_field gemm_only cases 0
expect_field gemm_only skipped_cases 2
grep -q "nothing was checked" "$dir/gemm_only.err" || fail "gemm_only: no message that nothing was checked"
grep -q "grouped_gemm" "$dir/gemm_only.out" || fail "gemm_only: the table does not name the undeclared op"
grep -q "none of its 2 cases applied" "$dir/gemm_only.out" || fail "gemm_only: the table does not say no case applied"
! grep -q "more case" "$dir/gemm_only.out" || fail "gemm_only: the table speaks of more cases beside none"

# A version-1 kernel: only version-1 problems are handed to it.
replay version_1 2 "$grouped" --plugin "$v1_plugin" --kernel example_host_gemv
expect_field version_1 verdict skipped
expect_field version_1 cases 0
expect_field version_1 skipped_cases 1

# One case that applies and one that does not: one checked, one skipped, and a pass.
replay mixed 0 "$gemm" "$grouped" --kernel host_gemm_fp32
expect_field mixed verdict pass
expect_field mixed cases 1
expect_field mixed skipped_cases 1

# Nothing is written into the current folder; a passing replay leaves nothing behind at all.
[ -z "$(ls -A "$dir/cwd")" ] || fail "a replay wrote into the current folder: $(ls -A "$dir/cwd")"
[ -z "$(ls -A "$dir/tmp")" ] || fail "a passing replay left files behind: $(ls -A "$dir/tmp")"

# A failing replay says where its error map is, outside the current folder.
set +e
"$program" run --plugin "$mutants" --kernel "$mutant" --cases 200 --seed 5 --case-dir "$dir/run" >"$dir/run.out" 2>&1
set -e
failing=$(find "$dir/run" -name "*.case" 2>/dev/null | head -n 1)
[ -n "$failing" ] || { cat "$dir/run.out"; fail "run kept no failing case"; }
replay failing 1 "$failing" --plugin "$mutants" --kernel "$mutant"
map=$(sed -n 's/.*error map: \([^ ]*\.png\).*/\1/p' "$dir/failing.out" | head -n 1)
[ -n "$map" ] && [ -f "$map" ] || fail "the failure text names no error map that exists (\"$map\")"
case "$map" in "$dir/tmp/"*) ;; *) fail "the error map $map is not in a temporary folder" ;; esac
[ -z "$(ls -A "$dir/cwd")" ] || fail "a failing replay wrote into the current folder: $(ls -A "$dir/cwd")"
echo "replay verdicts and output folders as expected"
