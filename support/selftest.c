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
    if (u->counts[g] && chance(&run->rng, 3)) {
      /* Two statements: the draws' order must not be the compiler's. */
      uint32_t at = below(&run->rng, (uint32_t)u->counts[g]);
      u->ids[g][at] = edge_id(&run->rng, s->models[g].per_block);
    }
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

/* ---- the export round trip --------------------------------------------- */

/*
 * Per round: a multi-group table per context-parallel rank (one of
 * export_presets' group sets), requests of random lengths whose
 * tokens are written into a paged cache per rank and group through the
 * device's slot mapping, rows then moved to random request slots, and
 * batches exported through idx_mapping (padding, repeated and
 * out-of-range entries, padded batches, lengths given or not). Each
 * entry's tokens are read back through the exported CSR and OpenVINO
 * arrays and must be the values written at the positions the rank owns
 * (vLLM's rule, position by position): nothing of the exporter's
 * arithmetic is trusted.
 */
#define EXPORT_RANKS 2
#define EXPORT_GROUPS 3
#define EXPORT_IDS 4099 /* a prime: ids dealt as n * 37 mod it are distinct */
#define EXPORT_MAX_LENGTH 200
#define EXPORT_MAX_TOKENS 1024
#define EXPORT_POISON 0x5A5A5A5A

typedef struct export_world {
  clbt_group_config groups[EXPORT_GROUPS];
  uint32_t num_groups, cp_world_size, cp_interleave_size, max_reqs;
  size_t max_width;  /* the widest group's, in kernel blocks */
  clbt_multi_table *ranks[EXPORT_RANKS];
  int32_t *cache[EXPORT_RANKS][EXPORT_GROUPS]; /* by slot; -1: unwritten */
  size_t cache_slots[EXPORT_GROUPS];
  uint32_t num_requests;
  uint32_t *length;     /* [max_reqs]: request i's tokens, all written */
  int32_t *request_at;  /* [max_reqs]: the request a row holds, or -1 */
  uint32_t *row_of;     /* [max_reqs]: request i's row */
  cl_mem qsl, positions, idx_mapping, seq_lens;
  int32_t *host_qsl, *host_idx, *host_seq_lens;
  int64_t *host_positions, *slots;
  int32_t *indptr, *indices, *last_page_len, *past_lens, *begins;
} export_world;

static bool maps_tokens(const export_world *w, uint32_t g) {
  return w->groups[g].slot_mode == CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT;
}

/* vLLM's rule: position p lives on the rank its interleave slice is dealt to. */
static bool rank_owns(const export_world *w, uint32_t g, uint32_t rank,
                      uint32_t p) {
  uint32_t virtual_block = w->groups[g].block_size * w->cp_world_size;
  return (p % virtual_block) / w->cp_interleave_size % w->cp_world_size ==
         rank;
}

/* The value request i's token at position p is written with. */
static int32_t token_value(uint32_t i, uint32_t p) {
  return (int32_t)(i * 1000 + p);
}

static void export_world_free(export_world *w) {
  for (uint32_t rank = 0; rank < EXPORT_RANKS; ++rank) {
    clbt_multi_table_destroy(w->ranks[rank]);
    for (uint32_t g = 0; g < EXPORT_GROUPS; ++g) free(w->cache[rank][g]);
  }
  cl_mem buffers[] = {w->qsl, w->positions, w->idx_mapping, w->seq_lens};
  for (size_t b = 0; b < sizeof buffers / sizeof buffers[0]; ++b)
    if (buffers[b]) clReleaseMemObject(buffers[b]);
  void *arrays[] = {w->length,    w->request_at,     w->row_of,
                    w->host_qsl,  w->host_idx,       w->host_seq_lens,
                    w->host_positions, w->slots,     w->indptr,
                    w->indices,   w->last_page_len,  w->past_lens,
                    w->begins};
  for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; ++a) free(arrays[a]);
}

/*
 * A world's groups: one of a few presets, so that the slot-mapping
 * programs they need are few and built once (each distinct set of group
 * constants is a cold build); the batches are random. Together: kernel
 * blocks of a half and a quarter of a block, CP with interleave 1 and 4,
 * a NONE group, several groups of different block sizes.
 */
