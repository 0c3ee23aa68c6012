// Shards' reports merged into one run's (see report_merge.h).
#include "harness/engine/report_merge.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "harness/engine/report_fields.h"
#include "harness/engine/run_identity.h"

namespace nvfp4 {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) { throw MergeError(where + ": " + what); }

const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) bad(where, fmt::format("no \"{}\"", key));
  return j.at(key);
}

int64_t count_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_number_integer() || v.get<int64_t>() < 0) bad(where, fmt::format("\"{}\" is not a count", key));
  return v.get<int64_t>();
}

std::string text_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_string()) bad(where, fmt::format("\"{}\" is not a string", key));
  return v.get<std::string>();
}

// Numbers as report_json writes them: finite, or "inf", "-inf", "nan".
double number_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (v.is_number()) return v.get<double>();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
  bad(where, fmt::format("\"{}\" is not a number", key));
}

// The larger, NaN winning (a NaN error is news a merge must not lose).
double max_of(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }

// A word of the output type: 0xhhhh (FP16, BF16) or 0xhhhhhhhh (FP32); *digits gets 4 or 8.
uint32_t hex_word(const json& j, const char* key, const std::string& where, int* digits) {
  const std::string s = text_field(j, key, where);
  if ((s.size() != 6 && s.size() != 10) || s.compare(0, 2, "0x") != 0 ||
      s.find_first_not_of("0123456789abcdefABCDEF", 2) != std::string::npos)
    bad(where, fmt::format("\"{}\" is not a 0xhhhh or 0xhhhhhhhh word", key));
  *digits = static_cast<int>(s.size()) - 2;
  return static_cast<uint32_t>(std::stoul(s.substr(2), nullptr, 16));
}

bool known_name(const std::string& name, KernelVerdict* v) {
  for (KernelVerdict x : {KernelVerdict::pass, KernelVerdict::fail, KernelVerdict::skipped})
    if (name == to_string(x)) return *v = x, true;
  return false;
}
bool known_name(const std::string& name, CaseCall* c) {
  for (CaseCall x : {CaseCall::none, CaseCall::start, CaseCall::unsupported, CaseCall::run1, CaseCall::run2, CaseCall::stale})
    if (name == to_string(x)) return *c = x, true;
  return false;
}
bool known_name(const std::string& name, Check* c) {
  const std::optional<Check> x = check_from_name(name);
  if (x) *c = *x;
  return x.has_value();
}
const char* enum_word(KernelVerdict) { return "verdict"; }
const char* enum_word(CaseCall) { return "call"; }
const char* enum_word(Check) { return "check"; }

template <class T>
void read_field(const json& j, const std::string& key, FieldRule rule, T&& x, const std::string& where);

// Reads each field of x's list (report_fields.h) from the object j; a field whose rule says
// `always` must be there.
struct FieldReader {
  const json& in;
  const std::string& where;
  template <class T>
  void operator()(const char* key, FieldRule rule, T&& x) const {
    if (!in.contains(key)) {
      if (rule.presence == Presence::always) bad(where, fmt::format("no \"{}\"", key));
      return;
    }
    read_field(in, key, rule, std::forward<T>(x), where);
  }
};

template <class T>
void read_fields(const json& j, T&& x, const std::string& where) {
  visit_fields(FieldReader{j, where}, x);
}

