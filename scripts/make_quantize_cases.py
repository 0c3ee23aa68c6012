#!/usr/bin/env python3
"""Writes the hand-made quantize cases of corpus/quantize/ with their expect_q and expect_sfq lines.

Every expected byte comes from this script's own arithmetic, written from SPEC.md section 2's
recipe table alone: each FP32 operation is done exactly with fractions.Fraction and rounded once
to the nearest binary32 (ties to even), and every conversion to E2M1, E4M3, E5M2 or E8M0 picks
the grid value at the least distance (ties to the even code) or the power of two by exact
comparison. It shares no code with the C++ reference (reference/quantize.cc) it is there to
check, which searches sorted grids by midpoints and uses the host's float arithmetic.
Running it again rewrites the same files byte for byte (every random choice is seeded).

    python3 scripts/make_quantize_cases.py [OUTPUT_DIR]   (default: corpus/quantize)
"""

import math
import os
import random
import struct
import sys
from fractions import Fraction

INF = float("inf")
NAN = float("nan")
FLT_MAX = float(Fraction(2**24 - 1) * Fraction(2) ** 104)

# ---- binary32 arithmetic, exact then rounded once ---------------------------------------------


def rn32(q):
    """The binary32 value nearest to the exact rational q (ties to even), as a Python float;
    +-inf past the overflow threshold. Zero results are returned unsigned (callers sign them)."""
    if q == 0:
        return 0.0
    sign = -1 if q < 0 else 1
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1  # now 2^e <= a < 2^(e+1)
    quantum = Fraction(2) ** (max(e, -126) - 23)
    r = round(a / quantum)  # Fraction.__round__ rounds half to even
    v = r * quantum
    if v >= Fraction(2) ** 128:
        return sign * INF
    return sign * float(v)


def is_finite(v):
    return not (math.isnan(v) or math.isinf(v))


def mul(a, b):
    if not (is_finite(a) and is_finite(b)) or a == 0 or b == 0:
        return a * b  # IEEE specials: Python's doubles follow them, and a zero product is exact
    r = rn32(Fraction(a) * Fraction(b))
    return r if r != 0 else math.copysign(0.0, a * b)


def div(a, b):
    if math.isnan(a) or math.isnan(b):
        return NAN
    if b == 0:
        return NAN if a == 0 else math.copysign(INF, a) * math.copysign(1.0, b)
    if math.isinf(a):
        return NAN if math.isinf(b) else math.copysign(INF, a) * math.copysign(1.0, b)
    if math.isinf(b) or a == 0:
        return math.copysign(0.0, a) * math.copysign(1.0, b)
    r = rn32(Fraction(a) / Fraction(b))
    return r if r != 0 else math.copysign(0.0, a) * math.copysign(1.0, b)


C6 = rn32(Fraction(1, 6))
assert struct.unpack("<I", struct.pack("<f", C6))[0] == 0x3E2AAAAB

# ---- the grids (SPEC section 1) -----------------------------------------------------------------

E2M1 = [Fraction(v) for v in ("0", "1/2", "1", "3/2", "2", "3", "4", "6")]
E4M3 = [Fraction(m, 2**9) if e == 0 else Fraction(8 + m) * Fraction(2) ** (e - 10)
        for e in range(16) for m in range(8)][:0x7F]
E5M2 = [Fraction(m, 2**16) if e == 0 else Fraction(4 + m) * Fraction(2) ** (e - 17)
        for e in range(31) for m in range(4)]
assert E4M3[-1] == 448 and E5M2[-1] == 57344


def nearest_code(grid, a):
    """Code of the grid value at the least distance from a >= 0 (ties to the even code); past
    the largest value (Inf included), the largest (satfinite)."""
    if math.isinf(a) or a >= grid[-1]:
        return len(grid) - 1
    a = Fraction(a)
    best = min(range(len(grid)), key=lambda c: (abs(grid[c] - a), c % 2))
    return best


def sign_bit(v):
    return math.copysign(1.0, v) < 0


def e2m1(y):
    if math.isnan(y):
        return 0x7  # NaN to +6
    return (8 if sign_bit(y) else 0) | nearest_code(E2M1, abs(y))


