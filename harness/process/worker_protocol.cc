// CBOR encoding of the worker protocol's messages (see worker_protocol.h). Each struct that
// travels is described once, by a visit_fields overload listing its fields in order; one
// encoder and one decoder walk those lists, so a new field is one line in its list.
#include "harness/process/worker_protocol.h"

#include <poll.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reference/problem_fields.h"

namespace nvfp4 {

using json = nlohmann::json;

namespace {

// The messages' names on the wire, in the order of WorkerMessage's alternatives.
constexpr const char* kMessageNames[] = {"ready", "run", "call", "done", "quit"};
static_assert(std::size(kMessageNames) == std::variant_size_v<WorkerMessage>);

constexpr FieldRole kInput = FieldRole::input;

template <class T, class U>
using if_is = std::enable_if_t<std::is_same_v<std::remove_const_t<T>, U>>;

// The field lists. Only FieldRole::input fields travel: a kernel's process never sees what the
// parent expects.
template <class V, class T>
if_is<T, Problem> visit_fields(V&& v, T& p) { visit_problem_fields(v, p); }
template <class V, class T>
if_is<T, Group> visit_fields(V&& v, T& g) { visit_group_fields(v, g); }
template <class V, class T>
if_is<T, NamedTensor> visit_fields(V&& v, T& t) { visit_tensor_fields(v, t); }
template <class V, class T>
if_is<T, KernelDesc> visit_fields(V&& v, T& k) {
  v("name", k.name, kInput);
  v("origin", k.origin, kInput);
  v("description", k.description, kInput);
  v("abi", k.info.abi_version, kInput);
  v("memory", k.info.memory, kInput);
  v("ops", k.info.ops, kInput);
  v("layouts", k.info.sf_layouts, kInput);
  v("min_sm", k.info.min_sm, kInput);
  v("m_multiple", k.info.m_multiple, kInput);
  v("n_multiple", k.info.n_multiple, kInput);
  v("k_multiple", k.info.k_multiple, kInput);
  v("flags", k.info.flags, kInput);
  v("out_types", k.info.out_types, kInput);
  v("max_groups", k.info.max_groups, kInput);
  v("a_formats", k.info.a_formats, kInput);
  v("b_formats", k.info.b_formats, kInput);
  v("in_types", k.info.in_types, kInput);
  v("q_formats", k.info.q_formats, kInput);
  v("recipes", k.info.recipes, kInput);
  v("runnable", k.runnable, kInput);
  v("why_not", k.why_not, kInput);
  v("device_free_bytes", k.device_free_bytes, kInput);
}
template <class V, class T>
if_is<T, CaseData> visit_fields(V&& v, T& d) {
  v("problem", d.problem, kInput);
  v("stale", d.stale, kInput);
  v("stale_seed", d.stale_seed, kInput);
}
template <class V, class T>
if_is<T, CallSpec> visit_fields(V&& v, T& c) {
  v("pad", c.pad, kInput);
  v("poison", c.poison, kInput);
  v("stale_data", c.stale_data, kInput);
  v("inputs_ready_first", c.inputs_ready_first, kInput);
  v("seed", c.seed, kInput);
}
template <class V, class T>
if_is<T, GuardReport> visit_fields(V&& v, T& g) {
  v("buffer", g.buffer, kInput);
  v("intact", g.damage.intact, kInput);
  v("before", g.damage.before, kInput);
  v("offset", g.damage.offset, kInput);
  v("expected", g.damage.expected, kInput);
  v("actual", g.damage.actual, kInput);
  v("damaged_bytes", g.damage.damaged_bytes, kInput);
}
template <class V, class T>
if_is<T, InputChange> visit_fields(V&& v, T& x) {
  v("buffer", x.buffer, kInput);
  v("count", x.count, kInput);
  v("first", x.first, kInput);
  v("was", x.was, kInput);
  v("now", x.now, kInput);
}
template <class V, class T>
if_is<T, CallObservation> visit_fields(V&& v, T& o) {
  v("end", o.end, kInput);
  v("rc", o.rc, kInput);
  v("error", o.error, kInput);
  v("c", o.c, kInput);
  v("c_later", o.c_later, kInput);
  v("guards", o.guards, kInput);
  v("inputs", o.inputs, kInput);
  v("seconds", o.seconds, kInput);
  v("kernel_seconds", o.kernel_seconds, kInput);
  v("layout_seconds", o.layout_seconds, kInput);
  v("upload_seconds", o.upload_seconds, kInput);
  v("context_lost", o.context_lost, kInput);
}
template <class V, class T>
if_is<T, ReadyMsg> visit_fields(V&& v, T& m) {
  v("kernels", m.kernels, kInput);
  v("error", m.error, kInput);
  v("protocol", m.protocol, kInput);
}
template <class V, class T>
if_is<T, RunCaseMsg> visit_fields(V&& v, T& m) {
  v("case", m.case_id, kInput);
  v("data", m.data, kInput);
  v("plan", m.plan, kInput);
  v("started_first", m.started_first, kInput);
}
// A run message whose case the caller keeps, encoded from references (a medium case's data and
// its stale copy are megabytes): the same fields, so the same bytes, as RunCaseMsg.
struct RunCaseView {
  int64_t case_id;
  const CaseData* data;
  const std::vector<CallSpec>* plan;
  bool started_first;
};
template <class V, class T>
if_is<T, RunCaseView> visit_fields(V&& v, T& m) {
  v("case", m.case_id, kInput);
  v("data", *m.data, kInput);
  v("plan", *m.plan, kInput);
  v("started_first", m.started_first, kInput);
}
template <class V, class T>
if_is<T, CallStartedMsg> visit_fields(V&& v, T& m) {
  v("case", m.case_id, kInput);
  v("index", m.index, kInput);
}
template <class V, class T>
if_is<T, CallDoneMsg> visit_fields(V&& v, T& m) {
  v("case", m.case_id, kInput);
  v("index", m.index, kInput);
  v("observation", m.observation, kInput);
}
template <class V, class T>
if_is<T, QuitMsg> visit_fields(V&&, T&) {}

// Enum values the protocol accepts; a problem's enums are checked with the problem
// (problem_error), so only the call's end needs one here.
bool known(CallObservation::End e) { return e <= CallObservation::End::suite_memory; }
template <class E>
bool known(E) { return true; }

// What a decoded struct must satisfy beyond its fields' types.
std::string invalid(const Problem& p) {
  const std::string e = problem_error(p);
  return e.empty() ? e : "bad problem: " + e;
}
template <class T>
std::string invalid(const T&) { return {}; }

[[noreturn]] void malformed(const std::string& at, const std::string& what) {
  throw ProtocolError("malformed message: " + at + ": " + what);
}

// The memory files of the message being encoded or decoded on this thread (each lane encodes
// and decodes its own worker's messages on its own thread).
thread_local SharedFile* t_sink = nullptr;
thread_local const SharedFile* t_source = nullptr;
thread_local uint64_t t_source_taken = 0;

// A byte string past kSharedBytes, written to the sink: the frame holds a binary of subtype
// kSharedSubtype, 16 bytes: the offset and the length, little-endian.
constexpr std::uint64_t kSharedSubtype = 0x53;
json shared_place(uint64_t at, uint64_t n) {
  std::vector<uint8_t> where(16);
  for (int x = 0; x < 8; ++x) where[x] = static_cast<uint8_t>(at >> (8 * x)), where[8 + x] = static_cast<uint8_t>(n >> (8 * x));
  return json::binary(std::move(where), kSharedSubtype);
}
json byte_string(const std::vector<uint8_t>& b) {
  uint64_t at = 0;
  if (!t_sink || !t_sink->open() || b.size() <= kSharedBytes || !t_sink->try_append(b.data(), b.size(), &at))
    return json::binary(b);
  return shared_place(at, b.size());
}
// A byte string's bytes: the frame's own, or those it names in the shared file.
std::vector<uint8_t> get_bytes(const json& j, const std::string& at) {
  const json::binary_t& b = j.get_binary();
  if (!b.has_subtype()) return b;
  if (b.subtype() != kSharedSubtype || b.size() != 16) malformed(at, "a byte string of an unknown kind");
  if (!t_source || !t_source->open()) malformed(at, "a tensor in a shared file where none is open");
  uint64_t offset = 0, size = 0;
  for (int x = 0; x < 8; ++x) offset |= uint64_t(b[x]) << (8 * x), size |= uint64_t(b[8 + x]) << (8 * x);
  if (size > t_source->limit() - t_source_taken)
    malformed(at, fmt::format("{} bytes in the shared file where at most {} can come", size,
                              t_source->limit() - t_source_taken));
  t_source_taken += size;
  return t_source->read(offset, size, at);
}

// Output words travel as little-endian 8-bit words when every one fits (a quantizer's bytes),
// 16-bit ones when every one fits (fp16, bf16), else 32-bit ones: the width is the byte string's
// first byte. An output that shares the storage of the one encoded just before it in the same
// message (a call's read-back once the device was done, equal to the first) travels as a mark:
// a byte string of subtype kSameSubtype, empty.
constexpr std::uint64_t kSameSubtype = 0x4D;
thread_local const OutputWords* t_last_words = nullptr;  // encoding: the message's last output
thread_local OutputWords t_last_decoded;                 // decoding: the same
json words(const OutputWords& o) {
  if (t_last_words && o.shares(*t_last_words)) return json::binary({}, kSameSubtype);
  t_last_words = &o;
  if (o.byte_wide()) {
    // Bytes as they are: the width, then the bytes, written in two pieces (no copy of a 1 GiB Q).
    const std::vector<uint8_t>& bytes = o.bytes();
    const uint8_t width = 1;
    uint64_t at = 0, rest = 0;
    if (t_sink && t_sink->open() && bytes.size() + 1 > kSharedBytes && t_sink->try_append(&width, 1, &at) &&
        t_sink->try_append(bytes.data(), bytes.size(), &rest))
      return shared_place(at, bytes.size() + 1);
    std::vector<uint8_t> b(1 + bytes.size(), 1);
    if (!bytes.empty()) std::memcpy(b.data() + 1, bytes.data(), bytes.size());
    return json::binary(std::move(b));
  }
  const std::vector<uint32_t>& v = o.words();
  const uint32_t* __restrict__ in = v.data();
  const size_t n = v.size();
  // Every word fits 8 (16) bits exactly when their OR does: one vector OR, not a max per word.
  uint32_t any = 0;
  for (size_t x = 0; x < n; ++x) any |= in[x];
  const size_t width = any <= 0xFFu ? 1 : any <= 0xFFFFu ? 2 : 4;
  std::vector<uint8_t> b(1 + n * width);
  b[0] = static_cast<uint8_t>(width);
  // A loop for each width through pointers of their own, each a plain conversion the compiler
  // vectorizes (a memcpy of a variable width per word was most of encoding an output, and a
  // store through the vector's bytes reloaded the words' pointer at every word).
  uint8_t* __restrict__ out = b.data() + 1;
  if (width == 1) {
    for (size_t x = 0; x < n; ++x) out[x] = static_cast<uint8_t>(in[x]);
  } else if (width == 2) {
    for (size_t x = 0; x < n; ++x) {
      const uint16_t h = static_cast<uint16_t>(in[x]);
      std::memcpy(out + 2 * x, &h, 2);
    }
  } else if (n != 0) {
    std::memcpy(out, in, n * 4);
  }
  if (!t_sink || !t_sink->open() || b.size() <= kSharedBytes) return json::binary(std::move(b));
  return byte_string(b);
}
// Width-1 words stay bytes (the width byte dropped in place); wider ones become 32-bit words.
OutputWords get_words(std::vector<uint8_t> b, const std::string& at) {
  if (b.empty() || (b[0] != 1 && b[0] != 2 && b[0] != 4) || (b.size() - 1) % b[0] != 0)
    malformed(at, "not an array of output words");
  const size_t width = b[0];
  if (width == 1) {
    b.erase(b.begin());
    return OutputWords::of_bytes(std::move(b));
  }
  std::vector<uint32_t> w((b.size() - 1) / width);
  const uint8_t* __restrict__ in = b.data() + 1;
  uint32_t* __restrict__ out = w.data();
  const size_t n = w.size();
  if (width == 2) {
    for (size_t x = 0; x < n; ++x) {
      uint16_t h;
      std::memcpy(&h, in + 2 * x, 2);
      out[x] = h;
    }
  } else if (n != 0) {
    std::memcpy(out, in, n * 4);
  }
  return w;
}
OutputWords get_output_words(const json& j, const std::string& at) {
  const json::binary_t& b = j.get_binary();
  if (b.has_subtype() && b.subtype() == kSameSubtype) {
    if (!b.empty() || t_last_decoded.empty()) malformed(at, "a mark of the output before where there is none");
    return t_last_decoded;
  }
  t_last_decoded = get_words(get_bytes(j, at), at);
  return t_last_decoded;
}

// A value as it travels: a struct as the array of its input fields in list order, a byte vector
// as a byte string, an enum as its number.
template <class T>
json encode(const T& x) {
  if constexpr (std::is_enum_v<T>) {
    return static_cast<std::underlying_type_t<T>>(x);
  } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
    return x;
  } else if constexpr (std::is_same_v<T, std::vector<uint8_t>>) {
    return byte_string(x);
  } else if constexpr (std::is_same_v<T, OutputWords>) {
    return words(x);
  } else if constexpr (is_vector<T>::value) {
    json list = json::array();
    for (const auto& e : x) list.push_back(encode(e));
    return list;
  } else if constexpr (is_optional<T>::value) {
    return x ? encode(*x) : json(nullptr);
  } else {
    json list = json::array();
    visit_fields([&](const char*, const auto& member, FieldRole role) {
      if (role == FieldRole::input) list.push_back(encode(member));
    }, x);
    return list;
  }
}

// An integer of type T, refused when it does not fit (nothing wraps silently).
template <class T>
T get_integer(const json& j, const std::string& at) {
  using L = std::numeric_limits<T>;
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    if (u <= static_cast<uint64_t>(L::max())) return static_cast<T>(u);
  } else if (j.is_number_integer()) {
    const int64_t s = j.get<int64_t>();
    if (s >= static_cast<int64_t>(L::min()) && (s < 0 || static_cast<uint64_t>(s) <= static_cast<uint64_t>(L::max())))
      return static_cast<T>(s);
  } else {
    malformed(at, "not an integer");
  }
  malformed(at, fmt::format("{} is out of range", j.dump()));
}

