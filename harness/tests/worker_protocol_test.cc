// The worker protocol: every struct's fields survive a round trip, what the parent expects never
// travels, and malformed input is refused with the field it concerns named.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/draw/generators.h"
#include "harness/process/worker.h"
#include "harness/process/worker_protocol.h"
#include "reference/problem_fields.h"

namespace nvfp4 {
namespace {

using json = nlohmann::json;

WorkerMessage round_trip(const WorkerMessage& m) {
  const std::vector<uint8_t> frame = encode_message(m);
  return decode_message(frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes);
}

// The CBOR of a message as JSON, to corrupt one field, and back through decode_message.
json payload(const WorkerMessage& m) {
  const std::vector<uint8_t> frame = encode_message(m);
  return json::from_cbor(frame.begin() + kFrameHeaderBytes, frame.end());
}
// The same with the message's big byte strings in a shared file (the tags kept).
json payload_with(const WorkerMessage& m, SharedFile* shared) {
  const std::vector<uint8_t> frame = encode_message(m, shared);
  return json::from_cbor(frame.begin() + kFrameHeaderBytes, frame.end(), true, true, json::cbor_tag_handler_t::store);
}
std::string decode_error(const json& j) {
  const std::vector<uint8_t> bytes = json::to_cbor(j);
  try {
    decode_message(bytes.data(), bytes.size());
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "(decoded)";
}

Problem dual_problem() {
  Problem p;
  p.op = Op::dual_gemm;
  p.m = 3, p.n = 5, p.k = 32, p.l = 2;
  p.sf_layout = SfLayout::linear;
  p.semantics = ScaleSemantics::e4m3;
  p.out_type = OutType::bf16;
  p.alpha = 0.25f;
  p.alpha2 = -2.0f;
  Rng rng(7);
  fill_data(rng, DataSpec{}, p);
  Problem second = p;
  second.op = Op::gemm;
  fill_data(rng, DataSpec{}, second);
  p.b2 = second.b, p.sfb2 = second.sfb;
  return p;
}

RunCaseMsg run_message() {
  RunCaseMsg run;
  run.case_id = 41;
  run.data.problem = dual_problem();
  run.plan = {CallSpec{0x11, 0x7E00, true, true, 0xFFFFFFFFFFFFFFF1ull}, CallSpec{}};
  return run;
}

TEST(WorkerProtocol, EveryInputFieldOfAProblemTravels) {
  const RunCaseMsg run = run_message();
  const RunCaseMsg back = std::get<RunCaseMsg>(round_trip(run));
  EXPECT_EQ(back.case_id, 41);
  ASSERT_EQ(back.plan.size(), 2u);
  EXPECT_EQ(back.plan[0].pad, 0x11);
  EXPECT_EQ(back.plan[0].poison, 0x7E00u);
  EXPECT_TRUE(back.plan[0].stale_data && back.plan[0].inputs_ready_first);
  EXPECT_EQ(back.plan[0].seed, std::optional<uint64_t>(0xFFFFFFFFFFFFFFF1ull));  // all 64 bits
  EXPECT_FALSE(back.plan[1].seed);
  EXPECT_FALSE(back.data.stale);
  // Field by field through the same list the protocol uses: nothing listed as input is lost.
  int inputs = 0;
  const Problem& p = run.data.problem;
  const Problem& q = back.data.problem;
  std::vector<std::string> sent;
  visit_problem_fields([&](const char* name, const auto&, FieldRole role) {
    if (role == FieldRole::input) sent.push_back(name), ++inputs;
  }, p);
  EXPECT_GE(inputs, 18);
  EXPECT_EQ(q.op, p.op);
  EXPECT_EQ(q.m, p.m);
  EXPECT_EQ(q.n, p.n);
  EXPECT_EQ(q.k, p.k);
  EXPECT_EQ(q.l, p.l);
  EXPECT_EQ(q.sf_layout, p.sf_layout);
  EXPECT_EQ(q.semantics, p.semantics);
  EXPECT_EQ(q.out_type, p.out_type);
  EXPECT_EQ(q.alpha, p.alpha);
  EXPECT_EQ(q.alpha2, p.alpha2);
  EXPECT_EQ(q.a, p.a);
  EXPECT_EQ(q.b, p.b);
  EXPECT_EQ(q.sfa, p.sfa);
  EXPECT_EQ(q.sfb, p.sfb);
  EXPECT_EQ(q.b2, p.b2);
  EXPECT_EQ(q.sfb2, p.sfb2);
}

TEST(WorkerProtocol, WhatTheParentExpectsNeverTravels) {
  RunCaseMsg run = run_message();
  Problem& p = run.data.problem;
  p.expect = std::vector<uint32_t>(static_cast<size_t>(p.c_elems()), 0x3C00u);
  p.note = "a note";
  p.seed = 99;
  p.generator = "uniform";
  const RunCaseMsg back = std::get<RunCaseMsg>(round_trip(run));
  EXPECT_FALSE(back.data.problem.expect);
  EXPECT_TRUE(back.data.problem.note.empty());
  EXPECT_FALSE(back.data.problem.seed);
  EXPECT_TRUE(back.data.problem.generator.empty());
}

TEST(WorkerProtocol, DescriptionsAndObservationsRoundTrip) {
  KernelDesc d;
  d.name = "k";
  d.origin = "plugin.so";
  d.description = "one line";
  d.info.abi_version = 2, d.info.memory = NVFP4_MEMORY_CUDA, d.info.ops = 6, d.info.sf_layouts = 4;
  d.info.min_sm = 100, d.info.m_multiple = 128, d.info.n_multiple = 8, d.info.k_multiple = 64;
  d.info.flags = 3, d.info.out_types = 14, d.info.max_groups = 9;
  d.runnable = false;
  d.why_not = "no GPU";
  d.device_free_bytes = uint64_t(139) << 30;
  const ReadyMsg ready = std::get<ReadyMsg>(round_trip(ReadyMsg{{d}, "err"}));
  ASSERT_EQ(ready.kernels.size(), 1u);
  const KernelDesc& e = ready.kernels[0];
  EXPECT_EQ(e.name, "k");
  EXPECT_EQ(e.origin, "plugin.so");
  EXPECT_EQ(e.description, "one line");
  EXPECT_EQ(std::memcmp(&e.info, &d.info, sizeof d.info), 0);
  EXPECT_FALSE(e.runnable);
  EXPECT_EQ(e.why_not, "no GPU");
  EXPECT_EQ(e.device_free_bytes, uint64_t(139) << 30);
  EXPECT_EQ(ready.error, "err");

  CallDoneMsg done{3, 1, {}};
  CallObservation& o = done.observation;
  o.end = CallObservation::End::cuda_error, o.rc = -4, o.error = "boom", o.seconds = 1.5, o.context_lost = true;
  o.c = std::vector<uint32_t>{0x7FC00001u, 2}, o.c_later = std::vector<uint32_t>{0xFFFF};
  GuardReport g{"sfa", {}};
  g.damage.record(true, -3, 0xAB, 0xCD);
  o.guards = {g};
  o.inputs = {{"b", 4, 17, 0x10, 0x20}};
  const CallDoneMsg back = std::get<CallDoneMsg>(round_trip(done));
  EXPECT_EQ(back.case_id, 3);
  EXPECT_EQ(back.index, 1);
  const CallObservation& r = back.observation;
  EXPECT_EQ(r.end, o.end);
  EXPECT_EQ(r.rc, -4);
  EXPECT_EQ(r.error, "boom");
  EXPECT_EQ(r.c, o.c);
  EXPECT_EQ(r.c_later, o.c_later);
  EXPECT_EQ(r.seconds, 1.5);
  EXPECT_TRUE(r.context_lost);
  ASSERT_EQ(r.guards.size(), 1u);
  EXPECT_EQ(r.guards[0].buffer, "sfa");
  EXPECT_FALSE(r.guards[0].damage.intact);
  EXPECT_EQ(r.guards[0].damage.describe("sfa"), g.damage.describe("sfa"));
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].buffer, "b");
  EXPECT_EQ(r.inputs[0].first, 17);
  EXPECT_EQ(r.inputs[0].now, 0x20);

