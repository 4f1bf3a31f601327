/*
 * The step section of `clbt bench`: a whole serving step (the host's row
 * updates, clbt_multi_table_enqueue_step, completion) on the shapes of the
 * seed's own step (shared/anchors/seed_step.py), in vLLM's v1 model (rows
 * in batch order, idx_mapping NULL) and in the persistent model (rows in
 * request slots, an idx_mapping, the gather; and the same with the export
 * of FlashInfer's and OpenVINO's page tables inside the step), against an
 * empty kernel's call on the same queue; a churning step; the host's share of a step; and
 * a full gather's device time against the device's copy bandwidth.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum {
  STEP_MAX_REQS = 1024,    /* the seed's max_num_reqs */
  STEP_MAX_TOKENS = 16384, /* and its slot-mapping buffer */
  STEP_MAX_GROUPS = 4,
  STEP_TOKENS_PER_BLOCK = 16, /* a row's length counts blocks of 16 */
  STEP_MIN_BLOCKS = 64,       /* the seed's rows: 64 to 511 blocks of 16 */
  STEP_MAX_BLOCKS = 512,
  STEP_GROWS_ONE_IN = 16,  /* rows that gain a block per step */
  STEP_LEAVES_ONE_IN = 64, /* requests that leave per churning step */
  STEP_COPY_BYTES = 128 << 20, /* the bandwidth probe's buffer */
  STEP_COPY_RUNS = 20
};

/* A case of seed_step.py, by its name. */
typedef struct step_case {
  const char *name;
  uint32_t requests, num_groups;
  uint32_t block_sizes[STEP_MAX_GROUPS], max_blocks[STEP_MAX_GROUPS];
} step_case;

static const step_case step_cases[] = {
    {"decode-256-1group", 256, 1, {16}, {8192}},
    {"decode-1024-1group", 1024, 1, {16}, {8192}},
    {"decode-256-4groups", 256, 4, {16, 16, 32, 64}, {8192, 8192, 4096, 2048}},
};

/* Full gathers: every request slot in use, every batch position new. */
static const step_case gather_cases[] = {
    {"full-gather-1024-1group", 1024, 1, {16}, {8192}},
    {"full-gather-1024-4groups", 1024, 4, {16, 16, 32, 64},
     {8192, 8192, 4096, 2048}},
};

/* How a case's rows are kept and what its step does: the v1 model, the
   persistent model, and the persistent model with the export in the step. */
typedef struct step_variant {
  const char *name;
  bool persistent; /* rows in request slots, read through an idx_mapping */
  uint32_t flags;  /* clbt_step.flags */
  const char *work; /* what the changed rows cost, for a missed target */
} step_variant;

static const step_variant step_variants[] = {
    {"v1", false, 0, "their commit"},
    {"persistent", true, CLBT_STEP_GATHER, "their commit and gather"},
    {"persistent-export", true, CLBT_STEP_GATHER | CLBT_STEP_EXPORT,
     "their commit and gather; the export, rebuilt every step, is in both "
     "figures"},
};

/* One table and the batch that drives it, in one of the models. */
typedef struct step_model {
  const step_case *shape;
  bool persistent;
  clbt_multi_table *table;
  cl_command_queue queue; /* the table's device's */
  int32_t *rows;        /* batch request -> its row (request slot) */
  uint32_t *free_slots; /* a ring of free slots, oldest first */
  uint32_t first_free, num_free;
  int64_t *positions; /* each request's one token */
  cl_mem idx_mapping, other_idx_mapping, query_start_loc, positions_buffer;
  clbt_step step;
  uint64_t steps; /* updates made: which rows grow, which leave */
  bool batch_changed; /* positions and idx_mapping, since last sent */
  int32_t ids[STEP_MAX_GROUPS][STEP_MAX_BLOCKS];
} step_model;

/* Puts a new request at batch position r, in row: 64 to 511 blocks of 16
   tokens in the first group, and its one token at the end of its last
   block; in each other group the blocks that hold as many tokens (where
   seed_step.py rounds down, leaving the token of an odd row outside the
   groups of 32 and 64, which clbt would map to -1 and count). */
