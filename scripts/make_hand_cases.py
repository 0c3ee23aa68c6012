#!/usr/bin/env python3
"""Writes the hand-made case files of corpus/cases/ with their `expect` lines.

The expected outputs come from this script's own exact arithmetic (Python's Fraction) and a
round-to-nearest-even that searches the table of all finite FP16 values (BF16 and FP32: the
textbook rounding of an exact Fraction, checked against that table on FP16), written from
SPEC.md sections 1-2 alone: it shares no code with the C++ reference it is there to check. Dual
GEMM's silu(G) * U is computed with the decimal module at 50 digits. Every random choice is
seeded; running it again rewrites the same files byte for byte.

    python3 scripts/make_hand_cases.py [OUTPUT_DIR]   (default: corpus/cases)
"""

import bisect
import decimal
import os
import random
import struct
import sys
from fractions import Fraction

# ---- number formats (SPEC section 1) --------------------------------------------------------

E2M1 = [Fraction(v) for v in ("0", "1/2", "1", "3/2", "2", "3", "4", "6")]


def e2m1_value(code):
    v = E2M1[code & 7]
    return -v if code & 8 else v


def e4m3_value(byte, semantics):
    """Exact value of an E4M3FN scale byte, or None for NaN."""
    if byte & 0x7F == 0x7F:
        return None
    e, m = (byte >> 3) & 0xF, byte & 7
    v = Fraction(m, 2**9) if e == 0 else Fraction(8 + m) * Fraction(2) ** (e - 10)
    if semantics == "e4m3" and byte & 0x80:
        v = -v
    return v


def e4m3_byte(value):
    """The E4M3 byte of an exactly representable positive value (inverse of e4m3_value)."""
    for byte in range(0x7F):
        if e4m3_value(byte, "ue4m3") == value:
            return byte
    raise ValueError(f"{value} is not an E4M3 value")


# Every finite non-negative FP16 value with its bits, ascending.
FP16 = []
for bits in range(0x7C00):
    e, f = bits >> 10, bits & 0x3FF
    FP16.append(Fraction(f, 2**24) if e == 0 else Fraction(1024 + f) * Fraction(2) ** (e - 25))
FP16_MAX = FP16[-1]  # 65504
# IEEE overflow: a value rounds to Inf when it is at least halfway from 65504 to 2^16.
OVERFLOW = (FP16_MAX + Fraction(2**16)) / 2  # 65520


def rn16(x):
    """FP16 bits nearest to the exact x, ties to the even bit pattern, +0 for an exact 0."""
    sign = 0x8000 if x < 0 else 0
    a = abs(x)
    if a == 0:
        return 0
    if a >= OVERFLOW:
        return sign | 0x7C00
    i = bisect.bisect_left(FP16, a)
    if i < len(FP16) and FP16[i] == a:
        return sign | i
    lo, hi = i - 1, min(i, len(FP16) - 1)
    if a > FP16_MAX:  # between 65504 and 65520: rounds down
        return sign | lo
    dlo, dhi = a - FP16[lo], FP16[hi] - a
    pick = lo if dlo < dhi else hi if dhi < dlo else (lo if lo % 2 == 0 else hi)
    return sign | pick


def fp32(x):
    """The FP32 nearest to a Python float, as an exact Fraction."""
    return Fraction(struct.unpack("<f", struct.pack("<f", x))[0])


# Output types (SPEC section 1): precision (significand bits), smallest normal exponent, largest
# exponent, canonical NaN, digits of an expect word.
FORMATS = {
    "fp16": dict(precision=11, emin=-14, emax=15, nan=0x7E00, digits=4),
    "bf16": dict(precision=8, emin=-126, emax=127, nan=0x7FC0, digits=4),
    "fp32": dict(precision=24, emin=-126, emax=127, nan=0x7FC00000, digits=8),
}


