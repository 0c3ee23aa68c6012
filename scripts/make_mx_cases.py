#!/usr/bin/env python3
"""Writes the hand-made block-format cases of corpus/mx/ (a_format/b_format, SPEC.md revision 4)
with their `expect` lines.

Every expected word comes from exact rational arithmetic (fractions.Fraction) over element and
scale values decoded here from SPEC.md section 1's bit-field definitions, IEEE's rules for Inf
and NaN products written out case by case, and make_hand_cases.py's rounding of an exact
Fraction to fp16/bf16/fp32 (itself checked against a table of every FP16 value). None of it is
shared with the C++ reference (reference/exact_mx.cc) it is there to check, which sums integers
in a Kulisch accumulator. Every random choice is seeded: running it again rewrites the same files.

    python3 scripts/make_mx_cases.py [OUTPUT_DIR]   (default: corpus/mx)
"""

import os
import random
import sys
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hand_cases import dual_word, e2m1_value, round_out  # noqa: E402

TWO = Fraction(2)
NAN, PINF, NINF = "nan", "+inf", "-inf"
QUIET_NAN = {"fp16": 0x7E00, "bf16": 0x7FC0, "fp32": 0x7FC00000}
WORD_DIGITS = {"fp16": 4, "bf16": 4, "fp32": 8}
BLOCK = {"nvfp4": 16, "mxfp4": 32, "mxfp8_e4m3": 32, "mxfp8_e5m2": 32}

# ---- SPEC section 1, from the bit fields ------------------------------------------------------


def e8m0_value(byte):
    return NAN if byte == 0xFF else TWO ** (byte - 127)


def e4m3_magnitude(byte):
    e, m = (byte >> 3) & 15, byte & 7
    if e == 15 and m == 7:
        return NAN
    return Fraction(m, 8) * TWO ** -6 if e == 0 else (1 + Fraction(m, 8)) * TWO ** (e - 7)


def e4m3_scale_value(byte, semantics):
    v = e4m3_magnitude(byte)
    if v == NAN:
        return NAN
    return -v if semantics == "e4m3" and byte & 0x80 else v


def e4m3_element(byte):
    v = e4m3_magnitude(byte)
    return v if v == NAN else (-v if byte & 0x80 else v)


def e5m2_element(byte):
    s, e, m = byte >> 7, (byte >> 2) & 31, byte & 3
    if e == 31:
        return NAN if m else (NINF if s else PINF)
    v = Fraction(m, 4) * TWO ** -14 if e == 0 else (1 + Fraction(m, 4)) * TWO ** (e - 15)
    return -v if s else v