static void new_request(bench *b, step_model *m, uint32_t r, uint32_t row) {
  uint32_t blocks =
      STEP_MIN_BLOCKS + bench_random(b) % (STEP_MAX_BLOCKS - STEP_MIN_BLOCKS);
  const int32_t *ids[STEP_MAX_GROUPS];
  size_t counts[STEP_MAX_GROUPS];
  for (uint32_t g = 0; g < m->shape->num_groups; ++g) {
    uint32_t size = m->shape->block_sizes[g];
    counts[g] = (blocks * STEP_TOKENS_PER_BLOCK + size - 1) / size;
    for (size_t i = 0; i < counts[g]; ++i)
      m->ids[g][i] = (int32_t)(1 + bench_random(b) % ((1u << 20) - 1));
    ids[g] = m->ids[g];
  }
  bench_check(clbt_multi_table_add_row(m->table, row, ids, counts), "add_row");
  m->rows[r] = (int32_t)row;
  m->positions[r] = (int64_t)blocks * STEP_TOKENS_PER_BLOCK - 1;
  m->batch_changed = true;
}

/* Sends the batch's positions and idx_mapping when new requests changed
   them; the writes do not wait (every run finishes the queue before the
   host touches them again). */
static void send_batch(step_model *m) {
  if (!m->batch_changed) return;
  bench_check_cl(clEnqueueWriteBuffer(m->queue, m->positions_buffer, CL_FALSE,
                                      0, m->shape->requests * sizeof(int64_t),
                                      m->positions, 0, NULL, NULL),
                 "positions");
  if (m->persistent)
    bench_check_cl(clEnqueueWriteBuffer(m->queue, m->idx_mapping, CL_FALSE, 0,
                                        m->shape->requests * sizeof(int32_t),
                                        m->rows, 0, NULL, NULL),
                   "idx_mapping");
  m->batch_changed = false;
}

/* Fisher-Yates: a random order of 0 .. count - 1. */
static void shuffle(bench *b, uint32_t *values, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) values[i] = i;
  for (uint32_t i = count - 1; i > 0; --i) {
    uint32_t j = bench_random(b) % (i + 1), kept = values[i];
    values[i] = values[j];
    values[j] = kept;
  }
}

/*
 * A table on device with the case's groups (zero_gathered_tails for all)
 * and requests rows: rows 0 .. requests - 1 in the v1 model, random request
 * slots of max_num_reqs in the persistent one; committed, with the batch's
 * buffers: one token per request, at the end of its row as first filled.
 */
