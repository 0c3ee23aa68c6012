#!/usr/bin/env bash
# `nvfp4check replay --fuzz-input` checks the problem the kernel fuzzer checked for the same input
# in the same environment: a case file given as input, a printable text that is no case (the
# fuzzer runs nothing), a binary input under a lowered NVFP4_FUZZ_MAX_PRODUCTS.
# The fuzzer's problem is the case file it saves on a failure of a kernel that fails every case;
# its replay and the fuzz input's replay must describe the same case and the same first bad element.
# Usage: fuzz_replay_test.sh NVFP4CHECK KERNEL_FUZZER WRONG_PLUGIN CASE_FILE
set -euo pipefail
program=$1 fuzzer=$2 plugin=$3 case_input=$4
kernel=unwritten_host
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# What the programs put in the temporary folder (a failing replay's error maps) goes with it.
export TMPDIR="$dir/tmp"
mkdir -p "$TMPDIR"
cd "$dir"

fail() { echo "FAILED: $*"; exit 1; }
# What a failure text says of its case: the case line and the first bad element, not file names.
described() { grep -E '^FAIL|^  case:|^  first bad element|^  during:' "$1" || true; }

# fuzzer_problem INPUT: the case file the fuzzer saved for INPUT (it fails on every case).
fuzzer_problem() {
  rm -rf "$dir/fz" && mkdir "$dir/fz"
  set +e
  NVFP4_FUZZ_PLUGIN=$plugin NVFP4_FUZZ_KERNEL=$kernel NVFP4_FUZZ_CASE_DIR=$dir/fz "$fuzzer" "$1" >"$dir/fuzzer.out" 2>&1
  set -e
  local saved
  saved=$(sed -n 's/^case file: //p' "$dir/fuzzer.out" | head -n 1)
  [ -n "$saved" ] && [ -f "$saved" ] || { cat "$dir/fuzzer.out"; fail "the fuzzer saved no failing case for $1"; }
  echo "$saved"
}
# same_problem NAME INPUT: replaying INPUT as a fuzz input fails as the fuzzer's saved case does.
same_problem() {
  local name=$1 input=$2 saved
  saved=$(fuzzer_problem "$input")
  set +e
  "$program" replay "$saved" --plugin "$plugin" --kernel $kernel --case-dir "$dir/maps" >"$dir/$name.saved" 2>&1
  "$program" replay --fuzz-input "$input" --plugin "$plugin" --kernel $kernel --case-dir "$dir/maps" \
    >"$dir/$name.replayed" 2>&1
  set -e
  described "$dir/$name.saved" >"$dir/$name.a"
  described "$dir/$name.replayed" >"$dir/$name.b"
  [ -s "$dir/$name.a" ] || { cat "$dir/$name.saved"; fail "$name: the fuzzer's case did not fail"; }
  if ! diff "$dir/$name.a" "$dir/$name.b"; then
    cat "$dir/$name.replayed"
    fail "$name: replay --fuzz-input checked another problem than the fuzzer"
  fi
  echo "$name: $(grep '^  case:' "$dir/$name.a")"
}

# A case file given as a fuzz input is a case file to both.
same_problem case_file "$case_input"
grep -q 'gemm m=129 n=7 k=80 l=3' "$dir/case_file.a" || fail "the case file's own shape was not checked"

# Printable text that is no case: the fuzzer runs nothing, and the replay says it checked nothing.
printf 'hello world, this is text' >text.in
set +e
NVFP4_FUZZ_PLUGIN=$plugin NVFP4_FUZZ_KERNEL=$kernel NVFP4_FUZZ_CASE_DIR=$dir/fz "$fuzzer" text.in >fuzzer_text.out 2>&1
rc_fuzzer=$?
"$program" replay --fuzz-input text.in --plugin "$plugin" --kernel $kernel >replay_text.out 2>&1
rc_replay=$?
set -e
[ "$rc_fuzzer" = 0 ] || { cat fuzzer_text.out; fail "the fuzzer ran something for a text that is no case"; }
[ "$rc_replay" = 2 ] || { cat replay_text.out; fail "replay of a text that is no case: exit $rc_replay, expected 2"; }
grep -q "no case file" replay_text.out || { cat replay_text.out; fail "the replay does not say why nothing ran"; }

# A binary input drawn under a lowered cap: the replay draws under the same cap.
python3 -c 'import hashlib,sys; sys.stdout.buffer.write(b"\x01" + hashlib.sha256(b"nvfp4").digest() * 2)' >raw.in
same_problem raw_default raw.in
export NVFP4_FUZZ_MAX_PRODUCTS=4096
same_problem raw_capped raw.in
unset NVFP4_FUZZ_MAX_PRODUCTS
! diff -q raw_default.a raw_capped.a >/dev/null || fail "the cap does not change this input's draw: the test proves nothing"
echo "replay --fuzz-input checks what the fuzzer checked"
