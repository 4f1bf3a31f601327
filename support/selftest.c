/*
 * The randomised self-test (see selftest.h). Each round draws a table
 * configuration, then alternates bursts of random row operations (some of
 * them invalid on purpose) with commits, slot-mapping calls and serving
 * steps (clbt_*_enqueue_step: the commit of every row, the slot mapping
 * through a random idx_mapping and the gather). The oracles
 * are independent of the code under test: a plain model of the rows, kept
 * here as block_table.py keeps them, and the library's host reference,
 * which the worked examples in tests/ pin to hand-derived values.
 */
#include "selftest.h"

#include "xorshift.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS 4
#define MAX_IDS 8
/* What an unwritten slot holds: neither a slot id nor the pad id. */
#define POISON ((int64_t)0x5A5A5A5A5A5A5A5A)

/* ---- random numbers (xorshift.h) ------------------------------------------ */

typedef struct rng {
  uint64_t state;
} rng;

static uint64_t next_random(rng *r) { return xorshift64_next(&r->state); }

static uint32_t below(rng *r, uint32_t n) {
  return n ? (uint32_t)(next_random(r) % n) : 0;
}

static bool chance(rng *r, uint32_t percent) { return below(r, 100) < percent; }

static uint32_t random_divisor(rng *r, uint32_t n) {
  uint32_t divisors[64], count = 0;
  for (uint32_t d = 1; d <= n && count < 64; ++d)
    if (n % d == 0) divisors[count++] = d;
  return divisors[below(r, count)];
}

/* ---- the model: rows as block_table.py keeps them ----------------------- */

typedef struct model {
  uint32_t width, per_block, max_reqs;
  int32_t *rows;
  uint32_t *lengths;
} model;

static bool model_init(model *m, const clbt_table *table, uint32_t per_block,
                       uint32_t max_reqs) {
  m->width = clbt_table_width(table);
  m->per_block = per_block;
  m->max_reqs = max_reqs;
  m->rows = calloc((size_t)max_reqs * m->width, sizeof *m->rows);
  m->lengths = calloc(max_reqs, sizeof *m->lengths);
  return m->rows && m->lengths;
}

static void model_free(model *m) {
  free(m->rows);
  free(m->lengths);
}

static int32_t *model_row(const model *m, uint32_t row) {
  return m->rows + (size_t)row * m->width;
}

static bool model_fits(const model *m, uint32_t row, size_t n, bool replace) {
  uint32_t start = replace ? 0 : m->lengths[row];
  return n * m->per_block <= (size_t)(m->width - start);
}

static void model_append(model *m, uint32_t row, const int32_t *ids, size_t n,
                         bool replace) {
  if (replace) m->lengths[row] = 0;
  for (size_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < m->per_block; ++j)
      model_row(m, row)[m->lengths[row]++] =
          ids[i] * (int32_t)m->per_block + (int32_t)j;
}

static void model_clear_row(model *m, uint32_t row) {
  memset(model_row(m, row), 0, m->lengths[row] * sizeof(int32_t));
  m->lengths[row] = 0;
}

static void model_move_row(model *m, uint32_t src, uint32_t dst) {
  if (src == dst) return;
  memcpy(model_row(m, dst), model_row(m, src),
         m->lengths[src] * sizeof(int32_t));
  m->lengths[dst] = m->lengths[src];
  model_clear_row(m, src);
}

static void model_swap_row(model *m, uint32_t a, uint32_t b) {
  for (uint32_t i = 0; i < m->width; ++i) {
    int32_t kept = model_row(m, a)[i];
    model_row(m, a)[i] = model_row(m, b)[i];
    model_row(m, b)[i] = kept;
  }
  uint32_t kept_length = m->lengths[a];
  m->lengths[a] = m->lengths[b];
  m->lengths[b] = kept_length;
}

/* ---- the subject: a single or a multi-group table, with its models ------ */

typedef struct subject {
  clbt_table *single;
  clbt_multi_table *multi;
  uint32_t num_groups;
  clbt_table *groups[MAX_GROUPS];
  model models[MAX_GROUPS];
  uint32_t block_sizes[MAX_GROUPS];
  uint32_t cp_world_size;
  uint32_t max_reqs, max_tokens;
  cl_mem query_start_loc, positions, idx_mapping;
  /* host scratch, sized for the largest call */
  int32_t *host_qsl, *host_idx;
  int64_t *host_positions, *expected, *actual;
  int32_t *device_rows;
  /* each group's gathered table as the host reference has it */
  int32_t *gathered[MAX_GROUPS];
} subject;

