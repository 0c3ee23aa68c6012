// One kernel call and what it left behind (see kernel_call.h).
#include "harness/process/kernel_call.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <new>

#include <fmt/format.h>

#include "harness/ops/block_scaled_output.h"
#include "harness/ops/op_module.h"
#include "reference/scale_layout.h"

namespace nvfp4 {
namespace {

// The padding byte for scales of format f: the call's pad is a NaN of E4M3 (or zero), but 0x7F is
// E8M0's 1.0, so an MX scale's NaN padding is E8M0's one NaN, 0xFF.
uint8_t scale_pad(BlockFormat f, uint8_t pad) {
  return f != BlockFormat::nvfp4 && (pad & 0x7F) == 0x7F ? uint8_t{0xFF} : pad;
}

// The problem's own tensor, uploaded as it is: borrowed, not copied (a medium case's A is
// megabytes, laid out three times a case).
InputTensor borrowed(std::string name, GuardPattern guard, const std::vector<uint8_t>& data) {
  InputTensor t{std::move(name), guard, {}};
  t.borrowed = &data;
  return t;
}

// A scale tensor as the call hands it: the problem's linear bytes (borrowed), or permuted with
// pad in the padding cells.
InputTensor scales_as(const Problem& p, std::string name, const std::vector<uint8_t>& linear, int64_t rows,
                      int64_t kb, int64_t l, uint8_t pad) {
  if (p.sf_layout != SfLayout::permuted || rows == 0) return borrowed(std::move(name), GuardPattern::nan_scales, linear);
  return {std::move(name), GuardPattern::nan_scales, sf_to_permuted(linear.data(), rows, kb, l, pad)};
}

template <class Word>
void fill_words(uint8_t* out, int64_t count, uint32_t w) {
  const Word word = static_cast<Word>(w);
  for (int64_t e = 0; e < count; ++e) std::memcpy(out + e * sizeof(Word), &word, sizeof(Word));  // little-endian
}

// `count` copies of word w as bytes of `type`.
std::vector<uint8_t> poisoned_bytes(int64_t count, OutType type, uint32_t w) {
  const int width = out_word_bytes(type);
  std::vector<uint8_t> out(static_cast<size_t>(count * width));
  switch (width) {  // a fixed width per loop: a medium GEMM's C is 16,384 words, poisoned every call
    case 1: fill_words<uint8_t>(out.data(), count, w); break;
    case 2: fill_words<uint16_t>(out.data(), count, w); break;
    case 4: fill_words<uint32_t>(out.data(), count, w); break;
    default:
      for (int64_t e = 0; e < count; ++e) std::memcpy(out.data() + e * width, &w, static_cast<size_t>(width));
  }
  return out;
}

OutputTensor poisoned_output(const Problem& p, const std::string& name, int64_t words, uint32_t poison) {
  return {name, words, out_word_bytes(p.out_type), poisoned_bytes(words, p.out_type, poison)};
}

}  // namespace

LaidOut gemm_family::lay_out(const Problem& p, const CallSpec& spec, uint32_t kernel_flags) {
  const uint8_t pad = spec.pad;
  const bool packed_kernel = kernel_flags & NVFP4_FLAG_GROUPS_PACKED;
  LaidOut in;
  if (!op_is_grouped(p.op)) {
    in.inputs.push_back(borrowed("a", GuardPattern::bytes, p.a));
    in.inputs.push_back(borrowed("b", GuardPattern::bytes, p.b));
    in.inputs.push_back(scales_as(p, "sfa", p.sfa, p.m, p.kb(), p.l, scale_pad(p.a_format, pad)));
    in.inputs.push_back(scales_as(p, "sfb", p.sfb, p.n, p.kb_b(), p.l, scale_pad(p.b_format, pad)));
    if (op_is_dual(p.op)) {
      in.inputs.push_back(borrowed("b2", GuardPattern::bytes, p.b2));
      in.inputs.push_back(scales_as(p, "sfb2", p.sfb2, p.n, p.kb_b(), p.l, scale_pad(p.b_format, pad)));
    }
    in.outputs = {poisoned_output(p, "c", p.c_elems(), spec.poison)};
    if (block_scaled_out::applies(p)) block_scaled_out::lay_out(in, p, spec);
    return in;
  }
  if (packed_kernel) {
    // SPEC section 2's packed arrangement: one buffer per tensor, groups at 64-bit offsets, each
    // group's permuted SFA starting on a tile of its own with NaN-scale padding rows.
    const PackedLayout lay = packed_layout(p);
    // One pad byte for both operands' padding: E8M0's NaN when either is MX (pack_groups pads
    // an NVFP4 operand's cells with it too, and 0xFF is E4M3's NaN as well).
    const bool mx = p.mx_operands();
    const bool permuted = p.sf_layout == SfLayout::permuted;
    PackedData d = pack_groups(p, mx ? scale_pad(BlockFormat::mxfp4, pad) : pad,
                               permuted ? PackedParts::permuted_scales : PackedParts::linear_scales);
    in.packed = true;
    // A and B from the groups' own bytes (pack_groups' order: an empty group has no A rows and
    // keeps its B slot, zero).
    InputTensor a{"a", GuardPattern::bytes, {}}, b{"b", GuardPattern::bytes, {}};
    a.in_pieces = b.in_pieces = true;
    for (const Group& q : p.groups) {
      if (q.m == 0) {
        b.pieces.push_back({nullptr, lay.n * lay.b_row, 0});
        continue;
      }
      a.pieces.push_back({q.a.data(), static_cast<int64_t>(q.a.size()), 0});
      b.pieces.push_back({q.b.data(), static_cast<int64_t>(q.b.size()), 0});
    }
    in.inputs = {std::move(a),
                 std::move(b),
                 {"sfa", GuardPattern::nan_scales, permuted ? std::move(d.sfa_permuted) : std::move(d.sfa_linear)},
                 {"sfb", GuardPattern::nan_scales, permuted ? std::move(d.sfb_permuted) : std::move(d.sfb_linear)}};
    for (size_t g = 0; g < p.groups.size(); ++g) {
      in.offsets.push_back({lay.a_offset(g), lay.b_offset(g),
                            permuted ? lay.sfa_permuted_offset(g) : lay.sfa_linear_offset(g),
                            permuted ? lay.sfb_permuted_offset(g) : lay.sfb_linear_offset(g)});
      in.c_offset.push_back(lay.c_offset(g));
    }
    in.outputs = {poisoned_output(p, "c", lay.c_elems(), spec.poison)};
    return in;
  }
  // Separate: every non-empty group its own buffers, each between its own guards, so a write
  // into the gap between two groups' outputs is a guard failure.
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const Group& q = p.groups[g];
    if (q.m == 0) continue;
    const std::string at = fmt::format("[g={}]", g);
    in.inputs.push_back(borrowed("a" + at, GuardPattern::bytes, q.a));
    in.inputs.push_back(borrowed("b" + at, GuardPattern::bytes, q.b));
    in.inputs.push_back(scales_as(p, "sfa" + at, q.sfa, q.m, q.kb(p.a_format), 1, scale_pad(p.a_format, pad)));
    in.inputs.push_back(scales_as(p, "sfb" + at, q.sfb, q.n, q.kb(p.b_format), 1, scale_pad(p.b_format, pad)));
    in.outputs.push_back(poisoned_output(p, "c" + at, q.c_elems(), spec.poison));
  }
  if (block_scaled_out::applies(p)) block_scaled_out::lay_out(in, p, spec);
  return in;
}

