/*
 * The step section of `clbt bench`: a whole serving step (the host's row
 * updates, clbt_multi_table_enqueue_step, completion) on the shapes of the
 * seed's own step (shared/anchors/seed_step.py), in vLLM's v1 model (rows
 * in batch order, idx_mapping NULL) and in the persistent model (rows in
 * request slots, an idx_mapping, the gather; and the same with the export
 * of FlashInfer's and OpenVINO's page tables inside the step), steady and
 * churning, against an empty kernel's call on the same queue; the host
 * time of the enqueue alone against the empty kernel's enqueue; the
 * library's OpenCL calls in each step, by function (bench_calls.c),
 * against issue 18's budget; and a full gather's device time against the
 * device's copy bandwidth.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "call_counter.h"

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
  double steady_limit; /* issue 18's target for a steady step / empty call */
  const char *work; /* what the changed rows cost, for a missed target */
  uint32_t export_flags, pitch; /* clbt_step.export_flags, dense_row_pitch */
} step_variant;

static const step_variant step_variants[] = {
    {"v1", false, 0, 1.15, "their commit", 0, 0},
    {"persistent", true, CLBT_STEP_GATHER, 1.15, "their commit and gather", 0,
     0},
    {"persistent-export", true, CLBT_STEP_GATHER | CLBT_STEP_EXPORT, 1.3,
     "their commit and gather; the export is in both figures", 0, 0},
    /* Everything an attention backend reads: the context CSR and a dense
       page table of 1024 pages a row (rows start at 64 to 511) beside the
       CSR. */
    {"persistent-export-all", true, CLBT_STEP_GATHER | CLBT_STEP_EXPORT, 1.3,
     "their commit and gather; the whole export is in both figures",
     CLBT_EXPORT_CONTEXT | CLBT_EXPORT_DENSE, 1024},
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
  uint32_t changed_ids; /* block ids the step's row updates wrote */
  bench_calls *counted; /* the series the counted steps go into */
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
  for (uint32_t g = 0; g < m->shape->num_groups; ++g)
    m->changed_ids += (uint32_t)counts[g];
  m->rows[r] = (int32_t)row;
  m->positions[r] = (int64_t)blocks * STEP_TOKENS_PER_BLOCK - 1;
  m->batch_changed = true;
}

/* Sends the batch's positions and idx_mapping when new requests changed
   them; the writes do not wait (every run finishes the queue before the
   host touches them again). Returns the writes made. */
