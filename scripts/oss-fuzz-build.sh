#!/usr/bin/env bash
# OSS-Fuzz / ClusterFuzzLite build script (their build.sh): builds the three fuzz targets with
# the infrastructure's compilers, flags and fuzzing engine, and ships into $OUT
#   <name>_fuzzer                       the target (case_file, reference, kernel)
#   <name>_fuzzer_seed_corpus.zip       corpus/<name>/ without its README
#   <name>_fuzzer.options               libFuzzer options (input size limit, timeouts)
#   lib/                                shared libraries the targets need beyond the base image
# Honoured: $CC $CXX $CFLAGS $CXXFLAGS $LIB_FUZZING_ENGINE $OUT, and $WORK (scratch; default a
# temporary folder). No CUDA there: the `kernel` target checks the host kernels. Outside
# OSS-Fuzz, set the variables by hand, e.g.
#   CC=clang-14 CXX=clang++-14 CFLAGS="-O1 -fsanitize=address,fuzzer-no-link" \
#   CXXFLAGS="$CFLAGS" LIB_FUZZING_ENGINE=-fsanitize=fuzzer OUT=/tmp/out scripts/oss-fuzz-build.sh
set -euo pipefail

: "${CC:?set CC}" "${CXX:?set CXX}" "${LIB_FUZZING_ENGINE:?set LIB_FUZZING_ENGINE}" "${OUT:?set OUT}"
CFLAGS="${CFLAGS:-}"
CXXFLAGS="${CXXFLAGS:-}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${WORK:-$(mktemp -d)}/nvfp4check-oss-fuzz"
mkdir -p "$OUT" "$work"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)

# The project's own sanitizer and coverage flags stay off: $CFLAGS/$CXXFLAGS carry the
# infrastructure's choice (ASan, UBSan or MSan; fuzzer-no-link or an engine's own). $ORIGIN/lib
# lets the targets find the libraries shipped beside them.
cmake -S "$src" -B "$work" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DCMAKE_BUILD_RPATH='$ORIGIN/lib' \
  -DNVFP4_FUZZ=ON -DNVFP4_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" -DNVFP4_SANITIZE=OFF \
  -DNVFP4_CUDA=OFF -DNVFP4_TESTS=OFF -DNVFP4_BENCH=OFF -DNVFP4_MUTANTS=OFF
cmake --build "$work" --target case_file_fuzzer reference_fuzzer kernel_fuzzer -j"$(nproc)"

# Per target: the largest input worth mutating (the decoders ignore bytes past the data a
# problem needs; the case-file target skips inputs over 64 KiB) and libFuzzer's limits.
declare -A max_len=([case_file]=65536 [reference]=8192 [kernel]=32768)
mkdir -p "$OUT/lib"
for name in case_file reference kernel; do
  cp "$work/fuzz/${name}_fuzzer" "$OUT/"
  rm -f "$OUT/${name}_fuzzer_seed_corpus.zip"
  (cd "$src/corpus/$name" && find . -type f ! -name '*.md' -print | sort |
     zip -q -j "$OUT/${name}_fuzzer_seed_corpus.zip" -@)
  cat > "$OUT/${name}_fuzzer.options" <<EOF
[libfuzzer]
max_len = ${max_len[$name]}
timeout = 60
rss_limit_mb = 2560
EOF
  # Shared libraries outside the C runtime (fmt, libpng, the OpenMP runtime...) travel in lib/.
  ldd "$OUT/${name}_fuzzer" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;
      *) cp -L -n "$lib" "$OUT/lib/" ;;
    esac
  done
done
echo "oss-fuzz-build.sh: built into $OUT:"
ls -1 "$OUT" "$OUT/lib"
