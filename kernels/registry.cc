// The registry: built-in kernels and plugins, each checked against the ABI when added, and
// whether a kernel can run on this machine.
#include "kernels/registry.h"

#include <dlfcn.h>

#include <cstring>
#include <numeric>
#include <set>
#include <sstream>

#include "kernels/builtin.h"
#include "reference/op_table.h"  // the ops each ABI version knows: a plain table, no code

#if defined(NVFP4_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace nvfp4 {
namespace {

bool valid_name(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* c = name; *c; ++c) {
    const bool ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
    if (!ok) return false;
  }
  return true;
}

constexpr uint32_t kKnownLayouts = (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED);
constexpr uint32_t kV1Flags = NVFP4_FLAG_SIGNED_SCALES | NVFP4_FLAG_NONDETERMINISTIC |
                              NVFP4_FLAG_FP16_ACCUMULATE | NVFP4_FLAG_SATURATES | NVFP4_FLAG_EXACT |
                              NVFP4_FLAG_UNIT_ALPHA | NVFP4_FLAG_MMA_ACCUMULATE;
constexpr uint32_t kV2Flags = kV1Flags | NVFP4_FLAG_GROUPS_PACKED;
constexpr uint32_t kKnownOutTypes = (1u << NVFP4_OUT_FP16) | (1u << NVFP4_OUT_BF16) | (1u << NVFP4_OUT_FP32);
constexpr uint32_t kV3Flags = kV2Flags | NVFP4_FLAG_QUANT_2D | NVFP4_FLAG_ROW_GLOBAL_SCALE | NVFP4_FLAG_STOCHASTIC |
                              NVFP4_FLAG_SF_PADDING_KEPT;
constexpr uint32_t kV3OutTypes = kKnownOutTypes | (1u << NVFP4_OUT_NVFP4);
constexpr uint32_t kKnownFormats = (1u << NVFP4_FORMAT_NVFP4) | (1u << NVFP4_FORMAT_MXFP4) |
                                   (1u << NVFP4_FORMAT_MXFP8_E4M3) | (1u << NVFP4_FORMAT_MXFP8_E5M2);
constexpr uint32_t kKnownInTypes = (1u << NVFP4_IN_FP16) | (1u << NVFP4_IN_BF16) | (1u << NVFP4_IN_FP32);
constexpr uint32_t kKnownRecipes = 0xFEu;  // bits 1..7: NVFP4_RECIPE_TE .. NVFP4_RECIPE_MX_EVEN

// The size of a provider's info struct by the version it declares (0 for an unknown version).
size_t info_bytes(uint32_t version) {
  switch (version) {
    case 1: return kAbiV1InfoBytes;
    case 2: return kAbiV2InfoBytes;
    case 3: return sizeof(nvfp4_kernel_info);
    default: return 0;
  }
}
// More kernels than any library plausibly holds: a larger count is garbage, not a catalogue.
constexpr int kMaxKernelsPerProvider = 4096;
// Names are identifiers in reports and file names, not payloads.
constexpr size_t kMaxNameLength = 64;
// The suite refuses to allocate more than this for one case (reference/case_file.h's limit).
constexpr uint64_t kMaxCaseBytes = uint64_t(1) << 30;

// Flags that cannot hold together: an exact kernel has no accumulation error to model and gives
// one answer.
constexpr uint32_t kExactExcludes = NVFP4_FLAG_FP16_ACCUMULATE | NVFP4_FLAG_MMA_ACCUMULATE | NVFP4_FLAG_NONDETERMINISTIC;

// The provider's info as a zero-filled current struct, reading only as many bytes as the
// version it declares has (a version-1 plugin's struct ends at kAbiV1InfoBytes, a version-2
// one's at kAbiV2InfoBytes), and its abi_version (the first field, in every version) says
// which. Empty for an unknown version; the caller reports it.
std::shared_ptr<const nvfp4_kernel_info> copy_info(const nvfp4_kernel_info* from) {
  uint32_t version = 0;
  std::memcpy(&version, from, sizeof version);
  const size_t bytes = info_bytes(version);
  if (bytes == 0) return nullptr;
  auto copy = std::make_shared<nvfp4_kernel_info>();
  std::memset(copy.get(), 0, sizeof *copy);
  std::memcpy(copy.get(), from, bytes);
  return copy;
}