// One field's value, checked against its type and rule (j holds it under key).
template <class T>
void read_field(const json& j, const std::string& key, FieldRule rule, T&& out, const std::string& where) {
  using U = std::remove_cv_t<std::remove_reference_t<T>>;
  const json& v = j.at(key);
  if constexpr (std::is_same_v<U, std::string>) {
    out = text_field(j, key.c_str(), where);
  } else if constexpr (std::is_same_v<U, int64_t> || std::is_same_v<U, uint32_t>) {
    const int64_t most = std::is_same_v<U, uint32_t> ? int64_t{UINT32_MAX} : INT64_MAX;
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(most)) ||
        v.get<int64_t>() < rule.min || v.get<int64_t>() > most)
      bad(where, rule.min == 0 ? fmt::format("\"{}\" is not a count", key)
                               : fmt::format("\"{}\" is not an integer{}", key,
                                             rule.min == INT64_MIN ? "" : fmt::format(" of at least {}", rule.min)));
    out = static_cast<U>(v.get<int64_t>());
  } else if constexpr (std::is_same_v<U, double>) {
    out = number_field(j, key.c_str(), where);
  } else if constexpr (std::is_same_v<U, KernelVerdict> || std::is_same_v<U, CaseCall> || std::is_same_v<U, Check>) {
    const std::string name = text_field(j, key.c_str(), where);
    if (!known_name(name, &out)) bad(where, fmt::format("unknown {} \"{}\"", enum_word(out), name));
  } else if constexpr (is_map<U>::value || std::is_same_v<U, std::vector<std::pair<std::string, double>>>) {
    if (!v.is_object()) bad(where, fmt::format("\"{}\" is not an object", key));
    for (const auto& [name, value] : v.items()) {
      typename U::value_type::second_type x{};
      read_field(v, name, rule, x, where + ": " + key);
      if constexpr (is_map<U>::value) out[name] = x;
      else out.emplace_back(name, x);
    }
  } else if constexpr (std::is_same_v<U, std::vector<std::string>>) {
    if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); }))
      bad(where, fmt::format("\"{}\" is not a list of texts", key));
    out = v.get<std::vector<std::string>>();
  } else if constexpr (std::is_same_v<U, HexWord<uint32_t>>) {
    out.word = hex_word(j, key.c_str(), where, &out.digits);
  } else if constexpr (std::is_same_v<U, std::optional<FailureRecord>>) {
    read_fields(v, out.emplace(), where + ": " + key);
  } else {
    static_assert(std::is_same_v<U, ScheduleStats> || std::is_same_v<U, ElementOf<FailureRecord>>);
    if (!v.is_object()) bad(where, fmt::format("\"{}\" is not an object", key));
    if constexpr (std::is_same_v<U, ElementOf<FailureRecord>>) out.failure.has_element = true;
    read_fields(v, out, where + ": " + key);
  }
}

// Adds a shard's value of each field to the merged one by the field's rule (Merge::own fields
// are merged by merge_shard_reports itself).
struct FieldMerger {
  bool first;  // the first shard: fields that are the same everywhere are taken from it
  template <class T>
  void operator()(const char*, FieldRule rule, T& into, const T& from) const {
    if (rule.merge == Merge::same && first) into = from;
    if (rule.merge == Merge::first_set && !is_set(into)) into = from;
    if (rule.merge == Merge::sum) add(into, from);
    if (rule.merge == Merge::max) {
      if constexpr (std::is_same_v<T, double>) into = max_of(into, from);
      else throw std::logic_error("a report field merged by max that is no number");
    }
  }
  template <class T>
  static void add(T& into, const T& from) {
    if constexpr (std::is_arithmetic_v<T>) {
      into += from;
    } else if constexpr (is_map<T>::value) {
      for (const auto& [name, value] : from) into[name] += value;
    } else if constexpr (std::is_same_v<T, std::vector<std::pair<std::string, double>>>) {
      for (const auto& entry : from) {
        auto at = std::find_if(into.begin(), into.end(), [&](const auto& e) { return e.first == entry.first; });
        if (at == into.end()) into.push_back(entry);
        else at->second += entry.second;
      }
    } else if constexpr (std::is_same_v<T, ScheduleStats>) {
      visit_fields(FieldMerger{false}, into, from);
    } else {
      throw std::logic_error("a report field merged by sum that cannot be added");
    }
  }
};

