/*
 * Token slots (clbt_*_enqueue_token_slots, src/calls/token_slots.c,
 * cl/token_slots.cl) against an independent model of vLLM's
 * triton_convert_req_index_to_global_index and its DCP path
 * (vllm/v1/attention/backends/mla/sparse_utils.py): entry (i, j) of an
 * index matrix is token t = index[i][j] of row i's request; on DCP rank R
 * of W with interleave I it is local when (t / I) % W == R, at local index
 * l = t / (W * I) * I + t % I, kernel block l / kbs of the request's row,
 * offset l % kbs: slot = block_table[row][l / kbs] * kbs + l % kbs. The
 * model keeps the rows as KV-manager block ids, bounds each token by what
 * its row holds (where vLLM bounds by the row's width) and counts as
 * clbt's rules say. A K/V round trip then writes a cache through the slot
 * mapping of served steps on every CP rank and reads arbitrary token lists
 * back through the translated slots: each token must give its own value,
 * on exactly one rank. Every output is poisoned first. The seed is printed;
 * CLBT_TEST_SEED=<seed> replays a run.
 */
#include "clbt_test.h"

#include <stdlib.h>

#define MAX_GROUPS 10
#define MAX_RANKS 2
#define MAX_REQS 6
#define MAX_TOKENS 64
#define MAX_KV_BLOCKS 12 /* per row, in every group below */
#define MAX_K 9
#define KV_BLOCKS 509 /* a prime: ids dealt as (n * 37) mod 509 are distinct */

static void enqueue_and_wait(clbt_table *table, clbt_multi_table *multi,
                             const clbt_token_slots_request *request) {
  cl_event done = NULL;
  if (multi)
    clbt_assert_ok(clbt_multi_table_enqueue_token_slots(multi, request, 0,
                                                        NULL, &done));
  else
    clbt_assert_ok(
        clbt_table_enqueue_token_slots(table, request, 0, NULL, &done));
  ck_assert_int_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  clReleaseEvent(done);
}

/* ---- hand-worked examples ---------------------------------------------- */

/*
 * Rows {7, 3} and {5} of 4-token blocks over kernel blocks of 2: row 0 is
 * kernel blocks 14 15 6 7, row 1 10 11. Rows 0, 1 of the matrix belong to
 * request 0, row 2 to request 1, row 3 to none (padding tokens):
 *   row 0: tokens 0, 5, -1  -> 14*2+0, 6*2+1, -1
 *   row 1: tokens 7, 8, -2  -> 7*2+1, -1 (past the row), -1 (below -1)
 *   row 2: tokens 3, 4, 0   -> 11*2+1, -1 (past the row), 10*2+0
 *   row 3: tokens 1, 2, 3   -> -1 -1 -1, not counted
 * Three counted; the slots are the slot mapping's for those positions.
 */
START_TEST(worked_example) {
  clbt_table_config config = CLBT_TABLE_CONFIG_INIT;
  config.block_size = 4;
  config.kernel_block_size = 2;
  config.max_num_reqs = 2;
  config.max_num_blocks_per_req = 2;
  config.max_num_batched_tokens = 4;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){7, 3}, 2));
  clbt_assert_ok(clbt_table_add_row(table, 1, (const int32_t[]){5}, 1));
  clbt_assert_ok(clbt_table_commit(table, 2));
  const int32_t qsl[] = {0, 2, 3};
  const int32_t indices[4][3] = {{0, 5, -1}, {7, 8, -2}, {3, 4, 0}, {1, 2, 3}};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem indices_buffer = clbt_test_buffer(sizeof indices, indices);
  cl_mem out = clbt_test_buffer(16 * sizeof(int32_t), NULL);
  clbt_test_poison32(out);
  clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
  request.num_reqs = 2;
  request.num_rows = 4;
  request.indices_per_row = 3;
  request.query_start_loc = qsl_buffer;
  request.token_indices = indices_buffer;
  request.token_slots = out;
  enqueue_and_wait(table, NULL, &request);
  int32_t slots[16];
  clbt_test_read(out, sizeof slots, slots);
  const int32_t P = CLBT_TEST_POISON32;
  const int32_t expected[16] = {28, 13, -1, 15, -1, -1, 23, -1,
                                20, -1, -1, -1, P,  P,  P,  P};
  for (int i = 0; i < 16; ++i)
    ck_assert_msg(slots[i] == expected[i], "entry %d is %d, expected %d", i,
                  slots[i], expected[i]);
  uint32_t rejected = 0;
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
  ck_assert_uint_eq(rejected, 3);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(indices_buffer);
  clReleaseMemObject(out);
  clbt_table_destroy(table);
}
END_TEST

/*
 * An output kernels may only read (CL_MEM_READ_ONLY), where OpenCL leaves
 * a kernel's write undefined (a strict driver may fault or drop it), is
 * refused naming token_slots, and nothing is written or counted: it was
 * taken, and the kernel wrote it. worked_example's table and matrix.
 */