// Version 3's declarations: empty when they hold together, else why not.
std::string v3_info_error(const nvfp4_kernel_info& info) {
  std::ostringstream why;
  const auto bad_set = [&](const char* field, uint32_t value, uint32_t known, const char* members) {
    if (!(value & ~known)) return false;
    why << "declares " << field << " 0x" << std::hex << value << ": it must be a set of " << members;
    return true;
  };
  if (bad_set("a_formats", info.a_formats, kKnownFormats, "(1u << NVFP4_FORMAT_*) (0 means NVFP4 only)") ||
      bad_set("b_formats", info.b_formats, kKnownFormats, "(1u << NVFP4_FORMAT_*) (0 means NVFP4 only)") ||
      bad_set("q_formats", info.q_formats, kKnownFormats, "(1u << NVFP4_FORMAT_*) (0 means NVFP4 only)") ||
      bad_set("in_types", info.in_types, kKnownInTypes, "(1u << NVFP4_IN_FP16), BF16 and FP32") ||
      bad_set("recipes", info.recipes, kKnownRecipes, "(1u << NVFP4_RECIPE_*)"))
    return why.str();
  const bool quantizes = (info.ops >> NVFP4_OP_QUANTIZE) & 1u;
  const bool block_scaled_out = (info.out_types >> NVFP4_OUT_NVFP4) & 1u;
  // Operand formats are the GEMM family's (every op of it: GEMV, GEMM, grouped and dual GEMM); a
  // block-scaled output quantizes results of NVFP4 operands only.
  const uint32_t gemm_ops = info.ops & ~(1u << NVFP4_OP_QUANTIZE);
  const uint32_t mx_formats = ~(1u << NVFP4_FORMAT_NVFP4);
  if (((info.a_formats | info.b_formats) & mx_formats) && gemm_ops == 0)
    return "declares MX operand formats (a_formats/b_formats) but no op of the GEMM family that reads them";
  const auto has_nvfp4 = [](uint32_t set) { return set == 0 || ((set >> NVFP4_FORMAT_NVFP4) & 1u); };
  if (block_scaled_out && (!has_nvfp4(info.a_formats) || !has_nvfp4(info.b_formats)))
    return "declares NVFP4_OUT_NVFP4 but not NVFP4 operands for A and B: a block-scaled output is of NVFP4 operands";
  if (quantizes && info.in_types == 0)
    return "declares NVFP4_OP_QUANTIZE but no in_types: say which input types it reads";
  if ((quantizes || block_scaled_out) && info.recipes == 0)
    return "declares NVFP4_OP_QUANTIZE or NVFP4_OUT_NVFP4 but no recipes: say which quantization recipe it follows";
  return "";
}

// "(1u << NVFP4_OP_GEMV), GEMM and DUAL_GEMM (QUANTIZE needs ABI version 3)": the ops of ABI
// version `version` by their NVFP4_OP_* names, and those that need a later version.
std::string known_ops_text(uint32_t version) {
  const auto abi_name = [](const OpInfo& o) {
    std::string name = o.name;
    for (char& c : name) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    return name;
  };
  std::vector<std::string> known;
  std::string later;
  for (const OpInfo& o : kOpTable) {
    if (o.abi_version <= version) {
      known.push_back(known.empty() ? "(1u << NVFP4_OP_" + abi_name(o) + ")" : abi_name(o));
    } else {
      later += (later.empty() ? " (" : ", ") + abi_name(o) + " needs ABI version " + std::to_string(o.abi_version);
    }
  }
  std::string text;
  for (size_t i = 0; i < known.size(); ++i) text += (i == 0 ? "" : i + 1 == known.size() ? " and " : ", ") + known[i];
  return text + (later.empty() ? "" : later + ")");
}

