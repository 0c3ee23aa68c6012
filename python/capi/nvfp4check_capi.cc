// The C API of the Python package (nvfp4check_capi.h): a kernel given as info + callback becomes
// a registry Kernel, and goes through the harness's check_case exactly like a plugin kernel.
#include "python/capi/nvfp4check_capi.h"

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_problem.h"
#include "harness/case_input.h"
#include "harness/device_buffers.h"
#include "harness/generators.h"
#include "harness/report.h"
#include "harness/runner.h"
#include "harness/worker_process.h"
#include "kernels/registry.h"
#include "reference/case_file.h"
#include "reference/exact_gemm.h"

#define NVFP4CHECK_EXPORT extern "C" __attribute__((visibility("default")))

namespace nvfp4 {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Kernels behind a user pointer. The ABI's run function has no user pointer, so each callback
// gets a slot, and the slot number is the Kernel's index.

struct Callback {
  nvfp4check_run_fn run = nullptr;
  void* user = nullptr;
};

std::mutex g_slots_mutex;
std::vector<std::optional<Callback>> g_slots;

// What the callback said about the call in progress (nvfp4check_kernel_failed, NVFP4CHECK_STOP).
// The runner calls the kernel on the thread that called check_case, so it is per thread.
struct CallNotes {
  std::string check, message, stage;  // check: the first failure the callback reported
  bool stopped = false;
  std::string current_stage;
};
thread_local CallNotes* t_notes = nullptr;

// Points t_notes at a check's notes while it runs.
class NotesScope {
 public:
  explicit NotesScope(CallNotes* notes) { t_notes = notes; }
  ~NotesScope() { t_notes = nullptr; }
  NotesScope(const NotesScope&) = delete;
  NotesScope& operator=(const NotesScope&) = delete;
};

int slot_run(int index, const nvfp4_problem* problem) {
  Callback cb;
  {
    std::lock_guard<std::mutex> lock(g_slots_mutex);
    if (index < 0 || static_cast<size_t>(index) >= g_slots.size() || !g_slots[index]) return NVFP4_ERROR;
    cb = *g_slots[index];
  }
  const int rc = cb.run(cb.user, problem);
  if (rc == NVFP4CHECK_STOP) {
    if (t_notes) t_notes->stopped = true;
    return NVFP4_ERROR;
  }
  return rc;
}

// A slot for the duration of one check.
class SlotLease {
 public:
  SlotLease(nvfp4check_run_fn run, void* user) {
    std::lock_guard<std::mutex> lock(g_slots_mutex);
    size_t i = 0;
    while (i < g_slots.size() && g_slots[i]) ++i;
    if (i == g_slots.size()) g_slots.emplace_back();
    g_slots[i] = Callback{run, user};
    index_ = static_cast<int>(i);
  }
  ~SlotLease() {
    std::lock_guard<std::mutex> lock(g_slots_mutex);
    g_slots[static_cast<size_t>(index_)].reset();
  }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  int index() const { return index_; }