typedef struct export_preset {
  uint32_t cp_world_size, cp_interleave_size, num_groups;
  uint32_t block_size[EXPORT_GROUPS], kernel_block_size[EXPORT_GROUPS];
  bool none_last; /* the last group is a NONE group */
} export_preset;

static const export_preset export_presets[] = {
    {1, 1, 1, {16}, {16}, false},
    {1, 1, 3, {32, 16, 64}, {16, 16, 64}, true},
    {2, 4, 2, {16, 32}, {16, 8}, false},
    {2, 1, 1, {64}, {32}, false},
};

static void export_config(rng *r, export_world *w) {
  const export_preset *preset =
      &export_presets[below(r, sizeof export_presets / sizeof export_presets[0])];
  w->cp_world_size = preset->cp_world_size;
  w->cp_interleave_size = preset->cp_interleave_size;
  w->max_reqs = 1 + below(r, 256);
  w->num_groups = preset->num_groups;
  for (uint32_t g = 0; g < w->num_groups; ++g) {
    clbt_group_config *group = &w->groups[g];
    memset(group, 0, sizeof *group);
    group->block_size = preset->block_size[g];
    group->kernel_block_size = preset->kernel_block_size[g];
    uint32_t span = group->block_size * w->cp_world_size;
    group->max_num_blocks = (EXPORT_MAX_LENGTH + span - 1) / span;
    group->slot_mode = preset->none_last && g + 1 == w->num_groups
                           ? CLBT_SLOT_MODE_NONE
                           : CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT;
  }
}

static bool make_tables(selftest_round *run, export_world *w) {
  bool ok = true;
  for (uint32_t rank = 0; rank < w->cp_world_size && ok; ++rank) {
    clbt_multi_table_config config = {
        .max_num_reqs = w->max_reqs,
        .max_num_batched_tokens = EXPORT_MAX_TOKENS,
        .num_groups = w->num_groups, .groups = w->groups,
        .cp_world_size = w->cp_world_size, .cp_rank = rank,
        .cp_interleave_size = w->cp_interleave_size};
    ok = expect_success(run, clbt_multi_table_create(run->device, &config,
                                                     &w->ranks[rank]),
                        "clbt_multi_table_create (export)");
    for (uint32_t g = 0; g < w->num_groups && ok; ++g) {
      size_t width = clbt_table_width(clbt_multi_table_group(w->ranks[rank], g));
      if (width > w->max_width) w->max_width = width;
      w->cache_slots[g] = (size_t)EXPORT_IDS * w->groups[g].block_size;
      w->cache[rank][g] = malloc(w->cache_slots[g] * sizeof(int32_t));
      ok = check(run, w->cache[rank][g] != NULL, "no memory for a cache");
      if (ok)
        memset(w->cache[rank][g], 0xFF, w->cache_slots[g] * sizeof(int32_t));
    }
  }
  return ok;
}

