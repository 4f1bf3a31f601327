/*
 * An attention launch's checks (attention_checks.h), in docs/semantics.md's
 * order: the cache, the counts, where the block ids come from, the
 * strides, the fp8 scales, the required buffers, every buffer's size
 * (attention_buffers.c), and the grid; then what they resolve, the
 * kernels' arguments and the plan.
 */
#include "kv/attention_checks.h"

#include "base/status.h"
#include "kv/attention_buffers.h"
#include "kv/layout.h"

#include <stdio.h>

#define LOG2E 1.4426950408889634

/* ---- the cache and the counts ------------------------------------------ */

static clbt_status differs(const char *field, uint32_t cache, uint32_t own) {
  return clbt__fail(CLBT_INVALID_ARGUMENT,
                    "cache's %s %u is not the attention's %u", field,
                    (unsigned)cache, (unsigned)own);
}

static clbt_status check_cache(const clbt_attention *t,
                               const clbt_kv_cache *cache) {
  const clbt_kv_cache_config *k = &cache->config;
  const clbt_attention_config *c = &t->config;
  if (cache->device->context != t->device->context)
    return clbt__fail(CLBT_CONTEXT_MISMATCH,
                      "cache belongs to another OpenCL context than the "
                      "attention's device");
  if (k->num_kv_heads != c->num_kv_heads)
    return differs("num_kv_heads", k->num_kv_heads, c->num_kv_heads);
  if (k->head_size != c->head_size)
    return differs("head_size", k->head_size, c->head_size);
  if (k->block_size != c->block_size)
    return differs("block_size", k->block_size, c->block_size);
  if (k->layout != c->layout)
    return differs("layout", (uint32_t)k->layout, (uint32_t)c->layout);
  if (k->cache_dtype != c->cache_dtype)
    return differs("cache_dtype", (uint32_t)k->cache_dtype,
                   (uint32_t)c->cache_dtype);
  return CLBT_SUCCESS;
}

static clbt_status check_counts(const clbt_attention_batch *b) {
  if (b->num_seqs > INT32_MAX || b->num_tokens > INT32_MAX)
    return clbt__fail(CLBT_INVALID_ARGUMENT, "batch->%s %u exceeds INT32_MAX",
                      b->num_seqs > INT32_MAX ? "num_seqs" : "num_tokens",
                      (unsigned)(b->num_seqs > INT32_MAX ? b->num_seqs
                                                         : b->num_tokens));
  return CLBT_SUCCESS;
}

/* ---- the block ids ----------------------------------------------------- */

/* A dense block table's rows and shard, checked, as pages. */
static clbt_status dense_pages(const clbt_kv_cache *cache,
                               const clbt_attention_batch *b,
                               clbt_kv_pages *pages) {
  uint32_t stride = b->block_table_stride ? b->block_table_stride
                                          : b->max_blocks_per_seq;
  uint32_t world = b->cp_world_size ? b->cp_world_size : 1;
  uint32_t interleave = b->cp_interleave_size ? b->cp_interleave_size : 1;
  if (b->idx_mapping)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "batch->idx_mapping names rows of a table; a "
                      "block_table's row s is sequence s's");
  if (!b->max_blocks_per_seq)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "batch->max_blocks_per_seq is 0 with a block_table");
  if (stride < b->max_blocks_per_seq)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "batch->block_table_stride %u is below "
                      "max_blocks_per_seq %u",
                      (unsigned)stride, (unsigned)b->max_blocks_per_seq);
  if (b->cp_rank >= world)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "batch->cp_rank %u is not below cp_world_size %u",
                      (unsigned)b->cp_rank, (unsigned)world);
  /* clbt_kv_pages_local_tokens divides by world x block_size in 32 bits:
     past them it would divide by a wrapped value, perhaps 0. */
  if ((uint64_t)world * cache->config.block_size > UINT32_MAX)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "batch->cp_world_size %u x block_size %u exceeds "
                      "UINT32_MAX tokens",
                      (unsigned)world, (unsigned)cache->config.block_size);
  if (cache->config.block_size % interleave)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "batch->cp_interleave_size %u does not divide "
                      "block_size %u",
                      (unsigned)interleave, (unsigned)cache->config.block_size);
  clbt__kv_pages_of_config(&cache->config, pages);
  pages->rows_offset = b->block_table_offset;
  pages->row_stride = stride;
  pages->row_capacity = b->max_blocks_per_seq;
  pages->num_rows = b->num_seqs;
  pages->cp_world_size = world;
  pages->cp_rank = b->cp_rank;
  pages->cp_interleave_size = interleave;
  return CLBT_SUCCESS;
}