typedef struct selftest_round {
  clbt_device *device;
  const selftest_options *options;
  selftest_result *result;
  rng rng;
  uint32_t round;
} selftest_round;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool check(selftest_round *run, bool ok, const char *format, ...) {
  if (ok) {
    ++run->result->passed;
    return true;
  }
  ++run->result->failed;
  if (run->options->log) {
    va_list args;
    va_start(args, format);
    fprintf(run->options->log, "selftest round %" PRIu32 " (seed %" PRIu64 "): ",
            run->round, run->options->seed);
    vfprintf(run->options->log, format, args);
    fprintf(run->options->log, "\n");
    va_end(args);
  }
  return false;
}

/* A clbt call that must succeed; a failure is a failed check. */
static bool expect_success(selftest_round *run, clbt_status status, const char *what) {
  return check(run, status == CLBT_SUCCESS, "%s failed: %s: %s", what,
               clbt_status_name(status), clbt_last_error());
}

static void random_table_config(rng *r, clbt_table_config *config) {
  static const uint32_t block_sizes[] = {1, 3, 4, 16, 16, 32, 48, 64, 128};
  memset(config, 0, sizeof *config);
  config->block_size = block_sizes[below(r, 9)];
  config->kernel_block_size = random_divisor(r, config->block_size);
  config->max_num_reqs = 1 + below(r, 12);
  config->max_num_blocks_per_req = 1 + below(r, 8);
  config->max_num_batched_tokens = chance(r, 15) ? 1025 + below(r, 1100)
                                                 : 1 + below(r, 300);
  config->cp_world_size = chance(r, 50) ? 1 + below(r, 8) : 0;
  config->cp_rank = below(r, config->cp_world_size);
  config->cp_interleave_size =
      chance(r, 70) ? random_divisor(r, config->block_size) : 0;
}

static void random_multi_config(rng *r, clbt_multi_table_config *config,
                                clbt_group_config *groups) {
  static const uint32_t block_sizes[] = {4, 8, 16, 16, 32, 64, 128};
  memset(config, 0, sizeof *config);
  config->num_groups = 1 + below(r, MAX_GROUPS);
  config->max_num_reqs = 1 + below(r, 10);
  config->max_num_batched_tokens = 1 + below(r, 400);
  config->cp_world_size = 1 + below(r, 8);
  config->cp_rank = below(r, config->cp_world_size);
  config->groups = groups;
  /* The interleave divides 4, which divides every block size above. */
  config->cp_interleave_size = 1u << below(r, 3);
  for (uint32_t g = 0; g < config->num_groups; ++g) {
    clbt_group_config *group = &groups[g];
    memset(group, 0, sizeof *group);
    group->block_size = block_sizes[below(r, 7)];
    group->kernel_block_size = random_divisor(r, group->block_size);
    group->max_num_blocks = 1 + below(r, 6);
    group->slot_mode =
        chance(r, 20) ? CLBT_SLOT_MODE_NONE : CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT;
    group->cp_replicated = chance(r, 20);
  }
}

static void subject_free(subject *s) {
  clbt_table_destroy(s->single);
  clbt_multi_table_destroy(s->multi);
  for (uint32_t g = 0; g < s->num_groups; ++g) model_free(&s->models[g]);
  if (s->query_start_loc) clReleaseMemObject(s->query_start_loc);
  if (s->positions) clReleaseMemObject(s->positions);
  if (s->idx_mapping) clReleaseMemObject(s->idx_mapping);
  for (uint32_t g = 0; g < s->num_groups; ++g) free(s->gathered[g]);
  free(s->host_qsl);
  free(s->host_idx);
  free(s->host_positions);
  free(s->expected);
  free(s->actual);
  free(s->device_rows);
  memset(s, 0, sizeof *s);
}

