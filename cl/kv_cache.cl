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
 * nearest even from it with the bit operations of cl/kv_types.cl (OpenCL
 * C 1.2 has no bf16, and half arithmetic is optional), and fp8 (e4m3fn, as vLLM's fp8
 * cache and CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE) takes the
 * value divided by its scale, rounded to nearest even, saturated at 448.
 */
#include "kv_cache.h"
#include "kv_types.cl"

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
   copied to an fp8 cache; cl/kv_types.cl has each type's). */
#if CLBT_KV_INPUT != CLBT_KV_CACHE

static float to_float(CLBT_KV_IN bits) {
#if CLBT_KV_INPUT == CLBT_KV_TYPE_FLOAT32
  return as_float(bits);
#elif CLBT_KV_INPUT == CLBT_KV_TYPE_FLOAT16
  return half_to_float(bits);
#elif CLBT_KV_INPUT == CLBT_KV_TYPE_BFLOAT16
  return bfloat16_to_float(bits);
#endif
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

/* One parameter of the kernel's list (cl/kv_cache.h). */
#define CLBT_KV_PARAMETER(NAME, type, name) , type name

__kernel void clbt_kv_cache_write(
    clbt__kv_arguments a CLBT_KV_WRITE_ARGUMENTS(CLBT_KV_PARAMETER)) {
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
      block = (uint)slot / a.pages.block_size;
      page = (uint)slot % a.pages.block_size;
    } else {
      block = (ulong)slot / a.pages.block_size;
      page = (ulong)slot % a.pages.block_size;
    }
    ulong key_row = a.key_at + t * a.key_stride;
    ulong value_row = a.value_at + t * a.value_stride;
    for (uint c = lane; c < a.chunks; c += lanes) {
      uint head = c / chunks_per_head;
      ulong element = (ulong)c * CLBT_KV_CHUNK;
      ulong within = element - (ulong)head * a.head_size;
      key_cache[(clbt_kv_pages_key(a.pages, block, page, head) + within) /
                CLBT_KV_CHUNK] =
          convert_chunk(key[(key_row + element) / CLBT_KV_CHUNK], a.k_scale);
      value_cache[(clbt_kv_pages_value(a.pages, block, page, head) + within) /
                  CLBT_KV_CHUNK] =
          convert_chunk(value[(value_row + element) / CLBT_KV_CHUNK],
                        a.v_scale);
    }
  }
}
