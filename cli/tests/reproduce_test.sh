#!/usr/bin/env bash
# The "reproduce:" lines that run and replay print are commands a person pastes: run them as
# printed (nvfp4check on PATH) and they must fail the same check again, for a plugin's kernel.
# Usage: reproduce_test.sh NVFP4CHECK PLUGIN KERNEL
set -euo pipefail
program=$1 plugin=$2 kernel=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$dir/tmp"
mkdir -p "$TMPDIR"
export PATH="$(cd "$(dirname "$program")" && pwd):$PATH"
cd "$dir"  # the printed paths must not depend on where they are run from

first_line() { sed -n 's/^  reproduce: //p' "$1" | head -n 1; }
check_of() { sed -n 's/^FAIL [^:]*: check "\([^"]*\)".*/\1/p' "$1" | head -n 1; }

set +e
"$program" run --plugin "$plugin" --kernel "$kernel" --cases 200 --seed 5 --case-dir "$dir/cases" >run.out 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || { cat run.out; echo "run: exit $rc, expected 1"; exit 1; }
check=$(check_of run.out)
line=$(first_line run.out)
[ -n "$check" ] && [ -n "$line" ] || { cat run.out; echo "no failure or no reproduce line"; exit 1; }
echo "run failed \"$check\"; reproducing: $line"
case "$line" in *"--plugin"*) ;; *) echo "the line does not name the plugin"; exit 1 ;; esac
mkdir elsewhere && cd elsewhere
for step in replay replay-of-replay; do
  set +e
  sh -c "$line" >../$step.out 2>&1
  rc=$?
  set -e
  [ "$rc" = 1 ] || { cat ../$step.out; echo "$step: exit $rc, expected 1"; exit 1; }
  [ "$(check_of ../$step.out)" = "$check" ] || { cat ../$step.out; echo "$step: another check"; exit 1; }
  line=$(first_line ../$step.out)
  echo "$step failed \"$check\" again"
done
