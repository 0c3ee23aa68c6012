// Case files with block formats (SPEC.md section 4, revision 4's a_format/b_format), GEMV and
// GEMM with explicit data, read into an MxProblem until Problem holds the two formats itself
// (then parse_case takes these keys and this file goes).
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "reference/case_file.h"
#include "reference/exact_mx.h"

namespace nvfp4 {
namespace {

struct Entry {
  std::string value;
  int line;
};

class MxCaseReader {
 public:
  MxCaseReader(const std::string& text, const std::string& filename) : file_(filename) { split(text); }

  MxProblem parse() {
    MxProblem p;
    const std::string op = take("op", "gemm");
    if (!parse_op(op, &p.op) || (p.op != Op::gemv && p.op != Op::gemm)) fail("op", "op must be gemv or gemm, not " + op);
    p.m = number("m", 1);
    p.n = number("n", 1);
    p.k = number("k", 32);
    p.l = number("l", 1);
    if (op_n_is_one(p.op) && p.n != 1) fail("n", "n must be 1 for gemv");
    const std::string layout = take("sf_layout", "linear");
    if (layout != "linear" && layout != "permuted") fail("sf_layout", "sf_layout must be linear or permuted");
    const std::string sem = take("scale_semantics", "ue4m3");
    if (sem != "ue4m3" && sem != "e4m3") fail("scale_semantics", "scale_semantics must be ue4m3 or e4m3");
    p.semantics = sem == "e4m3" ? ScaleSemantics::e4m3 : ScaleSemantics::ue4m3;
    const std::string alpha = take("alpha", "1.0");
    p.alpha = std::strtof(alpha.c_str(), nullptr);
    if (alpha.empty() || !std::isfinite(p.alpha)) fail("alpha", "alpha must be a finite number");
    const std::string out = take("out_type", "fp16");
    if (!parse_out_type(out, &p.out_type)) fail("out_type", "out_type must be fp16, bf16 or fp32");
    p.a = operand("a", p.m, p.k, p.l);
    p.b = operand("b", p.n, p.k, p.l);
    if (entries_.count("expect")) p.expect = words("expect", p.out_type, p.l * p.m * p.n);
    p.note = take("note", "");
    if (!entries_.empty()) fail(entries_.begin()->first, "unknown key '" + entries_.begin()->first + "'");
    return p;
  }

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    const auto it = lines_.find(key);
    throw CaseError(file_ + ":" + std::to_string(it == lines_.end() ? 0 : it->second) + ": " + what);
  }

  void split(const std::string& text) {
    std::istringstream in(text);
    std::string raw;
    for (int line = 1; std::getline(in, raw); ++line) {
      const std::string s = trim(raw.substr(0, raw.find('#')));
      if (s.empty()) continue;
      const size_t eq = s.find('=');
      if (eq == std::string::npos) throw CaseError(file_ + ":" + std::to_string(line) + ": expected key = value");
      const std::string key = trim(s.substr(0, eq));
      if (entries_.count(key) || lines_.count(key))
        throw CaseError(file_ + ":" + std::to_string(line) + ": duplicate key '" + key + "'");
      entries_[key] = Entry{trim(s.substr(eq + 1)), line};
      lines_[key] = line;
    }
  }

  static std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
  }

  std::string take(const std::string& key, const std::string& fallback) {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return fallback;
    const std::string v = it->second.value;
    entries_.erase(it);
    return v;
  }

  int64_t number(const std::string& key, int64_t fallback) {
    const std::string s = take(key, std::to_string(fallback));
    int64_t v = 0;
    const auto res = std::from_chars(s.data(), s.data() + s.size(), v);
    if (res.ec != std::errc() || res.ptr != s.data() + s.size() || v < 1 || v > (int64_t(1) << 31))
      fail(key, key + " must be an integer in 1..2^31, not '" + s + "'");
    return v;
  }