static bool allocate_scratch(selftest_round *run, subject *s) {
  cl_int error_qsl = CL_SUCCESS, error_positions = CL_SUCCESS,
         error_idx = CL_SUCCESS;
  bool gathered = true;
  cl_context context = clbt_device_context(run->device);
  size_t widest = 0;
  for (uint32_t g = 0; g < s->num_groups; ++g)
    if (s->models[g].width > widest) widest = s->models[g].width;
  s->query_start_loc =
      clCreateBuffer(context, CL_MEM_READ_ONLY,
                     (s->max_reqs + 1) * sizeof(int32_t), NULL, &error_qsl);
  s->positions = clCreateBuffer(context, CL_MEM_READ_ONLY,
                                s->max_tokens * sizeof(int64_t), NULL,
                                &error_positions);
  s->idx_mapping = clCreateBuffer(context, CL_MEM_READ_ONLY,
                                  s->max_reqs * sizeof(int32_t), NULL,
                                  &error_idx);
  /* Zero, as a table's gathered rows are at its creation. */
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    s->gathered[g] = calloc((size_t)s->max_reqs * s->models[g].width,
                            sizeof *s->gathered[g]);
    gathered = gathered && s->gathered[g];
  }
  s->host_idx = malloc(s->max_reqs * sizeof *s->host_idx);
  s->host_qsl = malloc((s->max_reqs + 1) * sizeof *s->host_qsl);
  s->host_positions = malloc(s->max_tokens * sizeof *s->host_positions);
  s->expected = malloc(s->max_tokens * sizeof *s->expected);
  s->actual = malloc(s->max_tokens * sizeof *s->actual);
  s->device_rows = malloc(s->max_reqs * widest * sizeof *s->device_rows);
  return check(run,
               error_qsl == CL_SUCCESS && error_positions == CL_SUCCESS &&
                   error_idx == CL_SUCCESS && gathered && s->host_idx &&
                   s->host_qsl && s->host_positions && s->expected &&
                   s->actual && s->device_rows,
               "allocating the test's buffers failed (%d, %d, %d)", error_qsl,
               error_positions, error_idx);
}

/* Creates this round's table: single or multi-group, at random. */
static bool subject_create(selftest_round *run, subject *s) {
  memset(s, 0, sizeof *s);
  clbt_status status;
  if (chance(&run->rng, 50)) {
    clbt_table_config config;
    random_table_config(&run->rng, &config);
    status = clbt_table_create(run->device, &config, &s->single);
    if (!expect_success(run, status, "clbt_table_create")) return false;
    s->num_groups = 1;
    s->groups[0] = s->single;
    s->block_sizes[0] = config.block_size;
    s->cp_world_size = config.cp_world_size ? config.cp_world_size : 1;
    s->max_reqs = config.max_num_reqs;
    s->max_tokens = config.max_num_batched_tokens;
    if (!model_init(&s->models[0], s->single,
                    config.block_size / config.kernel_block_size,
                    s->max_reqs))
      return check(run, false, "no memory for the model");
  } else {
    clbt_multi_table_config config;
    clbt_group_config groups[MAX_GROUPS];
    random_multi_config(&run->rng, &config, groups);
    status = clbt_multi_table_create(run->device, &config, &s->multi);
    if (!expect_success(run, status, "clbt_multi_table_create")) return false;
    s->num_groups = config.num_groups;
    s->cp_world_size = config.cp_world_size;
    s->max_reqs = config.max_num_reqs;
    s->max_tokens = config.max_num_batched_tokens;
    for (uint32_t g = 0; g < s->num_groups; ++g) {
      s->groups[g] = clbt_multi_table_group(s->multi, g);
      s->block_sizes[g] = groups[g].block_size;
      if (!model_init(&s->models[g], s->groups[g],
                      groups[g].block_size / groups[g].kernel_block_size,
                      s->max_reqs))
        return check(run, false, "no memory for the model");
    }
  }
  /* Every way of committing must give the same device rows. */
  clbt_commit_mode mode = (clbt_commit_mode)below(&run->rng, 3);
  for (uint32_t g = 0; g < s->num_groups; ++g)
    if (!expect_success(run, clbt_table_set_commit_mode(s->groups[g], mode),
                        "clbt_table_set_commit_mode"))
      return false;
  return allocate_scratch(run, s);
}

