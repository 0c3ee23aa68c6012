// RapidCheck draws, the kernels under test, case drawing, tags and regression files.
#include "property_tests/property_support.h"

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <sstream>

#include "harness/judge/case_check.h"
#include "reference/case_file.h"
#include "reference/formats.h"

#ifndef NVFP4_SOURCE_DIR
#define NVFP4_SOURCE_DIR "."
#endif

namespace nvfp4::prop {

// ----- Draws ----------------------------------------------------------------------------------

rc::Gen<uint64_t> uniform_below(uint64_t bound) {
  return rc::Gen<uint64_t>([bound](const rc::Random& random, int /*size: ignored on purpose*/) {
    const uint64_t v = bound <= 1 ? 0 : rc::Random(random).next() % bound;
    return rc::shrinkable::shrinkRecur(v, [](uint64_t x) { return rc::shrink::towards<uint64_t>(x, 0); });
  });
}

rc::Gen<uint8_t> uniform_byte() {
  return rc::Gen<uint8_t>([](const rc::Random& random, int) {
    const uint8_t v = static_cast<uint8_t>(rc::Random(random).next() & 0xFFu);
    return rc::shrinkable::shrinkRecur(v, [](uint8_t x) { return rc::shrink::towards<uint8_t>(x, 0); });
  });
}

uint64_t RcDraws::below(uint64_t bound) { return *uniform_below(bound); }

std::vector<uint8_t> RcDraws::bytes(std::size_t count) {
  if (count == 0) return {};
  return *rc::gen::container<std::vector<uint8_t>>(count, uniform_byte());
}

ShapeLimits property_limits() {
  ShapeLimits lim;
  lim.max_m = 300;
  lim.max_n = 40;
  lim.max_k = 1024;
  lim.max_l = 9;
  lim.max_outputs = 1 << 12;
  lim.max_products = 1 << 20;
  lim.max_elements = 1 << 14;
  return lim;
}

// ----- Kernels --------------------------------------------------------------------------------

namespace {

struct KernelSet {
  Registry registry;
  std::vector<const Kernel*> kernels;
  std::vector<std::string> left_out;
};

MemoryFilter g_filter = MemoryFilter::all;
std::vector<std::string> g_plugins, g_names;

KernelSet build_kernel_set() {
  KernelSet set;
  set.registry = Registry::with_builtins();
  std::vector<std::string> plugins = g_plugins;
  if (const char* env = std::getenv("NVFP4_PLUGINS")) {
    std::stringstream ss(env);
    std::string path;
    while (std::getline(ss, path, ':')) {
      if (!path.empty()) plugins.push_back(path);
    }
  }
  for (const std::string& path : plugins) {
    try {
      set.registry.load_plugin(path);
    } catch (const std::exception& e) {
      // A plugin named on purpose that cannot load is an error of the run, not a skip.
      std::fprintf(stderr, "nvfp4 property tests: cannot load plugin %s: %s\n", path.c_str(), e.what());
      std::exit(2);
    }
  }
  for (const std::string& name : g_names) {
    if (!set.registry.find(name)) {
      std::fprintf(stderr, "nvfp4 property tests: no kernel named %s\n", name.c_str());
      std::exit(2);
    }
  }
  for (const Kernel& k : set.registry.kernels()) {
    if (!g_names.empty() && std::find(g_names.begin(), g_names.end(), k.name()) == g_names.end()) continue;
    if (g_filter == MemoryFilter::host && k.is_cuda()) continue;
    if (g_filter == MemoryFilter::cuda && !k.is_cuda()) continue;
    std::string why;
    if (!kernel_runnable(k, &why)) {
      set.left_out.push_back(k.name() + ": " + why);
      continue;
    }
    // Every kernel: the properties written for one GEMV or GEMM with FP16 words say (applies)
    // which of them they take; every-problem-agrees-with-reference takes all.
    set.kernels.push_back(&k);
  }
  return set;
}

const KernelSet& kernel_set() {
  static const KernelSet set = build_kernel_set();
  return set;
}

}  // namespace

void configure_kernels(MemoryFilter filter, const std::vector<std::string>& plugin_paths,
                       const std::vector<std::string>& names) {
  g_filter = filter;
  g_plugins = plugin_paths;
  g_names = names;
}

const std::vector<const Kernel*>& kernels() { return kernel_set().kernels; }
const std::vector<std::string>& kernels_left_out() { return kernel_set().left_out; }

// ----- Cases ----------------------------------------------------------------------------------

DrawnCase draw_case(Draws& d, const Kernel& k, const CaseConstraints& constraints) {
  CaseConstraints c = constraints;
  c.gemv_gemm_only = true;
  c.out_type = OutType::fp16;
  // NVFP4 operands only (the transformations are NVFP4's: see gemm_fp16 in properties.cc).
  nvfp4_kernel_info info = *k.info;
  if (info.abi_version >= 3) info.a_formats = info.b_formats = 1u << NVFP4_FORMAT_NVFP4;
  return nvfp4::draw_case(d, info, c, property_limits());
}

// ----- Comparing ------------------------------------------------------------------------------

bool fp16_is_zero(uint16_t h) { return (h & 0x7FFFu) == 0; }

bool same_bits_or_nan(uint16_t x, uint16_t y) { return fp16_same_result(x, y); }
bool same_value(uint16_t x, uint16_t y) {
  return same_bits_or_nan(x, y) || (fp16_is_zero(x) && fp16_is_zero(y));
}

std::string hex16(uint16_t h) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", h);
  return buf;
}