// Empty when info is a usable ABI v1 or v2 description, else why not. The name is checked apart.
std::string info_error(const nvfp4_kernel_info& info) {
  std::ostringstream why;
  const bool v2 = info.abi_version == 2, v3 = info.abi_version == 3;
  const uint32_t known_ops = ops_of_version(info.abi_version);
  const uint32_t known_flags = v3 ? kV3Flags : v2 ? kV2Flags : kV1Flags;
  const uint32_t known_out_types = v3 ? kV3OutTypes : kKnownOutTypes;
  if (info_bytes(info.abi_version) == 0) {
    why << "declares ABI version " << info.abi_version << ", but this nvfp4check reads ABI versions 1 to 3 "
        << "(this header's is " << NVFP4_ABI_VERSION << "; rebuild the plugin against its nvfp4_kernel_abi.h)";
  } else if (info.memory != NVFP4_MEMORY_HOST && info.memory != NVFP4_MEMORY_CUDA) {
    why << "declares memory " << info.memory << ", which is neither NVFP4_MEMORY_HOST (1) nor NVFP4_MEMORY_CUDA (2)";
  } else if (info.ops == 0 || (info.ops & ~known_ops)) {
    why << "declares ops 0x" << std::hex << info.ops
        << ": it must be a nonempty set of " << known_ops_text(info.abi_version);
  } else if (info.sf_layouts == 0 || (info.sf_layouts & ~kKnownLayouts)) {
    why << "declares sf_layouts 0x" << std::hex << info.sf_layouts
        << ": it must be a nonempty set of (1u << NVFP4_SF_LINEAR) and (1u << NVFP4_SF_PERMUTED)";
  } else if (info.m_multiple == 0 || info.n_multiple == 0 || info.k_multiple == 0) {
    why << "declares a shape multiple of 0 (m " << info.m_multiple << ", n " << info.n_multiple << ", k "
        << info.k_multiple << "); 1 means no constraint";
  } else if (info.flags & ~known_flags) {
    why << "declares unknown flag bits 0x" << std::hex << (info.flags & ~known_flags) << " that ABI version "
        << std::dec << info.abi_version << " does not define";
  } else if (info.out_types & ~known_out_types) {
    why << "declares out_types 0x" << std::hex << info.out_types
        << (v3 ? ": it must be a set of (1u << NVFP4_OUT_FP16), BF16, FP32 and NVFP4 (0 means FP16 only)"
               : ": it must be a set of (1u << NVFP4_OUT_FP16), BF16 and FP32 (0 means FP16 only; NVFP4 "
                 "output needs ABI version 3)");
  } else if (const std::string v3_why = v3 ? v3_info_error(info) : ""; !v3_why.empty()) {
    why << v3_why;
  } else if ((info.flags & NVFP4_FLAG_EXACT) && (info.flags & kExactExcludes)) {
    why << "declares NVFP4_FLAG_EXACT together with flags 0x" << std::hex << (info.flags & kExactExcludes)
        << " (FP16_ACCUMULATE, MMA_ACCUMULATE, NONDETERMINISTIC) that contradict exact accumulation";
  } else if (info.memory == NVFP4_MEMORY_HOST && info.min_sm != 0) {
    why << "is a host kernel declaring min_sm " << info.min_sm << "; min_sm is for CUDA kernels (0 for host ones)";
  } else {
    // The smallest problem inside the declared multiples must be one the suite can allocate
    // (grouped: one group, whose multiples are per group; dual: B twice is still below A + B
    // of the same rows counted twice, so the GEMM bound is the one to keep).
    const uint64_t k = std::lcm<uint64_t>(info.k_multiple, 2);
    const bool gemm = info.ops & ~ops_with(kOpNIsOne);
    const uint64_t rows = uint64_t{info.m_multiple} + (gemm ? uint64_t{info.n_multiple} : 1);
    if (rows * k > kMaxCaseBytes)
      why << "declares shape multiples (m " << info.m_multiple << ", n " << info.n_multiple << ", k "
          << info.k_multiple << ") whose smallest problem needs more than 1 GiB of data";
  }
  return why.str();
}

}  // namespace

Registry Registry::with_builtins() {
  Registry r;
  r.add_provider(kern::builtin_kernel_count, kern::builtin_kernel_get, kern::builtin_kernel_run, "builtin");
  return r;
}

