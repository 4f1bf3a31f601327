/*
 * The serving step (issue 10): the host reference
 * (clbt_table_compute_step_host) and the device step (clbt_*_enqueue_step)
 * against an independent model written here from the step's rules: each
 * token of each request, each gathered row, in KV-manager blocks (a slot is
 * a KV block id times block_size plus the rank's offset in it) where clbt
 * works in kernel blocks. The model calls nothing of clbt; the tests make
 * the same row operations on the model and on clbt. Random batches draw
 * idx_mapping as the identity, a permutation, with negative, repeated and
 * out-of-range entries. The seed is printed; CLBT_TEST_SEED=<seed> replays
 * a run.
 */
#include "clbt_test.h"

#include <inttypes.h>
#include <stdlib.h>

#define MAX_GROUPS 4

/* ---- the model: one group as the step's rules describe it --------------- */

typedef struct model {
  bool maps_tokens, zero_tails;
  uint32_t block_size, per_block;     /* KV block; kernel blocks in one */
  uint32_t world, rank, interleave;   /* 1, 0, 1 when not sharded */
  uint32_t max_reqs, width, capacity; /* width in kernel blocks; capacity
                                         in KV blocks */
  int32_t *kv;       /* [max_reqs][capacity] KV-manager block ids */
  uint32_t *count;   /* KV blocks each row holds */
  int32_t *gathered; /* [max_reqs][width]: what the gathered table holds */
  uint32_t rejected; /* what the rejected-token counter holds */
} model;

static int32_t *model_kv(const model *m, uint32_t row) {
  return m->kv + (size_t)row * m->capacity;
}

/* Kernel block e of a row: KV block e / per_block, split in per_block. */
static int32_t model_entry(const model *m, uint32_t row, uint32_t e) {
  return model_kv(m, row)[e / m->per_block] * (int32_t)m->per_block +
         (int32_t)(e % m->per_block);
}

static void model_free(model *m) {
  free(m->kv);
  free(m->count);
  free(m->gathered);
}

/* The gathered table starts as `initial` (a creation's zeros, or junk the
   host reference must keep). */
static void model_init(model *m, const clbt_table *table, uint32_t max_reqs,
                       const int32_t *initial) {
  m->max_reqs = max_reqs;
  m->width = clbt_table_width(table);
  m->capacity = m->width / m->per_block;
  m->kv = calloc((size_t)max_reqs * m->capacity, sizeof *m->kv);
  m->count = calloc(max_reqs, sizeof *m->count);
  m->gathered = malloc((size_t)max_reqs * m->width * sizeof *m->gathered);
  ck_assert(m->kv && m->count && m->gathered);
  for (size_t i = 0; i < (size_t)max_reqs * m->width; ++i)
    m->gathered[i] = initial ? initial[i] : 0;
  m->rejected = 0;
}

static void model_append(model *m, uint32_t row, const int32_t *ids, size_t n,
                         bool replace) {
  if (replace) m->count[row] = 0;
  for (size_t i = 0; i < n; ++i) model_kv(m, row)[m->count[row]++] = ids[i];
}

/* A token's slot in a row, as vLLM's kernel computes it; counted when the
   position is negative or past what the row holds. */
static int64_t model_slot(model *m, uint32_t row, int64_t position) {
  if (position < 0) {
    ++m->rejected;
    return CLBT_PAD_SLOT_ID;
  }
  uint64_t span = (uint64_t)m->block_size * m->world;
  uint64_t block = (uint64_t)position / span;
  uint64_t offset = (uint64_t)position % span;
  if (offset / m->interleave % m->world != m->rank) return CLBT_PAD_SLOT_ID;
  if (block >= m->count[row]) {
    ++m->rejected;
    return CLBT_PAD_SLOT_ID;
  }
  uint64_t local = offset / ((uint64_t)m->interleave * m->world) *
                       m->interleave +
                   offset % m->interleave;
  return (int64_t)model_kv(m, row)[block] * m->block_size + (int64_t)local;
}

/* One step's inputs, on the host. */
typedef struct batch {
  uint32_t num_reqs, num_reqs_padded, num_tokens;
  bool gather, has_idx;
  int32_t *qsl;       /* [max_reqs + 1] */
  int64_t *positions; /* [max_tokens] */
  int32_t *idx;       /* [max_reqs]; read only with has_idx */
} batch;

/* The row request r reads, as idx_mapping says (or r). */
static int64_t request_row(const batch *b, uint32_t r) {
  return b->has_idx ? b->idx[r] : (int64_t)r;
}

static bool qsl_is_well_formed(const batch *b) {
  bool ok = b->qsl[0] >= 0 && b->qsl[b->num_reqs] <= (int64_t)b->num_tokens;
  for (uint32_t r = 0; r < b->num_reqs; ++r)
    ok = ok && b->qsl[r] <= b->qsl[r + 1];
  return ok;
}

static int64_t token_slot(model *m, const batch *b, uint32_t r,
                          int64_t position) {
  int64_t row = request_row(b, r);
  if (row < 0) return CLBT_PAD_SLOT_ID;
  if (row >= m->max_reqs) {
    ++m->rejected;
    return CLBT_PAD_SLOT_ID;
  }
  return model_slot(m, (uint32_t)row, position);
}

/* Gathered row p: its request's row, zero where that row ends (only with
   zero tails, else what was there) and for padding and bad entries. */
static void gather_row(model *m, const batch *b, uint32_t p) {
  int32_t *out = m->gathered + (size_t)p * m->width;
  int64_t row = p < b->num_reqs ? request_row(b, p) : -1;
  bool live = row >= 0 && row < m->max_reqs;
  if (row >= m->max_reqs) ++m->rejected;
  uint32_t length = live ? m->count[row] * m->per_block : 0;
  for (uint32_t e = 0; e < m->width; ++e)
    if (e < length)
      out[e] = model_entry(m, (uint32_t)row, e);
    else if (!live || m->zero_tails)
      out[e] = 0;
}