static bool export_world_create(selftest_round *run, export_world *w) {
  memset(w, 0, sizeof *w);
  export_config(&run->rng, w);
  if (!make_tables(run, w)) return false;
  cl_context context = clbt_device_context(run->device);
  size_t per_request = (w->max_reqs + 1) * sizeof(int32_t);
  cl_int errors[4];
  w->qsl = clCreateBuffer(context, CL_MEM_READ_ONLY, per_request, NULL,
                          &errors[0]);
  w->positions = clCreateBuffer(context, CL_MEM_READ_ONLY,
                                EXPORT_MAX_TOKENS * sizeof(int64_t), NULL,
                                &errors[1]);
  w->idx_mapping = clCreateBuffer(context, CL_MEM_READ_ONLY, per_request, NULL,
                                  &errors[2]);
  w->seq_lens = clCreateBuffer(context, CL_MEM_READ_ONLY, per_request, NULL,
                               &errors[3]);
  size_t entries = w->max_reqs + 1;
  w->length = calloc(entries, sizeof *w->length);
  w->request_at = calloc(entries, sizeof *w->request_at);
  w->row_of = calloc(entries, sizeof *w->row_of);
  w->host_qsl = calloc(entries, sizeof *w->host_qsl);
  w->host_idx = calloc(entries, sizeof *w->host_idx);
  w->host_seq_lens = calloc(entries, sizeof *w->host_seq_lens);
  w->host_positions = calloc(EXPORT_MAX_TOKENS, sizeof *w->host_positions);
  w->slots = calloc(EXPORT_MAX_TOKENS, sizeof *w->slots);
  w->indptr = calloc(entries, sizeof *w->indptr);
  w->begins = calloc(entries, sizeof *w->begins);
  w->last_page_len = calloc(entries, sizeof *w->last_page_len);
  w->past_lens = calloc(entries, sizeof *w->past_lens);
  w->indices = calloc(w->max_reqs * w->max_width, sizeof *w->indices);
  bool made = w->length && w->request_at && w->row_of && w->host_qsl &&
              w->host_idx && w->host_seq_lens && w->host_positions &&
              w->slots && w->indptr && w->begins && w->last_page_len &&
              w->past_lens && w->indices;
  return check(run,
               made && errors[0] == CL_SUCCESS && errors[1] == CL_SUCCESS &&
                   errors[2] == CL_SUCCESS && errors[3] == CL_SUCCESS,
               "allocating the export's buffers failed (%d %d %d %d)",
               errors[0], errors[1], errors[2], errors[3]);
}

static bool write_buffer(selftest_round *run, cl_mem buffer, size_t size,
                         const void *data) {
  cl_int error = size ? clEnqueueWriteBuffer(clbt_device_queue(run->device),
                                             buffer, CL_TRUE, 0, size, data, 0,
                                             NULL, NULL)
                      : CL_SUCCESS;
  return check(run, error == CL_SUCCESS, "writing a buffer: %d", error);
}

static bool read_buffer(selftest_round *run, cl_mem buffer, size_t size,
                        void *data) {
  cl_int error = clEnqueueReadBuffer(clbt_device_queue(run->device), buffer,
                                     CL_TRUE, 0, size, data, 0, NULL, NULL);
  return check(run, error == CL_SUCCESS, "reading a buffer: %d", error);
}

static bool commit_ranks(selftest_round *run, export_world *w) {
  bool ok = true;
  for (uint32_t rank = 0; rank < w->cp_world_size && ok; ++rank)
    ok = expect_success(run, clbt_multi_table_commit(w->ranks[rank],
                                                     w->max_reqs),
                        "clbt_multi_table_commit (export)");
  return ok;
}

/* Requests 0..n-1 in rows 0..n-1, each with the blocks its length needs. */
static bool add_requests(selftest_round *run, export_world *w) {
  uint32_t dealt = 0;
  bool ok = true;
  w->num_requests = 1 + below(&run->rng, w->max_reqs);
  for (uint32_t row = 0; row < w->max_reqs; ++row)
    w->request_at[row] = row < w->num_requests ? (int32_t)row : -1;
  for (uint32_t i = 0; i < w->num_requests && ok; ++i) {
    int32_t ids[EXPORT_GROUPS][EXPORT_MAX_LENGTH];
    const int32_t *lists[EXPORT_GROUPS];
    size_t counts[EXPORT_GROUPS] = {0};
    w->length[i] = 1 + below(&run->rng, EXPORT_MAX_LENGTH);
    w->row_of[i] = i;
    for (uint32_t g = 0; g < w->num_groups; ++g) {
      uint32_t span = w->groups[g].block_size * w->cp_world_size;
      counts[g] = maps_tokens(w, g) ? (w->length[i] + span - 1) / span : 1;
      for (size_t k = 0; k < counts[g]; ++k)
        ids[g][k] = (int32_t)((++dealt * 37u) % EXPORT_IDS);
      lists[g] = ids[g];
    }
    for (uint32_t rank = 0; rank < w->cp_world_size && ok; ++rank)
      ok = expect_success(run, clbt_multi_table_add_row(w->ranks[rank], i,
                                                        lists, counts),
                          "clbt_multi_table_add_row (export)");
  }
  return ok && commit_ranks(run, w);
}

