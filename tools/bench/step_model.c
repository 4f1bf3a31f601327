/*
 * The serving engine of the step section (step_model.h): its table and
 * batch, its steps planned as a scheduler plans them and applied as an
 * engine applies them, and the checks that a step did its work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/step_model.h"

/* Block ids drawn ahead of time, taken in order and wrapping: a prime
   count, so that no row's ids line up with an earlier row's. */
#define STEP_POOL_IDS 65521

/* The next count ids of the pool, contiguous. */
static const int32_t *take_ids(step_model *m, size_t count) {
  if (m->pool_next + count > STEP_POOL_IDS) m->pool_next = 0;
  const int32_t *ids = &m->pool[m->pool_next];
  m->pool_next += count;
  return ids;
}

/* Plans a new request at batch position r, in row: 64 to 511 blocks of 16
   tokens in the first group, and its one token at the end of its last
   block; in each other group the blocks that hold as many tokens (where
   seed_step.py rounds down, leaving the token of an odd row outside the
   groups of 32 and 64, which clbt would map to -1 and count). */
static void plan_request(bench *b, step_model *m, uint32_t r, uint32_t row) {
  uint32_t blocks =
      STEP_MIN_BLOCKS + bench_random(b) % (STEP_MAX_BLOCKS - STEP_MIN_BLOCKS);
  step_update *u = &m->added[m->num_added++];
  u->row = row;
  for (uint32_t g = 0; g < m->shape->num_groups; ++g) {
    uint32_t size = m->shape->block_sizes[g];
    u->counts[g] = (blocks * STEP_TOKENS_PER_BLOCK + size - 1) / size;
    u->ids[g] = take_ids(m, u->counts[g]);
    m->changed_ids += (uint32_t)u->counts[g];
  }
  m->rows[r] = (int32_t)row;
  m->positions[r] = (int64_t)blocks * STEP_TOKENS_PER_BLOCK - 1;
}

/* Plans the block request r's row gains in every group; a row that would
   overflow a group starts again as a new request. */
static void plan_growth(bench *b, step_model *m, uint32_t r) {
  uint32_t row = (uint32_t)m->rows[r];
  bool full = false;
  for (uint32_t g = 0; g < m->shape->num_groups; ++g)
    full |= clbt_table_row_length(clbt_multi_table_group(m->table, g), row) ==
            m->shape->max_blocks[g];
  if (full) {
    plan_request(b, m, r, row);
    return;
  }
  step_update *u = &m->appended[m->num_appended++];
  u->row = row;
  for (uint32_t g = 0; g < m->shape->num_groups; ++g) {
    u->counts[g] = 1;
    u->ids[g] = take_ids(m, 1);
  }
  m->changed_ids += m->shape->num_groups;
}

/* Plans request r's leaving (its row cleared) and a new request in its
   batch position: in the v1 model in its row, in the persistent model in
   the oldest free slot, which the idx_mapping names from this step on (the
   slot just freed only when every slot is in use, as with 1024 requests). */
static void plan_replacement(bench *b, step_model *m, uint32_t r) {
  uint32_t left = (uint32_t)m->rows[r], row = left;
  m->cleared[m->num_cleared++] = left;
  if (m->persistent) { /* the slot joins the ring; the oldest leaves it */
    m->free_slots[(m->first_free + m->num_free) % STEP_MAX_REQS] = left;
    row = m->free_slots[m->first_free];
    m->first_free = (m->first_free + 1) % STEP_MAX_REQS;
  }
  plan_request(b, m, r, row);
}

uint32_t step_send_batch(step_model *m) {
  bench_check_cl(clEnqueueWriteBuffer(m->queue, m->positions_buffer, CL_FALSE,
                                      0, m->shape->requests * sizeof(int64_t),
                                      m->positions, 0, NULL, NULL),
                 "positions");
  if (!m->persistent) return 1;
  bench_check_cl(clEnqueueWriteBuffer(m->queue, m->idx_mapping, CL_FALSE, 0,
                                      m->shape->requests * sizeof(int32_t),
                                      m->rows, 0, NULL, NULL),
                 "idx_mapping");
  return 2;
}

/* The growing requests are r = steps mod 16 (every 16th); the leaving ones
   half a period later, r = steps + 8 mod leaves_one_in, which no growing
   request is. */
void step_plan(bench *b, step_model *m, const step_kind *kind) {
  uint32_t requests = m->shape->requests;
  m->num_cleared = m->num_added = m->num_appended = 0;
  m->changed_ids = 0;
  for (uint32_t r = (uint32_t)(m->steps % STEP_GROWS_ONE_IN); r < requests;
       r += STEP_GROWS_ONE_IN)
    plan_growth(b, m, r);
  if (kind->leaves_one_in)
    for (uint32_t r = (uint32_t)((m->steps + STEP_GROWS_ONE_IN / 2) %
                                 kind->leaves_one_in);
         r < requests; r += kind->leaves_one_in)
      plan_replacement(b, m, r);
  ++m->steps;
  m->batch_writes = m->num_added ? step_send_batch(m) : 0;
  bench_check_cl(clFinish(m->queue), "clFinish");
}

void step_apply(step_model *m, double *marks) {
  for (uint32_t i = 0; i < m->num_cleared; ++i)
    bench_check(clbt_multi_table_clear_row(m->table, m->cleared[i]),
                "clbt_multi_table_clear_row");
  if (marks) marks[0] = bench_now_us();
  for (uint32_t i = 0; i < m->num_added; ++i)
    bench_check(clbt_multi_table_add_row(m->table, m->added[i].row,
                                         m->added[i].ids, m->added[i].counts),
                "clbt_multi_table_add_row");
  if (marks) marks[1] = bench_now_us();
  for (uint32_t i = 0; i < m->num_appended; ++i)
    bench_check(clbt_multi_table_append_row(m->table, m->appended[i].row,
                                            m->appended[i].ids,
                                            m->appended[i].counts),
                "clbt_multi_table_append_row");
  if (marks) marks[2] = bench_now_us();
}