// Shard I of N as the report says (an unsharded report is shard 0 of 1).
Shard shard_of(const ShardReport& r) {
  Shard s;
  if (!r.json.contains("shard")) return s;
  const json& j = r.json.at("shard");
  s.index = count_field(j, "index", r.path + ": shard");
  s.count = count_field(j, "count", r.path + ": shard");
  if (s.count < 1 || s.index >= s.count) bad(r.path, fmt::format("shard {}/{} is not one of N", s.index, s.count));
  return s;
}

// What the command says about each shard's share: `--cases C` (0: none given), and whether
// `--seconds` may have ended a shard before its share was done.
struct CommandBounds {
  int64_t cases = 0;
  bool timed = false;
};

CommandBounds bounds_of(const std::string& command) {
  CommandBounds b;
  std::istringstream words(command);
  std::string word, next;
  while (words >> word) {
    if (word == "--seconds") b.timed = true;
    if (word == "--cases" && words >> next && next.find_first_not_of("0123456789") == std::string::npos &&
        !next.empty() && next.size() < 16)
      b.cases = std::stoll(next);
  }
  return b;
}

// The build that wrote a report ("build"): shards of one campaign come from one build.
std::string build_of(const ShardReport& r) {
  if (!r.json.contains("build"))
    bad(r.path, "no \"build\": written by an older nvfp4check, which did not say what build it was (shards of one "
                "campaign come from one build: run the shard again)");
  return text_field(r.json, "build", r.path);
}

std::string shown_identity(const std::string& id) { return id.empty() ? "none" : id; }

// A shard's claims about one kernel that must add up by themselves and against the command: a
// run walks the shard's indices I, I+N, ... in order, draws each (`drawn`), counts it as checked
// or skipped, and stops at its first failure or at the case limit.
void check_claims(const KernelReport& k, const Shard& s, const CommandBounds& b) {
  // No run walks more cases than `run --cases` may ask for (2^40); the index arithmetic below
  // stays far from int64's end.
  const int64_t most = int64_t(1) << 40;
  if (k.cases > most || k.skipped_cases > most)
    bad("", fmt::format("{} cases and {} skipped: more than any run walks", k.cases, k.skipped_cases));
  const int64_t walked = k.cases + k.skipped_cases;
  if (k.drawn.cases != walked)
    bad("", fmt::format("\"drawn\" says {} cases were drawn, but the report counts {} ({} checked + {} skipped)",
                        k.drawn.cases, walked, k.cases, k.skipped_cases));
  const int64_t failed = k.verdict == KernelVerdict::fail ? 1 : 0;  // a run stops at its first failure
  if (k.failed_cases != failed)
    bad("", fmt::format("verdict {} with failed_cases {} (a shard stops at its first failure: 1 with verdict "
                        "fail, else 0)", to_string(k.verdict), k.failed_cases));
  if ((k.verdict == KernelVerdict::skipped) != (k.cases == 0))
    bad("", fmt::format("verdict {} with {} cases checked", to_string(k.verdict), k.cases));
  if (k.unsupported_cases > k.cases || k.exact_elements > k.elements)
    bad("", "more unsupported cases than cases, or more exact elements than elements");
  if (k.failure) {
    const int64_t f = k.failure->case_index;
    if (f < 0 || f % s.count != s.index || (b.cases > 0 && f >= b.cases))
      bad("", fmt::format("a failure at case_index {}, which is not a case of shard {}/{} ({} + a multiple of {}{})",
                          f, s.index, s.count, s.index, s.count,
                          b.cases > 0 ? fmt::format(", below --cases {}", b.cases) : ""));
    const int64_t upto = (f - s.index) / s.count + 1;  // the shard's cases up to and with f
    if (b.timed ? walked > upto : walked != upto)
      bad("", fmt::format("{} cases walked, but the failure at case_index {} is the shard's case number {}, where it "
                          "stops", walked, f, upto));
  } else if (b.cases > 0 && walked > 0 && (b.timed ? walked > s.cases_below(b.cases) : walked != s.cases_below(b.cases))) {
    bad("", fmt::format("{} cases walked without a failure, but shard {}/{} of --cases {} has exactly {}", walked,
                        s.index, s.count, b.cases, s.cases_below(b.cases)));
  }
}