/* Host rows and lengths of every group equal the model's. */
static bool check_rows(selftest_round *run, const subject *s, const char *after) {
  bool ok = true;
  for (uint32_t g = 0; g < s->num_groups && ok; ++g) {
    const model *m = &s->models[g];
    const int32_t *rows = clbt_table_host_data(s->groups[g]);
    ok = memcmp(rows, m->rows, (size_t)m->max_reqs * m->width * 4) == 0;
    for (uint32_t r = 0; r < m->max_reqs && ok; ++r)
      ok = clbt_table_row_length(s->groups[g], r) == m->lengths[r];
    check(run, ok, "group %" PRIu32 ": host rows differ from the model after %s",
          g, after);
  }
  return ok;
}

/* ---- row operations ----------------------------------------------------- */

typedef struct row_update {
  int32_t ids[MAX_GROUPS][MAX_IDS];
  size_t counts[MAX_GROUPS];
  const int32_t *id_pointers[MAX_GROUPS];
} row_update;

static bool id_is_valid(int32_t id, uint32_t per_block) {
  return id >= 0 && (int64_t)id * per_block + per_block - 1 <= INT32_MAX;
}

/* A block id at the edge of validity: negative, the largest valid, or (when
   blocks are split) the smallest whose kernel blocks overflow int32. */
static int32_t edge_id(rng *r, uint32_t per_block) {
  int32_t largest = (int32_t)((INT32_MAX - (per_block - 1)) / per_block);
  switch (below(r, 3)) {
  case 0:
    return -1 - (int32_t)below(r, 9);
  case 1:
    return largest;
  default:
    return per_block > 1 ? largest + 1 : largest;
  }
}

/*
 * Random ids per group, now and then one at the edge of validity. Returns
 * the status the rules predict: each group is checked, in order, for
 * overflow and then for its ids.
 */
static clbt_status random_update(selftest_round *run, subject *s, uint32_t row,
                                 bool replace, row_update *u) {
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    u->counts[g] = below(&run->rng, chance(&run->rng, 10) ? MAX_IDS : 3);
    for (size_t i = 0; i < u->counts[g]; ++i)
      u->ids[g][i] = (int32_t)below(&run->rng, 1u << 20);
    if (u->counts[g] && chance(&run->rng, 3))
      u->ids[g][below(&run->rng, (uint32_t)u->counts[g])] =
          edge_id(&run->rng, s->models[g].per_block);
    u->id_pointers[g] = u->ids[g];
  }
  if (row >= s->max_reqs) return CLBT_ROW_OUT_OF_RANGE;
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    if (!model_fits(&s->models[g], row, u->counts[g], replace))
      return CLBT_ROW_OVERFLOW;
    for (size_t i = 0; i < u->counts[g]; ++i)
      if (!id_is_valid(u->ids[g][i], s->models[g].per_block))
        return CLBT_INVALID_BLOCK_ID;
  }
  return CLBT_SUCCESS;
}

static clbt_status apply_update(subject *s, uint32_t row, bool replace,
                                const row_update *u) {
  if (s->multi)
    return replace ? clbt_multi_table_add_row(s->multi, row, u->id_pointers,
                                              u->counts)
                   : clbt_multi_table_append_row(s->multi, row, u->id_pointers,
                                                 u->counts);
  return replace ? clbt_table_add_row(s->single, row, u->ids[0], u->counts[0])
                 : clbt_table_append_row(s->single, row, u->ids[0],
                                         u->counts[0]);
}

static uint32_t random_row(selftest_round *run, const subject *s) {
  /* Now and then a row past the end, which must be refused. */
  return chance(&run->rng, 3) ? s->max_reqs + below(&run->rng, 3)
                              : below(&run->rng, s->max_reqs);
}

typedef enum operation { APPEND, ADD, CLEAR, MOVE, SWAP } operation;

static const char *operation_names[] = {"append_row", "add_row", "clear_row",
                                        "move_row", "swap_row"};

static clbt_status apply_pair(subject *s, operation op, uint32_t a,
                              uint32_t b) {
  if (op == CLEAR)
    return s->multi ? clbt_multi_table_clear_row(s->multi, a)
                    : clbt_table_clear_row(s->single, a);
  if (op == MOVE)
    return s->multi ? clbt_multi_table_move_row(s->multi, a, b)
                    : clbt_table_move_row(s->single, a, b);
  return s->multi ? clbt_multi_table_swap_row(s->multi, a, b)
                  : clbt_table_swap_row(s->single, a, b);
}