  EXPECT_TRUE(std::holds_alternative<QuitMsg>(round_trip(QuitMsg{})));
  const CallStartedMsg s = std::get<CallStartedMsg>(round_trip(CallStartedMsg{8, 2}));
  EXPECT_EQ(s.case_id, 8);
  EXPECT_EQ(s.index, 2);
}

// Each corruption is refused naming the field it concerns; none wraps or passes silently.
TEST(WorkerProtocol, MalformedFieldsAreNamed) {
  const json good = payload(run_message());
  ASSERT_EQ(decode_error(good), "(decoded)");
  auto pad = [](json& j) -> json& { return j[1][2][0][0]; };  // run -> plan[0].pad
  json j = good;
  pad(j) = 300;  // a byte of 300 must not become 44
  EXPECT_NE(decode_error(j).find("run.plan[0].pad: 300 is out of range"), std::string::npos) << decode_error(j);
  j = good;
  pad(j) = "x";
  EXPECT_NE(decode_error(j).find("run.plan[0].pad: not an integer"), std::string::npos) << decode_error(j);
  j = good;
  j[1][1][0][1] = -1;  // run -> data.problem.m
  EXPECT_NE(decode_error(j).find("bad problem: "), std::string::npos) << decode_error(j);
  j = good;
  // The problem travels as its input fields, in the one field list's order.
  std::vector<std::string> inputs;
  Problem blank;
  visit_problem_fields([&](const char* name, auto&, FieldRole role) { if (role == FieldRole::input) inputs.push_back(name); },
                       blank);
  j[1][1][0].erase(j[1][1][0].size() - 1);  // the problem's last field
  EXPECT_NE(decode_error(j).find("run.data.problem." + inputs.back() + ": missing"), std::string::npos) << decode_error(j);
  j = good;
  j[1][1][0].push_back(1);
  EXPECT_NE(decode_error(j).find("run.data.problem: " + std::to_string(inputs.size() + 1) + " fields where " +
                                 std::to_string(inputs.size()) + " were expected"),
            std::string::npos)
      << decode_error(j);
  j = good;
  j[0] = "launch";
  EXPECT_NE(decode_error(j).find("unknown message type \"launch\""), std::string::npos) << decode_error(j);

  CallDoneMsg done;
  json d = payload(done);
  d[1][2][0] = 99;  // done -> observation.end
  EXPECT_NE(decode_error(d).find("done.observation.end: 99 is no value of it"), std::string::npos) << decode_error(d);
  // The last end a worker may send is the suite's own memory; one past it is no end.
  const int last = static_cast<int>(CallObservation::End::suite_memory);
  d[1][2][0] = last;
  EXPECT_EQ(decode_error(d), "(decoded)");
  d[1][2][0] = last + 1;
  EXPECT_NE(decode_error(d).find(fmt::format("done.observation.end: {} is no value of it", last + 1)), std::string::npos)
      << decode_error(d);
  d = payload(done);
  d[1][2][3] = json::binary({3, 1, 2, 3});  // observation.c: words 3 bytes wide
  EXPECT_NE(decode_error(d).find("done.observation.c: not an array of output words"), std::string::npos)
      << decode_error(d);
  EXPECT_NE(decode_error(json::array({1, 2, 3})).find("not [type, fields]"), std::string::npos);
}

TEST(WorkerProtocol, FramesAreCheckedByOneReader) {
  std::vector<uint8_t> frame = encode_message(CallStartedMsg{1, 0});
  FrameReader reader;
  reader.feed(frame.data(), 5);
  EXPECT_FALSE(reader.next());
  reader.feed(frame.data() + 5, frame.size() - 5);
  EXPECT_TRUE(std::holds_alternative<CallStartedMsg>(*reader.next()));
  EXPECT_TRUE(reader.empty());
  FrameReader small;
  small.set_limit(4);
  small.feed(frame.data(), frame.size());
  EXPECT_THROW(small.next(), ProtocolError);
  FrameReader other;
  const uint8_t junk[] = {'N', 'V', 'X'};
  other.feed(junk, sizeof junk);
  EXPECT_THROW(other.next(), ProtocolError);
}

// A case's tensors past kSharedBytes and a call's outputs past it travel in the memory files; the
// frame holds where. Smaller ones stay in the frame.
TEST(WorkerProtocol, LargeTensorsTravelBesideTheFrame) {
  SharedFile to_worker = SharedFile::create("test-in"), from_worker = SharedFile::create("test-out");
  RunCaseMsg run = run_message();
  Problem& p = run.data.problem;
  p = Problem{};
  p.op = Op::gemm;
  p.m = 1025, p.n = 3, p.k = 2048, p.l = 1;  // A just past 1 MiB
  Rng rng(11);
  fill_data(rng, DataSpec{}, p);
  run.data.stale = p;
  fill_data(rng, DataSpec{}, *run.data.stale);
  const std::vector<uint8_t> frame = encode_message(run, &to_worker);
  EXPECT_LT(frame.size(), p.a.size() / 16) << "the big tensors are not in the frame";
  const RunCaseMsg back =
      std::get<RunCaseMsg>(decode_message(frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, &to_worker));
  EXPECT_TRUE(back.data.problem.a == p.a);
  EXPECT_TRUE(back.data.problem.b == p.b);
  EXPECT_TRUE(back.data.problem.sfa == p.sfa);
  ASSERT_TRUE(back.data.stale);
  EXPECT_TRUE(back.data.stale->a == run.data.stale->a);
  EXPECT_FALSE(back.data.stale->a == p.a);
  // Without the file the same frame is refused, naming the field.
  try {
    decode_message(frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes);
    ADD_FAILURE() << "decoded without the shared file";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("run.data.problem.a: a tensor in a shared file where none is open"),
              std::string::npos)
        << e.what();
  }
  // A reset file (the next case) keeps its pages, and the next case's tensors are written over
  // the last ones from its start...
  to_worker.reset();
  const uint64_t file_bytes = static_cast<uint64_t>(lseek(to_worker.fd(), 0, SEEK_END));
  EXPECT_GT(file_bytes, 2 * p.a.size());
  const std::vector<uint8_t> again = encode_message(run, &to_worker);
  EXPECT_EQ(static_cast<uint64_t>(lseek(to_worker.fd(), 0, SEEK_END)), file_bytes);
  EXPECT_TRUE(std::get<RunCaseMsg>(decode_message(again.data() + kFrameHeaderBytes, again.size() - kFrameHeaderBytes,
                                                  &to_worker)).data.problem.a == p.a);
  // ...but a file that held more than kKeptSharedBytes gives them back. It keeps its size (it is
  // sealed against shrinking: see SharedFileReferencesAreChecked) and loses its pages.
  const std::vector<uint8_t> big(kKeptSharedBytes + 1, 0x5A);
  to_worker.append(big.data(), big.size());
  struct stat held {};
  ASSERT_EQ(fstat(to_worker.fd(), &held), 0);
  EXPECT_GE(static_cast<uint64_t>(held.st_blocks) * 512, big.size());
  to_worker.reset();
  struct stat after {};
  ASSERT_EQ(fstat(to_worker.fd(), &after), 0);
  EXPECT_EQ(after.st_blocks, 0) << "the pages of a large message stay after reset";
  EXPECT_EQ(after.st_size, held.st_size);
  // And the file is written again from its start, through the same pages as before.
  const std::vector<uint8_t> third = encode_message(run, &to_worker);
  EXPECT_TRUE(std::get<RunCaseMsg>(decode_message(third.data() + kFrameHeaderBytes, third.size() - kFrameHeaderBytes,
                                                  &to_worker)).data.problem.a == p.a);

