// Case files (SPEC.md section 4): a strict `key = value` parser that names the file and line of
// every problem it finds, and a writer whose output the parser reads back to the same Problem.
#include "reference/case_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "reference/block_scaled_output.h"
#include "reference/case_keys.h"

namespace nvfp4 {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

namespace case_text {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

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

// Decimal or C99 hex float, rounded once to the nearest FP32 (strtof, not strtod then a cast,
// which could round twice). Infinite, NaN and out-of-range values are rejected: throws
// std::invalid_argument "KEY: what is wrong".
float fp32_from_text(const std::string& v, const std::string& key) {
  const auto fail = [&](const std::string& what) { throw std::invalid_argument(key + ": " + what); };
  if (v.empty()) fail("missing value");
  // strtof also reads "inf", "nan" and "infinity"; letters other than hex digits, x, p and e
  // never belong to a finite number, so reject them early with a clear message.
  for (const char c : v) {
    const bool allowed = hex_digit(c) >= 0 || c == 'x' || c == 'X' || c == 'p' || c == 'P' ||
                         c == '.' || c == '+' || c == '-';
    if (!allowed) fail(quoted(v) + " is not a finite decimal or hex float");
  }
  errno = 0;
  char* end = nullptr;
  const float f = std::strtof(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0') fail(quoted(v) + " is not a number (trailing characters)");
  if (!std::isfinite(f)) fail(quoted(v) + " is out of FP32 range");
  // A non-zero literal that rounds to 0 is almost surely a typo; one that rounds to an FP32
  // subnormal is kept (that rounding is exact to the nearest, as strtof promises).
  if (f == 0.0f && errno == ERANGE) fail(quoted(v) + " underflows to 0 in FP32");
  return f;
}

uint64_t uint_from_text(const std::string& v, const std::string& key) {
  if (v.empty()) throw std::invalid_argument(key + ": missing value");
  uint64_t out = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') throw std::invalid_argument(key + ": " + quoted(v) + " is not a decimal integer");
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (out > (std::numeric_limits<uint64_t>::max() - d) / 10) throw std::invalid_argument(key + ": " + quoted(v) + " is too large");
    out = out * 10 + d;
  }
  return out;
}

bool bool_from_text(const std::string& v, const std::string& key) {
  if (v != "true" && v != "false") throw std::invalid_argument(key + ": " + quoted(v) + " is neither 'true' nor 'false'");
  return v == "true";
}

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

// " " and the word in hex as word_hex writes it (`digits` digits, zero-padded, more where the
// word needs them), without a string per word (a huge case's X has 2^31 of them).
void append_word(std::string& out, uint32_t w, int digits) {
  static const char kDigits[] = "0123456789abcdef";
  // %04x of a word past 16 bits: as many digits as it has.
  while (digits < 8 && (w >> (4 * digits)) != 0) ++digits;
  out += ' ';
  for (int d = digits - 1; d >= 0; --d) out += kDigits[(w >> (4 * d)) & 0xF];
}

void append_words(std::string& out, const char* key, OutType type, const std::vector<uint32_t>& words) {
  out += key;
  out += " =";
  const int digits = out_word_bytes(type) == 4 ? 8 : 4;
  out.reserve(out.size() + words.size() * static_cast<size_t>(digits + 1) + 1);
  for (const uint32_t w : words) append_word(out, w, digits);
  out += "\n";
}

void append_tensor(std::string& out, const std::string& key, const std::vector<uint8_t>& bytes) {
  out += key + " = ";
  append_hex(out, bytes);
  out += "\n";
}

}  // namespace case_text

using namespace case_text;

namespace {

// "a, b and c".
std::string and_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

// The ops that declare a tensor of this name in op_table.h, as "gemv_bias" or "a or b" ("" for
// none): such a key is known, and belongs to those ops.
std::string ops_declaring(const std::string& key) {
  std::string ops;
  for (const OpInfo& o : kOpTable)
    for (const TensorDecl& d : o.tensors)
      if (key == d.name) ops += std::string(ops.empty() ? "" : " or ") + o.name;
  return ops;
}

// "a.12" -> ("a", 12) for the per-group keys; the index is canonical decimal (no leading zeros).
bool split_group_key(const std::string& key, std::string* base, uint64_t* index) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos || dot + 1 >= key.size()) return false;
  const std::string b = key.substr(0, dot), digits = key.substr(dot + 1);
  if (!find_group_case_key(b) || digits.size() > 8 || (digits.size() > 1 && digits[0] == '0')) return false;
  uint64_t v = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *base = b;
  *index = v;
  return true;
}

