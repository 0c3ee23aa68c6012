"""Builds the nvfp4check wheel: the Python package plus libnvfp4check_capi.so in nvfp4check/_lib/.

The library is a CMake target of the repository (it needs the project's C++ dependencies). It is
taken, in order, from
  1. $NVFP4CHECK_LIBRARY (a built libnvfp4check_capi.so, e.g. one carried to another machine);
  2. the newest <repository>/build/*/python/libnvfp4check_capi.so;
  3. a build made here: cmake into <repository>/build/python-package, target nvfp4check_capi
     (CUDA where nvcc is found, as the `default` preset; $NVFP4CHECK_CMAKE_ARGS adds arguments).
Shared libraries it needs that a base system lacks (libfmt, libpng: what scripts/device-pack.sh
carries too) are bundled beside it; the package loads them first.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 has its own; before that it is the wheel package's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # pragma: no cover - then pip cannot build a wheel here anyway
        bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LIBRARY = "libnvfp4check_capi.so"
# Libraries every machine that runs the suite has (glibc, the compiler runtimes, zlib, CUDA's):
# never bundled. Anything else the library links is copied beside it.
BASE_LIBRARIES = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so",
                  "libstdc++.so", "libgcc_s.so", "libgomp.so", "libz.so", "libcuda.so", "libcudart.so",
                  "libcublas", "libnvidia", "libnvrtc")


def log(text):
    print(f"nvfp4check setup: {text}", file=sys.stderr)


def build_library():
    build_dir = os.path.join(REPO, "build", "python-package")
    args = ["cmake", "-S", REPO, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DNVFP4_TESTS=OFF",
            "-DNVFP4_BENCH=OFF", "-DNVFP4_MUTANTS=OFF"]
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    args += os.environ.get("NVFP4CHECK_CMAKE_ARGS", "").split()
    log("building the C API: " + " ".join(args))
    subprocess.check_call(args)
    jobs = str(os.cpu_count() or 2)
    subprocess.check_call(["cmake", "--build", build_dir, "--target", "nvfp4check_capi", "-j", jobs])
    return os.path.join(build_dir, "python", LIBRARY)


def find_library():
    env = os.environ.get("NVFP4CHECK_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise SystemExit(f"NVFP4CHECK_LIBRARY={env}: no such file")
        return env
    built = glob.glob(os.path.join(REPO, "build", "*", "python", LIBRARY))
    if built:
        return max(built, key=os.path.getmtime)
    if not os.path.isfile(os.path.join(REPO, "CMakeLists.txt")):
        raise SystemExit(f"{LIBRARY} not found: set NVFP4CHECK_LIBRARY (no repository at {REPO} to build it in)")
    return build_library()


def non_base_dependencies(library):
    """Paths of the shared libraries `library` links that are not BASE_LIBRARIES (from ldd)."""
    try:
        out = subprocess.run(["ldd", library], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        log(f"ldd {library} failed ({e}); bundling nothing beside it")
        return []
    deps = []
    for line in out.splitlines():
        parts = line.split("=>")
        if len(parts) != 2:
            continue
        name, target = parts[0].strip(), parts[1].split("(")[0].strip()
        if target == "not found":
            raise SystemExit(f"{library} needs {name}, which is not found here (set LD_LIBRARY_PATH)")
        if target and not name.startswith(BASE_LIBRARIES):
            deps.append(target)
    return deps


class build_py_with_library(build_py):
    def run(self):
        super().run()
        library = find_library()
        log(f"packaging {library}")
        target = os.path.join(self.build_lib, "nvfp4check", "_lib")
        os.makedirs(target, exist_ok=True)
        shutil.copy2(library, os.path.join(target, LIBRARY))
        for dep in non_base_dependencies(library):
            log(f"bundling {dep}")
            shutil.copy2(dep, os.path.join(target, os.path.basename(dep)))


cmdclass = {"build_py": build_py_with_library}
if bdist_wheel is not None:
    class bdist_wheel_platform(bdist_wheel):
        # Holds a native library (loaded with ctypes, not a CPython extension): any Python 3, one
        # platform.
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = bdist_wheel_platform

setup(cmdclass=cmdclass)