def element_value(fmt, row_data, x):
    """Element x of one row's bytes (E2M1: element 2i is the low nibble of byte i)."""
    if fmt in ("nvfp4", "mxfp4"):
        byte = row_data[x // 2]
        return e2m1_value(byte >> 4 if x % 2 else byte & 15)
    return e4m3_element(row_data[x]) if fmt == "mxfp8_e4m3" else e5m2_element(row_data[x])


def scale_value(fmt, byte, semantics):
    return e4m3_scale_value(byte, semantics) if fmt == "nvfp4" else e8m0_value(byte)


def row_bytes(fmt, k):
    return k // 2 if fmt in ("nvfp4", "mxfp4") else k


def kb(fmt, k):
    return -(-k // BLOCK[fmt])


# ---- IEEE products and sums of exact values and Infs ------------------------------------------


def sign_of(v):
    return -1 if (v == NINF or (not isinstance(v, str) and v < 0)) else 1


def product(factors):
    """The IEEE product of exact values and Infs: NaN for NaN or Inf * 0."""
    if NAN in factors:
        return NAN
    infs = [f for f in factors if f in (PINF, NINF)]
    if not infs:
        p = Fraction(1)
        for f in factors:
            p *= f
        return p
    if any(not isinstance(f, str) and f == 0 for f in factors):
        return NAN
    s = 1
    for f in factors:
        s *= sign_of(f)
    return PINF if s > 0 else NINF


# ---- a case ---------------------------------------------------------------------------------


class MxCase:
    def __init__(self, name, comment, a_format, b_format, m, n, k, l=1, out_type="fp16", alpha="1",
                 alpha_value=Fraction(1), semantics="ue4m3", op=None):
        self.name, self.comment = name, comment
        self.a_format, self.b_format = a_format, b_format
        self.m, self.n, self.k, self.l = m, n, k, l
        self.out_type, self.alpha, self.alpha_value, self.semantics = out_type, alpha, alpha_value, semantics
        self.op = op or ("gemv" if n == 1 else "gemm")
        self.a = [bytearray(row_bytes(a_format, k)) for _ in range(l * m)]
        self.b = [bytearray(row_bytes(b_format, k)) for _ in range(l * n)]
        self.sfa = [bytearray([0x7F] * kb(a_format, k)) for _ in range(l * m)]
        self.sfb = [bytearray([0x7F] * kb(b_format, k)) for _ in range(l * n)]
        if a_format == "nvfp4":
            self.sfa = [bytearray([0x38] * kb(a_format, k)) for _ in range(l * m)]
        if b_format == "nvfp4":
            self.sfb = [bytearray([0x38] * kb(b_format, k)) for _ in range(l * n)]

    def exact(self, b, i, j, second=False):
        """alpha * sum as a Fraction, or NAN / PINF / NINF; `second`: a dual case's U (B2, alpha2)."""
        ra, rb = b * self.m + i, b * self.n + j
        B, SB = (self.b2, self.sfb2) if second else (self.b, self.sfb)
        alpha_value = self.alpha2_value if second else self.alpha_value
        sa = [scale_value(self.a_format, s, self.semantics) for s in self.sfa[ra]]
        sb = [scale_value(self.b_format, s, self.semantics) for s in SB[rb]]
        if NAN in sa or NAN in sb:
            return NAN
        total, infs = Fraction(0), set()
        for x in range(self.k):
            p = product([element_value(self.a_format, self.a[ra], x), sa[x // BLOCK[self.a_format]],
                         element_value(self.b_format, B[rb], x), sb[x // BLOCK[self.b_format]]])
            if p == NAN:
                return NAN
            if p in (PINF, NINF):
                infs.add(p)
            else:
                total += p
        if len(infs) == 2:
            return NAN
        if infs:
            return product([infs.pop(), alpha_value])
        return total * alpha_value

    def word(self, b, i, j):
        v = self.exact(b, i, j)
        if self.op == "dual_gemm":
            u = self.exact(b, i, j, second=True)
            if NAN in (v, u):
                return QUIET_NAN[self.out_type]
            assert not {v, u} & {PINF, NINF}, "a dual hand case keeps G and U finite (rule 6 has no bound there)"
            return dual_word(v, u, self.out_type)
        if v == NAN:
            return QUIET_NAN[self.out_type]
        if v in (PINF, NINF):
            inf = {"fp16": 0x7C00, "bf16": 0x7F80, "fp32": 0x7F800000}[self.out_type]
            sign = {"fp16": 0x8000, "bf16": 0x8000, "fp32": 0x80000000}[self.out_type]
            return inf | (sign if v == NINF else 0)
        return round_out(v, self.out_type)

    def words(self):
        return [self.word(b, i, j) for b in range(self.l) for i in range(self.m) for j in range(self.n)]

    def text(self):
        hexs = lambda rows: "".join(bytes(r).hex() for r in rows)
        lines = ["# nvfp4check case v1", f"# {self.comment}", "# written by scripts/make_mx_cases.py",
                 f"op = {self.op}", f"m = {self.m}", f"n = {self.n}", f"k = {self.k}", f"l = {self.l}",
                 "sf_layout = linear", f"scale_semantics = {self.semantics}", f"alpha = {self.alpha}"]
        if self.op == "dual_gemm":
            lines.append(f"alpha2 = {self.alpha2}")
        lines += [f"out_type = {self.out_type}", f"a_format = {self.a_format}", f"b_format = {self.b_format}",
                  f"a = {hexs(self.a)}", f"b = {hexs(self.b)}", f"sfa = {hexs(self.sfa)}", f"sfb = {hexs(self.sfb)}"]
        if self.op == "dual_gemm":
            lines += [f"b2 = {hexs(self.b2)}", f"sfb2 = {hexs(self.sfb2)}"]
        lines.append("expect = " + " ".join(f"{w:0{WORD_DIGITS[self.out_type]}x}" for w in self.words()))
        return "\n".join(lines) + "\n"


class MxDualCase(MxCase):
    """silu(G) * U with G = alpha * A*B and U = alpha2 * A*B2 (SPEC section 2), B2 of B's format;
    v from make_hand_cases.dual_word's 50-digit decimal silu over the exact Fractions G and U."""

    def __init__(self, name, comment, a_format, b_format, m, n, k, l=1, out_type="fp16", alpha="1",
                 alpha_value=Fraction(1), alpha2="1", alpha2_value=Fraction(1)):
        super().__init__(name, comment, a_format, b_format, m, n, k, l=l, out_type=out_type, alpha=alpha,
                         alpha_value=alpha_value, op="dual_gemm")
        self.alpha2, self.alpha2_value = alpha2, alpha2_value
        self.b2 = [bytearray(r) for r in self.b]
        self.sfb2 = [bytearray(r) for r in self.sfb]


class MxGroupedCase:
    """A grouped GEMM of one pair of formats: each group an l = 1 MxCase with its own shape and
    alpha, written with a.g, b.g, sfa.g, sfb.g and expect.g per non-empty group."""

    def __init__(self, name, comment, a_format, b_format, ms, ns, ks, alphas, out_type="fp16", packed=False):
        self.name, self.comment, self.out_type, self.packed = name, comment, out_type, packed
        self.a_format, self.b_format = a_format, b_format
        self.groups = [MxCase(name, comment, a_format, b_format, m, n, k, out_type=out_type, alpha=alpha,
                              alpha_value=value, op="gemm") for m, n, k, (alpha, value) in zip(ms, ns, ks, alphas)]
        if packed:
            assert len(set(ns)) == 1 and len(set(ks)) == 1, "the packed arrangement has one n and one k"

    def text(self):
        hexs = lambda rows: "".join(bytes(r).hex() for r in rows)
        g0 = self.groups
        lines = ["# nvfp4check case v1", f"# {self.comment}", "# written by scripts/make_mx_cases.py",
                 "op = grouped_gemm", f"groups = {len(g0)}", "group_m = " + " ".join(str(g.m) for g in g0),
                 "group_n = " + " ".join(str(g.n) for g in g0), "group_k = " + " ".join(str(g.k) for g in g0),
                 "group_alpha = " + " ".join(g.alpha for g in g0)]
        if self.packed:
            lines.append("packed = true")
        lines += ["sf_layout = linear", "scale_semantics = ue4m3", f"out_type = {self.out_type}",
                  f"a_format = {self.a_format}", f"b_format = {self.b_format}"]
        for x, g in enumerate(g0):
            if g.m == 0:
                continue  # an empty group has none of its keys
            lines += [f"a.{x} = {hexs(g.a)}", f"b.{x} = {hexs(g.b)}", f"sfa.{x} = {hexs(g.sfa)}",
                      f"sfb.{x} = {hexs(g.sfb)}",
                      f"expect.{x} = " + " ".join(f"{w:0{WORD_DIGITS[self.out_type]}x}" for w in g.words())]
        return "\n".join(lines) + "\n"


# ---- element and scale bytes by value ----------------------------------------------------------

E4M3_ONE, E5M2_ONE = 0x38, 0x3C  # 1.0


def put(case, operand, row, x, byte):
    """Sets element x of a row to a byte (E2M1: a nibble)."""
    fmt = case.a_format if operand == "a" else case.b_format
    data = (case.a if operand == "a" else case.b)[row]
    if fmt in ("nvfp4", "mxfp4"):
        old = data[x // 2]
        data[x // 2] = (old & 0x0F) | (byte << 4) if x % 2 else (old & 0xF0) | byte
    else:
        data[x] = byte


def random_element(rng, fmt):
    if fmt in ("nvfp4", "mxfp4"):
        return rng.randrange(16)
    if fmt == "mxfp8_e4m3":
        return rng.choice([b for b in range(256) if b & 0x7F != 0x7F])
    return rng.choice([b for b in range(256) if (b >> 2) & 31 != 31])


def fill_random(case, rng, scale_lo=0x60, scale_hi=0x9F):
    """Random finite elements and distinct-per-row E8M0 scales in [scale_lo, scale_hi]."""
    for operand, rows, fmt in (("a", case.a, case.a_format), ("b", case.b, case.b_format)):
        for r in range(len(rows)):
            for x in range(case.k):
                put(case, operand, r, x, random_element(rng, fmt))
    for scales, fmt in ((case.sfa, case.a_format), (case.sfb, case.b_format)):
        for row in scales:
            if fmt == "nvfp4":
                row[:] = bytes(rng.randrange(0x20, 0x48) for _ in row)
            else:
                row[:] = bytes(rng.sample(range(scale_lo, scale_hi + 1), len(row)))


FORMATS = ["nvfp4", "mxfp4", "mxfp8_e4m3", "mxfp8_e5m2"]


def random_cases():
    cases = []
    rng = random.Random(32)
    for fa in FORMATS:
        for fb in FORMATS:
            if fa == fb == "nvfp4":
                continue
            even = "nvfp4" in (fa, fb) or "mxfp4" in (fa, fb)
            k = rng.choice([64, 96, 40] if even else [33, 47, 64, 100])
            c = MxCase(f"random_{fa}_{fb}_k{k}", f"random finite data, distinct E8M0 exponents per row, k = {k}",
                       fa, fb, 3, 2, k, l=2, out_type=rng.choice(["fp16", "bf16", "fp32"]))
            fill_random(c, rng)
            cases.append(c)
    return cases


def extreme_scales():
    cases = []
    # 2^-127 * 2^127: a block whose scales multiply to 1, next to blocks at the range's ends
    # that cancel exactly. A float accumulator loses the 1.5; reading 0x00 as zero loses all.
    c = MxCase("extreme_scales_cancel", "blocks at 2^254 cancel exactly; 0x00 x 0xFE gives 1.5",
               "mxfp8_e4m3", "mxfp8_e4m3", 1, 1, 96, out_type="fp32")
    c.sfa[0][:] = bytes([0xFE, 0x00, 0xFE])
    c.sfb[0][:] = bytes([0xFE, 0xFE, 0xFE])
    put(c, "a", 0, 0, 0x7E)   # 448 * 2^254
    put(c, "a", 0, 64, 0xFE)  # -448 * 2^254
    put(c, "a", 0, 32, 0x3C)  # 1.5 * 2^-127
    for x in (0, 32, 64):
        put(c, "b", 0, x, E4M3_ONE)
    cases.append(c)
    # Tiny products only: 2^-127 scales on both sides, E5M2 subnormals: 2^-286 products.
    c = MxCase("extreme_scales_tiny", "2^-127 scales and E5M2 subnormals: products near 2^-286, fp32 output",
               "mxfp8_e5m2", "mxfp8_e5m2", 2, 1, 32, out_type="fp32")
    c.sfa[0][:] = c.sfa[1][:] = c.sfb[0][:] = bytes([0x00])
    put(c, "a", 0, 0, 0x01)
    put(c, "b", 0, 0, 0x01)
    put(c, "a", 1, 3, 0x7B)   # 57344 * 2^-127 * 57344 * 2^-127 = 49 * 2^-228: underflows fp32
    put(c, "b", 0, 3, 0x7B)
    cases.append(c)
    # Largest products: 57344 * 2^127 squared overflows every output type to Inf; with a
    # cancelling partner only the small block remains.
    c = MxCase("extreme_scales_huge", "0xFE scales: one row overflows to -Inf, one cancels to 0.75",
               "mxfp8_e5m2", "mxfp8_e5m2", 2, 1, 64, out_type="bf16")
    c.sfa[0][:] = bytes([0xFE, 0x7F])
    c.sfa[1][:] = bytes([0xFE, 0x7F])
    c.sfb[0][:] = bytes([0xFE, 0x7E])
    put(c, "a", 0, 0, 0xFB)  # -57344
    put(c, "b", 0, 0, 0x7B)
    put(c, "b", 0, 1, 0x7B)
    put(c, "a", 1, 0, 0x7B)
    put(c, "a", 1, 1, 0xFB)
    put(c, "a", 1, 40, 0x3E)  # 1.5 * 2^0 * 1 * 2^-1 = 0.75
    put(c, "b", 0, 40, E5M2_ONE)
    cases.append(c)
    # Every E8M0 exponent once across blocks (distinct exponents, 0x00 and 0xFE included).
    rng = random.Random(7)
    c = MxCase("e8m0_every_byte", "every non-NaN E8M0 byte as an A scale, B scales mirror it; fp32",
               "mxfp4", "mxfp4", 1, 1, 255 * 32 + 0, out_type="fp32")
    c.sfa[0][:] = bytes(range(255))
    c.sfb[0][:] = bytes(254 - s for s in range(255))
    for x in range(c.k):
        put(c, "a", 0, x, rng.randrange(16))
        put(c, "b", 0, x, rng.randrange(16))
    cases.append(c)
    return cases


def specials():
    cases = []
    # NaN scales: row 0 of A has one, column 1 of B has one; the rest stays finite.
    rng = random.Random(11)
    c = MxCase("nan_scales", "an E8M0 0xFF scale makes its row / column NaN, nothing else",
               "mxfp4", "mxfp8_e4m3", 3, 2, 64)
    fill_random(c, rng, 0x70, 0x8F)
    c.sfa[0][1] = 0xFF
    c.sfb[1][0] = 0xFF
    cases.append(c)
    # E5M2 Inf and NaN elements: one row per IEEE rule.
    c = MxCase("e5m2_inf_nan", "rows: +Inf*x, +Inf*0 (NaN), +Inf and -Inf (NaN), -Inf*x, NaN element, "
               "-Inf*-x", "mxfp8_e5m2", "mxfp8_e5m2", 6, 1, 32)
    for x in range(4):
        put(c, "b", 0, x, E5M2_ONE)
    put(c, "a", 0, 0, 0x7C)
    put(c, "a", 0, 1, E5M2_ONE)
    put(c, "a", 1, 5, 0x7C)  # b[5] = 0
    put(c, "a", 2, 0, 0x7C)
    put(c, "a", 2, 1, 0xFC)
    put(c, "a", 3, 2, 0xFC)
    put(c, "a", 4, 3, 0x7E)  # NaN
    put(c, "b", 0, 6, 0xBC)  # -1
    put(c, "a", 5, 6, 0xFC)
    cases.append(c)
    # Inf element against an MXFP4 operand, alpha negative.
    c = MxCase("e5m2_inf_times_mxfp4", "an E5M2 Inf times an E2M1 6 under alpha = -0.5: -Inf",
               "mxfp8_e5m2", "mxfp4", 1, 1, 32, alpha="-0.5", alpha_value=Fraction(-1, 2))
    put(c, "a", 0, 9, 0x7C)
    put(c, "b", 0, 9, 0x7)
    cases.append(c)
    # E4M3 +-448 with scales near fp16's overflow.
    c = MxCase("e4m3_448", "E4M3 +-448 elements: 448*448 = 200704 overflows fp16; 448*448/4 - 448*64 does not",
               "mxfp8_e4m3", "mxfp8_e4m3", 2, 1, 32)
    put(c, "a", 0, 0, 0x7E)
    put(c, "b", 0, 0, 0x7E)
    put(c, "a", 1, 0, 0x7E)
    put(c, "a", 1, 1, 0xFE)
    put(c, "b", 0, 1, 0x66)  # 64
    c.sfa[1][0] = 0x7D  # 2^-2
    cases.append(c)
    # A fp16 tie: 1 + 2^-11 rounds to 1 (even), 1 + 3 * 2^-11 up to 1 + 2^-9.
    c = MxCase("fp16_ties", "exact sums on fp16 midpoints round to even", "mxfp8_e4m3", "mxfp4", 2, 1, 32)
    put(c, "b", 0, 0, 0x2)  # 1.0
    put(c, "b", 0, 1, 0x2)
    put(c, "a", 0, 0, E4M3_ONE)
    put(c, "a", 0, 1, 0x01)  # 2^-9, scale 2^-2 -> 2^-11
    put(c, "a", 1, 0, E4M3_ONE)
    put(c, "a", 1, 1, 0x03)  # 3 * 2^-9 * 2^-2
    c.sfa[0][0] = c.sfa[1][0] = 0x7D
    put(c, "a", 0, 0, 0x48)  # 4 * 2^-2 = 1
    put(c, "a", 1, 0, 0x48)
    cases.append(c)
    # Subnormal elements lifted into view by their scales: E5M2 m * 2^-16 and E4M3 m * 2^-9.
    c = MxCase("subnormal_elements", "row 0: E5M2 subnormals 1, 2, 3 * 2^-16 under 2^16 (6); row 1: E4M3 "
               "subnormals 1, 7 * 2^-9 under 2^9 (8)", "mxfp8_e5m2", "mxfp8_e4m3", 2, 1, 32)
    c.sfa[0][0] = 0x8F
    c.sfa[1][0] = 0x88
    for x, e in enumerate([0x01, 0x02, 0x03]):
        put(c, "a", 0, x, e)
        put(c, "b", 0, x, E4M3_ONE)
    for x, e in ((3, 0x01), (4, 0x07)):
        put(c, "a", 1, x, E5M2_ONE)
        put(c, "b", 0, x, e)
    cases.append(c)
    # A tie broken by a product 2^-136: 1 + 2^-11 + 2^-136 rounds up in fp16, not to even.
    c = MxCase("tie_broken_far_below", "1 + 2^-11 is an fp16 tie; a product at 2^-136 (scale 0x00) breaks it upwards",
               "mxfp8_e4m3", "mxfp8_e4m3", 1, 1, 96)
    c.sfa[0][:] = bytes([0x7F, 0x7D, 0x00])
    put(c, "a", 0, 0, E4M3_ONE)
    put(c, "a", 0, 32, 0x01)
    put(c, "a", 0, 64, 0x01)
    for x in (0, 32, 64):
        put(c, "b", 0, x, E4M3_ONE)
    cases.append(c)
    return cases


def shapes_and_mixes():
    cases = []
    rng = random.Random(5)
    specs = [("mxfp8_e4m3", "mxfp4", 4, 3, 96, 1, "bf16", "MXFP8 A with MXFP4 B (MoE activations x weights)"),
             ("mxfp4", "mxfp8_e4m3", 4, 3, 96, 1, "bf16", "MXFP4 A with MXFP8 B"),
             ("mxfp8_e5m2", "mxfp8_e4m3", 2, 2, 33, 2, "fp32", "odd k = 33 for MXFP8 on both sides"),
             ("mxfp8_e4m3", "mxfp8_e4m3", 3, 1, 1, 1, "fp16", "k = 1"),
             ("mxfp8_e4m3", "mxfp8_e5m2", 2, 3, 65, 1, "fp16", "odd k = 65: a one-element last block"),
             ("mxfp4", "mxfp4", 2, 2, 40, 3, "fp16", "k = 40, not a multiple of 32, l = 3"),
             ("nvfp4", "mxfp8_e4m3", 2, 2, 48, 1, "fp32", "NVFP4 A (blocks of 16) with MXFP8 B (blocks of 32)"),
             ("mxfp4", "nvfp4", 2, 2, 80, 1, "bf16", "MXFP4 A with NVFP4 B, k = 80")]
    for fa, fb, m, n, k, l, out, comment in specs:
        c = MxCase(f"mix_{fa}_{fb}_k{k}", comment, fa, fb, m, n, k, l=l, out_type=out)
        fill_random(c, rng)
        cases.append(c)
    c = MxCase("alpha_not_power_of_two", "alpha = 0.3 (rounded to FP32) on MXFP4 x MXFP8",
               "mxfp4", "mxfp8_e5m2", 2, 2, 64, alpha="0x1.333334p-2", alpha_value=Fraction(0x1333334, 2 ** 26))
    fill_random(c, rng)
    cases.append(c)
    c = MxCase("nvfp4_signed_scales", "NVFP4 B with e4m3 semantics (a negative scale) and an MXFP4 A",
               "mxfp4", "nvfp4", 1, 2, 32, semantics="e4m3")
    fill_random(c, rng)
    c.sfb[0][1] = 0xB8  # -1
    cases.append(c)
    return cases


def small_element(rng, fmt):
    """A finite element of magnitude at most 7.5 (E4M3 exponent field <= 9, E5M2 <= 17)."""
    if fmt in ("nvfp4", "mxfp4"):
        return rng.randrange(16)
    field_bits = 3 if fmt == "mxfp8_e4m3" else 2
    top = 9 if fmt == "mxfp8_e4m3" else 17
    return rng.randrange(2) << 7 | rng.randrange(top + 1) << field_bits | rng.randrange(1 << field_bits)


def fill_random_dual(case, rng, scale_lo=0x7A, scale_hi=0x80):
    """Small elements and scales for A, B and B2 (G and U of moderate size, so that silu(G) * U
    lands away from rounding midpoints, and the 50-digit exp(-G) stays quick)."""
    for operand, rows, fmt in (("a", case.a, case.a_format), ("b", case.b, case.b_format), ("b2", case.b2, case.b_format)):
        for data in rows:
            for x in range(case.k):
                byte = small_element(rng, fmt)
                if fmt in ("nvfp4", "mxfp4"):
                    data[x // 2] = (data[x // 2] & 0x0F) | (byte << 4) if x % 2 else (data[x // 2] & 0xF0) | byte
                else:
                    data[x] = byte
    for scales, fmt in ((case.sfa, case.a_format), (case.sfb, case.b_format), (case.sfb2, case.b_format)):
        for row in scales:
            if fmt == "nvfp4":
                row[:] = bytes(rng.randrange(0x28, 0x38) for _ in row)
            else:
                row[:] = bytes(rng.sample(range(scale_lo, scale_hi + 1), len(row)))


def grouped_and_dual():
    cases = []
    rng = random.Random(33)
    # Grouped: ragged groups with an empty one, k not a multiple of 32, distinct exponents in
    # every group, each group its own alpha (one not a power of two).
    for fa, fb, ks, out in (("mxfp8_e4m3", "mxfp4", [64, 40, 96, 32], "bf16"),
                            ("mxfp4", "mxfp8_e5m2", [32, 64, 38, 96], "fp32"),
                            ("mxfp8_e5m2", "mxfp8_e4m3", [33, 1, 65, 32], "fp16"),
                            ("nvfp4", "mxfp8_e4m3", [48, 32, 80, 16], "fp32")):
        c = MxGroupedCase(f"grouped_{fa}_{fb}", f"grouped GEMM, A {fa} x B {fb}: ragged groups, group 1 empty, "
                          f"k = {' '.join(map(str, ks))}", fa, fb, [3, 0, 2, 5], [2, 3, 4, 1], ks,
                          [("1", Fraction(1)), ("2", Fraction(2)), ("-0.5", Fraction(-1, 2)),
                           ("0x1.333334p-2", Fraction(0x1333334, 2 ** 26))], out_type=out)
        for g in c.groups:
            fill_random(g, rng)
        cases.append(c)
    # Packed: one n and one k; group 0's scales differ from group 2's in every block, so a kernel
    # that reads every group's scales without its offset is seen.
    c = MxGroupedCase("grouped_packed_mxfp4_mxfp8_e4m3", "grouped GEMM, packed arrangement, MXFP4 A x MXFP8 B, "
                      "an empty group between two", "mxfp4", "mxfp8_e4m3", [2, 0, 3], [3, 3, 3], [96, 96, 96],
                      [("1", Fraction(1))] * 3, out_type="fp32", packed=True)
    for g in c.groups:
        fill_random(g, rng)
    cases.append(c)
    # NaN scale in one group only.
    c = MxGroupedCase("grouped_nan_scale", "grouped GEMM: an E8M0 0xFF scale in group 1's A makes its row NaN, "
                      "nothing in group 0", "mxfp8_e4m3", "mxfp8_e4m3", [2, 2], [2, 2], [64, 64],
                      [("1", Fraction(1))] * 2, out_type="fp16")
    for g in c.groups:
        fill_random(g, rng, 0x70, 0x8F)
    c.groups[1].sfa[0][1] = 0xFF
    cases.append(c)
    # Dual: silu(G) * U over every kind of operand pair, alpha2 not 1, extreme scale pairs.
    for fa, fb, k, out in (("mxfp8_e4m3", "mxfp4", 64, "fp32"), ("mxfp4", "mxfp4", 40, "bf16"),
                           ("mxfp8_e5m2", "mxfp8_e4m3", 33, "fp16"), ("mxfp4", "nvfp4", 48, "fp32")):
        c = MxDualCase(f"dual_{fa}_{fb}_k{k}", f"dual GEMM silu(G) * U, A {fa} x B and B2 {fb}, k = {k}",
                       fa, fb, 3, 2, k, l=2, out_type=out, alpha="0.5", alpha_value=Fraction(1, 2), alpha2="-2",
                       alpha2_value=Fraction(-2))
        fill_random_dual(c, rng)
        cases.append(c)
    c = MxDualCase("dual_extreme_scales", "dual GEMM: A's 0x00 against B's 0xFE and B2's 0xFE in one block: "
                   "G and U are ordinary numbers only if 0x00 is 2^-127", "mxfp8_e4m3", "mxfp8_e4m3", 2, 1, 64,
                   out_type="fp32")
    fill_random_dual(c, rng)
    for r in range(2):
        c.sfa[r][1] = 0x00
    c.sfb[0][1] = 0xFE
    c.sfb2[0][1] = 0xFE
    cases.append(c)
    c = MxDualCase("dual_nan_scale", "dual GEMM: a NaN scale in B2 (U's) makes its column NaN, G alone finite",
                   "mxfp4", "mxfp8_e4m3", 2, 2, 64, out_type="bf16")
    fill_random_dual(c, rng)
    c.sfb2[1][0] = 0xFF
    cases.append(c)
    return cases


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "corpus", "mx")
    os.makedirs(out_dir, exist_ok=True)
    for c in random_cases() + extreme_scales() + specials() + shapes_and_mixes() + grouped_and_dual():
        path = os.path.join(out_dir, c.name + ".case")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(c.text())
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