std::string trim(const std::string& s, size_t begin, size_t end) {
  while (begin < end && is_space(s[begin])) ++begin;
  while (end > begin && is_space(s[end - 1])) --end;
  return s.substr(begin, end - begin);
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

  // The op first (it selects the keys), then the keys phase by phase (KeyPhase, case_keys.h): a
  // phase's required keys, its rows' values, and what its keys must satisfy together.
  Problem parse() {
    check_encoding();
    split_entries();
    Problem p;
    parse_op(p);
    check_keys_for_op(p.op);
    read_phase(p, KeyPhase::out_type);
    out_bytes_ = static_cast<unsigned>(out_word_bytes(p.out_type));
    read_phase(p, KeyPhase::formats);
    if (op_quantizes(p.op)) check_quantize_options(p);
    if (op_is_grouped(p.op)) {
      parse_groups(p);
    } else {
      parse_shape(p);
    }
    read_phase(p, KeyPhase::options);
    if (op_is_grouped(p.op)) {
      parse_group_data(p);
    } else if (op_quantizes(p.op)) {
      parse_quantize_data(p);
    } else {
      parse_data(p);
    }
    parse_block_scaled_output(p);
    parse_tensors(p);
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
    std::string base;
    uint64_t index = 0;
    if (ops_declaring(key).empty() && !find_case_key(key) && !split_group_key(key, &base, &index)) {
      std::string list, group_list;
      for (const CaseKey& k : case_keys()) {
        std::string& to = k.per_group() ? group_list : list;
        to += std::string(to.empty() ? "" : ", ") + k.name + (k.per_group() ? ".G" : "");
      }
      std::set<std::string> declared;  // a tensor several ops declare is one key
      for (const OpInfo& o : kOpTable)
        for (const TensorDecl& d : o.tensors)
          if (declared.insert(d.name).second) list += std::string(", ") + d.name;
      fail(line, "unknown key " + quoted(key) + " (known keys: " + list + ", and per group " + group_list + ")");
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
    try {
      return uint_from_text(e.value, key);
    } catch (const std::invalid_argument& error) {
      fail(e.line, error.what());
    }
  }

  // The phase's required keys of p's op: the first one missing (in case_keys()'s order) fails.
  void require_keys(const Problem& p, KeyPhase phase) const {
    for (const CaseKey& k : case_keys()) {
      if (k.phase != phase || !(k.required_ops & op_bit(p.op)) || find(k.name)) continue;
      std::string hint;
      if (k.missing_hint && *k.missing_hint) hint = std::string(" (") + k.missing_hint + ")";
      if (k.missing_hint && !*k.missing_hint) hint = std::string(" (required for ") + to_string(p.op) + ")";
      fail_missing(std::string("missing required key '") + k.name + "'" + hint);
    }
  }

  // The values of the phase's keys that the file gives and that a row reads by itself.
  void read_keys(Problem& p, KeyPhase phase) const {
    const bool out_nvfp4 = has_block_scaled_output(p);
    for (const CaseKey& k : case_keys()) {
      if (k.phase != phase || !k.read || k.per_group() || !key_taken(k, p.op, out_nvfp4)) continue;
      const Entry* e = find(k.name);
      if (!e) continue;
      try {
        k.read(p, e->value);
      } catch (const std::invalid_argument& error) {
        fail(e->line, error.what());
      }
    }
  }

  void read_phase(Problem& p, KeyPhase phase) const {
    require_keys(p, phase);
    read_keys(p, phase);
  }

  int64_t parse_dim(const char* key, uint64_t least = 1) const {
    const Entry* e = find(key);
    const uint64_t v = parse_uint(*e, key);
    if (v < least) fail(e->line, std::string(key) + " must be at least " + std::to_string(least) + ", got " + e->value);
    // Far above the size cap; keeps the products below in range of 128 bits.
    if (v > (uint64_t(1) << 40)) fail(e->line, std::string(key) + " = " + e->value + " is too large");
    return static_cast<int64_t>(v);
  }

  void parse_op(Problem& p) {
    const Entry* op = find("op");
    if (!op) fail_missing("missing required key 'op' (" + op_name_list("or") + ")");
    if (!nvfp4::parse_op(op->value, &p.op)) {
      std::string names;
      for (const OpInfo& o : kOpTable) names += std::string(names.empty() ? "'" : ", '") + o.name + "'";
      fail(op->line, "op: " + quoted(op->value) + " is not one of " + names);
    }
  }

  // Keys that belong to other ops are errors, not ignored: a grouped case given `m` most likely
  // meant something the file does not say. Which op takes which key is case_keys()'s.
  void check_keys_for_op(Op op) const {
    const Entry* out_type = find("out_type");
    const bool out_nvfp4 = (kGemmFamilyOps & op_bit(op)) && out_type && out_type->value == "nvfp4";
    // Entries in line order, so that the first wrong key of the file is the one named.
    std::vector<std::pair<int, std::string>> by_line;
    for (const auto& [key, entry] : entries_) by_line.emplace_back(entry.line, key);
    std::sort(by_line.begin(), by_line.end());
    for (const auto& [line, key] : by_line) {
      // A declared tensor's key belongs to the ops that declare it (op_table.h).
      if (const std::string ops = ops_declaring(key); !ops.empty()) {
        bool mine = false;
        for (const TensorDecl& d : op_tensors(op)) mine = mine || key == d.name;
        if (!mine) fail(line, "key '" + key + "' is only for op = " + ops);
        continue;
      }
      std::string base;
      uint64_t index = 0;
      const CaseKey& k = split_group_key(key, &base, &index) ? *find_group_case_key(base) : *find_case_key(key);
      // A key that only a block-scaled output has (out_recipe, out_global_scale).
      if (!k.ops && !key_taken(k, op, out_nvfp4)) fail(line, "key '" + key + "' is only for out_type = nvfp4");
      if (out_nvfp4 && k.not_with_out_nvfp4)
        fail(line, "out_type = nvfp4 records its expected output as expect_q and expect_sfq, not " + key);
      if (key_taken(k, op, out_nvfp4)) continue;
      // A quantizer is no GEMM: a GEMM's key means the file names the wrong op.
      if (kQuantizerOps & op_bit(op)) {
        std::vector<std::string> data;
        for (const CaseKey& d : case_keys())
          if (d.kind != KeyKind::setting && key_taken(d, op, false)) data.push_back(d.name);
        fail(line, "key '" + key + "' is not used by op = " + to_string(op) + " (it has " + and_list(data) + ")");
      }
      if ((kGroupedOps & op_bit(op)) && k.grouped_instead) {
        const std::string instead = *k.grouped_instead ? k.grouped_instead : key + ".G for group G";
        fail(line, "key '" + key + "' is not used by op = " + to_string(op) + " (give " + instead + ")");
      }
      std::string ops;
      for (const OpInfo& o : kOpTable)
        if (k.ops & op_bit(o.op)) ops += std::string(ops.empty() ? "" : " or ") + o.name;
      fail(line, "key '" + key + "' is only for op = " + ops);
    }
  }

  void parse_shape(Problem& p) {
    require_keys(p, KeyPhase::shape);
    p.m = parse_dim("m");
    // k is even and at least 2, but 1 and odd are fine where no operand packs E2M1 nibbles.
    const bool any_nibbles = op_quantizes(p.op) ? packs_nibbles(p.q_format)
                                                  : packs_nibbles(p.a_format) || packs_nibbles(p.b_format);
    p.k = parse_dim("k", any_nibbles ? 2 : 1);
    p.l = parse_dim("l");
    p.n = find("n") ? parse_dim("n") : 1;
    if (!op_has_n(p.op) && p.n != 1)
      fail(find("n")->line, std::string("n must be 1 for ") + to_string(p.op) + ", got " + find("n")->value);
    if (any_nibbles && p.k % 2 != 0) fail(find("k")->line, "k must be even (two E2M1 values per byte), got " + find("k")->value);
    if (op_quantizes(p.op)) return check_quantize_size(p);

    // Cap the buffers a case needs (SPEC section 2: a, b, both scale layouts, c) so that a typo
    // or a hostile file cannot make the reference or the harness allocate without bound.
    using u128v = unsigned __int128;
    const u128v m = p.m, n = p.n, k = p.k, l = p.l, kb = (p.k + 15) / 16;
    const u128v kt = (kb + 3) / 4, mt = (m + 127) / 128, nt = (n + 127) / 128;
    const u128v bs = op_is_dual(p.op) ? 2 : 1;  // dual GEMM has two B
    const u128v row = p.mx_operands() ? k : k / 2;  // an E4M3/E5M2 operand takes a byte per element
    const u128v bytes = l * (m + bs * n) * row + l * (m + bs * n) * kb + l * (mt + bs * nt) * kt * 512 +
                        l * m * n * out_bytes_;
    if (bytes > static_cast<u128v>(kMaxCaseBytes)) {
      int line = 0;
      for (const char* key : {"m", "n", "k", "l"}) {
        if (const Entry* e = find(key)) line = std::max(line, e->line);
      }
      fail(line, "shape m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" +
                     std::to_string(p.k) + " l=" + std::to_string(p.l) + " needs " +
                     (bytes >> 62 ? std::string("more than 2^62") : std::to_string(static_cast<uint64_t>(bytes))) +
                     " bytes of tensors (a, b, both scale layouts, c" + (op_is_dual(p.op) ? ", b2, sfb2" : "") +
                     "); the limit is " +
                     std::to_string(kMaxCaseBytes) + " bytes");
    }
  }

  // The cap of parse_shape for a quantize case: X, Q, and SFQ in both layouts.
  void check_quantize_size(const Problem& p) const {
    using u128v = unsigned __int128;
    const u128v m = p.m, k = p.k, l = p.l, kb = static_cast<u128v>(p.qkb()), kt = (kb + 3) / 4, mt = (m + 127) / 128;
    const u128v q = packs_nibbles(p.q_format) ? l * m * k / 2 : l * m * k;
    const u128v bytes = l * m * k * static_cast<u128v>(in_word_bytes(p.in_type)) + q + l * m * kb + l * mt * kt * 512;
    if (bytes <= static_cast<u128v>(kMaxQuantizeCaseBytes)) return;
    int line = 0;
    for (const char* key : {"m", "n", "k", "l"}) {
      if (const Entry* e = find(key)) line = std::max(line, e->line);
    }
    fail(line, "shape m=" + std::to_string(p.m) + " k=" + std::to_string(p.k) + " l=" + std::to_string(p.l) + " needs " +
                   (bytes >> 62 ? std::string("more than 2^62") : std::to_string(static_cast<uint64_t>(bytes))) +
                   " bytes of tensors (x, q, both scale layouts); the limit is " + std::to_string(kMaxQuantizeCaseBytes) +
                   " bytes");
  }

  // What a quantizer's format, recipe and options must satisfy together (SPEC section 2).
  void check_quantize_options(const Problem& p) const {
    const Entry* fo = find("format");
    const Entry* re = find("recipe");
    if (!recipe_fits(p.recipe, p.q_format))
      fail(re->line, "recipe " + re->value + " does not quantize to " + fo->value +
                         " (te, ref, fast and torchao make nvfp4; mx_rceil, mx_floor and mx_even the MX formats)");
    const Entry* option = find("quant_2d") ? find("quant_2d") : find("row_global_scale");
    if (p.q_format != BlockFormat::nvfp4 && (p.quant_2d || p.row_global_scale))
      fail(option->line, "16 x 16 tiles and per-row global scales are NVFP4's (the MX recipes have no global scale)");
    if (p.quant_2d && p.row_global_scale)
      fail(find("row_global_scale")->line, "16 x 16 tiles span 16 rows: they cannot have one global scale per row");
  }

  // x (words of in_type), or a seed to draw it from; expect_q and expect_sfq (hex bytes, SFQ linear).
  void parse_quantize_data(Problem& p) {
    const unsigned saved = out_bytes_;
    out_bytes_ = static_cast<unsigned>(in_word_bytes(p.in_type));
    if (const Entry* e = find("x")) {
      const std::vector<uint32_t> words = parse_words(*e, "x", p.l * p.m * p.k, "l*m*k");
      p.x.reserve(words.size() * out_bytes_);
      for (const uint32_t w : words)
        for (unsigned b = 0; b < out_bytes_; ++b) p.x.push_back(static_cast<uint8_t>(w >> (8 * b)));
    } else if (!p.seed) {
      fail_missing("no data: give x (l*m*k words of in_type), or a seed to generate it from");
    }
    out_bytes_ = saved;
    const char* q_formula = packs_nibbles(p.q_format) ? "l*m*k/2" : "l*m*k";
    const char* sfq_formula = p.q_format == BlockFormat::nvfp4 ? "l*m*ceil(k/16)" : "l*m*ceil(k/32)";
    if (const Entry* e = find("expect_q")) p.expect_q = parse_bytes(*e, "expect_q", p.q_bytes(), q_formula);
    if (const Entry* e = find("expect_sfq")) p.expect_sfq = parse_bytes(*e, "expect_sfq", p.sfq_bytes(), sfq_formula);
  }

  // out_type nvfp4: out_recipe and out_global_scale (required; one value, or one per group), then
  // expect_q and expect_sfq (hex bytes, SFQ linear, the groups' one after another).
  void parse_block_scaled_output(Problem& p) {
    if (!has_block_scaled_output(p)) return;
    read_phase(p, KeyPhase::block_scaled);
    const Entry* gs = find("out_global_scale");
    std::istringstream in(gs->value);
    std::vector<std::string> items;
    for (std::string item; in >> item;) items.push_back(item);
    if (items.size() != 1) items = parse_list(*gs, "out_global_scale", p.groups.size(), false);
    for (const std::string& v : items) p.out_global_scale.push_back(parse_alpha_text(v, gs->line, "out_global_scale"));
    const std::string error = block_scaled_output_error(p);
    if (!error.empty()) fail(std::max(gs->line, find("out_type")->line), error);
    if (const Entry* e = find("expect_q")) p.expect_q = parse_bytes(*e, "expect_q", out_q_bytes(p), "l*m*n/2");
    if (const Entry* e = find("expect_sfq")) p.expect_sfq = parse_bytes(*e, "expect_sfq", out_sfq_bytes(p), "l*m*ceil(n/16)");
  }

  float parse_alpha_text(const std::string& v, int line, const std::string& key) const {
    try {
      return fp32_from_text(v, key);
    } catch (const std::invalid_argument& e) {
      fail(line, e.what());
    }
  }

  // Hex bytes, whitespace allowed between bytes (not inside one), exactly `expected` of them.
  std::vector<uint8_t> parse_bytes(const Entry& e, const std::string& key, int64_t expected,
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
        fail(e.line, key + ": byte " + std::to_string(out.size()) + " " +
                         quoted(v.substr(i, 2)) + " is not two hex digits");
      }
      if (static_cast<int64_t>(out.size()) == expected) {
        fail(e.line, key + ": more than " + std::to_string(expected) +
                         " bytes, expected exactly " + formula + " = " + std::to_string(expected));
      }
      out.push_back(static_cast<uint8_t>(hi * 16 + lo));
      i += 2;
    }
    if (static_cast<int64_t>(out.size()) != expected) {
      fail(e.line, key + ": " + std::to_string(out.size()) + " bytes, expected " +
                       formula + " = " + std::to_string(expected));
    }
    return out;
  }

  // Output words: exactly four hex digits each (fp16, bf16) or eight (fp32), separated by
  // whitespace. `formula` names the count in messages.
  std::vector<uint32_t> parse_words(const Entry& e, const std::string& key, int64_t expected,
                                    const std::string& formula) const {
    const size_t digits = out_bytes_ * 2;
    const char* what = out_bytes_ == 4 ? "eight hex digits (an FP32 bit pattern)" : "four hex digits (a 16-bit pattern)";
    std::vector<uint32_t> out;
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
      uint32_t value = 0;
      bool ok = word.size() == digits;
      for (size_t d = 0; ok && d < digits; ++d) {
        const int h = hex_digit(word[d]);
        ok = h >= 0;
        value = value * 16 + static_cast<uint32_t>(h);
      }
      if (!ok) {
        fail(e.line, key + ": word " + std::to_string(out.size()) + " " + quoted(word) + " is not " + what);
      }
      if (static_cast<int64_t>(out.size()) == expected) {
        fail(e.line, key + ": more than " + std::to_string(expected) + " words, expected exactly " + formula +
                         " = " + std::to_string(expected));
      }
      out.push_back(value);
      i = j;
    }
    if (static_cast<int64_t>(out.size()) != expected) {
      fail(e.line, key + ": " + std::to_string(out.size()) + " words, expected " + formula + " = " +
                       std::to_string(expected));
    }
    return out;
  }

  // A space-separated list of `count` values, or one value for all when `one_for_all`.
  std::vector<std::string> parse_list(const Entry& e, const std::string& key, size_t count, bool one_for_all) const {
    std::vector<std::string> items;
    std::istringstream in(e.value);
    for (std::string item; in >> item;) items.push_back(item);
    if (items.empty()) fail(e.line, key + ": missing value");
    if (one_for_all && items.size() == 1) return std::vector<std::string>(count, items[0]);
    if (items.size() != count) {
      fail(e.line, key + ": " + std::to_string(items.size()) + " values for " + std::to_string(count) + " groups" +
                       (one_for_all ? " (give one value for all groups, or one per group)" : " (one per group)"));
    }
    return items;
  }

  int64_t parse_group_dim(const std::string& text, int line, const std::string& key, size_t g, uint64_t least) const {
    const Entry item{text, line};
    const std::string what = key + " of group " + std::to_string(g);
    const uint64_t v = parse_uint(item, what.c_str());
    if (v < least) fail(line, what + " must be at least " + std::to_string(least) + ", got " + text);
    if (v > (uint64_t(1) << 40)) fail(line, what + " = " + text + " is too large");
    return static_cast<int64_t>(v);
  }

  void parse_groups(Problem& p) {
    require_keys(p, KeyPhase::shape);
    const Entry* count_entry = find("groups");
    const uint64_t count = parse_uint(*count_entry, "groups");
    if (count < 1) fail(count_entry->line, "groups must be at least 1, got " + count_entry->value);
    if (count > static_cast<uint64_t>(kMaxGroups))
      fail(count_entry->line, "groups = " + count_entry->value + " is more than " + std::to_string(kMaxGroups));
    const size_t G = static_cast<size_t>(count);
    const Entry *em = find("group_m"), *en = find("group_n"), *ek = find("group_k");
    const std::vector<std::string> ms = parse_list(*em, "group_m", G, false);
    const std::vector<std::string> ns = parse_list(*en, "group_n", G, true);
    const std::vector<std::string> ks = parse_list(*ek, "group_k", G, true);
    std::vector<std::string> alphas(G, "1");
    const Entry* ea = find("group_alpha");
    if (ea) alphas = parse_list(*ea, "group_alpha", G, true);
    read_keys(p, KeyPhase::shape);  // packed
    p.groups.resize(G);
    // An E2M1 operand packs two elements per byte: k even; MXFP8 operands alone allow any k >= 1.
    const bool any_nibbles = packs_nibbles(p.a_format) || packs_nibbles(p.b_format);
    using u128v = unsigned __int128;
    u128v bytes = 0;
    for (size_t g = 0; g < G; ++g) {
      Group& q = p.groups[g];
      q.m = parse_group_dim(ms[g], em->line, "group_m", g, 0);
      q.n = parse_group_dim(ns[g], en->line, "group_n", g, 1);
      q.k = parse_group_dim(ks[g], ek->line, "group_k", g, any_nibbles ? 2 : 1);
      if (any_nibbles && q.k % 2 != 0)
        fail(ek->line, "group_k of group " + std::to_string(g) + " must be even (two E2M1 values per byte), got " + ks[g]);
      if (ea) q.alpha = parse_alpha_text(alphas[g], ea->line, "group_alpha of group " + std::to_string(g));
      if (p.packed && (q.n != p.groups[0].n || q.k != p.groups[0].k)) {
        const Entry* at = q.n != p.groups[0].n ? en : ek;
        fail(at->line, "packed = true needs one n and one k for all groups; group " + std::to_string(g) + " has n = " +
                           std::to_string(q.n) + ", k = " + std::to_string(q.k) + ", group 0 n = " +
                           std::to_string(p.groups[0].n) + ", k = " + std::to_string(p.groups[0].k));
      }
      // The same cap as for one GEMM, over the groups together.
      const u128v m = q.m, n = q.n, k = q.k, kb = (q.k + 15) / 16;
      const u128v kt = (kb + 3) / 4, mt = (m + 127) / 128, nt = (n + 127) / 128;
      const u128v row = p.mx_operands() ? k : k / 2;  // an E4M3/E5M2 operand takes a byte per element
      bytes += (m + n) * row + (m + n) * kb + (mt + nt) * kt * 512 + m * n * out_bytes_;
    }
    if (bytes > static_cast<u128v>(kMaxCaseBytes)) {
      const int line = std::max({em->line, en->line, ek->line});
      fail(line, "the " + std::to_string(G) + " groups need " +
                     (bytes >> 62 ? std::string("more than 2^62") : std::to_string(static_cast<uint64_t>(bytes))) +
                     " bytes of tensors (a, b, both scale layouts, c); the limit is " + std::to_string(kMaxCaseBytes) +
                     " bytes");
    }
    // Per-group keys must name a group that exists.
    for (const auto& [key, entry] : entries_) {
      std::string base;
      uint64_t index = 0;
      if (split_group_key(key, &base, &index) && index >= count)
        fail(entry.line, "key '" + key + "': there are only " + std::to_string(count) + " groups (0 to " +
                             std::to_string(count - 1) + ")");
    }
  }

  // The groups' operands and scales (case_keys()'s per-group byte tensors) and expect lines.
  void parse_group_data(Problem& p) {
    std::vector<const CaseKey*> keys, tensors;
    std::vector<std::string> names;
    for (const CaseKey& k : case_keys()) {
      if (!k.per_group() || !key_taken(k, p.op, false)) continue;
      keys.push_back(&k);
      if (k.group_bytes) tensors.push_back(&k), names.push_back(std::string(k.name) + ".G");
    }
    std::string given, missing;
    bool any_given = false;
    for (size_t g = 0; g < p.groups.size(); ++g) {
      Group& q = p.groups[g];
      const std::string gs = std::to_string(g);
      for (const CaseKey* k : keys) {
        const Entry* e = find((std::string(k->name) + "." + gs).c_str());
        if (q.m == 0 && e)
          fail(e->line, std::string(k->name) + "." + gs + ": group " + gs + " is empty (m = 0) and has no " + k->name);
      }
      if (q.m == 0) continue;
      for (const CaseKey* k : tensors) {
        const std::string key = std::string(k->name) + "." + gs;
        std::string& list = find(key.c_str()) ? given : missing;
        if (find(key.c_str())) any_given = true;
        if (list.size() < 200) list += std::string(list.empty() ? "" : ", ") + key;
      }
    }
    const std::string all = and_list(names) + " of every non-empty group";
    if (any_given && !missing.empty()) fail_missing("data given for " + given + " but not for " + missing + " (give " + all + ")");
    bool all_empty = true;
    for (const Group& q : p.groups) all_empty = all_empty && q.m == 0;
    if (!any_given && !all_empty && !p.seed) fail_missing("no data: give " + all + ", or a seed to generate them from");
    for (size_t g = 0; g < p.groups.size(); ++g) {
      Group& q = p.groups[g];
      if (q.m == 0) continue;
      const std::string gs = std::to_string(g);
      if (const Entry* e = find(("expect." + gs).c_str())) q.expect = parse_words(*e, "expect." + gs, q.c_elems(), "m_g*n_g");
      if (!any_given) continue;  // a seed-only case: the harness draws the data
      for (const CaseKey* k : tensors) {
        const BlockFormat f = k->side == 'a' ? p.a_format : p.b_format;
        const std::string key = std::string(k->name) + "." + gs;
        q.*(k->group_bytes) = parse_bytes(*find(key.c_str()), key, (q.*(k->group_length))(f),
                                          group_formula(k->side == 'a' ? "m_g" : "n_g", f, k->scales));
      }
    }
  }

  // A group's byte count as the error message states it: rows times a row of the format's
  // elements, or of its scale blocks.
  static std::string group_formula(const char* rows, BlockFormat f, bool scales) {
    if (scales) return std::string(rows) + (f == BlockFormat::nvfp4 ? "*ceil(k_g/16)" : "*ceil(k_g/32)");
    return std::string(rows) + (packs_nibbles(f) ? "*k_g/2" : "*k_g");
  }

  static std::string operand_formula(const char* rows, BlockFormat f) {
    return std::string(rows) + (packs_nibbles(f) ? "*k/2" : "*k");
  }
  static std::string scales_formula(const char* rows, BlockFormat f) {
    return std::string(rows) + (f == BlockFormat::nvfp4 ? "*ceil(k/16)" : "*ceil(k/32)");
  }

  // The operands and scales of a problem with one shape (case_keys()'s byte tensors of its op):
  // all of them, or none and a seed.
  void parse_data(Problem& p) {
    std::vector<const CaseKey*> tensors;
    for (const CaseKey& k : case_keys())
      if (k.bytes && key_taken(k, p.op, false)) tensors.push_back(&k);
    std::vector<std::string> names;
    std::string given, missing;
    for (const CaseKey* k : tensors) {
      names.push_back(k->name);
      std::string& list = find(k->name) ? given : missing;
      list += std::string(list.empty() ? "" : ", ") + k->name;
    }
    if (!given.empty() && !missing.empty()) {
      fail_missing("data given for " + given + " but not for " + missing + " (give all " + count_text(names.size()) +
                   " tensors, or none and a seed)");
    }
    if (given.empty()) {
      if (!p.seed) fail_missing("no data: give " + and_list(names) + ", or a seed to generate them from");
    } else {
      for (const CaseKey* k : tensors) {
        const BlockFormat f = k->side == 'a' ? p.a_format : p.b_format;
        const char* rows = k->side == 'a' ? "l*m" : "l*n";
        p.*(k->bytes) = parse_bytes(*find(k->name), k->name, (p.*(k->length))(),
                                    k->scales ? scales_formula(rows, f) : operand_formula(rows, f));
      }
    }
    if (const Entry* e = find("expect")) p.expect = parse_words(*e, "expect", p.c_elems(), "l*m*n");
  }

  // "four" for 4: counts of tensors in messages.
  static std::string count_text(size_t n) {
    static const char* const kWords[] = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
    return n < std::size(kWords) ? kWords[n] : std::to_string(n);
  }

  // The op's declared tensors (op_table.h): `name = v0 v1 ...` with as many values as its extent
  // gives (FP32: decimal or C99 hex floats, each rounded once, as alpha), all of them, or none
  // with a seed (drawn with the data).
  void parse_tensors(Problem& p) {
    std::string given, missing;
    for (const TensorDecl& d : op_tensors(p.op)) (find(d.name) ? given : missing) += std::string(" ") + d.name;
    if (given.empty() && (missing.empty() || p.seed)) return;
    if (!missing.empty())
      fail_missing("no data for" + missing + ": give" + missing + (given.empty() ? " or a seed to generate it from" : ""));
    for (const TensorDecl& d : op_tensors(p.op)) {
      const Entry& e = *find(d.name);
      try {
        p.tensors.push_back(parse_tensor_text(d, e.value, tensor_elements(p, d)));
      } catch (const std::invalid_argument& error) {
        fail(e.line, error.what());
      }
    }
  }

  const std::string& text_;
  const std::string& file_;
  std::map<std::string, Entry> entries_;
  int last_line_ = 0;
  unsigned out_bytes_ = 2;  // bytes per output word of the case's out_type
};

}  // namespace