/* A step: the slots into out[0, max_tokens) (left alone for a group that
   maps no tokens), the gather into m->gathered, the count into m->rejected. */
static void model_step(model *m, const batch *b, int64_t *out,
                       uint32_t max_tokens) {
  if (m->maps_tokens) {
    for (uint32_t t = 0; t < max_tokens; ++t) out[t] = CLBT_PAD_SLOT_ID;
    if (!qsl_is_well_formed(b))
      m->rejected += b->num_tokens;
    else
      for (uint32_t r = 0; r < b->num_reqs; ++r)
        for (int32_t t = b->qsl[r]; t < b->qsl[r + 1]; ++t)
          out[t] = token_slot(m, b, r, b->positions[t]);
  }
  uint32_t padded = b->num_reqs_padded ? b->num_reqs_padded : b->num_reqs;
  for (uint32_t p = 0; b->gather && p < padded; ++p) gather_row(m, b, p);
}

/* ---- the subject: a table or a multi-group table, and its models -------- */

typedef struct subject {
  clbt_table *single;
  clbt_multi_table *multi;
  uint32_t num_groups, max_reqs, max_tokens;
  clbt_table *groups[MAX_GROUPS];
  model models[MAX_GROUPS];
} subject;

/* A configuration to run: a table or a multi-group table; CP configs run
   once per rank. */
typedef struct scenario {
  const char *name;
  clbt_table_config single;
  clbt_multi_table_config multi;
  clbt_group_config groups[MAX_GROUPS];
} scenario;

/* Each config says its size: 0 would be 0.2's layout, without
   zero_gathered_tails. */
#define SIZED(type) .struct_size = (uint32_t)sizeof(type)
#define GROUP(...) {SIZED(clbt_group_config), __VA_ARGS__}
#define TOKENS CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT

static const scenario scenarios[] = {
    {"hybrid blocks 32/16",
     .single = {SIZED(clbt_table_config), .block_size = 32, .kernel_block_size = 16, .max_num_reqs = 6,
                .max_num_blocks_per_req = 5, .max_num_batched_tokens = 96}},
    {"hybrid blocks, zero tails",
     .single = {SIZED(clbt_table_config), .block_size = 32, .kernel_block_size = 16, .max_num_reqs = 5,
                .max_num_blocks_per_req = 4, .max_num_batched_tokens = 64,
                .zero_gathered_tails = 1}},
    {"CP 2, interleave 1",
     .single = {SIZED(clbt_table_config), .block_size = 32, .kernel_block_size = 16, .max_num_reqs = 5,
                .max_num_blocks_per_req = 4, .max_num_batched_tokens = 96,
                .cp_world_size = 2, .cp_interleave_size = 1}},
    {"CP 2, interleave 16",
     .single = {SIZED(clbt_table_config), .block_size = 32, .max_num_reqs = 5,
                .max_num_blocks_per_req = 4, .max_num_batched_tokens = 96,
                .cp_world_size = 2, .cp_interleave_size = 16,
                .zero_gathered_tails = 1}},
    {"CP 4, interleave 1",
     .single = {SIZED(clbt_table_config), .block_size = 16, .max_num_reqs = 5,
                .max_num_blocks_per_req = 4, .max_num_batched_tokens = 128,
                .cp_world_size = 4, .cp_interleave_size = 1}},
    {"CP 4, interleave 16",
     .single = {SIZED(clbt_table_config), .block_size = 32, .kernel_block_size = 16, .max_num_reqs = 5,
                .max_num_blocks_per_req = 3, .max_num_batched_tokens = 128,
                .cp_world_size = 4, .cp_interleave_size = 16}},
    {"a NONE table",
     .single = {SIZED(clbt_table_config), .block_size = 16, .max_num_reqs = 4,
                .max_num_blocks_per_req = 3, .max_num_batched_tokens = 16,
                .slot_mode = CLBT_SLOT_MODE_NONE}},
    {"groups: hybrid, NONE, replicated; CP 2, interleave 16",
     .multi = {SIZED(clbt_multi_table_config), .max_num_reqs = 6,
               .max_num_batched_tokens = 96, .num_groups = 4,
               .cp_world_size = 2, .cp_interleave_size = 16},
     .groups = {GROUP(.block_size = 16, .max_num_blocks = 4),
                GROUP(.block_size = 32, .kernel_block_size = 16,
                      .max_num_blocks = 3),
                GROUP(.block_size = 16, .max_num_blocks = 2,
                      .slot_mode = CLBT_SLOT_MODE_NONE),
                GROUP(.block_size = 64, .max_num_blocks = 2,
                      .cp_replicated = 1)}},
    {"groups: replicated, NONE; zero tails; CP 4, interleave 1",
     .multi = {SIZED(clbt_multi_table_config), .max_num_reqs = 5,
               .max_num_batched_tokens = 128, .num_groups = 3,
               .cp_world_size = 4, .cp_interleave_size = 1,
               .zero_gathered_tails = 1},
     .groups = {GROUP(.block_size = 32, .kernel_block_size = 8,
                      .max_num_blocks = 5),
                GROUP(.block_size = 16, .max_num_blocks = 4,
                      .cp_replicated = 1),
                GROUP(.block_size = 64, .kernel_block_size = 32,
                      .max_num_blocks = 2,
                      .slot_mode = CLBT_SLOT_MODE_NONE)}},
};
enum { NUM_SCENARIOS = sizeof scenarios / sizeof scenarios[0] };

static uint32_t scenario_ranks(const scenario *sc) {
  uint32_t world = sc->multi.num_groups ? sc->multi.cp_world_size
                                        : sc->single.cp_world_size;
  return world ? world : 1;
}

/* What the rules make of a group: sharded only when it maps tokens and is
   not replicated. */