START_TEST(a_read_only_output_is_refused) {
  clbt_table_config config = CLBT_TABLE_CONFIG_INIT;
  config.block_size = 4;
  config.max_num_reqs = 2;
  config.max_num_blocks_per_req = 2;
  config.max_num_batched_tokens = 4;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){7, 3}, 2));
  clbt_assert_ok(clbt_table_commit(table, 1));
  const int32_t qsl[] = {0, 1}, indices[] = {0, 5, 9};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem indices_buffer = clbt_test_buffer(sizeof indices, indices);
  cl_mem out = clbt_test_read_only_buffer(sizeof indices, NULL);
  clbt_test_poison32(out);
  clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
  request.num_reqs = 1;
  request.num_rows = 1;
  request.indices_per_row = 3;
  request.query_start_loc = qsl_buffer;
  request.token_indices = indices_buffer;
  request.token_slots = out;
  clbt_assert_fails(
      clbt_table_enqueue_token_slots(table, &request, 0, NULL, NULL),
      CLBT_READ_ONLY_BUFFER,
      "token_slots is a CL_MEM_READ_ONLY buffer, which kernels may only "
      "read; clbt's kernel writes it: make it CL_MEM_READ_WRITE");
  int32_t slots[3];
  clbt_test_read(out, sizeof slots, slots);
  for (int i = 0; i < 3; ++i)
    ck_assert_msg(slots[i] == CLBT_TEST_POISON32, "entry %d was written", i);
  uint32_t rejected = 7;
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
  ck_assert_uint_eq(rejected, 0);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(indices_buffer);
  clReleaseMemObject(out);
  clbt_table_destroy(table);
}
END_TEST

/*
 * -1, vLLM's top-k padding, is never counted, even where every other
 * entry is (issue 27): the tables of worked_example, one matrix row per
 * request (query_start_loc 0, 1, 2), rows {0, -1, 5} and {1, -1, 3}.
 *   idx_mapping {0, 7}: request 0 reads row 0 -> 28, -1, 13; request 1's
 *     entry 7 is not below max_num_reqs 2 -> -1 -1 -1, two counted (1, 3);
 *   query_start_loc 0, 3, 2 (decreasing, and past num_rows 2): every
 *     entry -1, the four that are not -1 counted.
 */
START_TEST(padding_indices_are_never_counted) {
  clbt_table_config config = CLBT_TABLE_CONFIG_INIT;
  config.block_size = 4;
  config.kernel_block_size = 2;
  config.max_num_reqs = 2;
  config.max_num_blocks_per_req = 2;
  config.max_num_batched_tokens = 4;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){7, 3}, 2));
  clbt_assert_ok(clbt_table_add_row(table, 1, (const int32_t[]){5}, 1));
  clbt_assert_ok(clbt_table_commit(table, 2));
  const int32_t qsl[2][3] = {{0, 1, 2}, {0, 3, 2}}, idx[] = {0, 7};
  const int32_t indices[2][3] = {{0, -1, 5}, {1, -1, 3}};
  const int32_t expected[2][6] = {{28, -1, 13, -1, -1, -1},
                                  {-1, -1, -1, -1, -1, -1}};
  const uint32_t counted[2] = {2, 4};
  cl_mem idx_buffer = clbt_test_buffer(sizeof idx, idx);
  cl_mem indices_buffer = clbt_test_buffer(sizeof indices, indices);
  cl_mem out = clbt_test_buffer(sizeof indices, NULL);
  for (int c = 0; c < 2; ++c) {
    cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl[c], qsl[c]);
    clbt_test_poison32(out);
    clbt_assert_ok(clbt_table_reset_rejected_tokens(table));
    clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
    request.num_reqs = 2;
    request.num_rows = 2;
    request.indices_per_row = 3;
    request.query_start_loc = qsl_buffer;
    request.idx_mapping = c == 0 ? idx_buffer : NULL;
    request.token_indices = indices_buffer;
    request.token_slots = out;
    enqueue_and_wait(table, NULL, &request);
    int32_t slots[6];
    clbt_test_read(out, sizeof slots, slots);
    for (int i = 0; i < 6; ++i)
      ck_assert_msg(slots[i] == expected[c][i], "case %d: entry %d is %d, "
                    "expected %d", c, i, slots[i], expected[c][i]);
    uint32_t rejected = 0;
    clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
    ck_assert_uint_eq(rejected, counted[c]);
    clReleaseMemObject(qsl_buffer);
  }
  clReleaseMemObject(idx_buffer);
  clReleaseMemObject(indices_buffer);
  clReleaseMemObject(out);
  clbt_table_destroy(table);
}
END_TEST

/*
 * A slot past INT32_MAX is -1 and counted: the output is int32, as
 * vLLM's; the int64 slot mapping has it. INT32_MAX = 134217727 x 16 + 15:
 * token 15 of block 134217727 is exactly INT32_MAX, and kept; token 0 of
 * block 134217728 is 2^31, and token 1 of block 200000000 far past it.
 */
