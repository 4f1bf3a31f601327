/*
 * The paged attention's plan (attention_plan.h): the kernels' geometry
 * from the tuning row, and each launch's grids. Every rule cl/attention.h
 * gives a -D option is kept here.
 */
#include "kv/attention_plan.h"

#include "base/status.h"
#include "cl/attention.h"
#include "kv/layout.h"

#include <stdio.h>

/* The largest power of two at most limit that divides value. */
static uint32_t power_dividing(uint32_t value, uint32_t limit) {
  uint32_t p = 1;
  while (p * 2 <= limit && value % (p * 2) == 0) p *= 2;
  return p;
}

static uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

/* The rows a work-group serves: G split into the fewest groups of at most
   `most` heads, evenly. */
static uint32_t rows_of(uint32_t group, uint32_t most) {
  return ceil_div(group, ceil_div(group, most));
}

uint64_t clbt__attention_decode_local_bytes(const clbt__attention_shape *s) {
  /* In 64 bits: a tuning row's tokens and local can take the products
     past 32, where they would wrap to a size that fits. */
  uint64_t local = s->local, head = s->head_size, lane = s->lane,
           tokens = s->tokens, rows = s->rows;
  uint64_t floats = CLBT_ATT_DECODE_SUMS(local, head, lane, tokens, rows) +
                    CLBT_ATT_DECODE_WEIGHTS(local, head, lane, tokens, rows);
  return 4 * (floats + s->cu_words + 2);
}

uint64_t clbt__attention_tile_local_bytes(const clbt__attention_shape *s) {
  if (!s->tile_local) return 0;
  uint64_t rows = (uint64_t)s->tile_queries * s->rows;
  uint64_t floats = CLBT_ATT_TILE_FLOATS((uint64_t)s->head_size, rows,
                                         (uint64_t)s->tile_keys,
                                         (uint64_t)s->tile_local);
  return 4 * (floats + 3 * (uint64_t)s->tile_keys + s->tile_queries +
              s->cu_words + 2);
}

static clbt_status tuning_refused(const char *field, const char *rule) {
  return clbt__fail(CLBT_INVALID_CONFIG,
                    "CLBT_ATTENTION_TUNING: %s %s", field, rule);
}

/* The decode kernel's geometry: a GPU's lanes of lane_bytes, a CPU's one
   work-item a whole row. */
static clbt_status shape_decode(const clbt__attention_tuning *t,
                                uint32_t element, clbt__attention_shape *s) {
  if (!t->local) return tuning_refused("local", "is 0");
  if (!t->tokens) return tuning_refused("tokens", "is 0");
  if (!t->rows) return tuning_refused("rows", "is 0");
  s->gpu = t->local > 1;
  s->local = t->local;
  s->tokens = t->tokens;
  s->rows = rows_of(s->group, t->rows);
  uint32_t widest = 16 / element; /* elements of a 16-byte load */
  if (!s->gpu) {
    s->lane = s->head_size;
    s->vec = power_dividing(s->head_size, widest);
    return CLBT_SUCCESS;
  }
  uint32_t lane = t->lane_bytes ? t->lane_bytes / element : s->head_size;
  s->lane = power_dividing(s->head_size, lane ? lane : 1);
  while (s->head_size / s->lane > s->local) s->lane *= 2;
  if (s->head_size % s->lane)
    return tuning_refused("local", "is too small for a head row");
  s->vec = power_dividing(s->lane, widest > 16 ? 16 : widest);
  return CLBT_SUCCESS;
}

/* The tile kernel's geometry, shrunk until it fits the device's local
   memory; none where the head size is not a multiple of 4 or nothing fits. */
static void shape_tiles(const clbt__attention_tuning *t, uint64_t local_mem,
                        clbt__attention_shape *s) {
  s->tile_local = s->gpu && t->tile_local && t->tile_rows && t->tile_keys &&
                          s->head_size % 4 == 0
                      ? t->tile_local
                      : 0;
  if (!s->tile_local) return;
  s->tile_queries = t->tile_rows > s->rows ? t->tile_rows / s->rows : 1;
  while (s->tile_queries > 1 && s->tile_queries * s->rows > s->tile_local)
    s->tile_queries /= 2;
  s->tile_keys = t->tile_keys;
  while (clbt__attention_tile_local_bytes(s) > local_mem &&
         (s->tile_keys > 1 || s->tile_queries > 1)) {
    if (s->tile_keys >= s->tile_queries && s->tile_keys > 1)
      s->tile_keys /= 2;
    else
      s->tile_queries /= 2;
  }
  if (s->tile_queries * s->rows > s->tile_local ||
      clbt__attention_tile_local_bytes(s) > local_mem)
    s->tile_local = s->tile_queries = s->tile_keys = 0;
}