std::string tensor_text(const NamedTensor& t) {
  std::string out;
  for (size_t i = 0; i + 4 <= t.bytes.size(); i += 4) {
    float f;
    std::memcpy(&f, t.bytes.data() + i, sizeof f);
    out += (out.empty() ? "" : " ") + format_alpha(f);
  }
  return out;
}

NamedTensor parse_tensor_text(const TensorDecl& d, const std::string& text, int64_t count) {
  std::istringstream in(text);
  NamedTensor t{d.name, {}};
  int64_t values = 0;
  for (std::string item; in >> item; ++values) {
    if (values == count)
      throw std::invalid_argument(std::string(d.name) + ": more than " + std::to_string(count) +
                                  " values, expected exactly " + tensor_extent_text(d.extent) + " = " +
                                  std::to_string(count));
    const float f = fp32_from_text(item, std::string(d.name) + " value " + std::to_string(values));
    const auto* b = reinterpret_cast<const uint8_t*>(&f);
    t.bytes.insert(t.bytes.end(), b, b + sizeof f);
  }
  if (values != count)
    throw std::invalid_argument(std::string(d.name) + ": " + std::to_string(values) + " values, expected " +
                                tensor_extent_text(d.extent) + " = " + std::to_string(count));
  return t;
}

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

namespace {

// A file descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_input_file(const std::string& path, const InputLimit& limit, bool text) {
  auto fail = [&](const std::string& why) -> CaseError { return CaseError(path + ":0: " + why); };
  // Non-blocking: opening a FIFO that has no writer must not hang the command. A pipe with a
  // writer (`<(...)`, a shell pipe) is read as it comes (poll below).
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) throw fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw fail(std::string("cannot read: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw fail("is a directory, not " + limit.kind);
  // Only a FIFO or socket waits for its writer: a terminal (or anything else) is read blocking.
  if (!S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode)) ::fcntl(f.fd, F_SETFL, ::fcntl(f.fd, F_GETFL) & ~O_NONBLOCK);
  const auto too_large = [&] {
    return fail("larger than " + std::to_string(limit.max_bytes) + " bytes, the limit of " + limit.kind + " (" +
                limit.why + ")");
  };
  // A regular file's size is known: one too large is refused before anything is read.
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit.max_bytes) throw too_large();
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  std::vector<char> chunk(size_t(1) << 20);
  int64_t lines_before = 0;  // newlines before out's end, for the line of a NUL byte
  for (;;) {
    const ssize_t n = ::read(f.fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{f.fd, POLLIN, 0};
      if (::poll(&p, 1, -1) < 0 && errno != EINTR) throw fail(std::string("cannot read: ") + std::strerror(errno));
      continue;
    }
    if (n < 0) throw fail(std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) break;
    const size_t got = static_cast<size_t>(n);
    if (text) {
      // Text is checked as it comes: /dev/zero or a binary file ends at its first NUL.
      if (const void* nul = std::memchr(chunk.data(), 0, got)) {
        const char* end = static_cast<const char*>(nul);
        const int64_t line = lines_before + std::count(static_cast<const char*>(chunk.data()), end, '\n') + 1;
        throw CaseError(path + ":" + std::to_string(line) + ": NUL byte (" + limit.kind + " is text)");
      }
      lines_before += std::count(chunk.data(), chunk.data() + got, '\n');
    }
    if (out.size() + got > limit.max_bytes) throw too_large();
    out.append(chunk.data(), got);
  }
  if (out.empty() && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
    throw fail("nothing to read: a pipe or FIFO with no writer, or an empty one");
  return out;
}