START_TEST(slots_past_int32_are_rejected) {
  clbt_table_config config = CLBT_TABLE_CONFIG_INIT;
  config.block_size = 16;
  config.max_num_reqs = 1;
  config.max_num_blocks_per_req = 4;
  config.max_num_batched_tokens = 2;
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_add_row(
      table, 0, (const int32_t[]){9, 134217727, 134217728, 200000000}, 4));
  clbt_assert_ok(clbt_table_commit(table, 1));
  const int32_t qsl[] = {0, 1}, indices[] = {3, 31, 32, 49};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem indices_buffer = clbt_test_buffer(sizeof indices, indices);
  cl_mem out = clbt_test_buffer(sizeof indices, NULL);
  clbt_test_poison32(out);
  clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
  request.num_reqs = 1;
  request.num_rows = 1;
  request.indices_per_row = 4;
  request.query_start_loc = qsl_buffer;
  request.token_indices = indices_buffer;
  request.token_slots = out;
  enqueue_and_wait(table, NULL, &request);
  int32_t slots[4];
  clbt_test_read(out, sizeof slots, slots);
  ck_assert_int_eq(slots[0], 9 * 16 + 3);
  ck_assert_int_eq(slots[1], INT32_MAX);
  ck_assert_int_eq(slots[2], -1);
  ck_assert_int_eq(slots[3], -1);
  uint32_t rejected = 0;
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
  ck_assert_uint_eq(rejected, 2);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(indices_buffer);
  clReleaseMemObject(out);
  clbt_table_destroy(table);
}
END_TEST

/* A multi-group table with no token group translates nothing: a marker. */
START_TEST(only_none_groups) {
  const clbt_group_config none = {.block_size = 8, .max_num_blocks = 2,
                                  .slot_mode = CLBT_SLOT_MODE_NONE};
  clbt_multi_table_config config = {.max_num_reqs = 2,
                                    .max_num_batched_tokens = 4,
                                    .num_groups = 1, .groups = &none};
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  const int32_t qsl[] = {0, 1};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem indices = clbt_test_buffer(sizeof(int32_t), (const int32_t[]){0});
  clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
  request.num_reqs = 1;
  request.num_rows = 1;
  request.indices_per_row = 1;
  request.query_start_loc = qsl_buffer;
  request.token_indices = indices;
  /* No section to write: any buffer will do, even one too small. */
  request.token_slots = indices;
  enqueue_and_wait(NULL, table, &request);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(indices);
  clbt_multi_table_destroy(table);
}
END_TEST

/* ---- the model ------------------------------------------------------------ */

/* One group on one rank: its rows as KV-manager block ids. */
typedef struct group_model {
  bool maps_tokens;
  uint32_t block_size, per_block;   /* tokens a KV block; kernel blocks in it */
  uint32_t world, rank, interleave; /* 1, 0, 1 when not sharded */
  uint32_t capacity;                /* KV blocks the model keeps at most */
  int32_t ids[MAX_REQS][MAX_KV_BLOCKS];
  uint32_t count[MAX_REQS];
  uint32_t rejected;
} group_model;

/* An index matrix and the batch its rows belong to. */
typedef struct matrix {
  uint32_t num_reqs, num_rows, k;
  int32_t qsl[MAX_REQS + 1];
  bool has_idx;
  int32_t idx[MAX_REQS];
  int32_t indices[MAX_TOKENS][MAX_K];
} matrix;

/* vLLM's conversion of token t of a row on this rank, bounded and counted
   as clbt's rules say. */
static int32_t model_slot(group_model *m, uint32_t row, int32_t t) {
  if (t == -1) return -1;
  if (t < -1) {
    ++m->rejected;
    return -1;
  }
  uint64_t world = m->world, interleave = m->interleave;
  uint64_t token = (uint64_t)t;
  if (token / interleave % world != m->rank) return -1;
  uint64_t local = token / (world * interleave) * interleave +
                   token % interleave;
  uint64_t kernel_block_size = m->block_size / m->per_block;
  uint64_t block = local / kernel_block_size;
  if (block >= (uint64_t)m->count[row] * m->per_block) {
    ++m->rejected;
    return -1;
  }
  int64_t entry = (int64_t)m->ids[row][block / m->per_block] * m->per_block +
                  (int64_t)(block % m->per_block);
  int64_t slot = entry * (int64_t)kernel_block_size +
                 (int64_t)(local % kernel_block_size);
  if (slot > INT32_MAX) {
    ++m->rejected;
    return -1;
  }
  return (int32_t)slot;
}

static bool well_formed(const matrix *x) {
  bool ok = x->qsl[0] >= 0 && x->qsl[x->num_reqs] <= (int64_t)x->num_rows;
  for (uint32_t r = 0; r < x->num_reqs; ++r)
    ok = ok && x->qsl[r] <= x->qsl[r + 1];
  return ok;
}

