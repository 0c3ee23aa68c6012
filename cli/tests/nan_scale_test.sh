#!/usr/bin/env bash
# A kernel that decodes a NaN scale byte as a number fails naming the byte (tensor, batch, row,
# block, hex value) and the value it apparently used: the mutants that misdecode E4M3's NaN, and
# E8M0's NaN 0xFF read as 1.
# Usage: nan_scale_test.sh NVFP4CHECK MUTANTS_PLUGIN
set -uo pipefail
program=$1 plugin=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$dir/tmp"
mkdir -p "$TMPDIR"
fail() { echo "FAILED: $*"; exit 1; }
byte="scale byte sf(a|b|b2)\[b=[0-9]+, row [0-9]+, block [0-9]+\] is 0x[7F]F, E4M3's NaN"
# check KERNEL REGEX: run fails (exit 1) and its likely cause matches REGEX.
check() {
  "$program" run --plugin "$plugin" --kernel "$1" --cases 300 --seed 3 --case-dir "$dir/cases" >"$dir/out" 2>&1
  local rc=$?
  grep -E "^FAIL|likely cause" "$dir/out"
  [ "$rc" = 1 ] || fail "$1: exit $rc, expected 1"
  grep -qE "^  likely cause: NaN is due because $2" "$dir/out" || fail "$1: the cause does not match: $2"
}
check mut_host_nan_scale_as_number "$byte; the kernel apparently used -?480 for it \(the byte read as a normal E4M3"
check mut_host_zero_skip "$byte; its block's products are all zero"
check mut_host_mx_nan_scale_ignored "scale byte sf(a|b)\[b=[0-9]+, row [0-9]+, block [0-9]+\] is 0xFF, E8M0's NaN; the kernel apparently used 1 for it \(1, as if the scale were missing\)"
echo ok