static void model_pair(subject *s, operation op, uint32_t a, uint32_t b) {
  for (uint32_t g = 0; g < s->num_groups; ++g) {
    if (op == CLEAR) model_clear_row(&s->models[g], a);
    if (op == MOVE) model_move_row(&s->models[g], a, b);
    if (op == SWAP) model_swap_row(&s->models[g], a, b);
  }
}

/* One random row operation, checked for its status and its effect. */
static bool row_operation(selftest_round *run, subject *s) {
  static const operation weighted[] = {APPEND, APPEND, APPEND, APPEND, ADD,
                                       ADD,    CLEAR,  MOVE,   MOVE,   SWAP};
  operation op = weighted[below(&run->rng, 10)];
  uint32_t a = random_row(run, s);
  uint32_t b = chance(&run->rng, 10) ? a : random_row(run, s);
  clbt_status expected, actual;
  if (op == APPEND || op == ADD) {
    row_update update;
    expected = random_update(run, s, a, op == ADD, &update);
    actual = apply_update(s, a, op == ADD, &update);
    if (expected == CLBT_SUCCESS)
      for (uint32_t g = 0; g < s->num_groups; ++g)
        model_append(&s->models[g], a, update.ids[g], update.counts[g],
                     op == ADD);
  } else {
    bool in_range = a < s->max_reqs && (op == CLEAR || b < s->max_reqs);
    expected = in_range ? CLBT_SUCCESS : CLBT_ROW_OUT_OF_RANGE;
    actual = apply_pair(s, op, a, b);
    if (in_range) model_pair(s, op, a, b);
  }
  ++run->result->row_operations;
  bool ok = check(run, actual == expected, "%s(%" PRIu32 ", %" PRIu32
                  ") returned %s, expected %s (%s)",
                  operation_names[op], a, b, clbt_status_name(actual),
                  clbt_status_name(expected), clbt_last_error());
  return check_rows(run, s, operation_names[op]) && ok;
}

/* ---- commit and slot mapping -------------------------------------------- */

/* Commits rows [0, num_reqs) and reads every group's device rows back. */
static bool commit(selftest_round *run, subject *s, uint32_t num_reqs) {
  clbt_status status = s->multi ? clbt_multi_table_commit(s->multi, num_reqs)
                                : clbt_table_commit(s->single, num_reqs);
  ++run->result->commits;
  if (!expect_success(run, status, "commit")) return false;
  bool ok = true;
  cl_command_queue queue = clbt_device_queue(run->device);
  for (uint32_t g = 0; g < s->num_groups && num_reqs && ok; ++g) {
    size_t bytes = (size_t)num_reqs * s->models[g].width * sizeof(int32_t);
    cl_int error = clEnqueueReadBuffer(queue, clbt_table_device_data(s->groups[g]),
                                       CL_TRUE, 0, bytes, s->device_rows, 0,
                                       NULL, NULL);
    ok = check(run, error == CL_SUCCESS, "reading device rows: %d", error) &&
         check(run, memcmp(s->device_rows, s->models[g].rows, bytes) == 0,
               "group %" PRIu32 ": committed rows differ from the model", g);
  }
  /* A commit past the end must be refused. */
  status = s->multi ? clbt_multi_table_commit(s->multi, s->max_reqs + 1)
                    : clbt_table_commit(s->single, s->max_reqs + 1);
  return check(run, status == CLBT_TOO_MANY_REQUESTS,
               "commit(max_num_reqs + 1) returned %s",
               clbt_status_name(status)) && ok;
}

/* Tokens a row of group 0 spans, times a little more, so some miss it;
   a row out of range spans a block's worth. */
static uint32_t position_range(const subject *s, int64_t row) {
  const model *m = &s->models[0];
  uint64_t length = row >= 0 && row < s->max_reqs ? m->lengths[row] : 1;
  uint64_t kv_blocks = (length + m->per_block - 1) / m->per_block;
  uint64_t tokens = kv_blocks * s->block_sizes[0] * s->cp_world_size;
  return (uint32_t)(tokens + tokens / 8 + 2);
}

/*
 * A ragged batch of committed rows, request r reading row idx[r] (idx
 * NULL: row r); now and then a malformed one.
 */
