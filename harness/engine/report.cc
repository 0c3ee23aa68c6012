// Results as JSON, tables and text, and the PNG error map (libpng).
#include "harness/engine/report.h"

#include "harness/ops/op_module.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/engine/report_fields.h"
#include "harness/engine/run_identity.h"
#include "reference/fp16.h"

namespace nvfp4 {
namespace {

// JSON cannot hold Inf or NaN; such a number becomes a string.
nlohmann::json number(double v) {
  if (std::isfinite(v)) return v;
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

template <class T>
nlohmann::json field_json(const T& x);

// Writes each field of x's list (report_fields.h) that its rule says to write.
struct FieldWriter {
  nlohmann::json& out;
  template <class T>
  void operator()(const char* key, FieldRule rule, const T& x) const {
    if (rule.presence != Presence::if_set || is_set(x)) out[key] = field_json(x);
  }
};

template <class T>
nlohmann::json fields_json(const T& x) {
  nlohmann::json out = nlohmann::json::object();
  visit_fields(FieldWriter{out}, x);
  return out;
}

// One field's value as the report holds it.
template <class T>
nlohmann::json field_json(const T& x) {
  if constexpr (std::is_same_v<T, double>) {
    return number(x);
  } else if constexpr (std::is_same_v<T, KernelVerdict> || std::is_same_v<T, CaseCall>) {
    return to_string(x);
  } else if constexpr (std::is_same_v<T, Check>) {
    return check_name(x);
  } else if constexpr (std::is_same_v<T, std::vector<std::pair<std::string, double>>> || is_map<T>::value) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, value] : x) out[name] = field_json(value);
    return out;
  } else if constexpr (std::is_same_v<T, std::optional<FailureRecord>>) {
    return fields_json(*x);
  } else if constexpr (std::is_same_v<T, HexWord<const uint32_t>>) {
    return fmt::format("0x{:0{}x}", x.word, x.digits);
  } else if constexpr (std::is_same_v<T, ScheduleStats> || std::is_same_v<T, ElementOf<const FailureRecord>>) {
    return fields_json(x);
  } else {
    return x;
  }
}

}  // namespace

const char* to_string(KernelVerdict v) {
  switch (v) {
    case KernelVerdict::pass: return "pass";
    case KernelVerdict::fail: return "fail";
    case KernelVerdict::skipped: return "skipped";
  }
  return "?";
}

