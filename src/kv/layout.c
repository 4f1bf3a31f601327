/*
 * A layer's cache layout (layout.h): the config's fields and types checked,
 * the layout's defaults filled in, and every element's address proved
 * apart from every other's.
 */
#include "kv/layout.h"

#include "base/config.h"
#include "base/status.h"
#include "cl/kv_cache.h"

#include <math.h>
#include <stdlib.h>

size_t clbt__kv_dtype_size(clbt_kv_dtype dtype) {
  switch (dtype) {
    case CLBT_KV_FLOAT32: return 4;
    case CLBT_KV_FLOAT16:
    case CLBT_KV_BFLOAT16: return 2;
    case CLBT_KV_FP8_E4M3: return 1;
    default: return 0;
  }
}

clbt_status clbt__kv_check_dtype(clbt_kv_dtype dtype, const char *name) {
  if (!clbt__kv_dtype_size(dtype))
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->%s %d is not a clbt_kv_dtype", name, (int)dtype);
  return CLBT_SUCCESS;
}

clbt_status clbt__kv_check_scale(float scale, const char *owner,
                                 const char *name) {
  if (!isfinite(scale) || !(scale > 0.0f))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "%s%s %g is not a finite value above 0", owner, name,
                      (double)scale);
  return CLBT_SUCCESS;
}

/* ---- the cache's config -------------------------------------------------- */

static clbt_status check_dtypes(const clbt_kv_cache_config *c) {
  clbt_status status = clbt__kv_check_dtype(c->cache_dtype, "cache_dtype");
  if (!status && c->input_dtype != CLBT_KV_DTYPE_NONE)
    status = clbt__kv_check_dtype(c->input_dtype, "input_dtype");
  if (status) return status;
  bool fp8_cache = c->cache_dtype == CLBT_KV_FP8_E4M3;
  if (fp8_cache && c->input_dtype == CLBT_KV_DTYPE_NONE)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->input_dtype is CLBT_KV_DTYPE_NONE with an fp8 "
                      "cache_dtype: name the type of the K/V it takes");
  if (!fp8_cache && c->input_dtype == CLBT_KV_FP8_E4M3)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->input_dtype is CLBT_KV_FP8_E4M3 and "
                      "cache_dtype %d: fp8 K/V go only to an fp8 cache",
                      (int)c->cache_dtype);
  return CLBT_SUCCESS;
}

static clbt_status check_fields(const clbt_kv_cache_config *c) {
  if (!c->key_cache)
    return clbt__fail(CLBT_NULL_ARGUMENT, "config->key_cache is NULL");
  if (c->layout != CLBT_KV_LAYOUT_FLASH &&
      c->layout != CLBT_KV_LAYOUT_HEAD_MAJOR)
    return clbt__fail(CLBT_INVALID_CONFIG,
                      "config->layout %d is not a clbt_kv_layout",
                      (int)c->layout);
  clbt_status status = check_dtypes(c);
  if (!status)
    status = clbt__config_require_nonzero(c->num_kv_heads, "num_kv_heads");
  if (!status) status = clbt__config_require_nonzero(c->head_size, "head_size");
  if (!status)
    status = clbt__config_require_nonzero(c->block_size, "block_size");
  if (!status)
    status = clbt__config_require_nonzero(c->num_blocks, "num_blocks");
  /* The kernel counts a token's chunks in 32 bits, and a GPU's lanes step
     past the last one by up to a work-group: a bound of INT32_MAX leaves
     that step room below 2^32, where the count would wrap and never end. */
  if (!status && (uint64_t)c->num_kv_heads * c->head_size > INT32_MAX)
    status = clbt__fail(CLBT_SIZE_OVERFLOW,
                        "config->num_kv_heads %u x head_size %u exceeds "
                        "INT32_MAX elements a token",
                        (unsigned)c->num_kv_heads, (unsigned)c->head_size);
  return status;
}

/* The layout's strides and the one-buffer value_offset, where 0. */
static clbt_status fill_defaults(clbt_kv_cache_config *c) {
  bool one_buffer = !c->value_cache || c->value_cache == c->key_cache;
  uint64_t row = (uint64_t)c->num_kv_heads * c->head_size;
  uint64_t block = row * c->block_size; /* < 2^96 / 2^32: fits */
  if (!c->input_dtype) c->input_dtype = c->cache_dtype;
  if (!c->head_stride)
    c->head_stride = c->layout == CLBT_KV_LAYOUT_FLASH
                         ? c->head_size
                         : (uint64_t)c->block_size * c->head_size;
  if (!c->page_stride)
    c->page_stride = c->layout == CLBT_KV_LAYOUT_FLASH ? row : c->head_size;
  if (!c->block_stride) c->block_stride = one_buffer ? 2 * block : block;
  if (one_buffer && !c->value_offset &&
      !clbt__add_fits(c->key_offset, block, &c->value_offset))
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "config->key_offset %llu plus a block's %llu elements "
                      "exceeds 64 bits",
                      (unsigned long long)c->key_offset,
                      (unsigned long long)block);
  return CLBT_SUCCESS;
}

