// Case files (SPEC.md section 4): a strict `key = value` parser that names the file and line of
// every problem it finds, and a writer whose output the parser reads back to the same Problem.
#include "reference/case_file.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace nvfp4 {
namespace {

// Keys in canonical (written) order.
constexpr const char* kKeys[] = {"op",   "m",        "n",         "k",    "l", "sf_layout",
                                 "scale_semantics",    "alpha",     "seed", "generator",
                                 "note", "a",        "b",         "sfa",  "sfb", "expect"};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string trim(const std::string& s, size_t begin, size_t end) {
  while (begin < end && is_space(s[begin])) ++begin;
  while (end > begin && is_space(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

// A value quoted for an error message, cut short so a 100 MB data line never lands in one.
std::string quoted(const std::string& s) {
  constexpr size_t kShown = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kShown) out += "...";
  return out + "'";
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Returns the line (1-based) of the first byte that is not valid UTF-8 or is NUL, or 0 when the
// text is clean; `what` says which. Overlong forms, surrogates and code points past U+10FFFF are
// invalid (RFC 3629).
int find_bad_encoding(const std::string& text, std::string& what) {
  int line = 1;
  const size_t n = text.size();
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < n;) {
    const unsigned c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (c == 0) {
      what = "NUL byte (case files are text)";
      return line;
    }
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    }
    bool ok = len > 0 && i + len <= n;
    for (int j = 1; ok && j < len; ++j) {
      const unsigned cj = s[i + j];
      ok = j == 1 ? (cj >= lo && cj <= hi) : (cj >= 0x80 && cj <= 0xBF);
    }
    if (!ok) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "not valid UTF-8 (byte 0x%02X)", c);
      what = buf;
      return line;
    }
    i += len;
  }
  return 0;
}

struct Entry {
  std::string value;
  int line = 0;
};

class CaseParser {
 public:
  CaseParser(const std::string& text, const std::string& filename) : text_(text), file_(filename) {}

  Problem parse() {
    check_encoding();
    split_entries();
    Problem p;
    parse_shape(p);
    parse_options(p);
    parse_data(p);
    return p;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw CaseError(file_ + ":" + std::to_string(line) + ": " + what);
  }

  const Entry* find(const char* key) const {
    const auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
  }

  void check_encoding() {
    std::string what;
    if (const int line = find_bad_encoding(text_, what)) fail(line, what);
  }

  void split_entries() {
    size_t pos = 0;
    // A UTF-8 byte-order mark (some editors add one) is not part of the first key.
    if (text_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;
    int line = 0;
    while (pos < text_.size()) {
      ++line;
      size_t eol = text_.find('\n', pos);
      if (eol == std::string::npos) eol = text_.size();
      size_t end = text_.find('#', pos);  // a comment runs to the end of the line
      if (end == std::string::npos || end > eol) end = eol;
      handle_line(line, pos, end);
      pos = eol + 1;
    }
    last_line_ = line;
  }

  void handle_line(int line, size_t begin, size_t end) {
    size_t first = begin;
    while (first < end && is_space(text_[first])) ++first;
    if (first == end) return;  // blank or comment only
    const size_t eq = text_.find('=', first);
    if (eq == std::string::npos || eq >= end) {
      fail(line, "expected 'key = value', got " + quoted(trim(text_, first, end)));
    }
    const std::string key = trim(text_, first, eq);
    if (key.empty()) fail(line, "missing key before '='");
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      std::string list;
      for (const char* k : kKeys) list += std::string(list.empty() ? "" : ", ") + k;
      fail(line, "unknown key " + quoted(key) + " (known keys: " + list + ")");
    }
    if (const Entry* previous = find(key.c_str())) {
      fail(line, "duplicate key '" + key + "' (first given on line " +
                     std::to_string(previous->line) + ")");
    }
    entries_[key] = Entry{trim(text_, eq + 1, end), line};
  }

  // The line for a missing field: the last line of the file (0 for an empty file).
  [[noreturn]] void fail_missing(const std::string& what) const { fail(last_line_, what); }