/* The request row i belongs to, or -1. */
static int32_t request_of(const matrix *x, uint32_t i) {
  for (uint32_t r = 0; r < x->num_reqs; ++r)
    if (x->qsl[r] <= (int32_t)i && (int32_t)i < x->qsl[r + 1]) return (int32_t)r;
  return -1;
}

/* Row i's slots in one group, into out[0, k). */
static void model_row(group_model *m, const matrix *x, uint32_t i,
                      int32_t *out) {
  bool ok = well_formed(x);
  int32_t r = ok ? request_of(x, i) : -1;
  int64_t row = r < 0 ? -1 : x->has_idx ? x->idx[r] : r;
  for (uint32_t j = 0; j < x->k; ++j) {
    int32_t t = x->indices[i][j];
    out[j] = -1;
    if (!ok || row >= MAX_REQS) {
      m->rejected += t != -1;
      continue;
    }
    if (row >= 0) out[j] = model_slot(m, (uint32_t)row, t);
  }
}

/* ---- the subject: a table or a multi-group table per rank ------------- */

typedef struct subject {
  clbt_table *single;
  clbt_multi_table *multi;
  uint32_t num_groups;
  clbt_table *groups[MAX_GROUPS];
  group_model models[MAX_GROUPS];
} subject;

typedef struct scenario {
  const char *name;
  uint32_t ranks, cp_interleave;
  uint32_t num_groups; /* 0: a single table of groups[0] */
  clbt_group_config groups[MAX_GROUPS];
} scenario;

#define NONE CLBT_SLOT_MODE_NONE
#define GROUP(...) {.struct_size = (uint32_t)sizeof(clbt_group_config), \
                    __VA_ARGS__}
/* The model keeps at most 12 KV blocks a row in every group. */
static const scenario scenarios[] = {
    {"a table over kernel blocks", 1, 1, 0,
     {GROUP(.block_size = 32, .kernel_block_size = 8, .max_num_blocks = 12)}},
    {"a table, CP 2, interleave 1", 2, 1, 0,
     {GROUP(.block_size = 16, .kernel_block_size = 8, .max_num_blocks = 12)}},
    {"a table, CP 2, interleave 8", 2, 8, 0,
     {GROUP(.block_size = 16, .max_num_blocks = 12)}},
    {"groups: kernel blocks, NONE, replicated; CP 2, interleave 4", 2, 4, 4,
     {GROUP(.block_size = 32, .kernel_block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 16, .max_num_blocks = 12, .slot_mode = NONE),
      GROUP(.block_size = 16, .max_num_blocks = 12, .cp_replicated = 1),
      GROUP(.block_size = 64, .kernel_block_size = 16, .max_num_blocks = 6)}},
    {"ten groups: two launches", 1, 1, 10,
     {GROUP(.block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 16, .max_num_blocks = 12, .slot_mode = NONE),
      GROUP(.block_size = 32, .kernel_block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 8, .max_num_blocks = 12),
      GROUP(.block_size = 16, .max_num_blocks = 12, .slot_mode = NONE),
      GROUP(.block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 64, .max_num_blocks = 4),
      GROUP(.block_size = 16, .max_num_blocks = 12),
      GROUP(.block_size = 32, .kernel_block_size = 8, .max_num_blocks = 6),
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
    m->maps_tokens = group->slot_mode != NONE;
    bool sharded = m->maps_tokens && !group->cp_replicated;
    m->block_size = group->block_size;
    m->per_block = group->block_size / (group->kernel_block_size
                                            ? group->kernel_block_size
                                            : group->block_size);
    m->world = sharded ? sc->ranks : 1;
    m->rank = sharded ? rank : 0;
    m->interleave = sharded ? sc->cp_interleave : 1;
    m->capacity = group->max_num_blocks;
    ck_assert_uint_le(m->capacity, MAX_KV_BLOCKS);
  }
}

static void subject_free(subject *s) {
  clbt_table_destroy(s->single);
  clbt_multi_table_destroy(s->multi);
}

static uint32_t token_groups(const subject *s) {
  uint32_t sections = 0;
  for (uint32_t g = 0; g < s->num_groups; ++g)
    sections += s->models[g].maps_tokens;
  return sections;
}

/*
 * Each group's row r is replaced by, appended or truncated to some blocks
 * (as many as fit), the same on every rank, then committed. ids_of gives
 * the n-th id a group deals.
 */
static void edit_row(subject *const *ranks, uint32_t num_ranks, uint32_t r,
                     uint32_t kind, const uint32_t *grow,
                     int32_t (*deal)(uint32_t g)) {
  subject *s = ranks[0];
  int32_t ids[MAX_GROUPS][MAX_KV_BLOCKS];
  const int32_t *lists[MAX_GROUPS];
  size_t counts[MAX_GROUPS], keep[MAX_GROUPS];
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    const group_model *m = &s->models[g];
    lists[g] = ids[g];
    uint32_t start = kind == 1 ? 0 : m->count[r];
    counts[g] = kind == 0 ? 0 : grow[g];
    if (start + counts[g] > m->capacity) counts[g] = m->capacity - start;
    keep[g] = kind == 0 ? grow[g] % (m->count[r] + 1) : 0;
    for (size_t i = 0; i < counts[g]; ++i) ids[g][i] = deal(g);
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
      clbt_assert_ok(clbt_table_commit(t->single, MAX_REQS));
    } else {
      if (kind == 0)
        clbt_assert_ok(clbt_multi_table_truncate_row(t->multi, r, keep));
      else if (kind == 1)
        clbt_assert_ok(clbt_multi_table_add_row(t->multi, r, lists, counts));
      else
        clbt_assert_ok(
            clbt_multi_table_append_row(t->multi, r, lists, counts));
      clbt_assert_ok(clbt_multi_table_commit(t->multi, MAX_REQS));
    }
    for (uint32_t g = 0; g < s->num_groups; ++g) {
      group_model *m = &t->models[g];
      if (kind == 0) {
        m->count[r] = (uint32_t)keep[g];
        continue;
      }
      if (kind == 1) m->count[r] = 0;
      for (size_t i = 0; i < counts[g]; ++i)
        m->ids[r][m->count[r]++] = ids[g][i];
    }
  }
}

