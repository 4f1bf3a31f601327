/*
 * The element types' conversions to and from float, shared by the KV
 * programs (cl/kv_cache.cl and cl/attention_common.cl include it). Bit
 * operations, so that they are exact on every device: OpenCL C 1.2 has no
 * bf16 or fp8, and half arithmetic is optional. float holds fp16, bf16
 * and fp8 e4m3fn values exactly.
 */
#pragma once

/* ---- to float: exact for every type ----------------------------------- */

static float half_to_float(ushort h) {
  uint sign = (uint)(h & 0x8000u) << 16;
  uint exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) /* zero or subnormal: mantissa x 2^-24, exact */
    return as_float(as_uint((float)mantissa * 0x1p-24f) | sign);
  if (exponent == 31) /* infinity or NaN, payload kept */
    return as_float(sign | 0x7f800000u | (mantissa << 13));
  return as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/* e4m3fn to float, exact: bias 7, subnormals 2^-9 apart, 0x7f and 0xff
   NaN (no infinity). */
static float e4m3_to_float(uchar bits) {
  uint magnitude = bits & 0x7fu;
  float value = (magnitude >> 3) == 0
                    ? (float)magnitude * 0x1p-9f
                    : as_float(((magnitude >> 3) + 120u) << 23 |
                               (magnitude & 7u) << 20);
  value = magnitude == 0x7fu ? as_float(0x7fc00000u) : value;
  return bits & 0x80u ? -value : value;
}

/* bf16 to float: its 16 bits are float's top half. */
static float bfloat16_to_float(ushort bits) {
  return as_float((uint)bits << 16);
}

/* ---- from float ------------------------------------------------------- */

/* fp16, rounded to nearest even; overflow to infinity, NaN to the quiet
   NaN 0x7e00 with its sign (as torch's conversion). */
static ushort float_to_half(float x) {
  uint bits = as_uint(x);
  uint sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return (ushort)(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) /* 65520 and up round past 65504 */
    return (ushort)(sign | 0x7c00u);
  if (magnitude < 0x38800000u) { /* below 2^-14: a subnormal, in 2^-24s */
    float scaled = as_float(magnitude) * 0x1p24f; /* exact */
    return (ushort)(sign | (uint)rint(scaled));
  }
  /* Rebias, then round the 13 dropped bits to nearest even. */
  uint kept = magnitude - 0x38000000u;
  uint rounded = kept + 0x0fffu + ((kept >> 13) & 1u);
  return (ushort)(sign | (rounded >> 13));
}

/* bf16, rounded to nearest even; NaN to 0x7fc0 (as torch's). */
static ushort float_to_bfloat16(float x) {
  uint bits = as_uint(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (ushort)0x7fc0u;
  return (ushort)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* e4m3fn, rounded to nearest even and saturated: above 464 (448 plus half
   its ulp) and infinity give +-448, NaN gives 0x7f, as CUDA's
   __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) does. */
static uchar float_to_e4m3(float x) {
  uint bits = as_uint(x);
  uint sign = (bits >> 24) & 0x80u, magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return (uchar)0x7fu;
  if (magnitude > 0x43e80000u) return (uchar)(sign | 0x7eu);
  if (magnitude < 0x3c800000u) { /* below 2^-6: a subnormal, in 2^-9s */
    float scaled = as_float(magnitude) * 0x1p9f; /* exact */
    return (uchar)(sign | (uint)rint(scaled));
  }
  uint kept = magnitude - 0x3c000000u; /* rebias 127 to 7 */
  uint rounded = kept + 0x7ffffu + ((kept >> 20) & 1u);
  return (uchar)(sign | (rounded >> 20));
}
