/*
 * The paged attention's pure plan (attention_plan.c): a descriptor's
 * kernels shaped from its config and the device's tuning row (their -D
 * options), and a launch's kernels, grids, splits and scratch from its
 * batch. No OpenCL call: tests/kv/test_attention_plan.c checks it without
 * a device.
 */
#ifndef CLBT_ATTENTION_PLAN_H
#define CLBT_ATTENTION_PLAN_H

#include "clbt/clbt.h"
#include "base/tuning.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a program of the attention is built for: cl/attention.h's -D
   options, one field each. */
typedef struct clbt__attention_shape {
  clbt_kv_dtype query, cache, output;
  uint32_t head_size, block_size;
  uint32_t group;  /* query heads per KV head */
  uint32_t rows;   /* query heads a work-group serves */
  uint32_t gpu;    /* 1: work-groups of many work-items */
  uint32_t local, lane, vec, tokens;    /* the decode kernel */
  uint32_t tile_local, tile_queries, tile_keys; /* 0: no tile kernel */
  uint32_t reduce_local, cu_words;
} clbt__attention_shape;

/* The device facts a shape depends on. */
typedef struct clbt__attention_device {
  uint64_t local_mem_size;  /* bytes */
  uint32_t compute_units;
} clbt__attention_device;

/*
 * Shapes a descriptor's kernels: config read and its defaults filled in
 * (query_dtype, output_dtype), tuning the device's row. Its vec is the
 * widest load the cache's type allows (16 bytes, at most a lane): a cache
 * whose addresses it does not divide takes clbt__attention_shape_with_vec
 * of 1. A tile kernel that does not fit the device's local memory is
 * shrunk, or left out (the decode kernel then takes every batch). Fails
 * with CLBT_INVALID_CONFIG for a tuning row whose values cannot shape a
 * kernel (naming CLBT_ATTENTION_TUNING's field) and
 * CLBT_UNSUPPORTED_DEVICE when the decode kernel's local memory does not
 * fit the device's.
 */
clbt_status clbt__attention_shape_of(const clbt_attention_config *config,
                                     const clbt__attention_tuning *tuning,
                                     clbt__attention_device device,
                                     clbt__attention_shape *out);

/* The same shape for a cache aligned to `vec` elements (a power of two). */
clbt__attention_shape clbt__attention_shape_with_vec(
    const clbt__attention_shape *shape, uint32_t vec);

/* The bytes of local memory a shape's decode and tile kernels take. */
uint64_t clbt__attention_decode_local_bytes(const clbt__attention_shape *shape);
uint64_t clbt__attention_tile_local_bytes(const clbt__attention_shape *shape);

/* Writes a shape's "-DCLBT_ATT_...=..." options (cl/attention.h). */
void clbt__attention_defines(const clbt__attention_shape *shape, char *out,
                             size_t size);

/* What a launch's batch says of its work, for its plan. */
typedef struct clbt__attention_work {
  uint32_t num_seqs, num_tokens, num_kv_heads;
  uint32_t max_seqlen_q, max_seqlen_k; /* the batch's hints; 0: unknown */
} clbt__attention_work;

/* A launch's kernels and their grids. */
typedef struct clbt__attention_plan {
  bool tiles;            /* the tile kernel, else the decode kernel */
  uint32_t splits;       /* a decode's context splits; > 1: then the reduce */
  uint32_t query_blocks; /* the tile kernel's query-block slots */
  uint64_t groups;       /* the first kernel's work-groups */
  uint64_t reduce_groups;
  uint64_t partial_floats; /* the splits' scratch */
} clbt__attention_plan;

/*
 * Plans a launch: the tile kernel when the shape has one and a sequence
 * may have more than one query token (max_seqlen_q 0 or above 1), else the
 * decode kernel, its contexts split (flash-decoding) as the tuning row
 * says: tuning->splits when set, else until the launch has
 * groups_per_unit work-groups per compute unit, each split keeping at
 * least min_split of max_seqlen_k's keys (no split when max_seqlen_k is
 * 0), at most max_splits. Correct whatever the hints: they choose only the
 * kernels and the splits.
 */
clbt__attention_plan clbt__attention_plan_of(
    const clbt__attention_shape *shape, const clbt__attention_tuning *tuning,
    clbt__attention_device device, clbt__attention_work work);

#endif /* CLBT_ATTENTION_PLAN_H */