static void model_shape(model *m, uint32_t block, uint32_t kernel_block,
                        clbt_slot_mode mode, bool sharded, uint32_t world,
                        uint32_t rank, uint32_t interleave, uint32_t zero) {
  m->maps_tokens = mode == TOKENS;
  m->zero_tails = zero != 0;
  m->block_size = block;
  m->per_block = block / (kernel_block ? kernel_block : block);
  m->world = sharded && world ? world : 1;
  m->rank = sharded ? rank : 0;
  m->interleave = sharded && interleave ? interleave : 1;
}

/* Creates the scenario's table on `rank`; each group's gathered table is
   modelled from `initial[g]`, or zeros. */
static void subject_create(subject *s, const scenario *sc, uint32_t rank,
                           int32_t *const *initial) {
  memset(s, 0, sizeof *s);
  if (sc->multi.num_groups) {
    clbt_multi_table_config config = sc->multi;
    config.cp_rank = rank;
    config.groups = sc->groups;
    clbt_assert_ok(
        clbt_multi_table_create(clbt_test_device(), &config, &s->multi));
    s->num_groups = config.num_groups;
    s->max_reqs = config.max_num_reqs;
    s->max_tokens = config.max_num_batched_tokens;
    for (uint32_t g = 0; g < s->num_groups; ++g) {
      const clbt_group_config *group = &sc->groups[g];
      s->groups[g] = clbt_multi_table_group(s->multi, g);
      model_shape(&s->models[g], group->block_size, group->kernel_block_size,
                  group->slot_mode, !group->cp_replicated,
                  config.cp_world_size, rank, config.cp_interleave_size,
                  config.zero_gathered_tails);
    }
  } else {
    clbt_table_config config = sc->single;
    config.cp_rank = rank;
    clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &s->single));
    s->num_groups = 1;
    s->max_reqs = config.max_num_reqs;
    s->max_tokens = config.max_num_batched_tokens;
    s->groups[0] = s->single;
    model_shape(&s->models[0], config.block_size, config.kernel_block_size,
                config.slot_mode, true, config.cp_world_size, rank,
                config.cp_interleave_size, config.zero_gathered_tails);
  }
  for (uint32_t g = 0; g < s->num_groups; ++g)
    model_init(&s->models[g], s->groups[g], s->max_reqs,
               initial ? initial[g] : NULL);
}

static void subject_free(subject *s) {
  clbt_table_destroy(s->single);
  clbt_multi_table_destroy(s->multi);
  for (uint32_t g = 0; g < s->num_groups; ++g) model_free(&s->models[g]);
}

/* ---- row operations, on clbt and on the model --------------------------- */

/* Appends (or, with replace, writes) `least` to `most` random blocks per
   group to a row, as many as fit. */
static void update_row(subject *s, uint32_t row, uint32_t least, uint32_t most,
                       bool replace) {
  int32_t ids[MAX_GROUPS][8];
  size_t counts[MAX_GROUPS];
  const int32_t *pointers[MAX_GROUPS];
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    model *m = &s->models[g];
    uint32_t room = m->capacity - (replace ? 0 : m->count[row]);
    counts[g] = least + clbt_test_below(most - least + 1);
    if (counts[g] > room) counts[g] = room;
    if (counts[g] > 8) counts[g] = 8;
    for (size_t i = 0; i < counts[g]; ++i)
      ids[g][i] = (int32_t)clbt_test_below(1u << 20);
    pointers[g] = ids[g];
  }
  if (s->multi)
    clbt_assert_ok(replace ? clbt_multi_table_add_row(s->multi, row, pointers,
                                                      counts)
                           : clbt_multi_table_append_row(s->multi, row,
                                                         pointers, counts));
  else
    clbt_assert_ok(replace ? clbt_table_add_row(s->single, row, ids[0],
                                                counts[0])
                           : clbt_table_append_row(s->single, row, ids[0],
                                                   counts[0]));
  for (uint32_t g = 0; g < s->num_groups; ++g)
    model_append(&s->models[g], row, ids[g], counts[g], replace);
}

static void clear_row(subject *s, uint32_t row) {
  clbt_assert_ok(s->multi ? clbt_multi_table_clear_row(s->multi, row)
                          : clbt_table_clear_row(s->single, row));
  for (uint32_t g = 0; g < s->num_groups; ++g) s->models[g].count[row] = 0;
}

static void truncate_row(subject *s, uint32_t row) {
  size_t keep[MAX_GROUPS];
  for (uint32_t g = 0; g < s->num_groups; ++g)
    keep[g] = clbt_test_below(s->models[g].count[row] + 1);
  clbt_assert_ok(s->multi ? clbt_multi_table_truncate_row(s->multi, row, keep)
                          : clbt_table_truncate_row(s->single, row, keep[0]));
  for (uint32_t g = 0; g < s->num_groups; ++g)
    s->models[g].count[row] = (uint32_t)keep[g];
}

static void clear_all(subject *s) {
  clbt_assert_ok(s->multi ? clbt_multi_table_clear(s->multi)
                          : clbt_table_clear(s->single));
  for (uint32_t g = 0; g < s->num_groups; ++g)
    memset(s->models[g].count, 0, s->max_reqs * sizeof(uint32_t));
}

/* A burst of random row operations, now and then a whole clear. */
static void random_row_operations(subject *s) {
  uint32_t operations = 1 + clbt_test_below(12);
  for (uint32_t i = 0; i < operations; ++i) {
    uint32_t row = clbt_test_below(s->max_reqs), kind = clbt_test_below(10);
    if (kind < 5)
      update_row(s, row, 0, 2, false);
    else if (kind < 7)
      update_row(s, row, 0, 4, true);
    else if (kind < 8)
      clear_row(s, row);
    else
      truncate_row(s, row);
  }
  if (clbt_test_chance(3)) clear_all(s);
}

/* ---- batches ------------------------------------------------------------- */

