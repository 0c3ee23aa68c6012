// The JSON report's fields, each listed once: its key, the member it holds, whether a report
// must have it, and how shards' values merge. report_json writes through these lists,
// kernel_report_from_json reads through them and `merge` adds shards up through them, so a new
// report field is one line here.
//
// Each list takes one object or several of the same type and calls v(key, rule, member...) with
// that member of each: one to write or read it, two (merged, shard) to merge.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness/engine/report.h"

namespace nvfp4 {

// How shards' values of a field become the merged report's.
enum class Merge : uint8_t {
  sum,        // counts, seconds, and maps of them by key
  max,        // the largest (NaN winning: a NaN error is news)
  same,       // one value in every shard (merge checks the ones that must agree): the first shard's
  first_set,  // the first shard's that has one
  own,        // merged by code of its own (verdict, failure, skip reasons)
};
// When a field is written, and whether a report read back must have it.
enum class Presence : uint8_t {
  always,   // written always, required
  lenient,  // written always, absent from reports of older builds (read as its default)
  if_set,   // written when it holds something (not 0, not empty)
};
struct FieldRule {
  Presence presence = Presence::always;
  Merge merge = Merge::own;
  int64_t min = 0;  // the smallest integer allowed (counts: 0)
};

// A failure's element as an object of its own ("element"), present when has_element.
template <class R>
struct ElementOf {
  R& failure;
};
// A word of the output type as "0xhhhh" or "0xhhhhhhhh", its width in digits beside it.
template <class W>
struct HexWord {
  W& word;
  std::conditional_t<std::is_const_v<W>, const int, int>& digits;
};
template <class W, class D>
HexWord<W> hex_word(W& word, D& digits) {
  return {word, digits};
}

template <class U, class... T>
using if_all = std::enable_if_t<(std::is_same_v<std::remove_const_t<T>, U> && ...)>;

template <class V, class... S>
if_all<ScheduleStats, S...> visit_fields(V&& v, S&... d) {
  constexpr FieldRule sum{Presence::always, Merge::sum};
  v("cases", sum, d.cases...);
  v("tile_edge", sum, d.tile_edge...);
  v("batched", sum, d.batched...);
  v("k_tail", sum, d.k_tail...);
  v("padded", sum, d.padded...);
  v("grouped", sum, d.grouped...);
  v("groups", sum, d.groups...);
  v("empty_groups", sum, d.empty_groups...);
  v("all_empty", sum, d.all_empty...);
  v("huge", FieldRule{Presence::lenient, Merge::sum}, d.huge...);  // the huge tier's cases (also by_kind "huge")
  v("by_kind", sum, d.by_kind...);
  v("by_data", sum, d.by_data...);
  v("by_op", sum, d.by_op...);
  v("by_op_data", sum, d.by_op_data...);
  v("by_scales", sum, d.by_scales...);
  v("by_values", sum, d.by_values...);
  v("by_out_type", sum, d.by_out_type...);
  v("by_groups", sum, d.by_groups...);
}

template <class V, class... R>
void visit_fields(V&& v, ElementOf<R>... e) {
  constexpr FieldRule index{Presence::lenient, Merge::own, -1}, plain{};
  v("g", index, e.failure.g...);
  v("b", plain, e.failure.b...);
  v("i", plain, e.failure.i...);
  v("j", plain, e.failure.j...);
  v("expected", plain, hex_word(e.failure.expected, e.failure.word_digits)...);
  v("actual", plain, hex_word(e.failure.actual, e.failure.word_digits)...);
  v("error_ulps", plain, e.failure.error_ulps...);
  v("error_over_bound", plain, e.failure.error_over_bound...);
  v("bound", plain, e.failure.bound...);
}

// A failure is merged whole (the earliest by case index), so its rules say only what is written.
template <class V, class... R>
if_all<FailureRecord, R...> visit_fields(V&& v, R&... f) {
  constexpr FieldRule always{}, if_set{Presence::if_set}, index{Presence::always, Merge::own, INT64_MIN};
  v("check", always, f.check...);
  v("message", always, f.message...);
  v("hint", if_set, f.hint...);
  v("call", always, f.call...);
  v("case_index", index, f.case_index...);
  v("case_file", always, f.case_file...);
  v("case_file_error", if_set, f.case_file_error...);
  v("reproduce", if_set, f.reproduce...);
  v("error_map", if_set, f.error_map...);
  v("notes", if_set, f.notes...);
  v("element", if_set, ElementOf<R>{f}...);
}

template <class V, class... K>
if_all<KernelReport, K...> visit_fields(V&& v, K&... k) {
  using P = Presence;
  using M = Merge;
  v("name", FieldRule{P::always, M::same}, k.name...);
  v("origin", FieldRule{P::always, M::same}, k.origin...);
  v("origin_identity", FieldRule{P::if_set, M::same}, k.origin_identity...);
  v("verdict", FieldRule{P::always, M::own}, k.verdict...);
  v("skip_reason", FieldRule{P::if_set, M::own}, k.skip_reason...);
  v("flags", FieldRule{P::always, M::same}, k.flags...);
  v("policy", FieldRule{P::always, M::first_set}, k.policy...);
  v("stream", FieldRule{P::if_set, M::same}, k.stream...);
  v("context", FieldRule{P::if_set, M::first_set}, k.context...);
  v("context_note", FieldRule{P::if_set, M::first_set}, k.context_note...);
  v("context_reruns", FieldRule{P::if_set, M::sum}, k.context_reruns...);
  v("stalls", FieldRule{P::if_set, M::sum}, k.stalls...);
  v("stall_note", FieldRule{P::if_set, M::first_set}, k.stall_note...);
  v("cases", FieldRule{P::always, M::sum}, k.cases...);
  v("unsupported_cases", FieldRule{P::always, M::sum}, k.unsupported_cases...);
  v("first_skip", FieldRule{P::if_set, M::own}, k.first_skip...);
  v("skipped_cases", FieldRule{P::always, M::sum}, k.skipped_cases...);
  v("failed_cases", FieldRule{P::always, M::sum}, k.failed_cases...);
  v("elements", FieldRule{P::always, M::sum}, k.elements...);
  v("exact_elements", FieldRule{P::always, M::sum}, k.exact_elements...);
  v("unjudged_elements", FieldRule{P::lenient, M::sum}, k.unjudged_elements...);
  v("max_error_ulps", FieldRule{P::always, M::max}, k.max_error_ulps...);
  v("max_error_over_bound", FieldRule{P::always, M::max}, k.max_error_over_bound...);
  // The time one run would have taken, not the wall time of the shards.
  v("seconds", FieldRule{P::always, M::sum}, k.seconds...);
  v("workers", FieldRule{P::always, M::sum}, k.workers...);
  v("warmup_seconds", FieldRule{P::if_set, M::max}, k.warmup_seconds...);
  v(kStageSecondsKey, FieldRule{P::if_set, M::sum}, k.step_seconds...);
  v("drawn", FieldRule{P::if_set, M::sum}, k.drawn...);
  v("failure", FieldRule{P::if_set, M::own}, k.failure...);
}

template <class T>
struct is_map : std::false_type {};
template <class K, class T>
struct is_map<std::map<K, T>> : std::true_type {};

// Whether a field holds something (an if_set field is written only then).
template <class T>
bool is_set(const T& x) {
  if constexpr (std::is_arithmetic_v<T>) {
    return x != 0;
  } else if constexpr (std::is_same_v<T, std::string> || is_map<T>::value || std::is_same_v<T, std::vector<std::string>> ||
                       std::is_same_v<T, std::vector<std::pair<std::string, double>>>) {
    return !x.empty();
  } else if constexpr (std::is_same_v<T, ScheduleStats>) {
    return x.cases > 0;
  } else if constexpr (std::is_same_v<T, std::optional<FailureRecord>>) {
    return x.has_value();
  } else if constexpr (std::is_same_v<T, ElementOf<const FailureRecord>> || std::is_same_v<T, ElementOf<FailureRecord>>) {
    return x.failure.has_element;
  } else {
    return true;
  }
}

}  // namespace nvfp4
