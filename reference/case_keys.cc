// The rows of case_keys.h: every key of a case file, in the order write_case writes them.
#include "reference/case_keys.h"

#include <stdexcept>

#include "reference/case_file.h"

namespace nvfp4 {
namespace {

using namespace case_text;
using P = const Problem&;
using S = std::string&;

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

// A row, built by naming what differs from CaseKey's defaults.
struct Key : CaseKey {
  Key(const char* key, uint32_t takers, KeyPhase when) {
    name = key;
    ops = takers;
    phase = when;
  }
  Key& required(uint32_t by, const char* hint = nullptr) {
    required_ops = by;
    missing_hint = hint;
    return *this;
  }
  Key& only_with_out_nvfp4(uint32_t takers) {
    out_nvfp4_ops = takers;
    return *this;
  }
  Key& instead(const char* what) {
    grouped_instead = what;
    return *this;
  }
  Key& reads(ReadKey r) {
    read = r;
    return *this;
  }
  Key& writes(WriteKey w) {
    write = w;
    return *this;
  }
  Key& of_kind(KeyKind k) {
    kind = k;
    return *this;
  }
  Key& not_with_block_scaled_output() {
    not_with_out_nvfp4 = true;
    return *this;
  }
  // A GEMM's operand or scale tensor (a grouped case gives it per group instead), or a group's:
  // its field, its length, whose rows and format it follows ('a' or 'b'), whether it holds scales.
  Key& tensor(std::vector<uint8_t> Problem::*field, int64_t (Problem::*len)() const, char rows, bool holds_scales) {
    bytes = field;
    length = len;
    return input_tensor(rows, holds_scales);
  }
  Key& group_tensor(std::vector<uint8_t> Group::*field, int64_t (Group::*len)(BlockFormat) const, char rows,
                    bool holds_scales) {
    group_bytes = field;
    group_length = len;
    return input_tensor(rows, holds_scales);
  }
  Key& input_tensor(char rows, bool holds_scales) {
    kind = KeyKind::input;
    side = rows;
    scales = holds_scales;
    return *this;
  }
};

std::string number_line(const char* key, int64_t v) { return std::string(key) + " = " + std::to_string(v) + "\n"; }
std::string text_line(const char* key, const char* v) { return std::string(key) + " = " + v + "\n"; }

// "v" when every group has the same value, else "v0 v1 ...".
template <class Get>
std::string group_values(const std::vector<Group>& groups, const Get& get) {
  bool same = true;
  for (const Group& g : groups) same = same && get(g) == get(groups[0]);
  if (same) return get(groups[0]);
  std::string out;
  for (const Group& g : groups) out += (out.empty() ? "" : " ") + get(g);
  return out;
}

// One of two words: "KEY: 'v' is neither 'A' nor 'B'" for anything else.
template <class E>
void read_either(E& field, const std::string& v, const char* key, const char* a, E a_value, const char* b, E b_value) {
  if (v == a) {
    field = a_value;
  } else if (v == b) {
    field = b_value;
  } else {
    bad(std::string(key) + ": " + quoted(v) + " is neither '" + a + "' nor '" + b + "'");
  }
}

void read_format(BlockFormat& f, const std::string& v, const char* key) {
  if (!parse_block_format(v, &f))
    bad(std::string(key) + ": " + quoted(v) + " is not one of 'nvfp4', 'mxfp4', 'mxfp8_e4m3', 'mxfp8_e5m2'");
}

std::vector<CaseKey> make_keys() {
  using KP = KeyPhase;
  const std::vector<Key> keys = {
      // Read before the rows, by the parser: the op selects them.
      Key("op", kAllOps, KP::op).writes([](P p, S out) { out += text_line("op", to_string(p.op)); }),
      Key("m", kOneShapeOps, KP::shape).required(kOneShapeOps).instead("group_m").writes([](P p, S out) {
        out += number_line("m", p.m);
      }),
      // A quantizer's n is 1 (it has no B); the key is written all the same, as it always was.
      Key("n", kOneShapeOps, KP::shape).required(kOwnNOps, "").instead("group_n").writes([](P p, S out) {
        out += number_line("n", op_quantizes(p.op) ? 1 : p.n);
      }),
      Key("k", kOneShapeOps, KP::shape).required(kOneShapeOps).instead("group_k").writes([](P p, S out) {
        out += number_line("k", p.k);
      }),
      Key("l", kOneShapeOps, KP::shape).required(kOneShapeOps).instead("nothing: l is 1").writes([](P p, S out) {
        out += number_line("l", p.l);
      }),
      Key("groups", kGroupedOps, KP::shape).required(kGroupedOps, "").writes([](P p, S out) {
        out += number_line("groups", static_cast<int64_t>(p.groups.size()));
      }),
      Key("group_m", kGroupedOps, KP::shape).required(kGroupedOps, "").writes([](P p, S out) {
        out += "group_m =";
        for (const Group& g : p.groups) out += " " + std::to_string(g.m);
        out += "\n";
      }),
      Key("group_n", kGroupedOps, KP::shape).required(kGroupedOps, "").writes([](P p, S out) {
        out += "group_n = " + group_values(p.groups, [](const Group& g) { return std::to_string(g.n); }) + "\n";
      }),
      Key("group_k", kGroupedOps, KP::shape).required(kGroupedOps, "").writes([](P p, S out) {
        out += "group_k = " + group_values(p.groups, [](const Group& g) { return std::to_string(g.k); }) + "\n";
      }),
      Key("group_alpha", kGroupedOps, KP::shape).writes([](P p, S out) {
        out += "group_alpha = " + group_values(p.groups, [](const Group& g) { return format_alpha(g.alpha); }) + "\n";
      }),
      Key("packed", kGroupedOps, KP::shape)
          .reads([](Problem& p, const std::string& v) { p.packed = bool_from_text(v, "packed"); })
          .writes([](P p, S out) { out += p.packed ? "packed = true\n" : ""; }),
      Key("sf_layout", kAllOps, KP::options)
          .reads([](Problem& p, const std::string& v) {
            read_either(p.sf_layout, v, "sf_layout", "linear", SfLayout::linear, "permuted", SfLayout::permuted);
          })
          .writes([](P p, S out) { out += text_line("sf_layout", to_string(p.sf_layout)); }),
      Key("scale_semantics", kGemmFamilyOps, KP::options)
          .reads([](Problem& p, const std::string& v) {
            read_either(p.semantics, v, "scale_semantics", "ue4m3", ScaleSemantics::ue4m3, "e4m3",
                        ScaleSemantics::e4m3);
          })
          .writes([](P p, S out) {
            out += text_line("scale_semantics", p.semantics == ScaleSemantics::e4m3 ? "e4m3" : "ue4m3");
          }),
      // A file without out_type means fp16 (SPEC section 4), without formats NVFP4 operands:
      // such cases read as they always did.
      Key("out_type", kGemmFamilyOps, KP::out_type)
          .reads([](Problem& p, const std::string& v) {
            if (!parse_out_type(v, &p.out_type))
              bad("out_type: " + quoted(v) + " is not one of 'fp16', 'bf16', 'fp32', 'nvfp4'");
          })
          .writes([](P p, S out) {
            if (p.out_type != OutType::fp16) out += text_line("out_type", to_string(p.out_type));
          }),
      Key("a_format", kGemmFamilyOps, KP::formats)
          .reads([](Problem& p, const std::string& v) { read_format(p.a_format, v, "a_format"); })
          .writes([](P p, S out) {
            if (p.mx_operands()) out += text_line("a_format", to_string(p.a_format));
          }),
      Key("b_format", kGemmFamilyOps, KP::formats)
          .reads([](Problem& p, const std::string& v) { read_format(p.b_format, v, "b_format"); })
          .writes([](P p, S out) {
            if (p.mx_operands()) out += text_line("b_format", to_string(p.b_format));
          }),
      Key("out_recipe", 0, KP::block_scaled)
          .only_with_out_nvfp4(kGemmFamilyOps)
          .required(kGemmFamilyOps, "te, ref, fast or torchao; required for out_type = nvfp4")
          .reads([](Problem& p, const std::string& v) {
            if (!parse_recipe(v, &p.out_recipe) || !recipe_fits(p.out_recipe, BlockFormat::nvfp4))
              bad("out_recipe: " + quoted(v) + " is not one of 'te', 'ref', 'fast', 'torchao'");
          })
          .writes([](P p, S out) { out += text_line("out_recipe", to_string(p.out_recipe)); }),
      // One value, or one per group: read with the groups' count by the parser.
      Key("out_global_scale", 0, KP::block_scaled)
          .only_with_out_nvfp4(kGemmFamilyOps)
          .required(kGemmFamilyOps, "required for out_type = nvfp4")
          .writes([](P p, S out) {
            out += "out_global_scale =";
            for (const float g : p.out_global_scale) out += " " + format_alpha(g);
            out += "\n";
          }),
      Key("in_type", kQuantizerOps, KP::formats)
          .required(kQuantizerOps, "fp16, bf16 or fp32; required for quantize")
          .reads([](Problem& p, const std::string& v) {
            if (!parse_in_type(v, &p.in_type)) bad("in_type: " + quoted(v) + " is not one of 'fp16', 'bf16', 'fp32'");
          })
          .writes([](P p, S out) { out += text_line("in_type", to_string(p.in_type)); }),
      Key("format", kQuantizerOps, KP::formats)
          .required(kQuantizerOps, "nvfp4, mxfp4, mxfp8_e4m3 or mxfp8_e5m2; required for quantize")
          .reads([](Problem& p, const std::string& v) { read_format(p.q_format, v, "format"); })
          .writes([](P p, S out) { out += text_line("format", to_string(p.q_format)); }),
      Key("recipe", kQuantizerOps, KP::formats)
          .required(kQuantizerOps, "te, ref, fast, torchao, mx_rceil, mx_floor or mx_even")
          .reads([](Problem& p, const std::string& v) {
            if (!parse_recipe(v, &p.recipe))
              bad("recipe: " + quoted(v) +
                  " is not one of 'te', 'ref', 'fast', 'torchao', 'mx_rceil', 'mx_floor', 'mx_even'");
          })
          .writes([](P p, S out) { out += text_line("recipe", to_string(p.recipe)); }),
      // The quantizer's options are written only when set: their absence means false or none.
      Key("quant_2d", kQuantizerOps, KP::formats)
          .reads([](Problem& p, const std::string& v) { p.quant_2d = bool_from_text(v, "quant_2d"); })
          .writes([](P p, S out) { out += p.quant_2d ? "quant_2d = true\n" : ""; }),
      Key("row_global_scale", kQuantizerOps, KP::formats)
          .reads([](Problem& p, const std::string& v) { p.row_global_scale = bool_from_text(v, "row_global_scale"); })
          .writes([](P p, S out) { out += p.row_global_scale ? "row_global_scale = true\n" : ""; }),
      Key("stochastic_seed", kQuantizerOps, KP::formats)
          .reads([](Problem& p, const std::string& v) {
            p.stochastic_seed = uint_from_text(v, "stochastic_seed");
            if (p.q_format != BlockFormat::nvfp4) bad("stochastic rounding is for NVFP4 codes");
          })
          .writes([](P p, S out) {
            if (p.stochastic_seed) out += "stochastic_seed = " + std::to_string(*p.stochastic_seed) + "\n";
          }),
      Key("alpha", kOneGemmOps, KP::options)
          .instead("group_alpha")
          .reads([](Problem& p, const std::string& v) { p.alpha = fp32_from_text(v, "alpha"); })
          .writes([](P p, S out) { out += "alpha = " + format_alpha(p.alpha) + "\n"; }),
      Key("alpha2", kDualOps, KP::options)
          .reads([](Problem& p, const std::string& v) { p.alpha2 = fp32_from_text(v, "alpha2"); })
          .writes([](P p, S out) { out += "alpha2 = " + format_alpha(p.alpha2) + "\n"; }),
      Key("seed", kAllOps, KP::options)
          .reads([](Problem& p, const std::string& v) { p.seed = uint_from_text(v, "seed"); })
          .writes([](P p, S out) { out += p.seed ? "seed = " + std::to_string(*p.seed) + "\n" : ""; }),
      Key("generator", kAllOps, KP::options)
          .reads([](Problem& p, const std::string& v) {
            if (v.empty()) bad("generator: missing value");
            for (const char c : v)
              if (is_space(c)) bad("generator: " + quoted(v) + " contains a space");
            if (!p.seed) bad("generator given without seed (a generator needs a seed)");
            p.generator = v;
          })
          .writes([](P p, S out) { out += p.generator.empty() ? "" : "generator = " + p.generator + "\n"; }),
      // Read as it will be written (control characters and tabs as spaces), so that
      // parse -> write -> parse is the identity whatever bytes a note holds.
      Key("note", kAllOps, KP::options)
          .reads([](Problem& p, const std::string& v) { p.note = sanitize_note(v); })
          .writes([](P p, S out) {
            const std::string note = sanitize_note(p.note);
            if (!note.empty()) out += "note = " + note + "\n";
          }),
      // A grouped case's data, group by group: a.0, b.0, sfa.0, sfb.0, expect.0, a.1, ...
      Key("a", kGroupedOps, KP::data).group_tensor(&Group::a, &Group::a_bytes, 'a', false),
      Key("b", kGroupedOps, KP::data).group_tensor(&Group::b, &Group::b_bytes, 'b', false),
      Key("sfa", kGroupedOps, KP::data).group_tensor(&Group::sfa, &Group::sfa_bytes, 'a', true),
      Key("sfb", kGroupedOps, KP::data).group_tensor(&Group::sfb, &Group::sfb_bytes, 'b', true),
      [] {
        Key k("expect", kGroupedOps, KP::data);
        k.not_with_block_scaled_output().of_kind(KeyKind::input);
        k.write_group = [](P p, const Group& g, const std::string& key, S out) {
          if (g.expect) append_words(out, key.c_str(), p.out_type, *g.expect);
        };
        return k;
      }(),
      Key("a", kOneGemmOps, KP::data).instead("").tensor(&Problem::a, &Problem::a_bytes, 'a', false),
      Key("b", kOneGemmOps, KP::data).instead("").tensor(&Problem::b, &Problem::b_bytes, 'b', false),
      Key("b2", kDualOps, KP::data).tensor(&Problem::b2, &Problem::b2_bytes, 'b', false),
      Key("sfa", kOneGemmOps, KP::data).instead("").tensor(&Problem::sfa, &Problem::sfa_bytes, 'a', true),
      Key("sfb", kOneGemmOps, KP::data).instead("").tensor(&Problem::sfb, &Problem::sfb_bytes, 'b', true),
      Key("sfb2", kDualOps, KP::data).tensor(&Problem::sfb2, &Problem::sfb2_bytes, 'b', true),
      Key("expect", kOneGemmOps, KP::data)
          .of_kind(KeyKind::expected)
          .not_with_block_scaled_output()
          .instead("")
          .writes([](P p, S out) {
            if (p.expect) append_words(out, "expect", p.out_type, *p.expect);
          }),
      // Words of in_type: the fp16/bf16 word formats are 4 hex digits, fp32's 8 (out_type's words).
      Key("x", kQuantizerOps, KP::data).of_kind(KeyKind::input).writes([](P p, S out) {
        if (p.x.empty()) return;
        const size_t w = static_cast<size_t>(in_word_bytes(p.in_type));
        out += "x =";
        out.reserve(out.size() + p.x.size() / w * (w * 2 + 1) + 1);
        for (size_t i = 0; i < p.x.size() / w; ++i) {
          uint32_t word = 0;
          for (size_t b = 0; b < w; ++b) word |= static_cast<uint32_t>(p.x[i * w + b]) << (8 * b);
          append_word(out, word, static_cast<int>(2 * w));
        }
        out += "\n";
      }),
      // A quantizer's Q and SFQ (linear), or a block-scaled output's.
      Key("expect_q", kQuantizerOps, KP::data)
          .only_with_out_nvfp4(kGemmFamilyOps)
          .of_kind(KeyKind::expected)
          .writes([](P p, S out) {
            if (p.expect_q) append_tensor(out, "expect_q", *p.expect_q);
          }),
      Key("expect_sfq", kQuantizerOps, KP::data)
          .only_with_out_nvfp4(kGemmFamilyOps)
          .of_kind(KeyKind::expected)
          .writes([](P p, S out) {
            if (p.expect_sfq) append_tensor(out, "expect_sfq", *p.expect_sfq);
          }),
  };
  return {keys.begin(), keys.end()};
}

}  // namespace

const std::vector<CaseKey>& case_keys() {
  static const std::vector<CaseKey> keys = make_keys();
  return keys;
}

const CaseKey* find_case_key(const std::string& name) {
  for (const CaseKey& k : case_keys())
    if (!k.per_group() && name == k.name) return &k;
  return nullptr;
}

const CaseKey* find_group_case_key(const std::string& base) {
  for (const CaseKey& k : case_keys())
    if (k.per_group() && base == k.name) return &k;
  return nullptr;
}

bool key_taken(const CaseKey& key, Op op, bool out_nvfp4) {
  const uint32_t bit = op_bit(op);
  if (out_nvfp4 && (key.out_nvfp4_ops & bit)) return true;
  return (key.ops & bit) && !(out_nvfp4 && key.not_with_out_nvfp4);
}

}  // namespace nvfp4
