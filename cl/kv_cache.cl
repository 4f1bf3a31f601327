/*
 * The KV-cache write, vLLM's reshape_and_cache_flash: token t's key and
 * value go to slot slot_mapping[t] of a paged cache (cl/kv_cache.h says
 * where each element is). A slot of -1 (any negative one, as vLLM skips
 * them) is skipped; a slot not below num_slots is skipped and counted in
 * the rejected-token counter. Each token gets `lanes` work-items, which
 * move its chunks in turn: a GPU gives a token one or more warps along its
 * heads, so that loads and stores are whole lines; a CPU gives each of a
 * few work-items whole tokens (PoCL pays a large fixed cost per
 * work-group). docs/semantics.md, "The KV-cache write", has every rule.
 *
 * Elements travel as their bits: a write between two caches of one type
 * is a copy, whatever the bits are. Across types a value goes through
 * float, which holds fp16 and bf16 exactly: fp16 and bf16 are rounded to
 * nearest even from it with the bit operations below (OpenCL C 1.2 has no
 * bf16, and half arithmetic is optional), and fp8 (e4m3fn, as vLLM's fp8
 * cache and CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE) takes the
 * value divided by its scale, rounded to nearest even, saturated at 448.
 */
#include "kv_cache.h"

#if CLBT_KV_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define CLBT_KV_CAT_(a, b) a##b
#define CLBT_KV_CAT(a, b) CLBT_KV_CAT_(a, b)

/* Each type's bits. */
#define CLBT_KV_BITS_1 uint
#define CLBT_KV_BITS_2 ushort
#define CLBT_KV_BITS_3 ushort
#define CLBT_KV_BITS_4 uchar
#define CLBT_KV_IN CLBT_KV_CAT(CLBT_KV_BITS_, CLBT_KV_INPUT)
#define CLBT_KV_OUT CLBT_KV_CAT(CLBT_KV_BITS_, CLBT_KV_CACHE)

/* A chunk of each side: a vector of CLBT_KV_CHUNK elements' bits. */
#if CLBT_KV_CHUNK == 1
#define CLBT_KV_IN_CHUNK CLBT_KV_IN
#define CLBT_KV_OUT_CHUNK CLBT_KV_OUT
#else
#define CLBT_KV_IN_CHUNK CLBT_KV_CAT(CLBT_KV_IN, CLBT_KV_CHUNK)
#define CLBT_KV_OUT_CHUNK CLBT_KV_CAT(CLBT_KV_OUT, CLBT_KV_CHUNK)
#define CLBT_KV_VSTORE CLBT_KV_CAT(vstore, CLBT_KV_CHUNK)
#define CLBT_KV_VLOAD CLBT_KV_CAT(vload, CLBT_KV_CHUNK)
#endif

/* The conversions, for a kernel between two types (fp8 K/V are only ever
   copied to an fp8 cache). */
#if CLBT_KV_INPUT != CLBT_KV_CACHE

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

static float to_float(CLBT_KV_IN bits) {
#if CLBT_KV_INPUT == CLBT_KV_TYPE_FLOAT32
  return as_float(bits);
#elif CLBT_KV_INPUT == CLBT_KV_TYPE_FLOAT16
  return half_to_float(bits);
#elif CLBT_KV_INPUT == CLBT_KV_TYPE_BFLOAT16
  return as_float((uint)bits << 16);
#endif
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

/* x / scale, rounded once to float: through double when the device has it
   (exact: 53 bits hold a quotient of 24-bit values rounded twice without
   harm), else the device's float division. */
static float quotient(float x, float scale) {
#if CLBT_KV_FP64
  return (float)((double)x / (double)scale);
#else
  return x / scale;
#endif
}

static CLBT_KV_OUT convert(CLBT_KV_IN bits, float scale) {
#if CLBT_KV_CACHE == CLBT_KV_TYPE_FP8_E4M3
  return float_to_e4m3(quotient(to_float(bits), scale));
#elif CLBT_KV_CACHE == CLBT_KV_TYPE_FLOAT32
  (void)scale;
  return as_uint(to_float(bits));
#elif CLBT_KV_CACHE == CLBT_KV_TYPE_FLOAT16
  (void)scale;
  return float_to_half(to_float(bits));
#else
  (void)scale;
  return float_to_bfloat16(to_float(bits));
#endif
}

#endif /* CLBT_KV_INPUT != CLBT_KV_CACHE */

/* One chunk: its bits as they are, or each element converted. */
static CLBT_KV_OUT_CHUNK convert_chunk(CLBT_KV_IN_CHUNK in, float scale) {
#if CLBT_KV_INPUT == CLBT_KV_CACHE
  (void)scale;
  return in;
#elif CLBT_KV_CHUNK == 1
  return convert(in, scale);
#else
  CLBT_KV_IN elements[CLBT_KV_CHUNK];
  CLBT_KV_OUT converted[CLBT_KV_CHUNK];
  CLBT_KV_VSTORE(in, 0, elements);
  for (uint e = 0; e < CLBT_KV_CHUNK; ++e)
    converted[e] = convert(elements[e], scale);
  return CLBT_KV_VLOAD(0, converted);
#endif
}

__kernel void kv_cache_write(clbt_kv_arguments a,
                             __global const CLBT_KV_IN_CHUNK *key,
                             __global const CLBT_KV_IN_CHUNK *value,
                             __global const long *slot_mapping,
                             __global CLBT_KV_OUT_CHUNK *key_cache,
                             __global CLBT_KV_OUT_CHUNK *value_cache,
                             __global uint *rejected) {
  const uint lanes = a.lanes;
  const uint lane = (uint)get_global_id(0) & (lanes - 1u);
  const uint first = (uint)get_global_id(0) / lanes;
  const uint step = (uint)get_global_size(0) / lanes;
  const uint chunks_per_head = a.head_size / CLBT_KV_CHUNK;
  for (uint t = first; t < a.num_tokens; t += step) {
    long slot = slot_mapping[a.slots_at + t];
    if (slot < 0) continue;
    if ((ulong)slot >= a.num_slots) {
      if (lane == 0) atomic_inc(rejected);
      continue;
    }
    /* 32-bit division where the slots fit (every cache but a huge one):
       a GPU divides 64-bit integers in software. */
    ulong block, page;
    if (a.num_slots <= 0xffffffffUL) {
      block = (uint)slot / a.block_size;
      page = (uint)slot % a.block_size;
    } else {
      block = (ulong)slot / a.block_size;
      page = (ulong)slot % a.block_size;
    }
    ulong page_at = block * a.block_stride + page * a.page_stride;
    ulong key_row = a.key_at + t * a.key_stride;
    ulong value_row = a.value_at + t * a.value_stride;
    for (uint c = lane; c < a.chunks; c += lanes) {
      uint head = c / chunks_per_head;
      ulong element = (ulong)c * CLBT_KV_CHUNK;
      ulong at = page_at + head * a.head_stride +
                 (element - (ulong)head * a.head_size);
      key_cache[(a.key_cache_at + at) / CLBT_KV_CHUNK] = convert_chunk(
          key[(key_row + element) / CLBT_KV_CHUNK], a.k_scale);
      value_cache[(a.value_cache_at + at) / CLBT_KV_CHUNK] = convert_chunk(
          value[(value_row + element) / CLBT_KV_CHUNK], a.v_scale);
    }
  }
}