static uint32_t random_batch(selftest_round *run, subject *s, uint32_t committed,
                             const int32_t *idx, uint32_t *num_tokens) {
  uint32_t num_reqs = below(&run->rng, committed + 1);
  uint32_t budget = s->max_tokens;
  int32_t *qsl = s->host_qsl;
  qsl[0] = chance(&run->rng, 15) ? (int32_t)below(&run->rng, 4) : 0;
  if ((uint32_t)qsl[0] > budget) qsl[0] = 0;
  for (uint32_t r = 0; r < num_reqs; ++r) {
    uint32_t room = budget - (uint32_t)qsl[r];
    uint32_t count = chance(&run->rng, 50) ? 1 : below(&run->rng, room / 2 + 2);
    if (count > room) count = room;
    qsl[r + 1] = qsl[r] + (int32_t)count;
    uint32_t start =
        below(&run->rng, position_range(s, idx ? idx[r] : (int64_t)r));
    for (int32_t t = qsl[r]; t < qsl[r + 1]; ++t)
      s->host_positions[t] = (int64_t)start + (t - qsl[r]);
    if (count && chance(&run->rng, 3))
      s->host_positions[qsl[r]] = -1 - (int64_t)below(&run->rng, 100);
  }
  *num_tokens = (uint32_t)qsl[num_reqs];
  if (chance(&run->rng, 20)) *num_tokens += below(&run->rng, budget - *num_tokens + 1);
  for (uint32_t t = (uint32_t)qsl[num_reqs]; t < *num_tokens; ++t)
    s->host_positions[t] = (int64_t)below(&run->rng, 1000);
  for (uint32_t t = 0; t < (uint32_t)qsl[0] && t < *num_tokens; ++t)
    s->host_positions[t] = (int64_t)below(&run->rng, 1000);
  if (num_reqs && chance(&run->rng, 4)) /* decreasing: the batch is refused */
    qsl[below(&run->rng, num_reqs + 1)] = (int32_t)budget + 1;
  return num_reqs;
}

static bool upload_batch(selftest_round *run, subject *s, uint32_t num_reqs,
                         uint32_t num_tokens) {
  cl_command_queue queue = clbt_device_queue(run->device);
  cl_int error = clEnqueueWriteBuffer(queue, s->query_start_loc, CL_TRUE, 0,
                                      (num_reqs + 1) * sizeof(int32_t),
                                      s->host_qsl, 0, NULL, NULL);
  if (error == CL_SUCCESS && num_tokens)
    error = clEnqueueWriteBuffer(queue, s->positions, CL_TRUE, 0,
                                 num_tokens * sizeof(int64_t),
                                 s->host_positions, 0, NULL, NULL);
  for (uint32_t g = 0; g < s->num_groups && error == CL_SUCCESS; ++g) {
    int64_t poison = POISON;
    error = clEnqueueFillBuffer(queue, clbt_table_slot_mapping(s->groups[g]),
                                &poison, sizeof poison, 0,
                                s->max_tokens * sizeof(int64_t), 0, NULL, NULL);
  }
  return check(run, error == CL_SUCCESS, "uploading a batch: %d", error);
}

/* Group g's device slots equal s->expected, element by element. */
static bool compare_group_slots(selftest_round *run, subject *s, uint32_t g,
                                const char *call, uint32_t num_reqs,
                                uint32_t num_tokens) {
  cl_int error = clEnqueueReadBuffer(
      clbt_device_queue(run->device), clbt_table_slot_mapping(s->groups[g]),
      CL_TRUE, 0, s->max_tokens * sizeof(int64_t), s->actual, 0, NULL, NULL);
  bool ok = check(run, error == CL_SUCCESS, "reading slots: %d", error);
  for (uint32_t t = 0; t < s->max_tokens && ok; ++t)
    ok = check(run, s->actual[t] == s->expected[t],
               "%s, group %" PRIu32 ", %" PRIu32 " requests, %" PRIu32
               " tokens: slot[%" PRIu32 "] is %" PRId64
               ", the reference says %" PRId64,
               call, g, num_reqs, num_tokens, t, s->actual[t],
               s->expected[t]);
  return ok;
}

