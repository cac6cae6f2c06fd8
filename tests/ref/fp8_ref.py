"""A reference for OCP 8-bit floating point (e4m3fn and e5m2), built from
the formats' definitions, not from bit tricks, for the fp8 checks (ref.fp8).

- decode(fmt): the 256 codes as float64, by sign, exponent and mantissa
  fields (e4m3fn: bias 7, no infinities, S.1111.111 NaN, max 448; e5m2:
  bias 15, IEEE infinities and NaNs, max 57344).
- quantize(x, fmt): float64 values to codes, to the nearest finite value,
  ties to the code with an even mantissa (round to nearest even);
  saturating as PTX's cvt.satfinite: finite values past the largest, and
  infinities, give the largest; NaN gives 0x7f (with x's sign bit).
- scale_exp(amax, fmt): mlc's power-of-two scale, floor(log2(fmax /
  max(amax, 1e-12))), the quotient rounded to float32 first as every target
  computes it (ir/ir.h, mlc_f8_scale_exp).
- quant(x, amax, fmt): what the quant op gives: quantize(x * 2^e), or NaN
  codes everywhere when amax is NaN or infinite.

numpy only (Debian's torch 1.13 has no float8 dtypes)."""
import numpy as np

FORMATS = {"e4m3": (4, 3, 7, 448.0), "e5m2": (5, 2, 15, 57344.0)}


def decode(fmt):
    ebits, mbits, bias, _ = FORMATS[fmt]
    out = np.empty(256)
    for c in range(256):
        sign = -1.0 if c & 0x80 else 1.0
        e, m = (c >> mbits) & ((1 << ebits) - 1), c & ((1 << mbits) - 1)
        top = (1 << ebits) - 1
        if fmt == "e4m3" and e == top and m == (1 << mbits) - 1:
            v = np.nan
        elif fmt == "e5m2" and e == top:
            v = np.inf if m == 0 else np.nan
        elif e == 0:
            v = m * 2.0 ** (1 - bias - mbits)
        else:
            v = (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias)
        out[c] = sign * v
    return out


def quantize(x, fmt):
    x = np.asarray(x, dtype=np.float64)
    table = decode(fmt)
    fmax = FORMATS[fmt][3]
    finite = [c for c in range(128) if np.isfinite(table[c])]
    assert finite == list(range(len(finite))), "non-negative finite codes must be 0.. in order"
    vals = table[: len(finite)]
    assert np.all(np.diff(vals) > 0)
    a = np.minimum(np.abs(x), fmax)  # saturate (inf too); NaN stays NaN
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    hi = np.clip(np.searchsorted(vals, a, side="left"), 0, len(vals) - 1)  # vals[hi] >= a
    lo = np.clip(hi - 1, 0, len(vals) - 1)
    dlo, dhi = a - vals[lo], vals[hi] - a
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(vals[hi] == a, hi, code)
    code = np.where(nan, 0x7F, code).astype(np.uint8)
    return code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)


def scale_exp(amax, fmt):
    fmax = np.float32(FORMATS[fmt][3])
    a = np.float32(amax)
    r = fmax / (a if a > np.float32(1e-12) else np.float32(1e-12))
    return int(np.frexp(np.float64(r))[1]) - 1


def quant(x, amax, fmt):
    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(amax):
        return np.full(x.shape, 0x7F, np.uint8) | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    return quantize(x * 2.0 ** scale_exp(amax, fmt), fmt)


def dequant(codes, amax, fmt):
    """The values a scaled_mm multiplies: decode(codes) * 2^-e."""
    return decode(fmt)[np.asarray(codes)] * 2.0 ** -scale_exp(amax, fmt)
