"""Finds and loads libnvfp4check_capi.so (python/capi/nvfp4check_capi.h) and declares its functions.

Where the library is looked for, in order:
  1. $NVFP4CHECK_LIBRARY (a path to the .so);
  2. the installed package's _lib/ folder (pip copies it there, with the shared libraries it
     needs that are not part of a base system, which are loaded first);
  3. a source checkout: <repository>/build/*/python/libnvfp4check_capi.so, the newest.
"""
import ctypes
import glob
import json
import os

from . import _abi

LIBRARY_NAME = "libnvfp4check_capi.so"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class LibraryNotFound(ImportError):
    pass


def candidate_paths():
    """Where the library may be, most preferred first (existing paths only)."""
    env = os.environ.get("NVFP4CHECK_LIBRARY")
    if env:
        return [env]
    found = []
    packaged = os.path.join(_PACKAGE_DIR, "_lib", LIBRARY_NAME)
    if os.path.exists(packaged):
        found.append(packaged)
    repo = os.path.dirname(os.path.dirname(_PACKAGE_DIR))
    built = glob.glob(os.path.join(repo, "build", "*", "python", LIBRARY_NAME))
    found.extend(sorted(built, key=os.path.getmtime, reverse=True))
    return found


def _preload_bundled(lib_dir):
    # Shared libraries pip bundled beside ours (e.g. libfmt on a machine without it): loaded
    # globally first, so the dynamic linker resolves our library's needs to them by soname.
    for path in sorted(glob.glob(os.path.join(lib_dir, "*.so*"))):
        if os.path.basename(path) != LIBRARY_NAME:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