static step_model *model_create(bench *b, clbt_device *device,
                                const step_case *shape,
                                const step_variant *variant,
                                uint32_t zero_tails) {
  bool persistent = variant->persistent;
  step_model *m = calloc(1, sizeof *m);
  clbt_group_config groups[STEP_MAX_GROUPS];
  for (uint32_t g = 0; g < shape->num_groups; ++g) {
    groups[g] = (clbt_group_config)CLBT_GROUP_CONFIG_INIT;
    groups[g].block_size = shape->block_sizes[g];
    groups[g].max_num_blocks = shape->max_blocks[g];
  }
  clbt_multi_table_config config = CLBT_MULTI_TABLE_CONFIG_INIT;
  config.max_num_reqs = STEP_MAX_REQS;
  config.max_num_batched_tokens = STEP_MAX_TOKENS;
  config.num_groups = shape->num_groups;
  config.groups = groups;
  config.zero_gathered_tails = zero_tails;
  uint32_t *slots = malloc(STEP_MAX_REQS * sizeof *slots);
  int32_t *starts = malloc((shape->requests + 1) * sizeof *starts);
  if (!m || !slots || !starts) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  m->rows = malloc(shape->requests * sizeof *m->rows);
  m->positions = malloc(shape->requests * sizeof *m->positions);
  if (!m->rows || !m->positions)
    bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  m->shape = shape;
  m->persistent = persistent;
  bench_check(clbt_multi_table_create(device, &config, &m->table),
              "multi create");
  m->queue = clbt_device_queue(device);
  if (persistent)
    shuffle(b, slots, STEP_MAX_REQS);
  else
    for (uint32_t i = 0; i < STEP_MAX_REQS; ++i) slots[i] = i;
  for (uint32_t r = 0; r < shape->requests; ++r) {
    new_request(b, m, r, slots[r]);
    starts[r] = (int32_t)r;
  }
  starts[shape->requests] = (int32_t)shape->requests;
  m->num_free = STEP_MAX_REQS - shape->requests;
  m->free_slots = slots; /* the ring: the slots past the batch's */
  m->first_free = shape->requests % STEP_MAX_REQS;
  m->query_start_loc =
      bench_upload(b, starts, (shape->requests + 1) * sizeof *starts);
  free(starts);
  cl_int error = CL_SUCCESS;
  m->positions_buffer =
      clCreateBuffer(b->context, CL_MEM_READ_ONLY,
                     shape->requests * sizeof(int64_t), NULL, &error);
  bench_check_cl(error, "clCreateBuffer");
  if (persistent) {
    m->idx_mapping =
        clCreateBuffer(b->context, CL_MEM_READ_ONLY,
                       shape->requests * sizeof(int32_t), NULL, &error);
    bench_check_cl(error, "clCreateBuffer");
  }
  send_batch(m);
  m->step = (clbt_step)CLBT_STEP_INIT;
  m->step.num_reqs = m->step.num_tokens = shape->requests;
  m->step.query_start_loc = m->query_start_loc;
  m->step.positions = m->positions_buffer;
  m->step.flags = variant->flags;
  if (persistent) m->step.idx_mapping = m->idx_mapping;
  bench_check(clbt_multi_table_commit(m->table, STEP_MAX_REQS), "commit");
  bench_check(clbt_multi_table_enqueue_step(m->table, &m->step, 0, NULL, NULL),
              "step");
  bench_check_cl(clFinish(m->queue), "clFinish");
  return m;
}

static void model_destroy(step_model *m) {
  clbt_multi_table_destroy(m->table);
  clReleaseMemObject(m->query_start_loc);
  clReleaseMemObject(m->positions_buffer);
  if (m->idx_mapping) clReleaseMemObject(m->idx_mapping);
  if (m->other_idx_mapping) clReleaseMemObject(m->other_idx_mapping);
  free(m->rows);
  free(m->free_slots);
  free(m->positions);
  free(m);
}

/* A steady decode step's host updates: one request in 16 gains a block in
   every group (a row that would overflow a group starts again). */
static void grow(bench *b, step_model *m) {
  const int32_t *ids[STEP_MAX_GROUPS];
  size_t counts[STEP_MAX_GROUPS];
  for (uint32_t g = 0; g < m->shape->num_groups; ++g) {
    ids[g] = m->ids[g];
    counts[g] = 1;
  }
  for (uint32_t r = (uint32_t)(m->steps % STEP_GROWS_ONE_IN);
       r < m->shape->requests; r += STEP_GROWS_ONE_IN) {
    uint32_t row = (uint32_t)m->rows[r];
    bool full = false;
    for (uint32_t g = 0; g < m->shape->num_groups; ++g) {
      m->ids[g][0] = (int32_t)(1 + bench_random(b) % ((1u << 20) - 1));
      full |= clbt_table_row_length(clbt_multi_table_group(m->table, g),
                                    row) == m->shape->max_blocks[g];
    }
    if (full)
      new_request(b, m, r, row);
    else
      bench_check(clbt_multi_table_append_row(m->table, row, ids, counts),
                  "append_row");
  }
}

/* One request in 64 leaves (clear_row) and a new one takes its batch
   position: in the v1 model its row, in the persistent model the oldest
   free slot, which the idx_mapping names from this step on (the slot just
   freed only when every slot is in use, as with 1024 requests). */