std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                            "0123456789_-+=/.,:@%") == std::string::npos;
  if (plain) return word;
  std::string q = "'";
  for (char ch : word) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::optional<std::vector<std::string>> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t x = 0; x < line.size(); ++x) {
    const char ch = line[x];
    if (ch == ' ') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (ch == '\'') {
      const size_t end = line.find('\'', x + 1);
      if (end == std::string::npos) return std::nullopt;
      word += line.substr(x + 1, end - x - 1);
      x = end;
      in_word = true;
    } else if (ch == '\\') {
      if (x + 1 >= line.size()) return std::nullopt;
      word += line[++x];
      in_word = true;
    } else {
      word += ch;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string reproduce_command(const std::string& case_file, const KernelArgs& kernel_args) {
  std::string t = "nvfp4check replay " + shell_quote(case_file);
  for (const std::string& a : kernel_args) t += " " + shell_quote(a);
  return t;
}

void KernelReport::add_time(const std::string& step, double sec) {
  for (auto& [name, total] : step_seconds)
    if (name == step) {
      total += sec;
      return;
    }
  step_seconds.emplace_back(step, sec);
}

void add_outcome(KernelReport& k, const CaseOutcome& r, int64_t case_index, const std::string& text,
                 const std::string& error_map, const std::string& reproduce) {
  r.times.each([&](const char* step, double seconds) { k.add_time(step, seconds); });
  if (r.verdict == CaseOutcome::Verdict::skipped) {
    if (k.skipped_cases++ == 0) k.first_skip = r.message;
    return;
  }
  ++k.cases;
  if (r.verdict == CaseOutcome::Verdict::unsupported) ++k.unsupported_cases;
  k.policy = r.policy.name();
  k.elements += r.summary.elements;
  k.exact_elements += r.summary.exact_regime;
  k.unjudged_elements += r.summary.unjudged;
  k.max_error_ulps = std::max(k.max_error_ulps, r.summary.max_error_ulps);
  k.max_error_over_bound = std::max(k.max_error_over_bound, r.summary.max_error_over_bound);
  if (r.verdict != CaseOutcome::Verdict::fail) return;
  ++k.failed_cases;
  k.verdict = KernelVerdict::fail;
  if (k.failure) return;
  FailureRecord rec;
  rec.check = r.finding->check;
  rec.message = r.finding->message;
  rec.hint = r.finding->hint;
  rec.reproduce = reproduce;
  rec.case_file = r.case_file;
  rec.case_file_error = r.case_file_error;
  rec.error_map = error_map;
  rec.text = text;
  rec.call = r.call;
  rec.case_index = case_index;
  if (blames_elements(rec.check) && r.summary.any_failure() && r.summary.first_index >= 0) {
    const OracleSummary& s = r.summary;
    rec.has_element = true;
    rec.g = s.first_g;
    rec.word_digits = 2 * out_word_bytes(r.problem.out_type);
    rec.b = s.first_b;
    rec.i = s.first_i;
    rec.j = s.first_j;
    rec.expected = s.first.expected_bits;
    rec.actual = s.first_actual;
    rec.error_ulps = s.first.error_ulps;
    rec.error_over_bound = s.first.error_over_bound;
    rec.bound = s.first.bound;
  }
  k.failure = rec;
}

void finish_report(KernelReport& k) {
  if (k.verdict == KernelVerdict::pass && k.cases == 0) {
    k.verdict = KernelVerdict::skipped;
    if (k.skip_reason.empty())
      k.skip_reason = k.skipped_cases > 0 ? "no case applied: " + k.first_skip : "no case was checked";
  }
}

std::string shape_text(const Problem& p) { return op_module(p.op).shape_text(p); }

std::string gemm_family::shape_text(const Problem& p) {
  if (op_is_grouped(p.op)) {
    // A few groups' shapes, the non-empty ones first (an empty group computes nothing, and most
    // drawn cases have some), each with its index: a failure in group 200 is named by the element.
    std::vector<size_t> order(p.groups.size());
    std::iota(order.begin(), order.end(), size_t{0});
    const auto empty = std::stable_partition(order.begin(), order.end(), [&](size_t g) { return p.groups[g].m != 0; });
    std::string t = fmt::format("grouped_gemm {} groups{}", p.groups.size(), p.packed ? " (packed)" : "");
    if (empty != order.end()) t += fmt::format(", {} empty", order.end() - empty);
    t += ":";
    const size_t shown = std::min<size_t>(order.size(), 8);
    for (size_t x = 0; x < shown; ++x) {
      const Group& q = p.groups[order[x]];
      t += fmt::format(" g{}={}x{}x{}{}", order[x], q.m, q.n, q.k, q.alpha != 1.0f ? fmt::format(" alpha={}", q.alpha) : "");
    }
    if (shown < order.size()) t += fmt::format(" ... ({} more)", order.size() - shown);
    return t;
  }
  std::string t = fmt::format("{} m={} n={} k={} l={}, alpha={}", to_string(p.op), p.m, p.n, p.k, p.l, p.alpha);
  if (op_is_dual(p.op)) t += fmt::format(", alpha2={}", p.alpha2);
  if (p.mx_operands()) t += fmt::format(", A {} x B {}", to_string(p.a_format), to_string(p.b_format));
  return t;
}

std::string failure_text(const std::string& kernel, std::optional<uint64_t> seed, const CaseOutcome& r,
                         const std::string& error_map, const std::string& reproduce,
                         const std::vector<std::string>& notes) {
  const Problem& p = r.problem;
  const Check check = r.finding->check;
  // An element to name (an output word with its position): the GEMM family's outputs; a
  // quantizer's failure names its block in the message.
  const bool element = blames_elements(check) && r.summary.any_failure() && r.summary.first_index >= 0;
  std::string t = fmt::format("FAIL {}: check \"{}\"", kernel, check_name(check));
  if (seed) t += fmt::format(" (seed {})", *seed);
  t += "\n";
  if (op_quantizes(p.op))
    t += fmt::format("  case: quantize {}, {} scales\n", shape_text(p), to_string(p.sf_layout));
  else
    t += fmt::format("  case: {}, {} scales, {}, {} out, policy {}\n", shape_text(p), to_string(p.sf_layout),
                     to_string(p.semantics), to_string(p.out_type), r.policy.name());
  if (r.call != CaseCall::none) t += fmt::format("  during: {}\n", to_string(r.call));
  if (element) {
    const OracleSummary& s = r.summary;
    t += fmt::format("  first bad element {}: expected {}, actual {}\n", element_position_text(s),
                     word_text(p.out_type, s.first.expected_bits), word_text(p.out_type, s.first_actual));
    const std::string words =
        infinite_error_text(p.out_type, s.first.expected_bits, s.first_actual, s.first.error_ulps);
    if (!words.empty())
      t += fmt::format("  {}; {} of {} outputs fail\n", words, s.failing, s.elements);
    else
      t += fmt::format("  error {:.4g} ulps, {:.4g} x the allowed bound ({:.4g}); {} of {} outputs fail\n",
                       s.first.error_ulps, s.first.error_over_bound, s.first.bound, s.failing, s.elements);
  }
  // The element and its error are printed above; of the message keep what leads up to them.
  const std::string& lead = element ? r.finding->context : r.finding->message;
  if (!lead.empty()) t += "  " + lead + "\n";
  if (!r.finding->hint.empty()) t += "  likely cause: " + r.finding->hint + "\n";
  for (const std::string& note : notes) t += "  note: " + note + "\n";
  if (!r.case_file.empty() && r.case_file_error.empty()) t += "  case file: " + r.case_file + "\n";
  if (!r.case_file.empty() && !r.case_file_error.empty())
    t += "  case file: " + r.case_file + " (its seed only: the full case could not be saved: " + r.case_file_error +
         ")\n";
  if (r.case_file.empty() && !r.case_file_error.empty()) t += "  case file: not saved: " + r.case_file_error + "\n";
  if (!r.case_file.empty() && !reproduce.empty()) t += "  reproduce: " + reproduce + "\n";
  if (!error_map.empty()) t += "  error map: " + error_map + "\n";
  return t;
}

nlohmann::json report_json(std::optional<uint64_t> seed, const std::vector<KernelReport>& kernels,
                           const std::string& command, const Shard& shard) {
  nlohmann::json j;
  j["seed"] = seed ? nlohmann::json(*seed) : nlohmann::json(nullptr);
  j["command"] = command;
  if (shard.sharded()) j["shard"] = {{"index", shard.index}, {"count", shard.count}};
  j["build"] = program_identity();
  nlohmann::json list = nlohmann::json::array();
  for (const KernelReport& k : kernels) {
    nlohmann::json e = fields_json(k);
    // Derived from the fields: for people and scripts, never read back.
    e["exact_regime_share"] = k.elements ? double(k.exact_elements) / double(k.elements) : 0.0;
    e["accumulation"] = to_string((k.flags & NVFP4_FLAG_MMA_ACCUMULATE) ? Accumulation::matrix_unit : Accumulation::ieee_fp32);
    if (seed) e["schedule_digest"] = schedule_digest(*seed, k.name, shard, k.cases + k.skipped_cases);
    if (k.failure) e["failure"]["meaning"] = check_meaning(k.failure->check);
    list.push_back(e);
  }
  j["kernels"] = list;
  return j;
}

void check_report_writable(const std::string& path) {
  // Opened for appending, so an existing report is not clobbered before the run has one to write.
  const bool existed = std::filesystem::exists(path);
  std::ofstream out(path, std::ios::app);
  if (!out) throw std::runtime_error("cannot write the report " + path);
  out.close();
  if (!existed) std::filesystem::remove(path);
}

void write_report_file(const std::string& path, const nlohmann::json& report) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write the report " + path);
  out << report.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write the report " + path);
}

namespace {

// Skip reasons shared by several kernels (no CUDA device, an op none of them declares), each with
// the kernels it applies to, in the order the kernels came.
std::vector<std::pair<std::string, std::vector<std::string>>> shared_skip_reasons(
    const std::vector<KernelReport>& kernels) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const KernelReport& k : kernels) {
    if (k.verdict != KernelVerdict::skipped || k.skip_reason.empty()) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == k.skip_reason; });
    if (it == groups.end()) groups.push_back({k.skip_reason, {k.name}});
    else it->second.push_back(k.name);
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& g) { return g.second.size() < 2; }),
               groups.end());
  return groups;
}

}  // namespace