const InputLimit& case_file_limit() {
  // Hex is two characters a byte, expect's words with their spaces at most 2.5 a byte, so no
  // valid case is longer than 2.5 times the tensor limit; the rest is room for keys and comments.
  static const InputLimit limit{
      uint64_t(3) * kMaxCaseBytes, "a case file",
      "3 times the " + std::to_string(kMaxCaseBytes) + " bytes of tensors a case may have, written as hex"};
  return limit;
}

Problem read_case_file(const std::string& path) {
  return parse_case(read_input_file(path, case_file_limit(), true), path);
}

int case_key_line(const std::string& path, const std::string& key) {
  std::string text;
  try {
    text = read_input_file(path, case_file_limit(), true);
  } catch (const CaseError&) {
    return 0;
  }
  int line = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    ++line;
    const size_t eq = text.find('=', at);
    if (eq < end && text.find('#', at) > eq && trim(text, at, eq) == key) return line;
    at = end + 1;
  }
  return 0;
}

namespace {

// The op's declared tensors, in declaration order, as parse_tensors reads them back.
void append_tensors(std::string& out, const Problem& p) {
  for (const NamedTensor& t : p.tensors) out += t.name + " = " + tensor_text(t) + "\n";
}

// What write_case refuses to write: a problem whose file would not read back. Throws
// std::invalid_argument "write_case: ...".
void check_writable_quantize(const Problem& p) {
  const auto invalid = [](const std::string& what) { throw std::invalid_argument("write_case: " + what); };
  if (p.x.empty() && !p.seed) invalid("neither data nor a seed");
  if (!p.x.empty() && !p.has_data()) invalid("x's length does not match the shape");
  if (p.expect) invalid("a quantize case holds expect_q and expect_sfq, not expect");
  if (p.expect_q && static_cast<int64_t>(p.expect_q->size()) != p.q_bytes()) invalid("expect_q has the wrong length");
  if (p.expect_sfq && static_cast<int64_t>(p.expect_sfq->size()) != p.sfq_bytes()) invalid("expect_sfq has the wrong length");
}

// The same for the GEMM family; returns whether the case has data (else it is seed-only).
bool check_writable_gemm(const Problem& p) {
  const auto invalid = [](const std::string& what) { throw std::invalid_argument("write_case: " + what); };
  bool any_data = !p.a.empty() || !p.b.empty() || !p.sfa.empty() || !p.sfb.empty() || !p.b2.empty() || !p.sfb2.empty();
  for (const Group& g : p.groups) any_data = any_data || !g.a.empty() || !g.b.empty() || !g.sfa.empty() || !g.sfb.empty();
  if (op_is_grouped(p.op)) {
    for (const Group& g : p.groups) {
      if (!std::isfinite(g.alpha)) invalid("a group's alpha is not finite");
    }
    bool all_empty = true;
    for (const Group& g : p.groups) all_empty = all_empty && g.m == 0;
    if (!all_empty && !any_data && !p.seed) invalid("neither data nor a seed");
    if (any_data && !p.has_data()) invalid("grouped data lengths do not match the groups' shapes");
    if (p.expect) invalid("a grouped case holds its expect lines per group");
    for (const Group& g : p.groups) {
      if (g.expect && static_cast<int64_t>(g.expect->size()) != g.c_elems()) invalid("a group's expect has the wrong length");
    }
  } else {
    if (!std::isfinite(p.alpha) || !std::isfinite(p.alpha2)) invalid("alpha is not finite");
    if (any_data && !p.has_data()) invalid("data lengths do not match the shape");
    if (!any_data && !p.seed) invalid("neither data nor a seed");
    if (p.expect && static_cast<int64_t>(p.expect->size()) != p.c_elems()) invalid("expect has the wrong length");
  }
  return any_data;
}

// A grouped case's per-group keys, group by group (an empty group has none of its keys); the
// byte tensors only when the case has data.
void append_groups(std::string& out, const Problem& p, bool any_data) {
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const Group& q = p.groups[g];
    if (q.m == 0) continue;
    const std::string gs = "." + std::to_string(g);
    for (const CaseKey& k : case_keys()) {
      if (!k.per_group() || !key_taken(k, p.op, false)) continue;
      if (k.group_bytes && any_data) append_tensor(out, k.name + gs, q.*(k.group_bytes));
      if (k.write_group) k.write_group(p, q, k.name + gs, out);
    }
  }
}

}  // namespace

