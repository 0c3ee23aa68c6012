// Case files (SPEC.md section 4): one problem with its data as `key = value` text.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "reference/problem.h"

namespace nvfp4 {

// A rejected case file; what() is "FILE:LINE: what is wrong".
class CaseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Largest total size of the tensors a case needs (a, b, sfa and sfb in both layouts, c); a
// larger shape is rejected by the parser, so no file can make the suite allocate without bound.
// 4 GiB: a grouped problem's packed B passes 2^31 bytes at realistic expert counts, and 64-bit
// offsets are only checked by a case that does (the runner holds a few copies of a case: the
// host needs several times this much memory for the largest: the exact reference alone takes
// about 100 bytes per output, which the limit does not count; out of memory is exit 2).
constexpr int64_t kMaxCaseBytes = int64_t(1) << 32;
// A quantize case's limit (X, Q, SFQ in both layouts): 32 GiB, so that the huge tier's cases (2^31
// elements and a few rows more; FP32 X alone is 8 GiB) are case files too, saved as their seed.
constexpr int64_t kMaxQuantizeCaseBytes = int64_t(1) << 35;

// Parses a case. Unknown keys, duplicate keys, bad numbers, odd k, n != 1 for gemv, missing
// fields and data of the wrong length are errors. A case with `seed` and no data parses with
// empty data vectors (the harness generates them); explicit data wins over a seed.
Problem parse_case(const std::string& text, const std::string& filename);
Problem read_case_file(const std::string& path);  // throws CaseError also when unreadable

// What a command may read from one input file: at most max_bytes; kind ("a case file") and why
// (how the limit follows from what a valid input can hold) are for the message.
struct InputLimit {
  uint64_t max_bytes;
  std::string kind, why;
};
const InputLimit& case_file_limit();
// A whole input file, read so that nothing hangs or grows without bound: a file over the limit is
// refused before it is read (or when the limit is passed, for a pipe); a FIFO with no writer is
// refused at once, not waited for; a directory is refused; with text, a NUL byte ends it at once.
// Throws CaseError "FILE:LINE: what is wrong".
std::string read_input_file(const std::string& path, const InputLimit& limit, bool text);
// The line of `key` (e.g. "expect", "expect.3") in the case file at path; 0 when it has none or
// cannot be read. For messages about a value found wrong after parsing.
int case_key_line(const std::string& path, const std::string& key);

// Canonical text of a case: keys in the order op m n k l sf_layout scale_semantics alpha seed
// generator note a b sfa sfb, the op's declared tensors (op_table.h, values as alpha is written),
// expect, data as one hex line per tensor, alpha in the fewest digits
// that read back to the same float. parse(write(p)) == p (with p.note sanitized). Throws
// std::invalid_argument for a problem no case file can hold (bad shape, wrong data lengths,
// neither data nor seed, non-finite alpha).
std::string write_case(const Problem& p);
// What write_case writes of a case drawn from its seed (p.seed and p.data_from_seed): `full`, its
// data too; `seed_only`, the text of the same case with every tensor cleared (the seed then
// draws them), without copying or formatting gigabytes of data. Throws std::invalid_argument for
// seed_only on a problem whose data are not its seed's.
enum class CaseText { full, seed_only };
std::string write_case(const Problem& p, CaseText what);
void write_case_file(const Problem& p, const std::string& path);  // throws std::runtime_error
// Writes text already made by write_case (throws std::runtime_error).
void write_case_text(const std::string& text, const std::string& path);

// An op's declared tensor (op_table.h) as its case-file value, "v0 v1 ...", and back: `count`
// values of d's type (FP32: each in the fewest digits that read back to it; read in decimal or
// as a C99 hex float, rounded once, as alpha). The parse throws std::invalid_argument saying what
// is wrong ("bias: 3 values, expected l*m = 4").
std::string tensor_text(const NamedTensor& t);
NamedTensor parse_tensor_text(const TensorDecl& d, const std::string& text, int64_t count);

// The note as write_case writes it: '#' and control characters become spaces (they would end
// the value), edge spaces are trimmed (the parser trims values).
std::string sanitize_note(const std::string& note);

}  // namespace nvfp4