/* ---- the device call against the model -------------------------------- */

typedef struct device_matrix {
  cl_mem qsl, idx, indices, slots;
} device_matrix;

static device_matrix device_matrix_create(void) {
  device_matrix d = {
      clbt_test_buffer((MAX_REQS + 1) * sizeof(int32_t), NULL),
      clbt_test_buffer(MAX_REQS * sizeof(int32_t), NULL),
      clbt_test_buffer(MAX_TOKENS * MAX_K * sizeof(int32_t), NULL),
      clbt_test_buffer(MAX_GROUPS * MAX_TOKENS * MAX_K * sizeof(int32_t),
                       NULL)};
  return d;
}

static void device_matrix_release(device_matrix *d) {
  clReleaseMemObject(d->qsl);
  clReleaseMemObject(d->idx);
  clReleaseMemObject(d->indices);
  clReleaseMemObject(d->slots);
}

/* Reads the whole output buffer into got's first `keep` entries and
   asserts that the rest is still poison. */
static void read_slots(cl_mem slots, size_t keep, int32_t *got) {
  size_t total = MAX_GROUPS * MAX_TOKENS * MAX_K;
  int32_t *all = malloc(total * sizeof *all);
  ck_assert_ptr_nonnull(all);
  clbt_test_read(slots, total * sizeof *all, all);
  memcpy(got, all, keep * sizeof *got);
  for (size_t e = keep; e < total; ++e)
    ck_assert_msg(all[e] == CLBT_TEST_POISON32,
                  "entry %zu past the sections: %d", e, all[e]);
  free(all);
}

/*
 * Translates a matrix on one rank, its output poisoned, into got (one
 * section of num_rows x k per token group); nothing past the sections may
 * be written. With group_by_group, each token group of a multi-group table
 * is asked on its own, its one section read into its place.
 */
static void translate(subject *s, const matrix *x, const device_matrix *d,
                      bool group_by_group, int32_t *got) {
  size_t entries = (size_t)x->num_rows * x->k;
  clbt_test_write(d->qsl, (x->num_reqs + 1) * sizeof(int32_t), x->qsl);
  if (x->num_reqs)
    clbt_test_write(d->idx, x->num_reqs * sizeof(int32_t), x->idx);
  int32_t flat[MAX_TOKENS * MAX_K];
  for (uint32_t i = 0; i < x->num_rows; ++i)
    for (uint32_t j = 0; j < x->k; ++j) flat[i * x->k + j] = x->indices[i][j];
  if (entries) clbt_test_write(d->indices, entries * sizeof(int32_t), flat);
  clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
  request.num_reqs = x->num_reqs;
  request.num_rows = x->num_rows;
  request.indices_per_row = x->k;
  request.query_start_loc = d->qsl;
  request.idx_mapping = x->has_idx ? d->idx : NULL;
  request.token_indices = entries ? d->indices : NULL;
  request.token_slots = entries ? d->slots : NULL;
  if (!s->multi || !group_by_group) {
    clbt_test_poison32(d->slots);
    enqueue_and_wait(s->single, s->multi, &request);
    read_slots(d->slots, token_groups(s) * entries, got);
    return;
  }
  for (uint32_t g = 0, section = 0; g < s->num_groups; ++g) {
    if (!s->models[g].maps_tokens) continue;
    clbt_test_poison32(d->slots);
    enqueue_and_wait(s->groups[g], NULL, &request);
    read_slots(d->slots, entries, got + section++ * entries);
  }
}

