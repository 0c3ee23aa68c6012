// One NVFP4 GEMV/GEMM problem with its data, as the reference, case files and the harness see it
// (SPEC.md section 2). Scale factors are always held in LINEAR order here; the permuted copy a
// kernel may want is built from them (scale_layout.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reference/formats.h"

namespace nvfp4 {

enum class Op : uint32_t { gemv = 1, gemm = 2 };             // values of NVFP4_OP_*
enum class SfLayout : uint32_t { linear = 1, permuted = 2 };  // values of NVFP4_SF_*

const char* to_string(Op op);
const char* to_string(SfLayout layout);
const char* to_string(ScaleSemantics semantics);

struct Problem {
  Op op = Op::gemm;
  int64_t m = 1, n = 1, k = 2, l = 1;
  SfLayout sf_layout = SfLayout::permuted;  // the layout kernels are handed
  ScaleSemantics semantics = ScaleSemantics::ue4m3;
  float alpha = 1.0f;
  std::vector<uint8_t> a, b;      // packed E2M1, l*m*k/2 and l*n*k/2 bytes
  std::vector<uint8_t> sfa, sfb;  // LINEAR E4M3 scales, l*m*kb and l*n*kb bytes
  std::optional<std::vector<uint16_t>> expect;  // RN16 reference in C order, if recorded
  std::string note;
  // A case may name a seed and generator instead of explicit data (SPEC.md section 4); the
  // harness's generators fill a, b, sfa, sfb from them. Explicit data always wins.
  std::optional<uint64_t> seed;
  std::string generator;
  // Set when a, b, sfa and sfb are exactly what `seed` and `generator` expand to (the harness's
  // expand_seeded_case sets it), so a large case can be saved as its seed alone. Not written to
  // case files; whoever changes the data clears it.
  bool data_from_seed = false;

  int64_t kb() const { return (k + 15) / 16; }
  int64_t a_bytes() const { return l * m * k / 2; }
  int64_t b_bytes() const { return l * n * k / 2; }
  int64_t sfa_bytes() const { return l * m * kb(); }
  int64_t sfb_bytes() const { return l * n * kb(); }
  int64_t c_elems() const { return l * m * n; }
  bool has_data() const;  // a, b, sfa, sfb all present with the right lengths
};

// Empty when the shape is valid (m, n, l >= 1, k even >= 2, n == 1 for gemv, sizes that fit in
// memory arithmetic), else a sentence saying what is wrong.
std::string shape_error(const Problem& p);
// shape_error plus data lengths (and expect's length when present).
std::string problem_error(const Problem& p);

}  // namespace nvfp4
