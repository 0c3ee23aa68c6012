// Case files (SPEC.md section 4): one problem with its data as `key = value` text.
#pragma once

#include <stdexcept>
#include <string>

#include "reference/problem.h"

namespace nvfp4 {

// A rejected case file; what() is "FILE:LINE: what is wrong".
class CaseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses a case. Unknown keys, duplicate keys, bad numbers, odd k, n != 1 for gemv, missing
// fields and data of the wrong length are errors. A case with `seed` and no data parses with
// empty data vectors (the harness generates them); explicit data wins over a seed.
Problem parse_case(const std::string& text, const std::string& filename);
Problem read_case_file(const std::string& path);  // throws CaseError also when unreadable

// Canonical text of a case (explicit data; expect and note when present). parse(write(p)) == p.
std::string write_case(const Problem& p);
void write_case_file(const Problem& p, const std::string& path);  // throws std::runtime_error

}  // namespace nvfp4