def fp8(grid, y):
    if math.isnan(y):
        return 0x7F
    return (0x80 if sign_bit(y) else 0) | nearest_code(grid, abs(y))


def e4m3_value(byte):
    return NAN if byte & 0x7F == 0x7F else float(E4M3[byte & 0x7F])


def floor_log2(a):
    """floor(log2 a) for a positive finite Fraction/float, exactly."""
    a = Fraction(a)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > a else e


def e8m0_rceil(v):
    """cvt.rp.satfinite.ue8m0x2.f32: NaN 0xFF, Inf 0xFE, v <= 2^-127 0x00, else ceil(log2 v)."""
    if math.isnan(v):
        return 0xFF
    if math.isinf(v):
        return 0xFE
    if Fraction(v) <= Fraction(2) ** -127:
        return 0x00
    e = floor_log2(v)
    if Fraction(2) ** e != Fraction(v):
        e += 1
    return min(max(e + 127, 0), 254)


def e8m0_floor(amax, emax_elem, round_bits=None):
    """floor(log2 amax) - emax_elem clamped to -127..127; EVEN first rounds amax to round_bits
    mantissa bits with ties up (as a real number: 2^128 is allowed)."""
    if not is_finite(amax):
        return 0xFF
    if amax == 0:
        return 0x00
    a = Fraction(amax)
    if round_bits is not None:
        quantum = Fraction(2) ** (floor_log2(a) - round_bits)
        n = a / quantum
        r = math.floor(n) + (1 if n - math.floor(n) >= Fraction(1, 2) else 0)
        a = r * quantum
    return min(max(floor_log2(a) - emax_elem, -127), 127) + 127


# ---- the recipes (SPEC section 2's table) ---------------------------------------------------------

MX = {"mxfp4": (6.0, 2, 1), "mxfp8_e4m3": (448.0, 8, 3), "mxfp8_e5m2": (57344.0, 15, 2)}


def global_scale(recipe, amax):
    if recipe == "torchao":
        return div(amax, 2688.0)
    g = div(2688.0, amax)
    if recipe != "te":
        return g
    g = min(g, FLT_MAX)
    return 1.0 if amax == 0 or g == 0 else g


def nvfp4_block(recipe, gs, amax_b):
    """(scale byte, encode factor os) of one block."""
    if recipe == "te":
        sf32 = mul(amax_b, mul(gs, C6))
        if sf32 > FLT_MAX:
            sf32 = FLT_MAX
        byte = fp8(E4M3, sf32)
        os_ = div(1.0, mul(e4m3_value(byte), div(1.0, gs)))
        return byte, (FLT_MAX if os_ > FLT_MAX else os_)
    if recipe in ("ref", "fast"):
        byte = fp8(E4M3, mul(gs, mul(amax_b, C6)))
        sf = e4m3_value(byte)
        guard = amax_b != 0 if recipe == "fast" else sf != 0
        return byte, (div(1.0, mul(sf, div(1.0, gs))) if guard else 0.0)
    s = div(div(amax_b, 6.0), gs)  # torchao: gs is the decode scale pts
    if s < 2.0**-6:
        s = 2.0**-6
    if s > 448.0:
        s = 448.0
    byte = fp8(E4M3, s)
    return byte, div(div(1.0, gs), e4m3_value(byte))


def mx_block(recipe, fmt, amax_b):
    emax_val, emax_elem, mbits = MX[fmt]
    if recipe == "mx_rceil":
        byte = e8m0_rceil(mul(amax_b, div(1.0, emax_val)))
    else:
        byte = e8m0_floor(amax_b, emax_elem, mbits if recipe == "mx_even" else None)
    return byte, (NAN if byte == 0xFF else float(Fraction(2) ** (127 - byte)))


def encode(fmt, y):
    if fmt == "mxfp8_e4m3":
        return fp8(E4M3, y)
    if fmt == "mxfp8_e5m2":
        return fp8(E5M2, y)
    return e2m1(y)


def amax_of(values):
    return max([abs(v) for v in values if not math.isnan(v)], default=0.0)


