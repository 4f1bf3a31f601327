/*
 * The slots section of `clbt bench` (issue 21 items 6 and 7): what a
 * hybrid model's state slots add to a steady decode step (a token group
 * and three Mamba groups of 256 requests, two ids a request, against the
 * same step without them), and what the token slots of a sparse-attention
 * layer cost (DeepSeek's indexer: 2048 top-k tokens for each decode token
 * of 128 requests, 64-token pages), against an empty kernel's call and
 * against the same translation on the host from the host rows.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness.h"

enum {
  STATE_REQUESTS = 256, STATE_GROUPS = 4, STATE_IDS = 2,
  SPARSE_REQUESTS = 128, SPARSE_TOP_K = 2048, SPARSE_PAGE = 64
};

/* ---- state slots ---------------------------------------------------------- */

/* A token group of 16-token blocks and three Mamba groups (blocks of 2048
   tokens, vLLM's align mode, and one speculative block), every row full;
   the same rows for the same seed. */
static clbt_multi_table *hybrid_table(bench *b, clbt_device *device,
                                      uint64_t seed) {
  clbt_group_config groups[STATE_GROUPS] = {
      {.block_size = 16, .max_num_blocks = BENCH_MAX_MODEL_LEN / 16}};
  for (uint32_t g = 1; g < STATE_GROUPS; ++g)
    groups[g] = (clbt_group_config){
        .block_size = 2048, .max_num_blocks = BENCH_MAX_MODEL_LEN / 2048 + 1,
        .slot_mode = CLBT_SLOT_MODE_NONE};
  clbt_multi_table_config config = {
      .max_num_reqs = STATE_REQUESTS, .max_num_batched_tokens = 2048,
      .num_groups = STATE_GROUPS, .groups = groups};
  clbt_multi_table *table = NULL;
  bench_check(clbt_multi_table_create(device, &config, &table),
              "multi_table create");
  b->rng = seed;
  int32_t *ids = malloc(STATE_GROUPS * groups[0].max_num_blocks * sizeof *ids);
  if (!ids) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  const int32_t *lists[STATE_GROUPS];
  size_t counts[STATE_GROUPS];
  for (uint32_t r = 0; r < STATE_REQUESTS; ++r) {
    for (uint32_t g = 0; g < STATE_GROUPS; ++g) {
      int32_t *list = ids + g * groups[0].max_num_blocks;
      counts[g] = groups[g].max_num_blocks;
      lists[g] = list;
      for (size_t i = 0; i < counts[g]; ++i)
        list[i] = (int32_t)(bench_random(b) % 100000);
    }
    bench_check(clbt_multi_table_add_row(table, r, lists, counts), "add_row");
  }
  free(ids);
  bench_check(clbt_multi_table_commit(table, STATE_REQUESTS), "commit");
  return table;
}

typedef struct state_call {
  clbt_multi_table *table, *profiled;
  clbt_step step;
} state_call;

static void run_state_step(bench *b, void *context, cl_event *event) {
  (void)b;
  const state_call *c = context;
  bench_check(clbt_multi_table_enqueue_step(event ? c->profiled : c->table,
                                            &c->step, 0, NULL, event),
              "step");
}

/* A decode step of every request, with and without the state slots. */
static void state_case(bench *b, report *section) {
  uint64_t seed = b->rng;
  bench_batch batch = bench_make_batch(b, STATE_REQUESTS, 1);
  state_call with = {hybrid_table(b, b->device, seed), NULL, CLBT_STEP_INIT};
  with.step.num_reqs = batch.num_reqs;
  with.step.num_tokens = batch.num_tokens;
  with.step.query_start_loc = batch.query_start_loc_buffer;
  with.step.positions = batch.positions_buffer;
  with.step.flags = CLBT_STEP_GATHER | CLBT_STEP_STATE_SLOTS;
  with.step.num_state_slots = STATE_IDS;
  state_call without = with;
  without.step.flags = CLBT_STEP_GATHER;
  without.step.num_state_slots = 0; /* taken only with the flag */
  const bench_call calls[] = {
      {run_state_step, &with, BENCH_TO_COMPLETION},
      {run_state_step, &without, BENCH_TO_COMPLETION},
      {bench_run_empty, NULL, BENCH_TO_COMPLETION}};
  double us[3];
  bench_time(b, 3, calls, us);
  with.profiled = without.profiled = hybrid_table(b, b->profiled, seed);
  const bench_call device_calls[] = {{run_state_step, &with, BENCH_DEVICE},
                                     {run_state_step, &without, BENCH_DEVICE}};
  double device[2];
  bench_time(b, 2, device_calls, device);
  clbt_multi_table_destroy(with.profiled);
  clbt_multi_table_destroy(with.table);
  bench_free_batch(&batch);
  report *record = bench_record(section, "state-slots-decode-256");
  report_number(record, "step_with_us", us[0], 1);
  report_number(record, "step_without_us", us[1], 1);
  report_number(record, "empty_us", us[2], 1);
  report_number(record, "with_over_without", us[0] / us[1], 3);
  report_number(record, "device_with_us", device[0], 2);
  report_number(record, "device_without_us", device[1], 2);
}