static void churn(bench *b, step_model *m) {
  for (uint32_t r = (uint32_t)(m->steps % STEP_LEAVES_ONE_IN);
       r < m->shape->requests; r += STEP_LEAVES_ONE_IN) {
    uint32_t left = (uint32_t)m->rows[r], row = left;
    bench_check(clbt_multi_table_clear_row(m->table, left), "clear_row");
    if (m->persistent) { /* the slot joins the ring; the oldest leaves it */
      m->free_slots[(m->first_free + m->num_free) % STEP_MAX_REQS] = left;
      row = m->free_slots[m->first_free];
      m->first_free = (m->first_free + 1) % STEP_MAX_REQS;
    }
    new_request(b, m, r, row);
  }
}

static void enqueue_step(step_model *m, cl_event *event) {
  bench_check(clbt_multi_table_enqueue_step(m->table, &m->step, 0, NULL, event),
              "clbt_multi_table_enqueue_step");
}

/* bench_call runs: a steady step, a step with no row changes, a churning
   step, and the full gather's step (a new idx_mapping every time). */
static void run_steady(bench *b, void *context, cl_event *event) {
  step_model *m = context;
  grow(b, m);
  send_batch(m);
  ++m->steps;
  enqueue_step(m, event);
}

static void run_still(bench *b, void *context, cl_event *event) {
  (void)b;
  enqueue_step(context, event);
}

static void run_churn(bench *b, void *context, cl_event *event) {
  step_model *m = context;
  grow(b, m);
  churn(b, m);
  send_batch(m);
  ++m->steps;
  enqueue_step(m, event);
}

static void run_full_gather(bench *b, void *context, cl_event *event) {
  (void)b;
  step_model *m = context;
  cl_mem next = m->other_idx_mapping;
  m->other_idx_mapping = m->idx_mapping;
  m->step.idx_mapping = m->idx_mapping = next;
  enqueue_step(m, event);
}

/* ---- checks: a timed step must have done its work ------------------------ */

static void read_back(const step_model *m, cl_mem buffer, size_t bytes,
                      void *data) {
  bench_check_cl(clEnqueueReadBuffer(m->queue, buffer, CL_TRUE, 0, bytes, data,
                                     0, NULL, NULL),
                 "clEnqueueReadBuffer");
}

/* The first count int32 of a buffer, in memory the caller frees. */
static int32_t *read_ints(const step_model *m, cl_mem buffer, size_t count) {
  int32_t *data = malloc((count ? count : 1) * sizeof *data);
  if (!data) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  if (count) read_back(m, buffer, count * sizeof *data, data);
  return data;
}

/* Ends the process with what differs in group g's export of request r. */
static void export_differs(const step_model *m, uint32_t g, uint32_t r,
                           const char *what) {
  fprintf(stderr, "clbt bench: %s: group %u's export of request %u: %s\n",
          m->shape->name, (unsigned)g, (unsigned)r, what);
  exit(1);
}

/* Group g's FlashInfer arrays after a step with CLBT_STEP_EXPORT: request
   r's one token at position p makes it p + 1 tokens long, its pages the
   first ceil((p + 1) / block size) of its row's blocks. */
static void check_export(const step_model *m, uint32_t g) {
  const clbt_table *group = clbt_multi_table_group(m->table, g);
  const int32_t *host = clbt_table_host_data(group);
  uint32_t width = clbt_table_width(group), size = m->shape->block_sizes[g];
  uint32_t requests = m->shape->requests;
  clbt_export_buffers out;
  bench_check(clbt_table_export_buffers(group, &out), "export buffers");
  int32_t *indptr = read_ints(m, out.paged_kv_indptr, requests + 1);
  int32_t *last = read_ints(m, out.paged_kv_last_page_len, requests);
  int32_t *indices = read_ints(m, out.paged_kv_indices,
                               indptr[requests] > 0 ? indptr[requests] : 0);
  for (uint32_t r = 0; r < requests; ++r) {
    int64_t length = m->positions[r] + 1;
    int32_t pages = (int32_t)((length + size - 1) / size);
    if (indptr[r + 1] - indptr[r] != pages)
      export_differs(m, g, r, "not as many pages as its tokens fill");
    if (memcmp(&indices[indptr[r]], &host[(size_t)m->rows[r] * width],
               (size_t)pages * sizeof(int32_t)) != 0)
      export_differs(m, g, r, "pages that are not its row's blocks");
    if (last[r] != length - (int64_t)(pages - 1) * size)
      export_differs(m, g, r, "a wrong last page length");
  }
  free(indptr);
  free(last);
  free(indices);
}