def quantize(case):
    """expect_q (bytes) and expect_sfq (linear) of a case dict."""
    fmt, recipe, m, k, l, x = case["format"], case["recipe"], case["m"], case["k"], case["l"], case["x"]
    bs = 16 if fmt == "nvfp4" else 32
    kb = (k + bs - 1) // bs
    rows = 16 if case.get("quant_2d") else 1
    row = lambda b, i: x[(b * m + i) * k:(b * m + i + 1) * k]
    if fmt == "nvfp4" and case.get("row_global_scale"):
        gs = {(b, i): global_scale(recipe, amax_of(row(b, i))) for b in range(l) for i in range(m)}
    elif fmt == "nvfp4":
        g = global_scale(recipe, amax_of(x))
        gs = {(b, i): g for b in range(l) for i in range(m)}
    codes, sfq = [0] * (l * m * k), [0] * (l * m * kb)
    for b in range(l):
        for i in range(m):
            t0 = i // rows * rows
            for s in range(kb):
                tile = [v for r in range(t0, min(t0 + rows, m)) for v in row(b, r)[s * bs:(s + 1) * bs]]
                amax_b = amax_of(tile)
                byte, os_ = nvfp4_block(recipe, gs[(b, i)], amax_b) if fmt == "nvfp4" else mx_block(recipe, fmt, amax_b)
                sfq[(b * m + i) * kb + s] = byte
                for c in range(s * bs, min(s * bs + bs, k)):
                    codes[(b * m + i) * k + c] = encode(fmt, mul(row(b, i)[c], os_))
    if fmt in ("nvfp4", "mxfp4"):
        q = [codes[2 * j] | codes[2 * j + 1] << 4 for j in range(len(codes) // 2)]
    else:
        q = codes
    return q, sfq


# ---- input words ------------------------------------------------------------------------------


def rn_bits(v, precision):
    """v rounded to `precision` significant bits (binary32's exponent range; bf16 is 8, FP16 is
    handled by struct below), ties to even; keeps Inf, NaN and the sign of zero."""
    if not is_finite(v) or v == 0:
        return v
    a = Fraction(abs(v))
    quantum = Fraction(2) ** (max(floor_log2(a), -126) - (precision - 1))
    r = float(round(a / quantum) * quantum)
    return math.copysign(r, v)


def word(in_type, v):
    """The input word of an exactly representable value, as hex."""
    if in_type == "fp32":
        w = struct.unpack("<I", struct.pack("<f", v))[0]
        assert math.isnan(v) or struct.unpack("<f", struct.pack("<I", w))[0] == v
        return f"{w:08x}"
    if in_type == "fp16":
        w = struct.unpack("<H", struct.pack("<e", v))[0]
        assert math.isnan(v) or struct.unpack("<e", struct.pack("<H", w))[0] == v, v
        return f"{w:04x}"
    w = struct.unpack("<I", struct.pack("<f", v))[0]
    assert math.isnan(v) or w & 0xFFFF == 0, f"{v} is not a bf16 value"
    return f"{w >> 16:04x}"


def representable(in_type, v):
    if in_type == "fp32":
        return rn_bits(v, 24)
    if in_type == "bf16":
        return rn_bits(v, 8)
    if not is_finite(v):
        return v
    return struct.unpack("<e", struct.pack("<e", v))[0] if abs(v) < 65520 else math.copysign(INF, v)


def write_case(path, case):
    q, sfq = quantize(case)
    lines = ["# nvfp4check case v1",
             "# Expected bytes from scripts/make_quantize_cases.py (exact Fraction arithmetic, SPEC section 2).",
             "op = quantize", f"m = {case['m']}", "n = 1", f"k = {case['k']}", f"l = {case['l']}",
             f"sf_layout = {case.get('sf_layout', 'permuted')}", f"in_type = {case['in_type']}",
             f"format = {case['format']}", f"recipe = {case['recipe']}"]
    if case.get("quant_2d"):
        lines.append("quant_2d = true")
    if case.get("row_global_scale"):
        lines.append("row_global_scale = true")
    if "stochastic_seed" in case:
        lines.append(f"stochastic_seed = {case['stochastic_seed']}")
    lines.append(f"note = {case['note']}")
    lines.append("x = " + " ".join(word(case["in_type"], v) for v in case["x"]))
    lines.append("expect_q = " + "".join(f"{b:02x}" for b in q))
    lines.append("expect_sfq = " + "".join(f"{b:02x}" for b in sfq))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ---- the data sets ----------------------------------------------------------------------------

NVFP4_RECIPES = ("te", "ref", "fast", "torchao")
MX_RECIPES = ("mx_rceil", "mx_floor", "mx_even")
E2M1_BOUNDARIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def neighbours(in_type, v):
    """v and the input type's values next to it."""
    up = representable(in_type, v * (1 + 2.0**-7 if in_type == "bf16" else 1 + 2.0**-10))
    down = representable(in_type, v * (1 - 2.0**-8 if in_type == "bf16" else 1 - 2.0**-11))
    return [down, v, up]


def e2m1_boundaries(in_type):
    """Row 0 holds 2688 (so every recipe's global scale is 1 and a block of amax 6 has os = 1);
    rows 1-2 put every E2M1 decision boundary of x*os, and its neighbours, in blocks of amax 6."""
    k = 32
    r0 = [2688.0] + [0.0] * (k - 1)
    vals = [s * v for v in E2M1_BOUNDARIES for v in neighbours(in_type, v) for s in (1, -1)]
    rest = [6.0] + vals
    rest += [0.0] * (2 * k - len(rest))
    rest[k] = -6.0
    return dict(m=3, k=k, l=1, in_type=in_type, x=r0 + rest,
                note="every E2M1 decision boundary of x*os (os = 1) and its neighbours")


def association_ties(in_type):
    """Blocks whose scale byte differs between amax_b * RN(gs * c6) (te) and gs * RN(amax_b * c6)
    (ref, fast): found by search over the input type's values; each sits on an E4M3 decision point."""
    # amax 448 makes gs = 6 exactly, so te's scale is amax_b itself and an E4M3 midpoint amax_b
    # is an exact tie, which ref's rounded RN(amax_b * c6) * 6 moves off (QR section 8.3).
    amax_t = 448.0
    gs = global_scale("ref", amax_t)
    found = []
    v = representable(in_type, 0.01)
    while v < amax_t and len(found) < 12:
        te = fp8(E4M3, mul(v, mul(gs, C6)))
        rf = fp8(E4M3, mul(gs, mul(v, C6)))
        if te != rf:
            found.append(v)
        v = representable(in_type, math.nextafter(v, INF) if in_type == "fp32" else v * (1 + 2.0**-7 if in_type == "bf16" else 1 + 2.0**-10))
    assert found, "no association tie found"
    k = 16 * (len(found) + 1)
    x = [amax_t] + [0.0] * 15
    for a in found:
        x += [a, -a / 2, a / 3, 0.5 * a] + [representable(in_type, a * f) for f in (0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9, 0.45, 0.55, 0.65, 0.75)]
    x = [representable(in_type, v) for v in x]
    return dict(m=1, k=k, l=1, in_type=in_type, x=x,
                note="block maxima where the two associations of the scale product round to different E4M3 bytes")


def small_scales():
    """FP32 blocks whose scales land in E4M3 subnormals, exactly on 2^-10 (a tie to 0), just
    above it, and below: te gives os = FLT_MAX, ref os = 0, fast os = Inf (codes +-6, 0 -> +6)."""
    x = [2688.0] + [1.0] * 15
    for sf in (2.0**-6, 2.0**-7, 3 * 2.0**-9, 2.0**-9, 2.0**-10 * 1.5, 2.0**-10, 2.0**-10 * 1.0001, 2.0**-12):
        amax_b = rn_bits(6 * sf, 24)
        x += [amax_b, -amax_b, amax_b / 2, amax_b / 4, 0.0, -0.0, amax_b / 3] + [amax_b * f for f in (0.1, 0.7, 0.9, 0.33, 0.66, 0.25, 0.75, 0.8, 0.125)]
    x = [rn_bits(v, 24) for v in x]
    return dict(m=1, k=len(x), l=1, in_type="fp32", x=x, note="E4M3 subnormal scales, the 2^-10 tie and zero scales")


def clamp_448(in_type):
    """Tensors whose global scale rounds so that the largest block's scale lands above 448 (the
    satfinite clamp), found by search, next to others that stay below."""
    found = []
    v = representable(in_type, 1.0)
    while len(found) < 3 and v < 60000:
        for recipe in ("te", "ref"):
            gs = global_scale(recipe, v)
            sf32 = mul(v, mul(gs, C6)) if recipe == "te" else mul(gs, mul(v, C6))
            if sf32 > 448 and v not in found:
                found.append(v)
        v = representable(in_type, v * (1 + 2.0**-7 if in_type == "bf16" else 1 + 2.0**-10))
    assert found
    x = []
    for a in found:  # one row per tensor amax: per-row global scales make each its own tensor
        x += [a, -a * 0.5, a * 0.75, a * 0.9] + [a * 0.01 * j for j in range(1, 13)] + [a * 0.99] + [a * 0.3] * 15
    x = [representable(in_type, v) for v in x]
    return dict(m=len(found), k=32, l=1, in_type=in_type, x=x, row_global_scale=True,
                note="row amaxes whose global scale puts the scale above 448 (clamped)")


def zero_tensor():
    x = [0.0, -0.0] * 16
    return dict(m=2, k=16, l=1, in_type="bf16", x=x, note="an all-zero tensor (global amax 0) with -0 elements")


def nan_tensor():
    return dict(m=1, k=32, l=1, in_type="bf16", x=[NAN] * 32,
                note="an all-NaN tensor: NaN elements are ignored, so the global amax is 0")


def inf_element():
    x = [1.0, -2.0, 0.5, 3.0] * 4 + [INF, 1.0, -0.0, 2.0] + [0.25] * 12 + [0.0] * 16 + [-INF] + [5.0] * 15
    return dict(m=2, k=32, l=1, in_type="fp16", x=x, note="Inf elements: the global amax is Inf; zero blocks")


def special_elements():
    x = [NAN, 1.0, -1.0, -0.0, 0.0, 2.0, -3.0, 6.0] * 2 + [-0.0] * 15 + [NAN] + [NAN] * 16 + [7.0, NAN, -7.0, 0.1] * 4
    return dict(m=2, k=32, l=1, in_type="bf16", x=[representable("bf16", v) for v in x],
                note="NaN elements (ignored by every amax), -0, an all-NaN block and a -0-only block")


def random_values(rng, in_type, n, spread=3.0, specials=True):
    out = []
    for _ in range(n):
        r = rng.random()
        if specials and r < 0.03:
            out.append(rng.choice([0.0, -0.0]))
        elif specials and r < 0.04:
            out.append(NAN)
        else:
            out.append(representable(in_type, rng.gauss(0, 1) * math.exp(rng.uniform(-spread, spread))))
    return out


def odd_k(rng, in_type):
    m, k, l = 3, 40, 2
    return dict(m=m, k=k, l=l, in_type=in_type, x=random_values(rng, in_type, m * k * l), sf_layout="linear",
                note="k = 40 (a short last block), two batches, random magnitudes with NaN and -0")


def row_scales(rng):
    x = []
    for i in range(5):
        x += [v * 10.0 ** (3 * i - 6) for v in random_values(rng, "fp32", 48, 1.0, False)]
    x = [rn_bits(v, 24) for v in x]
    return dict(m=5, k=48, l=1, in_type="fp32", x=x, row_global_scale=True,
                note="per-row global scales over rows 10^-6 .. 10^6 apart")


def tiles_2d(rng):
    m, k = 20, 48
    x = random_values(rng, "bf16", m * k, 2.0)
    x[5 * k + 20] = 300.0  # one large element decides its whole 16 x 16 tile
    x[17 * k + 3] = -0.002
    return dict(m=m, k=k, l=1, in_type="bf16", x=[representable("bf16", v) for v in x], quant_2d=True,
                note="16 x 16 tiles: amax over the tile, with a partial tile of 4 rows")


def mx_edges(fmt):
    emax_val = MX[fmt][0]
    blocks = [
        [0.0] * 16 + [-0.0] * 16,                                            # amax 0
        [2.0**-140, -2.0**-145] + [0.0] * 30,                               # tiny: at or below 2^-127
        [emax_val * 2.0**-127 * 1.5] + [2.0**-149] * 31,                    # around the 2^-127 limit
        [INF, 1.0, -1.0, 0.0] + [2.0] * 28,                                 # Inf amax
        [emax_val, emax_val / 2, -emax_val / 3] + [1.0] * 29,               # an exact power-of-two scale
        [rn_bits(emax_val * (1 + 2.0**-20), 24)] + [0.5] * 31,              # just above it: rceil rounds up
        [1.75 * 4, 1.7 * 4, -0.3] + [0.1] * 29,                             # EVEN's fp4 carry point (1.75)
        [rn_bits(4 * (1.75 - 2.0**-20), 24), 2.0] + [0.2] * 30,             # just below it
        [1.9375 * 8, 1.875 * 8, 1.0] + [0.3] * 29,                          # EVEN's e4m3 (1.9375) and e5m2 (1.875) points
        [FLT_MAX, -FLT_MAX / 3, 1.0] + [2.0**100] * 29,                     # the largest finite amax
        [NAN, 3.0, -12.5, NAN] + [0.7] * 28,                                # NaN elements ignored
        [emax_val * 1.5, emax_val * 1.25, emax_val * 1.1, emax_val] + [emax_val * 0.6] * 28,  # FLOOR clips
    ]
    x = [rn_bits(v, 24) for b in blocks for v in b]
    return dict(m=len(blocks), k=32, l=1, in_type="fp32", x=x, sf_layout="linear",
                note="E8M0 edges: zero, tiny, Inf, NaN elements, exact powers of two, EVEN's carry points, FLT_MAX")


def mx_random(rng, fmt, in_type):
    m, k = 3, 50 if fmt == "mxfp4" else 45
    return dict(m=m, k=k, l=1, in_type=in_type, x=random_values(rng, in_type, m * k),
                note="random magnitudes, k not a multiple of 32, NaN and -0")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "corpus", "quantize")
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(20261202)
    nvfp4_sets = [("e2m1_boundaries_bf16", e2m1_boundaries("bf16")), ("e2m1_boundaries_fp16", e2m1_boundaries("fp16")),
                  ("association_ties_bf16", association_ties("bf16")), ("association_ties_fp16", association_ties("fp16")),
                  ("small_scales_fp32", small_scales()), ("clamp_448_bf16", clamp_448("bf16")),
                  ("zero_tensor", zero_tensor()), ("nan_tensor", nan_tensor()), ("inf_elements_fp16", inf_element()),
                  ("nan_neg0_elements", special_elements()), ("k40_l2_fp16", odd_k(rng, "fp16")),
                  ("k40_l2_fp32", odd_k(rng, "fp32")), ("row_scales_fp32", row_scales(rng)), ("tiles_2d_m20", tiles_2d(rng))]
    written = 0
    for name, data in nvfp4_sets:
        for recipe in NVFP4_RECIPES:
            write_case(os.path.join(out_dir, f"{recipe}_{name}.case"), dict(data, format="nvfp4", recipe=recipe))
            written += 1
    sr = dict(odd_k(random.Random(7), "bf16"), format="nvfp4", recipe="te", stochastic_seed=7,
              note="stochastic rounding: the reference holds the round-to-nearest codes")
    write_case(os.path.join(out_dir, "te_stochastic_bf16.case"), sr)
    written += 1
    for fmt in MX:
        for recipe in MX_RECIPES:
            for name, data in [("edges_fp32", mx_edges(fmt)), ("random_bf16", mx_random(rng, fmt, "bf16")),
                               ("random_fp16", mx_random(rng, fmt, "fp16"))]:
                write_case(os.path.join(out_dir, f"{fmt}_{recipe}_{name}.case"), dict(data, format=fmt, recipe=recipe))
                written += 1
    print(f"wrote {written} cases to {out_dir}")


if __name__ == "__main__":
    main()
