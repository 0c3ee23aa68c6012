// Fuzz target `kernel`: bytes -> the suite's one draw (harness/draw/schedule.h draw_fuzz_case: the
// schedule's shape classes, data classes, layouts and generators, each choice a few bytes of the
// input, so every generator the schedule has reaches fuzzing) -> a kernel -> every check of the
// runner, judged by the oracle. On a failure it saves the case file (SPEC.md section 4) and aborts with the diagnosis.
// Text inputs are read as case files, so saved cases and hand-written seeds work as inputs too
// (harness/draw/schedule.h fuzz_input_problem, which `nvfp4check replay --fuzz-input` calls as well).
//
// Environment:
//   NVFP4_FUZZ_KERNEL    kernel name, or several separated by commas (default: every runnable
//                        built-in kernel, or every kernel of NVFP4_FUZZ_PLUGIN when one is given)
//   NVFP4_FUZZ_PLUGIN    shared library(ies) exporting the kernel ABI, separated by ':'
//   NVFP4_FUZZ_MEMORY    host | cuda: limit the default choice to host or CUDA kernels
//   NVFP4_FUZZ_CASE_DIR  where case files go (default ./fuzz-cases)
//   NVFP4_FUZZ_MAX_PRODUCTS  cap on l*m*n*k of drawn problems (default fuzz_shape_limits, 2^18): lower
//                        for more executions per second on small problems
//   NVFP4_FUZZ_SAVE      failures (default) | always (save each case before it runs, so even a
//                        kernel that kills the process leaves it) | only (save, do not run: turns
//                        crash inputs into case files). With always and only, each saved case
//                        is also a line "KERNEL<TAB>ORIGIN<TAB>CASE FILE" of CASE_DIR/cases.tsv
//                        (ORIGIN: "builtin" or the plugin's path), so a script replays it with
//                        the right --kernel and --plugin without reading them from a file name.
//   CTEST_RESOURCE_GROUP_0_GPUS  set by `ctest --resource-spec-file`: "id:N,slots:S" makes
//                        this process use GPU N (CUDA_VISIBLE_DEVICES), before CUDA starts.
// Exit status 4 (ctest's SKIP_RETURN_CODE here) when no chosen kernel can run on this machine,
// 2 for a bad setting. Under ASan, CUDA needs ASAN_OPTIONS=protect_shadow_gap=0 (the driver
// maps memory where ASan reserves its shadow gap); this binary makes that its default.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <omp.h>

#include "harness/draw/generators.h"
#include "harness/judge/case_check.h"
#include "harness/engine/report.h"
#include "harness/draw/schedule.h"
#include "kernels/registry.h"
#include "reference/case_file.h"

extern "C" __attribute__((used)) const char* __asan_default_options() {
  return "protect_shadow_gap=0";
}

namespace {

enum class SaveMode { failures, always, only };

struct FuzzSetup {
  nvfp4::Registry registry;
  std::vector<const nvfp4::Kernel*> kernels;
  std::string case_dir = "fuzz-cases";
  SaveMode save = SaveMode::failures;
  nvfp4::ShapeLimits limits;  // fuzz_limits_from_environment()
};

FuzzSetup* g_setup = nullptr;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

[[noreturn]] void setup_error(const std::string& what, int status = 2) {
  std::fprintf(stderr, "kernel fuzzer: %s\n", what.c_str());
  std::exit(status);
}

// Nothing chosen can run here (no GPU): a skip, not a failure. Not 77: libFuzzer exits 77 on a
// crash (-error_exitcode), which must never read as a skip.
constexpr int kSkipped = 4;

// ctest's resource allocation (scripts/ctest-resource-spec.sh writes the spec): the GPU id it
// gives is a CUDA device ordinal (with CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's index).
void use_ctest_gpu() {
  const char* spec = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS");
  if (!spec) return;
  const char* id = std::strstr(spec, "id:");
  if (!id) return;
  const std::string device(id + 3, std::strcspn(id + 3, ","));
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  setenv("CUDA_VISIBLE_DEVICES", device.c_str(), 1);
  std::fprintf(stderr, "kernel fuzzer: ctest gave GPU %s\n", device.c_str());
}

std::string describe(const nvfp4::Problem& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s m=%lld n=%lld k=%lld l=%lld sf_layout=%s semantics=%s alpha=%a",
                nvfp4::to_string(p.op), static_cast<long long>(p.m), static_cast<long long>(p.n),
                static_cast<long long>(p.k), static_cast<long long>(p.l), nvfp4::to_string(p.sf_layout),
                nvfp4::to_string(p.semantics), static_cast<double>(p.alpha));
  return buf;
}

// Writes p to the case directory under the suite's one naming scheme; returns the path.
std::string save_case(const nvfp4::Problem& p, const std::string& kernel) {
  return nvfp4::save_case(kernel, p, nullptr, g_setup->case_dir);
}

[[noreturn]] void report_failure(const nvfp4::Kernel& kernel, nvfp4::Problem p, const std::string& check,
                                 const std::string& message) {
  p.note = "kernel fuzzer: " + kernel.name() + " failed check '" + check + "'";
  std::string path;
  try {
    path = save_case(p, kernel.name());
  } catch (const std::exception& e) {
    path = std::string("(not saved: ") + e.what() + ")";
  }
  nvfp4::KernelArgs args;
  if (kernel.origin != "builtin") args = {"--plugin", std::filesystem::absolute(kernel.origin).string()};
  args.insert(args.end(), {"--kernel", kernel.name()});
  std::fprintf(stderr,
               "\n==== kernel fuzzer: FAILURE ====\nkernel:  %s (%s)\ncheck:   %s\nproblem: %s\n%s\n"
               "case file: %s\nreproduce: %s\n",
               kernel.name().c_str(), kernel.origin.c_str(), check.c_str(), describe(p).c_str(), message.c_str(),
               path.c_str(), nvfp4::reproduce_command(path, args).c_str());
  std::abort();
}