template <class T>
void decode(const json& j, T& x, const std::string& at) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) malformed(at, "not a boolean");
    x = j.get<bool>();
  } else if constexpr (std::is_enum_v<T>) {
    x = static_cast<T>(get_integer<std::underlying_type_t<T>>(j, at));
    if (!known(x)) malformed(at, fmt::format("{} is no value of it", j.dump()));
  } else if constexpr (std::is_integral_v<T>) {
    x = get_integer<T>(j, at);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!j.is_number()) malformed(at, "not a number");
    x = j.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) malformed(at, "not a string");
    x = j.get<std::string>();
  } else if constexpr (std::is_same_v<T, std::vector<uint8_t>> || std::is_same_v<T, OutputWords>) {
    if (!j.is_binary()) malformed(at, "not a byte string");
    if constexpr (std::is_same_v<T, std::vector<uint8_t>>) x = get_bytes(j, at);
    else x = get_output_words(j, at);
  } else if constexpr (is_vector<T>::value) {
    if (!j.is_array()) malformed(at, "not a list");
    x.assign(j.size(), {});
    for (size_t e = 0; e < j.size(); ++e) decode(j[e], x[e], fmt::format("{}[{}]", at, e));
  } else if constexpr (is_optional<T>::value) {
    if (j.is_null()) {
      x.reset();
    } else {
      x.emplace();
      decode(j, *x, at);
    }
  } else {
    if (!j.is_array()) malformed(at, "not a list of fields");
    size_t next = 0;
    visit_fields([&](const char* name, auto& member, FieldRole role) {
      if (role != FieldRole::input) return;
      const std::string field = at + "." + name;
      if (next >= j.size()) malformed(field, "missing");
      decode(j[next++], member, field);
    }, x);
    if (next != j.size()) malformed(at, fmt::format("{} fields where {} were expected", j.size(), next));
    if (const std::string e = invalid(x); !e.empty()) throw ProtocolError(e);
  }
}