 private:
  int index_ = 0;
};

// The registry's validation of a kernel info (name, ABI version, memory, ops, layouts, flags),
// as for a plugin: a provider of one kernel whose info is this one.
thread_local const nvfp4_kernel_info* t_validating = nullptr;
int one_kernel() { return 1; }
const nvfp4_kernel_info* validating_info(int) { return t_validating; }

Kernel callback_kernel(Registry& holder, const nvfp4_kernel_info* info, int slot) {
  if (info == nullptr) throw PluginError("no kernel info was given");
  t_validating = info;
  try {
    holder.add_provider(one_kernel, validating_info, slot_run, "python");
  } catch (...) {
    t_validating = nullptr;
    throw;
  }
  t_validating = nullptr;
  Kernel k = holder.kernels().back();
  k.index = slot;
  return k;
}

// ---------------------------------------------------------------------------------------------
// Options, results and the report.

struct Options {
  std::string op, case_dir = "nvfp4check-cases", policy, command;
  int64_t cases = 0;
  double seconds = 0, timeout_s = 30;
  std::optional<uint64_t> seed;
  bool keep_passing_cases = false;
  std::optional<Shape> shape;
  int event_fd = -1;
};

Options parse_options(const char* text) {
  Options o;
  const json j = text && *text ? json::parse(text) : json::object();
  if (!j.is_object()) throw std::invalid_argument("options must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    if (key == "op") {
      o.op = value.get<std::string>();
      if (o.op != "gemv" && o.op != "gemm") throw std::invalid_argument("op must be \"gemv\" or \"gemm\", not \"" + o.op + "\"");
    } else if (key == "cases") {
      o.cases = value.get<int64_t>();
      if (o.cases <= 0) throw std::invalid_argument("cases must be positive");
    } else if (key == "seconds") {
      o.seconds = value.get<double>();
      if (!(o.seconds > 0)) throw std::invalid_argument("seconds must be positive");
    } else if (key == "seed") {
      o.seed = value.get<uint64_t>();
    } else if (key == "case_dir") {
      o.case_dir = value.get<std::string>();
    } else if (key == "policy") {
      o.policy = value.get<std::string>();
      Policy::parse(o.policy);  // std::invalid_argument names a bad policy
    } else if (key == "timeout_s") {
      o.timeout_s = value.get<double>();
      if (!(o.timeout_s > 0)) throw std::invalid_argument("timeout_s must be positive");
    } else if (key == "keep_passing_cases") {
      o.keep_passing_cases = value.get<bool>();
    } else if (key == "shape") {
      Shape s;
      s.m = value.at("m").get<int64_t>();
      s.n = value.value("n", int64_t{1});
      s.k = value.at("k").get<int64_t>();
      s.l = value.value("l", int64_t{1});
      s.op = s.n == 1 ? Op::gemv : Op::gemm;
      Problem p;
      set_shape(p, s);
      if (const std::string err = shape_error(p); !err.empty()) throw std::invalid_argument("shape: " + err);
      o.shape = s;
    } else if (key == "event_fd") {
      o.event_fd = value.get<int>();
    } else if (key == "command") {
      o.command = value.get<std::string>();
    } else {
      throw std::invalid_argument("unknown option \"" + key + "\"");
    }
  }
  return o;
}

RunOptions run_options(const Options& o) {
  RunOptions r;
  r.case_dir = o.case_dir;
  r.timeout_s = o.timeout_s;
  r.keep_passing_cases = o.keep_passing_cases;
  if (!o.policy.empty()) {
    r.use_policy_override = true;
    r.policy_override = Policy::parse(o.policy);
  }
  return r;
}

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

char* error_json(const std::string& what) { return dup_string(json{{"error", what}}.dump()); }

// Events of the worker protocol (harness/worker_process.h), when the caller asked for them: a
// Python worker process can then be supervised like the program's own workers.
class Events {
 public:
  explicit Events(int fd) : writer_(fd), on_(fd >= 0) {}
  void emit(const json& event) const {
    if (on_) writer_.emit(event);
  }

 private:
  EventWriter writer_;
  bool on_;
};

// The failure the callback reported replaces the runner's generic "kernel-error": a Python
// exception is check "exception" with its traceback.
void apply_callback_failure(CheckResult& r, const CallNotes& notes) {
  if (r.verdict != CheckResult::Verdict::fail || notes.check.empty()) return;
  if (r.check != "kernel-error" && r.check != "ignored-unsupported") return;
  r.check = notes.check;
  // A traceback is several lines: each indented under the lead line failure_text prints.
  const bool lines = notes.message.find('\n') != std::string::npos;
  std::string text = lines ? "\n    " : " ";
  for (char ch : notes.message) text += ch == '\n' ? std::string("\n    ") : std::string(1, ch);
  r.message = fmt::format("in stage \"{}\":{}", notes.stage, text);
}

