// A CUDA toolkit library loaded by the code that calls it, on its first call, instead of linked.
// cuBLAS and cuBLASLt are over half a gigabyte together; linked, they cost every process that
// loads the program or a plugin about half a second of CPU at start (24,000 page faults), though
// only one kernel calls them. The caller lists the functions it uses:
//
//   #define MY_FUNCTIONS(X) X(cublasCreate) X(cublasSetStream)
//   struct MyApi { MY_FUNCTIONS(NVFP4_LIBRARY_POINTER) };
//   const MyApi* api = load_cuda_library<MyApi>("libcublas", CUBLAS_VER_MAJOR, &error,
//       [](void* lib, MyApi& a) { MY_FUNCTIONS(NVFP4_LIBRARY_RESOLVE) return std::string(); });
#pragma once

#include <dlfcn.h>

#include <string>

// A member holding a pointer to the declared function `name`.
#define NVFP4_LIBRARY_POINTER(name) decltype(&::name) name = nullptr;
// Inside a resolver (void* lib, Api& a): looks `name` up, returning why not when it is missing.
#define NVFP4_LIBRARY_RESOLVE(name)                                    \
  a.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));     \
  if (a.name == nullptr) return std::string("it has no " #name);

namespace nvfp4::kern {

// `stem`.so.`major` by its soname (the program's run path, LD_LIBRARY_PATH), else from the
// toolkit this was built with; nullptr with the reason in *error when neither loads.
inline void* open_cuda_library(const std::string& stem, int major, std::string* error) {
  const std::string soname = stem + ".so." + std::to_string(major);
  void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef NVFP4_CUDA_LIBRARY_DIR
  if (library == nullptr) library = dlopen((NVFP4_CUDA_LIBRARY_DIR "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
  if (library == nullptr) *error = "cannot load " + soname + ": " + dlerror();
  return library;
}

// The library's functions, loaded and resolved once per process (and per Api type) and kept to
// the end (handles created through them live that long); nullptr with the reason in *error.
template <class Api, class Resolve>
const Api* load_cuda_library(const char* stem, int major, std::string* error, Resolve resolve) {
  static std::string load_error;
  static const Api* api = [&]() -> const Api* {
    void* library = open_cuda_library(stem, major, &load_error);
    if (library == nullptr) return nullptr;
    static Api loaded;
    const std::string missing = resolve(library, loaded);
    if (missing.empty()) return &loaded;
    load_error = stem + std::string(": ") + missing;
    return nullptr;
  }();
  if (api == nullptr) *error = load_error;
  return api;
}

}  // namespace nvfp4::kern