/* Puts one slot-mapped token into each group's cache on a rank. */
static bool cache_chunk(selftest_round *run, export_world *w, uint32_t rank,
                        uint32_t first, uint32_t last) {
  bool ok = true;
  for (uint32_t g = 0; g < w->num_groups && ok; ++g) {
    if (!maps_tokens(w, g)) continue;
    cl_mem slots =
        clbt_table_slot_mapping(clbt_multi_table_group(w->ranks[rank], g));
    ok = read_buffer(run, slots,
                     (size_t)w->host_qsl[last] * sizeof(int64_t), w->slots);
    for (uint32_t i = first; i < last && ok; ++i)
      for (int32_t t = w->host_qsl[i]; t < w->host_qsl[i + 1] && ok; ++t) {
        int64_t slot = w->slots[t];
        if (slot == CLBT_PAD_SLOT_ID) continue;
        ok = check(run, slot >= 0 && (size_t)slot < w->cache_slots[g],
                   "export: slot %" PRId64 " outside the cache", slot);
        if (ok)
          w->cache[rank][g][slot] =
              token_value(i, (uint32_t)w->host_positions[t]);
      }
  }
  return ok;
}

/* Maps requests [first, last)'s tokens on every rank into the caches. */
static bool write_chunk(selftest_round *run, export_world *w, uint32_t first,
                        uint32_t last) {
  uint32_t tokens = 0;
  for (uint32_t i = 0; i <= last; ++i) {
    w->host_qsl[i] = (int32_t)tokens;
    for (uint32_t p = 0; i >= first && i < last && p < w->length[i]; ++p)
      w->host_positions[tokens++] = p;
  }
  bool ok = write_buffer(run, w->qsl, (last + 1) * sizeof(int32_t),
                         w->host_qsl) &&
            write_buffer(run, w->positions, tokens * sizeof(int64_t),
                         w->host_positions);
  for (uint32_t rank = 0; rank < w->cp_world_size && ok; ++rank)
    ok = expect_success(run, clbt_multi_table_compute_slot_mapping(
                                 w->ranks[rank], last, w->qsl, w->positions,
                                 tokens),
                        "clbt_multi_table_compute_slot_mapping (export)") &&
         cache_chunk(run, w, rank, first, last);
  return ok;
}

/* Every request's tokens, in batches of at most EXPORT_MAX_TOKENS. */
static bool write_tokens(selftest_round *run, export_world *w) {
  bool ok = true;
  for (uint32_t first = 0; first < w->num_requests && ok;) {
    uint32_t last = first, tokens = 0;
    while (last < w->num_requests &&
           tokens + w->length[last] <= EXPORT_MAX_TOKENS)
      tokens += w->length[last++];
    ok = write_chunk(run, w, first, last);
    first = last;
  }
  return ok;
}

/* Moves the requests into random rows (request slots) by swaps, commits. */
static bool scatter_rows(selftest_round *run, export_world *w) {
  bool ok = true;
  for (uint32_t i = 0; i < w->num_requests && ok; ++i) {
    uint32_t target = below(&run->rng, w->max_reqs), from = w->row_of[i];
    int32_t other = w->request_at[target];
    for (uint32_t rank = 0; rank < w->cp_world_size && ok; ++rank)
      ok = expect_success(run, clbt_multi_table_swap_row(w->ranks[rank], from,
                                                         target),
                          "clbt_multi_table_swap_row (export)");
    w->request_at[from] = other;
    if (other >= 0) w->row_of[other] = from;
    w->request_at[target] = (int32_t)i;
    w->row_of[i] = target;
  }
  return ok && commit_ranks(run, w);
}

/* The request an idx_mapping entry reads, or -1: padding, out of range or
   an empty row, none of which has pages. */
static int32_t entry_request(const export_world *w, int32_t entry) {
  return entry >= 0 && (uint32_t)entry < w->max_reqs ? w->request_at[entry]
                                                     : -1;
}