static clbt_status check_source(const clbt_kv_cache *cache,
                                const clbt_attention_batch *b,
                                const clbt__table_view *table,
                                clbt__attention_launch *out) {
  if (table && b->block_table)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "batch->table and batch->block_table are both set: "
                      "the block ids come from one");
  if (!table && !b->block_table && b->num_seqs > 0)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "batch->table and batch->block_table are both NULL "
                      "with num_seqs %u",
                      (unsigned)b->num_seqs);
  if (!table) {
    out->buffers[CLBT_ATT_ARGUMENT_ROWS] = b->block_table;
    return dense_pages(cache, b, &out->arguments.pages);
  }
  if (b->cp_world_size || b->cp_rank || b->cp_interleave_size)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "batch->cp_* describe a block_table's shard; a table "
                      "brings its own");
  out->buffers[CLBT_ATT_ARGUMENT_ROWS] = table->rows;
  out->buffers[CLBT_ATT_ARGUMENT_IDX_MAPPING] = b->idx_mapping;
  return clbt__attention_pages(cache, table, "batch->table",
                               &out->arguments.pages);
}

/* ---- strides and scales ------------------------------------------------ */

/* An array the kernels write, [tokens][heads][width] by its strides (0:
   the contiguous ones): no two elements at one address. */
static clbt_status check_written(const char *name, uint64_t *token_stride,
                                 uint64_t *head_stride, uint32_t tokens,
                                 uint32_t heads, uint32_t width) {
  char token_name[40], head_name[40];
  if (!*head_stride) *head_stride = width;
  if (!*token_stride) *token_stride = (uint64_t)heads * width;
  snprintf(token_name, sizeof token_name, "%s_token_stride", name);
  snprintf(head_name, sizeof head_name, "%s_head_stride", name);
  clbt__kv_dimension d[3] = {{"head_size", 1, width},
                             {head_name, *head_stride, heads},
                             {token_name, *token_stride, tokens}};
  uint64_t reach;
  return clbt__kv_dimensions_apart(d, 3, "batch->", CLBT_INVALID_ARGUMENT,
                                   &reach);
}

static clbt_status check_scales(const clbt_attention_config *c,
                                const clbt_attention_batch *b) {
  clbt_status status = CLBT_SUCCESS;
  if (c->query_dtype == CLBT_KV_FP8_E4M3)
    status = clbt__kv_check_scale(b->q_descale, "batch->", "q_descale");
  if (!status && c->cache_dtype == CLBT_KV_FP8_E4M3 && !b->k_descales)
    status = clbt__kv_check_scale(b->k_descale, "batch->", "k_descale");
  if (!status && c->cache_dtype == CLBT_KV_FP8_E4M3 && !b->v_descales)
    status = clbt__kv_check_scale(b->v_descale, "batch->", "v_descale");
  if (!status && c->output_dtype == CLBT_KV_FP8_E4M3)
    status = clbt__kv_check_scale(b->output_scale, "batch->", "output_scale");
  return status;
}

/* ---- buffers ----------------------------------------------------------- */

static clbt_status check_present(const clbt_attention_batch *b) {
  const char *missing = NULL;
  if (b->num_tokens && !b->query) missing = "query";
  else if (b->num_tokens && !b->output) missing = "output";
  else if ((b->num_tokens || b->num_seqs) && !b->cu_seqlens_q)
    missing = "cu_seqlens_q";
  else if (b->num_seqs && !b->seqused_k) missing = "seqused_k";
  if (missing)
    return clbt__fail(CLBT_NULL_ARGUMENT,
                      "batch->%s is NULL with num_seqs %u and num_tokens %u",
                      missing, (unsigned)b->num_seqs, (unsigned)b->num_tokens);
  return CLBT_SUCCESS;
}

/* ---- what they resolve ------------------------------------------------- */

/* The rest of the kernels' arguments: scales, flags and buffers. */
static void resolve(const clbt_attention *t, const clbt_kv_cache *cache,
                    const clbt_attention_batch *b, clbt__attention_launch *l) {
  const clbt_attention_config *c = &t->config;
  clbt_attention_arguments *a = &l->arguments;
  bool fp8_cache = c->cache_dtype == CLBT_KV_FP8_E4M3;
  double scale = c->softmax_scale;
  if (c->query_dtype == CLBT_KV_FP8_E4M3) scale *= b->q_descale;
  a->scale = (float)(c->softcap > 0.0f ? scale : scale * LOG2E);
  a->softcap = c->softcap;
  a->k_descale = fp8_cache && !b->k_descales ? b->k_descale : 1.0f;
  a->v_descale = fp8_cache && !b->v_descales ? b->v_descale : 1.0f;
  a->out_scale = c->output_dtype == CLBT_KV_FP8_E4M3
                     ? (float)(1.0 / b->output_scale)
                     : 1.0f;
  a->sliding_window = c->sliding_window;
  a->num_seqs = b->num_seqs;
  a->num_tokens = b->num_tokens;
  a->num_kv_heads = c->num_kv_heads;
  a->query_at = b->query_offset;
  a->output_at = b->output_offset;
  a->lse_at = b->lse_offset;
  a->cu_seqlens_at = b->cu_seqlens_q_offset;
  a->seqused_at = b->seqused_k_offset;
  a->idx_mapping_at = b->idx_mapping_offset;
  a->sinks_at = b->sinks_offset;
  a->k_descales_at = b->k_descales_offset;
  a->v_descales_at = b->v_descales_offset;
  if (b->sinks) a->flags |= CLBT_ATT_SINKS;
  if (b->lse) a->flags |= CLBT_ATT_LSE;
  if (fp8_cache && b->k_descales) a->flags |= CLBT_ATT_K_DESCALES;
  if (fp8_cache && b->v_descales) a->flags |= CLBT_ATT_V_DESCALES;
  cl_mem *buffers = l->buffers;
  buffers[CLBT_ATT_ARGUMENT_QUERY] = b->query;
  buffers[CLBT_ATT_ARGUMENT_OUTPUT] = b->output;
  buffers[CLBT_ATT_ARGUMENT_KEY_CACHE] = cache->key_cache;
  buffers[CLBT_ATT_ARGUMENT_VALUE_CACHE] = cache->value_cache;
  buffers[CLBT_ATT_ARGUMENT_CU_SEQLENS_Q] = b->cu_seqlens_q;
  buffers[CLBT_ATT_ARGUMENT_SEQUSED_K] = b->seqused_k;
  buffers[CLBT_ATT_ARGUMENT_SINKS] = b->sinks;
  buffers[CLBT_ATT_ARGUMENT_K_DESCALES] =
      a->flags & CLBT_ATT_K_DESCALES ? b->k_descales : NULL;
  buffers[CLBT_ATT_ARGUMENT_V_DESCALES] =
      a->flags & CLBT_ATT_V_DESCALES ? b->v_descales : NULL;
  buffers[CLBT_ATT_ARGUMENT_LSE] = b->lse;
  buffers[CLBT_ATT_ARGUMENT_REJECTED] = t->rejected;
}

