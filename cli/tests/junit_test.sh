#!/usr/bin/env bash
# `--junit FILE` on run, replay and mutants writes JUnit XML that a JUnit consumer reads: checked
# with xmllint (well-formed) and junitparser (Debian's python3-junitparser, the parser CI report
# tools use): one test case per kernel; a failure carries the failure text and its reproduce
# line, a skipped kernel its reason.
# Usage: junit_test.sh NVFP4CHECK BROKEN_PLUGIN BROKEN_KERNEL MUTANTS_PLUGIN HONEST_PLUGIN CASE
set -uo pipefail
program=$1 broken=$2 broken_kernel=$3 mutants=$4 honest=$5 case_file=$6
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$dir/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAILED: $*"; exit 1; }
# Debian's interpreter, where the package installs (a python3 first on PATH may be another).
py=/usr/bin/python3
"$py" -c 'import junitparser' || fail "python3-junitparser is not installed (scripts/install-deps.sh)"
# expect NAME CODE ARG...: the command must exit CODE.
expect() {
  local name=$1 code=$2
  shift 2
  "$program" "$@" >"$dir/$name.out" 2>&1
  local rc=$?
  [ "$rc" = "$code" ] || { cat "$dir/$name.out"; fail "$name: exit $rc, expected $code"; }
  xmllint --noout "$dir/$name.xml" || fail "$name: not well-formed XML"
}
# cases NAME: "name:result" of each test case, as junitparser reads them, and checks the counts.
cases() {
  "$py" - "$dir/$1.xml" <<'PY'
import sys
from junitparser import JUnitXml, Failure, Skipped
xml = JUnitXml.fromfile(sys.argv[1])
for suite in xml:
    n = 0
    for case in suite:
        n += 1
        kinds = [type(r).__name__.lower() for r in case.result]
        print(f"{case.name}:{kinds[0] if kinds else 'pass'}")
        for r in case.result:
            if isinstance(r, Failure):
                assert r.message, "a failure without a message"
                print(f"  message {r.message.splitlines()[0]}")
                print("  " + (r.text or "").replace("\n", "\n  "))
            if isinstance(r, Skipped):
                print(f"  message {r.message}")
    assert n == suite.tests, f"{n} cases, tests={suite.tests}"
    assert sum(1 for c in suite if any(isinstance(r, Failure) for r in c.result)) == suite.failures
PY
}

expect run 1 run --plugin "$broken" --kernel "$broken_kernel" --kernel host_gemv_fp32 --kernel host_dual_gemm_fp32 \
  --op gemv --cases 200 --seed 5 --case-dir "$dir/cases" --junit "$dir/run.xml"
cases run >"$dir/run.cases" || fail "junitparser could not read run.xml"
cat "$dir/run.cases"
grep -qx "$broken_kernel:failure" "$dir/run.cases" || fail "run: the broken kernel is no failure"
grep -qx "host_gemv_fp32:pass" "$dir/run.cases" || fail "run: host_gemv_fp32 did not pass"
grep -qx "host_dual_gemm_fp32:skipped" "$dir/run.cases" || fail "run: host_dual_gemm_fp32 is not skipped"
grep -q "^  message does not support gemv" "$dir/run.cases" || fail "run: the skip has no reason"
grep -q "^  message [a-z_-]*: " "$dir/run.cases" || fail "run: the failure's message does not name its check"
grep "^    reproduce: nvfp4check replay " "$dir/run.cases" | grep -q -- "--kernel $broken_kernel" &&
  grep "^    reproduce: nvfp4check replay " "$dir/run.cases" | grep -q -- "--plugin " ||
  fail "run: the failure's body has no reproduce line"

expect replay 0 replay "$case_file" --kernel host_gemm_fp32 --junit "$dir/replay.xml"
cases replay >"$dir/replay.cases" || fail "junitparser could not read replay.xml"
grep -qx "host_gemm_fp32:pass" "$dir/replay.cases" || fail "replay: $(cat "$dir/replay.cases")"

expect mutants 0 mutants --plugin "$mutants" --honest-plugin "$honest" --memory host --kernel mut_host_fp32_through_fp16 \
  --kernel ctl_host_unmutated --budget 200 --honest-cases 3 --no-weak --seed 7 --case-dir "$dir/mcases" \
  --junit "$dir/mutants.xml"
cases mutants >"$dir/mutants.cases" || fail "junitparser could not read mutants.xml"
cat "$dir/mutants.cases"
grep -qx "mut_host_fp32_through_fp16:pass" "$dir/mutants.cases" || fail "mutants: the killed mutant is no pass"
grep -qx "ctl_host_unmutated:pass" "$dir/mutants.cases" || fail "mutants: the control is no pass"

"$program" run --kernel host_gemv_fp32 --cases 1 --seed 1 --junit /nonexistent-dir/x.xml >"$dir/bad.out" 2>&1
[ $? = 2 ] || fail "an unwritable --junit path: not exit 2"
echo ok