template <size_t I = 0>
WorkerMessage message_from(const std::string& type, const json& fields) {
  if constexpr (I < std::variant_size_v<WorkerMessage>) {
    if (type != kMessageNames[I]) return message_from<I + 1>(type, fields);
    std::variant_alternative_t<I, WorkerMessage> m;
    decode(fields, m, type);
    return m;
  } else {
    throw ProtocolError("malformed message: unknown message type \"" + type + "\"");
  }
}

// A message on the wire: [name, fields].
WorkerMessage message_from(const json& j) {
  if (!j.is_array() || j.size() != 2 || !j[0].is_string()) throw ProtocolError("malformed message: not [type, fields]");
  return message_from(j[0].get<std::string>(), j[1]);
}

// The payload length of the frame that begins at h (have bytes of it are here), nullopt while its
// header is incomplete. Throws for bytes that cannot begin a frame or a frame over limit.
std::optional<uint64_t> frame_payload_bytes(const uint8_t* h, size_t have, uint64_t limit) {
  if (std::memcmp(h, kFrameMark, std::min<size_t>(have, 4)) != 0)
    throw ProtocolError("bytes that cannot begin a frame");
  if (have < kFrameHeaderBytes) return std::nullopt;
  uint64_t n = 0;
  for (int x = 0; x < 8; ++x) n |= uint64_t(h[4 + x]) << (8 * x);
  if (n > limit) throw ProtocolError(fmt::format("a frame of {} bytes where at most {} can come", n, limit));
  return n;
}