// A kernel that walked no case in one shard though its share has some, while another shard
// checked it: the shards did not run alike (it could not run there, or the report was emptied).
void check_ran_alike(const std::vector<const ShardReport*>& by_shard,
                     const std::vector<std::vector<KernelReport>>& parts, size_t x, const CommandBounds& b) {
  int64_t ran = -1;
  for (size_t s = 0; s < parts.size() && ran < 0; ++s)
    if (parts[s][x].cases + parts[s][x].skipped_cases > 0) ran = static_cast<int64_t>(s);
  if (ran < 0) return;  // skipped in every shard: the merge says skipped
  for (size_t s = 0; s < parts.size(); ++s) {
    const KernelReport& k = parts[s][x];
    const Shard shard{static_cast<int64_t>(s), static_cast<int64_t>(parts.size())};
    if (k.cases + k.skipped_cases == 0 && (b.cases == 0 || shard.cases_below(b.cases) > 0))
      bad(by_shard[s]->path,
          fmt::format("kernel {}: no case walked ({}), though {} checked it: the shards did not run alike", k.name,
                      k.skip_reason.empty() ? "no reason given" : k.skip_reason,
                      by_shard[static_cast<size_t>(ran)]->path));
  }
}

// The report's evidence of its own cases: the digest of the case seeds of the indices its counts
// say it walked, which depends on the seed, the kernel and the shard's index. A report relabelled
// as another shard, or with counts edited, does not carry the right one.
void check_digest(const json& entry, const KernelReport& k, uint64_t seed, const Shard& s) {
  const std::string digest = text_field(entry, "schedule_digest", "");
  const int64_t walked = k.cases + k.skipped_cases;
  if (digest != schedule_digest(seed, k.name, s, walked))
    bad("", fmt::format("\"schedule_digest\" {} is not the digest of the first {} cases of shard {}/{} under seed "
                        "{}: its cases are not those of shard {}/{} (another shard's report relabelled, or its "
                        "counts edited)", digest, walked, s.index, s.count, seed, s.index, s.count));
}

