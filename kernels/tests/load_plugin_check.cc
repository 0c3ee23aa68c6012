// load_plugin_check PLUGIN NAME: loads PLUGIN through Registry::load_plugin, requires a kernel
// NAME from it, and runs that (host) kernel on a small GEMV in every layout it declares, against
// an answer computed here. Exit 0 when all agree; 1 with a message otherwise. Used by the
// example_plugin ctest to prove an outside kernel built against the installed header works.
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_scaled_decode.h"
#include "kernels/host/fp16_from_float.h"
#include "kernels/registry.h"

namespace {

int check(const std::string& path, const std::string& name) {
  nvfp4::Registry registry;
  registry.load_plugin(path);
  const nvfp4::Kernel* kernel = registry.find(name);
  if (kernel == nullptr) {
    std::fprintf(stderr, "load_plugin_check: %s has no kernel named %s\n", path.c_str(), name.c_str());
    return 1;
  }
  std::printf("loaded %s from %s (memory %u, ops 0x%x, layouts 0x%x)\n", name.c_str(), path.c_str(),
              kernel->info->memory, kernel->info->ops, kernel->info->sf_layouts);
  if (kernel->is_cuda() || !kernel->supports_op(NVFP4_OP_GEMV)) {
    std::fprintf(stderr, "load_plugin_check: %s is not a host GEMV kernel\n", name.c_str());
    return 1;
  }
  // m = 37 rows, k = 96, 2 batches; scales 0.5, 1 and 2 keep every sum exact in FP32.
  const int64_t m = 37, k = 96, l = 2, kb = k / 16;
  const uint64_t seed = 42;
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> a(l * m * k / 2), x(l * k / 2), sfa(l * m * kb), sfx(l * kb);
  const uint8_t scales[3] = {0x30, 0x38, 0x40};
  for (auto& v : a) v = static_cast<uint8_t>(rng());
  for (auto& v : x) v = static_cast<uint8_t>(rng());
  for (auto& v : sfa) v = scales[rng() % 3];
  for (auto& v : sfx) v = scales[rng() % 3];
  std::vector<uint16_t> expect(l * m);
  for (int64_t b = 0; b < l; ++b)
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (int64_t t = 0; t < k; ++t) {
        const double av = nvfp4::kern::e2m1_to_float(nvfp4::kern::e2m1_code(&a[(b * m + i) * k / 2], t));
        const double xv = nvfp4::kern::e2m1_to_float(nvfp4::kern::e2m1_code(&x[b * k / 2], t));
        sum += av * xv * nvfp4::kern::e4m3_to_float(sfa[(b * m + i) * kb + t / 16], false) *
               nvfp4::kern::e4m3_to_float(sfx[b * kb + t / 16], false);
      }
      expect[b * m + i] = nvfp4::kern::fp16_from_float(static_cast<float>(sum));
    }
  int failures = 0;
  for (uint32_t layout : {NVFP4_SF_LINEAR, NVFP4_SF_PERMUTED}) {
    if (!kernel->supports_layout(layout)) continue;
    std::vector<uint8_t> pa = sfa, px = sfx;
    if (layout == NVFP4_SF_PERMUTED) {
      pa.assign(l * 512 * ((kb + 3) / 4), 0x7F);  // NaN padding: reading it would show
      px.assign(l * 512 * ((kb + 3) / 4), 0x7F);
      for (int64_t b = 0; b < l; ++b)
        for (int64_t s = 0; s < kb; ++s) {
          for (int64_t i = 0; i < m; ++i)
            pa[nvfp4::kern::scale_offset(layout, m, kb, b, i, s)] = sfa[(b * m + i) * kb + s];
          px[nvfp4::kern::scale_offset(layout, 1, kb, b, 0, s)] = sfx[b * kb + s];
        }
    }
    std::vector<uint16_t> c(l * m, 0x7E55);
    nvfp4_problem p{};
    p.op = NVFP4_OP_GEMV;
    p.m = m, p.n = 1, p.k = k, p.l = l;
    p.a = a.data(), p.b = x.data(), p.sfa = pa.data(), p.sfb = px.data();
    p.sf_layout = layout;
    p.alpha = 1.0f;
    p.c = c.data();
    const int rc = kernel->run(p);
    if (rc != NVFP4_OK) {
      std::fprintf(stderr, "load_plugin_check: %s returned %d for layout %u\n", name.c_str(), rc, layout);
      ++failures;
      continue;
    }
    for (int64_t e = 0; e < l * m; ++e) {
      if (c[e] != expect[e]) {
        std::fprintf(stderr, "load_plugin_check: %s layout %u (seed %llu): element %lld is 0x%04x, expected 0x%04x\n",
                     name.c_str(), layout, static_cast<unsigned long long>(seed), static_cast<long long>(e), c[e],
                     expect[e]);
        ++failures;
        break;
      }
    }
    std::printf("layout %u: %s\n", layout, failures ? "WRONG" : "ok");
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: load_plugin_check PLUGIN KERNEL_NAME\n");
    return 2;
  }
  try {
    return check(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_plugin_check: %s\n", e.what());
    return 1;
  }
}