std::string summary_table(const std::vector<KernelReport>& kernels) {
  const auto shared = shared_skip_reasons(kernels);
  const auto is_shared = [&](const std::string& why) {
    return std::any_of(shared.begin(), shared.end(), [&](const auto& g) { return g.first == why; });
  };
  size_t w = 6;
  for (const KernelReport& k : kernels) w = std::max(w, k.name.size());
  std::string t = fmt::format("{:<{}}  {:>7}  {:<7}  {:<26}  {:>9}  {:>11}  {:>6}\n", "kernel", w, "cases", "verdict",
                              "failing check", "max ulps", "max err/bnd", "exact");
  for (const KernelReport& k : kernels) {
    std::string check = k.failure ? check_name(k.failure->check) : (k.verdict == KernelVerdict::skipped ? "-" : "");
    if (check.size() > 26) check = check.substr(0, 26);
    const std::string exact =
        k.elements ? fmt::format("{:.1f}%", 100.0 * double(k.exact_elements) / double(k.elements)) : "-";
    t += fmt::format("{:<{}}  {:>7}  {:<7}  {:<26}  {:>9.3g}  {:>11.3g}  {:>6}\n", k.name, w, k.cases, to_string(k.verdict), check,
                     k.max_error_ulps, k.max_error_over_bound, exact);
    if (k.verdict == KernelVerdict::skipped && !k.skip_reason.empty() && !is_shared(k.skip_reason))
      t += fmt::format("{:<{}}    skipped: {}\n", "", w, k.skip_reason);
    // Beside checked cases, the ones that were not; a kernel that checked none says so above.
    if (k.skipped_cases > 0 && k.cases > 0)
      t += fmt::format("{:<{}}    {} more case(s) did not apply, e.g.: {}\n", "", w, k.skipped_cases, k.first_skip);
    else if (k.skipped_cases > 1)
      t += fmt::format("{:<{}}    none of its {} cases applied\n", "", w, k.skipped_cases);
    if (k.unjudged_elements > 0)
      t += fmt::format("{:<{}}    {} output(s) unjudged: G or U of a dual GEMM at FP32's overflow threshold (SPEC rule 6)\n",
                       "", w, k.unjudged_elements);
  }
  // A reason many kernels share (nine CUDA kernels on a machine without a device) is said once.
  for (const auto& [why, names] : shared)
    t += fmt::format("skipped {} kernels ({}): {}\n", names.size(), fmt::join(names, ", "), why);
  return t;
}