  // A non-negative decimal integer (digits only: no sign, no base prefix, no spaces inside).
  uint64_t parse_uint(const Entry& e, const char* key) const {
    if (e.value.empty()) fail(e.line, std::string(key) + ": missing value");
    uint64_t v = 0;
    for (const char c : e.value) {
      if (c < '0' || c > '9') {
        fail(e.line, std::string(key) + ": " + quoted(e.value) + " is not a decimal integer");
      }
      const uint64_t d = static_cast<uint64_t>(c - '0');
      if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) {
        fail(e.line, std::string(key) + ": " + quoted(e.value) + " is too large");
      }
      v = v * 10 + d;
    }
    return v;
  }

  int64_t parse_dim(const char* key, uint64_t least = 1) const {
    const Entry* e = find(key);
    const uint64_t v = parse_uint(*e, key);
    if (v < least) fail(e->line, std::string(key) + " must be at least " + std::to_string(least) + ", got " + e->value);
    // Far above the size cap; keeps the products below in range of 128 bits.
    if (v > (uint64_t(1) << 40)) fail(e->line, std::string(key) + " = " + e->value + " is too large");
    return static_cast<int64_t>(v);
  }

  void parse_shape(Problem& p) {
    const Entry* op = find("op");
    if (!op) fail_missing("missing required key 'op' (gemv or gemm)");
    if (op->value == "gemm") {
      p.op = Op::gemm;
    } else if (op->value == "gemv") {
      p.op = Op::gemv;
    } else {
      fail(op->line, "op: " + quoted(op->value) + " is neither 'gemv' nor 'gemm'");
    }
    for (const char* key : {"m", "k", "l"}) {
      if (!find(key)) fail_missing(std::string("missing required key '") + key + "'");
    }
    if (p.op == Op::gemm && !find("n")) fail_missing("missing required key 'n' (required for gemm)");
    p.m = parse_dim("m");
    p.k = parse_dim("k", 2);  // k is even and at least 2
    p.l = parse_dim("l");
    p.n = find("n") ? parse_dim("n") : 1;
    if (p.op == Op::gemv && p.n != 1) fail(find("n")->line, "n must be 1 for gemv, got " + find("n")->value);
    if (p.k % 2 != 0) fail(find("k")->line, "k must be even (two E2M1 values per byte), got " + find("k")->value);

    // Cap the buffers a case needs (SPEC section 2: a, b, both scale layouts, c) so that a typo
    // or a hostile file cannot make the reference or the harness allocate without bound.
    using u128v = unsigned __int128;
    const u128v m = p.m, n = p.n, k = p.k, l = p.l, kb = (p.k + 15) / 16;
    const u128v kt = (kb + 3) / 4, mt = (m + 127) / 128, nt = (n + 127) / 128;
    const u128v bytes = l * (m + n) * k / 2 + l * (m + n) * kb + l * (mt + nt) * kt * 512 + l * m * n * 2;
    if (bytes > static_cast<u128v>(kMaxCaseBytes)) {
      int line = 0;
      for (const char* key : {"m", "n", "k", "l"}) {
        if (const Entry* e = find(key)) line = std::max(line, e->line);
      }
      fail(line, "shape m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" +
                     std::to_string(p.k) + " l=" + std::to_string(p.l) + " needs " +
                     (bytes >> 62 ? std::string("more than 2^62") : std::to_string(static_cast<uint64_t>(bytes))) +
                     " bytes of tensors (a, b, both scale layouts, c); the limit is " +
                     std::to_string(kMaxCaseBytes) + " bytes");
    }
  }

  void parse_options(Problem& p) {
    if (const Entry* e = find("sf_layout")) {
      if (e->value == "linear") {
        p.sf_layout = SfLayout::linear;
      } else if (e->value == "permuted") {
        p.sf_layout = SfLayout::permuted;
      } else {
        fail(e->line, "sf_layout: " + quoted(e->value) + " is neither 'linear' nor 'permuted'");
      }
    }
    if (const Entry* e = find("scale_semantics")) {
      if (e->value == "ue4m3") {
        p.semantics = ScaleSemantics::ue4m3;
      } else if (e->value == "e4m3") {
        p.semantics = ScaleSemantics::e4m3;
      } else {
        fail(e->line, "scale_semantics: " + quoted(e->value) + " is neither 'ue4m3' nor 'e4m3'");
      }
    }
    if (const Entry* e = find("alpha")) p.alpha = parse_alpha(*e);
    if (const Entry* e = find("seed")) p.seed = parse_uint(*e, "seed");
    if (const Entry* e = find("generator")) {
      if (e->value.empty()) fail(e->line, "generator: missing value");
      for (const char c : e->value) {
        if (is_space(c)) fail(e->line, "generator: " + quoted(e->value) + " contains a space");
      }
      if (!p.seed) fail(e->line, "generator given without seed (a generator needs a seed)");
      p.generator = e->value;
    }
    // Read as it will be written (control characters and tabs as spaces), so that
    // parse -> write -> parse is the identity whatever bytes a note holds.
    if (const Entry* e = find("note")) p.note = sanitize_note(e->value);
  }

  // Decimal or C99 hex float, rounded once to the nearest FP32 (strtof, not strtod then a cast,
  // which could round twice). Infinite, NaN and out-of-range values are rejected.
  float parse_alpha(const Entry& e) const {
    const std::string& v = e.value;
    if (v.empty()) fail(e.line, "alpha: missing value");
    // strtof also reads "inf", "nan" and "infinity"; letters other than hex digits, x, p and e
    // never belong to a finite number, so reject them early with a clear message.
    for (const char c : v) {
      const bool allowed = hex_digit(c) >= 0 || c == 'x' || c == 'X' || c == 'p' || c == 'P' ||
                           c == '.' || c == '+' || c == '-';
      if (!allowed) fail(e.line, "alpha: " + quoted(v) + " is not a finite decimal or hex float");
    }
    errno = 0;
    char* end = nullptr;
    const float f = std::strtof(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0') {
      fail(e.line, "alpha: " + quoted(v) + " is not a number (trailing characters)");
    }
    if (!std::isfinite(f)) fail(e.line, "alpha: " + quoted(v) + " is out of FP32 range");
    // A non-zero literal that rounds to 0 is almost surely a typo; one that rounds to an FP32
    // subnormal is kept (that rounding is exact to the nearest, as strtof promises).
    if (f == 0.0f && errno == ERANGE) fail(e.line, "alpha: " + quoted(v) + " underflows to 0 in FP32");
    return f;
  }

  // Hex bytes, whitespace allowed between bytes (not inside one), exactly `expected` of them.
  std::vector<uint8_t> parse_bytes(const Entry& e, const char* key, int64_t expected,
                                   const std::string& formula) const {
    std::vector<uint8_t> out;
    out.reserve(static_cast<size_t>(expected));
    const std::string& v = e.value;
    for (size_t i = 0; i < v.size();) {
      if (is_space(v[i])) {
        ++i;
        continue;
      }
      const int hi = hex_digit(v[i]);
      const int lo = i + 1 < v.size() ? hex_digit(v[i + 1]) : -1;
      if (hi < 0 || lo < 0) {
        fail(e.line, std::string(key) + ": byte " + std::to_string(out.size()) + " " +
                         quoted(v.substr(i, 2)) + " is not two hex digits");
      }
      if (static_cast<int64_t>(out.size()) == expected) {
        fail(e.line, std::string(key) + ": more than " + std::to_string(expected) +
                         " bytes, expected exactly " + formula + " = " + std::to_string(expected));
      }
      out.push_back(static_cast<uint8_t>(hi * 16 + lo));
      i += 2;
    }
    if (static_cast<int64_t>(out.size()) != expected) {
      fail(e.line, std::string(key) + ": " + std::to_string(out.size()) + " bytes, expected " +
                       formula + " = " + std::to_string(expected));
    }
    return out;
  }

  // FP16 words: exactly four hex digits each, separated by whitespace.
  std::vector<uint16_t> parse_words(const Entry& e, int64_t expected) const {
    std::vector<uint16_t> out;
    out.reserve(static_cast<size_t>(expected));
    const std::string& v = e.value;
    for (size_t i = 0; i < v.size();) {
      if (is_space(v[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < v.size() && !is_space(v[j])) ++j;
      const std::string word = v.substr(i, j - i);
      int value = 0;
      bool ok = word.size() == 4;
      for (size_t d = 0; ok && d < 4; ++d) {
        const int h = hex_digit(word[d]);
        ok = h >= 0;
        value = value * 16 + h;
      }
      if (!ok) {
        fail(e.line, "expect: word " + std::to_string(out.size()) + " " + quoted(word) +
                         " is not four hex digits (an FP16 bit pattern)");
      }
      if (static_cast<int64_t>(out.size()) == expected) {
        fail(e.line, "expect: more than " + std::to_string(expected) +
                         " words, expected exactly l*m*n = " + std::to_string(expected));
      }
      out.push_back(static_cast<uint16_t>(value));
      i = j;
    }
    if (static_cast<int64_t>(out.size()) != expected) {
      fail(e.line, "expect: " + std::to_string(out.size()) + " words, expected l*m*n = " +
                       std::to_string(expected));
    }
    return out;
  }

  void parse_data(Problem& p) {
    const char* tensors[] = {"a", "b", "sfa", "sfb"};
    std::string given, missing;
    for (const char* t : tensors) {
      std::string& list = find(t) ? given : missing;
      list += std::string(list.empty() ? "" : ", ") + t;
    }
    if (!given.empty() && !missing.empty()) {
      fail_missing("data given for " + given + " but not for " + missing +
                   " (give all four tensors, or none and a seed)");
    }
    if (given.empty()) {
      if (!p.seed) fail_missing("no data: give a, b, sfa and sfb, or a seed to generate them from");
    } else {
      p.a = parse_bytes(*find("a"), "a", p.a_bytes(), "l*m*k/2");
      p.b = parse_bytes(*find("b"), "b", p.b_bytes(), "l*n*k/2");
      p.sfa = parse_bytes(*find("sfa"), "sfa", p.sfa_bytes(), "l*m*ceil(k/16)");
      p.sfb = parse_bytes(*find("sfb"), "sfb", p.sfb_bytes(), "l*n*ceil(k/16)");
    }
    if (const Entry* e = find("expect")) p.expect = parse_words(*e, p.c_elems());
  }

  const std::string& text_;
  const std::string& file_;
  std::map<std::string, Entry> entries_;
  int last_line_ = 0;
};

void append_hex(std::string& out, const std::vector<uint8_t>& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  out.reserve(out.size() + bytes.size() * 2 + 1);
  for (const uint8_t b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 0xF];
  }
}