static uint32_t send_batch(step_model *m) {
  if (!m->batch_changed) return 0;
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
  return m->persistent ? 2 : 1;
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
  m->step.export_flags = variant->export_flags;
  m->step.dense_row_pitch = variant->pitch;
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
    if (full) {
      new_request(b, m, r, row);
    } else {
      bench_check(clbt_multi_table_append_row(m->table, row, ids, counts),
                  "append_row");
      m->changed_ids += m->shape->num_groups;
    }
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

/* A churning step's row updates: a steady step's, and requests leave. */
static void grow_and_churn(bench *b, step_model *m) {
  grow(b, m);
  churn(b, m);
}

/* A step's host work before its enqueue: the row updates, the batch sent.
   Returns the writes the batch took. */
static uint32_t update(bench *b, step_model *m,
                       void (*updates)(bench *, step_model *)) {
  m->changed_ids = 0;
  updates(b, m);
  uint32_t writes = send_batch(m);
  ++m->steps;
  return writes;
}

/* A whole step; with calls, the library's OpenCL calls in it counted. */
static void step(bench *b, step_model *m,
                 void (*updates)(bench *, step_model *), bench_calls *calls,
                 cl_event *event) {
  if (calls) bench_calls_updates(calls);
  uint32_t writes = update(b, m, updates);
  if (calls) bench_calls_step(calls);
  enqueue_step(m, event);
  if (calls) bench_calls_done(calls, writes, m->changed_ids);
}

/* bench_call runs: a steady step, counted or not; a churning step, the
   same; the step's enqueue alone, its updates left out of the time
   (*_enqueue); a step with no row changes; and the full gather's step (a
   new idx_mapping every time). */
static void run_steady(bench *b, void *context, cl_event *event) {
  step(b, context, grow, NULL, event);
}

static void run_steady_counted(bench *b, void *context, cl_event *event) {
  step_model *m = context;
  step(b, m, grow, m->counted, event);
}

static void run_churn(bench *b, void *context, cl_event *event) {
  step(b, context, grow_and_churn, NULL, event);
}

static void run_churn_counted(bench *b, void *context, cl_event *event) {
  step_model *m = context;
  step(b, m, grow_and_churn, m->counted, event);
}

static void run_steady_enqueue(bench *b, void *context, cl_event *event) {
  update(b, context, grow);
  bench_restart_clock(b);
  enqueue_step(context, event);
}

static void run_churn_enqueue(bench *b, void *context, cl_event *event) {
  update(b, context, grow_and_churn);
  bench_restart_clock(b);
  enqueue_step(context, event);
}

static void run_still(bench *b, void *context, cl_event *event) {
  (void)b;
  enqueue_step(context, event);
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

/* Issue 18's targets: a whole step within 1.3x the empty kernel's call on
   the same queue (steady v1 and persistent steps within their variant's
   steady_limit), and one enqueue_step's host time within 1.25x the empty
   kernel's enqueue. */
#define STEP_LIMIT 1.3
#define STEP_ENQUEUE_LIMIT 1.25

/* The report's sections of the steps: a record per model and kind of step
   in each. */
typedef struct step_sections {
  report *times, *targets, *enqueue_targets, *calls, *call_targets;
  bench_calls_table *counted; /* rows of calls and call_targets, to come */
} step_sections;

/* Medians of one kind of step (steady or churning) in one model, in
   microseconds: the whole step and the empty kernel's call interleaved
   with it; the step's enqueue alone and the empty kernel's enqueue; the
   host's share (the updates and the enqueue, not waited for); for steady
   steps, a step with no row changes (negative: not measured). */
typedef struct step_times {
  double step, empty, enqueue, empty_enqueue, host, still;
} step_times;

/* A model's steady steps, the calls of those timed to completion counted
   into calls. */
static step_times time_steady(bench *b, step_model *m, bench_calls *calls) {
  const bench_call runs[] = {{run_steady_counted, m, BENCH_TO_COMPLETION},
                             {bench_run_empty, NULL, BENCH_TO_COMPLETION},
                             {run_still, m, BENCH_TO_COMPLETION},
                             {run_steady, m, BENCH_ENQUEUE_ONLY},
                             {run_steady_enqueue, m, BENCH_ENQUEUE_ONLY},
                             {bench_run_empty, NULL, BENCH_ENQUEUE_ONLY}};
  double us[6];
  m->counted = calls;
  bench_time(b, 6, runs, us);
  check_model(m);
  return (step_times){.step = us[0], .empty = us[1], .still = us[2],
                      .host = us[3], .enqueue = us[4], .empty_enqueue = us[5]};
}

/* The same for churning steps. */
static step_times time_churn(bench *b, step_model *m, bench_calls *calls) {
  const bench_call runs[] = {{run_churn_counted, m, BENCH_TO_COMPLETION},
                             {bench_run_empty, NULL, BENCH_TO_COMPLETION},
                             {run_churn, m, BENCH_ENQUEUE_ONLY},
                             {run_churn_enqueue, m, BENCH_ENQUEUE_ONLY},
                             {bench_run_empty, NULL, BENCH_ENQUEUE_ONLY}};
  double us[5];
  m->counted = calls;
  bench_time(b, 5, runs, us);
  check_model(m);
  return (step_times){.step = us[0], .empty = us[1], .host = us[2],
                      .enqueue = us[3], .empty_enqueue = us[4], .still = -1};
}

static void report_times(report *section, const char *name,
                         const step_times *t) {
  report *record = bench_record(section, name);
  report_number(record, "step_us", t->step, 1);
  report_number(record, "empty_us", t->empty, 1);
  report_number(record, "step_over_empty", t->step / t->empty, 2);
  report_number(record, "enqueue_us", t->enqueue, 1);
  report_number(record, "empty_enqueue_us", t->empty_enqueue, 1);
  report_number(record, "enqueue_over_empty", t->enqueue / t->empty_enqueue,
                2);
  report_number(record, "host_us", t->host, 1);
  if (t->still >= 0) report_number(record, "no_changes_us", t->still, 1);
}

/* Adds a target's record under key: ratio against limit, and for a miss by
   how much and why. */
static void add_target(report *targets, const char *name, const char *key,
                       double ratio, double limit, const char *why) {
  char verdict[48];
  if (ratio <= limit)
    snprintf(verdict, sizeof verdict, "met");
  else
    snprintf(verdict, sizeof verdict, "missed by %.0f%%",
             (ratio / limit - 1) * 100);
  report *target = bench_record(targets, name);
  report_number(target, key, ratio, 2);
  report_number(target, "limit", limit, 2);
  report_string(target, "verdict", verdict);
  report_string(target, "why", ratio <= limit ? "" : why);
}

/* Where a steady step's time goes, from what was measured beside it: the
   step with no row changes against the floor, what the changes add, the
   enqueue's host time and the host's share. */
static void steady_reason(char *reason, size_t size, const char *work,
                          const step_times *t) {
  snprintf(reason, size,
           "a step with no row changes takes %.1f us (%.2fx the floor of "
           "%.1f us); the changed rows add %.1f us (%s); enqueue_step "
           "takes %.1f us of host time (%.2fx an empty kernel's enqueue); "
           "the host's share of the step is %.1f us",
           t->still, t->still / t->empty, t->empty, t->step - t->still, work,
           t->enqueue, t->enqueue / t->empty_enqueue, t->host);
}

/* Where a churning step's time goes: its model's steady step, what the
   requests that leave and join add, the enqueue's host time. */
static void churn_reason(char *reason, size_t size, const step_times *steady,
                         const step_times *t) {
  snprintf(reason, size,
           "this model's steady step is %.2fx its floor; the requests that "
           "leave and join take it to %.2fx (floor %.1f us); enqueue_step "
           "takes %.1f us of host time (%.2fx an empty kernel's enqueue); "
           "the host's share of the step is %.1f us",
           steady->step / steady->empty, t->step / t->empty, t->empty,
           t->enqueue, t->enqueue / t->empty_enqueue, t->host);
}

/* The host-time target of one kind of step: its enqueue against the empty
   kernel's, and for a miss the OpenCL calls it makes. */
static void enqueue_target(bench *b, report *targets, const char *name,
                           const step_times *t, const bench_calls *calls) {
  double ratio = t->enqueue / t->empty_enqueue;
  char counted[768], why[1024];
  bench_calls_describe(calls, counted, sizeof counted);
  snprintf(why, sizeof why,
           "enqueue_step takes %.1f us of host time, %.1f us more than an "
           "empty kernel's enqueue (one call); %s",
           t->enqueue, t->enqueue - t->empty_enqueue, counted);
  add_target(targets, name, "enqueue_over_empty", ratio, STEP_ENQUEUE_LIMIT,
             why);
  if (ratio > b->step_enqueue_over_empty) b->step_enqueue_over_empty = ratio;
}

/* Times one case in one model, steady and churning, and adds their
   records, counts and targets. */
static void step_case_run(bench *b, const step_sections *out,
                          const step_case *shape,
                          const step_variant *variant) {
  step_model *m = model_create(b, b->device, shape, variant, 0);
  bench_calls *steady_calls = bench_calls_create(b->options.runs);
  bench_calls *churn_calls = bench_calls_create(b->options.runs);
  step_times steady = time_steady(b, m, steady_calls);
  step_times churning = time_churn(b, m, churn_calls);
  model_destroy(m);

  char name[64], churn_name[80], reason[640];
  snprintf(name, sizeof name, "%s/%s", shape->name, variant->name);
  snprintf(churn_name, sizeof churn_name, "%s/churn", name);
  report_times(out->times, name, &steady);
  report_times(out->times, churn_name, &churning);

  double ratio = steady.step / steady.empty;
  steady_reason(reason, sizeof reason, variant->work, &steady);
  add_target(out->targets, name, "step_over_empty", ratio,
             variant->steady_limit, reason);
  if (variant->steady_limit < STEP_LIMIT && ratio > b->steady_step_over_empty)
    b->steady_step_over_empty = ratio;
  if (ratio > b->step_over_empty) b->step_over_empty = ratio;
  ratio = churning.step / churning.empty;
  churn_reason(reason, sizeof reason, &steady, &churning);
  add_target(out->targets, churn_name, "step_over_empty", ratio, STEP_LIMIT,
             reason);
  if (ratio > b->step_over_empty) b->step_over_empty = ratio;

  enqueue_target(b, out->enqueue_targets, name, &steady, steady_calls);
  enqueue_target(b, out->enqueue_targets, churn_name, &churning, churn_calls);

  bool exports = (variant->flags & CLBT_STEP_EXPORT) != 0;
  bench_calls_table_add(out->counted, steady_calls, name, exports);
  bench_calls_table_add(out->counted, churn_calls, churn_name, exports);
  bench_calls_free(steady_calls);
  bench_calls_free(churn_calls);
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

/* The step's sections, captioned; where the build does not count OpenCL
   calls, their section says so and has no records. */
static step_sections step_sections_create(bench *b) {
  char caption[1400];
  step_sections out;
  snprintf(caption, sizeof caption,
           "a whole step (host row updates, clbt_multi_table_enqueue_step, "
           "clFinish), medians of %u runs, microseconds, beside an empty "
           "kernel's enqueue + clFinish; v1: rows in batch order, "
           "idx_mapping NULL; persistent: request slots, idx_mapping, "
           "gather; persistent-export: the same with CLBT_STEP_EXPORT "
           "(every group's page tables); /churn: 1 request in %d leaves "
           "and another takes its place; enqueue: the step's "
           "clbt_multi_table_enqueue_step alone (host time, its updates "
           "done and the queue idle before) beside an empty kernel's "
           "clEnqueueNDRangeKernel alone; host: the updates and the "
           "enqueue, not waited for; no_changes: a step with no row "
           "updates",
           (unsigned)b->options.runs, STEP_LEAVES_ONE_IN);
  out.times = bench_section(b, "step", caption);
  out.targets = report_array(b->root, "step_targets");
  report_caption(out.targets,
                 "a whole step <= %.1fx the empty kernel's call, steady v1 "
                 "and persistent steps <= %.2fx",
                 STEP_LIMIT, step_variants[0].steady_limit);
  out.enqueue_targets = report_array(b->root, "step_enqueue_targets");
  report_caption(out.enqueue_targets,
                 "one clbt_multi_table_enqueue_step's host time <= %.2fx "
                 "one empty kernel's enqueue",
                 STEP_ENQUEUE_LIMIT);
  out.calls = report_array(b->root, "step_calls");
  if (call_counter_available()) {
    cl_ulong parameter_bytes = 0;
    bench_check_cl(clGetDeviceInfo(clbt_device_id(b->device),
                                   CL_DEVICE_MAX_PARAMETER_SIZE,
                                   sizeof parameter_bytes, &parameter_bytes,
                                   NULL),
                   "clGetDeviceInfo");
    report_caption(
        out.calls,
        "the library's OpenCL calls in each step timed to completion, "
        "counted by wrappers over the OpenCL entry points "
        "(tools/call_counter.h); per function, the calls inside "
        "clbt_multi_table_enqueue_step in the middle step of those "
        "counted (varies: the functions whose count changed from step to "
        "step, with their range); besides_set_kernel_arg: all of them but "
        "clSetKernelArg; objects_created: objects the driver handed the "
        "library (events included); references_kept: references taken and "
        "not given back over all the counted steps; row_updates: the "
        "library's calls in the host row updates before the step; "
        "changed_ids: the block ids those updates wrote (kernel arguments "
        "may take %llu bytes here); batch_writes: the bench's own writes "
        "of positions and idx_mapping; completion: the bench's clFinish",
        (unsigned long long)parameter_bytes);
  } else {
    report_caption(out.calls,
                   "not counted: this build of the tool links the plain "
                   "library, not the counted copy (tools/CMakeLists.txt "
                   "says what it needs)");
  }
  out.call_targets = report_array(b->root, "step_call_targets");
  report_caption(out.call_targets,
                 "issue 18's budget for each counted step's calls: besides "
                 "clSetKernelArg at most 2 (the launch, one status query), "
                 "+2 in a step that uploads (the write and its event), +1 "
                 "for the export while it is a launch of its own; at most 2 "
                 "clSetKernelArg; calls and budget: the worst step's");
  out.counted = bench_calls_table_create();
  return out;
}

void bench_step(bench *b) {
  if (!bench_selected(b, "step")) return;
  step_sections out = step_sections_create(b);
  for (size_t c = 0; c < sizeof step_cases / sizeof step_cases[0]; ++c)
    for (size_t v = 0; v < sizeof step_variants / sizeof step_variants[0];
         ++v)
      step_case_run(b, &out, &step_cases[c], &step_variants[v]);
  bench_calls_table_write(b, out.counted, out.calls, out.call_targets);
  bench_calls_table_free(out.counted);

  char caption[560];
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