/*
 * After a finished step: each group's slot mapping (a token past its row's
 * blocks gets -1), and in the persistent model its gathered rows up to
 * each row's length, and with the export its page tables, against the
 * host rows (which the step committed). Ends the process at the first
 * difference.
 */
static void check_model(const step_model *m) {
  int64_t *slots = malloc(STEP_MAX_TOKENS * sizeof *slots);
  if (!slots) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t g = 0; g < m->shape->num_groups; ++g) {
    const clbt_table *group = clbt_multi_table_group(m->table, g);
    const int32_t *host = clbt_table_host_data(group);
    uint32_t width = clbt_table_width(group), size = m->shape->block_sizes[g];
    size_t gathered_bytes =
        (size_t)m->shape->requests * width * sizeof(int32_t);
    int32_t *gathered = m->persistent ? malloc(gathered_bytes) : NULL;
    if (m->persistent && !gathered)
      bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
    read_back(m, clbt_table_slot_mapping(group),
              STEP_MAX_TOKENS * sizeof *slots, slots);
    if (gathered)
      read_back(m, clbt_table_gathered_rows(group), gathered_bytes, gathered);
    for (uint32_t t = 0; t < STEP_MAX_TOKENS; ++t) {
      int64_t expected = CLBT_PAD_SLOT_ID;
      int64_t position = t < m->shape->requests ? m->positions[t] : 0;
      uint32_t row = t < m->shape->requests ? (uint32_t)m->rows[t] : 0;
      if (t < m->shape->requests &&
          position / size < clbt_table_row_length(group, row))
        expected = (int64_t)host[(size_t)row * width + position / size] *
                       size + position % size;
      if (slots[t] != expected) {
        fprintf(stderr,
                "clbt bench: %s: group %u's slot %u is %lld, not %lld\n",
                m->shape->name, (unsigned)g, (unsigned)t, (long long)slots[t],
                (long long)expected);
        exit(1);
      }
    }
    for (uint32_t r = 0; gathered && r < m->shape->requests; ++r) {
      uint32_t length = clbt_table_row_length(group, (uint32_t)m->rows[r]);
      if (memcmp(&gathered[(size_t)r * width],
                 &host[(size_t)m->rows[r] * width],
                 length * sizeof(int32_t)) != 0) {
        fprintf(stderr,
                "clbt bench: %s: group %u's gathered row %u is not row %d\n",
                m->shape->name, (unsigned)g, (unsigned)r, (int)m->rows[r]);
        exit(1);
      }
    }
    free(gathered);
    if (m->step.flags & CLBT_STEP_EXPORT) check_export(m, g);
  }
  free(slots);
}

/* ---- the steps ----------------------------------------------------------- */

/* Why a step misses its target, from what was measured beside it: the
   step with no row changes against the floor, what the changes add, and
   the host's share. */
static void miss_reason(char *reason, size_t size, const char *work,
                        double step, double still, double empty,
                        double host) {
  snprintf(reason, size,
           "a step with no row changes takes %.1f us (%.2fx the floor of "
           "%.1f us); the changed rows add %.1f us (%s); the host's share "
           "of the step is %.1f us",
           still, still / empty, empty, step - still, work, host);
}

