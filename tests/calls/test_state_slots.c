/*
 * State slots (CLBT_STEP_STATE_SLOTS, src/calls/checks.c,
 * cl/state_slots.cl) against an independent model of vLLM's rule
 * (get_aligned_state_indices_multi_group_kernel, vllm/v1/worker/
 * mamba_utils.py): batch request b reads S ids from its row, columns
 * first .. first + S - 1 with first = max((seq_len - 1) // block_size, 0);
 * a request of no length and the padding rows get the null block
 * (NULL_BLOCK_ID, 0); the model bounds the columns by what the row holds,
 * as clbt does (vLLM's review asked for a width bound), and counts the
 * requests that run past it and those the slot mapping's rules reject. The
 * model keeps each row as KV-manager block ids and calls nothing of clbt;
 * every output is poisoned before the step. The seed is printed;
 * CLBT_TEST_SEED=<seed> replays a run.
 */
#include "clbt_test.h"

#define MAX_GROUPS 10
#define MAX_REQS 6
#define MAX_TOKENS 64
#define MAX_KV_BLOCKS 12 /* per row, in every group below */
#define MAX_SLOTS 8

/* ---- a hand-worked example ---------------------------------------------- */

/*
 * A NONE table of 16-token blocks: row 0 holds states {3, 8, 2}, row 1
 * {5}. Two ids a request: request 0 (length 20, its last position 19 in
 * block 1) reads columns 1, 2: {8, 2}; request 1 (length 16, block 0) reads
 * {5} and then past its row: the null block, counted; request 2 (padding)
 * reads the null block twice. Entries from 6 on are not written.
 */
START_TEST(worked_example) {
  clbt_table_config config = CLBT_TABLE_CONFIG_INIT;
  config.block_size = 16;
  config.max_num_reqs = 4;
  config.max_num_blocks_per_req = 3;
  config.max_num_batched_tokens = 4;
  config.slot_mode = CLBT_SLOT_MODE_NONE;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){3, 8, 2}, 3));
  clbt_assert_ok(clbt_table_add_row(table, 1, (const int32_t[]){5}, 1));
  const int32_t qsl[] = {0, 1, 2};
  const int64_t positions[] = {19, 15};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  cl_mem out = clbt_table_state_slots(table);
  ck_assert_ptr_nonnull(out);
  clbt_test_poison32(out);
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_STATE_SLOTS;
  step.num_reqs = 2;
  step.num_reqs_padded = 3;
  step.num_tokens = 2;
  step.query_start_loc = qsl_buffer;
  step.positions = positions_buffer;
  step.num_state_slots = 2;
  clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
  int32_t ids[8];
  clbt_test_read(out, sizeof ids, ids);
  const int32_t expected[8] = {
      8, 2, 5, 0, 0, 0, CLBT_TEST_POISON32, CLBT_TEST_POISON32};
  for (int i = 0; i < 8; ++i)
    ck_assert_msg(ids[i] == expected[i], "entry %d is %d, expected %d", i,
                  ids[i], expected[i]);
  uint32_t rejected = 0;
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
  ck_assert_uint_eq(rejected, 1);
  /* A token-mapping table has none. */
  clbt_table_config tokens = config;
  tokens.slot_mode = CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT;
  clbt_table *token_table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &tokens, &token_table));
  ck_assert_ptr_null(clbt_table_state_slots(token_table));
  ck_assert_ptr_null(clbt_table_state_slots(NULL));
  clbt_table_destroy(token_table);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_table_destroy(table);
}
END_TEST

/* ---- the model ------------------------------------------------------------ */

/* One group: its rows as KV-manager block ids. */
typedef struct group_model {
  bool none;                /* CLBT_SLOT_MODE_NONE */
  uint32_t block_size;      /* tokens per KV-manager block */
  uint32_t per_block;       /* kernel blocks in one */
  uint32_t width;           /* kernel blocks a row holds at most */
  int32_t ids[MAX_REQS][MAX_KV_BLOCKS];
  uint32_t count[MAX_REQS]; /* KV blocks each row holds */
  uint32_t rejected;        /* what its rejected-token counter holds */
} group_model;

