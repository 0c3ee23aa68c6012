#!/usr/bin/env bash
# Builds the `gpu` preset here and packs what the H200 machine needs into .carry/gpu (git-ignored):
# the build tree without objects, stripped, plus the few shared libraries its image lacks; then
# the same compressed, .carry/gpu.tar.xz (a tenth of the size: the device tool carries 64 MiB a
# call). With --fuzz, also the `fuzz-campaign` preset's kernel_fuzzer and nvfp4check (libFuzzer
# without sanitizers: campaigns want executions), .carry/fuzz.tar.xz.
# Carry the .tar.xz files (or `.carry` whole) with the device tool's run and start the command
# with scripts/gpu-env.sh, which unpacks them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzz=0
[[ "${1:-}" == --fuzz ]] && fuzz=1
cmake --preset gpu >/dev/null
cmake --build --preset gpu -j "$(nproc)"
rm -rf .carry/gpu
mkdir -p .carry/gpu/lib
cp -a build/gpu .carry/gpu/build
find .carry/gpu/build \( -name '*.o' -o -name '*.a' -o -name '.ninja_*' -o -name 'build.ninja' \) -delete
find .carry/gpu/build -type d -name CMakeFiles -prune -exec rm -rf {} +
# What a local ctest run wrote into the build tree (case folders, pytest's and pip's folders):
# tens of MB that the device machine writes again, and the device tool carries 64 MiB a call.
rm -rf .carry/gpu/build/mutation/{mutants-cases,nvfp4check-cases,jobs-same-table} \
  .carry/gpu/build/python/{pytest-cpu,pip-install-test}
find .carry/gpu/build -type f -perm -u+x ! -path .carry/gpu/build/cli/nvfp4check \
  -exec strip --strip-unneeded {} + 2>/dev/null || true  # scripts just fail to strip
# The program keeps its symbol table (half a MB), so a perf profile taken on the device names its
# functions, not addresses.
strip --strip-debug .carry/gpu/build/cli/nvfp4check
for lib in libfmt.so.9 libpng16.so.16 libbenchmark.so.1debian; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .carry/gpu/lib/
done
# ctest's test-time discovery of GoogleTest cases includes this module from the CMake that
# configured the build; the device machine has another CMake, so the module travels too.
mkdir -p .carry/gpu/cmake-modules
gtest_module=$(cmake --system-information 2>/dev/null | sed -n 's/^CMAKE_ROOT "\(.*\)"$/\1/p')/Modules/GoogleTestAddTests.cmake
cp "$gtest_module" .carry/gpu/cmake-modules/
echo "$gtest_module" > .carry/gpu/cmake-modules/path
pwd > .carry/gpu/source_dir
# Slurm and munge for a machine that cannot install them (gpu-check.sh's slurm step unpacks it).
rm -rf .carry/slurm.tar.xz /tmp/nvfp4-slurm-bundle
if bash scripts/slurm-bundle.sh /tmp/nvfp4-slurm-bundle; then
  tar -C /tmp -cJf .carry/slurm.tar.xz nvfp4-slurm-bundle && rm -rf /tmp/nvfp4-slurm-bundle
fi
tar -C .carry -c gpu | xz -T0 -6 > .carry/gpu.tar.xz
rm -rf .carry/fuzz .carry/fuzz.tar.xz
if [[ $fuzz -eq 1 ]]; then
  cmake --preset fuzz-campaign >/dev/null
  cmake --build --preset fuzz-campaign -j "$(nproc)" --target kernel_fuzzer nvfp4check
  mkdir -p .carry/fuzz/cli .carry/fuzz/fuzz .carry/fuzz/lib
  strip --strip-debug -o .carry/fuzz/cli/nvfp4check build/fuzz-campaign/cli/nvfp4check
  strip --strip-debug -o .carry/fuzz/fuzz/kernel_fuzzer build/fuzz-campaign/fuzz/kernel_fuzzer
  cp .carry/gpu/lib/* .carry/fuzz/lib/
  cp -L /usr/lib/llvm-14/lib/libomp.so.5 .carry/fuzz/lib/  # clang's OpenMP: not in the device image
  tar -C .carry -c fuzz | xz -T0 -6 > .carry/fuzz.tar.xz && rm -rf .carry/fuzz
fi
du -sh .carry/gpu .carry/*.tar.xz
