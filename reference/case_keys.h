// The keys of a case file (SPEC.md section 4), one row each in case_keys.cc: which ops take a
// key, whether it is required, how its value is read into a Problem and how a Problem writes it.
// The parser and writer of case_file.cc only walk these rows, so a new key is one row there, and
// an op added to op_table.h with a family's traits takes that family's keys with no line at all.
// (The rows name Problem's fields, so they live here and not in op_table.h, which kernels/ reads.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/problem.h"

namespace nvfp4 {

// Sets of ops (bits 1u << NVFP4_OP_* value), by the traits of their op-table rows.
constexpr uint32_t op_bit(Op op) { return 1u << static_cast<uint32_t>(op); }
inline constexpr uint32_t kAllOps = ops_of_version(~0u);
inline constexpr uint32_t kQuantizerOps = ops_with(kOpQuantizes);
inline constexpr uint32_t kGemmFamilyOps = kAllOps & ~kQuantizerOps;
inline constexpr uint32_t kGroupedOps = ops_with(kOpGrouped);
inline constexpr uint32_t kDualOps = ops_with(kOpDual);
inline constexpr uint32_t kOneShapeOps = kAllOps & ~kGroupedOps;        // m, n, k and l of their own
inline constexpr uint32_t kOneGemmOps = kGemmFamilyOps & ~kGroupedOps;  // one GEMM: one shape, one alpha
inline constexpr uint32_t kOwnNOps = kOneShapeOps & ~ops_with(kOpNIsOne | kOpQuantizes);  // n is not 1 by definition

// setting: a scalar or a list; input: a tensor the kernel reads; expected: a recorded output.
// A file's declared tensors (op_table.h) are written after its inputs, before its expected outputs.
enum class KeyKind : uint8_t { setting, input, expected };

// When the parser reads a key, in this order (the later phases depend on the earlier ones):
enum class KeyPhase : uint8_t {
  op,            // the key that selects the rows
  out_type,      // the size caps and the expect words depend on it
  formats,       // the operands' or the quantizer's formats and recipe: k's parity and the sizes
  shape,         // m, n, k, l, or a grouped case's groups
  options,       // the rest of the settings
  data,          // the tensors and expected outputs
  block_scaled,  // out_type = nvfp4: its recipe, global scales, expect_q and expect_sfq
};

// Reads a key's value into p (keys earlier in the table already read); throws
// std::invalid_argument "what is wrong", which the parser prefixes with the file and line.
using ReadKey = void (*)(Problem& p, const std::string& value);
// Appends the key's line to out, or nothing where p leaves the key at its default.
using WriteKey = void (*)(const Problem& p, std::string& out);
// One group's line of a per-group key (key: the name with its ".g").
using WriteGroupKey = void (*)(const Problem& p, const Group& g, const std::string& key, std::string& out);

struct CaseKey {
  const char* name = nullptr;
  uint32_t ops = 0;            // the ops that take it
  uint32_t out_nvfp4_ops = 0;  // the ops that take it only with out_type = nvfp4
  KeyKind kind = KeyKind::setting;
  KeyPhase phase = KeyPhase::options;
  uint32_t required_ops = 0;  // the ops whose files must give it (in its phase)
  // What the missing-key message adds in parentheses: nullptr nothing, "" "required for <op>".
  const char* missing_hint = nullptr;
  // With out_type = nvfp4 the expected output is recorded as expect_q and expect_sfq instead.
  bool not_with_out_nvfp4 = false;
  // What a grouped case gives instead ("group_m"; "" for the per-group key of the same name).
  const char* grouped_instead = nullptr;
  // A value that stands alone is read by its row; keys checked together (the shape, the groups,
  // the tensors and their lengths) by the parser's function for their phase (read == nullptr).
  ReadKey read = nullptr;
  WriteKey write = nullptr;
  // An operand or scale tensor of one GEMM (hex bytes, written when the case has data): its
  // field and length, whose rows and format it follows ('a': A's, 'b': B's) and whether it
  // holds scales (the length's formula in messages).
  std::vector<uint8_t> Problem::*bytes = nullptr;
  int64_t (Problem::*length)() const = nullptr;
  char side = 0;
  bool scales = false;
  // A per-group key ("a" is a.0, a.1, ... for each non-empty group): its line, or for a byte
  // tensor its field and length.
  WriteGroupKey write_group = nullptr;
  std::vector<uint8_t> Group::*group_bytes = nullptr;
  int64_t (Group::*group_length)(BlockFormat) const = nullptr;

  bool per_group() const { return write_group != nullptr || group_bytes != nullptr; }
};

// Every key, in the order write_case writes them.
const std::vector<CaseKey>& case_keys();
// The row of a key as a file names it without a group ("a", not "a.3"), or of a per-group key
// by its base name; nullptr for none.
const CaseKey* find_case_key(const std::string& name);
const CaseKey* find_group_case_key(const std::string& base);
// Whether a case of op takes the key; out_nvfp4: its out_type is nvfp4 and op has output types.
bool key_taken(const CaseKey& key, Op op, bool out_nvfp4);
inline bool has_block_scaled_output(const Problem& p) {
  return (kGemmFamilyOps & op_bit(p.op)) != 0 && p.out_type == OutType::nvfp4;
}

// The text forms the rows read and write (case_file.cc).
namespace case_text {
// A value quoted for an error message, cut short so a 100 MB data line never lands in one.
std::string quoted(const std::string& s);
// A non-negative decimal integer; throws std::invalid_argument "KEY: what is wrong".
uint64_t uint_from_text(const std::string& v, const std::string& key);
// Decimal or C99 hex float, rounded once to the nearest finite FP32; throws as above.
float fp32_from_text(const std::string& v, const std::string& key);
// "true" or "false"; throws as above.
bool bool_from_text(const std::string& v, const std::string& key);
// The shortest %.Ng that reads back to the same float.
std::string format_alpha(float alpha);
bool is_space(char c);
// " " and the word in hex, `digits` digits (more where the word needs them).
void append_word(std::string& out, uint32_t w, int digits);
// "key = " and the bytes in hex, or the words of out_type, and a newline.
void append_tensor(std::string& out, const std::string& key, const std::vector<uint8_t>& bytes);
void append_words(std::string& out, const char* key, OutType type, const std::vector<uint32_t>& words);
}  // namespace case_text

}  // namespace nvfp4