void gemm_family::point_abi(nvfp4_problem& abi, const Problem& p, const std::vector<uint8_t*>& inputs,
                            const std::vector<uint8_t*>& outputs) {
  // Grouped: the packed buffers or NULL, and the group table, are set by the caller.
  if (op_is_grouped(p.op)) return;
  abi.a = inputs[0];
  abi.b = inputs[1];
  abi.sfa = inputs[2];
  abi.sfb = inputs[3];
  abi.c = static_cast<uint16_t*>(static_cast<void*>(outputs.empty() ? nullptr : outputs[0]));
  if (op_is_dual(p.op)) {
    abi.b2 = inputs[4];
    abi.sfb2 = inputs[5];
  }
  if (block_scaled_out::applies(p)) block_scaled_out::point_abi(abi, p, inputs, outputs);
}

namespace {

// Read-only input ranges for the fault handler: plain globals, read in a signal handler. A
// grouped problem in the separate arrangement has four per group; past the table's end the
// remaining inputs are not protected (they are still compared after the call).
struct ProtectedRange {
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<int> fault{0};  // the index of its name in input_fault_names
};
constexpr int kMaxProtected = 1040;
ProtectedRange g_protected[kMaxProtected];

void on_segv(int sig, siginfo_t* info, void*) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (int x = 0; x < kMaxProtected; ++x)
    if (at >= g_protected[x].begin.load() && at < g_protected[x].end.load()) _exit(kInputFaultExitBase + g_protected[x].fault.load());
  // Not ours: die of the signal as the kernel would have.
  signal(sig, SIG_DFL);
  raise(sig);
}

// Appends `count` output words of `width` bytes read from little-endian bytes.
template <class Word>
void widen_words(const uint8_t* bytes, int64_t count, uint32_t* to) {
  for (int64_t e = 0; e < count; ++e) {
    Word w;
    std::memcpy(&w, bytes + e * sizeof(Word), sizeof(Word));  // little-endian hosts only
    to[e] = w;
  }
}