/* A random idx_mapping entry in place of request i's row. */
static int32_t random_entry(rng *r, const export_world *w, uint32_t i,
                            uint32_t filled) {
  uint32_t draw = below(r, 100);
  if (draw < 8) return -1 - (int32_t)below(r, 4);
  if (draw < 12) return (int32_t)(w->max_reqs + below(r, 3));
  if (draw < 14) return INT32_MAX;
  if (draw < 20 && filled) return w->host_idx[below(r, filled)];
  if (draw < 30) return (int32_t)below(r, w->max_reqs); /* maybe empty */
  return (int32_t)w->row_of[i];
}

/*
 * A random batch through idx_mapping; returns num_reqs. An entry reading a
 * request schedules its last 1..4 tokens, any other entry one token at
 * position 0. An entry drawn on an empty row reads the request's own row
 * instead: the empty row would reject the token on the ranks that own
 * position 0 only (tests/calls/test_export.c has that case).
 */
static uint32_t random_slot_batch(selftest_round *run, export_world *w) {
  uint32_t n = 0, tokens = 0;
  for (uint32_t i = 0; i < w->num_requests; ++i) {
    int32_t entry = random_entry(&run->rng, w, i, n);
    if (entry >= 0 && (uint32_t)entry < w->max_reqs &&
        w->request_at[entry] < 0)
      entry = (int32_t)w->row_of[i];
    w->host_idx[n++] = entry;
  }
  for (uint32_t k = n; k > 1; --k) { /* shuffle */
    uint32_t j = below(&run->rng, k);
    int32_t kept = w->host_idx[k - 1];
    w->host_idx[k - 1] = w->host_idx[j];
    w->host_idx[j] = kept;
  }
  for (uint32_t b = 0; b < n; ++b) {
    int32_t i = entry_request(w, w->host_idx[b]);
    uint32_t length = i >= 0 ? w->length[i] : 1;
    uint32_t q = i >= 0 ? 1 + below(&run->rng, length < 4 ? length : 4) : 1;
    w->host_qsl[b] = (int32_t)tokens;
    w->host_seq_lens[b] = i >= 0 ? (int32_t)length : 7; /* ignored */
    for (uint32_t k = 0; k < q; ++k)
      w->host_positions[tokens++] = length - q + k;
  }
  w->host_qsl[n] = (int32_t)tokens;
  return n;
}

/* Poisons a group's export, so that what the export does not write shows. */
static bool poison_export(selftest_round *run, const clbt_table *group) {
  clbt_export_buffers b;
  const cl_int poison = EXPORT_POISON;
  if (!expect_success(run, clbt_table_export_buffers(group, &b),
                      "clbt_table_export_buffers"))
    return false;
  const cl_mem buffers[] = {b.paged_kv_indptr, b.paged_kv_indices,
                            b.paged_kv_last_page_len, b.past_lens,
                            b.subsequence_begins};
  cl_int error = CL_SUCCESS;
  for (size_t k = 0; k < 5 && error == CL_SUCCESS; ++k) {
    size_t size = 0;
    error = clGetMemObjectInfo(buffers[k], CL_MEM_SIZE, sizeof size, &size,
                               NULL);
    if (error == CL_SUCCESS)
      error = clEnqueueFillBuffer(clbt_device_queue(run->device), buffers[k],
                                  &poison, sizeof poison, 0, size, 0, NULL,
                                  NULL);
  }
  return check(run, error == CL_SUCCESS, "poisoning an export: %d", error);
}

/* Reads a group's whole export on a rank into the world's arrays. */
static bool read_export(selftest_round *run, export_world *w,
                        const clbt_table *group, uint32_t *page_size) {
  clbt_export_buffers b;
  size_t entries = w->max_reqs * sizeof(int32_t);
  bool ok = expect_success(run, clbt_table_export_buffers(group, &b),
                           "clbt_table_export_buffers") &&
            read_buffer(run, b.paged_kv_indptr, entries + sizeof(int32_t),
                        w->indptr) &&
            read_buffer(run, b.subsequence_begins, entries + sizeof(int32_t),
                        w->begins) &&
            read_buffer(run, b.paged_kv_last_page_len, entries,
                        w->last_page_len) &&
            read_buffer(run, b.past_lens, entries, w->past_lens) &&
            read_buffer(run, b.paged_kv_indices,
                        w->max_reqs * clbt_table_width(group) * sizeof(int32_t),
                        w->indices);
  *page_size = b.page_size;
  return ok;
}