bool drawable(const CheckResult& r) {
  const Problem& p = r.problem;
  return r.verdict == CheckResult::Verdict::fail && static_cast<int64_t>(r.c.size()) == p.c_elems() &&
         static_cast<int64_t>(r.reference.elems.size()) == p.c_elems() && p.c_elems() > 0;
}

// A result as `run` reports it: the error map beside the case file (or in map_dir), the failure
// text, then case_result_json. (TODO(core): one home for this with cli/cmd_run.cc's report_result.)
json case_result(const Kernel& kernel, std::optional<uint64_t> seed, const CheckResult& r, const std::string& map_dir,
                 std::string* text_out) {
  std::string error_map, text;
  if (r.verdict == CheckResult::Verdict::fail) {
    if (drawable(r) && !r.case_file.empty()) {
      error_map = error_map_path_for(r.case_file, map_dir);
      try {
        const std::filesystem::path parent = std::filesystem::path(error_map).parent_path();
        if (!parent.empty()) std::filesystem::create_directories(parent);
        write_error_map_png(error_map, r.problem, r.reference, r.c, r.policy);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: no error map: %s\n", e.what());
        error_map.clear();
      }
    }
    text = failure_text(kernel.name(), seed, r, error_map);
  }
  if (text_out) *text_out = text;
  return case_result_json(r, text, error_map);
}

json final_report(std::optional<uint64_t> seed, const KernelReport& k, const std::string& command, bool stopped) {
  json report = report_json(seed, {k}, command);
  json out = {{"seed", report["seed"]}, {"command", command}, {"kernel", report["kernels"][0]}, {"stopped", stopped}};
  if (k.failure) out["failure_text"] = k.failure->text;
  return out;
}

// ---------------------------------------------------------------------------------------------
// TODO(core): replace by the suite core's schedule (issue 13). Until then this section mirrors
// the case loop of `nvfp4check run` (cli/cmd_run.cc worker_main and its helpers) case for case,
// so that a seed gives a Python kernel exactly the cases it gives a plugin kernel of the same
// name and info (python/tests/test_schedule.py compares the two).

bool applies(const nvfp4_kernel_info& info, const DataSpec& spec) {
  return !(info.flags & NVFP4_FLAG_UNIT_ALPHA) || spec.alpha == AlphaDist::one;
}

Problem problem_of_shape(Rng& rng, const Shape& s, const nvfp4_kernel_info& info, const DataSpec& spec) {
  ShapeLimits smallest;
  smallest.max_m = smallest.max_n = smallest.max_l = 1;
  smallest.max_k = 2;
  Problem p = generate_problem(rng, s.op, info, spec, smallest);
  set_shape(p, s);
  p.a.clear(), p.b.clear(), p.sfa.clear(), p.sfb.clear();
  p.seed = rng();
  p.generator = spec.name();
  expand_seeded_case(p);
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) p.alpha = 1.0f;
  return p;
}

std::optional<Problem> unsupported_problem(Rng& rng, Op op, const nvfp4_kernel_info& info, const DataSpec& spec,
                                           const ShapeLimits& limits) {
  const Shape s = generate_unsupported_shape(rng, op, info, limits);
  if (s.m != 0) {
    Problem p = generate_problem(rng, op, info, spec, limits);
    set_shape(p, s);
    fill_data(rng, spec, p);
    if (info.flags & NVFP4_FLAG_UNIT_ALPHA) p.alpha = 1.0f;
    return p;
  }
  Problem p = generate_problem(rng, op, info, spec, limits);
  if (!((info.sf_layouts >> NVFP4_SF_LINEAR) & 1u)) {
    p.sf_layout = SfLayout::linear;
    return p;
  }
  if (!((info.sf_layouts >> NVFP4_SF_PERMUTED) & 1u)) {
    p.sf_layout = SfLayout::permuted;
    return p;
  }
  if (info.flags & NVFP4_FLAG_UNIT_ALPHA) {
    p.alpha = 2.0f;
    return p;
  }
  const Op other = op == Op::gemm ? Op::gemv : Op::gemm;
  if (!((info.ops >> static_cast<uint32_t>(other)) & 1u)) return generate_problem(rng, other, info, spec, limits);
  return std::nullopt;
}