/* Every token group's section and count against the model, on one rank. */
static void check_matrix(subject *s, const matrix *x, const int32_t *got,
                         uint32_t rank, const char *what) {
  size_t entries = (size_t)x->num_rows * x->k;
  for (uint32_t g = 0, section = 0; g < s->num_groups; ++g) {
    group_model *m = &s->models[g];
    if (!m->maps_tokens) continue;
    for (uint32_t i = 0; i < x->num_rows; ++i) {
      int32_t want[MAX_K];
      model_row(m, x, i, want);
      for (uint32_t j = 0; j < x->k; ++j) {
        int32_t value = got[section * entries + (size_t)i * x->k + j];
        ck_assert_msg(value == want[j],
                      "%s: rank %u group %u row %u index %u (token %d): "
                      "slot %d, expected %d",
                      what, rank, g, i, j, x->indices[i][j], value, want[j]);
      }
    }
    ++section;
    uint32_t rejected = 0;
    clbt_assert_ok(clbt_table_read_rejected_tokens(s->groups[g], &rejected));
    ck_assert_msg(rejected == m->rejected,
                  "%s: rank %u group %u: %u rejected, the model says %u", what,
                  rank, g, rejected, m->rejected);
  }
}

/* ---- random matrices against the model -------------------------------- */

static int32_t random_id(uint32_t g) {
  (void)g;
  return (int32_t)clbt_test_below(100000);
}

/*
 * A matrix of 0..MAX_TOKENS rows of 0..MAX_K indices over 0..MAX_REQS
 * requests (rows past the batch's are padding): indices from -3 to past
 * what the rows hold, -1 often; idx_mapping absent, or with negative,
 * repeated and out-of-range entries; now and then a query_start_loc that
 * runs backwards or past num_rows.
 */
static void random_matrix(matrix *x) {
  memset(x, 0, sizeof *x);
  x->num_reqs = clbt_test_below(MAX_REQS + 1);
  for (uint32_t r = 0; r < x->num_reqs; ++r)
    x->qsl[r + 1] = x->qsl[r] + (int32_t)clbt_test_below(12);
  x->num_rows = (uint32_t)x->qsl[x->num_reqs] + clbt_test_below(4);
  if (x->num_rows > MAX_TOKENS) x->num_rows = MAX_TOKENS;
  if (x->qsl[x->num_reqs] > (int32_t)x->num_rows)
    x->num_rows = (uint32_t)x->qsl[x->num_reqs];
  x->k = clbt_test_chance(5) ? 0 : 1 + clbt_test_below(MAX_K);
  if (x->num_reqs && clbt_test_chance(8)) {
    if (clbt_test_chance(50))
      x->qsl[x->num_reqs] = x->qsl[x->num_reqs - 1] - 1;
    else
      x->num_rows = (uint32_t)x->qsl[x->num_reqs] - (x->qsl[x->num_reqs] > 0);
  }
  x->has_idx = clbt_test_chance(60);
  for (uint32_t r = 0; r < x->num_reqs; ++r) {
    uint32_t kind = clbt_test_below(10);
    x->idx[r] = kind == 0   ? -1 - (int32_t)clbt_test_below(3)
                : kind == 1 ? MAX_REQS + (int32_t)clbt_test_below(3)
                            : (int32_t)clbt_test_below(MAX_REQS);
  }
  for (uint32_t i = 0; i < x->num_rows; ++i)
    for (uint32_t j = 0; j < x->k; ++j)
      x->indices[i][j] = clbt_test_chance(20)
                             ? -1
                             : (int32_t)clbt_test_below(16 * 32 + 40) - 3;
}

static void run_scenario(const scenario *sc, uint32_t rounds) {
  subject subjects[MAX_RANKS], *ranks[MAX_RANKS];
  for (uint32_t k = 0; k < sc->ranks; ++k) {
    ranks[k] = &subjects[k];
    subject_create(&subjects[k], sc, k);
  }
  device_matrix d = device_matrix_create();
  int32_t *got = malloc(MAX_GROUPS * MAX_TOKENS * MAX_K * sizeof *got);
  ck_assert_ptr_nonnull(got);
  for (uint32_t round = 0; round < rounds; ++round) {
    for (uint32_t r = 0; r < MAX_REQS; ++r) {
      if (!clbt_test_chance(60)) continue;
      uint32_t grow[MAX_GROUPS];
      for (uint32_t g = 0; g < MAX_GROUPS; ++g) grow[g] = clbt_test_below(4);
      edit_row(ranks, sc->ranks, r,
               clbt_test_below(10) < 2 ? clbt_test_below(2) : 2, grow,
               random_id);
    }
    matrix x;
    random_matrix(&x);
    bool group_by_group = clbt_test_chance(30);
    for (uint32_t k = 0; k < sc->ranks; ++k) {
      translate(&subjects[k], &x, &d, group_by_group, got);
      check_matrix(&subjects[k], &x, got, k, sc->name);
    }
  }
  free(got);
  device_matrix_release(&d);
  for (uint32_t k = 0; k < sc->ranks; ++k) subject_free(&subjects[k]);
}