/* Entry b with no pages: padding, out of range, or past num_reqs. */
static bool check_empty_entry(selftest_round *run, const export_world *w,
                              uint32_t b) {
  return check(run, w->indptr[b + 1] == w->indptr[b] &&
                        w->last_page_len[b] == 0 && w->past_lens[b] == 0,
               "export: entry %" PRIu32 " (idx %d) has pages [%d, %d), last "
               "%d, past %d; want none, 0, 0",
               b, w->host_idx[b], w->indptr[b], w->indptr[b + 1],
               w->last_page_len[b], w->past_lens[b]);
}

/* Entry b reading request i: its tokens on this rank through both layouts. */
static bool check_request_entry(selftest_round *run, const export_world *w,
                                uint32_t g, uint32_t rank, uint32_t b,
                                uint32_t i, uint32_t page) {
  uint32_t length = w->length[i];
  uint32_t q = (uint32_t)(w->host_qsl[b + 1] - w->host_qsl[b]);
  uint32_t want = 0, query_owned = 0;
  for (uint32_t p = 0; p < length; ++p)
    if (rank_owns(w, g, rank, p)) {
      ++want;
      query_owned += p >= length - q;
    }
  int32_t pages = w->indptr[b + 1] - w->indptr[b];
  int32_t last = w->last_page_len[b];
  /* FlashInfer's get_seq_lens: last_page_len 0 with no page. */
  uint32_t got = pages > 0 ? (uint32_t)(pages - 1) * page + (uint32_t)last : 0;
  bool ok = check(run, pages >= 0 && got == want &&
                           (pages > 0 ? last >= 1 : last == 0) &&
                           (uint32_t)last <= page &&
                           (uint32_t)w->past_lens[b] + query_owned == want,
                  "export: rank %" PRIu32 " group %" PRIu32 " entry %" PRIu32
                  " (request %" PRIu32 ", length %" PRIu32 "): %d pages, "
                  "last %d, past %d; want %" PRIu32 " tokens",
                  rank, g, b, i, length, pages, last, w->past_lens[b], want);
  size_t ids = EXPORT_IDS * (size_t)(w->groups[g].block_size / page);
  for (uint32_t k = 0, p = 0; ok && k < want; ++p) {
    if (!rank_owns(w, g, rank, p)) continue;
    int32_t id = w->indices[w->indptr[b] + (int32_t)(k / page)];
    int32_t value = id >= 0 && (size_t)id < ids
                        ? w->cache[rank][g][(size_t)id * page + k % page]
                        : INT32_MIN;
    ok = check(run, value == token_value(i, p),
               "export: rank %" PRIu32 " group %" PRIu32 " entry %" PRIu32
               " token %" PRIu32 " reads %d, want %d",
               rank, g, b, k, value, token_value(i, p));
    ++k;
  }
  return ok;
}

/* A group's export of entries [0, padded) on a rank, n of them requests. */
static bool check_group_export(selftest_round *run, export_world *w,
                               uint32_t g, uint32_t rank, uint32_t n,
                               uint32_t padded) {
  const clbt_table *group = clbt_multi_table_group(w->ranks[rank], g);
  uint32_t page = 0;
  bool ok = read_export(run, w, group, &page) &&
            check(run, w->indptr[0] == 0 && w->begins[0] == 0,
                  "export: indptr[0] %d, subsequence_begins[0] %d",
                  w->indptr[0], w->begins[0]);
  /* subsequence_begins counts the tokens of the entries that read a
     request; padding and entries out of range have none. */
  int32_t begin = w->host_qsl[0];
  for (uint32_t b = 0; b < padded && ok; ++b) {
    int32_t i = b < n ? entry_request(w, w->host_idx[b]) : -1;
    if (i >= 0) begin += w->host_qsl[b + 1] - w->host_qsl[b];
    ok = check(run, w->begins[b + 1] == begin,
               "export: subsequence_begins[%" PRIu32 "] is %d, want %d",
               b + 1, w->begins[b + 1], begin) &&
         (i < 0 ? check_empty_entry(run, w, b)
                : check_request_entry(run, w, g, rank, b, (uint32_t)i, page));
  }
  /* Nothing past the padded batch is written. */
  size_t end = (size_t)w->indptr[padded];
  return ok &&
         check(run, padded == w->max_reqs ||
                        (w->indptr[padded + 1] == EXPORT_POISON &&
                         w->last_page_len[padded] == EXPORT_POISON),
               "export: entry %" PRIu32 " past the padded batch is written",
               padded) &&
         check(run, end >= w->max_reqs * clbt_table_width(group) ||
                        w->indices[end] == EXPORT_POISON,
               "export: index %zu past the last page is written", end);
}