// The shortest %.Ng that reads back (strtof) to the same float; %.9g always does.
std::string format_alpha(float alpha) {
  char buf[48];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(alpha));
    const float back = std::strtof(buf, nullptr);
    if (std::memcmp(&back, &alpha, sizeof back) == 0) break;
  }
  return buf;
}

}  // namespace

std::string sanitize_note(const std::string& note) {
  std::string out;
  out.reserve(note.size());
  for (const char c : note) {
    const unsigned char u = static_cast<unsigned char>(c);
    // '#' would start a comment, a newline would end the value, NUL is not text.
    out += (c == '#' || u < 0x20 || u == 0x7F) ? ' ' : c;
  }
  // The parser trims values, so the written note carries no edge spaces either.
  return trim(out, 0, out.size());
}

Problem parse_case(const std::string& text, const std::string& filename) {
  return CaseParser(text, filename).parse();
}

Problem read_case_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw CaseError(path + ":0: is a directory, not a case file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CaseError(path + ":0: cannot open: " + std::strerror(errno));
  // Read in chunks rather than by the size tellg() gives: a pipe (/dev/stdin) has none.
  // Twice the tensor cap (hex) plus the expected output's words and room for comments.
  constexpr size_t kMaxFileBytes = size_t(4) * kMaxCaseBytes;
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes)
      throw CaseError(path + ":0: file is larger than " + std::to_string(kMaxFileBytes) +
                      " bytes, the limit of case files");
  }
  if (in.bad()) throw CaseError(path + ":0: cannot read: " + std::strerror(errno));
  return parse_case(text, path);
}