/* Times one case in one model and adds its record and its target's. */
static void step_case_run(bench *b, report *section, report *targets,
                          const step_case *shape,
                          const step_variant *variant) {
  const double limit = 1.3;
  step_model *m = model_create(b, b->device, shape, variant, 0);
  const bench_call calls[] = {
      {run_steady, m, BENCH_TO_COMPLETION},
      {bench_run_empty, NULL, BENCH_TO_COMPLETION},
      {run_still, m, BENCH_TO_COMPLETION},
      {run_steady, m, BENCH_ENQUEUE_ONLY},
      {run_churn, m, BENCH_TO_COMPLETION},
      {bench_run_empty, NULL, BENCH_TO_COMPLETION}};
  double us[6];
  bench_time(b, 4, calls, us);
  check_model(m);
  bench_time(b, 2, calls + 4, us + 4);
  check_model(m);
  model_destroy(m);
  char name[64];
  snprintf(name, sizeof name, "%s/%s", shape->name, variant->name);
  double step = us[0], empty = us[1], still = us[2], host = us[3];
  report *record = bench_record(section, name);
  report_number(record, "step_us", step, 1);
  report_number(record, "empty_us", empty, 1);
  report_number(record, "step_over_empty", step / empty, 2);
  report_number(record, "no_changes_us", still, 1);
  report_number(record, "host_us", host, 1);
  report_number(record, "churn_us", us[4], 1);
  report_number(record, "churn_empty_us", us[5], 1);
  report_number(record, "churn_over_empty", us[4] / us[5], 2);
  char verdict[48], reason[320];
  if (step / empty <= limit) {
    snprintf(verdict, sizeof verdict, "met");
    snprintf(reason, sizeof reason, "the floor was %.1f us", empty);
  } else {
    snprintf(verdict, sizeof verdict, "missed by %.0f%%",
             (step / empty / limit - 1) * 100);
    miss_reason(reason, sizeof reason, variant->work, step, still, empty,
                host);
  }
  report *target = bench_record(targets, name);
  report_number(target, "step_over_empty", step / empty, 2);
  report_number(target, "limit", limit, 2);
  report_string(target, "verdict", verdict);
  report_string(target, "why", reason);
  if (step / empty > b->step_over_empty) b->step_over_empty = step / empty;
}

/* ---- the full gather ----------------------------------------------------- */

static void run_copy(bench *b, void *context, cl_event *event) {
  cl_mem *buffers = context;
  bench_check_cl(clEnqueueCopyBuffer(b->profiling_queue, buffers[0],
                                     buffers[1], 0, 0, STEP_COPY_BYTES, 0,
                                     NULL, event),
                 "clEnqueueCopyBuffer");
}

/* The device's copy bandwidth in bytes per microsecond: a large buffer
   copied (read and written) on the profiling queue; fewer runs, each is
   long. */
static double copy_bandwidth(bench *b) {
  cl_mem buffers[2];
  for (int i = 0; i < 2; ++i) {
    cl_int error = CL_SUCCESS;
    buffers[i] = clCreateBuffer(b->context, CL_MEM_READ_WRITE, STEP_COPY_BYTES,
                                NULL, &error);
    bench_check_cl(error, "clCreateBuffer");
  }
  const bench_call call = {run_copy, buffers, BENCH_DEVICE};
  uint64_t runs = b->options.runs;
  if (b->options.runs > STEP_COPY_RUNS) b->options.runs = STEP_COPY_RUNS;
  double us;
  bench_time(b, 1, &call, &us);
  b->options.runs = runs;
  for (int i = 0; i < 2; ++i) clReleaseMemObject(buffers[i]);
  return 2.0 * STEP_COPY_BYTES / us;
}

/* Bytes a full gather must move: the live entries, read and written; and
   the most that zeroing the tails past them can write. */
static void gather_bytes(const step_model *m, uint64_t *live,
                         uint64_t *tails) {
  *live = *tails = 0;
  for (uint32_t g = 0; g < m->shape->num_groups; ++g) {
    const clbt_table *group = clbt_multi_table_group(m->table, g);
    for (uint32_t r = 0; r < m->shape->requests; ++r) {
      uint32_t length = clbt_table_row_length(group, (uint32_t)m->rows[r]);
      *live += 2ull * length * sizeof(int32_t);
      *tails += (uint64_t)(clbt_table_width(group) - length) * sizeof(int32_t);
    }
  }
}

/* A full gather's device time, tails zeroed or kept, against its bytes at
   the copy bandwidth. */