std::string element_name(const Problem& p, int64_t index) {
  const int64_t j = index % p.n, i = (index / p.n) % p.m, b = index / (p.n * p.m);
  return "C[" + std::to_string(b) + "][" + std::to_string(i) + "][" + std::to_string(j) + "]";
}

std::string describe(const Problem& p, const DataSpec& spec) {
  char alpha[32];
  std::snprintf(alpha, sizeof alpha, "%.9g", static_cast<double>(p.alpha));
  return std::string(to_string(p.op)) + " m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
         " k=" + std::to_string(p.k) + " l=" + std::to_string(p.l) + " " + to_string(p.sf_layout) + " " +
         to_string(p.semantics) + " alpha=" + alpha + " " + spec.name();
}

std::vector<bool> exact_mask(const Problem& p, const ExactResult& ref, const Policy& policy) {
  std::vector<bool> mask(ref.elems.size());
  for (size_t i = 0; i < ref.elems.size(); ++i) {
    mask[i] = judge_element(ref.elems[i], p.alpha, ref.c[i], policy).exact_regime;
  }
  return mask;
}

// The policy `run` judges the kernel with (a CUDA matrix-unit kernel: the rule of this device).
Policy policy_of(const Kernel& k) { return kernel_policy(describe_kernel(k)); }
bool deterministic(const Kernel& k) { return !(k.info->flags & NVFP4_FLAG_NONDETERMINISTIC); }

std::vector<uint16_t> run_or_fail(const Kernel& k, const Problem& p, const std::string& property) {
  try {
    InProcessExecutor executor(k, kDefaultCallTimeout);
    // The properties compare FP16 outputs bit for bit (they draw FP16 problems only).
    if (p.out_type != OutType::fp16) throw std::invalid_argument("the properties draw FP16 outputs only");
    const std::vector<uint32_t> words = run_kernel_once(executor, p);
    return std::vector<uint16_t>(words.begin(), words.end());
  } catch (const std::exception& e) {
    fail_case(k, p, property, std::string("the kernel run failed: ") + e.what());
  }
  return {};  // not reached: fail_case throws
}

// ----- Tags -----------------------------------------------------------------------------------

bool any_nan_scale(const Problem& p) {
  for (const auto* v : {&p.sfa, &p.sfb}) {
    for (uint8_t s : *v) {
      if ((s & 0x7F) == 0x7F) return true;
    }
  }
  return false;
}

