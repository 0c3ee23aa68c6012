// Names of the enums and the validity checks of a Problem (SPEC.md section 2).
#include "reference/problem.h"

#include <cmath>
#include <string>

#include "reference/scale_layout.h"

namespace nvfp4 {

const char* to_string(Op op) {
  switch (op) {
    case Op::gemv: return "gemv";
    case Op::gemm: return "gemm";
  }
  return "unknown-op";
}

const char* to_string(SfLayout layout) {
  switch (layout) {
    case SfLayout::linear: return "linear";
    case SfLayout::permuted: return "permuted";
  }
  return "unknown-layout";
}

const char* to_string(ScaleSemantics semantics) {
  switch (semantics) {
    case ScaleSemantics::ue4m3: return "ue4m3";
    case ScaleSemantics::e4m3: return "e4m3";
  }
  return "unknown-semantics";
}

namespace {

// No tensor of a problem may exceed this many bytes: far beyond any real case, and small enough
// that every product of two sizes below it fits in int64 (2^40 * 2^22 < 2^63).
constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;

// a * b * c, or -1 when it overflows or exceeds kMaxTensorBytes.
int64_t checked_bytes(int64_t a, int64_t b, int64_t c) {
  if (a < 0 || b < 0 || c < 0) return -1;
  int64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return -1;
  return abc > kMaxTensorBytes ? -1 : abc;
}

std::string size_error(const char* what, int64_t a, int64_t b, int64_t c) {
  if (checked_bytes(a, b, c) >= 0) return {};
  return std::string(what) + " would take more than 2^40 bytes";
}

}  // namespace

bool Problem::has_data() const {
  if (!shape_error(*this).empty()) return false;
  return static_cast<int64_t>(a.size()) == a_bytes() && static_cast<int64_t>(b.size()) == b_bytes() &&
         static_cast<int64_t>(sfa.size()) == sfa_bytes() &&
         static_cast<int64_t>(sfb.size()) == sfb_bytes();
}

std::string shape_error(const Problem& p) {
  if (p.op != Op::gemv && p.op != Op::gemm) return "op must be gemv or gemm";
  if (p.sf_layout != SfLayout::linear && p.sf_layout != SfLayout::permuted)
    return "sf_layout must be linear or permuted";
  if (p.semantics != ScaleSemantics::ue4m3 && p.semantics != ScaleSemantics::e4m3)
    return "scale_semantics must be ue4m3 or e4m3";
  if (p.m < 1) return "m = " + std::to_string(p.m) + " must be >= 1";
  if (p.n < 1) return "n = " + std::to_string(p.n) + " must be >= 1";
  if (p.l < 1) return "l = " + std::to_string(p.l) + " must be >= 1";
  if (p.k < 2 || p.k % 2 != 0) return "k = " + std::to_string(p.k) + " must be even and >= 2";
  if (p.op == Op::gemv && p.n != 1) return "gemv needs n = 1, got n = " + std::to_string(p.n);
  // k/2 bytes per row and kb scales per row are both <= k, so bounding l*rows*k bounds A, B and
  // the linear scales; checked in order so that later sizes are computed from bounded values.
  std::string e = size_error("A", p.l, p.m, p.k);
  if (e.empty()) e = size_error("B", p.l, p.n, p.k);
  if (e.empty()) e = size_error("C", p.l, p.m, checked_bytes(p.n, 2, 1));
  if (e.empty()) e = size_error("permuted SFA", p.l, ceil_div(p.m, 128) * 128, ceil_div(p.k, 64) * 4);
  if (e.empty()) e = size_error("permuted SFB", p.l, ceil_div(p.n, 128) * 128, ceil_div(p.k, 64) * 4);
  if (!e.empty()) return e;
  return {};
}

std::string problem_error(const Problem& p) {
  std::string e = shape_error(p);
  if (!e.empty()) return e;
  if (!std::isfinite(p.alpha)) return "alpha must be finite";
  auto length = [](const char* what, size_t got, int64_t want) -> std::string {
    if (static_cast<int64_t>(got) == want) return {};
    return std::string(what) + " has " + std::to_string(got) + " bytes, expected " + std::to_string(want);
  };
  for (std::string err : {length("a", p.a.size(), p.a_bytes()), length("b", p.b.size(), p.b_bytes()),
                          length("sfa", p.sfa.size(), p.sfa_bytes()),
                          length("sfb", p.sfb.size(), p.sfb_bytes())}) {
    if (!err.empty()) return err;
  }
  if (p.expect && static_cast<int64_t>(p.expect->size()) != p.c_elems()) {
    return "expect has " + std::to_string(p.expect->size()) + " values, expected " +
           std::to_string(p.c_elems());
  }
  return {};
}

}  // namespace nvfp4