// The run the reports are shards of (the first one's seed, command, shard count and build), and
// each report by its shard index: every one of 0..N-1 exactly once, of that one run.
std::vector<const ShardReport*> shards_of_one_run(const std::vector<ShardReport>& reports, MergedReport& m) {
  if (reports.empty()) throw MergeError("no report to merge");
  const ShardReport& first = reports.front();
  const json& seed = field(first.json, "seed", first.path);
  if (!seed.is_number_unsigned()) bad(first.path, "no seed: not a report of `nvfp4check run`");
  m.seed = seed.get<uint64_t>();
  m.command = text_field(first.json, "command", first.path);
  m.shards = shard_of(first).count;
  m.build = build_of(first);
  std::vector<const ShardReport*> by_shard(static_cast<size_t>(m.shards), nullptr);
  for (const ShardReport& r : reports) {
    if (field(r.json, "seed", r.path) != seed)
      bad(r.path, fmt::format("seed {} but {} has seed {}: not shards of one run", r.json.at("seed").dump(),
                              first.path, seed.dump()));
    if (text_field(r.json, "command", r.path) != m.command)
      bad(r.path, fmt::format("another command (\"{}\") than {} (\"{}\"): not shards of one run",
                              r.json.at("command").get<std::string>(), first.path, m.command));
    // An interrupted shard checked fewer cases than its share: the campaign is not complete.
    if (r.json.contains("interrupted") && r.json.at("interrupted") == true)
      bad(r.path, "the run of this shard was interrupted (\"interrupted\": true): run the shard again");
    if (build_of(r) != m.build)
      bad(r.path, fmt::format("written by another build of nvfp4check ({}) than {} ({}): not shards of one run",
                              shown_identity(build_of(r)), first.path, shown_identity(m.build)));
    const Shard s = shard_of(r);
    if (s.count != m.shards)
      bad(r.path, fmt::format("shard {}/{} but {} is one of {}", s.index, s.count, first.path, m.shards));
    const ShardReport*& slot = by_shard[static_cast<size_t>(s.index)];
    if (slot) bad(r.path, fmt::format("shard {}/{} again (also {})", s.index, s.count, slot->path));
    slot = &r;
  }
  std::string missing;
  for (size_t i = 0; i < by_shard.size(); ++i)
    if (!by_shard[i]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", i);
  if (!missing.empty()) throw MergeError(fmt::format("missing shard(s) {} of {}", missing, m.shards));
  return by_shard;
}

// Each shard's kernels, read back; every shard lists the same kernels in the same order (one
// command, one registry) from the same plugin files.
std::vector<std::vector<KernelReport>> kernels_of(const std::vector<const ShardReport*>& by_shard) {
  std::vector<std::vector<KernelReport>> parts;
  for (const ShardReport* r : by_shard) {
    const json& list = field(r->json, "kernels", r->path);
    if (!list.is_array()) bad(r->path, "\"kernels\" is not a list");
    std::vector<KernelReport> ks;
    for (const json& e : list) {
      try {
        ks.push_back(kernel_report_from_json(e));
      } catch (const MergeError& err) {
        bad(r->path, err.what());
      }
    }
    if (!parts.empty()) {
      bool same = ks.size() == parts.front().size();
      for (size_t x = 0; same && x < ks.size(); ++x) same = ks[x].name == parts.front()[x].name;
      if (!same) bad(r->path, fmt::format("other kernels than {}", by_shard.front()->path));
      for (size_t x = 0; x < ks.size(); ++x)
        if (ks[x].origin_identity != parts.front()[x].origin_identity)
          bad(r->path, fmt::format("kernel {}: another plugin file ({}) than in {} ({}): rebuilt or replaced "
                                   "between shards", ks[x].name, shown_identity(ks[x].origin_identity),
                                   by_shard.front()->path, shown_identity(parts.front()[x].origin_identity)));
    }
    parts.push_back(std::move(ks));
  }
  return parts;
}

// What each shard says must add up: by itself and against the command, across the shards, and
// against its evidence of the cases it walked.
void check_parts(const std::vector<const ShardReport*>& by_shard, const std::vector<std::vector<KernelReport>>& parts,
                 const MergedReport& m) {
  const CommandBounds bounds = bounds_of(m.command);
  auto in_shard = [&](size_t s, const std::string& kernel, const std::function<void()>& check) {
    try {
      check();
    } catch (const MergeError& err) {
      bad(by_shard[s]->path, "kernel " + kernel + err.what());  // err: ": what"
    }
  };
  for (size_t x = 0; x < parts.front().size(); ++x) {
    for (size_t s = 0; s < parts.size(); ++s)
      in_shard(s, parts[s][x].name, [&] { check_claims(parts[s][x], Shard{int64_t(s), m.shards}, bounds); });
    check_ran_alike(by_shard, parts, x, bounds);
    for (size_t s = 0; s < parts.size(); ++s)
      in_shard(s, parts[s][x].name, [&] {
        check_digest(by_shard[s]->json.at("kernels").at(x), parts[s][x], m.seed, Shard{int64_t(s), m.shards});
      });
  }
}

// Kernel x of the shards as one run's: fields by their merge rules (report_fields.h), the verdict,
// the earliest failure and every shard's, the reason it was skipped everywhere.
void merge_kernel(const std::vector<std::vector<KernelReport>>& parts, size_t x, MergedReport& m) {
  KernelReport k;
  k.verdict = KernelVerdict::skipped;
  int64_t found_by = -1;
  std::vector<ShardFailure> failures;
  for (size_t s = 0; s < parts.size(); ++s) {
    const KernelReport& p = parts[s][x];
    if (k.skipped_cases == 0 && p.skipped_cases > 0) k.first_skip = p.first_skip;
    visit_fields(FieldMerger{s == 0}, k, p);
    if (p.verdict == KernelVerdict::fail || (p.verdict == KernelVerdict::pass && k.verdict == KernelVerdict::skipped))
      k.verdict = p.verdict;
    if (p.failure) {
      failures.push_back({static_cast<int64_t>(s), *p.failure});
      if (!k.failure || p.failure->case_index < k.failure->case_index) {
        k.failure = p.failure;
        found_by = static_cast<int64_t>(s);
      }
    }
  }
  // Skipped everywhere: why, as the shards said (one that had no share of the cases says only
  // that; a kernel that cannot run here says so in every shard).
  if (k.verdict == KernelVerdict::skipped) {
    for (const auto& part : parts)
      if (!part[x].skip_reason.empty() && (k.skip_reason.empty() || part[x].skip_reason != "no case was checked"))
        k.skip_reason = part[x].skip_reason;
  }
  std::sort(failures.begin(), failures.end(),
            [](const ShardFailure& a, const ShardFailure& b) { return a.failure.case_index < b.failure.case_index; });
  m.kernels.push_back(std::move(k));
  m.failure_shard.push_back(found_by);
  m.shard_failures.push_back(std::move(failures));
}

}  // namespace