void fuzz_one_kernel(const nvfp4::Kernel& kernel, const uint8_t* data, size_t size) {
  // The one function `nvfp4check replay --fuzz-input` calls too: a replay checks this problem.
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::optional<nvfp4::Problem> p = nvfp4::fuzz_input_problem(bytes, kernel.info, g_setup->limits);
  if (!p) return;  // text that is no case: nothing to run
  if (g_setup->save != SaveMode::failures) {
    const std::string path = save_case(*p, kernel.name());
    std::fprintf(stderr, "kernel fuzzer: saved %s\n", path.c_str());
    // File names hold the kernel's name among other fields, not recoverably: say it explicitly.
    std::ofstream(std::filesystem::path(g_setup->case_dir) / "cases.tsv", std::ios::app)
        << kernel.name() << '\t' << kernel.origin << '\t' << path << '\n';
    if (g_setup->save == SaveMode::only) return;
  }
  nvfp4::CaseOptions options;  // not saved: libFuzzer keeps the input; a failure is saved below
  options.stale_seed = nvfp4::fnv1a(bytes);
  nvfp4::CaseOutcome r;
  try {
    nvfp4::InProcessExecutor executor(kernel, nvfp4::kDefaultCallTimeout);
    r = nvfp4::check_case(executor, *p, options);
  } catch (const std::exception& e) {
    report_failure(kernel, *p, "exception", std::string("check_case threw: ") + e.what());
  }
  if (r.verdict == nvfp4::CaseOutcome::Verdict::fail)
    report_failure(kernel, *p, nvfp4::check_name(r.finding->check), r.finding->message);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  use_ctest_gpu();
  // One fuzzing process is one thread of work (campaigns run a process per core): an OpenMP team
  // in the reference and host kernels only adds wake-ups, under ASan most of an execution's time
  // (measured here: 40 executions/s with the default team on host_gemm_fp32, 445 with one thread).
  if (!std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(1);
  g_setup = new FuzzSetup;
  g_setup->registry = nvfp4::Registry::with_builtins();
  const char* plugins = std::getenv("NVFP4_FUZZ_PLUGIN");
  const size_t builtin_count = g_setup->registry.kernels().size();
  if (plugins) {
    for (const std::string& path : split(plugins, ':')) {
      try {
        g_setup->registry.load_plugin(path);
      } catch (const std::exception& e) {
        setup_error("cannot load plugin " + path + ": " + e.what());
      }
    }
  }
  if (const char* dir = std::getenv("NVFP4_FUZZ_CASE_DIR")) g_setup->case_dir = dir;
  try {
    g_setup->limits = nvfp4::fuzz_limits_from_environment();
  } catch (const std::invalid_argument& e) {
    setup_error(e.what());
  }
  if (const char* save = std::getenv("NVFP4_FUZZ_SAVE")) {
    const std::string s = save;
    if (s == "failures") g_setup->save = SaveMode::failures;
    else if (s == "always") g_setup->save = SaveMode::always;
    else if (s == "only") g_setup->save = SaveMode::only;
    else setup_error("NVFP4_FUZZ_SAVE must be failures, always or only, not '" + s + "'");
  }
  const auto& all = g_setup->registry.kernels();
  std::string why;
  if (const char* names = std::getenv("NVFP4_FUZZ_KERNEL")) {
    for (const std::string& name : split(names, ',')) {
      const nvfp4::Kernel* k = g_setup->registry.find(name);
      if (!k) setup_error("no kernel named '" + name + "' (see `nvfp4check list`)");
      if (g_setup->save != SaveMode::only && !nvfp4::kernel_runnable(*k, &why)) {
        setup_error("kernel " + name + " cannot run here: " + why, kSkipped);
      }
      g_setup->kernels.push_back(k);
    }
  } else {
    // Default: every runnable kernel of the plugins, or of the built-ins when there is none.
    const size_t first = plugins ? builtin_count : 0;
    const char* memory_env = std::getenv("NVFP4_FUZZ_MEMORY");
    const std::string memory = memory_env ? memory_env : "";
    if (!memory.empty() && memory != "host" && memory != "cuda") {
      setup_error("NVFP4_FUZZ_MEMORY must be host or cuda, not '" + memory + "'");
    }
    for (size_t i = first; i < all.size(); ++i) {
      if ((memory == "host" && all[i].is_cuda()) || (memory == "cuda" && !all[i].is_cuda())) continue;
      if (nvfp4::kernel_runnable(all[i], &why)) g_setup->kernels.push_back(&all[i]);
      else std::fprintf(stderr, "kernel fuzzer: skipping %s: %s\n", all[i].name().c_str(), why.c_str());
    }
  }
  if (g_setup->kernels.empty()) setup_error("no kernel to fuzz can run on this machine", kSkipped);
  for (const nvfp4::Kernel* k : g_setup->kernels) {
    std::fprintf(stderr, "kernel fuzzer: checking %s (%s)\n", k->name().c_str(), k->origin.c_str());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const nvfp4::Kernel* k : g_setup->kernels) fuzz_one_kernel(*k, data, size);
  return 0;
}
