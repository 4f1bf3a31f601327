/*
 * The paged attention's descriptor (attention.c): made once per layer
 * shape, with its kernels, counter and scratch; the pages a launch reads.
 * The public surface is api/attention.c; a launch is attention_launch.c,
 * its checks attention_checks.c, its plan attention_plan.c.
 */
#ifndef CLBT_KV_ATTENTION_H
#define CLBT_KV_ATTENTION_H

#include "clbt/clbt.h"
#include "base/tuning.h"
#include "cl/attention.h"
#include "device/handle.h"
#include "device/known_buffers.h"
#include "kv/attention_plan.h"
#include "kv/cache.h"

/* The kernels of one program: a shape for caches of one alignment. */
typedef struct clbt__attention_kernels {
  clbt__attention_shape shape;
  cl_kernel decode, reduce, tiles; /* NULL until made; tiles NULL: none */
} clbt__attention_kernels;

/* A descriptor's programs: for caches aligned to its widest load, and for
   those aligned to one element only (made at the first such cache). */
enum { CLBT__ATT_ALIGNED, CLBT__ATT_SINGLE, CLBT__ATT_NUM_KERNELS };

struct clbt_attention {
  clbt_device *device;
  clbt_attention_config config; /* read, its defaults filled in */
  clbt__attention_tuning tuning;
  clbt__attention_device facts;
  clbt__attention_kernels kernels[CLBT__ATT_NUM_KERNELS];
  cl_mem rejected;        /* uint32, the rejected-token count */
  cl_mem partials;        /* the splits' scratch, grown as launches need */
  uint64_t partial_floats;
  clbt__known_buffers known; /* the batches' buffers checked lately */
};

/*
 * A clbt_table as a launch sees it (api/attention.c fills it): the buffer
 * of its committed rows, the offsets of its rows and lengths (for a
 * launch, both in the engine's storage, one buffer that the kernels take
 * as rows), and what its layout says of them.
 */
typedef struct clbt__table_view {
  cl_context context;
  cl_mem rows;
  uint64_t rows_offset, row_lengths_offset; /* int32 entries */
  uint32_t row_stride, num_rows;            /* width, max_num_reqs */
  uint32_t kernel_block_size, kv_block_size;
  uint32_t cp_world_size, cp_rank, cp_interleave_size;
  bool maps_tokens;
} clbt__table_view;

/*
 * Makes a descriptor of a config read from the caller: checks it, shapes
 * and builds its kernels (the aligned program), makes its counter. Fails
 * as clbt_attention_create does; *out is set only on success.
 */
clbt_status clbt__attention_create(clbt_device *device,
                                   const clbt_attention_config *config,
                                   clbt_attention **out);

/* Frees a descriptor; NULL is fine. */
void clbt__attention_destroy(clbt_attention *attention);

/*
 * The pages a launch's kernels take, or clbt_kv_pages_describe gives: the
 * cache's, and a table's rows (table NULL: none). Fails with
 * CLBT_CONTEXT_MISMATCH or CLBT_INVALID_ARGUMENT for a table the cache
 * cannot be read through, naming it as `name` ("batch->table").
 */
clbt_status clbt__attention_pages(const clbt_kv_cache *cache,
                                  const clbt__table_view *table,
                                  const char *name, clbt_kv_pages *out);

/* Makes kernels[index] for caches aligned to vec elements, unless made. */
clbt_status clbt__attention_make_kernels(clbt_attention *attention,
                                         uint32_t index, uint32_t vec);

#endif /* CLBT_KV_ATTENTION_H */