std::string write_case(const Problem& p) { return write_case(p, CaseText::full); }

std::string write_case(const Problem& p, CaseText what) {
  const auto invalid = [](const std::string& what) { throw std::invalid_argument("write_case: " + what); };
  const std::string shape = shape_error(p);
  if (!shape.empty()) invalid("bad shape: " + shape);
  const bool seed_only = what == CaseText::seed_only;
  if (seed_only && !(p.seed && p.data_from_seed)) invalid("the data are not drawn from the case's seed");
  if (const std::string e = tensors_error(p, p.seed.has_value()); !e.empty()) invalid(e);
  bool any_data = true;
  if (op_quantizes(p.op))
    check_writable_quantize(p);
  else
    any_data = check_writable_gemm(p);
  if (seed_only) any_data = false;
  if (!p.generator.empty() && !p.seed) invalid("a generator needs a seed");
  for (const char c : p.generator) {
    if (is_space(c) || c == '#' || c == '\n') invalid("generator name contains a space or '#'");
  }

  // The op's keys in case_keys()'s order; its declared tensors after its inputs.
  const bool out_nvfp4 = has_block_scaled_output(p);
  std::string out = "# nvfp4check case v1\n";
  bool groups_written = false, tensors_written = false;
  for (const CaseKey& k : case_keys()) {
    if (!key_taken(k, p.op, out_nvfp4)) continue;
    if (k.kind == KeyKind::expected && !tensors_written) {
      if (!seed_only) append_tensors(out, p);  // drawn from the seed with the rest
      tensors_written = true;
    }
    // A quantizer's X, the one input written by its own writer.
    if (seed_only && k.kind == KeyKind::input && !k.per_group() && !k.bytes) continue;
    if (k.per_group()) {
      if (!groups_written) append_groups(out, p, any_data), groups_written = true;
    } else if (k.bytes) {
      if (any_data) append_tensor(out, k.name, p.*(k.bytes));
    } else {
      k.write(p, out);
    }
  }
  if (!tensors_written && !seed_only) append_tensors(out, p);
  return out;
}

void write_case_file(const Problem& p, const std::string& path) { write_case_text(write_case(p), path); }

void write_case_text(const std::string& text, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write case file " + path + ": " + std::strerror(errno));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) {
    const int err = errno;
    // A truncated case file would only be rejected later: remove it (a regular file only: the
    // path may name a device, or a link to one).
    std::error_code ignored;
    if (std::filesystem::is_regular_file(std::filesystem::symlink_status(path, ignored)))
      std::filesystem::remove(path, ignored);
    throw std::runtime_error("error writing case file " + path + ": " + std::strerror(err));
  }
}

}  // namespace nvfp4