/* Exports a random batch on every rank and checks every token group. */
static bool export_batch(selftest_round *run, export_world *w) {
  uint32_t n = random_slot_batch(run, w);
  uint32_t padded = n + below(&run->rng, w->max_reqs - n + 1);
  uint32_t out_of_range = 0;
  for (uint32_t b = 0; b < n; ++b)
    out_of_range += w->host_idx[b] >= 0 &&
                    (uint32_t)w->host_idx[b] >= w->max_reqs;
  bool with_lengths = chance(&run->rng, 50);
  clbt_export_request request = {
      .num_reqs = n, .num_reqs_padded = padded, .query_start_loc = w->qsl,
      .positions = w->positions, .num_tokens = (uint32_t)w->host_qsl[n],
      .seq_lens = with_lengths ? w->seq_lens : NULL,
      .idx_mapping = w->idx_mapping};
  bool ok = write_buffer(run, w->qsl, (n + 1) * sizeof(int32_t), w->host_qsl) &&
            write_buffer(run, w->positions,
                         request.num_tokens * sizeof(int64_t),
                         w->host_positions) &&
            write_buffer(run, w->idx_mapping, n * sizeof(int32_t),
                         w->host_idx) &&
            write_buffer(run, w->seq_lens, n * sizeof(int32_t),
                         w->host_seq_lens);
  for (uint32_t rank = 0; rank < w->cp_world_size && ok; ++rank) {
    uint32_t before[EXPORT_GROUPS] = {0}, after = 0;
    for (uint32_t g = 0; g < w->num_groups && ok; ++g) {
      clbt_table *group = clbt_multi_table_group(w->ranks[rank], g);
      ok = !maps_tokens(w, g) ||
           (poison_export(run, group) &&
            expect_success(run, clbt_table_read_rejected_tokens(group,
                                                                &before[g]),
                           "clbt_table_read_rejected_tokens"));
    }
    ok = ok && expect_success(run, clbt_multi_table_enqueue_export(
                                       w->ranks[rank], &request, 0, NULL, NULL),
                              "clbt_multi_table_enqueue_export");
    for (uint32_t g = 0; g < w->num_groups && ok; ++g) {
      if (!maps_tokens(w, g)) continue;
      ok = check_group_export(run, w, g, rank, n, padded) &&
           expect_success(run, clbt_table_read_rejected_tokens(
                                   clbt_multi_table_group(w->ranks[rank], g),
                                   &after),
                          "clbt_table_read_rejected_tokens") &&
           check(run, after - before[g] == out_of_range,
                 "export: rank %" PRIu32 " group %" PRIu32 " counted %" PRIu32
                 " rejected entries, want %" PRIu32,
                 rank, g, after - before[g], out_of_range);
    }
  }
  ++run->result->exports;
  return ok;
}

/* One export round: a world, its tokens, its rows in slots, three batches. */
static clbt_status run_export_round(selftest_round *run) {
  export_world w;
  bool ok = export_world_create(run, &w) && add_requests(run, &w) &&
            write_tokens(run, &w) && scatter_rows(run, &w);
  for (int batch = 0; batch < 3 && ok; ++batch) ok = export_batch(run, &w);
  export_world_free(&w);
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
    round_status = run_export_round(&run);
    if (round_status != CLBT_SUCCESS) status = round_status;
  }
  return status;
}