  // Outputs of one byte per word (a quantizer's) travel one byte each, and stay bytes; a read-back
  // that shares the first one's storage travels as a mark and comes back shared, one that is
  // only equal travels again.
  std::vector<uint32_t> words(kSharedBytes + 7, 0xAB);
  words[3] = 0x01;
  for (const bool shared : {true, false}) {
    from_worker.reset();
    CallDoneMsg done{5, 0, {}};
    done.observation.c = words;
    done.observation.c_later = shared ? done.observation.c : OutputWords(words);
    const std::vector<uint8_t> f = encode_message(done, &from_worker);
    EXPECT_LT(f.size(), 1024u);
    EXPECT_EQ(from_worker.size(), (shared ? 1 : 2) * (kSharedBytes + 8));
    FrameReader reader;
    reader.set_shared(&from_worker);
    reader.feed(f.data(), f.size());
    const CallDoneMsg got = std::get<CallDoneMsg>(*reader.next());
    EXPECT_TRUE(got.observation.c.byte_wide());
    EXPECT_EQ(got.observation.c, done.observation.c);
    EXPECT_EQ(got.observation.c_later, done.observation.c);
    EXPECT_EQ(got.observation.c_later.shares(got.observation.c), shared);
    EXPECT_EQ(got.observation.c.words(), words);
  }
}