/* Kernel block e of a row: KV block e / per_block, split in per_block. */
static int32_t kernel_entry(const group_model *m, uint32_t row, uint32_t e) {
  return m->ids[row][e / m->per_block] * (int32_t)m->per_block +
         (int32_t)(e % m->per_block);
}

/* One step's inputs, on the host. */
typedef struct batch {
  uint32_t num_reqs, num_reqs_padded, num_tokens, slots;
  int32_t null_block;
  int32_t qsl[MAX_REQS + 1];
  int64_t positions[MAX_TOKENS];
  bool has_idx, has_seq_lens;
  int32_t idx[MAX_REQS], seq_lens[MAX_REQS];
} batch;

/*
 * Batch request b's ids in a NONE group, into out[0, slots): the null
 * block for padding, rejected requests and no length; else the row's
 * kernel blocks from the one holding position L - 1, the null block past
 * what the row holds. Counts as the rules say.
 */
static void model_request(group_model *m, const batch *b, uint32_t r,
                          int32_t *out) {
  for (uint32_t s = 0; s < b->slots; ++s) out[s] = b->null_block;
  if (r >= b->num_reqs) return;
  int64_t row = b->has_idx ? b->idx[r] : (int64_t)r;
  if (row < 0) return;
  int32_t begin = b->qsl[r], end = b->qsl[r + 1];
  if (row >= MAX_REQS || begin < 0 || end < begin ||
      end > (int64_t)b->num_tokens) {
    ++m->rejected;
    return;
  }
  int64_t length = b->has_seq_lens ? b->seq_lens[r]
                   : end > begin   ? b->positions[end - 1] + 1
                                   : 0;
  if (length < end - begin || length > INT32_MAX) {
    ++m->rejected;
    return;
  }
  if (length == 0) return;
  uint64_t kernel_block = m->block_size / m->per_block;
  uint64_t first = (uint64_t)(length - 1) / kernel_block;
  uint64_t held = (uint64_t)m->count[row] * m->per_block;
  for (uint32_t s = 0; s < b->slots; ++s)
    if (first + s < held) out[s] = kernel_entry(m, (uint32_t)row,
                                                (uint32_t)(first + s));
  if (first + b->slots > held) ++m->rejected;
}

/* ---- the subject: a multi-group table (or one table) per rank ---------- */

typedef struct subject {
  clbt_table *single;
  clbt_multi_table *multi;
  uint32_t num_groups;
  clbt_table *groups[MAX_GROUPS];
  group_model models[MAX_GROUPS];
} subject;

typedef struct scenario {
  const char *name;
  uint32_t ranks;          /* CP ranks, each its own table */
  uint32_t cp_interleave;
  uint32_t num_groups;     /* 0: a single NONE table of groups[0] */
  clbt_group_config groups[MAX_GROUPS];
} scenario;

#define NONE CLBT_SLOT_MODE_NONE
#define GROUP(...) {.struct_size = (uint32_t)sizeof(clbt_group_config), \
                    __VA_ARGS__}
/* The model keeps at most 12 KV blocks a row in every group (a token
   group's row, aligned to 128 tokens, may have room for more). */
static const scenario scenarios[] = {
    {"a NONE table", 1, 1, 0,
     {GROUP(.block_size = 16, .max_num_blocks = 12, .slot_mode = NONE)}},
    {"a NONE table of CP rank 1 of 2", 2, 4, 0,
     {GROUP(.block_size = 16, .max_num_blocks = 12, .slot_mode = NONE)}},
    {"NONE groups beside token groups with kernel blocks; CP 2, "
     "interleave 4",
     2, 4, 4,
     {GROUP(.block_size = 32, .kernel_block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 16, .max_num_blocks = 12, .slot_mode = NONE),
      GROUP(.block_size = 64, .max_num_blocks = 12, .slot_mode = NONE),
      GROUP(.block_size = 32, .kernel_block_size = 8, .max_num_blocks = 3,
            .slot_mode = NONE)}},
    {"ten groups: two launches", 1, 1, 10,
     {GROUP(.block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 16, .max_num_blocks = 12, .slot_mode = NONE),
      GROUP(.block_size = 32, .kernel_block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 64, .max_num_blocks = 4, .slot_mode = NONE),
      GROUP(.block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 8, .max_num_blocks = 12, .slot_mode = NONE),
      GROUP(.block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 32, .max_num_blocks = 6, .slot_mode = NONE),
      GROUP(.block_size = 16, .max_num_blocks = 12)}},
};
enum { NUM_SCENARIOS = sizeof scenarios / sizeof scenarios[0] };

