# Sourced on the device machine, in the repository copy: makes the carried gpu build usable at the
# absolute paths ctest recorded here (the copy is linked at the original source path). A pack
# carried compressed (.carry/*.tar.xz, as device-pack.sh writes it) is unpacked first.
for t in .carry/gpu.tar.xz .carry/fuzz.tar.xz; do
  d=.carry/$(basename "$t" .tar.xz)
  # Once per carried tarball (later sources, maybe while the build runs, leave it alone).
  if [ -f "$t" ] && [ "$t" -nt "$d/.unpacked" ]; then rm -rf "$d" && tar -C .carry -xJf "$t" && touch "$d/.unpacked"; fi
done
src=$(cat .carry/gpu/source_dir)
if [ "$src" != "$PWD" ]; then
  mkdir -p "$(dirname "$src")"
  [ -e "$src" ] || ln -sfn "$PWD" "$src"
fi
mkdir -p build
ln -sfn "$PWD/.carry/gpu/build" build/gpu
export LD_LIBRARY_PATH="$PWD/.carry/gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NVFP4_BUILD="$src/build/gpu"
module=$(cat .carry/gpu/cmake-modules/path)
if [ ! -f "$module" ]; then
  mkdir -p "$(dirname "$module")" && cp .carry/gpu/cmake-modules/GoogleTestAddTests.cmake "$module"
fi
[ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64"
export NVFP4_PYTHON=${NVFP4_PYTHON:-$(command -v python3)}  # the interpreter with torch and pytest there
