#!/usr/bin/env bash
# scripts/compare-mutants.py on a recorded host table: the record against itself is the same
# table (exit 0); a mutant killed at another case, a weak column that changed, an honest kernel
# with a false alarm and a mutant missing are each named (exit 1); another seed, or a file that
# is no report, is no comparison (exit 2), nor is another suite budget; a run without the honest
# kernels or the weak checks is compared on the columns both have.
# Usage: compare_mutants_test.sh SOURCE_DIR
set -uo pipefail
src=$1
compare="python3 $src/scripts/compare-mutants.py"
record=$src/docs/runs/2026-12-04-s26-mutants-host-seed-20261204.json
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$work/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAIL: $*"; exit 1; }

$compare "$record" "$record" > "$work/same.txt"; rc=$?
[ $rc -eq 0 ] || fail "the record against itself: exit $rc"
grep -q " 0 differ" "$work/same.txt" || fail "the record against itself: $(cat "$work/same.txt")"

# edit FILE PYTHON: FILE is the record with the edit applied to the report r.
edit() {
  python3 - "$record" "$work/$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(r, open(sys.argv[2], "w"))
PY
}
edit case.json 'm = next(m for m in r["mutants"] if m["suite"].get("failed")); m["suite"]["case_desc"] = "another case"; print(m["name"])' > "$work/name.txt"
edit weak.json 'm = next(m for m in r["mutants"] if "gpu_mode" in m); m["gpu_mode"]["failed"] = not m["gpu_mode"].get("failed")'
edit honest.json 'r["honest"][0]["suite"]["failed"] = True'
edit missing.json 'r["mutants"].pop()'
edit seed.json 'r["seed"] = 1'
edit budget.json 'r["budget"] = r["budget"] + 100'
edit no_honest.json 'r["honest"] = []'
edit no_weak.json '[m.update(gpu_mode={"ran": False}, kernelbench={"ran": False}) for m in r["mutants"]]'
for f in case weak honest missing; do
  $compare "$record" "$work/$f.json" > "$work/$f.txt"; rc=$?
  [ $rc -eq 1 ] || fail "$f: exit $rc, expected 1: $(cat "$work/$f.txt")"
  # A missing mutant takes its weak columns with it; every other edit is one entry.
  [ $f = missing ] || grep -q " 1 differ" "$work/$f.txt" || fail "$f: $(tail -1 "$work/$f.txt")"
done
grep -q "^mutant $(cat "$work/name.txt")$" "$work/case.txt" || fail "the mutant killed elsewhere is not named: $(cat "$work/case.txt")"
grep -q "another case" "$work/case.txt" || fail "the new case is not shown"
grep -q "^honest " "$work/honest.txt" || fail "the honest kernel is not named"
grep -q "(absent)" "$work/missing.txt" || fail "the missing mutant is not shown as absent"
$compare "$record" "$work/seed.json" > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "another seed: exit $rc, expected 2"
$compare "$record" "$work/budget.json" > /dev/null 2> "$work/budget.txt"; rc=$?
[ $rc -eq 2 ] || fail "another budget: exit $rc, expected 2"
grep -q "budgets differ" "$work/budget.txt" || fail "another budget: $(cat "$work/budget.txt")"
# A run without the honest kernels or the weak checks compares the columns both have, and says so.
for f in no_honest no_weak; do
  $compare "$record" "$work/$f.json" > "$work/$f.txt"; rc=$?
  [ $rc -eq 0 ] || fail "$f: exit $rc, expected 0: $(cat "$work/$f.txt")"
  grep -q "^not compared: the ${f#no_}" "$work/$f.txt" || fail "$f: the left-out columns are not named: $(cat "$work/$f.txt")"
done
echo "not json" > "$work/bad.json"
$compare "$record" "$work/bad.json" > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "a file that is no report: exit $rc, expected 2"
echo "compare-mutants: every difference named"