def floor_log2(a):
    """floor(log2 a) of a positive Fraction."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def rn(x, out_type):
    """The word of out_type nearest to the exact x: ties to even, subnormals kept, Inf from
    (2 - 2^-p) * 2^emax, +0 for an exact 0."""
    f = FORMATS[out_type]
    p, emin, emax = f["precision"], f["emin"], f["emax"]
    width = 8 * f["digits"] // 2
    sign = 1 << (width - 1) if x < 0 else 0
    exp_bits = width - p
    inf = ((1 << exp_bits) - 1) << (p - 1)
    a = abs(x)
    if a == 0:
        return 0
    e = max(floor_log2(a), emin)
    q = a / Fraction(2) ** (e - (p - 1))  # the significand in units of the last place
    n = q.numerator // q.denominator
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    if n == 2 ** p:  # carried into the next binade
        n, e = 2 ** (p - 1), e + 1
    if e > emax:
        return sign | inf
    if n < 2 ** (p - 1):  # subnormal (e == emin)
        return sign | n
    return sign | ((e - emin + 1) << (p - 1)) | (n - 2 ** (p - 1))


def word_value(word, out_type):
    """The exact value of a finite word."""
    f = FORMATS[out_type]
    p, emin = f["precision"], f["emin"]
    width = 8 * f["digits"] // 2
    mag = word & ((1 << (width - 1)) - 1)
    field, frac = mag >> (p - 1), mag & ((1 << (p - 1)) - 1)
    v = Fraction(frac) * Fraction(2) ** (emin - p + 1) if field == 0 else \
        Fraction(frac + 2 ** (p - 1)) * Fraction(2) ** (field + emin - 1 - (p - 1))
    return -v if word >> (width - 1) else v


def round_out(x, out_type):
    w = rn(x, out_type)
    if out_type == "fp16":
        assert w == rn16(x), (x, w, rn16(x))  # two independent roundings agree
    return w


# ---- a case: data layout of SPEC section 2 and the exact result -----------------------------


class Case:
    def __init__(self, name, op, m, n, k, l, sf_layout="permuted", semantics="ue4m3", alpha="1",
                 alpha_value=Fraction(1), comment="", out_type="fp16", alpha2="1", alpha2_value=Fraction(1)):
        assert k % 2 == 0 and k >= 2 and (op != "gemv" or n == 1)
        self.name, self.op, self.m, self.n, self.k, self.l = name, op, m, n, k, l
        self.out_type = out_type
        self.alpha2, self.alpha2_value = alpha2, alpha2_value
        self.kb = (k + 15) // 16
        self.sf_layout, self.semantics = sf_layout, semantics
        self.alpha, self.alpha_value = alpha, alpha_value
        self.comment = comment
        # Unpacked codes [l][rows][k] and scales [l][rows][kb]; packed only when written.
        self.A = [[[0] * k for _ in range(m)] for _ in range(l)]
        self.B = [[[0] * k for _ in range(n)] for _ in range(l)]
        self.SA = [[[0x38] * self.kb for _ in range(m)] for _ in range(l)]
        self.SB = [[[0x38] * self.kb for _ in range(n)] for _ in range(l)]
        if op == "dual_gemm":  # the second B (U's)
            self.B2 = [[[0] * k for _ in range(n)] for _ in range(l)]
            self.SB2 = [[[0x38] * self.kb for _ in range(n)] for _ in range(l)]

    def dot(self, b, i, j, B, SB):
        """The exact sum of a row/column pair, or None when a scale it uses is NaN."""
        total, nan = Fraction(0), False
        for x in range(self.k):
            sa = e4m3_value(self.SA[b][i][x // 16], self.semantics)
            sb = e4m3_value(SB[b][j][x // 16], self.semantics)
            if sa is None or sb is None:
                nan = True
                continue
            total += e2m1_value(self.A[b][i][x]) * sa * e2m1_value(B[b][j][x]) * sb
        return None if nan else total

    def expect(self):
        out = []
        nan = FORMATS[self.out_type]["nan"]
        for b in range(self.l):
            for i in range(self.m):
                for j in range(self.n):
                    g = self.dot(b, i, j, self.B, self.SB)
                    if self.op == "dual_gemm":
                        u = self.dot(b, i, j, self.B2, self.SB2)
                        out.append(nan if g is None or u is None else
                                   dual_word(self.alpha_value * g, self.alpha2_value * u, self.out_type))
                    else:
                        out.append(nan if g is None else round_out(self.alpha_value * g, self.out_type))
        return out

    @staticmethod
    def pack(rows):
        data = bytearray()
        for batch in rows:
            for row in batch:
                for x in range(0, len(row), 2):
                    data.append(row[x] | (row[x + 1] << 4))  # element 2i is the low nibble
        return data.hex()

    @staticmethod
    def flat(scales):
        return bytes(s for batch in scales for row in batch for s in row).hex()

    def text(self):
        lines = ["# nvfp4check case v1"]
        lines += ["# " + c for c in self.comment.strip().splitlines()]
        lines.append("# Written by scripts/make_hand_cases.py; expect is its own exact arithmetic.")
        lines += [f"op = {self.op}", f"m = {self.m}"]
        if self.op != "gemv":
            lines.append(f"n = {self.n}")
        lines += [f"k = {self.k}", f"l = {self.l}", f"sf_layout = {self.sf_layout}",
                  f"scale_semantics = {self.semantics}"]
        if self.out_type != "fp16":
            lines.append(f"out_type = {self.out_type}")
        lines.append(f"alpha = {self.alpha}")
        if self.op == "dual_gemm":
            lines.append(f"alpha2 = {self.alpha2}")
        lines += [f"note = {self.name}", "a = " + self.pack(self.A), "b = " + self.pack(self.B)]
        if self.op == "dual_gemm":
            lines.append("b2 = " + self.pack(self.B2))
        lines += ["sfa = " + self.flat(self.SA), "sfb = " + self.flat(self.SB)]
        if self.op == "dual_gemm":
            lines.append("sfb2 = " + self.flat(self.SB2))
        digits = FORMATS[self.out_type]["digits"]
        lines.append("expect = " + " ".join(f"{w:0{digits}x}" for w in self.expect()))
        return "\n".join(lines) + "\n"


# ---- dual GEMM: silu(G) * U at 50 digits -------------------------------------------------------

DECIMAL = decimal.Context(prec=50, Emax=10**9, Emin=-10**9)


def to_decimal(x):
    return DECIMAL.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))


def dual_word(g, u, out_type):
    """RN_out(silu(G) * U) for exact G and U (Fractions). silu is transcendental, so v carries
    about 10^-49 relative error; the word is only written when v moved by 2^-55 of itself (far
    more than that error, and more than the C++ reference's 2^-60) rounds the same."""
    if g == 0 or u == 0:
        return 0  # an exact zero is +0
    gd = to_decimal(g)
    silu = DECIMAL.divide(gd, DECIMAL.add(decimal.Decimal(1), DECIMAL.exp(DECIMAL.minus(gd))))
    v = Fraction(DECIMAL.multiply(silu, to_decimal(u)))
    if v == 0:  # below the decimal context's range: a signed zero
        f = FORMATS[out_type]
        return (1 << (4 * f["digits"] - 1)) if (g < 0) != (u < 0) else 0
    w = rn(v, out_type)
    slack = abs(v) * Fraction(1, 2**55)
    assert rn(v - slack, out_type) == w == rn(v + slack, out_type), f"v = {float(v)} is too near a rounding midpoint"
    return w


# ---- grouped GEMM ---------------------------------------------------------------------------------


class GroupedCase:
    """A grouped GEMM (SPEC section 2): one l = 1 GEMM per group, written with a.g, b.g, sfa.g,
    sfb.g, expect.g per non-empty group."""

    def __init__(self, name, ms, ns, ks, alphas, out_type="fp16", packed=False, sf_layout="permuted",
                 comment=""):
        self.name, self.out_type, self.packed, self.sf_layout, self.comment = name, out_type, packed, sf_layout, comment
        self.groups = []
        for m, n, k, (alpha, alpha_value) in zip(ms, ns, ks, alphas):
            g = Case(name, "gemm", m, n, k, 1, sf_layout=sf_layout, alpha=alpha, alpha_value=alpha_value,
                     out_type=out_type)
            self.groups.append(g)
        if packed:
            assert len(set(ns)) == 1 and len(set(ks)) == 1, "the packed arrangement has one n and one k"

    def text(self):
        lines = ["# nvfp4check case v1"]
        lines += ["# " + c for c in self.comment.strip().splitlines()]
        lines.append("# Written by scripts/make_hand_cases.py; expect is its own exact arithmetic.")
        lines += ["op = grouped_gemm", f"groups = {len(self.groups)}",
                  "group_m = " + " ".join(str(g.m) for g in self.groups),
                  "group_n = " + " ".join(str(g.n) for g in self.groups),
                  "group_k = " + " ".join(str(g.k) for g in self.groups),
                  "group_alpha = " + " ".join(g.alpha for g in self.groups)]
        if self.packed:
            lines.append("packed = true")
        lines += [f"sf_layout = {self.sf_layout}", "scale_semantics = ue4m3"]
        if self.out_type != "fp16":
            lines.append(f"out_type = {self.out_type}")
        lines.append(f"note = {self.name}")
        digits = FORMATS[self.out_type]["digits"]
        for x, g in enumerate(self.groups):
            if g.m == 0:
                continue  # an empty group has none of its keys
            lines += [f"a.{x} = " + g.pack(g.A), f"b.{x} = " + g.pack(g.B), f"sfa.{x} = " + g.flat(g.SA),
                      f"sfb.{x} = " + g.flat(g.SB), f"expect.{x} = " + " ".join(f"{w:0{digits}x}" for w in g.expect())]
        return "\n".join(lines) + "\n"


def non_nan_byte(rng, lo=0x00, hi=0xFE):
    while True:
        b = rng.randint(lo, hi)
        if b & 0x7F != 0x7F:
            return b


def fill_random(case, rng, scale_bytes):
    for b in range(case.l):
        for rows, scales in ((case.A[b], case.SA[b]), (case.B[b], case.SB[b])):
            for r in range(len(rows)):
                rows[r] = [rng.randrange(16) for _ in range(case.k)]
                scales[r] = [rng.choice(scale_bytes) for _ in range(case.kb)]


NARROW = [b for b in range(0x28, 0x48)] + [b | 0x80 for b in range(0x28, 0x48)]  # 2^-2 .. 2^1
FULL = [b for b in range(256) if b & 0x7F != 0x7F]

# ---- targeted rows: a GEMV whose row i evaluates to a chosen exact value ---------------------
#
# B is 1.0 everywhere; block s of B has scale 2^QS[s]. A row reaches a target T = sign * M * 2^E
# (M odd) by splitting M into 6-bit chunks c_j, each placed in its own block s as 16 E2M1 values
# summing to c_j with the row's scale sa = 2^(E + 6j - QS[s]), a power of two E4M3 can hold
# (2^-9 .. 2^8). A row may add several targets (for cancellation).

QS = [-9, -9, -9, -9, -3, -3, -3, -3, 0, 0, 0, 0, 3, 3, 3, 3, 8, 8, 8, 8]


def chunk_elements(c):
    """Up to 16 E2M1 magnitudes (codes) summing to the integer c in [1, 63]."""
    codes = []
    while c >= 6:
        codes.append(7)  # 6
        c -= 6
    codes += {0: [], 1: [2], 2: [4], 3: [5], 4: [6], 5: [6, 2]}[c]
    assert len(codes) <= 16
    return codes


def set_targets(case, b, i, targets, rng):
    used = set()
    for t in targets:
        t = Fraction(t)
        if t == 0:
            continue
        sign = 8 if t < 0 else 0
        num, den = abs(t).numerator, abs(t).denominator
        assert den & (den - 1) == 0, "targets must be dyadic"
        e = -(den.bit_length() - 1)
        while num % 2 == 0:
            num //= 2
            e += 1
        j = 0
        while num:
            c = num & 63
            if c:
                p = e + 6 * j
                s = next(s for s in range(len(QS)) if s not in used and -9 <= p - QS[s] <= 8)
                used.add(s)
                case.SA[b][i][s] = e4m3_byte(Fraction(2) ** (p - QS[s]))
                for x, code in enumerate(chunk_elements(c)):
                    case.A[b][i][16 * s + x] = code | sign
            num >>= 6
            j += 1
    # Unused blocks keep zero data but get a random (non-NaN) scale: zeros ignore their scale.
    for s in range(len(QS)):
        if s not in used:
            case.SA[b][i][s] = non_nan_byte(rng)
    value = sum((Fraction(t) for t in targets), Fraction(0))
    return value


def targeted_gemv(name, comment, rows, alpha="1", alpha_value=Fraction(1), layout="linear", seed=0,
                  out_type="fp16"):
    rng = random.Random(seed)
    case = Case(name, "gemv", len(rows), 1, 16 * len(QS), 1, sf_layout=layout, alpha=alpha,
                alpha_value=alpha_value, comment=comment, out_type=out_type)
    case.B[0][0] = [2] * case.k  # 1.0
    case.SB[0][0] = [e4m3_byte(Fraction(2) ** q) for q in QS]
    for i, targets in enumerate(rows):
        set_targets(case, 0, i, targets, rng)
    # The construction is checked against the targets before anything is written.
    for i, targets in enumerate(rows):
        want = sum((Fraction(t) for t in targets), Fraction(0))
        got = sum(e2m1_value(case.A[0][i][x]) * e4m3_value(case.SA[0][i][x // 16], "ue4m3") *
                  e4m3_value(case.SB[0][0][x // 16], "ue4m3") for x in range(case.k))
        assert got == want, (name, i, got, want)
    return case


# ---- the cases --------------------------------------------------------------------------------


def odd_shapes():
    cases = []
    c = Case("odd_gemm_m129_n7_k80_l3", "gemm", 129, 7, 80, 3, comment="""
Ragged everything: m = 129 (one row past a 128-row tile), n = 7, k = 80 (five scale blocks,
not a multiple of 64), three batches. Narrow scales, so every output is exact in FP32.""")
    fill_random(c, random.Random(1), NARROW)
    cases.append(c)
    c = Case("odd_gemm_k2_l2", "gemm", 5, 3, 2, 2, sf_layout="linear", semantics="e4m3", comment="""
k = 2: one byte per row, one scale block holding only two elements. Signed (e4m3) scales over
the whole finite range.""")
    fill_random(c, random.Random(2), FULL)
    cases.append(c)
    c = Case("odd_gemv_m33_k18_l2", "gemv", 33, 1, 18, 2, comment="""
k = 18: a full block and a block of two. GEMV over two batches.""")
    fill_random(c, random.Random(3), NARROW)
    cases.append(c)
    c = Case("odd_gemv_m257_k272", "gemv", 257, 1, 272, 1, sf_layout="linear", comment="""
m = 257 spans three 128-row tiles (the last holds one row); k = 272 has 17 blocks (five
4-block tile columns, the last with one). Full scale range: many outputs round, some overflow.""")
    fill_random(c, random.Random(4), FULL)
    cases.append(c)
    return cases


def every_scale_byte():
    cases = []
    for semantics in ("ue4m3", "e4m3"):
        for side in ("sfa", "sfb"):
            rng = random.Random(20 + len(cases))
            m, n = (256, 3) if side == "sfa" else (3, 256)
            c = Case(f"every_{side}_byte_{semantics}", "gemm", m, n, 16, 1,
                     sf_layout="permuted" if side == "sfa" else "linear", semantics=semantics,
                     comment=f"""
Scale byte 0x00..0xFF in {side}: {'row' if side == 'sfa' else 'column'} r uses byte r ({semantics}).
The other side's {'column' if side == 'sfa' else 'row'} 0 is 1.0 at element 0 and zero elsewhere, so
output r there is the scale's value itself (NaN for 0x7F and 0xFF, negative for bytes >= 0x80
only under e4m3). {'Column' if side == 'sfa' else 'Row'} 1 is random data; {'column' if side == 'sfa' else 'row'} 2 is all 6.0 with scale
0xFE (448, or -448 under e4m3), which overflows to Inf for the large scales.""")
            mine, other = (c.A[0], c.B[0]) if side == "sfa" else (c.B[0], c.A[0])
            my_scales, other_scales = (c.SA[0], c.SB[0]) if side == "sfa" else (c.SB[0], c.SA[0])
            for r in range(256):
                mine[r] = [2] + [rng.randrange(16) for _ in range(15)]  # element 0 is 1.0
                my_scales[r] = [r]
            other[0] = [2] + [0] * 15
            other_scales[0] = [0x38]
            other[1] = [rng.randrange(16) for _ in range(16)]
            other_scales[1] = [0x38]
            other[2] = [7] * 16
            other_scales[2] = [0xFE]
            cases.append(c)
    return cases


def ties():
    one = Fraction(1)
    u = Fraction(1, 2**18)  # far below every ulp used here: "just beside" a tie
    rows = [
        [2049], [2051], [-2049], [-2051],                   # ulp 2: ties to 2048, 2052
        [2049 + u], [2049 - u], [2051 - u], [-2049 - u],    # beside the ties
        [1 + Fraction(1, 2**11)], [1 + Fraction(3, 2**11)],  # ulp 2^-10 at 1
        [-(1 + Fraction(1, 2**11))], [1 + Fraction(1, 2**11) + u], [1 + Fraction(1, 2**11) - u],
        [Fraction(1, 2) + Fraction(1, 2**12)], [Fraction(1, 2) + Fraction(3, 2**12)],
        [Fraction(1, 2**7) + u], [Fraction(1, 2**7) + 3 * u],  # ulp 2^-17 at 2^-7
        [1024.5], [1025.5], [-1024.5],
        [32784], [32816], [-32784],                          # ulp 32 at 2^15
        [65504],                                             # largest finite, exact
        [4096, -2047, Fraction(-1, 2)],                      # 2048.5 by cancellation: tie to 2048
        [Fraction(1, 2**14)],                                # smallest normal, exact
        [one],
    ]
    return [targeted_gemv("fp16_ties", """
FP16 ties: outputs exactly halfway between two FP16 neighbours must round to the even one, both
down (2049 -> 2048) and up (2051 -> 2052), in several binades and both signs, and values just
beside a tie must go to the nearer neighbour. B is 1.0 everywhere with per-block scales; each
row of A is built to sum to one chosen exact value.""", rows, seed=5)]


def overflow():
    u = Fraction(1, 2**10)
    rows = [
        [65504], [65519], [65520 - u], [65520], [65521], [65536], [100000],
        [-65519], [-65520], [-100000],
        [65488], [65488 + u],        # tie between 65472 and 65504: to 65472; just above: 65504
        [100000, -100000, 3],        # huge terms cancel exactly: 3, no overflow
        [70000, -4480],              # 65520 by cancellation: Inf
        [70000, -4497],              # 65503: finite
    ]
    return [targeted_gemv("overflow_at_65520", """
Overflow: magnitudes >= 65520 (halfway from 65504 to 2^16) round to Inf, anything below to
65504 or less; huge terms that cancel exactly do not overflow.""", rows, layout="permuted", seed=6)]


def subnormals():
    cases = []
    scale = Fraction(2) ** 12  # alpha = 2^-12 maps row value t * 2^12 to t
    tiny = lambda k: Fraction(1, 2**k)
    rows = [[t * scale] for t in [
        tiny(24), tiny(25), 3 * tiny(25), tiny(25) + tiny(29), -tiny(25), -tiny(26), -tiny(24),
        1023 * tiny(24), Fraction(2047, 2**25), Fraction(2045, 2**25), tiny(14), tiny(14) - tiny(26),
        5 * tiny(26), 7 * tiny(26), 100 * tiny(24)]]
    rows.append([tiny(20) * scale, -tiny(20) * scale])  # exact zero from non-zero terms: +0
    cases.append(targeted_gemv("subnormal_results_alpha_2m12", """
Subnormal FP16 results (below 2^-14, unit 2^-24): ties (2^-25 -> 0, 3*2^-25 -> 2^-23,
1023.5*2^-24 -> 2^-14), negative values that round to -0, an exact zero sum (+0). alpha is 2^-12,
a power of two, written as a C99 hex float.""", rows, alpha="0x1p-12", alpha_value=tiny(12), seed=7))
    c = Case("subnormal_scales", "gemm", 9, 5, 48, 2, semantics="e4m3", comment="""
Subnormal E4M3 scales (0x01..0x07, 0x81..0x87) and the smallest normals: products down to
2^-20, outputs in FP16's subnormal range.""")
    small = [b for b in range(0x01, 0x0C)] + [b | 0x80 for b in range(0x01, 0x0C)]
    fill_random(c, random.Random(8), small)
    cases.append(c)
    return cases


def nan_scales():
    c = Case("nan_scale", "gemm", 4, 3, 48, 2, sf_layout="linear", comment="""
NaN scales (0x7F, 0xFF): every output whose dot product uses a block with a NaN scale is NaN,
even when that block's data are all zero; every other output is finite.""")
    fill_random(c, random.Random(9), NARROW)
    c.SA[0][1][2] = 0x7F
    c.A[0][1][32:48] = [0] * 16  # zero data under the NaN scale: still NaN
    c.SB[1][2][0] = 0xFF
    c.SA[1][3][1] = 0xFF
    return [c]


def alphas():
    cases = []
    a = fp32(0.1)
    c = Case("alpha_one_tenth", "gemm", 17, 6, 64, 2, alpha="0x1.99999ap-4", alpha_value=a, comment="""
alpha = 0.1 rounded to FP32 (0x1.99999ap-4), not a power of two: RN16 of the exact alpha * r.""")
    fill_random(c, random.Random(10), NARROW)
    cases.append(c)
    c = Case("alpha_minus_half", "gemv", 20, 1, 96, 1, sf_layout="linear", alpha="-0.5",
             alpha_value=Fraction(-1, 2), comment="""
alpha = -0.5. Row 0 is all zeros (+0 and -0 codes): an exact zero sum is +0 even with a
negative alpha.""")
    fill_random(c, random.Random(11), FULL)
    c.A[0][0] = [random.Random(12).choice([0, 8]) for _ in range(c.k)]
    cases.append(c)
    return cases


def bf16_and_fp32():
    """Targeted rows for the revision-3 output types: ties, subnormals, overflow."""
    cases = []
    u = Fraction(1, 2**16)  # far below the BF16 ulps used here: "just beside" a tie
    rows = [
        [1 + Fraction(1, 2**8)], [1 + Fraction(3, 2**8)], [-(1 + Fraction(1, 2**8))],  # ulp 2^-7 at 1
        [1 + Fraction(1, 2**8) + u], [1 + Fraction(1, 2**8) - u],
        [257], [259], [-257], [257 + Fraction(1, 2**8)],  # ulp 2 at 256
        [Fraction(3, 2**9)], [1024 + 4], [1024 + 12],      # ulp 8 at 1024: ties to 1024, 1040
        [65536, -65535],                                   # 1 by cancellation: exact
        [2**14 + 2**6], [2**14 + 3 * 2**6],                # ulp 2^7 at 2^14
        [Fraction(1)]]
    cases.append(targeted_gemv("bf16_ties", """
BF16 ties: outputs exactly halfway between two BF16 neighbours (8 significant bits) round to the
even one, down (1 + 2^-8 -> 1, 257 -> 256) and up (1 + 3*2^-8 -> 1 + 2^-6, 259 -> 260), in
several binades and both signs; values just beside a tie go to the nearer neighbour. Truncating
the FP32 bits (the usual wrong BF16 conversion) gets the upward ones wrong.""", rows, seed=30,
                               out_type="bf16"))
    scale = Fraction(2) ** 140  # alpha = 2^-140 (an FP32 subnormal) maps row value t * 2^140 to t
    tiny = lambda e: Fraction(1, 2**e)
    rows = [[t * scale] for t in [
        tiny(133), tiny(134), 3 * tiny(134), 5 * tiny(134), -tiny(134), -3 * tiny(135), 127 * tiny(133),
        Fraction(255, 2**134), Fraction(253, 2**134), tiny(126), tiny(126) - tiny(134), 100 * tiny(133),
        Fraction(3, 2**130)]]
    rows.append([tiny(125) * scale, -tiny(125) * scale])  # exact zero from non-zero terms: +0
    cases.append(targeted_gemv("bf16_subnormals_alpha_2m140", """
Subnormal BF16 results (below 2^-126, unit 2^-133): ties (2^-134 -> 0, 3*2^-134 -> 2^-132,
127.5*2^-133 -> 2^-126, the smallest normal), negative values that round to -0, an exact zero sum
(+0). alpha is 2^-140, itself an FP32 subnormal, written as a C99 hex float.""", rows,
                               alpha="0x1p-140", alpha_value=tiny(140), seed=31, out_type="bf16"))
    big = Fraction(2) ** 120  # alpha = 2^120: row value t / 2^120 gives t
    rows = [[t / big] for t in [
        (2 - Fraction(1, 2**8)) * Fraction(2) ** 127,        # the threshold: Inf
        (2 - Fraction(1, 2**8)) * Fraction(2) ** 127 - 2**112,  # just below: the largest finite
        (2 - Fraction(1, 2**7)) * Fraction(2) ** 127,        # the largest finite, exact
        -(2 - Fraction(1, 2**8)) * Fraction(2) ** 127,       # -Inf
        Fraction(2) ** 127 * 3 / 2]]
    rows.append([Fraction(2) ** 8, -Fraction(2) ** 8, Fraction(3, 4)])  # huge terms cancel: 0.75 * 2^120
    cases.append(targeted_gemv("bf16_overflow_alpha_2p120", """
BF16 overflow: magnitudes >= (2 - 2^-8) * 2^127 round to Inf, anything below to the largest
finite value 0x7f7f or less; alpha = 2^120.""", rows, alpha="0x1p120", alpha_value=big, seed=32,
                               out_type="bf16", layout="permuted"))

    # FP32: alpha = 2^-6 brings 24-bit ties within reach of the targeted rows (chunks from 2^-18
    # to 2^16).
    a6 = Fraction(1, 2**6)
    rows = [[t / a6] for t in [
        1 + Fraction(1, 2**24), 1 + Fraction(3, 2**24), -(1 + Fraction(1, 2**24)),  # ulp 2^-23 at 1
        2**10 + Fraction(1, 2**14), 2**10 + Fraction(1, 2**14) + Fraction(1, 2**18),  # ulp 2^-13 at 2^10
        2**10 + Fraction(3, 2**14), 2**10 - Fraction(1, 2**15),
        2**9 + Fraction(1, 2**15), 2**9 + Fraction(3, 2**15), -(2**9 + Fraction(1, 2**15)),  # ulp 2^-14 at 2^9
        Fraction(3, 2) + Fraction(1, 2**18)]]
    rows.append([2**10 / a6, -(2**10) / a6, Fraction(5, 4) / a6])  # cancellation: 1.25
    cases.append(targeted_gemv("fp32_ties_alpha_2m6", """
FP32 outputs (4-byte words): ties at 24 significant bits round to even (1 + 2^-24 -> 1,
1 + 3*2^-24 -> 1 + 2^-22, 2^9 + 2^-15 -> 2^9), values beside a tie to the nearer neighbour, huge
terms that cancel exactly. A kernel that rounds through FP16 or BF16, or accumulates with fewer
bits, fails here.""", rows, alpha="0x1p-6", alpha_value=a6, seed=33, out_type="fp32"))
    a140 = Fraction(1, 2**140)
    rows = [[t * Fraction(1, 2**9)] for t in [1, Fraction(1, 2), Fraction(3, 2), Fraction(5, 2), Fraction(-1, 2), 3,
                                             2**23 - Fraction(1, 2), 2**23 - 1, 2**23, -(2**23 + 1), 2**24 + 1]]
    cases.append(targeted_gemv("fp32_subnormals_alpha_2m140", """
Subnormal FP32 results (unit 2^-149): alpha is 2^-140, an FP32 subnormal, and row value t * 2^-9
gives t * 2^-149: ties (0.5 -> 0, 1.5 -> 2, 2.5 -> 2 units), -0.5 units -> -0,
(2^23 - 0.5) units -> the smallest normal 2^-126.""", rows, alpha="0x1p-140", alpha_value=a140, seed=34,
                               out_type="fp32"))
    a112 = Fraction(2) ** 112
    top = Fraction(2) ** 127
    rows = [[t / a112] for t in [(2 - Fraction(1, 2**24)) * top, (2 - Fraction(1, 2**24)) * top - 2**103,
                                 (2 - Fraction(1, 2**23)) * top, -(2 - Fraction(1, 2**24)) * top, top * 3 / 2]]
    cases.append(targeted_gemv("fp32_overflow_alpha_2p112", """
FP32 overflow: magnitudes >= (2 - 2^-24) * 2^127 round to Inf, just below to the largest finite
0x7f7fffff; alpha = 2^112.""", rows, alpha="0x1p112", alpha_value=a112, seed=35, out_type="fp32",
                               layout="permuted"))

    c = Case("odd_gemm_bf16_m129_n7_k80", "gemm", 129, 7, 80, 2, comment="""
The ragged GEMM of odd_gemm_m129_n7_k80_l3 writing BF16, full scale range: outputs round, some
overflow FP16's range but not BF16's.""", out_type="bf16")
    fill_random(c, random.Random(36), FULL)
    cases.append(c)
    c = Case("odd_gemv_fp32_m257_k272", "gemv", 257, 1, 272, 1, sf_layout="linear", alpha="0x1.99999ap-4",
             alpha_value=fp32(0.1), comment="""
FP32 outputs of a GEMV over three row tiles and 17 blocks, alpha = 0.1 in FP32.""", out_type="fp32")
    fill_random(c, random.Random(37), FULL)
    cases.append(c)
    return cases


def grouped():
    cases = []
    halves = [("1", Fraction(1)), ("0.5", Fraction(1, 2)), ("0x1.99999ap-4", fp32(0.1)), ("2", Fraction(2)),
              ("3", Fraction(3)), ("-0.25", Fraction(-1, 4))]
    c = GroupedCase("grouped_separate_ragged", [1, 0, 127, 129, 0, 255], [3, 5, 1, 2, 4, 7], [16, 32, 18, 80, 2, 64],
                    halves, comment="""
Grouped GEMM, separate arrangement: six groups with their own m, n, k and alpha: m_g of 1, 127,
129 and 255 around the 128-row tiles, two empty groups (no keys at all, no output), k of one
partial block (18) and of several. Distinct scales per group.""")
    rng = random.Random(40)
    for g in c.groups:
        fill_random(g, rng, NARROW)
    cases.append(c)
    c = GroupedCase("grouped_packed_bf16", [0, 129, 1, 0, 127, 255, 0], [4] * 7, [48] * 7,
                    [(str(2 ** (x - 3)), Fraction(2) ** (x - 3)) for x in range(7)], out_type="bf16", packed=True,
                    comment="""
Grouped GEMM, packed arrangement (one n, one k; SFA tiles of each group start on a 128-row tile),
BF16 outputs: empty groups first, between and last, m_g of 129, 1, 127 and 255, alpha per group
2^(g-3). Full scale range.""")
    rng = random.Random(41)
    for g in c.groups:
        fill_random(g, rng, FULL)
    cases.append(c)
    c = GroupedCase("grouped_fp32_nan_in_one_group", [3, 0, 2], [2, 2, 2], [32, 32, 32],
                    [("1", Fraction(1)), ("1", Fraction(1)), ("0.75", Fraction(3, 4))], out_type="fp32", comment="""
Grouped GEMM with FP32 outputs: a NaN scale in group 2's B only makes that group's column 1 NaN;
group 0, with the same data shape, stays finite (scales are never shared between groups).""")
    rng = random.Random(42)
    for g in c.groups:
        fill_random(g, rng, NARROW)
    c.groups[2].SB[0][1][1] = 0x7F
    cases.append(c)
    cases.append(GroupedCase("grouped_all_empty", [0, 0, 0], [8, 8, 8], [64, 64, 64],
                             [("1", Fraction(1))] * 3, packed=True, comment="""
Every group empty (m_g = 0): the case holds no data and no expect line, and its reference output
is zero bytes long; a kernel must write nothing."""))
    return cases


def dual():
    """Dual GEMM with G targeted at silu's hard regions: around 0, near -87 (where an FP32
    1 + exp(-G) overflows) and of large positive G. B1 column 0 is 1.0 everywhere with the
    per-block scales 2^QS, so G = the row's target there; column 1 is 2.0 everywhere with the same
    scales (G = 2 * target). B2 column 0 is random data, column 1 is B1's column 0 (U = target)."""
    cases = []
    targets = [
        Fraction(1, 2**18), -Fraction(1, 2**18), Fraction(1, 2**10), Fraction(-1, 2), Fraction(1, 4), Fraction(1),
        Fraction(-1), Fraction(3), Fraction(-3), Fraction(0),
        Fraction(-87), Fraction(-87) + Fraction(1, 2**10), Fraction(-87.25), Fraction(-43.75), Fraction(-88.5),
        Fraction(-88.75), Fraction(-90), Fraction(-104), Fraction(-200),
        Fraction(87), Fraction(100), Fraction(1000), Fraction(65536), Fraction(63 * 2**16), Fraction(3 * 2**16 + 1)]
    for out_type, seed in (("fp32", 50), ("bf16", 51), ("fp16", 52)):
        rng = random.Random(seed)
        c = Case(f"dual_silu_{out_type}", "dual_gemm", len(targets), 2, 16 * len(QS), 1, sf_layout="linear",
                 alpha2="0x1.99999ap-4", alpha2_value=fp32(0.1), out_type=out_type, comment=f"""
Dual GEMM C = silu(G) * U with {out_type.upper()} outputs, G targeted at silu's hard regions:
around 0 (silu(G) ~ G/2), near -87 and past -88.72 (an FP32 1 + exp(-G) overflows there and
an FP32 silu returns -0), -104 and -200 (v below every type: signed zeros), and large positive
G (silu(G) = G). Row i's target t: G = t and 2t in columns 0 and 1; U = random in column 0,
0.1 * t in column 1 (alpha2 = 0.1 in FP32). Expect lines from 50-digit decimal arithmetic.""")
        c.B[0][0] = [2] * c.k
        c.B[0][1] = [4] * c.k  # 2.0
        c.SB[0][0] = [e4m3_byte(Fraction(2) ** q) for q in QS]
        c.SB[0][1] = list(c.SB[0][0])
        c.B2[0][0] = [rng.randrange(16) for _ in range(c.k)]
        c.SB2[0][0] = [rng.choice(NARROW) for _ in range(c.kb)]
        c.B2[0][1] = [2] * c.k
        c.SB2[0][1] = [e4m3_byte(Fraction(2) ** q) for q in QS]
        for i, t in enumerate(targets):
            set_targets(c, 0, i, [t], rng)
        for i, t in enumerate(targets):  # the construction, checked before anything is written
            assert c.dot(0, i, 0, c.B, c.SB) == t and c.dot(0, i, 1, c.B, c.SB) == 2 * t
        cases.append(c)
    return cases


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "corpus", "cases")
    os.makedirs(out_dir, exist_ok=True)
    cases = odd_shapes() + every_scale_byte() + ties() + overflow() + subnormals() + nan_scales() + alphas()
    cases += bf16_and_fp32() + grouped() + dual()
    for c in cases:
        path = os.path.join(out_dir, c.name + ".case")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(c.text())
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