class CApi:
    """The loaded library, its functions typed, and small wrappers that free what it returns."""

    def __init__(self, path):
        if os.environ.get("NVFP4CHECK_LIBRARY") is None and os.path.dirname(path).endswith("_lib"):
            _preload_bundled(os.path.dirname(path))
        self.path = path
        lib = ctypes.CDLL(path)
        self._lib = lib
        cp = ctypes.c_void_p  # returned strings are freed by us: keep the raw pointer
        lib.nvfp4check_capi_version.restype = ctypes.c_int
        lib.nvfp4check_build_info.restype = cp
        lib.nvfp4check_clock_seed.restype = ctypes.c_uint64
        lib.nvfp4check_clock_seed.argtypes = []
        lib.nvfp4check_stream_note.restype = cp
        lib.nvfp4check_stream_note.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
        lib.nvfp4check_check.restype = cp
        lib.nvfp4check_check.argtypes = [ctypes.POINTER(_abi.nvfp4_kernel_info), _abi.RUN_FN, ctypes.c_void_p,
                                         ctypes.c_char_p]
        lib.nvfp4check_check_plugin.restype = cp
        lib.nvfp4check_check_plugin.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
        lib.nvfp4check_replay.restype = cp
        lib.nvfp4check_replay.argtypes = [ctypes.c_char_p, ctypes.POINTER(_abi.nvfp4_kernel_info), _abi.RUN_FN,
                                          ctypes.c_void_p, ctypes.c_char_p]
        lib.nvfp4check_reference.restype = cp
        lib.nvfp4check_reference.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint16)),
                                             ctypes.POINTER(ctypes.c_int64)]
        lib.nvfp4check_unsupported_reason.restype = cp
        lib.nvfp4check_unsupported_reason.argtypes = [ctypes.POINTER(_abi.nvfp4_kernel_info),
                                                      ctypes.POINTER(_abi.nvfp4_problem)]
        lib.nvfp4check_kernel_failed.restype = None
        lib.nvfp4check_kernel_failed.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        lib.nvfp4check_serve.restype = ctypes.c_int
        lib.nvfp4check_serve.argtypes = [ctypes.POINTER(_abi.nvfp4_kernel_info), _abi.RUN_FN, ctypes.c_void_p,
                                         ctypes.c_int, ctypes.c_double]
        lib.nvfp4check_serve_refused.restype = ctypes.c_int
        lib.nvfp4check_serve_refused.argtypes = [ctypes.c_int, ctypes.c_char_p]
        lib.nvfp4check_free.restype = None
        lib.nvfp4check_free.argtypes = [ctypes.c_void_p]
        version = lib.nvfp4check_capi_version()
        if version != 1:
            raise ImportError(f"{path} implements C API version {version}; this package needs version 1")

    def _text(self, raw):
        try:
            return ctypes.string_at(raw).decode("utf-8", errors="replace")
        finally:
            self._lib.nvfp4check_free(raw)

    def _json(self, raw):
        return json.loads(self._text(raw))

    def build_info(self):
        return self._json(self._lib.nvfp4check_build_info())

    def clock_seed(self):
        return int(self._lib.nvfp4check_clock_seed())

    def check(self, info, run, options):
        return self._json(self._lib.nvfp4check_check(ctypes.byref(info), run, None, _encode(options)))

    def check_plugin(self, plugin, kernel, options):
        return self._json(self._lib.nvfp4check_check_plugin(os.fsencode(plugin), kernel.encode(), _encode(options)))

    def replay(self, path, info, run, options):
        return self._json(self._lib.nvfp4check_replay(os.fsencode(path), ctypes.byref(info), run, None,
                                                      _encode(options)))

    def reference(self, path):
        """(header dict, list of FP16 words as a ctypes array copy) of a case file."""
        out = ctypes.POINTER(ctypes.c_uint16)()
        count = ctypes.c_int64(0)
        header = self._json(self._lib.nvfp4check_reference(os.fsencode(path), ctypes.byref(out), ctypes.byref(count)))
        if not out:
            return header, None
        try:
            words = (ctypes.c_uint16 * count.value)()
            ctypes.memmove(words, out, 2 * count.value)
        finally:
            self._lib.nvfp4check_free(out)
        return header, words

    def stream_note(self, check, mine, rerun):
        """The engine's note for a failure of `check` on stream `mine` that passed when run again
        as `rerun`; "" when no stream ordering explains a failure of that check."""
        return self._text(self._lib.nvfp4check_stream_note(check.encode(), mine.encode(), rerun.encode()))

    def serve(self, info, run, fd, timeout_s):
        """Serves the kernel to a parent `nvfp4check run` over fd; returns the exit code."""
        return self._lib.nvfp4check_serve(ctypes.byref(info), run, None, fd, timeout_s)

    def serve_refused(self, fd, why):
        """Tells the parent on fd why the kernel process cannot serve (its file did not import)."""
        return self._lib.nvfp4check_serve_refused(fd, why.encode("utf-8", errors="replace"))

    def unsupported_reason(self, info, problem):
        """Why problem (an nvfp4_problem) lies outside what info declares; "" when inside."""
        return self._text(self._lib.nvfp4check_unsupported_reason(ctypes.byref(info), ctypes.byref(problem)))

    def kernel_failed(self, check, message):
        self._lib.nvfp4check_kernel_failed(check.encode(), message.encode("utf-8", errors="replace"))


def _encode(options):
    return json.dumps({k: v for k, v in options.items() if v is not None}).encode()


_loaded = None


def load():
    """The C API, loaded once per process."""
    global _loaded
    if _loaded is None:
        paths = candidate_paths()
        if not paths:
            raise LibraryNotFound(
                f"{LIBRARY_NAME} was not found: set NVFP4CHECK_LIBRARY to its path, install the package with "
                "`pip install --no-build-isolation ./python` (which builds or finds it), or build the target "
                "nvfp4check_capi (cmake --build --preset nocuda --target nvfp4check_capi)")
        path = paths[0]
        if not os.path.exists(path):
            raise LibraryNotFound(f"NVFP4CHECK_LIBRARY={path}: no such file")
        _loaded = CApi(path)
    return _loaded
