// Every field of a Problem and of a Group, listed once with its name, for code that handles a
// problem field by field (the worker protocol sends the kernel's inputs through this list). A new
// field is one line here; `role` says whether a kernel may see it.
#pragma once

#include <optional>
#include <type_traits>
#include <vector>

#include "reference/problem.h"

namespace nvfp4 {

// What code walking these lists needs to tell a field's kind apart (the protocol's encoder and
// decoder, the case-file fuzzer's comparison).
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

enum class FieldRole {
  input,  // what a kernel is handed (shape, options, data): a kernel's process receives it
  kept,   // expected outputs and where the case came from: the checking side keeps them, since a
          // kernel that could read an expected output could return it
};

// v(name, member, role) for each field of a group, in a fixed order (G: Group or const Group).
template <class V, class G>
void visit_group_fields(V&& v, G& g) {
  static_assert(std::is_same_v<std::remove_const_t<G>, Group>);
  using R = FieldRole;
  v("m", g.m, R::input);
  v("n", g.n, R::input);
  v("k", g.k, R::input);
  v("alpha", g.alpha, R::input);
  v("a", g.a, R::input);
  v("b", g.b, R::input);
  v("sfa", g.sfa, R::input);
  v("sfb", g.sfb, R::input);
  v("expect", g.expect, R::kept);
}

// v(name, member, role) for each field of an op's declared tensor (T: NamedTensor or const).
template <class V, class T>
void visit_tensor_fields(V&& v, T& t) {
  static_assert(std::is_same_v<std::remove_const_t<T>, NamedTensor>);
  v("name", t.name, FieldRole::input);
  v("bytes", t.bytes, FieldRole::input);
}

// v(name, member, role) for each field of a problem, in a fixed order (P: Problem or const
// Problem). data_from_seed is derived from the data and never copied field by field.
template <class V, class P>
void visit_problem_fields(V&& v, P& p) {
  static_assert(std::is_same_v<std::remove_const_t<P>, Problem>);
  using R = FieldRole;
  v("op", p.op, R::input);
  v("m", p.m, R::input);
  v("n", p.n, R::input);
  v("k", p.k, R::input);
  v("l", p.l, R::input);
  v("sf_layout", p.sf_layout, R::input);
  v("semantics", p.semantics, R::input);
  v("alpha", p.alpha, R::input);
  v("out_type", p.out_type, R::input);
  v("a_format", p.a_format, R::input);
  v("b_format", p.b_format, R::input);
  v("a", p.a, R::input);
  v("b", p.b, R::input);
  v("sfa", p.sfa, R::input);
  v("sfb", p.sfb, R::input);
  v("b2", p.b2, R::input);
  v("sfb2", p.sfb2, R::input);
  v("alpha2", p.alpha2, R::input);
  v("groups", p.groups, R::input);
  v("packed", p.packed, R::input);
  v("in_type", p.in_type, R::input);
  v("q_format", p.q_format, R::input);
  v("recipe", p.recipe, R::input);
  v("quant_2d", p.quant_2d, R::input);
  v("row_global_scale", p.row_global_scale, R::input);
  v("stochastic_seed", p.stochastic_seed, R::input);
  v("x", p.x, R::input);
  v("out_recipe", p.out_recipe, R::input);
  v("out_global_scale", p.out_global_scale, R::input);
  v("tensors", p.tensors, R::input);
  v("expect", p.expect, R::kept);
  v("expect_q", p.expect_q, R::kept);
  v("expect_sfq", p.expect_sfq, R::kept);
  v("note", p.note, R::kept);
  v("seed", p.seed, R::kept);
  v("generator", p.generator, R::kept);
}

}  // namespace nvfp4