static int by_stride(const void *a, const void *b) {
  uint64_t x = ((const clbt__kv_dimension *)a)->stride;
  uint64_t y = ((const clbt__kv_dimension *)b)->stride;
  return (x > y) - (x < y);
}

clbt_status clbt__kv_dimensions_apart(clbt__kv_dimension *d, size_t n,
                                      const char *owner, clbt_status overlap,
                                      uint64_t *reach) {
  qsort(d, n, sizeof d[0], by_stride);
  *reach = 0; /* the largest index the smaller dimensions reach */
  for (size_t i = 0; i < n; ++i) {
    if (d[i].count <= 1) continue;
    if (d[i].stride <= *reach)
      return clbt__fail(overlap,
                        "%s%s %llu is within the %llu elements the "
                        "smaller strides span: two elements would share an "
                        "address",
                        owner, d[i].name, (unsigned long long)d[i].stride,
                        (unsigned long long)*reach + 1);
    uint64_t extent;
    if (!clbt__multiply_fits(d[i].count - 1, d[i].stride, &extent) ||
        !clbt__add_fits(*reach, extent, reach))
      return clbt__fail(CLBT_SIZE_OVERFLOW, "%s%s %llu x %llu exceeds 64 bits",
                        owner, d[i].name, (unsigned long long)d[i].stride,
                        (unsigned long long)d[i].count);
  }
  return CLBT_SUCCESS;
}

/* (A layout that interleaves dimensions some other way is refused too.) */
clbt_status clbt__kv_check_addresses(const clbt_kv_cache_config *c,
                                     bool one_buffer, uint64_t *span) {
  clbt__kv_dimension d[5] = {{"head_size", 1, c->head_size},
                             {"head_stride", c->head_stride, c->num_kv_heads},
                             {"page_stride", c->page_stride, c->block_size},
                             {"block_stride", c->block_stride, c->num_blocks}};
  size_t n = 4;
  uint64_t kv_distance = c->value_offset > c->key_offset
                             ? c->value_offset - c->key_offset
                             : c->key_offset - c->value_offset;
  if (one_buffer) d[n++] = (clbt__kv_dimension){"value_offset", kv_distance, 2};
  uint64_t reach = 0;
  clbt_status status = clbt__kv_dimensions_apart(d, n, "config->",
                                                 CLBT_INVALID_CONFIG, &reach);
  if (status) return status;
  /* The K/V dimension, if any, spans both tensors: take it back out. */
  if (one_buffer) reach -= kv_distance;
  *span = reach + 1;
  return CLBT_SUCCESS;
}

clbt_status clbt__kv_layout_check(clbt_kv_cache_config *c, uint64_t *span) {
  clbt_status status = check_fields(c);
  if (!status) status = fill_defaults(c);
  bool one_buffer = !c->value_cache || c->value_cache == c->key_cache;
  if (!status) status = clbt__kv_check_addresses(c, one_buffer, span);
  return status;
}

uint32_t clbt__kv_layout_chunk(const clbt_kv_cache_config *c) {
  size_t in = clbt__kv_dtype_size(c->input_dtype);
  size_t out = clbt__kv_dtype_size(c->cache_dtype);
  size_t widest = in > out ? in : out;
  uint64_t all = c->head_size | c->head_stride | c->page_stride |
                 c->block_stride | c->key_offset | c->value_offset;
  uint32_t chunk = CLBT_KV_MAX_CHUNK;
  while (chunk > 1 && (chunk * widest > CLBT_KV_CHUNK_BYTES ||
                       all % chunk != 0))
    chunk /= 2;
  return chunk;
}

void clbt__kv_pages_of_config(const clbt_kv_cache_config *c,
                              clbt_kv_pages *pages) {
  *pages = (clbt_kv_pages){.key_offset = c->key_offset,
                           .value_offset = c->value_offset,
                           .block_stride = c->block_stride,
                           .page_stride = c->page_stride,
                           .head_stride = c->head_stride,
                           .block_size = c->block_size,
                           .num_blocks = c->num_blocks,
                           .kv_block_size = c->block_size,
                           .cp_world_size = 1,
                           .cp_interleave_size = 1};
}