std::vector<ShardReport> read_shard_reports(const std::vector<std::string>& paths) {
  std::vector<ShardReport> out;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) bad(path, "cannot read it");
    std::stringstream text;
    text << in.rdbuf();
    ShardReport r;
    r.path = path;
    r.json = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (r.json.is_discarded()) bad(path, "not JSON");
    if (!r.json.is_object() || !r.json.contains("kernels")) bad(path, "not a report of `nvfp4check run`");
    out.push_back(std::move(r));
  }
  return out;
}

KernelReport kernel_report_from_json(const json& e) {
  const std::string where = "kernel " + (e.is_object() && e.contains("name") && e.at("name").is_string()
                                             ? e.at("name").get<std::string>()
                                             : std::string("(no name)"));
  KernelReport k;
  if (!e.is_object()) bad(where, "not an object");
  read_fields(e, k, where);
  if ((k.verdict == KernelVerdict::fail) != k.failure.has_value()) bad(where, "a failure without verdict fail, or the reverse");
  return k;
}

MergedReport merge_shard_reports(const std::vector<ShardReport>& reports) {
  MergedReport m;
  const std::vector<const ShardReport*> by_shard = shards_of_one_run(reports, m);
  const std::vector<std::vector<KernelReport>> parts = kernels_of(by_shard);
  check_parts(by_shard, parts, m);
  for (size_t x = 0; x < parts.front().size(); ++x) merge_kernel(parts, x, m);
  return m;
}

nlohmann::json merged_report_json(const MergedReport& m) {
  json j = report_json(m.seed, m.kernels, m.command);
  j["merged_shards"] = m.shards;
  j["build"] = m.build;  // the shards', not this program's
  for (size_t x = 0; x < m.kernels.size(); ++x) {
    json& e = j["kernels"][x];
    e.erase("schedule_digest");  // each shard's evidence of its own cases; the merge has no single one
    json list = json::array();
    for (const ShardFailure& f : m.shard_failures[x])
      list.push_back({{"shard", f.shard},
                      {"case_index", f.failure.case_index},
                      {"check", check_name(f.failure.check)},
                      {"case_file", f.failure.case_file}});
    e["shard_failures"] = list;
    if (m.kernels[x].failure) e["failure"]["shard"] = m.failure_shard[x];
  }
  return j;
}

}  // namespace nvfp4