void read_words(const uint8_t* bytes, int64_t count, int width, std::vector<uint32_t>& into) {
  const size_t at = into.size();
  into.resize(at + static_cast<size_t>(count));  // each output read twice a call: a fixed width per loop
  uint32_t* to = into.data() + at;
  switch (width) {
    case 1: widen_words<uint8_t>(bytes, count, to); break;
    case 2: widen_words<uint16_t>(bytes, count, to); break;
    case 4: widen_words<uint32_t>(bytes, count, to); break;
    default:
      for (int64_t e = 0; e < count; ++e) {
        uint32_t w = 0;
        std::memcpy(&w, bytes + e * width, static_cast<size_t>(width));
        to[e] = w;
      }
  }
}

}  // namespace

nvfp4_problem to_abi(const Problem& p, const uint8_t* a, const uint8_t* b, const uint8_t* sfa, const uint8_t* sfb,
                     void* c, void* stream) {
  nvfp4_problem abi{};
  abi.op = static_cast<uint32_t>(p.op);
  abi.m = p.m;
  abi.n = p.n;
  abi.k = p.k;
  abi.l = p.l;
  if (op_is_grouped(p.op)) {
    // SPEC section 5: m the sum of m_g, n and k the largest, l = 1.
    abi.m = abi.n = abi.k = 0;
    abi.l = 1;
    for (const Group& g : p.groups) {
      abi.m += g.m;
      abi.n = std::max(abi.n, g.n);
      abi.k = std::max(abi.k, g.k);
    }
    abi.groups = static_cast<int64_t>(p.groups.size());
  }
  abi.a = a;
  abi.b = b;
  abi.sfa = sfa;
  abi.sfb = sfb;
  abi.sf_layout = static_cast<uint32_t>(p.sf_layout);
  abi.alpha = op_is_grouped(p.op) ? 1.0f : p.alpha;
  abi.c = static_cast<uint16_t*>(c);
  abi.stream = stream;
  abi.out_type = static_cast<uint32_t>(p.out_type);
  abi.alpha2 = op_is_dual(p.op) ? p.alpha2 : 1.0f;  // SPEC section 5: 1 for every other problem
  // Version 3: the GEMM family's operand formats (a quantize problem's module sets its own
  // fields).
  if (!op_quantizes(p.op)) {
    abi.a_format = static_cast<uint32_t>(p.a_format);
    abi.b_format = static_cast<uint32_t>(p.b_format);
  }
  return abi;
}

namespace {
// The name a write into this input is reported by: a group's "a[g=3]" is "a".
std::string fault_name(const std::string& input) { return input.substr(0, input.find('[')); }
}  // namespace