void write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw ProtocolError(std::string("the other side of the channel is gone: ") + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_all(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw ProtocolError("the channel closed");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

}  // namespace

KernelDesc describe_kernel(const Kernel& k) {
  KernelDesc d;
  d.name = k.name();
  d.origin = k.origin;
  d.description = k.description;
  d.info = *k.info;
  d.info.name = nullptr;
  d.runnable = kernel_runnable(k, &d.why_not);
  // Only the processes of kernels with a huge tier ask (quantizers, and grouped kernels taking the
  // packed arrangement); a kernel's process uses the device anyway, so the context this creates is
  // not wasted there.
  const bool huge_tier = d.supports_op(NVFP4_OP_QUANTIZE) ||
                         (d.supports_op(NVFP4_OP_GROUPED_GEMM) && (d.info.flags & NVFP4_FLAG_GROUPS_PACKED));
  if (d.runnable && d.is_cuda() && huge_tier) d.device_free_bytes = cuda_free_bytes();
  return d;
}

SharedFile SharedFile::create(const char* name) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) throw ProtocolError(std::string("memfd_create: ") + std::strerror(errno));
  // No shrinking, and no seal after these (a worker could otherwise seal the file against writes
  // or growth and stop the parent's). A kernel that refuses leaves the file unsealed: it then
  // goes by pwrite and pread (mappable()).
  (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL);
  return SharedFile(fd);
}