static void batch_alloc(batch *b, const subject *s) {
  b->qsl = malloc((s->max_reqs + 1) * sizeof *b->qsl);
  b->positions = malloc(s->max_tokens * sizeof *b->positions);
  b->idx = malloc(s->max_reqs * sizeof *b->idx);
  ck_assert(b->qsl && b->positions && b->idx);
}

static void batch_free(batch *b) {
  free(b->qsl);
  free(b->positions);
  free(b->idx);
}

/* An idx_mapping entry that reads no row: negative or out of range. */
static int32_t stray_entry(const subject *s) {
  switch (clbt_test_below(4)) {
    case 0:
      return -1;
    case 1:
      return INT32_MIN;
    case 2:
      return (int32_t)(s->max_reqs + clbt_test_below(3));
    default:
      return INT32_MAX;
  }
}

/* idx_mapping: absent, a permutation of rows, or one with stray and
   repeated entries. */
static void random_idx(batch *b, const subject *s) {
  uint32_t kind = clbt_test_below(5);
  b->has_idx = kind != 0;
  for (uint32_t r = 0; r < s->max_reqs; ++r) b->idx[r] = (int32_t)r;
  for (uint32_t r = s->max_reqs; r-- > 1;) {
    uint32_t other = clbt_test_below(r + 1);
    int32_t kept = b->idx[r];
    b->idx[r] = b->idx[other];
    b->idx[other] = kept;
  }
  for (uint32_t r = 0; kind >= 3 && r < b->num_reqs; ++r) {
    if (clbt_test_chance(20))
      b->idx[r] = stray_entry(s);
    else if (r && clbt_test_chance(20))
      b->idx[r] = b->idx[clbt_test_below(r)];
  }
}

/* Tokens a request's row spans in group 0, and a little more, so that
   some positions miss it. */
static uint32_t position_range(const subject *s, const batch *b, uint32_t r) {
  const model *m = &s->models[0];
  int64_t row = request_row(b, r);
  uint64_t blocks = row >= 0 && row < s->max_reqs ? m->count[row] : 1;
  uint64_t tokens = blocks * m->block_size * m->world;
  return (uint32_t)(tokens + tokens / 8 + 2);
}

/* Padding, and the tokens of b->num_reqs requests reading rows through
   b's idx_mapping: ragged, now and then malformed. */
static void random_tokens(batch *b, const subject *s) {
  b->num_reqs_padded =
      clbt_test_chance(25)
          ? 0
          : b->num_reqs + clbt_test_below(s->max_reqs - b->num_reqs + 1);
  b->qsl[0] = clbt_test_chance(10) ? (int32_t)clbt_test_below(3) : 0;
  for (uint32_t r = 0; r < b->num_reqs; ++r) {
    uint32_t room = s->max_tokens - (uint32_t)b->qsl[r];
    uint32_t count = clbt_test_chance(50) ? 1 : clbt_test_below(room / 2 + 2);
    if (count > room) count = room;
    b->qsl[r + 1] = b->qsl[r] + (int32_t)count;
    uint32_t start = clbt_test_below(position_range(s, b, r));
    for (int32_t t = b->qsl[r]; t < b->qsl[r + 1]; ++t)
      b->positions[t] = (int64_t)start + (t - b->qsl[r]);
    if (count && clbt_test_chance(5))
      b->positions[b->qsl[r]] = -1 - (int64_t)clbt_test_below(9);
  }
  b->num_tokens = (uint32_t)b->qsl[b->num_reqs];
  if (clbt_test_chance(15))
    b->num_tokens += clbt_test_below(s->max_tokens - b->num_tokens + 1);
  for (uint32_t t = 0; t < b->num_tokens; ++t)
    if (t < (uint32_t)b->qsl[0] || t >= (uint32_t)b->qsl[b->num_reqs])
      b->positions[t] = (int64_t)clbt_test_below(100);
  if (b->num_reqs && clbt_test_chance(4)) /* out of order: no token is mapped */
    b->qsl[clbt_test_below(b->num_reqs + 1)] = (int32_t)s->max_tokens + 1;
}

static void random_batch(batch *b, const subject *s) {
  b->num_reqs = clbt_test_below(s->max_reqs + 1);
  b->gather = clbt_test_chance(85);
  random_idx(b, s);
  random_tokens(b, s);
}

/* ---- comparing ----------------------------------------------------------- */

static void describe_batch(const batch *b, char *text, size_t size) {
  int used = snprintf(text, size, "num_reqs %u padded %u tokens %u%s idx",
                      (unsigned)b->num_reqs, (unsigned)b->num_reqs_padded,
                      (unsigned)b->num_tokens, b->gather ? " gather" : "");
  for (uint32_t r = 0; r < b->num_reqs && used > 0 && (size_t)used < size;
       ++r)
    used += snprintf(text + used, size - (size_t)used, " %d",
                     b->has_idx ? (int)b->idx[r] : (int)r);
}

static void assert_slots(const int64_t *actual, const int64_t *expected,
                         uint32_t count, const char *what, const batch *b) {
  for (uint32_t t = 0; t < count; ++t)
    if (actual[t] != expected[t]) {
      char text[512];
      describe_batch(b, text, sizeof text);
      ck_abort_msg("%s: slot[%u] is %" PRId64 ", the model says %" PRId64
                   " (%s)",
                   what, (unsigned)t, actual[t], expected[t], text);
    }
}

static void assert_gathered(const int32_t *actual, const model *m,
                            const char *what, const batch *b) {
  for (uint32_t p = 0; p < m->max_reqs; ++p)
    for (uint32_t e = 0; e < m->width; ++e) {
      size_t i = (size_t)p * m->width + e;
      if (actual[i] != m->gathered[i]) {
        char text[512];
        describe_batch(b, text, sizeof text);
        ck_abort_msg("%s: gathered[%u][%u] is %d, the model says %d (%s)",
                     what, (unsigned)p, (unsigned)e, (int)actual[i],
                     (int)m->gathered[i], text);
      }
    }
}

