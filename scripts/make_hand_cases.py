#!/usr/bin/env python3
"""Writes the hand-made case files of corpus/cases/ with their `expect` lines.

The expected outputs come from this script's own exact arithmetic (Python's Fraction) and a
round-to-nearest-even that searches the table of all finite FP16 values, written from SPEC.md
sections 1-2 alone: it shares no code with the C++ reference it is there to check. Every random
choice is seeded; running it again rewrites the same files byte for byte.

    python3 scripts/make_hand_cases.py [OUTPUT_DIR]   (default: corpus/cases)
"""

import bisect
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


# ---- a case: data layout of SPEC section 2 and the exact result -----------------------------


class Case:
    def __init__(self, name, op, m, n, k, l, sf_layout="permuted", semantics="ue4m3", alpha="1",
                 alpha_value=Fraction(1), comment=""):
        assert k % 2 == 0 and k >= 2 and (op == "gemm" or n == 1)
        self.name, self.op, self.m, self.n, self.k, self.l = name, op, m, n, k, l
        self.kb = (k + 15) // 16
        self.sf_layout, self.semantics = sf_layout, semantics
        self.alpha, self.alpha_value = alpha, alpha_value
        self.comment = comment
        # Unpacked codes [l][rows][k] and scales [l][rows][kb]; packed only when written.
        self.A = [[[0] * k for _ in range(m)] for _ in range(l)]
        self.B = [[[0] * k for _ in range(n)] for _ in range(l)]
        self.SA = [[[0x38] * self.kb for _ in range(m)] for _ in range(l)]
        self.SB = [[[0x38] * self.kb for _ in range(n)] for _ in range(l)]

    def expect(self):
        out = []
        for b in range(self.l):
            for i in range(self.m):
                for j in range(self.n):
                    total, nan = Fraction(0), False
                    for x in range(self.k):
                        sa = e4m3_value(self.SA[b][i][x // 16], self.semantics)
                        sb = e4m3_value(self.SB[b][j][x // 16], self.semantics)
                        if sa is None or sb is None:
                            nan = True
                            continue
                        total += e2m1_value(self.A[b][i][x]) * sa * e2m1_value(self.B[b][j][x]) * sb
                    out.append(0x7E00 if nan else rn16(self.alpha_value * total))
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
        if self.op == "gemm":
            lines.append(f"n = {self.n}")
        lines += [f"k = {self.k}", f"l = {self.l}", f"sf_layout = {self.sf_layout}",
                  f"scale_semantics = {self.semantics}", f"alpha = {self.alpha}",
                  f"note = {self.name}",
                  "a = " + self.pack(self.A), "b = " + self.pack(self.B),
                  "sfa = " + self.flat(self.SA), "sfb = " + self.flat(self.SB),
                  "expect = " + " ".join(f"{w:04x}" for w in self.expect())]
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


def targeted_gemv(name, comment, rows, alpha="1", alpha_value=Fraction(1), layout="linear", seed=0):
    rng = random.Random(seed)
    case = Case(name, "gemv", len(rows), 1, 16 * len(QS), 1, sf_layout=layout, alpha=alpha,
                alpha_value=alpha_value, comment=comment)
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


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "corpus", "cases")
    os.makedirs(out_dir, exist_ok=True)
    cases = odd_shapes() + every_scale_byte() + ties() + overflow() + subnormals() + nan_scales() + alphas()
    for c in cases:
        path = os.path.join(out_dir, c.name + ".case")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(c.text())
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
