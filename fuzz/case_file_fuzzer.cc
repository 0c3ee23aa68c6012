// Fuzz target `case_file`: arbitrary bytes as a case file (SPEC.md section 4). The parser must
// never crash (ASan + UBSan), must reject bad input only with a CaseError naming file and line,
// and parse -> write -> parse must give back the same problem, and write its own text again.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "reference/case_file.h"

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "case_file fuzzer: %s\n--- text written ---\n%.2000s\n", what.c_str(), text.c_str());
  std::abort();
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// Field by field, so a failure says which field did not survive the round trip.
std::string first_difference(const nvfp4::Problem& x, const nvfp4::Problem& y) {
  if (x.op != y.op) return "op";
  if (x.m != y.m || x.n != y.n || x.k != y.k || x.l != y.l) return "shape";
  if (x.sf_layout != y.sf_layout) return "sf_layout";
  if (x.semantics != y.semantics) return "scale_semantics";
  if (!same_bits(x.alpha, y.alpha)) return "alpha";
  if (x.a != y.a) return "a";
  if (x.b != y.b) return "b";
  if (x.sfa != y.sfa) return "sfa";
  if (x.sfb != y.sfb) return "sfb";
  if (x.expect != y.expect) return "expect";
  if (x.note != y.note) return "note";
  if (x.seed != y.seed) return "seed";
  if (x.generator != y.generator) return "generator";
  if (x.out_type != y.out_type) return "out_type";
  if (x.b2 != y.b2 || x.sfb2 != y.sfb2) return "b2/sfb2";
  if (!same_bits(x.alpha2, y.alpha2)) return "alpha2";
  if (x.packed != y.packed) return "packed";
  if (x.groups.size() != y.groups.size()) return "groups";
  for (size_t g = 0; g < x.groups.size(); ++g) {
    const nvfp4::Group &a = x.groups[g], &b = y.groups[g];
    if (a.m != b.m || a.n != b.n || a.k != b.k) return "group " + std::to_string(g) + " shape";
    if (!same_bits(a.alpha, b.alpha)) return "group " + std::to_string(g) + " alpha";
    if (a.a != b.a || a.b != b.b || a.sfa != b.sfa || a.sfb != b.sfb) return "group " + std::to_string(g) + " data";
    if (a.expect != b.expect) return "group " + std::to_string(g) + " expect";
  }
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