// One kernel's cases from a seed, up to the first failure. Returns its report; *stopped when a
// callback asked to stop (the case in progress is not counted).
KernelReport run_schedule(const Kernel& kernel, const Options& o, uint64_t seed, const Events& events, bool* stopped) {
  KernelReport report;
  report.name = kernel.name();
  report.origin = kernel.origin;
  const auto started = std::chrono::steady_clock::now();
  auto finish = [&] {
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    events.emit({{"event", "done"}});
    return report;
  };
  std::string why;
  if (!kernel_runnable(kernel, &why)) {
    report.verdict = "skipped";
    report.skip_reason = why;
    events.emit({{"event", "skipped"}, {"why", why}});
    return finish();
  }
  const nvfp4_kernel_info& info = *kernel.info;
  std::optional<Shape> fixed = o.shape;
  if (fixed && fixed->op == Op::gemv && !kernel.supports_op(NVFP4_OP_GEMV)) fixed->op = Op::gemm;
  std::vector<Op> ops;
  for (Op op : {Op::gemv, Op::gemm})
    if (kernel.supports_op(static_cast<uint32_t>(op)) && (o.op.empty() || o.op == to_string(op)))
      if (!fixed || fixed->op == op) ops.push_back(op);
  if (ops.empty()) {
    const std::string wanted = fixed ? to_string(fixed->op) : o.op;
    report.verdict = "skipped";
    report.skip_reason = wanted.empty() ? "declares no op" : "does not support " + wanted;
    events.emit({{"event", "skipped"}, {"why", report.skip_reason}});
    return finish();
  }
  std::vector<DataSpec> specs;
  for (const DataSpec& s : DataSpec::all())
    if (applies(info, s)) specs.push_back(s);

  RunOptions options = run_options(o);
  CallNotes notes;
  const NotesScope scope(&notes);
  options.on_stage = [&](const std::string& stage) {
    notes.current_stage = stage;
    events.emit({{"event", "stage"}, {"stage", stage}});
  };
  options.on_case_saved = [&](const std::string& path) { events.emit({{"event", "saved"}, {"case_file", path}}); };

  Rng rng(seed ^ fnv1a(kernel.name()));
  const ShapeLimits limits;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int64_t i = 0;; ++i) {
    if (o.cases > 0 && i >= o.cases) break;
    if (o.seconds > 0 && i > 0 && std::chrono::duration<double>(Clock::now() - start).count() >= o.seconds) break;
    const Op op = ops[static_cast<size_t>(i) % ops.size()];
    const DataSpec spec = (i % 2 == 0 || specs.empty()) ? DataSpec{} : specs[rng() % specs.size()];
    std::optional<Problem> p;
    if (fixed) {
      p = problem_of_shape(rng, *fixed, info, spec);
    } else {
      if (i % 8 == 7) p = unsupported_problem(rng, op, info, spec, limits);
      if (!p) p = generate_problem(rng, op, info, spec, limits);
    }
    p->note = fmt::format("nvfp4check run --seed {} --kernel {}: case {}, data {}", seed, kernel.name(), i, spec.name());
    options.data_spec = spec.name();
    options.stale_seed = rng();
    events.emit({{"event", "begin"}, {"index", i}});
    notes = CallNotes{};
    CheckResult r = check_case(kernel, *p, options);
    if (notes.stopped) {
      *stopped = true;
      break;
    }
    apply_callback_failure(r, notes);
    const json result = case_result(kernel, seed, r, "", nullptr);
    accumulate(report, result);
    events.emit({{"event", "result"}, {"result", result}});
    if (r.verdict == CheckResult::Verdict::fail) break;  // the first failure is the reproducer
  }
  return finish();
}
// End of the TODO(core) section.
// ---------------------------------------------------------------------------------------------

