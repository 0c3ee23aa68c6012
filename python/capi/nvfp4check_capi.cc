// The C API of the Python package (nvfp4check_capi.h): a kernel given as info + callback becomes
// a registry Kernel and goes through the suite core (the schedule, check_case, the reports)
// exactly like a plugin kernel, called in this process or served to a parent `nvfp4check run`.
#include "harness/ops/op_module.h"
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

#include "harness/judge/case_check.h"
#include "harness/process/device_buffers.h"
#include "harness/draw/generators.h"
#include "harness/engine/listeners.h"
#include "harness/engine/report.h"
#include "harness/engine/suite.h"
#include "harness/process/warmup.h"
#include "harness/process/worker.h"
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
// The kernel is called on the thread that runs the check, so this is per thread.
struct CallNotes {
  std::string check, message;  // the first failure the callback reported during the call
  bool stopped = false;        // an interrupt: the check ends, the case in progress is dropped
};
thread_local CallNotes t_notes;

// A callback that reported a failure (a Python exception) makes the call throw: the core turns a
// kernel's exception into the check "exception" with this text.
class CallbackFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

int slot_run(int index, const nvfp4_problem* problem) {
  Callback cb;
  {
    std::lock_guard<std::mutex> lock(g_slots_mutex);
    if (index < 0 || static_cast<size_t>(index) >= g_slots.size() || !g_slots[index]) return NVFP4_ERROR;
    cb = *g_slots[index];
  }
  t_notes.check.clear();
  t_notes.message.clear();
  const int rc = cb.run(cb.user, problem);
  if (rc == NVFP4CHECK_STOP) {
    // Thrown, so no further call of the case is made; the case itself is dropped.
    t_notes.stopped = true;
    throw CallbackFailure("interrupted");
  }
  if (!t_notes.check.empty()) {
    // A traceback is several lines: each indented under the lead line of the failure text.
    std::string text = t_notes.check == "exception" ? "" : t_notes.check + ": ";
    for (char ch : t_notes.message) text += ch == '\n' ? std::string("\n    ") : std::string(1, ch);
    throw CallbackFailure(text);
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
  std::string op, case_dir = kDefaultCaseDir, policy, command;
  int64_t cases = 0;
  double seconds = 0, timeout_s = kDefaultCallTimeout;
  std::optional<uint64_t> seed;
  bool keep_passing_cases = false;
  bool warmup = false;  // one warm-up call before the first case (harness/process/warmup.h)
  std::optional<Shape> shape;
  KernelArgs replay_args;
};

Options parse_options(const char* text) {
  Options o;
  const json j = text && *text ? json::parse(text) : json::object();
  if (!j.is_object()) throw std::invalid_argument("options must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    if (key == "op") {
      o.op = value.get<std::string>();
      Op op;
      if (!parse_op(o.op, &op))
        throw std::invalid_argument("op must be one of gemv, gemm, grouped_gemm, dual_gemm, quantize, not \"" + o.op + "\"");
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
    } else if (key == "warmup") {
      o.warmup = value.get<bool>();
    } else if (key == "shape") {
      Shape s;
      s.m = value.at("m").get<int64_t>();
      s.n = value.value("n", int64_t{1});
      s.k = value.at("k").get<int64_t>();
      s.l = value.value("l", int64_t{1});
      s.op = o.op == "quantize" ? Op::quantize : s.n == 1 ? Op::gemv : Op::gemm;
      if (const std::string err = case_shape_error(s); !err.empty()) throw std::invalid_argument("shape: " + err);
      o.shape = s;
    } else if (key == "replay_args") {
      // How the program names this kernel again (Python's worker gives its --python arguments).
      o.replay_args = value.get<std::vector<std::string>>();
    } else if (key == "command") {
      o.command = value.get<std::string>();
    } else {
      throw std::invalid_argument("unknown option \"" + key + "\"");
    }
  }
  if (o.cases == 0 && o.seconds == 0) o.seconds = kDefaultRunSeconds;
  return o;
}

CaseOptions case_options(const Options& o) {
  CaseOptions r;
  r.case_dir = o.case_dir;
  r.keep_passing = o.keep_passing_cases;
  if (!o.policy.empty()) r.policy = Policy::parse(o.policy);
  return r;
}

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

char* error_json(const std::string& what) { return dup_string(json{{"error", what}}.dump()); }

