/*
 * The contract between the host (src/kv/attention*.c) and the paged
 * attention's kernels (cl/attention_*.cl): the -D options that specialise
 * them, the struct they take by value, their argument list, and the
 * records their split contexts leave for the reduce. The library includes
 * this file, and so do the kernels (cl/attention_common.cl), so that both
 * sides expand the same list and declare the same struct, in the common
 * subset of C11 and OpenCL C 1.2 (every field on its own size, no
 * padding).
 *
 * One program per descriptor and cache alignment, built with
 *   -DCLBT_ATT_Q=<type> -DCLBT_ATT_KV=<type> -DCLBT_ATT_OUT=<type>
 *       the query's, the cache's and the output's CLBT_KV_TYPE_* (kv_cache.h)
 *   -DCLBT_ATT_HEAD=<head_size> -DCLBT_ATT_BLOCK=<block_size>
 *   -DCLBT_ATT_GROUP=<query heads per KV head>
 *   -DCLBT_ATT_ROWS=<query heads a work-group serves, at most GROUP>
 *   -DCLBT_ATT_GPU=<1: work-groups of many work-items and barriers;
 *                   0: one work-item a work-group, no barrier, no tiles>
 *   -DCLBT_ATT_LOCAL=<the decode kernel's work-group size>
 *   -DCLBT_ATT_LANE=<elements of a head row one work-item holds>
 *   -DCLBT_ATT_VEC=<elements one load moves: every K/V address a multiple>
 *   -DCLBT_ATT_TOKENS=<tokens a work-item takes in one pass>
 *   -DCLBT_ATT_TILE_LOCAL=<the tile kernel's work-group size; 0: none>
 *   -DCLBT_ATT_TILE_QUERIES=<query tokens a tile work-group serves>
 *   -DCLBT_ATT_TILE_KEYS=<keys a tile holds>
 *   -DCLBT_ATT_REDUCE_LOCAL=<the reduce kernel's work-group size>
 *   -DCLBT_ATT_CU_WORDS=<entries of cu_seqlens_q a work-group keeps in
 *                        local memory; a batch of more sequences, or 0,
 *                        is searched in global memory>
 * src/kv/attention_plan.c chooses them and checks their rules.
 */
#ifndef CLBT_ATTENTION_CONTRACT_H
#define CLBT_ATTENTION_CONTRACT_H

#ifdef __OPENCL_VERSION__
#ifndef CLBT_KERNEL_HOST_TYPES /* the kernel's names for the host's types */
#define CLBT_KERNEL_HOST_TYPES
typedef uint cl_uint;
typedef ulong cl_ulong;
typedef float cl_float;
#endif
#endif
#include "clbt/clbt_kv_pages.h"

/* clbt_attention_arguments.flags */
#define CLBT_ATT_SINKS 0x01u       /* sinks holds each head's sink logit */
#define CLBT_ATT_K_DESCALES 0x02u  /* k_descales: K's scale per (seq, head) */
#define CLBT_ATT_V_DESCALES 0x04u  /* v_descales: V's */
#define CLBT_ATT_LSE 0x08u         /* write each (token, head)'s lse */
#define CLBT_ATT_IDX_MAPPING 0x10u /* idx_mapping names each sequence's row */
#define CLBT_ATT_SPLIT 0x20u       /* leave partial records for the reduce */

/*
 * A launch's arguments by value. Offsets and strides count elements of
 * their buffers. scale multiplies q.k: softmax_scale, the query's fp8
 * descale and, with no soft-cap, log2(e), so that the kernels take exp2
 * of scores; with a soft-cap they apply softcap x tanh(s / softcap) to
 * the natural score first, then log2(e).
 */
typedef struct clbt_attention_arguments {
  clbt_kv_pages pages; /* the cache and the block table */
  cl_ulong query_at, query_token_stride, query_head_stride;
  cl_ulong output_at, output_token_stride, output_head_stride;
  cl_ulong lse_at, lse_token_stride, lse_head_stride;
  cl_ulong cu_seqlens_at, seqused_at, idx_mapping_at;
  cl_ulong sinks_at, k_descales_at, v_descales_at;
  cl_uint num_seqs, num_tokens, num_kv_heads;
  cl_uint splits;        /* context splits of a decode; 1: none */
  cl_uint query_blocks;  /* the tile kernel's query-block slots */
  cl_uint flags;         /* CLBT_ATT_* */
  cl_uint sliding_window; /* 0: none */
  cl_float scale;        /* see above */
  cl_float softcap;      /* 0: none */
  cl_float k_descale, v_descale; /* per tensor, without k/v_descales */
  cl_float out_scale;    /* an fp8 output's 1 / output_scale; else 1 */
} clbt_attention_arguments;