/* ---- token slots ---------------------------------------------------------- */

typedef struct sparse {
  clbt_table *table, *profiled;
  uint32_t *lengths;               /* tokens each request holds */
  int32_t *indices;                /* [SPARSE_REQUESTS][SPARSE_TOP_K] */
  int32_t *host_slots;             /* the host translation's output */
  clbt_token_slots_request request;
} sparse;

/* 64-token pages, rows of 32 to 2048 pages, committed; the top-k tokens of
   each request drawn from what it holds. */
static clbt_table *sparse_table(bench *b, clbt_device *device, uint64_t seed,
                                uint32_t *lengths) {
  clbt_table_config config = {
      .block_size = SPARSE_PAGE, .max_num_reqs = SPARSE_REQUESTS,
      .max_num_blocks_per_req = BENCH_MAX_MODEL_LEN / SPARSE_PAGE,
      .max_num_batched_tokens = 8192};
  clbt_table *table = NULL;
  bench_check(clbt_table_create(device, &config, &table), "table create");
  b->rng = seed;
  int32_t *ids = malloc(config.max_num_blocks_per_req * sizeof *ids);
  if (!ids) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t r = 0; r < SPARSE_REQUESTS; ++r) {
    uint32_t pages = 32 + bench_random(b) % (config.max_num_blocks_per_req - 31);
    lengths[r] = pages * SPARSE_PAGE;
    for (uint32_t i = 0; i < pages; ++i)
      ids[i] = (int32_t)(bench_random(b) % 1000000);
    bench_check(clbt_table_add_row(table, r, ids, pages), "add_row");
  }
  free(ids);
  bench_check(clbt_table_commit(table, SPARSE_REQUESTS), "commit");
  return table;
}

static void run_token_slots(bench *b, void *context, cl_event *event) {
  (void)b;
  const sparse *s = context;
  bench_check(clbt_table_enqueue_token_slots(event ? s->profiled : s->table,
                                             &s->request, 0, NULL, event),
              "token slots");
}

/* The same translation on the host, from the host rows (vLLM's formula). */
static void run_host_token_slots(bench *b, void *context, cl_event *event) {
  (void)b, (void)event;
  sparse *s = context;
  const int32_t *rows = clbt_table_host_data(s->table);
  uint32_t width = clbt_table_width(s->table);
  for (uint32_t r = 0; r < SPARSE_REQUESTS; ++r)
    for (uint32_t j = 0; j < SPARSE_TOP_K; ++j) {
      int32_t t = s->indices[(size_t)r * SPARSE_TOP_K + j];
      s->host_slots[(size_t)r * SPARSE_TOP_K + j] =
          t < 0 ? -1
                : rows[(size_t)r * width + (uint32_t)t / SPARSE_PAGE] *
                          SPARSE_PAGE +
                      t % SPARSE_PAGE;
    }
}

/* Stops the bench unless the device's token slots in `out` are the
   host's. */
static void check_slots(bench *b, cl_mem out, const int32_t *host_slots,
                        size_t entries) {
  int32_t *device_slots = malloc(entries * sizeof *device_slots);
  if (!device_slots) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  bench_check_cl(clEnqueueReadBuffer(b->queue, out, CL_TRUE, 0,
                                     entries * sizeof *device_slots,
                                     device_slots, 0, NULL, NULL),
                 "read token slots");
  for (size_t e = 0; e < entries; ++e)
    if (device_slots[e] != host_slots[e]) {
      fprintf(stderr, "clbt bench: token slot %zu is %d, the host's %d\n", e,
              (int)device_slots[e], (int)host_slots[e]);
      exit(1);
    }
  free(device_slots);
}

