/*
 * The contract between the host (src/kv/) and the KV-cache write
 * kernel (cl/kv_cache.cl): the element types it converts between, the -D
 * options that specialise it, and the one struct it takes by value. The
 * library includes this file, and so do the kernels (cl/kv_cache.cl, and
 * the attention's through cl/attention.h), so that both sides declare the
 * same struct and argument list. It holds only preprocessor
 * definitions, an enum and a struct in the common subset of C11 and
 * OpenCL C 1.2 (every field on its own size, no padding, so that both
 * sides lay it out alike).
 *
 * The kernel is built once per (input type, cache type, chunk) with
 *   -DCLBT_KV_INPUT=<type> -DCLBT_KV_CACHE=<type> -DCLBT_KV_CHUNK=<n>
 *   -DCLBT_KV_FP64=<0 or 1>
 * where a type is a CLBT_KV_TYPE_* value, equal to clbt_kv_dtype's, and a
 * chunk is the elements one work-item moves at a time (1, 2, 4, 8 or 16,
 * every offset and stride a multiple of it); CLBT_KV_FP64 says whether the
 * device has doubles, for the fp8 quotient.
 */
#ifndef CLBT_KV_CACHE_CONTRACT_H
#define CLBT_KV_CACHE_CONTRACT_H

/* The element types (clbt_kv_dtype's values). */
#define CLBT_KV_TYPE_FLOAT32 1
#define CLBT_KV_TYPE_FLOAT16 2
#define CLBT_KV_TYPE_BFLOAT16 3
#define CLBT_KV_TYPE_FP8_E4M3 4

/* The most elements, and bytes, a chunk holds. */
#define CLBT_KV_MAX_CHUNK 16
#define CLBT_KV_CHUNK_BYTES 16

#ifdef __OPENCL_VERSION__
#ifndef CLBT_KERNEL_HOST_TYPES /* the kernel's names for the host's types */
#define CLBT_KERNEL_HOST_TYPES
typedef uint cl_uint;
typedef ulong cl_ulong;
typedef float cl_float;
#endif
#endif
#include "clbt/clbt_kv_pages.h"

/*
 * A write's arguments by value: where everything is, in elements of its
 * buffer's type, and the batch. Token t's element e of head h (of
 * num_kv_heads x head_size, heads contiguous) is read at
 * key_at + t x key_stride + h x head_size + e, and written, for slot s of
 * block b = s / block_size and page p = s % block_size, where the cache's
 * pages say (clbt_kv_pages_key, include/clbt/clbt_kv_pages.h); V alike.
 * The host fills what the cache fixes once, at creation, and the rest at
 * each write.
 */
typedef struct clbt__kv_arguments {
  clbt_kv_pages pages;   /* the cache's addressing and block size */
  cl_ulong num_slots;    /* num_blocks x block_size */
  cl_ulong key_at, key_stride, value_at, value_stride;
  cl_ulong slots_at;     /* the first token's entry of the slot mapping */
  cl_uint num_tokens;
  cl_uint head_size;
  cl_uint chunks;        /* chunks a token holds: heads x head_size / chunk */
  cl_uint lanes;         /* work-items a token gets, a power of two */
  cl_float k_scale, v_scale; /* fp8: what each value is divided by */
} clbt__kv_arguments;

/*
 * The kernel's arguments after the arguments struct, X(NAME, type, name):
 * the host's index of each (CLBT_KV_ARGUMENT_<NAME>) and the kernel's
 * parameter list expand this one list. A list of plain entries, as the
 * step's (cl/contract.h says why). The chunk types are the kernel's
 * (cl/kv_cache.cl); the host expands only the names.
 */
#define CLBT_KV_WRITE_ARGUMENTS(X)                        \
  X(KEY, __global const CLBT_KV_IN_CHUNK *, key)          \
  X(VALUE, __global const CLBT_KV_IN_CHUNK *, value)      \
  X(SLOT_MAPPING, __global const long *, slot_mapping)    \
  X(KEY_CACHE, __global CLBT_KV_OUT_CHUNK *, key_cache)   \
  X(VALUE_CACHE, __global CLBT_KV_OUT_CHUNK *, value_cache) \
  X(REJECTED, __global uint *, rejected)

/* The arguments' indices: the struct first, then the list's. */
enum {
  CLBT_KV_ARGUMENT_ARGUMENTS,
#define CLBT_KV_ARGUMENT_INDEX(NAME, type, name) CLBT_KV_ARGUMENT_##NAME,
  CLBT_KV_WRITE_ARGUMENTS(CLBT_KV_ARGUMENT_INDEX)
#undef CLBT_KV_ARGUMENT_INDEX
  CLBT_KV_NUM_ARGUMENTS
};

#endif /* CLBT_KV_CACHE_CONTRACT_H */