void step_enqueue(step_model *m, cl_event *event) {
  bench_check(clbt_multi_table_enqueue_step(m->table, &m->step, 0, NULL, event),
              "clbt_multi_table_enqueue_step");
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

/* The table of the case's groups, sized as seed_step.py's. */
static clbt_multi_table *create_table(clbt_device *device,
                                      const step_case *shape,
                                      uint32_t zero_tails) {
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
  clbt_multi_table *table = NULL;
  bench_check(clbt_multi_table_create(device, &config, &table),
              "clbt_multi_table_create");
  return table;
}

/* A device buffer of bytes for the batch, written by the plan. */
static cl_mem batch_buffer(const bench *b, size_t bytes) {
  cl_int error = CL_SUCCESS;
  cl_mem buffer =
      clCreateBuffer(b->context, CL_MEM_READ_ONLY, bytes, NULL, &error);
  bench_check_cl(error, "clCreateBuffer");
  return buffer;
}

step_model *step_model_create(bench *b, clbt_device *device,
                              const step_case *shape,
                              const step_variant *variant,
                              uint32_t zero_tails) {
  uint32_t requests = shape->requests;
  step_model *m = calloc(1, sizeof *m);
  if (!m) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  m->shape = shape;
  m->persistent = variant->persistent;
  m->table = create_table(device, shape, zero_tails);
  m->queue = clbt_device_queue(device);
  m->rows = bench_allocate(requests * sizeof *m->rows);
  m->positions = bench_allocate(requests * sizeof *m->positions);
  m->free_slots = bench_allocate(STEP_MAX_REQS * sizeof *m->free_slots);
  m->cleared = bench_allocate(requests * sizeof *m->cleared);
  m->added = bench_allocate(requests * sizeof *m->added);
  m->appended = bench_allocate(requests * sizeof *m->appended);
  m->pool = bench_allocate(STEP_POOL_IDS * sizeof *m->pool);
  for (size_t i = 0; i < STEP_POOL_IDS; ++i)
    m->pool[i] = (int32_t)(1 + bench_random(b) % ((1u << 20) - 1));

  if (m->persistent)
    shuffle(b, m->free_slots, STEP_MAX_REQS);
  else
    for (uint32_t i = 0; i < STEP_MAX_REQS; ++i) m->free_slots[i] = i;
  for (uint32_t r = 0; r < requests; ++r)
    plan_request(b, m, r, m->free_slots[r]);
  step_apply(m, NULL);
  m->num_added = 0;
  /* the ring of free slots: those no request holds */
  m->num_free = STEP_MAX_REQS - requests;
  m->first_free = requests % STEP_MAX_REQS;

  int32_t *starts = bench_allocate((requests + 1) * sizeof *starts);
  for (uint32_t r = 0; r <= requests; ++r) starts[r] = (int32_t)r;
  m->query_start_loc = bench_upload(b, starts, (requests + 1) * sizeof *starts);
  free(starts);
  m->positions_buffer = batch_buffer(b, requests * sizeof(int64_t));
  if (m->persistent)
    m->idx_mapping = batch_buffer(b, requests * sizeof(int32_t));
  step_send_batch(m);

  m->step = (clbt_step)CLBT_STEP_INIT;
  m->step.num_reqs = m->step.num_tokens = requests;
  m->step.query_start_loc = m->query_start_loc;
  m->step.positions = m->positions_buffer;
  m->step.flags = variant->flags;
  m->step.export_flags = variant->export_flags;
  m->step.dense_row_pitch = variant->pitch;
  if (m->persistent) m->step.idx_mapping = m->idx_mapping;
  bench_check(clbt_multi_table_commit(m->table, STEP_MAX_REQS),
              "clbt_multi_table_commit");
  step_enqueue(m, NULL);
  bench_check_cl(clFinish(m->queue), "clFinish");
  /* A second step reaps the first commit's staging slots, whose writes
     have ended now: the steps that follow are a steady loop's. */
  step_enqueue(m, NULL);
  bench_check_cl(clFinish(m->queue), "clFinish");
  return m;
}

void step_model_destroy(step_model *m) {
  if (!m) return;
  clbt_multi_table_destroy(m->table);
  clReleaseMemObject(m->query_start_loc);
  clReleaseMemObject(m->positions_buffer);
  if (m->idx_mapping) clReleaseMemObject(m->idx_mapping);
  if (m->other_idx_mapping) clReleaseMemObject(m->other_idx_mapping);
  free(m->rows);
  free(m->positions);
  free(m->free_slots);
  free(m->cleared);
  free(m->added);
  free(m->appended);
  free(m->pool);
  free(m);
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
  int32_t *data = bench_allocate(count * sizeof *data);
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
void step_check(const step_model *m) {
  int64_t *slots = bench_allocate(STEP_MAX_TOKENS * sizeof *slots);
  for (uint32_t g = 0; g < m->shape->num_groups; ++g) {
    const clbt_table *group = clbt_multi_table_group(m->table, g);
    const int32_t *host = clbt_table_host_data(group);
    uint32_t width = clbt_table_width(group), size = m->shape->block_sizes[g];
    size_t gathered_bytes =
        (size_t)m->shape->requests * width * sizeof(int32_t);
    int32_t *gathered = m->persistent ? bench_allocate(gathered_bytes) : NULL;
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