/* The kernels for the cache's alignment, and the launch's plan; its grid
   must fit the kernels' 32-bit work-group numbers. */
static clbt_status plan(const clbt_attention *t, const clbt_kv_cache *cache,
                        const clbt_attention_batch *b,
                        clbt__attention_launch *l) {
  const clbt__attention_shape *shape = &t->kernels[CLBT__ATT_ALIGNED].shape;
  const clbt_kv_cache_config *k = &cache->config;
  uint64_t all = k->key_offset | k->value_offset | k->block_stride |
                 k->page_stride | k->head_stride;
  l->kernels = all % shape->vec ? CLBT__ATT_SINGLE : CLBT__ATT_ALIGNED;
  clbt__attention_work work = {b->num_seqs, b->num_tokens,
                               t->config.num_kv_heads, b->max_seqlen_q,
                               b->max_seqlen_k};
  l->plan = clbt__attention_plan_of(shape, &t->tuning, t->facts, work);
  uint64_t most = UINT32_MAX;
  if (l->plan.groups > most || l->plan.reduce_groups > most ||
      l->plan.partial_floats > SIZE_MAX / 4)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "batch: num_tokens %u of %u heads need %llu "
                      "work-groups, past 2^32",
                      (unsigned)b->num_tokens, (unsigned)t->config.num_heads,
                      (unsigned long long)l->plan.groups);
  l->arguments.splits = l->plan.splits;
  l->arguments.query_blocks = l->plan.query_blocks;
  if (l->plan.splits > 1) l->arguments.flags |= CLBT_ATT_SPLIT;
  return CLBT_SUCCESS;
}

clbt_status clbt__attention_check(clbt_attention *t,
                                  const clbt_kv_cache *cache,
                                  const clbt_attention_batch *b,
                                  const clbt__table_view *table,
                                  clbt__attention_launch *out) {
  const clbt_attention_config *c = &t->config;
  clbt_attention_arguments *a = &out->arguments;
  *out = (clbt__attention_launch){0};
  a->query_token_stride = b->query_token_stride;
  a->query_head_stride = b->query_head_stride;
  a->output_token_stride = b->output_token_stride;
  a->output_head_stride = b->output_head_stride;
  a->lse_token_stride = b->lse_token_stride;
  a->lse_head_stride = b->lse_head_stride;
  if (!a->query_head_stride) a->query_head_stride = c->head_size;
  if (!a->query_token_stride)
    a->query_token_stride = (uint64_t)c->num_heads * c->head_size;
  clbt_status status = check_cache(t, cache);
  if (!status) status = check_counts(b);
  if (!status) status = check_source(cache, b, table, out);
  if (!status && table && b->idx_mapping) a->flags |= CLBT_ATT_IDX_MAPPING;
  if (!status)
    status = check_written("output", &a->output_token_stride,
                           &a->output_head_stride, b->num_tokens,
                           c->num_heads, c->head_size);
  if (!status)
    status = check_written("lse", &a->lse_token_stride, &a->lse_head_stride,
                           b->num_tokens, c->num_heads, 1);
  if (!status) status = check_scales(c, b);
  if (!status) status = check_present(b);
  if (!status)
    status = clbt__attention_check_buffers(
        t, b, a, c->cache_dtype == CLBT_KV_FP8_E4M3);
  if (!status) resolve(t, cache, b, out);
  if (!status) status = plan(t, cache, b, out);
  return status;
}