/*
 * The kernels' arguments after the struct, X(NAME, type, name): the host's
 * indices (CLBT_ATT_ARGUMENT_<NAME>) and the kernels' parameter lists
 * expand this one list, a list of plain entries (cl/contract.h says why).
 * The element types are the kernels' (cl/attention_common.cl). Buffers a
 * launch does not read are NULL. A table's committed rows and lengths are
 * one buffer, its storage, the regions at the pages' offsets: rows serves
 * both (drivers charge every launch for every buffer argument).
 */
#define CLBT_ATTENTION_ARGUMENTS(X)                         \
  X(QUERY, __global const ATT_Q_BITS *, query)              \
  X(OUTPUT, __global ATT_OUT_BITS *, output)                \
  X(KEY_CACHE, __global const ATT_KV_BITS *, key_cache)     \
  X(VALUE_CACHE, __global const ATT_KV_BITS *, value_cache) \
  X(CU_SEQLENS_Q, __global const int *, cu_seqlens_q)       \
  X(SEQUSED_K, __global const int *, seqused_k)             \
  X(ROWS, __global const int *, rows)                       \
  X(IDX_MAPPING, __global const int *, idx_mapping)         \
  X(SINKS, __global const float *, sinks)                   \
  X(K_DESCALES, __global const float *, k_descales)         \
  X(V_DESCALES, __global const float *, v_descales)         \
  X(LSE, __global float *, lse)                             \
  X(PARTIALS, __global float *, partials)                   \
  X(REJECTED, __global uint *, rejected)

/* The arguments' indices: the struct first, then the list's. */
enum {
  CLBT_ATT_ARGUMENT_ARGUMENTS,
#define CLBT_ATT_ARGUMENT_INDEX(NAME, type, name) CLBT_ATT_ARGUMENT_##NAME,
  CLBT_ATTENTION_ARGUMENTS(CLBT_ATT_ARGUMENT_INDEX)
#undef CLBT_ATT_ARGUMENT_INDEX
  CLBT_ATT_NUM_ARGUMENTS
};

/*
 * A split's partial record, per (token, head, split), in floats: the
 * unnormalised output [0, head_size), then the running maximum (of
 * log2-scaled scores; NaN: the token is rejected) and the sum of the
 * exponentials below it, padded to a multiple of four floats.
 */
#define CLBT_ATT_PARTIAL_FLOATS(head_size) ((((head_size) + 2 + 3) / 4) * 4)

/*
 * The local memory each kernel's geometry takes, in floats (the host checks
 * it against the device's): the decode kernel's dot-product shares (and
 * its runs' outputs, merged at the end) and its runs' weights; the tile
 * kernel's query, key and value tiles (rows padded by four floats), its
 * scores, its teams' maxima and sums and its rows' softmax.
 */
#define CLBT_ATT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define CLBT_ATT_RUNS(local, head, lane) ((local) / ((head) / (lane)))
#define CLBT_ATT_DECODE_SUMS(local, head, lane, tokens, rows)            \
  CLBT_ATT_MAX(CLBT_ATT_RUNS(local, head, lane) * (tokens) * (rows) *    \
                   ((head) / (lane) + 1),                                \
               CLBT_ATT_RUNS(local, head, lane) * (head))
#define CLBT_ATT_DECODE_WEIGHTS(local, head, lane, tokens, rows) \
  (CLBT_ATT_RUNS(local, head, lane) * (rows) * ((tokens) + 1))
#define CLBT_ATT_TILE_FLOATS(head, tile_rows, keys, local)              \
  ((tile_rows) * ((head) + 4) + 2 * (keys) * ((head) + 4) +             \
   (tile_rows) * ((keys) + 1) + 2 * (local) + 3 * (tile_rows))

#endif /* CLBT_ATTENTION_CONTRACT_H */