static void gather_case_run(bench *b, report *section, const step_case *shape,
                            uint32_t zero_tails, double bandwidth) {
  step_model *m =
      model_create(b, b->profiled, shape, &step_variants[1], zero_tails);
  /* A second idx_mapping where every position names another slot. */
  int32_t *next = malloc(shape->requests * sizeof *next);
  if (!next) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t r = 0; r < shape->requests; ++r) {
    uint32_t neighbour = (r + 1) % shape->requests;
    next[r] = m->rows[neighbour];
    /* a token both rows hold */
    if (m->positions[neighbour] < m->positions[r])
      m->positions[r] = m->positions[neighbour];
  }
  m->batch_changed = true;
  send_batch(m);
  m->other_idx_mapping =
      bench_upload(b, next, shape->requests * sizeof *next);
  const bench_call calls[] = {{run_full_gather, m, BENCH_DEVICE},
                              {bench_run_empty, NULL, BENCH_DEVICE}};
  double us[2];
  bench_time(b, 2, calls, us);
  if (b->options.runs % 2) /* the last step gathered the other mapping */
    memcpy(m->rows, next, shape->requests * sizeof *next);
  check_model(m);
  uint64_t live, tails;
  gather_bytes(m, &live, &tails);
  free(next);
  model_destroy(m);
  char name[64];
  snprintf(name, sizeof name, "%s/tails-%s", shape->name,
           zero_tails ? "zeroed" : "kept");
  report *record = bench_record(section, name);
  report_number(record, "device_us", us[0], 2);
  report_number(record, "empty_device_us", us[1], 2);
  report_uint(record, "live_bytes", live);
  report_uint(record, "tail_bytes", zero_tails ? tails : 0);
  report_number(record, "live_at_bandwidth_us", (double)live / bandwidth, 2);
  report_number(record, "at_bandwidth_over_device",
                (double)live / bandwidth / us[0], 3);
}

void bench_step(bench *b) {
  if (!bench_selected(b, "step")) return;
  char caption[560];
  snprintf(caption, sizeof caption,
           "a whole step (host row updates, clbt_multi_table_enqueue_step, "
           "clFinish), medians of %u runs, microseconds, beside an empty "
           "kernel's enqueue + clFinish; v1: rows in batch order, "
           "idx_mapping NULL; persistent: request slots, idx_mapping, "
           "gather; persistent-export: the same with CLBT_STEP_EXPORT "
           "(every group's page tables); no_changes: a step with no row "
           "updates; host: the step enqueued, not waited for; churn: 1 "
           "request in %d leaves and another takes its place",
           (unsigned)b->options.runs, STEP_LEAVES_ONE_IN);
  report *section = bench_section(b, "step", caption);
  report *targets = report_array(b->root, "step_targets");
  report_caption(targets, "a whole step <= 1.3x the empty kernel's call");
  for (size_t c = 0; c < sizeof step_cases / sizeof step_cases[0]; ++c)
    for (size_t v = 0; v < sizeof step_variants / sizeof step_variants[0];
         ++v)
      step_case_run(b, section, targets, &step_cases[c], &step_variants[v]);

  double bandwidth = copy_bandwidth(b);
  snprintf(caption, sizeof caption,
           "every batch position's row new each step, device time of the "
           "step's last command (profiling), medians of %u runs; live: "
           "the entries read and written; tail: the most that zeroing "
           "past them writes; at bandwidth: live bytes at the copy "
           "bandwidth, %.1f GB/s (clEnqueueCopyBuffer of %d MiB)",
           (unsigned)b->options.runs, bandwidth / 1e3, STEP_COPY_BYTES >> 20);
  report *gathers = bench_section(b, "step_full_gather", caption);
  report_number(report_object(b->root, "copy_bandwidth"), "gb_per_s",
                bandwidth / 1e3, 1);
  for (size_t c = 0; c < sizeof gather_cases / sizeof gather_cases[0]; ++c)
    for (uint32_t zero_tails = 0; zero_tails < 2; ++zero_tails)
      gather_case_run(b, gathers, &gather_cases[c], zero_tails, bandwidth);
}