/* ---- (a) the host reference against the model ---------------------------- */

/* One host step of every group, each against the model. */
static void host_step(subject *s, const batch *b, int32_t *const *gathered,
                      const char *name) {
  int64_t *slots = malloc((s->max_tokens + 1) * sizeof *slots);
  int64_t *expected = malloc((s->max_tokens + 1) * sizeof *expected);
  ck_assert(slots && expected);
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    for (uint32_t t = 0; t <= s->max_tokens; ++t)
      slots[t] = expected[t] = CLBT_TEST_POISON;
    clbt_host_step step = CLBT_HOST_STEP_INIT;
    step.flags = b->gather ? CLBT_STEP_GATHER : 0;
    step.num_reqs = b->num_reqs;
    step.num_reqs_padded = b->num_reqs_padded;
    step.num_tokens = b->num_tokens;
    step.query_start_loc = b->qsl;
    step.positions = b->positions;
    step.idx_mapping = b->has_idx ? b->idx : NULL;
    step.slot_mapping = slots;
    step.gathered_rows = gathered[g];
    clbt_assert_ok(clbt_table_compute_step_host(s->groups[g], &step));
    model_step(&s->models[g], b, expected, s->max_tokens);
    char what[160];
    snprintf(what, sizeof what, "%s, group %u, host", name, (unsigned)g);
    assert_slots(slots, expected, s->max_tokens + 1, what, b);
    assert_gathered(gathered[g], &s->models[g], what, b);
  }
  free(slots);
  free(expected);
}

/*
 * Every scenario on every rank: bursts of row operations, each followed by
 * random steps on the host rows (committed or not: the reference reads the
 * host's), the gathered tables starting as junk the steps must keep where
 * the rules keep it.
 */
START_TEST(host_reference_agrees_with_the_model) {
  clbt_test_seed("step, host");
  uint64_t steps = 0;
  for (uint32_t i = 0; i < NUM_SCENARIOS; ++i) {
    const scenario *sc = &scenarios[i];
    for (uint32_t rank = 0; rank < scenario_ranks(sc); ++rank) {
      int32_t *gathered[MAX_GROUPS] = {NULL};
      for (uint32_t g = 0; g < MAX_GROUPS; ++g) {
        gathered[g] = malloc(64 * 64 * sizeof(int32_t));
        ck_assert_ptr_nonnull(gathered[g]);
        for (size_t e = 0; e < 64 * 64; ++e)
          gathered[g][e] = (int32_t)(clbt_test_random() >> 33);
      }
      subject s;
      subject_create(&s, sc, rank, gathered);
      for (uint32_t g = 0; g < s.num_groups; ++g)
        ck_assert_uint_le((size_t)s.max_reqs * s.models[g].width, 64 * 64);
      batch b;
      batch_alloc(&b, &s);
      for (uint32_t burst = 0; burst < 30; ++burst) {
        random_row_operations(&s);
        for (uint32_t k = 0; k < 3; ++k, ++steps) {
          random_batch(&b, &s);
          host_step(&s, &b, gathered, sc->name);
        }
      }
      batch_free(&b);
      subject_free(&s);
      for (uint32_t g = 0; g < MAX_GROUPS; ++g) free(gathered[g]);
    }
  }
  printf("step, host: %" PRIu64 " steps of %d scenarios agree with the "
         "model\n", steps, (int)NUM_SCENARIOS);
}
END_TEST

/* ---- (b) the device step against the model ------------------------------- */

/* A step's device inputs. */
typedef struct device_batch {
  cl_mem qsl, positions, idx;
} device_batch;

static device_batch device_batch_create(const subject *s) {
  device_batch d = {clbt_test_buffer((s->max_reqs + 1) * sizeof(int32_t), NULL),
                    clbt_test_buffer(s->max_tokens * sizeof(int64_t), NULL),
                    clbt_test_buffer(s->max_reqs * sizeof(int32_t), NULL)};
  return d;
}

static void device_batch_release(device_batch *d) {
  clReleaseMemObject(d->qsl);
  clReleaseMemObject(d->positions);
  clReleaseMemObject(d->idx);
}

/*
 * A fresh table's gathered tables are zero, as the model's start. They are
 * not poisoned: the device keeps, per position, how far its row may be
 * nonzero and zeroes no further, which holds only while clbt alone writes
 * the buffer. Every gather is checked against the model's carried tables
 * instead, which hold what each step must have written.
 */
static void check_created_gather(const subject *s) {
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    const model *m = &s->models[g];
    size_t cells = (size_t)s->max_reqs * m->width;
    int32_t *gathered = malloc(cells * sizeof *gathered);
    ck_assert_ptr_nonnull(gathered);
    ck_assert_ptr_nonnull(clbt_table_gathered_rows(s->groups[g]));
    clbt_test_read(clbt_table_gathered_rows(s->groups[g]),
                   cells * sizeof *gathered, gathered);
    for (size_t i = 0; i < cells; ++i)
      ck_assert_msg(gathered[i] == 0, "group %u: gathered[%zu] is %d at "
                    "creation", (unsigned)g, i, (int)gathered[i]);
    free(gathered);
  }
}

/* The step on the device: the whole table's, or (group_by_group) each
   group's own. */
static void enqueue_step(subject *s, const clbt_step *step,
                         bool group_by_group) {
  cl_event done = NULL;
  if (s->multi && !group_by_group)
    clbt_assert_ok(clbt_multi_table_enqueue_step(s->multi, step, 0, NULL,
                                                 &done));
  else
    for (uint32_t g = 0; g < s->num_groups; ++g)
      clbt_assert_ok(clbt_table_enqueue_step(
          s->groups[g], step, 0, NULL, g + 1 == s->num_groups ? &done : NULL));
  ck_assert_int_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  clReleaseEvent(done);
}

/*
 * One device step with poisoned slot mappings, then every group's slots,
 * gathered rows and rejected-token count against the model.
 */