START_TEST(matrices_agree_with_the_model) {
  clbt_test_seed("token_slots");
  for (int i = 0; i < NUM_SCENARIOS; ++i) {
    printf("token_slots: %s\n", scenarios[i].name);
    run_scenario(&scenarios[i], 30);
  }
}
END_TEST

/* ---- the K/V round trip --------------------------------------------------- */

/* What the cache of a token group holds, per rank, by slot. */
typedef struct kv_world {
  subject subjects[MAX_RANKS];
  uint32_t ranks;
  int32_t *cache[MAX_RANKS][MAX_GROUPS];
  size_t cache_slots[MAX_GROUPS];
  uint32_t length[MAX_REQS];
  uint32_t dealt[MAX_GROUPS];
} kv_world;

static kv_world *the_world; /* for deal_distinct */

/* Ids a group deals are distinct: (n * 37) mod 509 for n < 509. */
static int32_t deal_distinct(uint32_t g) {
  return (int32_t)((++the_world->dealt[g] * 37u) % KV_BLOCKS);
}

/* A token's value: its request and position. */
static int32_t value_of(uint32_t r, uint32_t p) {
  return (int32_t)(r * 100000 + p + 1);
}

/*
 * One served step on every rank: request r schedules tokens[r] new tokens
 * (its rows grown to hold them), through the step's slot mapping, whose
 * slots then receive each token's value in that rank's cache.
 */
static void serve_step(kv_world *w, const uint32_t *tokens) {
  subject *ranks[MAX_RANKS] = {&w->subjects[0], &w->subjects[1]};
  subject *s = ranks[0];
  for (uint32_t r = 0; r < MAX_REQS; ++r) {
    uint32_t grow[MAX_GROUPS] = {0};
    uint32_t length = w->length[r] + tokens[r];
    for (uint32_t g = 0; g < s->num_groups; ++g) {
      uint32_t span = s->models[g].block_size * s->models[g].world;
      uint32_t needed = (length + span - 1) / span;
      grow[g] = needed > s->models[g].count[r] ? needed - s->models[g].count[r]
                                               : 0;
    }
    edit_row(ranks, w->ranks, r, 2, grow, deal_distinct);
  }
  int32_t qsl[MAX_REQS + 1] = {0};
  int64_t positions[MAX_TOKENS];
  for (uint32_t r = 0; r < MAX_REQS; ++r) {
    qsl[r + 1] = qsl[r] + (int32_t)tokens[r];
    for (uint32_t i = 0; i < tokens[r]; ++i)
      positions[qsl[r] + (int32_t)i] = w->length[r] + i;
  }
  uint32_t num_tokens = (uint32_t)qsl[MAX_REQS];
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  for (uint32_t k = 0; k < w->ranks; ++k) {
    subject *t = &w->subjects[k];
    clbt_step step = CLBT_STEP_INIT;
    step.num_reqs = MAX_REQS;
    step.num_tokens = num_tokens;
    step.query_start_loc = qsl_buffer;
    step.positions = positions_buffer;
    if (t->multi)
      clbt_assert_ok(
          clbt_multi_table_enqueue_step(t->multi, &step, 0, NULL, NULL));
    else
      clbt_assert_ok(clbt_table_enqueue_step(t->single, &step, 0, NULL, NULL));
    for (uint32_t g = 0; g < t->num_groups; ++g) {
      if (!t->models[g].maps_tokens) continue;
      int64_t slots[MAX_TOKENS];
      clbt_test_read(clbt_table_slot_mapping(t->groups[g]), sizeof slots,
                     slots);
      for (uint32_t r = 0; r < MAX_REQS; ++r)
        for (int32_t i = qsl[r]; i < qsl[r + 1]; ++i) {
          if (slots[i] == CLBT_PAD_SLOT_ID) continue;
          ck_assert_int_lt(slots[i], (int64_t)w->cache_slots[g]);
          w->cache[k][g][slots[i]] = value_of(r, (uint32_t)positions[i]);
        }
    }
  }
  for (uint32_t r = 0; r < MAX_REQS; ++r) w->length[r] += tokens[r];
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
}

/*
 * Arbitrary token lists: per request r (through idx_mapping, which names
 * request idx[b] for batch request b), rows of k tokens below its length
 * (and -1 now and then), read back through every rank's translated slots:
 * each token gives its own value on exactly one rank of a sharded group
 * (every rank of a replicated one), and the slots are the model's.
 */