void SharedFile::take(SharedFile& o) noexcept {
  fd_ = o.fd_, end_ = o.end_, limit_ = o.limit_, sealed_ = o.sealed_;
  map_ = o.map_, mapped_ = o.mapped_, map_writable_ = o.map_writable_;
  o.fd_ = -1, o.end_ = 0, o.sealed_ = -1, o.map_ = nullptr, o.mapped_ = 0;
}

SharedFile& SharedFile::operator=(SharedFile&& o) noexcept {
  if (this != &o) {
    unmap();
    if (fd_ >= 0) close(fd_);
    take(o);
  }
  return *this;
}

SharedFile::~SharedFile() {
  unmap();
  if (fd_ >= 0) close(fd_);
}

bool SharedFile::mappable() const {
  if (sealed_ < 0) {
    const int seals = fd_ >= 0 ? fcntl(fd_, F_GET_SEALS) : -1;
    sealed_ = seals >= 0 && (seals & F_SEAL_SHRINK) != 0 ? 1 : 0;
  }
  return sealed_ == 1;
}

void SharedFile::unmap() const {
  if (map_) munmap(map_, static_cast<size_t>(mapped_));
  map_ = nullptr;
  mapped_ = 0;
}

bool SharedFile::map(uint64_t bytes, bool writable) const {
  if (bytes == 0 || !mappable()) return false;
  if (map_ && mapped_ >= bytes && (map_writable_ || !writable)) return true;
  unmap();
  // The whole file as it is now: it cannot shrink, so no byte of the mapping is ever past its end.
  struct stat st {};
  if (fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes) return false;
  const uint64_t span = static_cast<uint64_t>(st.st_size);
  void* m = mmap(nullptr, static_cast<size_t>(span), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) return false;
  map_ = static_cast<uint8_t*>(m);
  mapped_ = span;
  map_writable_ = writable;
  return true;
}