static void device_step(subject *s, const batch *b, const device_batch *d,
                        const char *name, bool group_by_group) {
  clbt_test_write(d->qsl, (b->num_reqs + 1) * sizeof(int32_t), b->qsl);
  if (b->num_tokens)
    clbt_test_write(d->positions, b->num_tokens * sizeof(int64_t),
                    b->positions);
  if (b->has_idx && b->num_reqs)
    clbt_test_write(d->idx, b->num_reqs * sizeof(int32_t), b->idx);
  for (uint32_t g = 0; g < s->num_groups; ++g)
    clbt_test_poison(clbt_table_slot_mapping(s->groups[g]), s->max_tokens);
  clbt_step step = CLBT_STEP_INIT;
  step.flags = b->gather ? CLBT_STEP_GATHER : 0;
  step.num_reqs = b->num_reqs;
  step.num_reqs_padded = b->num_reqs_padded;
  step.num_tokens = b->num_tokens;
  step.query_start_loc = d->qsl;
  step.positions = b->num_tokens ? d->positions : NULL;
  step.idx_mapping = b->has_idx ? d->idx : NULL;
  enqueue_step(s, &step, group_by_group);

  int64_t *slots = malloc(s->max_tokens * sizeof *slots);
  int64_t *expected = malloc(s->max_tokens * sizeof *expected);
  int32_t *gathered = malloc(s->max_reqs * 64 * sizeof *gathered);
  ck_assert(slots && expected && gathered);
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    model *m = &s->models[g];
    char what[160];
    snprintf(what, sizeof what, "%s, group %u, device", name, (unsigned)g);
    for (uint32_t t = 0; t < s->max_tokens; ++t) expected[t] = CLBT_TEST_POISON;
    model_step(m, b, expected, s->max_tokens);
    clbt_test_read(clbt_table_slot_mapping(s->groups[g]),
                   s->max_tokens * sizeof *slots, slots);
    assert_slots(slots, expected, s->max_tokens, what, b);
    ck_assert_uint_le(m->width, 64);
    clbt_test_read(clbt_table_gathered_rows(s->groups[g]),
                   (size_t)s->max_reqs * m->width * sizeof *gathered,
                   gathered);
    assert_gathered(gathered, m, what, b);
    uint32_t rejected = 0;
    clbt_assert_ok(clbt_table_read_rejected_tokens(s->groups[g], &rejected));
    ck_assert_msg(rejected == m->rejected,
                  "%s: %u rejected tokens, the model says %u", what,
                  (unsigned)rejected, (unsigned)m->rejected);
  }
  free(slots);
  free(expected);
  free(gathered);
}

/*
 * A commit whose wait list fails: nothing it carried reaches the device.
 * It carries a row rewritten with one block per group: PoCL 3.1 aborts when
 * the wait list of an empty commit (a marker) fails.
 */
