/*
 * A layer's paged KV cache, as a layout (layout.c): its config checked and
 * resolved (the layout's strides filled in), and the proof that no two of
 * its elements share an address; with the checks of types and fp8 scales
 * that the write and the attention share. Pure: no OpenCL call.
 */
#ifndef CLBT_KV_LAYOUT_H
#define CLBT_KV_LAYOUT_H

#include "clbt/clbt.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- checked arithmetic -------------------------------------------------- */

static inline bool clbt__add_fits(uint64_t a, uint64_t b, uint64_t *sum) {
  *sum = a + b;
  return *sum >= a;
}

static inline bool clbt__multiply_fits(uint64_t a, uint64_t b,
                                       uint64_t *product) {
  *product = a * b;
  return a == 0 || *product / a == b;
}

/* The bytes an element of a type takes: 4, 2, 2 or 1; 0 for another value
   (clbt_kv_dtype_size). */
size_t clbt__kv_dtype_size(clbt_kv_dtype dtype);

/*
 * A config's type field names a clbt_kv_dtype: returns CLBT_SUCCESS, or
 * CLBT_INVALID_CONFIG with "config->NAME D is not a clbt_kv_dtype".
 * CLBT_KV_DTYPE_NONE fails too: a field that may be left NONE is checked
 * only when named.
 */
clbt_status clbt__kv_check_dtype(clbt_kv_dtype dtype, const char *name);

/*
 * An fp8 scale a launch takes, a write's or an attention batch's: returns
 * CLBT_SUCCESS, or CLBT_INVALID_ARGUMENT with "<owner>NAME S is not a
 * finite value above 0", owner being "write->" or "batch->".
 */
clbt_status clbt__kv_check_scale(float scale, const char *owner,
                                 const char *name);

/*
 * Checks a config read from a caller (everything that needs no OpenCL
 * call) and fills in its defaults: the layout's strides, a one-buffer
 * value_offset, input_dtype. *span gets the elements a tensor spans from
 * its offset, its last element's index + 1. Fails with
 * CLBT_NULL_ARGUMENT, CLBT_INVALID_CONFIG or CLBT_SIZE_OVERFLOW, naming
 * the field.
 */
clbt_status clbt__kv_layout_check(clbt_kv_cache_config *config,
                                  uint64_t *span);

/* One dimension of an array's addresses: its name, stride and extent. */
typedef struct clbt__kv_dimension {
  const char *name;
  uint64_t stride, count;
} clbt__kv_dimension;

/*
 * No two elements of an array share an address: taken from the smallest
 * stride up (d is sorted so), each dimension's stride clears every element
 * the smaller ones reach. *reach gets the largest index reached. Fails
 * with `overlap` or CLBT_SIZE_OVERFLOW, naming the dimension after owner
 * ("config->").
 */
clbt_status clbt__kv_dimensions_apart(clbt__kv_dimension *d, size_t n,
                                      const char *owner, clbt_status overlap,
                                      uint64_t *reach);

/*
 * No two elements share an address: taken from the smallest stride up,
 * each dimension's stride clears every element the smaller ones reach.
 * With one_buffer, K and V are one buffer's, value_offset apart. *span as
 * above.
 */
clbt_status clbt__kv_check_addresses(const clbt_kv_cache_config *config,
                                     bool one_buffer, uint64_t *span);

/* The pages of a resolved config (clbt_kv_pages): where its elements are,
   its blocks, no CP, and no rows (row_capacity 0). */
void clbt__kv_pages_of_config(const clbt_kv_cache_config *config,
                              clbt_kv_pages *pages);

/* The most elements a work-item may move at a time: a chunk of at most 16
   bytes on either side, dividing every address of the cache. */
uint32_t clbt__kv_layout_chunk(const clbt_kv_cache_config *config);

#endif /* CLBT_KV_LAYOUT_H */