static void read_back(kv_world *w, const int32_t *idx, uint32_t k) {
  matrix x = {.num_reqs = MAX_REQS, .k = k, .has_idx = idx != NULL};
  for (uint32_t b = 0; b < MAX_REQS; ++b) {
    uint32_t r = idx ? (uint32_t)idx[b] : b;
    x.idx[b] = (int32_t)r;
    uint32_t rows = 1 + clbt_test_below(4);
    x.qsl[b + 1] = x.qsl[b] + (int32_t)rows;
    for (uint32_t i = (uint32_t)x.qsl[b]; i < (uint32_t)x.qsl[b + 1]; ++i)
      for (uint32_t j = 0; j < k; ++j)
        x.indices[i][j] = clbt_test_chance(10) || !w->length[r]
                              ? -1
                              : (int32_t)clbt_test_below(w->length[r]);
  }
  x.num_rows = (uint32_t)x.qsl[MAX_REQS];
  ck_assert_uint_le(x.num_rows, MAX_TOKENS);
  device_matrix d = device_matrix_create();
  int32_t *got[MAX_RANKS];
  size_t entries = (size_t)x.num_rows * k;
  for (uint32_t rank = 0; rank < w->ranks; ++rank) {
    got[rank] = malloc(MAX_GROUPS * MAX_TOKENS * MAX_K * sizeof(int32_t));
    ck_assert_ptr_nonnull(got[rank]);
    translate(&w->subjects[rank], &x, &d, false, got[rank]);
    check_matrix(&w->subjects[rank], &x, got[rank], rank, "round trip");
  }
  const subject *s = &w->subjects[0];
  for (uint32_t g = 0, section = 0; g < s->num_groups; ++g) {
    if (!s->models[g].maps_tokens) continue;
    for (uint32_t b = 0; b < MAX_REQS; ++b)
      for (uint32_t i = (uint32_t)x.qsl[b]; i < (uint32_t)x.qsl[b + 1]; ++i)
        for (uint32_t j = 0; j < k; ++j) {
          int32_t t = x.indices[i][j];
          uint32_t holders = 0;
          for (uint32_t rank = 0; rank < w->ranks; ++rank) {
            int32_t slot = got[rank][section * entries + (size_t)i * k + j];
            if (slot < 0) continue;
            ++holders;
            ck_assert_msg(
                w->cache[rank][g][slot] == value_of((uint32_t)x.idx[b],
                                                    (uint32_t)t),
                "group %u rank %u: token %d of request %d reads %d", g, rank,
                t, x.idx[b], w->cache[rank][g][slot]);
          }
          uint32_t owners = s->models[g].world == 1 ? w->ranks : 1;
          ck_assert_msg(holders == (t < 0 ? 0 : owners),
                        "group %u: token %d of request %d is on %u ranks", g,
                        t, x.idx[b], holders);
        }
    ++section;
  }
  for (uint32_t rank = 0; rank < w->ranks; ++rank) free(got[rank]);
  device_matrix_release(&d);
}

static void round_trip(const scenario *sc) {
  kv_world *w = calloc(1, sizeof *w);
  ck_assert_ptr_nonnull(w);
  the_world = w;
  w->ranks = sc->ranks;
  for (uint32_t rank = 0; rank < w->ranks; ++rank) {
    subject_create(&w->subjects[rank], sc, rank);
    for (uint32_t g = 0; g < w->subjects[rank].num_groups; ++g) {
      const group_model *m = &w->subjects[rank].models[g];
      w->cache_slots[g] = (size_t)KV_BLOCKS * m->block_size;
      w->cache[rank][g] = malloc(w->cache_slots[g] * sizeof(int32_t));
      ck_assert_ptr_nonnull(w->cache[rank][g]);
      for (size_t i = 0; i < w->cache_slots[g]; ++i) w->cache[rank][g][i] = -7;
    }
  }
  /* Prefill of uneven lengths, then decodes that cross blocks. */
  serve_step(w, (const uint32_t[MAX_REQS]){17, 5, 0, 9, 12, 1});
  for (int decode = 0; decode < 6; ++decode)
    serve_step(w, (const uint32_t[MAX_REQS]){1, 2, 1, 1, 0, 1});
  read_back(w, NULL, 7);
  /* The batch in another order, a request read twice. */
  read_back(w, (const int32_t[MAX_REQS]){3, 0, 5, 1, 1, 2}, 5);
  for (uint32_t rank = 0; rank < w->ranks; ++rank) {
    for (uint32_t g = 0; g < w->subjects[rank].num_groups; ++g)
      free(w->cache[rank][g]);
    subject_free(&w->subjects[rank]);
  }
  free(w);
}

START_TEST(kv_round_trip) {
  clbt_test_seed("token_slots round trip");
  for (int i = 0; i < NUM_SCENARIOS; ++i) {
    printf("token_slots round trip: %s\n", scenarios[i].name);
    round_trip(&scenarios[i]);
  }
}
END_TEST

int main(void) {
  Suite *suite = suite_create("token_slots");
  TCase *c = tcase_create("token_slots");
  tcase_add_test(c, worked_example);
  tcase_add_test(c, a_read_only_output_is_refused);
  tcase_add_test(c, slots_past_int32_are_rejected);
  tcase_add_test(c, padding_indices_are_never_counted);
  tcase_add_test(c, only_none_groups);
  tcase_add_test(c, matrices_agree_with_the_model);
  tcase_add_test(c, kv_round_trip);
  suite_add_tcase(suite, c);
  return clbt_test_run(suite);
}