namespace {
int64_t g_exact_total = 0, g_elements_total = 0;
}  // namespace

void CaseTags::shape(const Problem& p) {
  const auto& e = tile_edge_dims();
  auto edge = [&](int64_t v) { return v != 1 && std::find(e.begin(), e.end(), v) != e.end(); };
  edge_ |= edge(p.m) || (p.op == Op::gemm && edge(p.n));
  partial_ |= p.k % 16 != 0;
  nan_ |= any_nan_scale(p);
}

void CaseTags::exact(int64_t exact_elements, int64_t elements) {
  exact_ += exact_elements;
  elements_ += elements;
  g_exact_total += exact_elements;
  g_elements_total += elements;
}

std::pair<int64_t, int64_t> take_exact_totals() {
  const std::pair<int64_t, int64_t> totals{g_exact_total, g_elements_total};
  g_exact_total = g_elements_total = 0;
  return totals;
}

void CaseTags::emit() const {
  std::vector<std::string> tags;
  if (elements_ > 0) {
    tags.push_back(exact_ == elements_ ? "exact-regime: all outputs"
                   : 2 * exact_ >= elements_ ? "exact-regime: most outputs"
                                             : "exact-regime: few outputs");
  }
  if (edge_) tags.push_back("m or n on a tile edge");
  if (partial_) tags.push_back("partial last block");
  if (nan_) tags.push_back("NaN scale");
  if (!extra_.empty()) tags.push_back(extra_);
  for (const std::string& t : tags) RC_TAG(t);
}

// ----- Regressions ----------------------------------------------------------------------------

namespace {

struct Pending {
  std::string kernel, property, message;
  Problem problem;
};
std::optional<Pending> g_pending;


}  // namespace

std::string regressions_dir() {
  if (const char* env = std::getenv("NVFP4_REGRESSIONS_DIR"); env && *env) return env;
  return std::string(NVFP4_SOURCE_DIR) + "/corpus/regressions";
}

std::string regression_path(const std::string& kernel, const Problem& p) {
  // The suite's one naming scheme, of the case text without its note: the same data always gets
  // the same name.
  Problem q = p;
  q.note.clear();
  q.expect.reset();
  return regressions_dir() + "/" + kernel + "/" + case_file_stem(kernel, q, write_case(q)) + ".case";
}

void fail_case(const Kernel& k, const Problem& p, const std::string& property, const std::string& message) {
  g_pending = Pending{k.name(), property, message, p};
  const std::string path = regression_path(k.name(), p);
  const std::string failure = k.name() + " breaks property " + property + ": " + message +
                              "\n  the shrunk case is saved as " + path +
                              " when the property ends (replay: nvfp4check replay " + path + " --kernel " +
                              k.name() + ")";
  RC_FAIL(failure);
}

std::optional<std::string> save_pending_regression() {
  if (!g_pending) return std::nullopt;
  Pending pending = std::move(*g_pending);
  g_pending.reset();
  Problem p = pending.problem;
  const uint64_t seed = rc::detail::configuration().testParams.seed;
  std::string first_line = pending.message.substr(0, pending.message.find('\n'));
  if (first_line.size() > 300) first_line = first_line.substr(0, 300) + "...";
  p.note = "property " + pending.property + " failed for kernel " + pending.kernel +
           " (RapidCheck seed " + std::to_string(seed) + ", RC_PARAMS=seed=" + std::to_string(seed) +
           "): " + first_line;
  const std::string path = regression_path(pending.kernel, pending.problem);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  write_case_file(p, path);
  std::cerr << "nvfp4: shrunk failing case of property " << pending.property << " for kernel "
            << pending.kernel << " saved: " << path << " (RapidCheck seed " << seed << ")\n";
  return path;
}

void clear_pending_regression() { g_pending.reset(); }

}  // namespace nvfp4::prop