/* Token slots of SPARSE_REQUESTS rows of SPARSE_TOP_K indices each: the
   call beside an empty kernel's, its device time and the host's own build
   of the same slots, which the device's must equal. */
static void sparse_case(bench *b, report *section) {
  uint64_t seed = b->rng;
  size_t entries = (size_t)SPARSE_REQUESTS * SPARSE_TOP_K;
  sparse s = {NULL, NULL, malloc(SPARSE_REQUESTS * sizeof(uint32_t)),
              malloc(entries * sizeof(int32_t)),
              malloc(entries * sizeof(int32_t)), CLBT_TOKEN_SLOTS_INIT};
  if (!s.lengths || !s.indices || !s.host_slots)
    bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  s.table = sparse_table(b, b->device, seed, s.lengths);
  int32_t starts[SPARSE_REQUESTS + 1];
  for (uint32_t r = 0; r <= SPARSE_REQUESTS; ++r) starts[r] = (int32_t)r;
  for (uint32_t r = 0; r < SPARSE_REQUESTS; ++r)
    for (uint32_t j = 0; j < SPARSE_TOP_K; ++j)
      s.indices[(size_t)r * SPARSE_TOP_K + j] =
          (int32_t)(bench_random(b) % s.lengths[r]);
  cl_mem qsl = bench_upload(b, starts, sizeof starts);
  cl_mem indices = bench_upload(b, s.indices, entries * sizeof(int32_t));
  cl_int error = CL_SUCCESS;
  cl_mem out = clCreateBuffer(b->context, CL_MEM_READ_WRITE,
                              entries * sizeof(int32_t), NULL, &error);
  bench_check_cl(error, "clCreateBuffer");
  s.request.num_reqs = SPARSE_REQUESTS;
  s.request.num_rows = SPARSE_REQUESTS;
  s.request.indices_per_row = SPARSE_TOP_K;
  s.request.query_start_loc = qsl;
  s.request.token_indices = indices;
  s.request.token_slots = out;
  const bench_call calls[] = {{run_token_slots, &s, BENCH_TO_COMPLETION},
                              {bench_run_empty, NULL, BENCH_TO_COMPLETION},
                              {run_host_token_slots, &s, BENCH_HOST}};
  double us[3];
  bench_time(b, 3, calls, us);
  check_slots(b, out, s.host_slots, entries);
  s.profiled = sparse_table(b, b->profiled, seed, s.lengths);
  const bench_call device_call = {run_token_slots, &s, BENCH_DEVICE};
  double device;
  bench_time(b, 1, &device_call, &device);
  clbt_table_destroy(s.profiled);
  clbt_table_destroy(s.table);
  clReleaseMemObject(qsl);
  clReleaseMemObject(indices);
  clReleaseMemObject(out);
  free(s.lengths);
  free(s.indices);
  free(s.host_slots);
  report *record = bench_record(section, "token-slots-128x2048");
  report_number(record, "call_us", us[0], 1);
  report_number(record, "empty_us", us[1], 1);
  report_number(record, "call_over_empty", us[0] / us[1], 2);
  report_number(record, "device_us", device, 2);
  report_number(record, "host_build_us", us[2], 1);
}

static void bench_slots(bench *b) {
  char caption[320];
  snprintf(caption, sizeof caption,
           "state slots: a decode step of %d requests, one token group and "
           "three Mamba groups, with and without %d state ids a request; "
           "token slots: %d top-k tokens for each of %d decode tokens, "
           "%d-token pages, against an empty kernel and the host; medians of "
           "%u runs, microseconds",
           STATE_REQUESTS, STATE_IDS, SPARSE_TOP_K, SPARSE_REQUESTS,
           SPARSE_PAGE, (unsigned)b->options.runs);
  report *section = bench_section(b, "slots", caption);
  state_case(b, section);
  sparse_case(b, section);
}

const bench_section_entry bench_slots_section = {"slots", bench_slots};