void Registry::add_provider(int (*count)(void), const nvfp4_kernel_info* (*get)(int),
                            int (*run)(int, const nvfp4_problem*), const std::string& origin,
                            const char* (*describe)(int)) {
  const std::string who = origin == "builtin" ? std::string("built-in kernels") : "plugin '" + origin + "'";
  if (count == nullptr || get == nullptr || run == nullptr)
    throw PluginError(who + ": a null entry point was given (count, get and run are all required)");
  const int n = count();
  if (n < 0 || n > kMaxKernelsPerProvider) {
    throw PluginError(who + ": nvfp4_kernel_count() returned " + std::to_string(n) + ", expected 0.." +
                      std::to_string(kMaxKernelsPerProvider));
  }
  // Validate every kernel before adding any, so a bad plugin leaves the registry unchanged.
  std::set<std::string> names;
  for (const Kernel& k : kernels_) names.insert(k.name());
  std::vector<Kernel> added;
  for (int i = 0; i < n; ++i) {
    const nvfp4_kernel_info* info = get(i);
    const std::string at = who + ", kernel index " + std::to_string(i);
    if (info == nullptr) throw PluginError(at + ": nvfp4_kernel_get(" + std::to_string(i) + ") returned NULL");
    if (info->name != nullptr && strnlen(info->name, kMaxNameLength + 1) > kMaxNameLength)
      throw PluginError(at + ": a kernel name longer than " + std::to_string(kMaxNameLength) + " characters");
    if (!valid_name(info->name)) {
      throw PluginError(at + ": invalid name " +
                        (info->name ? "'" + std::string(info->name) + "'" : std::string("NULL")) +
                        " (a kernel name is nonempty and uses only [a-z0-9_])");
    }
    const std::string name = info->name;
    std::shared_ptr<const nvfp4_kernel_info> copy = copy_info(info);
    nvfp4_kernel_info v1_view{};
    if (!copy) std::memcpy(&v1_view, info, kAbiV1InfoBytes);  // for the message only
    const std::string why = info_error(copy ? *copy : v1_view);
    if (!why.empty()) throw PluginError(at + " ('" + name + "'): " + why);
    if (!names.insert(name).second) {
      std::string first = "this provider";
      for (const Kernel& k : kernels_)
        if (k.name() == name) first = k.origin == "builtin" ? "a built-in kernel" : "plugin '" + k.origin + "'";
      throw PluginError(at + ": duplicate kernel name '" + name + "', already provided by " + first);
    }
    Kernel k;
    k.info_copy = std::move(copy);
    k.info = k.info_copy.get();
    k.index = i;
    k.run_fn = run;
    k.origin = origin;
    if (describe)
      if (const char* text = describe(i)) k.description = std::string(text, strnlen(text, 1024));
    added.push_back(k);
  }
  kernels_.insert(kernels_.end(), added.begin(), added.end());
}

void Registry::load_plugin(const std::string& path) {
  dlerror();  // clear any stale error so the message below is this call's
  // Never unloaded (RTLD_NODELETE): a plugin's libraries (the CUDA runtime, cuBLAS) keep static
  // state and may have work in flight, and once unloaded at exit a leak checker reports their
  // runtimes' allocations as leaks of an unknown module.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* err = dlerror();
    throw PluginError("cannot load plugin '" + path + "': " + (err ? err : "unknown dlopen error"));
  }
  std::shared_ptr<void> library(handle, [](void* h) { dlclose(h); });
  auto symbol = [&](const char* name) {
    dlerror();
    void* s = dlsym(handle, name);
    if (s == nullptr) {
      throw PluginError("plugin '" + path + "' does not export " + name +
                        " (a plugin exports nvfp4_kernel_count, nvfp4_kernel_get and nvfp4_kernel_run "
                        "with C linkage: wrap them in extern \"C\" when compiling as C++)");
    }
    return s;
  };
  auto count = reinterpret_cast<int (*)(void)>(symbol("nvfp4_kernel_count"));
  auto get = reinterpret_cast<const nvfp4_kernel_info* (*)(int)>(symbol("nvfp4_kernel_get"));
  auto run = reinterpret_cast<int (*)(int, const nvfp4_problem*)>(symbol("nvfp4_kernel_run"));
  // Optional: one line per kernel saying what it is (the mutants plugin names each one's bug).
  auto describe = reinterpret_cast<const char* (*)(int)>(dlsym(handle, "nvfp4_kernel_describe"));
  add_provider(count, get, run, path, describe);
  libraries_.push_back(std::move(library));
}

bool is_v1_problem(const nvfp4_problem& p) {
  return (p.op == NVFP4_OP_GEMV || p.op == NVFP4_OP_GEMM) && (p.out_type == 0 || p.out_type == NVFP4_OUT_FP16) &&
         p.b2 == nullptr && p.sfb2 == nullptr && p.groups == 0 && p.group == nullptr && p.group_device == nullptr;
}