std::string step_text(const KernelReport& report) {
  std::string t;
  for (const auto& [name, sec] : report.step_seconds) t += fmt::format("{}{} {:.2f} s", t.empty() ? "" : ", ", name, sec);
  return t;
}

std::string error_map_path_for(const std::string& case_file, const std::string& dir) {
  std::filesystem::path path(case_file);
  std::filesystem::path out = dir.empty() ? path.parent_path() : std::filesystem::path(dir);
  return (out / (path.stem().string() + ".png")).string();
}

namespace {

struct Rgb {
  uint8_t r, g, b;
};

Rgb element_colour(const ElementVerdict& v, uint32_t actual, OutType type) {
  const bool actual_nan = is_nan_out(type, actual);
  const bool expected_nan = std::isnan(v.expected);
  if (actual_nan && !expected_nan) return {255, 0, 255};
  if (!actual_nan && expected_nan) return {0, 220, 255};
  if (v.ok) {
    // The right RN16 bits (+0 and -0 alike): grey. Within the bound but other bits: green.
    const uint32_t magnitude = ~out_format(type).sign_bit & (out_word_bytes(type) == 4 ? 0xFFFFFFFFu : 0xFFFFu);
    if (actual == v.expected_bits || ((actual | v.expected_bits) & magnitude) == 0) return {48, 48, 48};
    const double r = std::clamp(v.error_over_bound, 0.0, 1.0);
    return {0, static_cast<uint8_t>(70 + 150 * r), 0};
  }
  // Beyond the bound: orange just past it, pure red at a million times it (or in the exact regime).
  double excess = std::isfinite(v.error_over_bound) ? std::log10(std::max(1.0, v.error_over_bound)) / 6.0 : 1.0;
  excess = std::clamp(excess, 0.0, 1.0);
  return {255, static_cast<uint8_t>(160 * (1.0 - excess)), 0};
}

}  // namespace

