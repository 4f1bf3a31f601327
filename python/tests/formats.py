"""The tests' own number formats, by their definitions, never through
clbt: bf16 (8 significant bits, ties to even) and fp8 e4m3fn (the nearest
of its finite values, ties to the even code, |x| past 448 saturated; bias
7, no infinity, 0x7f and 0xff NaN)."""
import numpy as np


def _e4m3_values():
    """The value of every e4m3fn code below 0x7f, 0 .. 448."""
    codes = np.arange(0x7F)
    exponent, mantissa = codes >> 3, codes & 7
    return np.where(exponent == 0, mantissa * 2.0**-9,
                    (1 + mantissa / 8.0) * 2.0**(exponent - 7.0))


E4M3 = _e4m3_values()


def to_e4m3(q):
    """float32 values as e4m3fn codes: nearest, ties to the even code,
    saturated at 448 (CUDA's __NV_SATFINITE), NaN 0x7f."""
    q = np.asarray(q, np.float64)
    a = np.minimum(np.abs(q), 448.0)
    high = np.clip(np.searchsorted(E4M3, a), 0, 0x7E)
    low = np.maximum(high - 1, 0)
    below, above = a - E4M3[low], E4M3[high] - a
    code = np.where(below < above, low, np.where(above < below, high,
                                                 np.where(low % 2 == 0, low, high)))
    code = np.where(np.signbit(q), code | 0x80, code)
    return np.where(np.isnan(q), 0x7F, code).astype(np.uint8)


def to_bf16(x):
    """float32 values (finite, normal) as bf16 bits: 8 significant bits."""
    m, e = np.frexp(np.asarray(x, np.float64))
    rounded = np.ldexp(np.rint(m * 256.0) / 256.0, e).astype(np.float32)
    return (rounded.view(np.uint32) >> 16).astype(np.uint16)


def from_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def from_e4m3(codes):
    """e4m3fn codes as their float64 values (0x7f and 0xff: NaN)."""
    codes = np.asarray(codes, np.uint8)
    magnitude = np.append(E4M3, np.nan)[codes & 0x7F]
    return np.where(codes & 0x80, -magnitude, magnitude)
