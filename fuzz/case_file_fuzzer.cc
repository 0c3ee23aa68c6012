// Fuzz target `case_file`: arbitrary bytes as a case file (SPEC.md section 4). The parser must
// never crash (ASan + UBSan), must reject bad input only with a CaseError naming file and line,
// and parse -> write -> parse must give back the same problem, and write its own text again.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "reference/case_file.h"
#include "reference/problem_fields.h"

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "case_file fuzzer: %s\n--- text written ---\n%.2000s\n", what.c_str(), text.c_str());
  std::abort();
}

// A field's value as bytes to compare (floats by their bits, so -0 and NaN payloads count).
template <class T>
std::string field_bytes(const T& v) {
  if constexpr (std::is_same_v<T, nvfp4::Group>) {
    std::string out;
    nvfp4::visit_group_fields([&](const char*, const auto& m, nvfp4::FieldRole) { out += field_bytes(m) + '|'; }, v);
    return out;
  } else if constexpr (std::is_same_v<T, nvfp4::NamedTensor>) {
    std::string out;
    nvfp4::visit_tensor_fields([&](const char*, const auto& m, nvfp4::FieldRole) { out += field_bytes(m) + '|'; }, v);
    return out;
  } else if constexpr (nvfp4::is_optional<T>::value) {
    return v ? "+" + field_bytes(*v) : "-";
  } else if constexpr (nvfp4::is_vector<T>::value) {
    std::string out;
    for (const auto& e : v) out += field_bytes(e) + ',';
    return out;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else {
    static_assert(std::is_trivially_copyable_v<T>);
    return std::string(reinterpret_cast<const char*>(&v), sizeof v);
  }
}

// Field by field from the problem's one field list (reference/problem_fields.h), so a failure
// says which field did not survive the round trip and a new field is compared without a line here.
std::string first_difference(const nvfp4::Problem& x, const nvfp4::Problem& y) {
  std::vector<std::pair<std::string, std::string>> a, b;
  nvfp4::visit_problem_fields([&](const char* name, const auto& m, nvfp4::FieldRole) { a.emplace_back(name, field_bytes(m)); }, x);
  nvfp4::visit_problem_fields([&](const char* name, const auto& m, nvfp4::FieldRole) { b.emplace_back(name, field_bytes(m)); }, y);
  for (size_t f = 0; f < a.size(); ++f)
    if (a[f].second != b[f].second) return a[f].first;
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Don't waste time on big files: the parser is linear in its input, and what breaks it
  // (keys, numbers, hex, lengths, encodings) shows in a few kilobytes.
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  nvfp4::Problem p;
  try {
    p = nvfp4::parse_case(text, "fuzz.case");
  } catch (const nvfp4::CaseError& e) {
    // A clean rejection names the file and a line: "fuzz.case:LINE: what".
    const std::string what = e.what();
    if (what.rfind("fuzz.case:", 0) != 0) fail("CaseError without FILE:LINE: " + what, text);
    return 0;
  }
  // Anything else thrown escapes and aborts: an error that is not a CaseError is a bug.

  // What the parser accepts is a valid problem.
  // (A seed-only case has no data yet: only its shape can be judged.)
  const std::string invalid = p.has_data() ? nvfp4::problem_error(p) : nvfp4::shape_error(p);
  if (!invalid.empty()) fail("accepted an invalid problem: " + invalid, text);
  const std::string written = nvfp4::write_case(p);
  nvfp4::Problem again;
  try {
    again = nvfp4::parse_case(written, "written.case");
  } catch (const nvfp4::CaseError& e) {
    fail(std::string("the writer's text does not parse: ") + e.what(), written);
  }
  const std::string diff = first_difference(p, again);
  if (!diff.empty()) fail("parse -> write -> parse changed " + diff, written);
  if (nvfp4::write_case(again) != written) fail("write is not a fixed point", written);
  return 0;
}