void write_error_map_png(const std::string& path, const Problem& p, const ExactResult& ref,
                         const std::vector<uint32_t>& c, const Policy& policy) {
  if (static_cast<int64_t>(c.size()) != p.c_elems() || static_cast<int64_t>(ref.elems.size()) != p.c_elems())
    throw std::runtime_error("error map: output and reference sizes do not match the problem");
  // One panel per batch, or per non-empty group, side by side.
  struct Panel {
    int64_t rows, cols, first;
  };
  std::vector<Panel> panels;
  if (op_is_grouped(p.op)) {
    const std::vector<int64_t> offsets = group_output_offsets(p);
    for (size_t g = 0; g < p.groups.size(); ++g)
      if (p.groups[g].m > 0) panels.push_back({p.groups[g].m, p.groups[g].n, offsets[g]});
  } else {
    for (int64_t b = 0; b < p.l; ++b) panels.push_back({p.m, p.n, b * p.m * p.n});
  }
  int64_t total_cols = 0, max_rows = 1;
  for (const Panel& q : panels) total_cols += q.cols, max_rows = std::max(max_rows, q.rows);
  // Cells are scaled so small outputs stay visible and large ones stay a sensible size.
  const int64_t cell_w = std::clamp<int64_t>(1200 / std::max<int64_t>(1, total_cols), 1, 24);
  const int64_t cell_h = std::clamp<int64_t>(800 / max_rows, 1, 24);
  const int64_t gap = 2;
  const int64_t width = total_cols * cell_w + (static_cast<int64_t>(panels.size()) - 1) * gap, height = max_rows * cell_h;
  if (width > 20000 || height > 20000) throw std::runtime_error("error map: output too large to draw");
  std::vector<uint8_t> pixels(static_cast<size_t>(width * height * 3), 255);
  const auto judge_word = op_module(p.op).judge_word;
  if (judge_word == nullptr) throw std::runtime_error("error map: op " + std::string(to_string(p.op)) + " has no output words");
  int64_t x_start = 0;
  for (const Panel& q : panels) {
    for (int64_t i = 0; i < q.rows; ++i)
      for (int64_t j = 0; j < q.cols; ++j) {
        const int64_t e = q.first + i * q.cols + j;
        const uint32_t actual = c[static_cast<size_t>(e)];
        const Rgb col = element_colour(judge_word(p, ref, e, actual, policy), actual, p.out_type);
        const int64_t x0 = x_start + j * cell_w, y0 = i * cell_h;
        for (int64_t y = y0; y < y0 + cell_h; ++y)
          for (int64_t x = x0; x < x0 + cell_w; ++x) {
            uint8_t* px = &pixels[static_cast<size_t>((y * width + x) * 3)];
            px[0] = col.r;
            px[1] = col.g;
            px[2] = col.b;
          }
      }
    x_start += q.cols * cell_w + gap;
  }

  FILE* fp = std::fopen(path.c_str(), "wb");
  if (!fp) throw std::runtime_error("cannot write the error map " + path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(fp);
    throw std::runtime_error("libpng failed writing " + path);
  }
  png_init_io(png, fp);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < height; ++y) png_write_row(png, &pixels[static_cast<size_t>(y * width * 3)]);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fclose(fp) != 0) throw std::runtime_error("cannot write the error map " + path);
}

}  // namespace nvfp4