json final_report(std::optional<uint64_t> seed, const KernelReport& k, const std::string& command, bool stopped) {
  json report = report_json(seed, {k}, command);
  json out = {{"seed", report["seed"]}, {"command", command}, {"kernel", report["kernels"][0]}, {"stopped", stopped}};
  if (k.failure) out["failure_text"] = k.failure->text;
  return out;
}

// An executor whose first case gets a failed warm-up call as its first call (the warm-up's
// reproducer is that case; its own output is never judged).
class AfterWarmup final : public Executor {
 public:
  explicit AfterWarmup(Executor& inner) : inner_(inner) {}
  const KernelDesc& kernel() override { return inner_.kernel(); }
  std::vector<CallObservation> run_case(const CaseData& data, const std::vector<PlannedCall>& plan) override {
    if (std::optional<std::vector<CallObservation>> failed = failure_.hand_to_case()) return std::move(*failed);
    return inner_.run_case(data, plan);
  }
  // Makes the warm-up call; returns its seconds.
  double warm_up() {
    const auto t = std::chrono::steady_clock::now();
    const CaseData data = warmup_case(inner_.kernel().info);
    const std::vector<CallObservation> out = inner_.run_case(data, {PlannedCall{}});
    if (!t_notes.stopped) failure_.record(out, data.problem);  // a stop request is no failure
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

 private:
  Executor& inner_;
  WarmupFailure failure_;
};

// One kernel's cases from the core's schedule (exactly `nvfp4check run`'s for this kernel and
// seed), called in this process, up to the first failure; *stopped when a callback asked to stop.
// Python's callbacks say when to stop (an interrupt in the kernel).
class StopListener final : public SuiteListener {
 public:
  bool should_stop() override { return t_notes.stopped; }
};

// With o.warmup (Python kernels, which compile on their first call) one warm-up call comes first,
// outside o.seconds.
KernelReport run_schedule(const Kernel& kernel, const Options& o, uint64_t seed, const KernelArgs& replay_args,
                          bool* stopped) {
  InProcessExecutor in_process(kernel, o.timeout_s);
  AfterWarmup executor(in_process);
  const KernelDesc& desc = executor.kernel();
  ScheduleOptions so;
  so.seed = seed;
  if (Op op; parse_op(o.op, &op)) so.op = op;
  so.shape = o.shape;
  // In this process a huge case's tensors would be copied into Python's own arrays: the huge
  // tier is `nvfp4check run`'s, whose kernel processes take them from a shared file.
  so.huge = HugeTier::off;
  std::string why_not;
  const std::optional<Schedule> schedule = kernel_schedule(desc, so, &why_not);
  if (!schedule) return skipped_report(desc, why_not);
  LaneSettings ls;
  ls.cases = o.cases;
  ls.seconds = o.seconds;
  ls.seed = seed;
  ls.case_options = case_options(o);
  ls.replay_args = replay_args;
  t_notes = CallNotes{};
  const double warmup = o.warmup ? executor.warm_up() : 0;
  if (t_notes.stopped) {
    *stopped = true;
    return kernel_report(desc);
  }
  StopListener stop;
  ErrorMapListener maps;
  Listeners listeners({&stop, &maps});
  KernelReport report = check_kernel({&executor}, desc, *schedule, ls, listeners);
  report.warmup_seconds = warmup;
  *stopped = t_notes.stopped;
  return report;
}

uint64_t chosen_seed(const Options& o) { return seed_or_clock(o.seed, "seed="); }

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

NVFP4CHECK_EXPORT char* nvfp4check_stream_note(const char* check, const char* mine, const char* rerun) {
  const std::optional<Check> c = check ? check_from_name(check) : std::nullopt;
  if (!c || !stream_explainable(*c) || !mine || !rerun) return dup_string("");
  return dup_string(other_stream_note(*c, mine, rerun));
}

NVFP4CHECK_EXPORT uint64_t nvfp4check_clock_seed(void) { return clock_seed(); }

NVFP4CHECK_EXPORT char* nvfp4check_build_info(void) {
  return guarded([] {
    // The struct sizes let the ctypes mirror of the ABI check its layout against this compiler's.
    json j = {{"capi_version", NVFP4CHECK_CAPI_VERSION}, {"abi_version", NVFP4_ABI_VERSION}, {"version", "0.1.0"},
              {"sizeof_kernel_info", sizeof(nvfp4_kernel_info)}, {"sizeof_problem", sizeof(nvfp4_problem)},
              {"offsetof_problem_stream", offsetof(nvfp4_problem, stream)},
              {"sizeof_group", sizeof(nvfp4_group)},
              {"offsetof_info_out_types", offsetof(nvfp4_kernel_info, out_types)},
              {"offsetof_problem_out_type", offsetof(nvfp4_problem, out_type)},
              {"offsetof_problem_alpha2", offsetof(nvfp4_problem, alpha2)},
              {"offsetof_problem_group", offsetof(nvfp4_problem, group)},
              {"offsetof_group_c", offsetof(nvfp4_group, c)},
              {"offsetof_group_alpha", offsetof(nvfp4_group, alpha)},
              {"sizeof_group_out", sizeof(nvfp4_group_out)},
              {"offsetof_info_a_formats", offsetof(nvfp4_kernel_info, a_formats)},
              {"offsetof_info_recipes", offsetof(nvfp4_kernel_info, recipes)},
              {"offsetof_problem_a_format", offsetof(nvfp4_problem, a_format)},
              {"offsetof_problem_x", offsetof(nvfp4_problem, x)},
              {"offsetof_problem_global_scale", offsetof(nvfp4_problem, global_scale)},
              {"offsetof_problem_seed", offsetof(nvfp4_problem, seed)},
              {"offsetof_problem_group_out_device", offsetof(nvfp4_problem, group_out_device)},
              {"offsetof_group_out_global_scale", offsetof(nvfp4_group_out, global_scale)},
              {"default_seconds", kDefaultRunSeconds},
              {"default_case_dir", kDefaultCaseDir}};
#if defined(NVFP4_HAVE_CUDA)
    j["cuda_build"] = true;
#else
    j["cuda_build"] = false;
#endif
    // The ops in op_table.h's order, as [name, NVFP4_OP_* value]: Python's op names come from
    // here, so a new op is known to the package without a Python edit.
    j["ops"] = json::array();
    for (const OpInfo& o : kOpTable) j["ops"].push_back({o.name, static_cast<uint32_t>(o.op)});
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
    bool stopped = false;
    // Python prints how to replay a callback in Python; the program reaches it only where the
    // caller says how (a file's function, through --python).
    const KernelReport report = run_schedule(kernel, o, seed, o.replay_args, &stopped);
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
    bool stopped = false;
    const KernelArgs replay_args = {"--plugin", std::filesystem::absolute(plugin_path).string(), "--kernel",
                                    kernel->name()};
    const KernelReport report = run_schedule(*kernel, o, seed, replay_args, &stopped);
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
    // A case file, validated as `nvfp4check replay` does (CaseError: a bad file is a usage error).
    const ReplayInput in = read_replay_input(path, false);
    InProcessExecutor executor(kernel, o.timeout_s);
    const KernelDesc& desc = executor.kernel();
    KernelReport report;
    bool stopped = false;
    if (!desc.runnable) {
      report = skipped_report(desc, desc.why_not);
    } else {
      t_notes = CallNotes{};
      StopListener stop;
      ErrorMapListener maps(case_options(o).case_dir);
      Listeners listeners({&stop, &maps});
      report = replay_kernel(executor, desc, {&in}, case_options(o), {}, listeners);
      stopped = t_notes.stopped;
    }
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
    const ExactResult ref = op_reference(p);
    json j = {{"op", to_string(p.op)}, {"m", p.m}, {"n", p.n}, {"k", p.k}, {"l", p.l},
              {"out_type", to_string(p.out_type)}};
    if (op_is_grouped(p.op)) {
      json groups = json::array();
      for (const Group& g : p.groups) groups.push_back({g.m, g.n});
      j["groups"] = groups;
    }
    if (has_expect(p)) j["expect_mismatches"] = compare_expect(p, ref, 0).differing;
    // The output words' little-endian bytes, in 16-bit units (two per FP32 word); a quantize case's
    // Q bytes, then SFQ's in linear order, as `nvfp4check reference` writes them, a zero byte
    // after an odd count.
    std::vector<uint8_t> bytes;
    if (op_quantizes(p.op)) {
      bytes = ref.quant->q;
      bytes.insert(bytes.end(), ref.quant->sfq.begin(), ref.quant->sfq.end());
      j.erase("n");
      j.erase("out_type");
      j.update({{"in_type", to_string(p.in_type)}, {"format", to_string(p.q_format)}, {"recipe", to_string(p.recipe)},
                {"q_bytes", ref.quant->q.size()}, {"sfq_bytes", ref.quant->sfq.size()}, {"kb", p.qkb()}});
      if (bytes.size() % 2) bytes.push_back(0);
    } else {
      bytes = words_to_bytes(p.out_type, ref.words());
    }
    auto* words = static_cast<uint16_t*>(std::malloc(std::max<size_t>(2, bytes.size())));
    if (!words) throw std::bad_alloc();
    if (!bytes.empty()) std::memcpy(words, bytes.data(), bytes.size());
    *out = words;
    *count = static_cast<int64_t>(bytes.size() / 2);
    return j;
  });
}

NVFP4CHECK_EXPORT char* nvfp4check_unsupported_reason(const nvfp4_kernel_info* info, const nvfp4_problem* problem) {
  if (info == nullptr || problem == nullptr) return dup_string("null argument");
  Problem p;
  p.op = static_cast<Op>(problem->op);
  p.m = problem->m;
  p.n = problem->n;
  p.k = problem->k;
  p.l = problem->l;
  p.sf_layout = static_cast<SfLayout>(problem->sf_layout);
  p.alpha = problem->alpha;
  // Version 2's fields (a zero out_type is FP16, as in a zero-filled version-1 struct).
  p.out_type = problem->out_type == 0 ? OutType::fp16 : static_cast<OutType>(problem->out_type);
  p.alpha2 = op_is_dual(p.op) ? problem->alpha2 : 1.0f;
  if (op_quantizes(p.op)) {
    // Version 3's fields. The options a quantizer's flags fix have no field of the problem: the
    // suite hands a kernel only problems whose options its flags match, so they are the flags'.
    p.in_type = static_cast<InType>(problem->in_type);
    p.q_format = static_cast<BlockFormat>(problem->q_format);
    p.recipe = static_cast<Recipe>(problem->recipe);
    p.quant_2d = info->flags & NVFP4_FLAG_QUANT_2D;
    p.row_global_scale = info->flags & NVFP4_FLAG_ROW_GLOBAL_SCALE;
    if (info->flags & NVFP4_FLAG_STOCHASTIC) p.stochastic_seed = problem->seed;
  } else {
    // Version 3's fields of the GEMM family: without them every MX problem would read as NVFP4,
    // outside a kernel declaring MX formats alone, and an NVFP4 output's recipe as te.
    // Zero (a zero-filled struct, as for out_type) is NVFP4.
    if (problem->a_format != 0) p.a_format = static_cast<BlockFormat>(problem->a_format);
    if (problem->b_format != 0) p.b_format = static_cast<BlockFormat>(problem->b_format);
    if (p.out_type == OutType::nvfp4 && problem->recipe != 0) p.out_recipe = static_cast<Recipe>(problem->recipe);
  }
  if (op_is_grouped(p.op) && problem->group != nullptr)
    for (int64_t g = 0; g < problem->groups; ++g) {
      Group q;
      q.m = problem->group[g].m;
      q.n = problem->group[g].n;
      q.k = problem->group[g].k;
      q.alpha = problem->group[g].alpha;
      p.groups.push_back(q);
    }
  return dup_string(unsupported_reason(*info, p));
}

NVFP4CHECK_EXPORT void nvfp4check_kernel_failed(const char* check, const char* message) {
  if (!t_notes.check.empty()) return;  // the first report of a call wins
  t_notes.check = check && *check ? check : "exception";
  t_notes.message = message ? message : "";
}

NVFP4CHECK_EXPORT int nvfp4check_serve(const nvfp4_kernel_info* info, nvfp4check_run_fn run, void* user, int fd,
                                       double timeout_s) {
  try {
    if (run == nullptr) throw std::invalid_argument("no run callback was given");
    const SlotLease slot(run, user);
    Registry holder;
    const Kernel kernel = callback_kernel(holder, info, slot.index());
    return serve_kernel(fd, kernel, timeout_s);
  } catch (const std::exception& e) {
    try {
      send_message(fd, ReadyMsg{{}, e.what()});
    } catch (...) {
    }
    return 2;
  }
}

NVFP4CHECK_EXPORT int nvfp4check_serve_refused(int fd, const char* why) {
  try {
    send_message(fd, ReadyMsg{{}, why && *why ? why : "the kernel process could not start"});
    return 0;
  } catch (...) {
    return -1;
  }
}

NVFP4CHECK_EXPORT void nvfp4check_free(void* p) { std::free(p); }