std::string write_case(const Problem& p) {
  const auto invalid = [](const std::string& what) { throw std::invalid_argument("write_case: " + what); };
  if (p.m < 1 || p.n < 1 || p.l < 1 || p.k < 2 || p.k % 2 != 0) invalid("bad shape");
  if (p.op == Op::gemv && p.n != 1) invalid("n must be 1 for gemv");
  if (!std::isfinite(p.alpha)) invalid("alpha is not finite");
  const bool any_data = !p.a.empty() || !p.b.empty() || !p.sfa.empty() || !p.sfb.empty();
  if (any_data && (static_cast<int64_t>(p.a.size()) != p.a_bytes() ||
                   static_cast<int64_t>(p.b.size()) != p.b_bytes() ||
                   static_cast<int64_t>(p.sfa.size()) != p.sfa_bytes() ||
                   static_cast<int64_t>(p.sfb.size()) != p.sfb_bytes())) {
    invalid("data lengths do not match the shape");
  }
  if (!any_data && !p.seed) invalid("neither data nor a seed");
  if (!p.generator.empty() && !p.seed) invalid("a generator needs a seed");
  for (const char c : p.generator) {
    if (is_space(c) || c == '#' || c == '\n') invalid("generator name contains a space or '#'");
  }
  if (p.expect && static_cast<int64_t>(p.expect->size()) != p.c_elems()) invalid("expect has the wrong length");

  std::string out = "# nvfp4check case v1\n";
  out += std::string("op = ") + (p.op == Op::gemv ? "gemv" : "gemm") + "\n";
  out += "m = " + std::to_string(p.m) + "\n";
  out += "n = " + std::to_string(p.n) + "\n";
  out += "k = " + std::to_string(p.k) + "\n";
  out += "l = " + std::to_string(p.l) + "\n";
  out += std::string("sf_layout = ") + (p.sf_layout == SfLayout::linear ? "linear" : "permuted") + "\n";
  out += std::string("scale_semantics = ") + (p.semantics == ScaleSemantics::e4m3 ? "e4m3" : "ue4m3") + "\n";
  out += "alpha = " + format_alpha(p.alpha) + "\n";
  if (p.seed) out += "seed = " + std::to_string(*p.seed) + "\n";
  if (!p.generator.empty()) out += "generator = " + p.generator + "\n";
  const std::string note = sanitize_note(p.note);
  if (!note.empty()) out += "note = " + note + "\n";
  if (any_data) {
    const std::pair<const char*, const std::vector<uint8_t>*> tensors[] = {
        {"a", &p.a}, {"b", &p.b}, {"sfa", &p.sfa}, {"sfb", &p.sfb}};
    for (const auto& [key, bytes] : tensors) {
      out += std::string(key) + " = ";
      append_hex(out, *bytes);
      out += "\n";
    }
  }
  if (p.expect) {
    out += "expect =";
    out.reserve(out.size() + p.expect->size() * 5 + 1);
    char word[8];
    for (const uint16_t w : *p.expect) {
      std::snprintf(word, sizeof word, " %04x", w);
      out += word;
    }
    out += "\n";
  }
  return out;
}

void write_case_file(const Problem& p, const std::string& path) { write_case_text(write_case(p), path); }

void write_case_text(const std::string& text, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write case file " + path + ": " + std::strerror(errno));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw std::runtime_error("error writing case file " + path + ": " + std::strerror(errno));
}

}  // namespace nvfp4
