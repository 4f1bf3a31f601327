/*
 * The contract between the host (src/api/kv_cache.c) and the KV-cache write
 * kernel (cl/kv_cache.cl): the element types it converts between, the -D
 * options that specialise it, and the one struct it takes by value. The
 * library includes this file, and so does the kernel, so that both sides
 * declare the same struct. It holds only preprocessor definitions and a struct in
 * the common subset of C11 and OpenCL C 1.2 (every field on its own size,
 * no padding, so that both sides lay it out alike).
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
typedef uint cl_uint;
typedef ulong cl_ulong;
typedef float cl_float;
#endif

/*
 * A write's arguments by value: where everything is, in elements of its
 * buffer's type, and the batch. Token t's element e of head h (of
 * num_kv_heads x head_size, heads contiguous) is read at
 * key_at + t x key_stride + h x head_size + e, and written, for slot s of
 * block b = s / block_size and page p = s % block_size, at
 * key_cache_at + b x block_stride + p x page_stride + h x head_stride + e;
 * V alike. The host fills what the cache fixes once, at creation, and the
 * rest at each write.
 */
typedef struct clbt_kv_arguments {
  cl_ulong key_cache_at, value_cache_at;
  cl_ulong block_stride, page_stride, head_stride;
  cl_ulong num_slots;    /* num_blocks x block_size */
  cl_ulong key_at, key_stride, value_at, value_stride;
  cl_ulong slots_at;     /* the first token's entry of the slot mapping */
  cl_uint num_tokens;
  cl_uint block_size;
  cl_uint head_size;
  cl_uint chunks;        /* chunks a token holds: heads x head_size / chunk */
  cl_uint lanes;         /* work-items a token gets, a power of two */
  cl_uint reserved;      /* 0; keeps the struct free of padding */
  cl_float k_scale, v_scale; /* fp8: what each value is divided by */
} clbt_kv_arguments;

/* The kernel's arguments, in order. */
#define CLBT_KV_ARGUMENT_ARGUMENTS 0
#define CLBT_KV_ARGUMENT_KEY 1
#define CLBT_KV_ARGUMENT_VALUE 2
#define CLBT_KV_ARGUMENT_SLOT_MAPPING 3
#define CLBT_KV_ARGUMENT_KEY_CACHE 4
#define CLBT_KV_ARGUMENT_VALUE_CACHE 5
#define CLBT_KV_ARGUMENT_REJECTED 6

#endif /* CLBT_KV_CACHE_CONTRACT_H */