static void subject_create(subject *s, const scenario *sc, uint32_t rank) {
  memset(s, 0, sizeof *s);
  clbt_multi_table_config shape =
      clbt_test_shape(MAX_REQS, MAX_TOKENS, sc->ranks, rank, sc->cp_interleave);
  s->num_groups = clbt_test_create_tables(&shape, sc->groups, sc->num_groups,
                                          &s->multi, &s->single, s->groups);
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    const clbt_group_config *group = &sc->groups[g];
    group_model *m = &s->models[g];
    m->none = group->slot_mode == NONE;
    m->block_size = group->block_size;
    m->per_block = group->block_size / (group->kernel_block_size
                                            ? group->kernel_block_size
                                            : group->block_size);
    /* The row width is vLLM's rule: NONE groups unaligned. */
    m->width = group->max_num_blocks * m->per_block;
    ck_assert_uint_le(group->max_num_blocks, MAX_KV_BLOCKS);
    if (m->none) ck_assert_uint_eq(clbt_table_width(s->groups[g]), m->width);
  }
}

static void subject_free(subject *s) {
  clbt_table_destroy(s->single);
  clbt_multi_table_destroy(s->multi);
}

/* The smallest width of the NONE groups, which bounds the ids a request. */
static uint32_t narrowest(const subject *s) {
  uint32_t width = MAX_SLOTS;
  for (uint32_t g = 0; g < s->num_groups; ++g)
    if (s->models[g].none && s->models[g].width < width)
      width = s->models[g].width;
  return width;
}

/* ---- row operations, on clbt and on the model --------------------------- */

/* Each group's row r grows by 0..2 blocks (as many as fit), or is
   truncated, or replaced; the same on every rank. */
static void edit_row(subject *const *ranks, uint32_t num_ranks, uint32_t r) {
  subject *s = ranks[0];
  int32_t ids[MAX_GROUPS][MAX_KV_BLOCKS];
  const int32_t *lists[MAX_GROUPS];
  size_t counts[MAX_GROUPS], keep[MAX_GROUPS];
  /* 0: truncate, 1: replace, else append */
  uint32_t kind = clbt_test_below(10);
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    group_model *m = &s->models[g];
    lists[g] = ids[g];
    uint32_t capacity = m->width / m->per_block;
    uint32_t start = kind == 1 ? 0 : m->count[r];
    counts[g] = kind == 0 ? 0 : clbt_test_below(3);
    if (start + counts[g] > capacity) counts[g] = capacity - start;
    keep[g] = kind == 0 ? clbt_test_below(m->count[r] + 1) : 0;
    for (size_t i = 0; i < counts[g]; ++i)
      ids[g][i] = 1 + (int32_t)clbt_test_below(5000);
  }
  for (uint32_t k = 0; k < num_ranks; ++k) {
    subject *t = ranks[k];
    if (t->single) {
      if (kind == 0)
        clbt_assert_ok(clbt_table_truncate_row(t->single, r, keep[0]));
      else if (kind == 1)
        clbt_assert_ok(clbt_table_add_row(t->single, r, ids[0], counts[0]));
      else
        clbt_assert_ok(
            clbt_table_append_row(t->single, r, ids[0], counts[0]));
    } else if (kind == 0) {
      clbt_assert_ok(clbt_multi_table_truncate_row(t->multi, r, keep));
    } else if (kind == 1) {
      clbt_assert_ok(clbt_multi_table_add_row(t->multi, r, lists, counts));
    } else {
      clbt_assert_ok(clbt_multi_table_append_row(t->multi, r, lists, counts));
    }
  }
  for (uint32_t k = 0; k < num_ranks; ++k)
    for (uint32_t g = 0; g < s->num_groups; ++g) {
      group_model *m = &ranks[k]->models[g];
      if (kind == 0) {
        m->count[r] = (uint32_t)keep[g];
        continue;
      }
      if (kind == 1) m->count[r] = 0;
      for (size_t i = 0; i < counts[g]; ++i) m->ids[r][m->count[r]++] = ids[g][i];
    }
}