// Output words of each width (1, 2 and 4 bytes: a quantizer's bytes, FP16 or BF16 words, FP32
// words) come back exactly, in the frame and beside it, whatever their values within the width.
TEST(WorkerProtocol, OutputWordsOfEveryWidthComeBackExactly) {
  const uint64_t seed = 35;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (const uint32_t top : {0xFFu, 0xFFFFu, 0xFFFFFFFFu}) {
    for (const size_t count : {size_t(5), kSharedBytes + 7}) {
      std::vector<uint32_t> words(count);
      for (uint32_t& w : words) w = static_cast<uint32_t>(rng()) & top;
      words[count / 2] = top;  // the width's largest word
      SharedFile from_worker = SharedFile::create("test-words");
      CallDoneMsg done{5, 0, {}};
      done.observation.c = words;
      const std::vector<uint8_t> f = encode_message(done, &from_worker);
      const CallDoneMsg got = std::get<CallDoneMsg>(
          decode_message(f.data() + kFrameHeaderBytes, f.size() - kFrameHeaderBytes, &from_worker));
      EXPECT_EQ(got.observation.c.words(), words) << "words up to " << top << ", " << count << " of them";
    }
  }
}

// The runner encodes a case from its own data, without copying it into a message: the frame and
// the shared file's bytes are the message's, byte for byte.
TEST(WorkerProtocol, ARunCaseEncodedFromReferencesIsTheMessage) {
  RunCaseMsg run = run_message();
  run.data.problem.m = 600, run.data.problem.k = 256;  // A past kSharedBytes: beside the frame
  Rng rng(5);
  fill_data(rng, DataSpec{}, run.data.problem);
  run.data.stale = run.data.problem;
  run.data.stale->a[0] ^= 0x88;
  run.data.stale_seed = 77;
  run.started_first = false;  // a small case: call 0 is timed from the message
  for (const bool with_file : {false, true}) {
    SharedFile a = SharedFile::create("test-a"), b = SharedFile::create("test-b");
    const std::vector<uint8_t> message = encode_message(run, with_file ? &a : nullptr);
    bool started_first = true;
    const std::vector<uint8_t> view =
        encode_run_case(run.case_id, run.data, run.plan, with_file ? &b : nullptr, &started_first);
    EXPECT_EQ(message, view);
    EXPECT_FALSE(started_first);
    const off_t size = lseek(a.fd(), 0, SEEK_END);
    EXPECT_EQ(size, lseek(b.fd(), 0, SEEK_END));
    EXPECT_EQ(size > 0, with_file);
    std::vector<uint8_t> in_a(static_cast<size_t>(size)), in_b(static_cast<size_t>(size));
    ASSERT_EQ(pread(a.fd(), in_a.data(), in_a.size(), 0), size);
    ASSERT_EQ(pread(b.fd(), in_b.data(), in_b.size(), 0), size);
    EXPECT_EQ(in_a, in_b);
  }
}