  std::vector<uint8_t> hex(const std::string& key, int64_t expected) {
    std::string digits;
    for (const char c : take(key, ""))
      if (c != ' ' && c != '\t') digits += c;
    if (static_cast<int64_t>(digits.size()) != 2 * expected)
      fail(key, key + " holds " + std::to_string(digits.size() / 2) + " bytes, expected " + std::to_string(expected));
    std::vector<uint8_t> out(static_cast<size_t>(expected));
    for (size_t x = 0; x < out.size(); ++x) {
      unsigned v = 0;
      const auto res = std::from_chars(digits.data() + 2 * x, digits.data() + 2 * x + 2, v, 16);
      if (res.ec != std::errc() || res.ptr != digits.data() + 2 * x + 2) fail(key, key + ": not hex digits");
      out[x] = static_cast<uint8_t>(v);
    }
    return out;
  }

  MxOperand operand(const std::string& name, int64_t rows, int64_t k, int64_t l) {
    MxOperand op;
    const std::string f = take(name + "_format", "nvfp4");
    if (!parse_block_format(f, &op.format))
      fail(name + "_format", name + "_format must be nvfp4, mxfp4, mxfp8_e4m3 or mxfp8_e5m2, not '" + f + "'");
    if (packs_nibbles(op.format) && k % 2 != 0) fail("k", "k must be even for an E2M1 operand (" + name + ")");
    op.rows = rows;
    op.k = k;
    op.l = l;
    if (!entries_.count(name)) fail(name, "missing '" + name + "'");
    op.data = hex(name, op.data_bytes());
    op.scales = hex("sf" + name, op.scale_bytes());
    return op;
  }

  std::vector<uint32_t> words(const std::string& key, OutType t, int64_t count) {
    std::istringstream in(take(key, ""));
    std::vector<uint32_t> out;
    std::string w;
    const size_t width = static_cast<size_t>(2 * out_word_bytes(t));
    while (in >> w) {
      uint32_t v = 0;
      const auto res = std::from_chars(w.data(), w.data() + w.size(), v, 16);
      if (w.size() != width || res.ec != std::errc() || res.ptr != w.data() + w.size())
        fail(key, key + ": '" + w + "' is not a word of " + std::to_string(width) + " hex digits");
      out.push_back(v);
    }
    if (static_cast<int64_t>(out.size()) != count)
      fail(key, key + " holds " + std::to_string(out.size()) + " words, expected " + std::to_string(count));
    return out;
  }

  std::string file_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, int> lines_;
};

std::string hex_line(const std::vector<uint8_t>& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (const uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

}  // namespace

MxProblem parse_mx_case(const std::string& text, const std::string& filename) {
  MxProblem p = MxCaseReader(text, filename).parse();
  try {
    validate(p);
  } catch (const std::invalid_argument& e) {
    throw CaseError(filename + ":0: " + e.what());
  }
  return p;
}

std::string write_mx_case(const MxProblem& p) {
  validate(p);
  std::ostringstream out;
  char alpha[32];
  std::snprintf(alpha, sizeof alpha, "%a", static_cast<double>(p.alpha));
  out << "# nvfp4check case v1\nop = " << to_string(p.op) << "\nm = " << p.m << "\nn = " << p.n << "\nk = " << p.k
      << "\nl = " << p.l << "\nsf_layout = linear\nscale_semantics = " << to_string(p.semantics) << "\nalpha = " << alpha
      << "\nout_type = " << to_string(p.out_type) << "\na_format = " << to_string(p.a.format)
      << "\nb_format = " << to_string(p.b.format) << "\n";
  const std::string note = sanitize_note(p.note);
  if (!note.empty()) out << "note = " << note << "\n";
  out << "a = " << hex_line(p.a.data) << "\nb = " << hex_line(p.b.data) << "\nsfa = " << hex_line(p.a.scales)
      << "\nsfb = " << hex_line(p.b.scales) << "\n";
  if (p.expect) {
    out << "expect =";
    for (const uint32_t w : *p.expect) out << " " << word_hex(p.out_type, w);
    out << "\n";
  }
  return out.str();
}

}  // namespace nvfp4