std::vector<std::string> input_fault_names(const LaidOut& in, bool grouped) {
  std::vector<std::string> names;
  for (const InputTensor& t : in.inputs) {
    const std::string name = fault_name(t.name);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  if (grouped) names.push_back("group table");
  return names;
}

void install_input_fault_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

namespace {

// One case's buffers (from the memory's pool); the memory and its stream last as long as the
// caller. A zero-byte tensor (an all-empty packed grouped problem's A) gets no buffer: NULL.
// What an input's last upload held, as far as that can be told without reading it: the
// problem's own bytes (borrowed whole or in pieces) at these addresses, in this state of the
// problem's data. Bytes laid out for one call (permuted scales with its padding) never match.
struct SentInput {
  bool own_bytes = false;
  const Problem* problem = nullptr;
  uint64_t generation = 0;
  const std::vector<uint8_t>* borrowed = nullptr;
  bool rotated = false;  // the borrowed bytes moved (InputTensor::rotated)
  std::vector<std::array<int64_t, 3>> pieces;  // address, size, fill

  SentInput() = default;
  SentInput(const InputTensor& t, const Problem& p, uint64_t data_generation)
      : own_bytes(t.borrowed || t.in_pieces),
        problem(&p),
        generation(data_generation),
        borrowed(t.borrowed),
        rotated(t.rotated.has_value()) {
    for (const InputTensor::Piece& x : t.pieces)
      pieces.push_back({static_cast<int64_t>(reinterpret_cast<intptr_t>(x.data)), x.size, x.fill});
  }
  bool same_bytes(const SentInput& o) const {
    return own_bytes && o.own_bytes && problem == o.problem && generation == o.generation && borrowed == o.borrowed &&
           rotated == o.rotated && pieces == o.pieces;
  }
};

struct CallBuffers {
  struct Input {
    std::string name;
    int fault;  // the index of its name in input_fault_names
    std::unique_ptr<GuardedBuffer> buffer;
    SentInput sent;
    // A host input after a call that left it as sent, guards included: it stays read-only
    // until the runner writes it again (InputProtection), so the next call with the same bytes
    // needs neither an upload nor a protection of its own.
    bool intact = false;
  };
  std::vector<Input> inputs;
  int table_fault = 0;  // the group tables' index in input_fault_names
  std::vector<std::unique_ptr<GuardedBuffer>> outputs;
  // The group table in the kernel's memory: group_device for a CUDA kernel; for a host kernel
  // `group` itself, between guards and read-only during the call like the other inputs. With
  // block-scaled output the group_out table beside it, kept the same way.
  std::unique_ptr<GuardedBuffer> table, out_table;

  CallBuffers(KernelMemory& memory, const LaidOut& in, int64_t groups, bool group_out) {
    const std::vector<std::string> faults = input_fault_names(in, groups > 0);
    const auto fault_of = [&](const std::string& name) {
      return static_cast<int>(std::find(faults.begin(), faults.end(), fault_name(name)) - faults.begin());
    };
    // Asked for in all_buffers' order (inputs, tables, outputs): the fetch of every buffer, and
    // of the outputs alone, then reads regions that lie side by side.
    std::vector<KernelMemory::Request> asked;
    std::vector<std::unique_ptr<GuardedBuffer>*> to;
    const auto ask = [&](int64_t bytes, GuardPattern pattern, std::unique_ptr<GuardedBuffer>* into) {
      if (bytes == 0) return;
      asked.push_back({bytes, pattern});
      to.push_back(into);
    };
    inputs.reserve(in.inputs.size());
    outputs.resize(in.outputs.size());
    for (const InputTensor& t : in.inputs) inputs.push_back({t.name, fault_of(t.name), nullptr, {}});
    for (size_t x = 0; x < in.inputs.size(); ++x) ask(in.inputs[x].size(), in.inputs[x].guard, &inputs[x].buffer);
    table_fault = fault_of("group table");
    if (groups > 0) ask(groups * static_cast<int64_t>(sizeof(nvfp4_group)), GuardPattern::bytes, &table);
    if (groups > 0 && group_out)
      ask(groups * static_cast<int64_t>(sizeof(nvfp4_group_out)), GuardPattern::bytes, &out_table);
    for (size_t x = 0; x < in.outputs.size(); ++x)
      ask(in.outputs[x].words * in.outputs[x].width, GuardPattern::nan_fp16, &outputs[x]);
    std::vector<std::unique_ptr<GuardedBuffer>> made = memory.allocate_all(asked);
    for (size_t x = 0; x < made.size(); ++x) *to[x] = std::move(made[x]);
    for (Input& x : inputs)
      if (x.buffer) x.buffer->keep_device_copy();
  }
  std::vector<uint8_t*> output_pointers() const {
    std::vector<uint8_t*> all;
    for (size_t x = 0; x < outputs.size(); ++x) all.push_back(output(x));
    return all;
  }
  uint8_t* input(size_t x) const { return inputs[x].buffer ? inputs[x].buffer->data() : nullptr; }
  uint8_t* output(size_t x) const { return outputs[x] ? outputs[x]->data() : nullptr; }
};

// The group table: pointers into the buffers just allocated (the same for every call of the
// case, so the stale call reuses them like every other pointer). An empty group's pointers stay
// NULL in both arrangements (SPEC section 2).
std::vector<nvfp4_group> group_table(const Problem& p, const LaidOut& in, const CallBuffers& buf) {
  std::vector<nvfp4_group> table(op_is_grouped(p.op) ? p.groups.size() : 0);
  // Block-scaled output: C is not written (NULL); Q and SFQ are in the group_out table.
  const bool has_c = !block_scaled_out::applies(p);
  size_t next_input = 0, next_output = 0;
  for (size_t g = 0; g < table.size(); ++g) {
    const Group& q = p.groups[g];
    nvfp4_group& t = table[g];
    t.m = q.m, t.n = q.n, t.k = q.k, t.alpha = q.alpha;
    if (q.m == 0) continue;
    if (in.packed) {
      const auto at = [&](size_t x, int64_t offset) -> uint8_t* { return buf.input(x) ? buf.input(x) + offset : nullptr; };
      t.a = at(0, in.offsets[g][0]);
      t.b = at(1, in.offsets[g][1]);
      t.sfa = at(2, in.offsets[g][2]);
      t.sfb = at(3, in.offsets[g][3]);
      t.c = buf.output(0) ? buf.output(0) + in.c_offset[g] * in.outputs[0].width : nullptr;
    } else {
      t.a = buf.input(next_input);
      t.b = buf.input(next_input + 1);
      t.sfa = buf.input(next_input + 2);
      t.sfb = buf.input(next_input + 3);
      next_input += 4;
      if (has_c) t.c = buf.output(next_output++);
    }
  }
  return table;
}

// The group_out table of a grouped call with block-scaled output (else empty).
std::vector<nvfp4_group_out> group_out_table(const Problem& p, const CallBuffers& buf) {
  if (!op_is_grouped(p.op) || !block_scaled_out::applies(p)) return {};
  return block_scaled_out::group_out_table(p, buf.output_pointers());
}

// Every buffer filled for the call: inputs, outputs' poison, the group tables. The runner's
// stream is held first, so work the kernel puts on any other stream runs ahead of its data. An
// input holding the same bytes as at its last upload is written again from its device copy
// where it keeps one (p's data in `generation`: changed in place, the count moves on); a moved
// tensor (InputTensor::rotated) whose buffer holds it unmoved as of `moved_from` is moved there.
void upload(KernelMemory& mem, CallBuffers& buf, const Problem& p, uint64_t generation, uint64_t moved_from,
            const LaidOut& in, const std::vector<nvfp4_group>& table, const std::vector<nvfp4_group_out>& out_table,
            const CallSpec& spec, double timeout_s) {
  if (!spec.inputs_ready_first) mem.hold_stream();
  for (size_t x = 0; x < in.inputs.size(); ++x) {
    CallBuffers::Input& b = buf.inputs[x];
    if (!b.buffer) continue;
    const InputTensor& t = in.inputs[x];
    SentInput now(t, p, generation);
    const auto held_unmoved = [&] {
      SentInput source(t, p, moved_from);
      source.rotated = false;
      return source.same_bytes(b.sent);
    };
    const bool again = now.same_bytes(b.sent) && (b.intact || b.buffer->restore());
    const bool moved_there = !again && t.rotated && held_unmoved() && b.buffer->upload_rotated(*t.rotated);
    if (!again && !moved_there) b.buffer->upload_from([&](uint8_t* dst) { t.write_to(dst); });
    b.intact = false;
    b.sent = std::move(now);
  }
  for (size_t x = 0; x < in.outputs.size(); ++x)
    if (buf.outputs[x]) buf.outputs[x]->upload(in.outputs[x].before.data());
  if (buf.table) buf.table->upload(reinterpret_cast<const uint8_t*>(table.data()));
  if (buf.out_table) buf.out_table->upload(reinterpret_cast<const uint8_t*>(out_table.data()));
  mem.flush();  // before the kernel's own work on the stream
  if (spec.inputs_ready_first) mem.synchronize(timeout_s);
}

// The ABI's problem pointing into the buffers: a grouped problem's packed buffers (or NULL for
// the separate arrangement, SPEC section 5) and its table, else the op module's fields.
nvfp4_problem abi_for(const Problem& p, const LaidOut& in, const CallBuffers& buf, const std::vector<nvfp4_group>& table,
                      const std::vector<nvfp4_group_out>& out_table, void* stream, bool cuda) {
  if (op_is_grouped(p.op)) {
    const bool packed = in.packed;
    nvfp4_problem abi = to_abi(p, packed ? buf.input(0) : nullptr, packed ? buf.input(1) : nullptr,
                               packed ? buf.input(2) : nullptr, packed ? buf.input(3) : nullptr,
                               packed ? buf.output(0) : nullptr, stream);
    const auto* in_memory = buf.table ? reinterpret_cast<const nvfp4_group*>(buf.table->data()) : nullptr;
    abi.group = cuda ? table.data() : in_memory;
    abi.group_device = cuda ? in_memory : nullptr;
    if (buf.out_table) {
      const auto* out_memory = reinterpret_cast<const nvfp4_group_out*>(buf.out_table->data());
      abi.group_out = cuda ? out_table.data() : out_memory;
      abi.group_out_device = cuda ? out_memory : nullptr;
      abi.q_format = NVFP4_FORMAT_NVFP4;
      abi.recipe = static_cast<uint32_t>(p.out_recipe);
    }
    return abi;
  }
  nvfp4_problem abi = to_abi(p, nullptr, nullptr, nullptr, nullptr, nullptr, stream);
  std::vector<uint8_t*> inputs, outputs;
  for (size_t x = 0; x < buf.inputs.size(); ++x) inputs.push_back(buf.input(x));
  for (size_t x = 0; x < buf.outputs.size(); ++x) outputs.push_back(buf.output(x));
  op_module(p.op).point_abi(abi, p, inputs, outputs);
  return abi;
}

// Host inputs read-only while the kernel runs (a write faults: the worker turns the fault into
// an input_fault report), for as long as this lives. The table first: an edit made and undone
// within the call leaves nothing to compare.
class InputProtection {
 public:
  InputProtection(CallBuffers& buf, bool on) : buf_(buf), on_(on) {
    // Host buffers keep their protection from buffer to buffer (device_buffers.h): what this call
    // does not protect is made writable (for one that is, nothing happens).
    for (const auto& o : buf.outputs)
      if (o) o->set_read_only(false);
    if (buf.table) protect(*buf.table, buf.table_fault);
    if (buf.out_table) protect(*buf.out_table, buf.table_fault);
    for (const CallBuffers::Input& x : buf.inputs)
      if (x.buffer) protect(*x.buffer, x.fault);
  }
  // The inputs stay read-only (a host buffer's upload writes through a second mapping, or makes
  // it writable first): the next call of the case mostly hands the kernel the same bytes, and an
  // mprotect each way per buffer and call was a fifth of a small host case's time.
  ~InputProtection() {
    if (!on_) return;
    for (int x = 0; x < count_; ++x) g_protected[x].begin = g_protected[x].end = 0;
    if (buf_.table) buf_.table->set_read_only(false);
    if (buf_.out_table) buf_.out_table->set_read_only(false);
  }
  InputProtection(const InputProtection&) = delete;
  InputProtection& operator=(const InputProtection&) = delete;

 private:
  void protect(GuardedBuffer& b, int fault) {
    // The exit status is a byte: an input past it is only compared after the call.
    if (!on_ || count_ == kMaxProtected || kInputFaultExitBase + fault > 255) {
      b.set_read_only(false);
      return;
    }
    b.set_read_only(true);
    ProtectedRange& r = g_protected[count_++];
    r.fault = fault;
    r.begin = reinterpret_cast<uintptr_t>(b.data());
    r.end = reinterpret_cast<uintptr_t>(b.data()) + static_cast<uintptr_t>(b.size());
  }
  CallBuffers& buf_;
  bool on_;
  int count_ = 0;
};

// The kernel's return code; what it threw goes into out.
int run_kernel(const Kernel& kernel, const nvfp4_problem& abi, CallObservation& out) {
  try {
    return kernel.run(abi);
  } catch (const std::exception& e) {
    out.end = CallObservation::End::exception;
    out.error = e.what();
  } catch (...) {
    out.end = CallObservation::End::exception;
    out.error = "an exception that is no std::exception";
  }
  return 0;
}

// The outputs as words, from each output buffer's staged copy: as bytes where every output is
// bytes (a quantizer's Q and SFQ), one copy and no widening.
OutputWords output_words(const CallBuffers& buf, const LaidOut& in) {
  const bool bytes = std::all_of(in.outputs.begin(), in.outputs.end(), [](const OutputTensor& o) { return o.width == 1; });
  if (bytes) {
    int64_t total = 0;
    for (size_t x = 0; x < buf.outputs.size(); ++x)
      if (buf.outputs[x]) total += in.outputs[x].words;
    std::vector<uint8_t> b(static_cast<size_t>(total));
    int64_t at = 0;
    for (size_t x = 0; x < buf.outputs.size(); ++x)
      if (buf.outputs[x]) {
        std::memcpy(b.data() + at, buf.outputs[x]->staged_data(), static_cast<size_t>(in.outputs[x].words));
        at += in.outputs[x].words;
      }
    return OutputWords::of_bytes(std::move(b));
  }
  std::vector<uint32_t> w;
  int64_t total = 0;
  for (size_t x = 0; x < buf.outputs.size(); ++x)
    if (buf.outputs[x]) total += in.outputs[x].words;
  w.reserve(static_cast<size_t>(total));
  for (size_t x = 0; x < buf.outputs.size(); ++x)
    if (buf.outputs[x]) read_words(buf.outputs[x]->staged_data(), in.outputs[x].words, in.outputs[x].width, w);
  return w;
}

// Every buffer by name (inputs, the group table, outputs), for fetching and guards.
std::vector<std::pair<std::string, GuardedBuffer*>> all_buffers(const CallBuffers& buf, const LaidOut& in) {
  std::vector<std::pair<std::string, GuardedBuffer*>> all;
  for (const CallBuffers::Input& x : buf.inputs)
    if (x.buffer) all.emplace_back(x.name, x.buffer.get());
  if (buf.table) all.emplace_back("group table", buf.table.get());
  if (buf.out_table) all.emplace_back("group_out table", buf.out_table.get());
  for (size_t x = 0; x < buf.outputs.size(); ++x)
    if (buf.outputs[x]) all.emplace_back(in.outputs[x].name, buf.outputs[x].get());
  return all;
}

// A changed input, with its first differing byte.
void compare_input(const std::string& name, const uint8_t* now, const InputTensor& was, CallObservation& out) {
  const InputTensor::Difference d = was.compare(now);
  if (d.count == 0) return;
  InputChange change;
  change.buffer = name;
  change.count = d.count;
  change.first = d.first;
  change.was = d.was;
  change.now = d.now;
  out.inputs.push_back(change);
}

void compare_input(const std::string& name, const uint8_t* now, const std::vector<uint8_t>& was, CallObservation& out) {
  InputTensor t{name, GuardPattern::bytes, {}};
  t.borrowed = &was;
  compare_input(name, now, t, out);
}

template <class Entry>
std::vector<uint8_t> table_bytes(const std::vector<Entry>& t) {
  std::vector<uint8_t> b(t.size() * sizeof(Entry));
  if (!b.empty()) std::memcpy(b.data(), t.data(), b.size());
  return b;
}

// After the fetch of every buffer: damaged guards, and inputs (the group table too) that are no
// longer what was sent.
// (Compared on the device where the buffer keeps a copy.)
void inspect(CallBuffers& buf, const LaidOut& in, const std::vector<nvfp4_group>& table,
             const std::vector<nvfp4_group>& sent, const std::vector<nvfp4_group_out>& out_table,
             const std::vector<nvfp4_group_out>& out_sent, bool cuda, double timeout_s, CallObservation& out) {
  std::vector<const GuardedBuffer*> damaged;
  for (const auto& [name, g] : all_buffers(buf, in)) {
    const std::optional<DeviceComparison> there = g->compared(timeout_s);
    const GuardDamage d = there ? there->guards : g->staged_guard_damage();
    if (!d.intact) {
      out.guards.push_back({name, d});
      damaged.push_back(g);
    }
  }
  for (size_t x = 0; x < in.inputs.size(); ++x) {
    GuardedBuffer* g = buf.inputs[x].buffer.get();
    if (!g) continue;
    const std::optional<DeviceComparison> there = g->compared(timeout_s);
    if (!there) {
      const size_t changes = out.inputs.size();
      compare_input(in.inputs[x].name, g->staged_data(), in.inputs[x], out);
      buf.inputs[x].intact = !cuda && out.inputs.size() == changes &&
                             std::find(damaged.begin(), damaged.end(), g) == damaged.end();
    } else if (there->changed > 0) {
      InputChange change;
      change.buffer = in.inputs[x].name;
      change.count = there->changed;
      change.first = there->first;
      change.was = there->was;
      change.now = there->now;
      out.inputs.push_back(change);
    }
  }
  if (table.empty()) return;
  const std::vector<uint8_t> want = table_bytes(sent);
  if (cuda) compare_input("group table", table_bytes(table).data(), want, out);
  compare_input(cuda ? "group table (device)" : "group table", buf.table->staged_data(), want, out);
  if (!buf.out_table) return;
  const std::vector<uint8_t> want_out = table_bytes(out_sent);
  if (cuda) compare_input("group_out table", table_bytes(out_table).data(), want_out, out);
  compare_input(cuda ? "group_out table (device)" : "group_out table", buf.out_table->staged_data(), want_out, out);
}

}  // namespace

struct KernelCaller::Buffers : CallBuffers {
  using CallBuffers::CallBuffers;
};

KernelCaller::KernelCaller(const Kernel& kernel, double timeout_s, bool protect_inputs)
    : kernel_(kernel), timeout_s_(timeout_s), protect_inputs_(protect_inputs && !kernel.is_cuda()) {}

struct KernelCaller::Layout {
  uint64_t generation = 0;
  const Problem* problem = nullptr;
  uint8_t pad = 0;
  uint32_t poison = 0;
  LaidOut in;
};

KernelCaller::~KernelCaller() {
  // After a hang or a broken context nothing may be freed (cudaFree would wait forever).
  if (unusable_) {
    (void)buffers_.release();
    (void)memory_.release();
  }
}

void KernelCaller::prepare() {
  if (memory_ || unusable_) return;
  try {
    memory_ = KernelMemory::create(kernel_.info->memory);
  } catch (...) {
    memory_.reset();
  }
}

void KernelCaller::begin_case(CaseData data) {
  layout_.reset();
  data_ = std::move(data);
  holds_stale_ = false;
  moved_.clear();
  ++data_generation_;
  if (!unusable_) buffers_.reset();
}

void KernelCaller::end_in_suite_memory(CallObservation& out, const std::string& memory, bool called) {
  out.end = CallObservation::End::suite_memory;
  out.context_lost = true;
  out.error = fmt::format("the kernel's process ran out of {} for the suite's own work on this case ({}, the kernel {})",
                          memory, called ? "reading its outputs back" : "laying its inputs out in guarded buffers",
                          called ? "had been called" : "was not called");
  layout_.reset();
  buffers_.reset();
}

CallObservation KernelCaller::call(const CallSpec& spec) {
  CallObservation out;
  if (unusable_) {
    out.end = CallObservation::End::cuda_error;
    out.error = "the process's CUDA context was lost by an earlier call";
    out.context_lost = true;
    return out;
  }
  const bool cuda = kernel_.is_cuda();
  auto start = std::chrono::steady_clock::now();
  // From the kernel's call until its work is done and C is back (a device error ends it there).
  std::optional<std::chrono::steady_clock::time_point> called;
  const auto since_call = [&] {
    return called ? std::chrono::duration<double>(std::chrono::steady_clock::now() - *called).count() : 0.0;
  };
  try {
    // Stale data derived from the problem's own, in place, for the stale call (and back for any
    // call after it that wants the problem's data).
    const OpModule& module = op_module(data_.problem.op);
    if (!data_.stale && data_.stale_seed && (module.stale_in_buffers || module.stale_in_place) &&
        spec.stale_data != holds_stale_) {
      ++data_generation_;  // first: a derive cut short leaves no laid-out copy that passes for it
      if (module.stale_in_buffers) {
        // The tensors uploaded as they are stay here as they are; their stale data are made as
        // they are written into the buffers (undone: nothing to move back).
        moved_.clear();
        for (const MovedTensor& m : module.stale_in_buffers(data_.problem, *data_.stale_seed, holds_stale_))
          moved_.emplace_back(m.tensor, m.rotation);
        moved_from_ = data_generation_ - 1;
      } else {
        module.stale_in_place(data_.problem, *data_.stale_seed, holds_stale_);
      }
      holds_stale_ = !holds_stale_;
      // The derive is booked with the channel (the data arriving), not the call.
      start = std::chrono::steady_clock::now();
    }
    const Problem& p = spec.stale_data && data_.stale ? *data_.stale : data_.problem;
    if (!memory_) memory_ = KernelMemory::create(kernel_.info->memory);
    KernelMemory& mem = *memory_;
    // lay_out reads only the data, the padding and the poison (and the caller's flags).
    if (!layout_ || layout_->generation != data_generation_ || layout_->problem != &p || layout_->pad != spec.pad ||
        layout_->poison != spec.poison) {
      layout_.reset();
      layout_ = std::make_unique<Layout>(Layout{data_generation_, &p, spec.pad, spec.poison,
                                                op_module(p.op).lay_out(p, spec, kernel_.info->flags)});
      if (&p == &data_.problem)
        for (InputTensor& t : layout_->in.inputs)
          for (const auto& [tensor, rotation] : moved_)
            if (!t.in_pieces && t.borrowed == tensor) t.rotated = rotation;
    }
    const LaidOut& in = layout_->in;
    const int64_t groups = op_is_grouped(p.op) ? static_cast<int64_t>(p.groups.size()) : 0;
    if (!buffers_) buffers_ = std::make_unique<Buffers>(mem, in, groups, block_scaled_out::applies(p));
    Buffers& buf = *buffers_;
    const std::vector<nvfp4_group> table = group_table(p, in, buf), table_sent = table;
    const std::vector<nvfp4_group_out> out_table = group_out_table(p, buf), out_sent = out_table;
    const auto laid_out = std::chrono::steady_clock::now();
    out.layout_seconds = std::chrono::duration<double>(laid_out - start).count();
    upload(mem, buf, p, data_generation_, moved_from_, in, table, out_table, spec, timeout_s_);
    nvfp4_problem abi = abi_for(p, in, buf, table, out_table, mem.stream(), cuda);
    out.upload_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - laid_out).count();
    if (spec.seed) abi.seed = *spec.seed;  // a stochastic quantizer's other seeds (rule 7)
    {
      const InputProtection protection(buf, protect_inputs_);
      called = std::chrono::steady_clock::now();
      out.rc = run_kernel(kernel_, abi, out);
      mem.release_stream();
    }
    mem.after_call();
    // C once the runner's stream is done...
    for (const auto& c : buf.outputs)
      if (c) c->fetch_async();
    mem.synchronize(timeout_s_);
    out.kernel_seconds = since_call();
    out.c = output_words(buf, in);
    // ...and once everything the kernel enqueued anywhere is finished: if C changed meanwhile,
    // the kernel wrote it from a stream other than problem.stream. Then every buffer is fetched
    // once (one wait) for its guards and, for inputs, its data.
    mem.synchronize_device(timeout_s_);
    // The device comparisons first: the fetches then leave together.
    std::vector<GuardedBuffer*> fetched;
    for (const auto& [name, g] : all_buffers(buf, in))
      if (!g->compare_async()) fetched.push_back(g);
    for (GuardedBuffer* g : fetched) g->fetch_async();
    mem.synchronize(timeout_s_);
    out.c_later = cuda ? output_words(buf, in) : out.c;
    if (out.c_later == out.c) out.c_later = out.c;  // one copy travels and is kept
    if (out.end != CallObservation::End::exception) inspect(buf, in, table, table_sent, out_table, out_sent, cuda, timeout_s_, out);
  } catch (const DeviceError& e) {
    if (out.kernel_seconds == 0) out.kernel_seconds = since_call();
    if (e.out_of_memory()) {
      // The suite's own device or pinned memory, as for its host memory below.
      end_in_suite_memory(out, fmt::format("device or pinned memory ({})", e.what()), called.has_value());
    } else {
      out.end = e.hung() ? CallObservation::End::device_hang : CallObservation::End::cuda_error;
      out.error = e.what();
      out.context_lost = cuda;
      unusable_ = out.context_lost;
    }
  } catch (const std::bad_alloc&) {
    // The suite's own allocations: the kernel's own throws were caught by run_kernel. What this
    // call held may be half made, so it goes, and the process takes no more cases (its memory goes
    // back); the runner ends the run with its own error.
    if (out.kernel_seconds == 0) out.kernel_seconds = since_call();
    end_in_suite_memory(out, "host memory", called.has_value());
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace nvfp4