// The first message of a worker that loaded one kernel of this name (what a stand-in worker
// writes to the channel).
ReadyMsg ready_for(const std::string& name) {
  ReadyMsg ready;
  ready.kernels.emplace_back();
  ready.kernels.back().name = name;
  return ready;
}

// A kernel's process from another build of nvfp4check (a Python package's older C API library)
// is refused when it starts, naming the protocol versions and what to reinstall: its ready
// message with another version, or one this build cannot read (an older message, without the
// version). Either way no case is sent to it. The "worker" here only writes that message.
TEST(WorkerProtocol, AWorkerOfAnotherBuildIsRefusedByName) {
  char dir[] = "/tmp/nvfp4-skew.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ReadyMsg newer = ready_for("skewed");
  newer.protocol = kProtocolVersion + 1;
  const std::vector<uint8_t> versioned = encode_message(newer);
  // The ready message before it had a version: its kernels and error only.
  const std::vector<uint8_t> payload = json::to_cbor(json::array({"ready", json::array({json::array(), ""})}));
  std::vector<uint8_t> unversioned(kFrameHeaderBytes);
  std::memcpy(unversioned.data(), kFrameMark, 4);
  for (int x = 0; x < 8; ++x) unversioned[4 + x] = static_cast<uint8_t>(uint64_t(payload.size()) >> (8 * x));
  unversioned.insert(unversioned.end(), payload.begin(), payload.end());
  for (const auto& [frame, named] : {std::pair{versioned, fmt::format("speaks version {} ", kProtocolVersion + 1)},
                                     std::pair{unversioned, std::string("ready.protocol: missing")}}) {
    const std::string file = std::string(dir) + "/ready.bin";
    std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(frame.data()), frame.size());
    WorkerCommand command;
    command.kernel = "skewed";
    command.argv = {"/bin/sh", "-c", fmt::format("cat {} >&{}; exec sleep 30", file, kWorkerChannelFd)};
    WorkerExecutor worker(command, 5, 10);
    try {
      worker.kernel();
      ADD_FAILURE() << "a worker of another protocol was started";
    } catch (const WorkerStartError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(named), std::string::npos) << what;
      EXPECT_NE(what.find(fmt::format("version {}", kProtocolVersion)), std::string::npos) << what;
      EXPECT_NE(what.find("scripts/python-install.sh"), std::string::npos) << what;
    }
  }
  std::filesystem::remove_all(dir);
}