static void failed_commit(subject *s) {
  update_row(s, clbt_test_below(s->max_reqs), 1, 1, true);
  /* The gate is failed once the queue is idle: PoCL 3.1 races its worker
     thread, still ending earlier commands, when it fails what waits for a
     failed gate (tests/engine/test_staging.c, user_event). */
  ck_assert_int_eq(clFinish(clbt_device_queue(clbt_test_device())),
                   CL_SUCCESS);
  cl_int error = CL_SUCCESS;
  cl_event gate =
      clCreateUserEvent(clbt_device_context(clbt_test_device()), &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  clbt_assert_ok(s->multi ? clbt_multi_table_enqueue_commit(
                                s->multi, s->max_reqs, 1, &gate, NULL)
                          : clbt_table_enqueue_commit(s->single, s->max_reqs,
                                                      1, &gate, NULL));
  ck_assert_int_eq(clSetUserEventStatus(gate, -1), CL_SUCCESS);
  clFinish(clbt_device_queue(clbt_test_device())); /* may report the error */
  clReleaseEvent(gate);
}

/* Serving: the batch's requests, each in its own row (request slot). */
typedef struct serving {
  uint32_t active[64], num_active;
  bool used[64];
} serving;

/* A request arrives into a free row, at the batch's end. */
static void arrive(subject *s, serving *v) {
  uint32_t row = clbt_test_below(s->max_reqs);
  while (v->used[row]) row = (row + 1) % s->max_reqs;
  v->used[row] = true;
  v->active[v->num_active++] = row;
  update_row(s, row, 0, 3, true);
}

/* The request at batch position p leaves: its row is cleared and freed,
   and the last request takes its position. */
static void leave(subject *s, serving *v, uint32_t p) {
  clear_row(s, v->active[p]);
  v->used[v->active[p]] = false;
  v->active[p] = v->active[--v->num_active];
}

/* What changes between two steps of a serving loop. */
static void serving_changes(subject *s, serving *v) {
  for (uint32_t p = 0; p < v->num_active; ++p) /* decode */
    if (clbt_test_chance(30)) update_row(s, v->active[p], 0, 1, false);
  if (v->num_active && clbt_test_chance(25))
    leave(s, v, clbt_test_below(v->num_active));
  while (v->num_active < s->max_reqs &&
         clbt_test_chance(v->num_active ? 30 : 90))
    arrive(s, v);
  if (v->num_active > 1 && clbt_test_chance(20)) { /* idx entries move */
    uint32_t a = clbt_test_below(v->num_active),
             b = clbt_test_below(v->num_active);
    uint32_t kept = v->active[a];
    v->active[a] = v->active[b];
    v->active[b] = kept;
  }
  if (v->num_active && clbt_test_chance(10))
    truncate_row(s, v->active[clbt_test_below(v->num_active)]);
  if (clbt_test_chance(3)) clear_all(s);
}

/* The batch: every active request, now and then a stray entry. */
static void serving_batch(batch *b, const subject *s, const serving *v,
                          bool steady) {
  b->num_reqs = v->num_active;
  b->has_idx = true;
  b->gather = steady || clbt_test_chance(90);
  for (uint32_t p = 0; p < v->num_active; ++p)
    b->idx[p] =
        !steady && clbt_test_chance(5) ? stray_entry(s) : (int32_t)v->active[p];
  random_tokens(b, s);
}

/*
 * Serving loops on the device, scenario by scenario on the first and last
 * ranks: requests arrive into free rows and leave (clear_row), rows grow
 * and are truncated, batch positions swap, the table is cleared; steady
 * steps repeat the last idx_mapping. Gathered tables start
 * zero and every gather is checked against the model's carried tables;
 * slot mappings are poisoned before every step; rejected-token counts are
 * compared after every step.
 */
START_TEST(device_steps_agree_with_the_model) {
  clbt_test_seed("step, device");
  uint64_t steps = 0;
  for (uint32_t i = 0; i < NUM_SCENARIOS; ++i) {
    const scenario *sc = &scenarios[i];
    uint32_t last = scenario_ranks(sc) - 1;
    for (uint32_t rank = 0; rank <= last; rank += last ? last : 1) {
      subject s;
      subject_create(&s, sc, rank, NULL);
      batch b;
      batch_alloc(&b, &s);
      device_batch d = device_batch_create(&s);
      serving v = {.num_active = 0};
      ck_assert_uint_le(s.max_reqs, 64);
      check_created_gather(&s);
      for (uint32_t k = 0; k < 40; ++k, ++steps) {
        bool steady = k && clbt_test_chance(30);
        if (!steady) serving_changes(&s, &v);
        else if (v.num_active)
          update_row(&s, v.active[clbt_test_below(v.num_active)], 0, 1, false);
        serving_batch(&b, &s, &v, steady);
        device_step(&s, &b, &d, sc->name, s.multi && clbt_test_chance(20));
        /* Now and then a random batch, idx_mapping and all. */
        if (clbt_test_chance(15)) {
          random_batch(&b, &s);
          device_step(&s, &b, &d, sc->name, false);
        }
      }
      device_batch_release(&d);
      batch_free(&b);
      subject_free(&s);
    }
  }
  printf("step, device: %" PRIu64 " serving steps agree with the model\n",
         steps);
}
END_TEST

/*
 * A commit whose upload never happens, then steps: the steps' own commits
 * must bring the device rows back to the host's. On a table of its own,
 * once: in the serving loops above, PoCL 3.1 now and then aborts inside
 * clSetUserEventStatus when a failed wait list reaches its commands
 * (pocl_update_event_failed: Invalid argument), as it does for any marker
 * whose wait list fails.
 */
START_TEST(steps_repair_a_failed_commit) {
  clbt_test_seed("step, failed commit");
  subject s;
  subject_create(&s, &scenarios[0], 0, NULL);
  batch b;
  batch_alloc(&b, &s);
  device_batch d = device_batch_create(&s);
  serving v = {.num_active = 0};
  for (uint32_t k = 0; k < 6; ++k) {
    serving_changes(&s, &v);
    if (k == 2) failed_commit(&s);
    serving_batch(&b, &s, &v, false);
    device_step(&s, &b, &d, "after a failed commit", false);
  }
  device_batch_release(&d);
  batch_free(&b);
  subject_free(&s);
}
END_TEST

/*
 * A dummy run (CLBT_STEP_DUMMY) with no batch buffers at all: every slot
 * becomes the pad id, gathered positions [0, 3) zero and position 3 as it
 * was, every exported request has no pages, and the row change made before
 * it stays pending: the device rows are still the committed ones, and the
 * next step commits it. Row r holds blocks 10 r + 1, 10 r + 2 (16 tokens
 * each).
 */
START_TEST(dummy_runs_read_nothing_and_commit_nothing) {
  enum { DUMMY_ROWS = 4, DUMMY_WIDTH = 4, DUMMY_TOKENS = 8 };
  clbt_table_config config = {.block_size = 16, .max_num_reqs = DUMMY_ROWS,
                              .max_num_blocks_per_req = DUMMY_WIDTH,
                              .max_num_batched_tokens = DUMMY_TOKENS};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  for (uint32_t r = 0; r < DUMMY_ROWS; ++r)
    clbt_assert_ok(clbt_table_add_row(
        table, r, (const int32_t[]){(int32_t)(10 * r + 1), (int32_t)(10 * r + 2)},
        2));
  cl_mem qsl = clbt_test_buffer(5 * sizeof(int32_t),
                                (const int32_t[]){0, 1, 2, 3, 4});
  cl_mem positions = clbt_test_buffer(4 * sizeof(int64_t),
                                      (const int64_t[]){0, 17, 5, 20});
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_GATHER | CLBT_STEP_EXPORT;
  step.num_reqs = step.num_tokens = DUMMY_ROWS;
  step.query_start_loc = qsl;
  step.positions = positions;
  clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
  /* Pending for later: row 1 gains block 99. */
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){99}, 1));

  clbt_export_buffers exported;
  clbt_assert_ok(clbt_table_export_buffers(table, &exported));
  clbt_test_poison(clbt_table_slot_mapping(table), DUMMY_TOKENS);
  clbt_step dummy = CLBT_STEP_INIT;
  dummy.flags = CLBT_STEP_DUMMY | CLBT_STEP_GATHER | CLBT_STEP_EXPORT;
  dummy.num_reqs_padded = 3;
  clbt_assert_ok(clbt_table_enqueue_step(table, &dummy, 0, NULL, NULL));
  int64_t slots[DUMMY_TOKENS];
  int32_t gathered[DUMMY_ROWS][DUMMY_WIDTH], rows[DUMMY_ROWS][DUMMY_WIDTH], indptr[4], last[3];
  clbt_test_read(clbt_table_slot_mapping(table), sizeof slots, slots);
  for (int t = 0; t < DUMMY_TOKENS; ++t) ck_assert_int_eq(slots[t], CLBT_PAD_SLOT_ID);
  clbt_test_read(clbt_table_gathered_rows(table), sizeof gathered, gathered);
  for (int b = 0; b < 3; ++b)
    for (int j = 0; j < DUMMY_WIDTH; ++j) ck_assert_int_eq(gathered[b][j], 0);
  ck_assert_int_eq(gathered[3][0], 31);
  ck_assert_int_eq(gathered[3][1], 32);
  clbt_test_read(exported.paged_kv_indptr, sizeof indptr, indptr);
  clbt_test_read(exported.paged_kv_last_page_len, sizeof last, last);
  for (int r = 0; r < 4; ++r) ck_assert_int_eq(indptr[r], 0);
  for (int r = 0; r < 3; ++r) ck_assert_int_eq(last[r], 0);
  clbt_test_read(clbt_table_device_data(table), sizeof rows, rows);
  ck_assert_int_eq(rows[1][1], 12);
  ck_assert_int_eq(rows[1][2], 0); /* block 99 not committed */

  /* A dummy run has no requests and no tokens. */
  dummy.num_reqs = 1;
  clbt_assert_fails(clbt_table_enqueue_step(table, &dummy, 0, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "CLBT_STEP_DUMMY");
  dummy.num_reqs = 0;
  dummy.num_tokens = 1;
  clbt_assert_fails(clbt_table_enqueue_step(table, &dummy, 0, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "num_tokens 1");

  clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
  clbt_test_read(clbt_table_device_data(table), sizeof rows, rows);
  ck_assert_int_eq(rows[1][2], 99);
  /* Request 1's token at position 17 is block 1 of row 1: 12 * 16 + 1. */
  clbt_test_read(clbt_table_slot_mapping(table), sizeof slots, slots);
  ck_assert_int_eq(slots[1], 12 * 16 + 1);
  clReleaseMemObject(qsl);
  clReleaseMemObject(positions);
  clbt_table_destroy(table);
}
END_TEST

/*
 * A step's checks run in the order docs/semantics.md gives ("Step"): a
 * step wrong in every way is refused for its first fault; with that fault
 * mended, for the next; and so on until it runs. On a token-mapping table:
 * the flags, the export's flags, state slots on a table of pages, the
 * batch, the wait list, the dense page table. On a NONE table: the state
 * slots' count against its width, then the export it has not.
 */
START_TEST(step_checks_run_in_the_documented_order) {
  const clbt_table_config pages = {.block_size = 16,
                                   .max_num_reqs = 2,
                                   .max_num_blocks_per_req = 4,
                                   .max_num_batched_tokens = 8};
  clbt_table_config states = pages;
  states.slot_mode = CLBT_SLOT_MODE_NONE;
  clbt_table *table = NULL, *none = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &pages, &table));
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &states, &none));
  const int32_t qsl_values[] = {0, 0};
  cl_mem qsl = clbt_test_buffer(sizeof qsl_values, qsl_values);

  clbt_step step = CLBT_STEP_INIT;
  step.num_reqs = 1;
  step.flags = CLBT_STEP_EXPORT | CLBT_STEP_STATE_SLOTS | 0x100;
  step.export_flags = 0x80 | CLBT_EXPORT_DENSE;
  step.dense_row_pitch = 100000;
  clbt_assert_fails(clbt_table_enqueue_step(table, &step, 1, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "step->flags 0x");
  step.flags &= ~0x100u;
  clbt_assert_fails(clbt_table_enqueue_step(table, &step, 1, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "step->export_flags 0x");
  step.export_flags = CLBT_EXPORT_DENSE;
  clbt_assert_fails(clbt_table_enqueue_step(table, &step, 1, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "it has no state slots");
  step.flags &= ~(uint32_t)CLBT_STEP_STATE_SLOTS;
  clbt_assert_fails(clbt_table_enqueue_step(table, &step, 1, NULL, NULL),
                    CLBT_NULL_ARGUMENT, "query_start_loc is NULL");
  step.query_start_loc = qsl;
  clbt_assert_fails(clbt_table_enqueue_step(table, &step, 1, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "wait_list is NULL with num_events 1");
  clbt_assert_fails(clbt_table_enqueue_step(table, &step, 0, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "dense_row_pitch 100000 x");
  step.dense_row_pitch = 0;
  clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));

  step = (clbt_step)CLBT_STEP_INIT;
  step.num_reqs = 1;
  step.flags = CLBT_STEP_EXPORT | CLBT_STEP_STATE_SLOTS;
  step.num_state_slots = clbt_table_width(none) + 1;
  clbt_assert_fails(clbt_table_enqueue_step(none, &step, 0, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "exceeds the table's width");
  step.num_state_slots = 1;
  clbt_assert_fails(clbt_table_enqueue_step(none, &step, 0, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "it has no export");
  step.flags &= ~(uint32_t)CLBT_STEP_EXPORT;
  clbt_assert_fails(clbt_table_enqueue_step(none, &step, 0, NULL, NULL),
                    CLBT_NULL_ARGUMENT, "query_start_loc is NULL");
  step.query_start_loc = qsl;
  clbt_assert_ok(clbt_table_enqueue_step(none, &step, 0, NULL, NULL));
  /* PoCL compiles a kernel at its first launch, on a thread of its own
     that must not outlive the process. */
  ck_assert_int_eq(clFinish(clbt_device_queue(clbt_test_device())),
                   CL_SUCCESS);

  clReleaseMemObject(qsl);
  clbt_table_destroy(table);
  clbt_table_destroy(none);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("step");
  TCase *tc = tcase_create("step");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, host_reference_agrees_with_the_model);
  tcase_add_test(tc, device_steps_agree_with_the_model);
  tcase_add_test(tc, steps_repair_a_failed_commit);
  tcase_add_test(tc, dummy_runs_read_nothing_and_commit_nothing);
  tcase_add_test(tc, step_checks_run_in_the_documented_order);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