uint64_t chosen_seed(const Options& o) {
  if (o.seed) return *o.seed;
  const uint64_t seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  std::fprintf(stderr, "nvfp4check: seed from the clock: %llu (repeat with this seed)\n",
               static_cast<unsigned long long>(seed));
  return seed;
}

std::string check_command(const Kernel& kernel, const Options& o, uint64_t seed) {
  if (!o.command.empty()) return o.command;
  std::string c = fmt::format("nvfp4check run --kernel {} --seed {}", kernel.name(), seed);
  if (!o.op.empty()) c += " --op " + o.op;
  if (o.cases > 0) c += fmt::format(" --cases {}", o.cases);
  if (o.seconds > 0) c += fmt::format(" --seconds {}", o.seconds);
  if (!o.policy.empty()) c += " --policy " + o.policy;
  return c;
}

// Every entry point turns exceptions into {"error": ...}: nothing may unwind into ctypes.
template <class F>
char* guarded(F&& body) {
  try {
    return dup_string(body().dump());
  } catch (const std::exception& e) {
    return error_json(e.what());
  } catch (...) {
    return error_json("unknown error");
  }
}

}  // namespace
}  // namespace nvfp4

using namespace nvfp4;

NVFP4CHECK_EXPORT int nvfp4check_capi_version(void) { return NVFP4CHECK_CAPI_VERSION; }

NVFP4CHECK_EXPORT char* nvfp4check_build_info(void) {
  return guarded([] {
    // The struct sizes let the ctypes mirror of the ABI check its layout against this compiler's.
    json j = {{"capi_version", NVFP4CHECK_CAPI_VERSION}, {"abi_version", NVFP4_ABI_VERSION}, {"version", "0.1.0"},
              {"sizeof_kernel_info", sizeof(nvfp4_kernel_info)}, {"sizeof_problem", sizeof(nvfp4_problem)},
              {"offsetof_problem_stream", offsetof(nvfp4_problem, stream)}};
#if defined(NVFP4_HAVE_CUDA)
    j["cuda_build"] = true;
#else
    j["cuda_build"] = false;
#endif
    std::string why;
    j["cuda_device"] = cuda_memory_available(&why);
    if (!why.empty()) j["cuda_why"] = why;
    return j;
  });
}

NVFP4CHECK_EXPORT char* nvfp4check_check(const nvfp4_kernel_info* info, nvfp4check_run_fn run, void* user,
                                         const char* options_json) {
  return guarded([&] {
    const Options o = parse_options(options_json);
    if (run == nullptr) throw std::invalid_argument("no run callback was given");
    const SlotLease slot(run, user);
    Registry holder;
    const Kernel kernel = callback_kernel(holder, info, slot.index());
    const uint64_t seed = chosen_seed(o);
    const Events events(o.event_fd);
    bool stopped = false;
    const KernelReport report = run_schedule(kernel, o, seed, events, &stopped);
    return final_report(seed, report, check_command(kernel, o, seed), stopped);
  });
}

NVFP4CHECK_EXPORT char* nvfp4check_check_plugin(const char* plugin_path, const char* kernel_name,
                                                const char* options_json) {
  return guarded([&] {
    const Options o = parse_options(options_json);
    Registry registry;
    registry.load_plugin(plugin_path ? plugin_path : "");
    const Kernel* kernel = registry.find(kernel_name ? kernel_name : "");
    if (!kernel) throw std::invalid_argument(fmt::format("the plugin {} has no kernel named {}", plugin_path, kernel_name));
    const uint64_t seed = chosen_seed(o);
    const Events events(o.event_fd);
    bool stopped = false;
    const KernelReport report = run_schedule(*kernel, o, seed, events, &stopped);
    return final_report(seed, report, check_command(*kernel, o, seed) + " --plugin " + plugin_path, stopped);
  });
}