// The start gate lets at most its slots in at once, and once opened lets everyone in.
TEST(StartGate, LetsInAtMostItsSlotsAndOnceOpenEveryone) {
  StartGate gate(2);
  std::mutex mutex;
  int inside = 0, most = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      const StartGate::Pass pass = gate.enter();
      {
        std::lock_guard<std::mutex> lock(mutex);
        most = std::max(most, ++inside);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      std::lock_guard<std::mutex> lock(mutex);
      --inside;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(most, 2);
  const StartGate::Pass a = gate.enter(), b = gate.enter();  // both slots held
  gate.open();
  const StartGate::Pass c = gate.enter();  // would wait forever on a closed gate
  EXPECT_TRUE(gate.is_open());
  EXPECT_TRUE(StartGate(0).is_open());
}

// Workers that share a gate of one slot start one after another: the second is described only
// after the first. A start that fails opens the gate, so the lanes of a kernel whose process
// hangs at its start time out together, not each after the one before it.
TEST(StartGate, WorkersStartInTurnAndAFailedStartOpensTheGate) {
  char dir[] = "/tmp/nvfp4-gate.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::vector<uint8_t> frame = encode_message(ready_for("gated"));
  const std::string file = std::string(dir) + "/ready.bin";
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(frame.data()), frame.size());
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  auto command = [&](const std::shared_ptr<StartGate>& gate, const std::string& script) {
    WorkerCommand c;
    c.kernel = "gated";
    c.argv = {"/bin/sh", "-c", script};
    c.start_gate = gate;
    return c;
  };
  {
    // Each takes 0.4 s to be ready: side by side both would be described after about 0.4 s.
    auto gate = std::make_shared<StartGate>(1);
    const std::string slow = fmt::format("sleep 0.4; cat {} >&{}; exec sleep 30", file, kWorkerChannelFd);
    WorkerExecutor first(command(gate, slow), 5, 10), second(command(gate, slow), 5, 10);
    const auto start = Clock::now();
    double ready_s[2] = {};
    std::thread a([&] {
      first.kernel();
      ready_s[0] = seconds_since(start);
    });
    std::thread b([&] {
      second.kernel();
      ready_s[1] = seconds_since(start);
    });
    a.join();
    b.join();
    EXPECT_GE(std::max(ready_s[0], ready_s[1]), 0.8) << ready_s[0] << " " << ready_s[1];
    EXPECT_FALSE(gate->is_open());
  }
  {
    // Four that never say they are ready, each with a start of 1 s: after the first times out
    // the other three run together, about 2 s in all (4 s one after another).
    auto gate = std::make_shared<StartGate>(1);
    std::vector<std::unique_ptr<WorkerExecutor>> lanes;
    for (int x = 0; x < 4; ++x)
      lanes.push_back(std::make_unique<WorkerExecutor>(command(gate, "exec sleep 30"), 5, 1));
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    int failed = 0;
    std::mutex mutex;
    for (auto& lane : lanes) {
      threads.emplace_back([&, w = lane.get()] {
        try {
          w->kernel();
        } catch (const WorkerStartError&) {
          std::lock_guard<std::mutex> lock(mutex);
          ++failed;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(failed, 4);
    EXPECT_TRUE(gate->is_open());
    EXPECT_LT(seconds_since(start), 3.5);
  }
  std::filesystem::remove_all(dir);
}

// A case of more than kStartedFirstBytes, in the frame or beside it, asks for call 0's
// CallStarted: its receiving gets the watchdog's allowance, and the message says so.
TEST(WorkerProtocol, ALargeCaseAsksWhenItsFirstCallStarts) {
  RunCaseMsg run = run_message();
  run.data.problem.m = 4096, run.data.problem.k = 4096;  // A: 8 MiB and its scales
  Rng rng(6);
  fill_data(rng, DataSpec{}, run.data.problem);
  for (const bool with_file : {false, true}) {
    SharedFile file = SharedFile::create("test-large");
    bool started_first = false;
    const std::vector<uint8_t> frame =
        encode_run_case(run.case_id, run.data, run.plan, with_file ? &file : nullptr, &started_first);
    EXPECT_TRUE(started_first);
    EXPECT_EQ(with_file, frame.size() < kStartedFirstBytes);
    const RunCaseMsg back = std::get<RunCaseMsg>(
        decode_message(frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, &file));
    EXPECT_TRUE(back.started_first);
    EXPECT_EQ(back.data.problem.a, run.data.problem.a);
  }
}

// What a hostile worker can put into its frames and its file: a place past the file's end, more
// bytes than the parent asked for, a kind of byte string the protocol has not, a file cut short.
// Each is a ProtocolError; nothing is read outside the file, nothing is written anywhere.
TEST(WorkerProtocol, SharedFileReferencesAreChecked) {
  SharedFile out = SharedFile::create("test-out");
  CallDoneMsg done{1, 0, {}};
  done.observation.c = std::vector<uint32_t>(kSharedBytes + 1, 0x0102);  // two bytes a word
  const json good = payload_with(done, &out);
  auto error = [&](const json& j, uint64_t limit = UINT64_MAX) {
    const std::vector<uint8_t> bytes = json::to_cbor(j);
    out.set_limit(limit);
    try {
      decode_message(bytes.data(), bytes.size(), &out);
    } catch (const ProtocolError& e) {
      return std::string(e.what());
    }
    return std::string("(decoded)");
  };
  ASSERT_EQ(error(good), "(decoded)");
  auto where = [](uint64_t offset, uint64_t size, uint64_t subtype = 0x53) {
    std::vector<uint8_t> b(16);
    for (int x = 0; x < 8; ++x) b[x] = static_cast<uint8_t>(offset >> (8 * x)), b[8 + x] = static_cast<uint8_t>(size >> (8 * x));
    return json::binary(b, subtype);
  };
  json j = good;
  // The file is grown ahead of what was written: one byte past its end.
  const uint64_t file_size = static_cast<uint64_t>(lseek(out.fd(), 0, SEEK_END));
  ASSERT_GE(file_size, 2 * (kSharedBytes + 1));
  j[1][2][3] = where(1, file_size);
  EXPECT_NE(error(j).find(fmt::format("done.observation.c: bytes [1, +{}) past the end of the shared file", file_size)),
            std::string::npos)
      << error(j);
  j[1][2][3] = where(UINT64_MAX - 3, 8);  // offset + size wraps
  EXPECT_NE(error(j).find("past the end of the shared file"), std::string::npos) << error(j);
  EXPECT_NE(error(good, kSharedBytes).find(fmt::format("bytes in the shared file where at most {} can come", kSharedBytes)),
            std::string::npos)
      << error(good, kSharedBytes);
  j[1][2][3] = where(0, 4, 0x54);
  EXPECT_NE(error(j).find("done.observation.c: a byte string of an unknown kind"), std::string::npos) << error(j);
  j[1][2][3] = json::binary({}, 0x4D);  // "the output before" where there is none
  EXPECT_NE(error(j).find("done.observation.c: a mark of the output before where there is none"), std::string::npos)
      << error(j);
  // The worker cannot cut its file short, nor seal it against the parent's writes: the parent
  // maps it, and a mapping past a file's end would be a SIGBUS in the parent.
  EXPECT_TRUE(out.mappable());
  EXPECT_NE(ftruncate(out.fd(), 100), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(fcntl(out.fd(), F_ADD_SEALS, F_SEAL_WRITE), 0);
  EXPECT_NE(fcntl(out.fd(), F_ADD_SEALS, F_SEAL_GROW), 0);
  EXPECT_EQ(error(good), "(decoded)");
  // A file without the seal (a kernel that cannot seal) goes by pwrite and pread, and one cut
  // short is read short: a ProtocolError, never a SIGBUS.
  SharedFile plain(memfd_create("test-plain", MFD_CLOEXEC));
  ASSERT_TRUE(plain.open());
  EXPECT_FALSE(plain.mappable());
  const json by_pwrite = payload_with(done, &plain);
  const std::vector<uint8_t> bytes = json::to_cbor(by_pwrite);
  EXPECT_EQ(std::get<CallDoneMsg>(decode_message(bytes.data(), bytes.size(), &plain)).observation.c, done.observation.c);
  ASSERT_EQ(ftruncate(plain.fd(), 100), 0);
  try {
    decode_message(bytes.data(), bytes.size(), &plain);
    ADD_FAILURE() << "a file cut short was read";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("past the end of the shared file (100 bytes)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nvfp4