/* Every group's device slots equal the host reference's, element by element. */
static bool compare_slots(selftest_round *run, subject *s, uint32_t num_reqs,
                          uint32_t num_tokens) {
  bool ok = true;
  for (uint32_t g = 0; g < s->num_groups && ok; ++g) {
    for (uint32_t t = 0; t < s->max_tokens; ++t) s->expected[t] = POISON;
    clbt_status status = clbt_table_compute_slot_mapping_host(
        s->groups[g], num_reqs, s->host_qsl, s->host_positions, num_tokens,
        s->expected);
    ok = expect_success(run, status, "compute_slot_mapping_host") &&
         compare_group_slots(run, s, g, "slot mapping", num_reqs, num_tokens);
  }
  return ok;
}

static bool slot_mapping(selftest_round *run, subject *s, uint32_t committed) {
  uint32_t num_tokens = 0;
  uint32_t num_reqs = random_batch(run, s, committed, NULL, &num_tokens);
  if (!upload_batch(run, s, num_reqs, num_tokens)) return false;
  clbt_status status = CLBT_SUCCESS;
  if (s->single)
    status = clbt_table_compute_slot_mapping(
        s->single, num_reqs, s->query_start_loc, s->positions, num_tokens);
  else if (chance(&run->rng, 70))
    status = clbt_multi_table_compute_slot_mapping(
        s->multi, num_reqs, s->query_start_loc, s->positions, num_tokens);
  else /* group by group, each with its own kernel */
    for (uint32_t g = 0; g < s->num_groups && !status; ++g)
      status = clbt_table_compute_slot_mapping(
          s->groups[g], num_reqs, s->query_start_loc, s->positions, num_tokens);
  ++run->result->slot_mappings;
  return expect_success(run, status, "compute_slot_mapping") &&
         compare_slots(run, s, num_reqs, num_tokens);
}

/* ---- the serving step ---------------------------------------------------- */

/*
 * idx_mapping for a step: the identity (false: none is passed), a
 * permutation of the rows, or one with negative, repeated and out-of-range
 * entries.
 */
static bool random_idx(selftest_round *run, subject *s, uint32_t num_reqs) {
  if (chance(&run->rng, 20)) return false;
  int32_t *idx = s->host_idx;
  for (uint32_t r = 0; r < s->max_reqs; ++r) idx[r] = (int32_t)r;
  for (uint32_t r = s->max_reqs; r-- > 1;) {
    uint32_t other = below(&run->rng, r + 1);
    int32_t kept = idx[r];
    idx[r] = idx[other];
    idx[other] = kept;
  }
  bool strays = chance(&run->rng, 60);
  for (uint32_t r = 0; strays && r < num_reqs; ++r) {
    if (chance(&run->rng, 15))
      idx[r] = chance(&run->rng, 50)
                   ? -1 - (int32_t)below(&run->rng, 3)
                   : (int32_t)(s->max_reqs + below(&run->rng, 3));
    else if (r && chance(&run->rng, 15))
      idx[r] = idx[below(&run->rng, r)];
  }
  return true;
}

/* Each group's device gathered rows equal the host reference's. */
static bool compare_gathered(selftest_round *run, subject *s,
                             uint32_t num_reqs) {
  bool ok = true;
  for (uint32_t g = 0; g < s->num_groups && ok; ++g) {
    size_t cells = (size_t)s->max_reqs * s->models[g].width;
    cl_int error = clEnqueueReadBuffer(
        clbt_device_queue(run->device), clbt_table_gathered_rows(s->groups[g]),
        CL_TRUE, 0, cells * sizeof(int32_t), s->device_rows, 0, NULL, NULL);
    ok = check(run, error == CL_SUCCESS, "reading gathered rows: %d", error);
    for (size_t i = 0; i < cells && ok; ++i)
      ok = check(run, s->device_rows[i] == s->gathered[g][i],
                 "step, group %" PRIu32 ", %" PRIu32 " requests: gathered[%zu]"
                 "[%zu] is %" PRId32 ", the reference says %" PRId32,
                 g, num_reqs, i / s->models[g].width, i % s->models[g].width,
                 s->device_rows[i], s->gathered[g][i]);
  }
  return ok;
}

/* The host reference of a step, every group; the gather into s->gathered. */
static bool step_reference(selftest_round *run, subject *s,
                           clbt_host_step *host) {
  bool ok = true;
  for (uint32_t g = 0; g < s->num_groups && ok; ++g) {
    for (uint32_t t = 0; t < s->max_tokens; ++t) s->expected[t] = POISON;
    host->slot_mapping = s->expected;
    host->gathered_rows = s->gathered[g];
    ok = expect_success(run, clbt_table_compute_step_host(s->groups[g], host),
                        "compute_step_host") &&
         compare_group_slots(run, s, g, "step", host->num_reqs,
                             host->num_tokens);
  }
  return ok;
}