/* ---- random batches ------------------------------------------------------ */

/*
 * A batch: 0..MAX_REQS requests of 0..3 tokens each, whose last position
 * is its length - 1, lengths up to past what the rows hold; idx_mapping
 * absent, a permutation, or with negative, repeated and out-of-range
 * entries; seq_lens given or not, now and then below the scheduled
 * tokens; now and then a request whose query_start_loc runs backwards or
 * past num_tokens.
 */
static void random_batch(batch *b, uint32_t most_slots) {
  memset(b, 0, sizeof *b);
  b->num_reqs = clbt_test_below(MAX_REQS + 1);
  b->num_reqs_padded =
      b->num_reqs + clbt_test_below(MAX_REQS - b->num_reqs + 1);
  if (b->num_reqs_padded == b->num_reqs && clbt_test_chance(50))
    b->num_reqs_padded = 0;
  b->slots = 1 + clbt_test_below(most_slots);
  b->null_block = clbt_test_chance(50) ? 0 : clbt_test_chance(50) ? -1 : 77;
  for (uint32_t r = 0; r < b->num_reqs; ++r) {
    uint32_t tokens = clbt_test_below(4);
    int64_t length = tokens + clbt_test_below(200);
    b->qsl[r + 1] = b->qsl[r] + (int32_t)tokens;
    for (uint32_t i = 0; i < tokens; ++i)
      b->positions[b->qsl[r] + (int32_t)i] = length - tokens + i;
    b->seq_lens[r] =
        clbt_test_chance(10) && tokens ? (int32_t)tokens - 1 : (int32_t)length;
  }
  b->num_tokens = (uint32_t)b->qsl[b->num_reqs] + clbt_test_below(3);
  b->has_seq_lens = clbt_test_chance(50);
  if (b->num_reqs && clbt_test_chance(10)) {
    /* One request's range runs backwards, or past num_tokens. */
    uint32_t r = clbt_test_below(b->num_reqs);
    if (clbt_test_chance(50))
      b->qsl[r + 1] = b->qsl[r] - 1;
    else
      b->num_tokens = (uint32_t)b->qsl[b->num_reqs] - (b->qsl[b->num_reqs] > 0);
  }
  b->has_idx = clbt_test_chance(60);
  for (uint32_t r = 0; r < b->num_reqs; ++r) {
    uint32_t kind = clbt_test_below(10);
    b->idx[r] = kind == 0   ? -1 - (int32_t)clbt_test_below(3)
                : kind == 1 ? MAX_REQS + (int32_t)clbt_test_below(3)
                : kind == 2 ? INT32_MAX
                            : (int32_t)clbt_test_below(MAX_REQS);
  }
}

/* ---- the device step against the model ---------------------------------- */

typedef struct device_batch {
  cl_mem qsl, positions, idx, seq_lens;
} device_batch;

static device_batch device_batch_create(void) {
  device_batch d = {clbt_test_buffer((MAX_REQS + 1) * sizeof(int32_t), NULL),
                    clbt_test_buffer(MAX_TOKENS * sizeof(int64_t), NULL),
                    clbt_test_buffer(MAX_REQS * sizeof(int32_t), NULL),
                    clbt_test_buffer(MAX_REQS * sizeof(int32_t), NULL)};
  return d;
}

static void device_batch_release(device_batch *d) {
  clReleaseMemObject(d->qsl);
  clReleaseMemObject(d->positions);
  clReleaseMemObject(d->idx);
  clReleaseMemObject(d->seq_lens);
}

static void describe(const batch *b, char *text, size_t size) {
  int used = snprintf(text, size,
                      "num_reqs %u padded %u tokens %u slots %u null %d "
                      "seq_lens %d idx",
                      b->num_reqs, b->num_reqs_padded, b->num_tokens, b->slots,
                      b->null_block, b->has_seq_lens);
  for (uint32_t r = 0; b->has_idx && r < b->num_reqs && used > 0 &&
                       (size_t)used < size;
       ++r)
    used += snprintf(text + used, size - (size_t)used, " %d", b->idx[r]);
}

