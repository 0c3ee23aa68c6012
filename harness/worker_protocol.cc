// CBOR encoding of the worker protocol's messages (see worker_protocol.h).
#include "harness/worker_protocol.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace nvfp4 {

using json = nlohmann::json;

namespace {

json bytes(const std::vector<uint8_t>& v) { return json::binary(v); }
std::vector<uint8_t> get_bytes(const json& j) {
  if (!j.is_binary()) throw ProtocolError("expected a byte string");
  return j.get_binary();
}

// Output words travel as little-endian 16-bit words when every one fits (fp16, bf16), else
// 32-bit ones: the width is the byte string's first byte.
json words(const std::vector<uint32_t>& v) {
  const bool narrow = std::all_of(v.begin(), v.end(), [](uint32_t w) { return w <= 0xFFFFu; });
  const size_t width = narrow ? 2 : 4;
  std::vector<uint8_t> b(1 + v.size() * width);
  b[0] = static_cast<uint8_t>(width);
  for (size_t x = 0; x < v.size(); ++x) std::memcpy(b.data() + 1 + x * width, &v[x], width);
  return json::binary(std::move(b));
}
std::vector<uint32_t> get_words(const json& j) {
  const std::vector<uint8_t> b = get_bytes(j);
  if (b.empty() || (b[0] != 2 && b[0] != 4) || (b.size() - 1) % b[0] != 0)
    throw ProtocolError("a malformed array of output words");
  const size_t width = b[0];
  std::vector<uint32_t> w((b.size() - 1) / width, 0);
  for (size_t x = 0; x < w.size(); ++x) std::memcpy(&w[x], b.data() + 1 + x * width, width);
  return w;
}

json problem_json(const Problem& p) {
  json j = {{"op", static_cast<uint32_t>(p.op)},
            {"m", p.m},
            {"n", p.n},
            {"k", p.k},
            {"l", p.l},
            {"layout", static_cast<uint32_t>(p.sf_layout)},
            {"semantics", static_cast<int>(p.semantics)},
            {"alpha", p.alpha},
            {"out_type", static_cast<uint32_t>(p.out_type)},
            {"a", bytes(p.a)},
            {"b", bytes(p.b)},
            {"sfa", bytes(p.sfa)},
            {"sfb", bytes(p.sfb)}};
  if (p.op == Op::dual_gemm) {
    j["b2"] = bytes(p.b2);
    j["sfb2"] = bytes(p.sfb2);
    j["alpha2"] = p.alpha2;
  }
  if (p.op == Op::grouped_gemm) {
    json groups = json::array();
    for (const Group& g : p.groups)
      groups.push_back({g.m, g.n, g.k, g.alpha, bytes(g.a), bytes(g.b), bytes(g.sfa), bytes(g.sfb)});
    j["groups"] = std::move(groups);
    j["packed"] = p.packed;
  }
  return j;
}

Problem problem_from(const json& j) {
  Problem p;
  p.op = static_cast<Op>(j.at("op").get<uint32_t>());
  p.m = j.at("m").get<int64_t>();
  p.n = j.at("n").get<int64_t>();
  p.k = j.at("k").get<int64_t>();
  p.l = j.at("l").get<int64_t>();
  p.sf_layout = static_cast<SfLayout>(j.at("layout").get<uint32_t>());
  p.semantics = static_cast<ScaleSemantics>(j.at("semantics").get<int>());
  p.alpha = j.at("alpha").get<float>();
  const uint32_t out_type = j.at("out_type").get<uint32_t>();
  if (out_type < 1 || out_type > 3) throw ProtocolError("bad output type");
  p.out_type = static_cast<OutType>(out_type);
  p.a = get_bytes(j.at("a"));
  p.b = get_bytes(j.at("b"));
  p.sfa = get_bytes(j.at("sfa"));
  p.sfb = get_bytes(j.at("sfb"));
  if (p.op == Op::dual_gemm) {
    p.b2 = get_bytes(j.at("b2"));
    p.sfb2 = get_bytes(j.at("sfb2"));
    p.alpha2 = j.at("alpha2").get<float>();
  }
  if (p.op == Op::grouped_gemm) {
    for (const json& g : j.at("groups")) {
      Group q;
      q.m = g.at(0).get<int64_t>();
      q.n = g.at(1).get<int64_t>();
      q.k = g.at(2).get<int64_t>();
      q.alpha = g.at(3).get<float>();
      q.a = get_bytes(g.at(4));
      q.b = get_bytes(g.at(5));
      q.sfa = get_bytes(g.at(6));
      q.sfb = get_bytes(g.at(7));
      p.groups.push_back(std::move(q));
    }
    p.packed = j.at("packed").get<bool>();
  }
  if (const std::string e = problem_error(p); !e.empty()) throw ProtocolError("bad problem: " + e);
  return p;
}

json info_json(const KernelDesc& k) {
  const nvfp4_kernel_info& i = k.info;
  return {{"name", k.name},         {"origin", k.origin},         {"description", k.description},
          {"abi", i.abi_version},   {"memory", i.memory},         {"ops", i.ops},
          {"layouts", i.sf_layouts}, {"min_sm", i.min_sm},        {"m_multiple", i.m_multiple},
          {"n_multiple", i.n_multiple}, {"k_multiple", i.k_multiple}, {"flags", i.flags},
          {"out_types", i.out_types}, {"max_groups", i.max_groups},
          {"runnable", k.runnable}, {"why_not", k.why_not}};
}

KernelDesc desc_from(const json& j) {
  KernelDesc k;
  k.name = j.at("name").get<std::string>();
  k.origin = j.at("origin").get<std::string>();
  k.description = j.at("description").get<std::string>();
  k.info.abi_version = j.at("abi").get<uint32_t>();
  k.info.memory = j.at("memory").get<uint32_t>();
  k.info.ops = j.at("ops").get<uint32_t>();
  k.info.sf_layouts = j.at("layouts").get<uint32_t>();
  k.info.min_sm = j.at("min_sm").get<uint32_t>();
  k.info.m_multiple = j.at("m_multiple").get<uint32_t>();
  k.info.n_multiple = j.at("n_multiple").get<uint32_t>();
  k.info.k_multiple = j.at("k_multiple").get<uint32_t>();
  k.info.flags = j.at("flags").get<uint32_t>();
  k.info.out_types = j.at("out_types").get<uint32_t>();
  k.info.max_groups = j.at("max_groups").get<uint32_t>();
  k.runnable = j.at("runnable").get<bool>();
  k.why_not = j.at("why_not").get<std::string>();
  return k;
}

json observation_json(const CallObservation& o) {
  json guards = json::array(), inputs = json::array();
  for (const GuardReport& g : o.guards)
    guards.push_back({g.buffer, g.damage.before, g.damage.offset, g.damage.expected, g.damage.actual,
                      g.damage.damaged_bytes});
  for (const InputChange& x : o.inputs) inputs.push_back({x.buffer, x.count, x.first, x.was, x.now});
  return {{"end", static_cast<int>(o.end)}, {"rc", o.rc},          {"error", o.error},
          {"c", words(o.c)},               {"c_later", words(o.c_later)},
          {"guards", guards},              {"inputs", inputs},     {"seconds", o.seconds},
          {"kernel_seconds", o.kernel_seconds}, {"context_lost", o.context_lost}};
}

CallObservation observation_from(const json& j) {
  CallObservation o;
  const int end = j.at("end").get<int>();
  if (end < 0 || end > static_cast<int>(CallObservation::End::input_fault)) throw ProtocolError("bad call end");
  o.end = static_cast<CallObservation::End>(end);
  o.rc = j.at("rc").get<int>();
  o.error = j.at("error").get<std::string>();
  o.c = get_words(j.at("c"));
  o.c_later = get_words(j.at("c_later"));
  for (const json& g : j.at("guards")) {
    GuardReport r;
    r.buffer = g.at(0).get<std::string>();
    r.damage.intact = false;
    r.damage.before = g.at(1).get<bool>();
    r.damage.offset = g.at(2).get<int64_t>();
    r.damage.expected = g.at(3).get<uint8_t>();
    r.damage.actual = g.at(4).get<uint8_t>();
    r.damage.damaged_bytes = g.at(5).get<int64_t>();
    o.guards.push_back(r);
  }
  for (const json& x : j.at("inputs"))
    o.inputs.push_back({x.at(0).get<std::string>(), x.at(1).get<int64_t>(), x.at(2).get<int64_t>(),
                        x.at(3).get<uint8_t>(), x.at(4).get<uint8_t>()});
  o.seconds = j.at("seconds").get<double>();
  o.kernel_seconds = j.at("kernel_seconds").get<double>();
  o.context_lost = j.at("context_lost").get<bool>();
  return o;
}

struct Encoder {
  json operator()(const ReadyMsg& m) const {
    json list = json::array();
    for (const KernelDesc& k : m.kernels) list.push_back(info_json(k));
    return {{"type", "ready"}, {"kernels", list}, {"error", m.error}};
  }
  json operator()(const RunCaseMsg& m) const {
    json plan = json::array();
    for (const CallSpec& c : m.plan) plan.push_back({c.pad, c.poison, c.stale_data, c.inputs_ready_first});
    json j = {{"type", "run"}, {"case", m.case_id}, {"problem", problem_json(m.data.problem)}, {"plan", plan}};
    if (m.data.stale) j["stale"] = problem_json(*m.data.stale);
    return j;
  }
  json operator()(const CallStartedMsg& m) const { return {{"type", "call"}, {"case", m.case_id}, {"index", m.index}}; }
  json operator()(const CallDoneMsg& m) const {
    return {{"type", "done"}, {"case", m.case_id}, {"index", m.index}, {"observation", observation_json(m.observation)}};
  }
  json operator()(const QuitMsg&) const { return {{"type", "quit"}}; }
};

WorkerMessage message_from(const json& j) {
  const std::string type = j.at("type").get<std::string>();
  if (type == "ready") {
    ReadyMsg m;
    for (const json& k : j.at("kernels")) m.kernels.push_back(desc_from(k));
    m.error = j.at("error").get<std::string>();
    return m;
  }
  if (type == "run") {
    RunCaseMsg m;
    m.case_id = j.at("case").get<int64_t>();
    m.data.problem = problem_from(j.at("problem"));
    if (j.contains("stale")) m.data.stale = problem_from(j.at("stale"));
    for (const json& c : j.at("plan")) {
      CallSpec call;
      call.pad = c.at(0).get<uint8_t>();
      call.poison = c.at(1).get<uint32_t>();
      call.stale_data = c.at(2).get<bool>();
      call.inputs_ready_first = c.at(3).get<bool>();
      m.plan.push_back(call);
    }
    return m;
  }
  if (type == "call") return CallStartedMsg{j.at("case").get<int64_t>(), j.at("index").get<int64_t>()};
  if (type == "done")
    return CallDoneMsg{j.at("case").get<int64_t>(), j.at("index").get<int64_t>(), observation_from(j.at("observation"))};
  if (type == "quit") return QuitMsg{};
  throw ProtocolError("unknown message type");
}

uint64_t frame_length(const uint8_t* head) {
  uint64_t n = 0;
  for (int x = 0; x < 8; ++x) n |= uint64_t(head[4 + x]) << (8 * x);
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
  return d;
}

std::vector<uint8_t> encode_message(const WorkerMessage& m) {
  std::vector<uint8_t> payload = json::to_cbor(std::visit(Encoder{}, m));
  std::vector<uint8_t> frame(kFrameHeaderBytes + payload.size());
  const uint64_t n = payload.size();
  std::memcpy(frame.data(), kFrameMark, 4);
  for (int x = 0; x < 8; ++x) frame[4 + x] = static_cast<uint8_t>(n >> (8 * x));
  std::memcpy(frame.data() + kFrameHeaderBytes, payload.data(), payload.size());
  return frame;
}

WorkerMessage decode_message(const uint8_t* data, size_t size) {
  try {
    return message_from(json::from_cbor(data, data + size));
  } catch (const json::exception& e) {
    throw ProtocolError(std::string("malformed message: ") + e.what());
  }
}

void send_message(int fd, const WorkerMessage& m) {
  const std::vector<uint8_t> frame = encode_message(m);
  write_all(fd, frame.data(), frame.size());
}

WorkerMessage receive_message(int fd) {
  uint8_t head[kFrameHeaderBytes];
  read_all(fd, head, kFrameHeaderBytes);
  if (std::memcmp(head, kFrameMark, 4) != 0) throw ProtocolError("bytes that are no frame of the protocol");
  const uint64_t n = frame_length(head);
  if (n > kMaxFrameBytes) throw ProtocolError(fmt::format("a frame of {} bytes, more than any case needs", n));
  std::vector<uint8_t> payload(static_cast<size_t>(n));
  read_all(fd, payload.data(), n);
  return decode_message(payload.data(), payload.size());
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
  if (std::memcmp(h, kFrameMark, std::min<size_t>(have, 4)) != 0)
    throw ProtocolError("bytes that cannot begin a frame");
  if (have < kFrameHeaderBytes) return std::nullopt;
  const uint64_t n = frame_length(h);
  if (n > limit_) throw ProtocolError(fmt::format("a frame of {} bytes where at most {} can come", n, limit_));
  if (have < kFrameHeaderBytes + n) return std::nullopt;
  WorkerMessage m = decode_message(h + kFrameHeaderBytes, static_cast<size_t>(n));
  start_ += kFrameHeaderBytes + static_cast<size_t>(n);
  if (start_ > (size_t(1) << 24) && start_ * 2 > buffer_.size()) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
  }
  return m;
}

}  // namespace nvfp4