/*
 * A step through a random idx_mapping, with the gather most of the time:
 * the commit of every row, then every group's slots and gathered rows
 * against the host reference, which reads the host rows the commit moved.
 */
static bool serving_step(selftest_round *run, subject *s) {
  uint32_t num_reqs = below(&run->rng, s->max_reqs + 1), num_tokens = 0;
  const int32_t *idx = random_idx(run, s, num_reqs) ? s->host_idx : NULL;
  num_reqs = random_batch(run, s, num_reqs, idx, &num_tokens);
  clbt_step device = CLBT_STEP_INIT;
  device.flags = chance(&run->rng, 80) ? CLBT_STEP_GATHER : 0;
  device.num_reqs = num_reqs;
  device.num_reqs_padded =
      num_reqs + below(&run->rng, s->max_reqs - num_reqs + 1);
  device.num_tokens = num_tokens;
  device.query_start_loc = s->query_start_loc;
  device.positions = num_tokens ? s->positions : NULL;
  device.idx_mapping = idx ? s->idx_mapping : NULL;
  cl_int error = CL_SUCCESS;
  if (idx && num_reqs)
    error = clEnqueueWriteBuffer(clbt_device_queue(run->device),
                                 s->idx_mapping, CL_TRUE, 0,
                                 num_reqs * sizeof(int32_t), idx, 0, NULL,
                                 NULL);
  if (!check(run, error == CL_SUCCESS, "uploading idx_mapping: %d", error) ||
      !upload_batch(run, s, num_reqs, num_tokens))
    return false;
  cl_event done = NULL;
  clbt_status status =
      s->multi ? clbt_multi_table_enqueue_step(s->multi, &device, 0, NULL, &done)
               : clbt_table_enqueue_step(s->single, &device, 0, NULL, &done);
  ++run->result->steps;
  if (!expect_success(run, status, "enqueue_step")) return false;
  error = clWaitForEvents(1, &done);
  clReleaseEvent(done);
  clbt_host_step host = CLBT_HOST_STEP_INIT;
  host.flags = device.flags;
  host.num_reqs = num_reqs;
  host.num_reqs_padded = device.num_reqs_padded;
  host.num_tokens = num_tokens;
  host.query_start_loc = s->host_qsl;
  host.positions = s->host_positions;
  host.idx_mapping = idx;
  return check(run, error == CL_SUCCESS, "waiting for a step: %d", error) &&
         step_reference(run, s, &host) && compare_gathered(run, s, num_reqs);
}

static clbt_status run_round(selftest_round *run) {
  subject s;
  bool ok = subject_create(run, &s);
  for (uint32_t step = 0; step < run->options->steps_per_round && ok; ++step) {
    uint32_t operations = 1 + below(&run->rng, 40);
    for (uint32_t i = 0; i < operations && ok; ++i) ok = row_operation(run, &s);
    /* A step commits every row itself, before or after a commit. */
    if (ok && chance(&run->rng, 50)) ok = serving_step(run, &s);
    uint32_t committed = below(&run->rng, s.max_reqs + 1);
    ok = ok && commit(run, &s, committed);
    uint32_t calls = 1 + below(&run->rng, 3);
    for (uint32_t i = 0; i < calls && ok; ++i)
      ok = slot_mapping(run, &s, committed);
    ok = ok && serving_step(run, &s);
  }
  subject_free(&s);
  return ok ? CLBT_SUCCESS : CLBT_INVALID_ARGUMENT;
}

clbt_status selftest_run(clbt_device *device, const selftest_options *options,
                         selftest_result *result) {
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t round = 0; round < options->rounds; ++round) {
    selftest_round run = {device, options, result, {0}, round};
    /* Each round has its own stream, so a failing round replays alone. */
    run.rng.state = (options->seed + 1) * 0x9E3779B97F4A7C15ull + round;
    if (run.rng.state == 0) run.rng.state = 1;
    clbt_status round_status = run_round(&run);
    if (round_status != CLBT_SUCCESS) status = round_status;
  }
  return status;
}