bool is_v2_problem(const nvfp4_problem& p) {
  return p.op != NVFP4_OP_QUANTIZE && p.out_type != NVFP4_OUT_NVFP4 && (p.a_format == 0 || p.a_format == NVFP4_FORMAT_NVFP4) &&
         (p.b_format == 0 || p.b_format == NVFP4_FORMAT_NVFP4) && p.x == nullptr && p.q == nullptr && p.sfq == nullptr &&
         p.group_out == nullptr && p.group_out_device == nullptr;
}

int Kernel::run(const nvfp4_problem& p) const {
  if (info->abi_version >= 3) return run_fn(index, &p);
  // A version-2 kernel is handed only problems version 2 can express, and the problem itself
  // (what follows its fields holds nothing it could misread: the version-3 fields of a
  // version-2 problem are zero or NVFP4).
  if (info->abi_version == 2) return is_v2_problem(p) ? run_fn(index, &p) : NVFP4_UNSUPPORTED;
  if (!is_v1_problem(p)) return NVFP4_UNSUPPORTED;
  // Exactly the version-1 bytes, on the heap, so that reading past them is caught (ASan) rather
  // than finding this call's version-2 fields.
  std::unique_ptr<unsigned char[]> v1(new unsigned char[kAbiV1ProblemBytes]);
  std::memcpy(v1.get(), &p, kAbiV1ProblemBytes);
  return run_fn(index, reinterpret_cast<const nvfp4_problem*>(v1.get()));
}

const Kernel* Registry::find(const std::string& name) const {
  for (const Kernel& k : kernels_)
    if (k.name() == name) return &k;
  return nullptr;
}

std::vector<const Kernel*> Registry::select(const std::vector<std::string>& names) const {
  std::vector<const Kernel*> selected;
  if (names.empty()) {
    for (const Kernel& k : kernels_) selected.push_back(&k);
    return selected;
  }
  for (const std::string& name : names) {
    const Kernel* k = find(name);
    if (!k) {
      std::string known;
      for (const Kernel& kk : kernels_) known += " " + kk.name();
      throw std::invalid_argument("no kernel named \"" + name + "\"; known:" + known);
    }
    selected.push_back(k);
  }
  return selected;
}

namespace {

// The CUDA device as seen once per process: the first answer is kept, because asking again
// costs time and the answer cannot change while the process runs.
struct DeviceQuery {
  bool usable = false;
  int compute_capability = 0;  // major * 10 + minor of the current device
  std::string why_not;
};

const DeviceQuery& device_query() {
  static const DeviceQuery query = [] {
    DeviceQuery q;
#if defined(NVFP4_HAVE_CUDA)
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      cudaGetLastError();  // not sticky, but leave no error behind for the next CUDA call
      q.why_not = std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " +
                  cudaGetErrorString(err) + ")";
      return q;
    }
    if (count == 0) {
      q.why_not = "no CUDA device on this machine";
      return q;
    }
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
      cudaGetLastError();
      q.why_not = "cannot query the compute capability of the CUDA device";
      return q;
    }
    q.usable = true;
    q.compute_capability = major * 10 + minor;
#else
    q.why_not = "this nvfp4check was built without CUDA (NVFP4_CUDA=OFF)";
#endif
    return q;
  }();
  return query;
}

}  // namespace

int cuda_compute_capability() { return device_query().usable ? device_query().compute_capability : 0; }

uint64_t cuda_free_bytes() {
  if (!device_query().usable) return 0;
#if defined(NVFP4_HAVE_CUDA)
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return free;
#else
  return 0;
#endif
}

bool kernel_runnable(const Kernel& k, std::string* why) {
  std::string reason;
  if (k.info->memory == NVFP4_MEMORY_HOST) return true;
  if (k.info->memory != NVFP4_MEMORY_CUDA) {
    reason = "unknown memory kind " + std::to_string(k.info->memory);
  } else {
    const DeviceQuery& q = device_query();
    if (!q.usable) {
      reason = q.why_not;
    } else if (static_cast<uint32_t>(q.compute_capability) < k.info->min_sm) {
      reason = "needs compute capability " + std::to_string(k.info->min_sm / 10) + "." +
               std::to_string(k.info->min_sm % 10) + ", this device has " +
               std::to_string(q.compute_capability / 10) + "." + std::to_string(q.compute_capability % 10);
    } else {
      return true;
    }
  }
  if (why) *why = reason;
  return false;
}

}  // namespace nvfp4