clbt_status clbt__attention_shape_of(const clbt_attention_config *c,
                                     const clbt__attention_tuning *t,
                                     clbt__attention_device device,
                                     clbt__attention_shape *s) {
  *s = (clbt__attention_shape){.query = c->query_dtype,
                               .cache = c->cache_dtype,
                               .output = c->output_dtype,
                               .head_size = c->head_size,
                               .block_size = c->block_size,
                               .group = c->num_heads / c->num_kv_heads,
                               .reduce_local = t->reduce_local,
                               .cu_words = t->cu_words};
  clbt_status status =
      shape_decode(t, (uint32_t)clbt__kv_dtype_size(c->cache_dtype), s);
  if (status) return status;
  if (!s->reduce_local) return tuning_refused("reduce_local", "is 0");
  if (s->gpu != (s->reduce_local > 1))
    return tuning_refused("reduce_local",
                          "must be 1 exactly when local is 1");
  /* Past the device's local memory, the batch's array is searched where
     it is rather than copied. */
  if (clbt__attention_decode_local_bytes(s) > device.local_mem_size)
    s->cu_words = 0;
  if (clbt__attention_decode_local_bytes(s) > device.local_mem_size)
    return clbt__fail(CLBT_UNSUPPORTED_DEVICE,
                      "the attention's decode kernel takes %llu bytes of "
                      "local memory for head_size %u; the device has %llu",
                      (unsigned long long)clbt__attention_decode_local_bytes(s),
                      (unsigned)s->head_size,
                      (unsigned long long)device.local_mem_size);
  shape_tiles(t, device.local_mem_size, s);
  return CLBT_SUCCESS;
}

clbt__attention_shape clbt__attention_shape_with_vec(
    const clbt__attention_shape *shape, uint32_t vec) {
  clbt__attention_shape s = *shape;
  s.vec = vec < shape->vec ? vec : shape->vec;
  return s;
}

void clbt__attention_defines(const clbt__attention_shape *s, char *out,
                             size_t size) {
  snprintf(out, size,
           "-DCLBT_ATT_Q=%d -DCLBT_ATT_KV=%d -DCLBT_ATT_OUT=%d "
           "-DCLBT_ATT_HEAD=%u -DCLBT_ATT_BLOCK=%u -DCLBT_ATT_GROUP=%u "
           "-DCLBT_ATT_ROWS=%u -DCLBT_ATT_GPU=%u -DCLBT_ATT_LOCAL=%u "
           "-DCLBT_ATT_LANE=%u -DCLBT_ATT_VEC=%u -DCLBT_ATT_TOKENS=%u "
           "-DCLBT_ATT_TILE_LOCAL=%u -DCLBT_ATT_TILE_QUERIES=%u "
           "-DCLBT_ATT_TILE_KEYS=%u -DCLBT_ATT_REDUCE_LOCAL=%u "
           "-DCLBT_ATT_CU_WORDS=%u",
           (int)s->query, (int)s->cache, (int)s->output,
           (unsigned)s->head_size, (unsigned)s->block_size,
           (unsigned)s->group, (unsigned)s->rows, (unsigned)s->gpu,
           (unsigned)s->local, (unsigned)s->lane, (unsigned)s->vec,
           (unsigned)s->tokens, (unsigned)s->tile_local,
           (unsigned)s->tile_queries, (unsigned)s->tile_keys,
           (unsigned)s->reduce_local, (unsigned)s->cu_words);
}

/* A decode's splits, as attention_plan.h says. */
static uint32_t splits_of(const clbt__attention_tuning *t,
                          clbt__attention_device device, uint64_t groups,
                          uint32_t max_seqlen_k) {
  if (t->splits) return t->splits;
  if (!max_seqlen_k || !groups) return 1;
  uint64_t wanted = (uint64_t)t->groups_per_unit * device.compute_units;
  uint64_t splits = (wanted + groups - 1) / groups;
  uint64_t by_keys = t->min_split ? ceil_div(max_seqlen_k, t->min_split) : 1;
  if (splits > by_keys) splits = by_keys;
  if (splits > t->max_splits) splits = t->max_splits;
  return splits < 1 ? 1 : (uint32_t)splits;
}

clbt__attention_plan clbt__attention_plan_of(
    const clbt__attention_shape *s, const clbt__attention_tuning *t,
    clbt__attention_device device, clbt__attention_work w) {
  clbt__attention_plan plan = {.splits = 1};
  uint64_t head_groups = ceil_div(s->group, s->rows);
  uint64_t heads = (uint64_t)w.num_kv_heads * head_groups;
  plan.tiles = s->tile_local && w.max_seqlen_q != 1;
  if (plan.tiles) {
    plan.query_blocks = w.num_tokens / s->tile_queries + w.num_seqs;
    plan.groups = (uint64_t)plan.query_blocks * heads;
    return plan;
  }
  uint64_t groups = (uint64_t)w.num_tokens * heads;
  plan.splits = splits_of(t, device, groups, w.max_seqlen_k);
  plan.groups = groups * plan.splits;
  if (plan.splits > 1) {
    uint64_t num_heads = (uint64_t)w.num_kv_heads * s->group;
    plan.reduce_groups = (uint64_t)w.num_tokens * num_heads;
    plan.partial_floats = plan.reduce_groups * plan.splits *
                          CLBT_ATT_PARTIAL_FLOATS((uint64_t)s->head_size);
  }
  return plan;
}