NVFP4CHECK_EXPORT char* nvfp4check_replay(const char* path, const nvfp4_kernel_info* info, nvfp4check_run_fn run,
                                          void* user, const char* options_json) {
  return guarded([&] {
    const Options o = parse_options(options_json);
    if (run == nullptr) throw std::invalid_argument("no run callback was given");
    if (path == nullptr) throw std::invalid_argument("no case file was given");
    const SlotLease slot(run, user);
    Registry holder;
    const Kernel kernel = callback_kernel(holder, info, slot.index());
    // Binary inputs are the kernel fuzzer's encoding, as for `nvfp4check replay`.
    if (!have_binary_case_decoder()) set_binary_case_decoder(decode_fuzz_case);
    const Problem p = load_case_input(path, kernel.info);  // CaseError: a bad file is a usage error
    const Events events(o.event_fd);
    KernelReport report;
    report.name = kernel.name();
    report.origin = kernel.origin;
    bool stopped = false;
    std::string why;
    if (!kernel_runnable(kernel, &why)) {
      report.verdict = "skipped";
      report.skip_reason = why;
      events.emit({{"event", "skipped"}, {"why", why}});
    } else {
      RunOptions options = run_options(o);
      options.save_case = false;
      // The stale-state refill depends on the case, not on the path it was given by.
      options.stale_seed = fnv1a(write_case(p));
      CallNotes notes;
      const NotesScope scope(&notes);
      options.on_stage = [&](const std::string& stage) {
        notes.current_stage = stage;
        events.emit({{"event", "stage"}, {"stage", stage}});
      };
      events.emit({{"event", "begin"}, {"index", 0}, {"input", path}});
      const auto started = std::chrono::steady_clock::now();
      CheckResult r = check_case(kernel, p, options);
      stopped = notes.stopped;
      if (!stopped) {
        apply_callback_failure(r, notes);
        if (r.case_file.empty()) r.case_file = path;
        const json result = case_result(kernel, std::nullopt, r, o.case_dir, nullptr);
        accumulate(report, result);
        events.emit({{"event", "result"}, {"result", result}});
      }
      report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
    events.emit({{"event", "done"}});
    return final_report(std::nullopt, report, fmt::format("nvfp4check replay {} --kernel {}", path, kernel.name()),
                        stopped);
  });
}

NVFP4CHECK_EXPORT char* nvfp4check_reference(const char* path, uint16_t** out, int64_t* count) {
  if (out) *out = nullptr;
  if (count) *count = 0;
  return guarded([&] {
    if (path == nullptr || out == nullptr || count == nullptr) throw std::invalid_argument("null argument");
    Problem p = read_case_file(path);
    if (!p.has_data()) expand_seeded_case(p);  // a case with only a seed: draw its data
    const ExactResult ref = exact_gemm(p);
    json j = {{"op", to_string(p.op)}, {"m", p.m}, {"n", p.n}, {"k", p.k}, {"l", p.l}};
    if (p.expect) {
      int64_t differing = 0;
      for (size_t x = 0; x < ref.c.size(); ++x) {
        const uint16_t e = (*p.expect)[x], c = ref.c[x];
        const bool both_nan = (e & 0x7C00) == 0x7C00 && (e & 0x3FF) && (c & 0x7C00) == 0x7C00 && (c & 0x3FF);
        differing += !(e == c || both_nan);
      }
      j["expect_mismatches"] = differing;
    }
    auto* words = static_cast<uint16_t*>(std::malloc(std::max<size_t>(1, ref.c.size()) * 2));
    if (!words) throw std::bad_alloc();
    if (!ref.c.empty()) std::memcpy(words, ref.c.data(), ref.c.size() * 2);
    *out = words;
    *count = static_cast<int64_t>(ref.c.size());
    return j;
  });
}

NVFP4CHECK_EXPORT void nvfp4check_kernel_failed(const char* check, const char* message) {
  if (t_notes == nullptr || !t_notes->check.empty()) return;  // the first report of a call wins
  t_notes->check = check && *check ? check : "kernel-error";
  t_notes->message = message ? message : "";
  t_notes->stage = t_notes->current_stage;
}

NVFP4CHECK_EXPORT void nvfp4check_free(void* p) { std::free(p); }