/*
 * One step with every NONE group's state slots poisoned, on every rank;
 * each NONE group's ids and rejected-token count against the model. With
 * dummy, a dummy run of b->num_reqs_padded entries (whose batch must have
 * no requests and no tokens).
 */
static void device_step(subject *const *ranks, uint32_t num_ranks,
                        const batch *b, const device_batch *d, bool dummy) {
  clbt_test_write(d->qsl, (b->num_reqs + 1) * sizeof(int32_t), b->qsl);
  if (b->num_tokens)
    clbt_test_write(d->positions, b->num_tokens * sizeof(int64_t),
                    b->positions);
  if (b->num_reqs) {
    clbt_test_write(d->idx, b->num_reqs * sizeof(int32_t), b->idx);
    clbt_test_write(d->seq_lens, b->num_reqs * sizeof(int32_t), b->seq_lens);
  }
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_STATE_SLOTS | (dummy ? CLBT_STEP_DUMMY : 0);
  step.num_reqs = b->num_reqs;
  step.num_reqs_padded = b->num_reqs_padded;
  step.num_tokens = b->num_tokens;
  step.query_start_loc = dummy ? NULL : d->qsl;
  step.positions = b->num_tokens ? d->positions : NULL;
  step.idx_mapping = b->has_idx ? d->idx : NULL;
  step.seq_lens = b->has_seq_lens ? d->seq_lens : NULL;
  step.num_state_slots = b->slots == 1 && clbt_test_chance(50) ? 0 : b->slots;
  step.state_null_block = b->null_block;
  char text[256];
  describe(b, text, sizeof text);
  uint32_t padded = b->num_reqs_padded ? b->num_reqs_padded : b->num_reqs;
  for (uint32_t k = 0; k < num_ranks; ++k) {
    subject *s = ranks[k];
    for (uint32_t g = 0; g < s->num_groups; ++g)
      if (s->models[g].none)
        clbt_test_poison32(clbt_table_state_slots(s->groups[g]));
    if (s->multi)
      clbt_assert_ok(clbt_multi_table_enqueue_step(s->multi, &step, 0, NULL,
                                                   NULL));
    else
      clbt_assert_ok(clbt_table_enqueue_step(s->single, &step, 0, NULL, NULL));
    for (uint32_t g = 0; g < s->num_groups; ++g) {
      group_model *m = &s->models[g];
      if (!m->none) continue;
      /* Its room: [max_num_reqs][width]. */
      int32_t got[MAX_REQS * MAX_KV_BLOCKS * 4], want[MAX_SLOTS];
      uint32_t room = MAX_REQS * m->width;
      ck_assert_uint_le(room, sizeof got / sizeof got[0]);
      clbt_test_read(clbt_table_state_slots(s->groups[g]),
                     room * sizeof *got, got);
      for (uint32_t r = 0; r < MAX_REQS; ++r) {
        model_request(m, b, r, want);
        for (uint32_t j = 0; j < b->slots; ++j) {
          int32_t expected = r < padded ? want[j] : CLBT_TEST_POISON32;
          ck_assert_msg(got[r * b->slots + j] == expected,
                        "rank %u group %u request %u slot %u: %d, expected "
                        "%d (%s)",
                        k, g, r, j, got[r * b->slots + j], expected, text);
        }
      }
      for (uint32_t e = MAX_REQS * b->slots; e < room; ++e)
        ck_assert_int_eq(got[e], CLBT_TEST_POISON32);
      uint32_t rejected = 0;
      clbt_assert_ok(clbt_table_read_rejected_tokens(s->groups[g], &rejected));
      ck_assert_msg(rejected == m->rejected,
                    "rank %u group %u: %u rejected, the model says %u (%s)", k,
                    g, rejected, m->rejected, text);
    }
  }
}