void SharedFile::reset() {
  // A file of medium cases keeps its pages: giving them back and taking them again (allocated
  // and cleared by the kernel) cost more than copying the tensors in. Past kKeptSharedBytes the
  // memory goes back: a sealed file keeps its size and loses its pages (they read as zeros until
  // written again), an unsealed one is truncated.
  const bool large = end_ > kKeptSharedBytes;
  end_ = 0;
  if (fd_ < 0 || !large) return;
  if (mappable()) {
    struct stat st {};
    if (fstat(fd_, &st) == 0 &&
        (st.st_size == 0 || fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, st.st_size) == 0))
      return;
    throw ProtocolError(std::string("giving back a shared file's memory: ") + std::strerror(errno));
  }
  if (ftruncate(fd_, 0) != 0) throw ProtocolError(std::string("ftruncate of a shared file: ") + std::strerror(errno));
}

uint64_t SharedFile::append(const uint8_t* data, size_t size) {
  uint64_t at = 0;
  if (!try_append(data, size, &at)) throw ProtocolError(std::string("writing a shared file: ") + std::strerror(EFBIG));
  return at;
}

bool SharedFile::try_append(const uint8_t* data, size_t size, uint64_t* at) {
  *at = end_;
  const uint64_t need = end_ + size;
  if (size > 0 && mappable()) {
    // map() keeps the mapping while it covers the bytes, else maps the whole file again where the
    // file holds them; a file too short is grown first.
    if (!map(need, true)) {
      // Grown ahead, doubling (a size costs no memory), so that most appends write into pages
      // kept from the case before, but never past the process's file size limit (ulimit -f),
      // which would raise SIGXFSZ where pwrite of the bytes alone would not; past it, growing to
      // what is needed fails as pwrite did.
      struct stat st {};
      const uint64_t now = fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
      const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
      uint64_t ahead = (std::max({need, 2 * now, uint64_t(1) << 20}) + page - 1) / page * page;
      struct rlimit limit {};
      if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
        ahead = std::min<uint64_t>(ahead, limit.rlim_cur);
      if (ftruncate(fd_, static_cast<off_t>(std::max(ahead, need))) != 0 &&
          ftruncate(fd_, static_cast<off_t>(need)) != 0 && errno == EFBIG)
        return false;
    }
    if (map(need, true)) {
      std::memcpy(map_ + end_, data, size);
      end_ = need;
      return true;
    }
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t w = pwrite(fd_, data + done, size - done, static_cast<off_t>(*at + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EFBIG) return false;
    if (w <= 0) throw ProtocolError(std::string("writing a shared file: ") + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
  end_ = need;
  return true;
}

std::vector<uint8_t> SharedFile::read(uint64_t offset, uint64_t size, const std::string& at) const {
  struct stat st {};
  if (fstat(fd_, &st) != 0 || offset > static_cast<uint64_t>(st.st_size) ||
      size > static_cast<uint64_t>(st.st_size) - offset)
    malformed(at, fmt::format("bytes [{}, +{}) past the end of the shared file ({} bytes)", offset, size,
                              static_cast<uint64_t>(st.st_size)));
  std::vector<uint8_t> out;
  if (map(offset + size, false)) {
    // Through the mapping kept from case to case: its pages are mapped already but for the first
    // case of a size (or after a large case's were given back), which are faulted in at once.
    const uint8_t* from = map_ + offset;
#ifdef MADV_POPULATE_READ
    if (size >= kMappedReadBytes) {
      const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
      const uintptr_t first = reinterpret_cast<uintptr_t>(from) / page * page;
      (void)madvise(reinterpret_cast<void*>(first), reinterpret_cast<uintptr_t>(from) + size - first,
                    MADV_POPULATE_READ);
    }
#endif
    out.assign(from, from + size);
  } else {
    // A large tensor is copied once from a mapping of the file; pread would first need the vector
    // zeroed, a second pass over gigabytes.
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t start = offset / page * page, span = offset + size - start;
    void* mapped = size >= kMappedReadBytes ? mmap(nullptr, static_cast<size_t>(span), PROT_READ,
                                                   MAP_SHARED | MAP_POPULATE, fd_, static_cast<off_t>(start))
                                            : MAP_FAILED;
    if (mapped != MAP_FAILED) {
      const uint8_t* from = static_cast<const uint8_t*>(mapped) + (offset - start);
      out.assign(from, from + size);
      munmap(mapped, static_cast<size_t>(span));
    } else {
      out.resize(static_cast<size_t>(size));
      size_t done = 0;
      while (done < size) {
        const ssize_t r = pread(fd_, out.data() + done, size - done, static_cast<off_t>(offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) malformed(at, "the shared file ended while it was read (its writer truncated it)");
        done += static_cast<size_t>(r);
      }
    }
  }
  // Each side reads what the other wrote once: a large tensor's memory goes back now, not when
  // the file is next emptied (a huge case's X and three calls' outputs would otherwise stay until
  // the next case). A file that cannot punch holes keeps them until then.
  if (size > kKeptSharedBytes)
    (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(size));
  return out;
}

namespace {

// A message's frame: its name (by its alternative's index) and its encoded fields.
template <class Encode>
json message_of(size_t index, SharedFile* shared, Encode&& encode_fields) {
  t_sink = shared;
  t_last_words = nullptr;
  struct Clear {
    ~Clear() { t_sink = nullptr, t_last_words = nullptr; }
  } clear;
  return json::array({kMessageNames[index], encode_fields()});
}

std::vector<uint8_t> frame_bytes(const json& j) {
  std::vector<uint8_t> payload = json::to_cbor(j);
  std::vector<uint8_t> frame(kFrameHeaderBytes + payload.size());
  const uint64_t n = payload.size();
  std::memcpy(frame.data(), kFrameMark, 4);
  for (int x = 0; x < 8; ++x) frame[4 + x] = static_cast<uint8_t>(n >> (8 * x));
  std::memcpy(frame.data() + kFrameHeaderBytes, payload.data(), payload.size());
  return frame;
}

}  // namespace

std::string other_protocol(int64_t theirs) {
  const std::string fix =
      "for a Python kernel, install this build's package and its libnvfp4check_capi.so with scripts/python-install.sh";
  if (theirs <= 0)
    return fmt::format("a kernel's process from another build of nvfp4check sends that: this one speaks version {} of "
                       "the runner's protocol; {}", kProtocolVersion, fix);
  return fmt::format("the kernel's process speaks version {} of the runner's protocol and this nvfp4check version {}: "
                     "it comes from another build of nvfp4check; {}", theirs, kProtocolVersion, fix);
}

std::vector<uint8_t> encode_message(const WorkerMessage& m, SharedFile* shared) {
  return frame_bytes(message_of(m.index(), shared, [&] { return std::visit([](const auto& x) { return encode(x); }, m); }));
}

std::vector<uint8_t> encode_run_case(int64_t case_id, const CaseData& data, const std::vector<CallSpec>& plan,
                                     SharedFile* shared, bool* started_first) {
  constexpr size_t kRun = 1;  // RunCaseMsg's alternative
  static_assert(std::is_same_v<std::variant_alternative_t<kRun, WorkerMessage>, RunCaseMsg>);
  const uint64_t kept = shared != nullptr && shared->open() ? shared->size() : 0;
  std::vector<uint8_t> frame =
      frame_bytes(message_of(kRun, shared, [&] { return encode(RunCaseView{case_id, &data, &plan, false}); }));
  const uint64_t in_file = shared != nullptr && shared->open() ? shared->size() - kept : 0;
  const bool large = frame.size() + in_file > kStartedFirstBytes;
  if (started_first != nullptr) *started_first = large;
  // started_first is the last field of the message, so its CBOR byte (false 0xF4, true 0xF5) is
  // the frame's last: set in place, not by encoding a case of gigabytes again.
  constexpr uint8_t kCborFalse = 0xF4, kCborTrue = 0xF5;
  if (frame.back() != kCborFalse) throw std::logic_error("encode_run_case: started_first is not the frame's last byte");
  if (large) frame.back() = kCborTrue;
  return frame;
}

WorkerMessage decode_message(const uint8_t* data, size_t size, const SharedFile* shared) {
  t_source = shared;
  t_source_taken = 0;
  t_last_decoded = OutputWords();
  struct Clear {
    ~Clear() { t_source = nullptr, t_last_decoded = OutputWords(); }
  } clear;
  try {
    // Tags kept: a byte string naming bytes in the shared file carries its kind as the tag.
    return message_from(json::from_cbor(data, data + size, true, true, json::cbor_tag_handler_t::store));
  } catch (const json::exception& e) {
    throw ProtocolError(std::string("malformed message: ") + e.what());
  }
}

void send_message(int fd, const WorkerMessage& m, SharedFile* shared) {
  const std::vector<uint8_t> frame = encode_message(m, shared);
  write_all(fd, frame.data(), frame.size());
}

WorkerMessage receive_message(int fd, const SharedFile* shared) {
  uint8_t head[kFrameHeaderBytes];
  read_all(fd, head, kFrameHeaderBytes);
  const uint64_t n = *frame_payload_bytes(head, kFrameHeaderBytes, kMaxFrameBytes);
  std::vector<uint8_t> payload(static_cast<size_t>(n));
  read_all(fd, payload.data(), n);
  return decode_message(payload.data(), payload.size(), shared);
}

void FrameReader::feed(const uint8_t* data, size_t size) {
  if (start_ > 0 && start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  }
  buffer_.insert(buffer_.end(), data, data + size);
}

std::optional<WorkerMessage> FrameReader::next() {
  const size_t have = buffer_.size() - start_;
  const uint8_t* h = buffer_.data() + start_;
  const std::optional<uint64_t> n = frame_payload_bytes(h, have, limit_);
  if (!n || have < kFrameHeaderBytes + *n) return std::nullopt;
  if (shared_) shared_->set_limit(limit_);
  WorkerMessage m = decode_message(h + kFrameHeaderBytes, static_cast<size_t>(*n), shared_);
  start_ += kFrameHeaderBytes + static_cast<size_t>(*n);
  if (start_ > (size_t(1) << 24) && start_ * 2 > buffer_.size()) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
  }
  return m;
}

}  // namespace nvfp4