/* The model's padding rows need no row: any request past num_reqs. */
static void run_scenario(const scenario *sc, uint32_t rounds) {
  subject subjects[2], *ranks[2] = {&subjects[0], &subjects[1]};
  uint32_t num_ranks = sc->num_groups ? sc->ranks : 1;
  /* A single table of CP rank 1 stands for the sharded NONE table. */
  for (uint32_t k = 0; k < num_ranks; ++k)
    subject_create(&subjects[k], sc,
                   sc->num_groups ? k : sc->ranks - 1);
  device_batch d = device_batch_create();
  for (uint32_t round = 0; round < rounds; ++round) {
    for (uint32_t r = 0; r < MAX_REQS; ++r)
      if (clbt_test_chance(60)) edit_row(ranks, num_ranks, r);
    batch b;
    random_batch(&b, narrowest(&subjects[0]));
    device_step(ranks, num_ranks, &b, &d, false);
  }
  /* A dummy run: every padded entry is the null block, none counted. */
  batch dummy = {.num_reqs_padded = MAX_REQS - 1, .slots = 2,
                 .null_block = -1};
  device_step(ranks, num_ranks, &dummy, &d, true);
  device_batch_release(&d);
  for (uint32_t k = 0; k < num_ranks; ++k) subject_free(&subjects[k]);
}

START_TEST(steps_agree_with_the_model) {
  clbt_test_seed("state_slots");
  for (int i = 0; i < NUM_SCENARIOS; ++i) {
    printf("state_slots: %s\n", scenarios[i].name);
    run_scenario(&scenarios[i], 40);
  }
}
END_TEST

/* The state slots ride in the step's one launch: a step that also maps
   and exports gives the same ids, and its slots are untouched by them. */
START_TEST(state_slots_beside_the_export) {
  const clbt_group_config groups[] = {
      GROUP(.block_size = 16, .max_num_blocks = 8),
      GROUP(.block_size = 16, .max_num_blocks = 4, .slot_mode = NONE)};
  clbt_multi_table_config config = CLBT_MULTI_TABLE_CONFIG_INIT;
  config.max_num_reqs = 2;
  config.max_num_batched_tokens = 4;
  config.num_groups = 2;
  config.groups = groups;
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  const int32_t *lists[] = {(const int32_t[]){9, 4}, (const int32_t[]){6, 1}};
  const size_t counts[] = {2, 2};
  clbt_assert_ok(clbt_multi_table_add_row(table, 1, lists, counts));
  /* Batch request 0 reads row 1 at positions 16, 17: slots 4*16 + 0, 1. */
  const int32_t qsl[] = {0, 2}, idx[] = {1};
  const int64_t positions[] = {16, 17};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem idx_buffer = clbt_test_buffer(sizeof idx, idx);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  clbt_table *none = clbt_multi_table_group(table, 1);
  clbt_test_poison32(clbt_table_state_slots(none));
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_STATE_SLOTS | CLBT_STEP_EXPORT | CLBT_STEP_GATHER;
  step.num_reqs = 1;
  step.num_tokens = 2;
  step.query_start_loc = qsl_buffer;
  step.positions = positions_buffer;
  step.idx_mapping = idx_buffer;
  step.num_state_slots = 2;
  clbt_assert_ok(clbt_multi_table_enqueue_step(table, &step, 0, NULL, NULL));
  int32_t ids[4];
  int64_t slots[4];
  clbt_test_read(clbt_table_state_slots(none), sizeof ids, ids);
  ck_assert_int_eq(ids[0], 1); /* length 18: block 1 of {6, 1} */
  ck_assert_int_eq(ids[1], 0); /* past the row: the null block */
  ck_assert_int_eq(ids[2], CLBT_TEST_POISON32);
  clbt_test_read(clbt_table_slot_mapping(clbt_multi_table_group(table, 0)),
                 sizeof slots, slots);
  ck_assert_int_eq(slots[0], 4 * 16);
  ck_assert_int_eq(slots[1], 4 * 16 + 1);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(idx_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_multi_table_destroy(table);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("state_slots");
  TCase *c = tcase_create("state_slots");
  tcase_add_test(c, worked_example);
  tcase_add_test(c, steps_agree_with_the_model);
  tcase_add_test(c, state_slots_beside_the_export);
  suite_add_tcase(suite, c);
  return clbt_test_run(suite);
}
