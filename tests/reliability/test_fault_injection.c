/*
 * Every OpenCL call and every heap allocation the library makes can fail.
 * One scenario drives every public function that calls OpenCL or
 * allocates; a sweep runs it once to count the calls of a kind, then once
 * per call with that call failing. Each time the public function that made
 * the call must return an error that says what failed; the handles must
 * then be usable (the step is retried and the scenario ends with the slots
 * worked out by hand) or destroyable at once (the run is abandoned); and
 * after teardown the library must hold no OpenCL object and no heap block.
 *
 * This suite links a copy of the library whose calls are routed through
 * tests/reliability/fault_injection.c (see cmake/ClbtFaultInjection.cmake),
 * so every call site, including ones added later, is swept.
 */
#include "clbt_test.h"
#include "fault_injection.h"
#include "fault_sites.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* Rows {7, 3} and {5} of 4-token blocks; tokens at positions 1, 6 | 3, 4. */
static const clbt_table_config table_config = {
    .block_size = 4, .max_num_reqs = 2, .max_num_blocks_per_req = 2,
    .max_num_batched_tokens = 4};
static const int32_t row0[] = {7, 3}, row1[] = {5};
static const int32_t batch_query_start_loc[] = {0, 2, 4};
static const int64_t batch_positions[] = {1, 6, 3, 4};
/* 7*4+1, 3*4+2, 5*4+3; position 4 is block 1 of a one-block row: rejected */
static const int64_t expected_slots[] = {29, 14, 23, CLBT_PAD_SLOT_ID};
enum { EXPECTED_REJECTED = 1 };

/* The multi-group table: a token-mapping group like the table above (its
   width aligned to 128 tokens), and a NONE group. */
static const clbt_group_config groups[] = {
    {.block_size = 4, .max_num_blocks = 2},
    {.block_size = 8, .max_num_blocks = 2, .slot_mode = CLBT_SLOT_MODE_NONE}};
static const clbt_multi_table_config multi_config = {
    .max_num_reqs = 2, .max_num_batched_tokens = 4, .num_groups = 2,
    .groups = groups};

/* A batch in one OpenCL context, made with the test's own calls, and
   the token slots' matrix and output: one index a row (rows 0, 1 are
   request 0's, 2, 3 request 1's), slots 29 14 23 22. */
typedef struct batch {
  cl_mem query_start_loc, positions;
  cl_mem token_indices, token_slots;
} batch;
static const int32_t batch_token_indices[] = {1, 6, 3, 2};
static const int32_t expected_token_slots[] = {29, 14, 23, 22};

/* Everything a scenario has made so far, so it can end at any step. */
typedef struct scenario {
  clbt_device *device, *wrapped;
  cl_context own_context; /* what the test makes and wraps */
  cl_command_queue own_queue;
  batch device_batch, wrapped_batch;
  clbt_table *table;
  clbt_multi_table *multi;
  uint32_t rejected;
  char selector[CLBT_SELECTOR_SIZE];
  clbt_kv_cache *kv;            /* a layer's cache, written through the */
  cl_mem kv_cache, kv_input;    /* table's slot mapping */
  uint32_t kv_rejected;
} scenario;

static batch make_batch(cl_context context, cl_command_queue queue) {
  cl_int error_qsl = CL_SUCCESS, error_positions = CL_SUCCESS;
  batch b = {
      clCreateBuffer(context, CL_MEM_READ_ONLY, sizeof batch_query_start_loc,
                     NULL, &error_qsl),
      clCreateBuffer(context, CL_MEM_READ_ONLY, sizeof batch_positions, NULL,
                     &error_positions),
      NULL, NULL};
  ck_assert_int_eq(error_qsl, CL_SUCCESS);
  ck_assert_int_eq(error_positions, CL_SUCCESS);
  b.token_indices = clCreateBuffer(context, CL_MEM_READ_ONLY,
                                   sizeof batch_token_indices, NULL,
                                   &error_qsl);
  ck_assert_int_eq(error_qsl, CL_SUCCESS);
  b.token_slots = clCreateBuffer(context, CL_MEM_READ_WRITE,
                                 sizeof expected_token_slots, NULL, &error_qsl);
  ck_assert_int_eq(error_qsl, CL_SUCCESS);
  ck_assert_int_eq(clEnqueueWriteBuffer(queue, b.token_indices, CL_TRUE, 0,
                                        sizeof batch_token_indices,
                                        batch_token_indices, 0, NULL, NULL),
                   CL_SUCCESS);
  ck_assert_int_eq(clEnqueueWriteBuffer(queue, b.query_start_loc, CL_TRUE, 0,
                                        sizeof batch_query_start_loc,
                                        batch_query_start_loc, 0, NULL, NULL),
                   CL_SUCCESS);
  ck_assert_int_eq(clEnqueueWriteBuffer(queue, b.positions, CL_TRUE, 0,
                                        sizeof batch_positions,
                                        batch_positions, 0, NULL, NULL),
                   CL_SUCCESS);
  return b;
}

static void release_batch(batch *b) {
  if (b->query_start_loc) clReleaseMemObject(b->query_start_loc);
  if (b->positions) clReleaseMemObject(b->positions);
  if (b->token_indices) clReleaseMemObject(b->token_indices);
  if (b->token_slots) clReleaseMemObject(b->token_slots);
}

/* ---- the programs every device of the suite loads ------------------------ */

/*
 * Every device the suite opens reads CLBT_CACHE_DIR, which names a
 * directory of this process's: the first build of each program stores it,
 * and every later run of a sweep loads it (3 ms on PoCL) instead of
 * compiling it (40 ms; most of a sweep's time when each run compiled four
 * programs). The path from source is swept still, in scripts of their own:
 * use_binary_cache builds a program into a directory of its own, and the
 * broken build compiles.
 */
static char program_cache[] = "/tmp/clbt-fault-programs-XXXXXX";

/* The program cache's warnings: how clbt says that the cache worked around
   a failure, and the program was built from source. */
static unsigned long cache_warnings;

static void count_cache_warnings(clbt_log_level level, const char *message,
                                 void *user) {
  (void)user;
  if (level == CLBT_LOG_WARN && strstr(message, "cache")) ++cache_warnings;
  fprintf(stderr, "clbt: %s: %s\n", clbt_log_level_name(level), message);
}

/* ---- the steps: each one public call, safe to repeat after a failure ---- */

static clbt_status open_device(scenario *s) {
  clbt_status status = clbt_device_open(NULL, &s->device);
  if (status) ck_assert_ptr_null(s->device);
  else s->device_batch = make_batch(clbt_device_context(s->device),
                                    clbt_device_queue(s->device));
  return status;
}

static clbt_status wrap_device(scenario *s) {
  cl_device_id id = clbt_device_id(s->device);
  cl_int error = CL_SUCCESS;
  if (!s->own_context) {
    s->own_context = clCreateContext(NULL, 1, &id, NULL, NULL, &error);
    ck_assert_int_eq(error, CL_SUCCESS);
    s->own_queue = clCreateCommandQueue(s->own_context, id, 0, &error);
    ck_assert_int_eq(error, CL_SUCCESS);
    s->wrapped_batch = make_batch(s->own_context, s->own_queue);
  }
  clbt_status status =
      clbt_device_wrap(s->own_context, id, s->own_queue, &s->wrapped);
  if (status) ck_assert_ptr_null(s->wrapped);
  return status;
}

static clbt_status find_selector(scenario *s) {
  return clbt_device_selector(clbt_device_id(s->device), s->selector,
                              sizeof s->selector);
}

static clbt_status prepare_table(scenario *s) {
  return clbt_table_prepare(s->device, &table_config);
}

static clbt_status create_table(scenario *s) {
  clbt_status status = clbt_table_create(s->device, &table_config, &s->table);
  if (status) ck_assert_ptr_null(s->table);
  return status;
}

/*
 * Lets the device finish what is queued. A commit first frees the staging
 * packets whose uploads have ended, and only then allocates, so how many
 * calls it makes depends on the device's progress; a sweep needs the same
 * calls in every run, so each commit step starts with the queues drained.
 * These are the test's own calls, which are neither counted nor failed.
 */
static void settle(const scenario *s) {
  if (s->device) ck_assert_int_eq(clFinish(clbt_device_queue(s->device)),
                                  CL_SUCCESS);
  if (s->own_queue) ck_assert_int_eq(clFinish(s->own_queue), CL_SUCCESS);
}

static clbt_status commit_table(scenario *s) {
  clbt_assert_ok(clbt_table_add_row(s->table, 0, row0, 2));
  clbt_assert_ok(clbt_table_add_row(s->table, 1, row1, 1));
  settle(s);
  return clbt_table_commit(s->table, 2);
}

/* An event clbt handed over: the test's own release is not tracked. */
static void release_event(cl_event event) {
  ck_assert_int_eq(clReleaseEvent(event), CL_SUCCESS);
  clbt_fault_object_released(event);
}

/*
 * Three scatter commits, so that the later ones reuse the staging packets
 * of the earlier ones, then one with nothing to move, which hands back a
 * marker. Row 1 ends holding row1 again, as commit_table left it.
 */
static clbt_status commit_with_events(scenario *s) {
  static const int32_t *const rows[] = {row1, row0, row1};
  static const size_t counts[] = {1, 2, 1};
  clbt_assert_ok(clbt_table_set_commit_mode(s->table, CLBT_COMMIT_SCATTER));
  clbt_status status = CLBT_SUCCESS;
  for (int i = 0; i < 3 && !status; ++i) {
    cl_event committed = NULL;
    clbt_assert_ok(clbt_table_add_row(s->table, 1, rows[i], counts[i]));
    settle(s);
    status = clbt_table_enqueue_commit(s->table, 2, 0, NULL,
                                       i == 2 ? &committed : NULL);
    if (committed) release_event(committed);
  }
  cl_event nothing_moved = NULL;
  if (!status)
    status = clbt_table_enqueue_commit(s->table, 2, 0, NULL, &nothing_moved);
  if (nothing_moved) release_event(nothing_moved);
  /* Behind a wait list, with an event: the device watches the commit's
     command while the caller holds it too. */
  cl_int error = CL_SUCCESS;
  cl_event ready = clCreateUserEvent(clbt_device_context(s->device), &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  ck_assert_int_eq(clSetUserEventStatus(ready, CL_COMPLETE), CL_SUCCESS);
  cl_event waited = NULL;
  clbt_assert_ok(clbt_table_add_row(s->table, 1, row1, 1));
  if (!status)
    status = clbt_table_enqueue_commit(s->table, 2, 1, &ready, &waited);
  if (waited) release_event(waited);
  clReleaseEvent(ready);
  /* The watched command ends before the next step, whose first command
     then finds it ended: the calls of every run are the same. */
  settle(s);
  clbt_assert_ok(clbt_table_set_commit_mode(s->table, CLBT_COMMIT_AUTO));
  return status;
}

/*
 * A table destroyed with a commit in flight waits for it. The wait's own
 * failure cannot be returned (destroy returns nothing): it is logged, and
 * the step absorbs it.
 */
static clbt_status destroy_in_flight(scenario *s) {
  clbt_table *scratch = NULL;
  clbt_status status = clbt_table_create(s->device, &table_config, &scratch);
  if (status) ck_assert_ptr_null(scratch);
  else clbt_assert_ok(clbt_table_add_row(scratch, 0, row0, 2));
  if (!status) status = clbt_table_commit(scratch, 1);
  clbt_table_destroy(scratch);
  return status;
}

/*
 * The program cache: a program one device handle builds and stores in the
 * directory set on it, a second handle (whose programs are its own, and
 * whose directory comes from CLBT_CACHE_DIR) loads. The cache's own
 * failures are warnings, after which the program is built from source.
 */
static clbt_status use_binary_cache(scenario *s) {
  char directory[] = "/tmp/clbt-fault-cache-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(directory));
  clbt_assert_ok(clbt_device_set_cache_dir(s->device, directory));
  ck_assert_int_eq(setenv("CLBT_CACHE_DIR", directory, 1), 0);
  clbt_table_config config = table_config;
  config.block_size = 8; /* a program no earlier step built */
  clbt_device *second = NULL;
  clbt_status status = clbt_table_prepare(s->device, &config);
  if (!status) status = clbt_device_open(NULL, &second);
  if (!status) status = clbt_table_prepare(second, &config);
  clbt_device_release(second);
  ck_assert_int_eq(setenv("CLBT_CACHE_DIR", program_cache, 1), 0);
  clbt_assert_ok(clbt_device_set_cache_dir(s->device, program_cache));
  clbt_test_remove_tree(directory);
  return status;
}

static clbt_status map_table(scenario *s) {
  return clbt_table_compute_slot_mapping(s->table, 2,
                                         s->device_batch.query_start_loc,
                                         s->device_batch.positions, 4);
}

static clbt_status read_rejected(scenario *s) {
  return clbt_table_read_rejected_tokens(s->table, &s->rejected);
}

static clbt_status reset_rejected(scenario *s) {
  return clbt_table_reset_rejected_tokens(s->table);
}

static clbt_status clear_table(scenario *s) {
  return clbt_table_clear(s->table);
}

static clbt_status prepare_multi(scenario *s) {
  return clbt_multi_table_prepare(s->wrapped, &multi_config);
}

static clbt_status create_multi(scenario *s) {
  clbt_status status =
      clbt_multi_table_create(s->wrapped, &multi_config, &s->multi);
  if (status) ck_assert_ptr_null(s->multi);
  return status;
}

static clbt_status commit_multi(scenario *s) {
  const int32_t *const ids[2][2] = {{row0, row0}, {row1, row1}};
  const size_t counts[2][2] = {{2, 2}, {1, 1}};
  for (uint32_t r = 0; r < 2; ++r)
    clbt_assert_ok(clbt_multi_table_add_row(s->multi, r, ids[r], counts[r]));
  settle(s);
  return clbt_multi_table_commit(s->multi, 2);
}

static clbt_status map_multi(scenario *s) {
  return clbt_multi_table_compute_slot_mapping(
      s->multi, 2, s->wrapped_batch.query_start_loc,
      s->wrapped_batch.positions, 4);
}

/*
 * The batch's pages: request 0 (length 7) reads pages 7 and 3, 3 tokens in
 * the last; request 1 (length 5) needs two pages of its one-block row and
 * is rejected: no pages, last page 0. Counted before the counter's reset.
 */
static clbt_export_request export_request(const batch *b) {
  return (clbt_export_request){.num_reqs = 2,
                               .query_start_loc = b->query_start_loc,
                               .positions = b->positions, .num_tokens = 4};
}

static clbt_status export_table(scenario *s) {
  clbt_export_request request = export_request(&s->device_batch);
  return clbt_table_enqueue_export(s->table, &request, 0, NULL, NULL);
}

static clbt_status export_multi(scenario *s) {
  clbt_export_request request = export_request(&s->wrapped_batch);
  return clbt_multi_table_enqueue_export(s->multi, &request, 0, NULL, NULL);
}

/* The batch's four rows of one token each, translated into slots. */
static clbt_token_slots_request token_request(const batch *b) {
  clbt_token_slots_request request = CLBT_TOKEN_SLOTS_INIT;
  request.num_reqs = 2;
  request.num_rows = 4;
  request.indices_per_row = 1;
  request.query_start_loc = b->query_start_loc;
  request.token_indices = b->token_indices;
  request.token_slots = b->token_slots;
  return request;
}

static clbt_status token_slots_table(scenario *s) {
  clbt_token_slots_request request = token_request(&s->device_batch);
  return clbt_table_enqueue_token_slots(s->table, &request, 0, NULL, NULL);
}

static clbt_status token_slots_multi(scenario *s) {
  clbt_token_slots_request request = token_request(&s->wrapped_batch);
  return clbt_multi_table_enqueue_token_slots(s->multi, &request, 0, NULL,
                                              NULL);
}

/*
 * A step of the multi-group table with its NONE group's state slots:
 * request 0 (length 7) holds its state in block 0 of its row {7, 3},
 * request 1 (length 5) in block 0 of {5}; the token group's slots are the
 * slot mapping's.
 */
static clbt_status step_multi_states(scenario *s) {
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_STATE_SLOTS;
  step.num_reqs = 2;
  step.num_tokens = 4;
  step.query_start_loc = s->wrapped_batch.query_start_loc;
  step.positions = s->wrapped_batch.positions;
  return clbt_multi_table_enqueue_step(s->multi, &step, 0, NULL, NULL);
}

static clbt_status clear_multi(scenario *s) {
  return clbt_multi_table_clear(s->multi);
}

/*
 * A layer's KV cache: fp32, 8 blocks of 4 slots of one head of 4, K and V
 * of a block side by side in one buffer (32 floats a block), and 4 tokens
 * of input, token t's element e holding t x 4 + e + 1, as K and V both.
 */
enum { KV_BLOCKS = 8, KV_BLOCK_FLOATS = 2 * 4 * 4 };

static clbt_status create_kv_cache(scenario *s) {
  cl_context context = clbt_device_context(s->device);
  cl_int error = CL_SUCCESS;
  if (!s->kv_cache) {
    float input[4 * 4];
    for (int i = 0; i < 16; ++i) input[i] = (float)(i + 1);
    s->kv_cache = clCreateBuffer(context, CL_MEM_READ_WRITE,
                                 KV_BLOCKS * KV_BLOCK_FLOATS * sizeof(float),
                                 NULL, &error);
    ck_assert_int_eq(error, CL_SUCCESS);
    s->kv_input = clCreateBuffer(context, CL_MEM_READ_ONLY, sizeof input,
                                 NULL, &error);
    ck_assert_int_eq(error, CL_SUCCESS);
    ck_assert_int_eq(clEnqueueWriteBuffer(clbt_device_queue(s->device),
                                          s->kv_input, CL_TRUE, 0,
                                          sizeof input, input, 0, NULL, NULL),
                     CL_SUCCESS);
  }
  clbt_kv_cache_config config = CLBT_KV_CACHE_CONFIG_INIT;
  config.cache_dtype = CLBT_KV_FLOAT32;
  config.num_kv_heads = 1;
  config.head_size = 4;
  config.block_size = 4;
  config.num_blocks = KV_BLOCKS;
  config.key_cache = s->kv_cache;
  return clbt_kv_cache_create(s->device, &config, &s->kv);
}

/* The table's slot mapping (29, 14, 23, -1) from map_table. */
static clbt_status write_kv(scenario *s) {
  clbt_kv_write write = CLBT_KV_WRITE_INIT;
  write.num_tokens = 4;
  write.key = write.value = s->kv_input;
  write.slot_mapping = clbt_table_slot_mapping(s->table);
  return clbt_kv_cache_enqueue_write(s->kv, &write, 0, NULL, NULL);
}

static clbt_status read_kv_rejected(scenario *s) {
  return clbt_kv_cache_read_rejected_tokens(s->kv, &s->kv_rejected);
}

static clbt_status reset_kv_rejected(scenario *s) {
  return clbt_kv_cache_reset_rejected_tokens(s->kv);
}

/* Builds with options the compiler rejects, so the build log is read. */
static clbt_status prepare_broken_build(scenario *s) {
  clbt_assert_ok(clbt_device_set_build_options(
      s->device, "-Werror -DTEST_TWICE=1 -DTEST_TWICE=2"));
  clbt_status status = clbt_table_prepare(s->device, &table_config);
  clbt_assert_ok(clbt_device_set_build_options(s->device, NULL));
  return status;
}

/*
 * One public call, and what it returns when nothing is failed. A step may
 * also succeed when a call fails if the program cache warned that it
 * worked around the failure (it builds from source then); a step
 * that absorbs failures succeeds regardless.
 */
typedef struct scenario_step {
  const char *name;
  clbt_status (*run)(scenario *s);
  clbt_status expected;
  bool absorbs_failures;
} scenario_step;

/* Steps in order, and the outcome a run through all of them must have. */
typedef struct scenario_script {
  const scenario_step *steps;
  size_t count;
  void (*check_outcome)(const scenario *s);
} scenario_script;

static void check_outcome(const scenario *s);

/* Every public function that calls OpenCL or allocates, on success paths. */
static const scenario_step everything_steps[] = {
    {"clbt_device_open", open_device, CLBT_SUCCESS, false},
    {"clbt_device_wrap", wrap_device, CLBT_SUCCESS, false},
    {"clbt_device_selector", find_selector, CLBT_SUCCESS, false},
    {"clbt_table_prepare", prepare_table, CLBT_SUCCESS, false},
    {"clbt_table_create", create_table, CLBT_SUCCESS, false},
    {"clbt_table_commit", commit_table, CLBT_SUCCESS, false},
    {"clbt_table_enqueue_commit", commit_with_events, CLBT_SUCCESS, false},
    {"clbt_table_destroy", destroy_in_flight, CLBT_SUCCESS, true},
    {"clbt_table_compute_slot_mapping", map_table, CLBT_SUCCESS, false},
    {"clbt_table_read_rejected_tokens", read_rejected, CLBT_SUCCESS, false},
    {"clbt_kv_cache_create", create_kv_cache, CLBT_SUCCESS, false},
    {"clbt_kv_cache_enqueue_write", write_kv, CLBT_SUCCESS, false},
    {"clbt_kv_cache_read_rejected_tokens", read_kv_rejected, CLBT_SUCCESS,
     false},
    {"clbt_kv_cache_reset_rejected_tokens", reset_kv_rejected, CLBT_SUCCESS,
     false},
    {"clbt_table_enqueue_export", export_table, CLBT_SUCCESS, false},
    {"clbt_table_enqueue_token_slots", token_slots_table, CLBT_SUCCESS,
     false},
    {"clbt_table_reset_rejected_tokens", reset_rejected, CLBT_SUCCESS, false},
    {"clbt_table_clear", clear_table, CLBT_SUCCESS, false},
    {"clbt_multi_table_prepare", prepare_multi, CLBT_SUCCESS, false},
    {"clbt_multi_table_create", create_multi, CLBT_SUCCESS, false},
    {"clbt_multi_table_commit", commit_multi, CLBT_SUCCESS, false},
    {"clbt_multi_table_compute_slot_mapping", map_multi, CLBT_SUCCESS, false},
    {"clbt_multi_table_enqueue_step", step_multi_states, CLBT_SUCCESS, false},
    {"clbt_multi_table_enqueue_token_slots", token_slots_multi, CLBT_SUCCESS,
     false},
    {"clbt_multi_table_enqueue_export", export_multi, CLBT_SUCCESS, false},
    {"clbt_multi_table_clear", clear_multi, CLBT_SUCCESS, false},
};

/* The path from source: a program built, stored and loaded by a second
   handle. A script of its own, so that the runs failing the other
   scripts' calls compile nothing. */
static const scenario_step program_cache_steps[] = {
    {"clbt_device_open", open_device, CLBT_SUCCESS, false},
    {"program cache", use_binary_cache, CLBT_SUCCESS, false},
};

/* The path of a failed build, which reads the build log. */
static const scenario_step broken_build_steps[] = {
    {"clbt_device_open", open_device, CLBT_SUCCESS, false},
    {"clbt_table_prepare", prepare_broken_build,
     CLBT_CL_BUILD_PROGRAM_FAILURE, false},
};

#define SCRIPT(steps, check) {steps, sizeof steps / sizeof steps[0], check}
static const scenario_script scripts[] = {
    SCRIPT(everything_steps, check_outcome),
    SCRIPT(program_cache_steps, NULL),
    SCRIPT(broken_build_steps, NULL),
};

/* ---- checks ------------------------------------------------------------- */

static void read_buffer(cl_command_queue queue, cl_mem buffer, size_t bytes,
                        void *out) {
  ck_assert_int_eq(clEnqueueReadBuffer(queue, buffer, CL_TRUE, 0, bytes, out,
                                       0, NULL, NULL),
                   CL_SUCCESS);
}

static void check_slots(cl_command_queue queue, const clbt_table *table,
                        const char *which) {
  int64_t slots[4];
  read_buffer(queue, clbt_table_slot_mapping(table), sizeof slots, slots);
  for (int t = 0; t < 4; ++t)
    ck_assert_msg(slots[t] == expected_slots[t],
                  "%s: slot[%d] is %lld, expected %lld", which, t,
                  (long long)slots[t], (long long)expected_slots[t]);
}

/* A completed scenario computed the right slots and cleared the rows. */
static void check_export(cl_command_queue queue, const clbt_table *table) {
  clbt_export_buffers buffers;
  int32_t indptr[3], indices[2], last_page_len[2];
  clbt_assert_ok(clbt_table_export_buffers(table, &buffers));
  read_buffer(queue, buffers.paged_kv_indptr, sizeof indptr, indptr);
  read_buffer(queue, buffers.paged_kv_indices, sizeof indices, indices);
  read_buffer(queue, buffers.paged_kv_last_page_len, sizeof last_page_len,
              last_page_len);
  ck_assert_int_eq(indptr[0], 0);
  ck_assert_int_eq(indptr[1], 2);
  ck_assert_int_eq(indptr[2], 2);
  ck_assert_int_eq(indices[0], 7);
  ck_assert_int_eq(indices[1], 3);
  ck_assert_int_eq(last_page_len[0], 3);
  ck_assert_int_eq(last_page_len[1], 0);
}

/* The token slots of the batch's matrix, and the NONE group's states. */
static void check_token_slots(cl_command_queue queue, const batch *b) {
  int32_t slots[4];
  read_buffer(queue, b->token_slots, sizeof slots, slots);
  for (int i = 0; i < 4; ++i)
    ck_assert_int_eq(slots[i], expected_token_slots[i]);
}

static void check_outcome(const scenario *s) {
  cl_command_queue queue = clbt_device_queue(s->device);
  check_token_slots(queue, &s->device_batch);
  check_token_slots(s->own_queue, &s->wrapped_batch);
  int32_t states[2];
  read_buffer(s->own_queue,
              clbt_table_state_slots(clbt_multi_table_group(s->multi, 1)),
              sizeof states, states);
  ck_assert_int_eq(states[0], 7);
  ck_assert_int_eq(states[1], 5);
  check_export(queue, s->table);
  check_export(s->own_queue, clbt_multi_table_group(s->multi, 0));
  check_slots(queue, s->table, "table");
  check_slots(s->own_queue, clbt_multi_table_group(s->multi, 0), "groups[0]");
  ck_assert_uint_eq(s->rejected, EXPECTED_REJECTED);
  uint32_t counter = 1;
  read_buffer(queue, clbt_table_rejected_tokens(s->table), sizeof counter,
              &counter);
  ck_assert_uint_eq(counter, 0); /* reset */
  int32_t rows[2 * 2];
  read_buffer(queue, clbt_table_device_data(s->table), sizeof rows, rows);
  for (int i = 0; i < 4; ++i) ck_assert_int_eq(rows[i], 0); /* cleared */
  /* Tokens 0, 1, 2 in slots 29, 14, 23 (block b's K at 32 b, V 16 on),
     token 3 skipped: nothing rejected. */
  float kv[KV_BLOCKS * KV_BLOCK_FLOATS];
  read_buffer(queue, s->kv_cache, sizeof kv, kv);
  for (int t = 0; t < 3; ++t)
    for (int e = 0; e < 4; ++e) {
      int64_t slot = expected_slots[t];
      size_t at = (size_t)(slot / 4 * KV_BLOCK_FLOATS + slot % 4 * 4 + e);
      ck_assert(kv[at] == (float)(t * 4 + e + 1) &&
                kv[at + 16] == (float)(t * 4 + e + 1));
    }
  ck_assert_uint_eq(s->kv_rejected, 0);
}

/*
 * A platform that cannot list its devices is taken to have none, so that
 * one broken driver does not hide the others; on a one-device machine that
 * leaves no device to match.
 */
static bool taken_as_no_device(const char *failed, clbt_status status) {
  return strcmp(failed, "clGetDeviceIDs") == 0 &&
         status == CLBT_NO_MATCHING_DEVICE;
}

/*
 * A failed call shows in the step's result: an error that names the
 * OpenCL function and the code it returned, or the allocation. A step that
 * fails anyway (a broken build) may keep its own status: reading the build
 * log is best effort.
 */
static void check_failure(const scenario_step *step, clbt_fault_kind kind,
                          clbt_status status, unsigned long call,
                          bool cache_warned) {
  const char *failed = clbt_fault_failed_function();
  const char *message = clbt_last_error();
  clbt_status expected = kind == CLBT_FAULT_OPENCL
                             ? (clbt_status)CLBT_FAULT_INJECTED_ERROR
                             : CLBT_CL_OUT_OF_HOST_MEMORY;
  const char *words = kind == CLBT_FAULT_OPENCL ? failed : "no memory";
  if (taken_as_no_device(failed, status) ||
      (step->expected != CLBT_SUCCESS && status == step->expected) ||
      ((step->absorbs_failures || cache_warned) && status == CLBT_SUCCESS))
    return;
  ck_assert_msg(status == expected && strstr(message, words),
                "%s with call %lu (%s) failing returned %s, '%s'; expected "
                "%s naming '%s'",
                step->name, call, failed, clbt_status_name(status), message,
                clbt_status_name(expected), words);
}

/* A step that ran with nothing failing returned what it should. */
static void check_result(const scenario_step *step, clbt_status status) {
  ck_assert_msg(status == step->expected, "%s returned %s, expected %s: %s",
                step->name, clbt_status_name(status),
                clbt_status_name(step->expected), clbt_last_error());
}

static void teardown(scenario *s) {
  clbt_kv_cache_destroy(s->kv);
  if (s->kv_cache) clReleaseMemObject(s->kv_cache);
  if (s->kv_input) clReleaseMemObject(s->kv_input);
  clbt_table_destroy(s->table);
  clbt_multi_table_destroy(s->multi);
  clbt_device_release(s->wrapped);
  clbt_device_release(s->device);
  release_batch(&s->device_batch);
  release_batch(&s->wrapped_batch);
  if (s->own_queue) clReleaseCommandQueue(s->own_queue);
  if (s->own_context) clReleaseContext(s->own_context);
}

/*
 * Runs a script with the call-th call of kind failing (0: none). After the
 * failure, retry goes on with the step repeated; otherwise the script ends
 * there. Returns the calls of kind the run made.
 */
static unsigned long run_script(const scenario_script *script,
                                clbt_fault_kind kind, unsigned long call,
                                bool retry) {
  scenario s = {0};
  bool completed = true;
  clbt_fault_start(kind, call);
  for (size_t i = 0; i < script->count && completed; ++i) {
    const scenario_step *step = &script->steps[i];
    bool fired_before = clbt_fault_failed_function() != NULL;
    unsigned long warned_before = cache_warnings;
    clbt_status status = step->run(&s);
    if (fired_before || clbt_fault_failed_function() == NULL) {
      check_result(step, status);
      continue;
    }
    check_failure(step, kind, status, call, cache_warnings > warned_before);
    clbt_fault_disarm();
    completed = retry;
    /* A step that worked around the failure is done already. */
    if (retry && status != CLBT_SUCCESS) check_result(step, step->run(&s));
  }
  if (completed && script->check_outcome) script->check_outcome(&s);
  unsigned long calls = clbt_fault_calls(kind);
  teardown(&s);
  ck_assert_msg(call == 0 || clbt_fault_failed_function() != NULL,
                "call %lu of %lu never came", call, calls);
  char run_name[128] = "no call failing";
  if (call)
    snprintf(run_name, sizeof run_name, "call %lu (%s) failing, %s", call,
             clbt_fault_failed_function(), retry ? "retried" : "abandoned");
  ck_assert_msg(clbt_fault_live_objects() == 0 &&
                    clbt_fault_live_allocations() == 0 &&
                    clbt_fault_imbalances() == 0,
                "%s: %zu OpenCL objects and %zu heap blocks leaked, %zu "
                "released twice",
                run_name, clbt_fault_live_objects(),
                clbt_fault_live_allocations(), clbt_fault_imbalances());
  return calls;
}

/*
 * Every function of kind that the library calls was failed somewhere: a
 * function that only a public call outside the scripts reaches would show
 * here, by name.
 */
static void check_every_function_failed(clbt_fault_kind kind,
                                        const char *const *functions,
                                        size_t count) {
  char missing[1024] = "";
  for (size_t i = 0; i < count; ++i)
    if (!clbt_fault_function_failed(kind, functions[i]))
      snprintf(missing + strlen(missing), sizeof missing - strlen(missing),
               " %s", functions[i]);
  ck_assert_msg(missing[0] == '\0',
                "never failed, because no step calls them:%s", missing);
}

/*
 * Fails each call of kind in turn, in every script, retrying and
 * abandoning; checks that every function was failed and prints the figures.
 */
static void sweep(clbt_fault_kind kind, const char *what,
                  const char *const *functions, size_t function_count,
                  size_t sites) {
  unsigned long failed = 0;
  for (size_t i = 0; i < sizeof scripts / sizeof scripts[0]; ++i) {
    /* The first run stores the programs that every later run loads. */
    run_script(&scripts[i], kind, 0, true);
    unsigned long calls = run_script(&scripts[i], kind, 0, true);
    ck_assert_uint_gt(calls, 0);
    for (unsigned long call = 1; call <= calls; ++call) {
      run_script(&scripts[i], kind, call, true);
      run_script(&scripts[i], kind, call, false);
    }
    failed += calls;
  }
  check_every_function_failed(kind, functions, function_count);
  printf("fault injection: %lu %s calls failed one at a time, each retried "
         "and abandoned (%lu runs): all %zu functions and %zu of the "
         "library's %zu call sites failed and survived; nothing leaked\n",
         failed, what, 2 * failed, function_count,
         clbt_fault_sites_failed(kind), sites);
}

/* ---- carrying on after a failure --------------------------------------- */

/*
 * The sweep above retries a failed step, which would hide a failure that
 * leaves host and device apart. Here each call of a scenario fails once
 * and the scenario carries on regardless; at the end, with nothing failing,
 * one commit of every row must bring each table's device copy to its host
 * rows and lengths: whatever a failed call did on the device, the next
 * successful commit repairs.
 */
enum { CARRY_ROWS = 4 };

static const clbt_table_config carry_config = {
    .block_size = 4, .max_num_reqs = CARRY_ROWS, .max_num_blocks_per_req = 4,
    .max_num_batched_tokens = 4};
static const clbt_group_config carry_groups[] = {
    {.block_size = 4, .max_num_blocks = 4},
    {.block_size = 8, .max_num_blocks = 2, .kernel_block_size = 4}};
static const clbt_multi_table_config carry_multi_config = {
    .max_num_reqs = CARRY_ROWS, .max_num_batched_tokens = 4, .num_groups = 2,
    .groups = carry_groups};

typedef struct carry_on {
  scenario s;
  clbt_fault_kind kind;
  clbt_commit_mode mode;
  bool fired; /* the armed call has failed */
} carry_on;

/* A call's status: success, or the failure just injected into it. */
static void check_carried(carry_on *c, const char *what, clbt_status status) {
  bool fired_now = !c->fired && clbt_fault_failed_function() != NULL;
  c->fired = c->fired || fired_now;
  clbt_status injected = c->kind == CLBT_FAULT_OPENCL
                             ? (clbt_status)CLBT_FAULT_INJECTED_ERROR
                             : CLBT_CL_OUT_OF_HOST_MEMORY;
  ck_assert_msg(status == (fired_now ? injected : CLBT_SUCCESS),
                "%s returned %s (%s), %s", what, clbt_status_name(status),
                clbt_last_error(),
                fired_now ? "as a call failed in it" : "with nothing failing");
}

#define CARRY(c, call) check_carried((c), #call, (call))

/* A commit step, on drained queues (see settle). */
#define CARRY_COMMIT(c, call) \
  do {                        \
    settle(&(c)->s);          \
    CARRY(c, call);           \
  } while (0)

static void fill_rows(carry_on *c, int32_t base, size_t count) {
  for (uint32_t r = 0; r < CARRY_ROWS; ++r) {
    const int32_t ids[] = {base + (int32_t)r, base + 10, base + 20, base + 30};
    const int32_t *multi_ids[] = {ids, ids};
    const size_t counts[] = {count, count < 2 ? count : 2};
    CARRY(c, clbt_table_add_row(c->s.table, r, ids, count));
    CARRY(c, clbt_multi_table_add_row(c->s.multi, r, multi_ids, counts));
  }
}

/* Every kind of call that changes rows, the device copy or both. */
static void carry_on_steps(carry_on *c) {
  scenario *s = &c->s;
  cl_mem qsl = s->device_batch.query_start_loc;
  cl_mem positions = s->device_batch.positions;
  cl_event event = NULL;
  fill_rows(c, 1, 3);
  CARRY_COMMIT(c, clbt_table_commit(s->table, CARRY_ROWS));
  CARRY_COMMIT(c, clbt_multi_table_commit(s->multi, CARRY_ROWS));
  CARRY(c, clbt_table_append_row(s->table, 1, (const int32_t[]){50}, 1));
  CARRY_COMMIT(c, clbt_table_enqueue_commit(s->table, CARRY_ROWS, 0, NULL,
                                            &event));
  if (event) release_event(event);
  CARRY(c, clbt_table_swap_row(s->table, 0, 3));
  CARRY(c, clbt_multi_table_move_row(s->multi, 1, 2));
  CARRY_COMMIT(c, clbt_table_commit(s->table, 2)); /* rows 2, 3 stay pending */
  CARRY_COMMIT(c, clbt_multi_table_commit(s->multi, CARRY_ROWS));
  CARRY(c, clbt_table_compute_slot_mapping(s->table, 2, qsl, positions, 4));
  CARRY(c, clbt_multi_table_compute_slot_mapping(s->multi, 2, qsl, positions,
                                                 4));
  CARRY(c, clbt_table_clear(s->table));
  CARRY(c, clbt_multi_table_clear(s->multi));
  /* Shorter rows than before the clear, and row 3 left alone: a clear lost
     on one side shows in the columns and rows no later change touches. */
  CARRY(c, clbt_table_add_row(s->table, 0, (const int32_t[]){60}, 1));
  CARRY(c, clbt_multi_table_append_row(
               s->multi, 1, (const int32_t *const[]){(const int32_t[]){61},
                                                     (const int32_t[]){62}},
               (const size_t[]){1, 1}));
  CARRY_COMMIT(c, clbt_table_commit(s->table, CARRY_ROWS));
  CARRY_COMMIT(c, clbt_multi_table_commit(s->multi, CARRY_ROWS));
}

/* With nothing failing: one commit each, then device equals host. */
static void check_repaired(carry_on *c) {
  scenario *s = &c->s;
  cl_command_queue queue = clbt_device_queue(s->device);
  settle(s);
  clbt_assert_ok(clbt_table_commit(s->table, CARRY_ROWS));
  clbt_assert_ok(clbt_multi_table_commit(s->multi, CARRY_ROWS));
  clbt_test_assert_in_sync(queue, s->table, CARRY_ROWS);
  for (uint32_t g = 0; g < 2; ++g)
    clbt_test_assert_in_sync(queue, clbt_multi_table_group(s->multi, g),
                             CARRY_ROWS);
}

static clbt_status carry_on_setup(carry_on *c) {
  scenario *s = &c->s;
  clbt_status status = open_device(s);
  if (!status) status = clbt_table_create(s->device, &carry_config, &s->table);
  if (!status)
    status = clbt_multi_table_create(s->device, &carry_multi_config, &s->multi);
  if (!status) status = clbt_table_set_commit_mode(s->table, c->mode);
  for (uint32_t g = 0; !status && g < 2; ++g)
    status = clbt_table_set_commit_mode(clbt_multi_table_group(s->multi, g),
                                        c->mode);
  return status;
}

/* One run with the call-th call of kind failing; returns the calls made. */
static unsigned long run_carrying_on(clbt_fault_kind kind, unsigned long call,
                                     clbt_commit_mode mode) {
  carry_on c = {.kind = kind, .mode = mode};
  clbt_fault_start(kind, call);
  /* A failed create leaves nothing to carry on with: only leaks count. */
  if (carry_on_setup(&c) == CLBT_SUCCESS) {
    c.fired = clbt_fault_failed_function() != NULL;
    carry_on_steps(&c);
    clbt_fault_disarm();
    check_repaired(&c);
  }
  unsigned long calls = clbt_fault_calls(kind);
  teardown(&c.s);
  ck_assert_msg(clbt_fault_live_objects() == 0 &&
                    clbt_fault_live_allocations() == 0 &&
                    clbt_fault_imbalances() == 0,
                "call %lu (%s) failing, carried on: %zu OpenCL objects and "
                "%zu heap blocks leaked, %zu released twice",
                call, clbt_fault_failed_function(), clbt_fault_live_objects(),
                clbt_fault_live_allocations(), clbt_fault_imbalances());
  return calls;
}

static void sweep_carrying_on(clbt_fault_kind kind, const char *what) {
  static const clbt_commit_mode modes[] = {
      CLBT_COMMIT_AUTO, CLBT_COMMIT_WHOLE, CLBT_COMMIT_SCATTER};
  unsigned long failed = 0;
  run_carrying_on(kind, 0, modes[0]); /* stores the programs, as above */
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; ++m) {
    unsigned long calls = run_carrying_on(kind, 0, modes[m]);
    ck_assert_uint_gt(calls, 0);
    for (unsigned long call = 1; call <= calls; ++call)
      run_carrying_on(kind, call, modes[m]);
    failed += calls;
  }
  printf("fault injection, carrying on: %lu %s calls failed one at a time "
         "in every commit mode; each time the next commit brought every "
         "table's device copy to its host rows\n",
         failed, what);
}

START_TEST(opencl_failures_are_repaired_by_the_next_commit) {
  sweep_carrying_on(CLBT_FAULT_OPENCL, "OpenCL");
}
END_TEST

START_TEST(allocation_failures_are_repaired_by_the_next_commit) {
  sweep_carrying_on(CLBT_FAULT_ALLOCATION, "allocation");
}
END_TEST

START_TEST(every_opencl_call_can_fail) {
  static const char *const functions[] = {CLBT_FAULT_OPENCL_FUNCTIONS};
  sweep(CLBT_FAULT_OPENCL, "OpenCL", functions,
        sizeof functions / sizeof functions[0], CLBT_FAULT_OPENCL_SITES);
}
END_TEST

START_TEST(every_allocation_can_fail) {
  static const char *const functions[] = {CLBT_FAULT_ALLOCATION_FUNCTIONS};
  sweep(CLBT_FAULT_ALLOCATION, "allocation", functions,
        sizeof functions / sizeof functions[0], CLBT_FAULT_ALLOCATION_SITES);
}
END_TEST

/* ---- the first step with the export --------------------------------- */

/*
 * A first step with CLBT_STEP_EXPORT plans everything (every check, every
 * kernel it runs, where its packet goes) before it enqueues; its small
 * packet travels in its one launch. With each of its OpenCL calls failing
 * in turn, it must return that failure, leave every device region as it
 * was and the host rows' changes pending, and build nothing (the kernel is
 * the table's, made when it was created); the same step with nothing
 * failing then gives the slots worked out by hand above: rows {7, 3}, {5}.
 */
typedef struct export_subject {
  clbt_device *device;
  clbt_table *table;
  batch b;
} export_subject;

static void export_setup(export_subject *e) {
  clbt_assert_ok(clbt_device_open(NULL, &e->device));
  e->b = make_batch(clbt_device_context(e->device),
                    clbt_device_queue(e->device));
  clbt_assert_ok(clbt_table_create(e->device, &table_config, &e->table));
  /* Its packet then travels in the step's one launch. */
  clbt_assert_ok(clbt_table_set_commit_mode(e->table, CLBT_COMMIT_SCATTER));
  clbt_assert_ok(clbt_table_add_row(e->table, 0, row0, 1));
  clbt_assert_ok(clbt_table_commit(e->table, 2));
  /* Pending for the step: row 0's second block, row 1. */
  clbt_assert_ok(clbt_table_append_row(e->table, 0, row0 + 1, 1));
  clbt_assert_ok(clbt_table_add_row(e->table, 1, row1, 1));
}

static clbt_status export_step(export_subject *e) {
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_GATHER | CLBT_STEP_EXPORT;
  step.num_reqs = 2;
  step.num_tokens = 4;
  step.query_start_loc = e->b.query_start_loc;
  step.positions = e->b.positions;
  return clbt_table_enqueue_step(e->table, &step, 0, NULL, NULL);
}

/* Every byte of the table's storage, as the device holds it. */
enum { DEVICE_BYTES_READ = 4096 };
static void read_storage(const export_subject *e, unsigned char *out) {
  cl_command_queue queue = clbt_device_queue(e->device);
  const cl_mem regions[] = {clbt_table_device_data(e->table),
                            clbt_table_device_row_lengths(e->table),
                            clbt_table_slot_mapping(e->table),
                            clbt_table_gathered_rows(e->table)};
  static const size_t bytes[] = {2 * 2 * sizeof(int32_t), 2 * sizeof(int32_t),
                                 4 * sizeof(int64_t), 2 * 2 * sizeof(int32_t)};
  clbt_export_buffers exported;
  clbt_assert_ok(clbt_table_export_buffers(e->table, &exported));
  size_t at = 0;
  for (size_t r = 0; r < 4; ++r) {
    read_buffer(queue, regions[r], bytes[r], out + at);
    at += bytes[r];
  }
  read_buffer(queue, exported.paged_kv_indptr, 3 * sizeof(int32_t), out + at);
  at += 3 * sizeof(int32_t);
  read_buffer(queue, exported.paged_kv_last_page_len, 2 * sizeof(int32_t),
              out + at);
  at += 2 * sizeof(int32_t);
  ck_assert_uint_le(at, DEVICE_BYTES_READ);
}

static void export_teardown(export_subject *e) {
  clbt_table_destroy(e->table);
  release_batch(&e->b);
  clbt_device_release(e->device);
}

START_TEST(a_failed_first_export_step_changes_nothing) {
  export_subject e = {0};
  export_setup(&e);
  clbt_fault_start(CLBT_FAULT_OPENCL, 0);
  clbt_assert_ok(export_step(&e));
  unsigned long calls = clbt_fault_calls(CLBT_FAULT_OPENCL);
  export_teardown(&e);
  ck_assert_uint_gt(calls, 0);
  for (unsigned long call = 1; call <= calls; ++call) {
    unsigned char before[DEVICE_BYTES_READ] = {0}, after[DEVICE_BYTES_READ] = {0};
    export_setup(&e);
    read_storage(&e, before);
    clbt_fault_start(CLBT_FAULT_OPENCL, call);
    clbt_status status = export_step(&e);
    clbt_fault_disarm();
    ck_assert_msg(status == (clbt_status)CLBT_FAULT_INJECTED_ERROR,
                  "call %lu (%s) failing: the step returned %s", call,
                  clbt_fault_failed_function(), clbt_status_name(status));
    ck_assert_int_eq(clFinish(clbt_device_queue(e.device)), CL_SUCCESS);
    read_storage(&e, after);
    /* Its one enqueue is the launch: any failure leaves the device be. */
    ck_assert_msg(memcmp(before, after, sizeof before) == 0,
                  "call %lu (%s) failing changed the device", call,
                  clbt_fault_failed_function());
    /* The changes are still pending: the same step now does all of it. */
    clbt_assert_ok(export_step(&e));
    check_slots(clbt_device_queue(e.device), e.table, "after the failure");
    export_teardown(&e);
  }
  /* It makes its entry's kernel object (clCreateKernel, cheap), but
     builds no program: the table's creation built it. */
  static const char *const builders[] = {"clBuildProgram",
                                         "clCreateProgramWithSource",
                                         "clCreateProgramWithBinary"};
  for (size_t b = 0; b < sizeof builders / sizeof builders[0]; ++b)
    ck_assert_msg(!clbt_fault_function_failed(CLBT_FAULT_OPENCL, builders[b]),
                  "the first export step called %s", builders[b]);
  printf("fault injection: the first export step's %lu OpenCL calls failed "
         "one at a time; none changed the device or built anything\n",
         calls);
}
END_TEST

/* ---- many commits in flight ------------------------------------------- */

/* A device, a table of config whose commits go WHOLE, and a gate, still
   closed, that the table's commits can be made to wait behind. */
static cl_event whole_table_and_gate(const clbt_table_config *config,
                                     clbt_device **device,
                                     clbt_table **table) {
  cl_int error = CL_SUCCESS;
  clbt_assert_ok(clbt_device_open(NULL, device));
  clbt_assert_ok(clbt_table_create(*device, config, table));
  clbt_assert_ok(clbt_table_set_commit_mode(*table, CLBT_COMMIT_WHOLE));
  cl_event gate = clCreateUserEvent(clbt_device_context(*device), &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  return gate;
}

/*
 * Commits behind a closed gate each keep a staging packet. The 300th must
 * cost the OpenCL calls the 10th did (reaping asks the oldest slot only),
 * and once they have all ended the next commit that takes a packet leaves
 * the table holding what it held before them, two packets and the ring
 * that lists the packets in flight, nothing else.
 */
START_TEST(commits_in_flight_cost_what_one_does) {
  enum { IN_FLIGHT = 300 };
  clbt_device *device = NULL;
  clbt_table *table = NULL;
  cl_event gate = whole_table_and_gate(&carry_config, &device, &table);
  for (int i = 0; i < 3; ++i) {
    clbt_assert_ok(clbt_table_commit(table, CARRY_ROWS));
    ck_assert_int_eq(clFinish(clbt_device_queue(device)), CL_SUCCESS);
  }
  size_t objects = clbt_fault_live_objects();
  size_t blocks = clbt_fault_live_allocations();
  clbt_assert_ok(clbt_table_enqueue_commit(table, CARRY_ROWS, 1, &gate, NULL));
  unsigned long cost[IN_FLIGHT + 1] = {0};
  for (uint32_t i = 1; i <= IN_FLIGHT; ++i) {
    int32_t id = (int32_t)i;
    clbt_assert_ok(clbt_table_add_row(table, i % CARRY_ROWS, &id, 1));
    unsigned long before = clbt_fault_calls(CLBT_FAULT_OPENCL);
    clbt_assert_ok(clbt_table_commit(table, CARRY_ROWS));
    cost[i] = clbt_fault_calls(CLBT_FAULT_OPENCL) - before;
  }
  ck_assert_uint_eq(cost[IN_FLIGHT], cost[10]);
  ck_assert_int_eq(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
  ck_assert_int_eq(clFinish(clbt_device_queue(device)), CL_SUCCESS);
  clReleaseEvent(gate);
  /* Measured as the first figures were: after a commit that ended; one
     that takes a packet, which reaps the pool. */
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){1}, 1));
  clbt_assert_ok(clbt_table_commit(table, CARRY_ROWS));
  ck_assert_int_eq(clFinish(clbt_device_queue(device)), CL_SUCCESS);
  /* Two packets at most, and the small ring that lists those in flight;
     WHOLE commits upload into no buffer. */
  ck_assert_uint_le(clbt_fault_live_allocations(), blocks + 3);
  /* And the event of the last commit's write, which the next reaps. */
  ck_assert_uint_le(clbt_fault_live_objects(), objects + 1);
  clbt_table_destroy(table);
  clbt_device_release(device);
}
END_TEST

/* ---- a destroy whose wait fails ---------------------------------------- */

static atomic_bool gate_opened;

/* Opens the gate 200 ms from now, saying so first. */
static void *open_gate_later(void *gate) {
  nanosleep(&(struct timespec){.tv_nsec = 200 * 1000 * 1000}, NULL);
  atomic_store(&gate_opened, true);
  ck_assert_int_eq(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
  return NULL;
}

/*
 * A table destroyed while its commit's write waits behind a closed gate,
 * and the wait for that write fails: the write has not read its packet
 * yet, so the table must not free the packet before the write ends. The
 * gate opens 200 ms later; destroy may return only after that. (It freed
 * the packet at once, and PoCL's thread then read it: AddressSanitizer saw
 * the use after free in the sweep, when the race went that way.)
 */
START_TEST(a_failed_wait_keeps_the_packet_of_a_write_in_flight) {
  clbt_device *device = NULL;
  clbt_table *table = NULL;
  cl_event gate = whole_table_and_gate(&table_config, &device, &table);
  clbt_assert_ok(clbt_table_add_row(table, 0, row0, 2));
  clbt_assert_ok(clbt_table_enqueue_commit(table, 1, 1, &gate, NULL));
  pthread_t opener;
  ck_assert_int_eq(pthread_create(&opener, NULL, open_gate_later, gate), 0);
  clbt_fault_start(CLBT_FAULT_OPENCL, 1);
  clbt_table_destroy(table);
  clbt_fault_disarm();
  ck_assert_str_eq(clbt_fault_failed_function(), "clWaitForEvents");
  ck_assert_msg(atomic_load(&gate_opened),
                "destroy returned before the write it failed to wait for "
                "had ended");
  ck_assert_int_eq(pthread_join(opener, NULL), 0);
  clReleaseEvent(gate);
  clbt_device_release(device);
}
END_TEST

/* One case per sweep, so that CTest runs (and times) each on its own. */
static void add_case(Suite *suite, const char *name, const TTest *test) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, test);
  suite_add_tcase(suite, tc);
}

int main(void) {
  if (!mkdtemp(program_cache) || setenv("CLBT_CACHE_DIR", program_cache, 1)) {
    perror(program_cache);
    return EXIT_FAILURE;
  }
  clbt_log_set_callback(count_cache_warnings, NULL);
  Suite *suite = suite_create("fault_injection");
  add_case(suite, "retrying_opencl", every_opencl_call_can_fail);
  add_case(suite, "retrying_allocations", every_allocation_can_fail);
  add_case(suite, "carrying_on_opencl",
           opencl_failures_are_repaired_by_the_next_commit);
  add_case(suite, "carrying_on_allocations",
           allocation_failures_are_repaired_by_the_next_commit);
  add_case(suite, "first_export_step",
           a_failed_first_export_step_changes_nothing);
  add_case(suite, "commits_in_flight", commits_in_flight_cost_what_one_does);
  add_case(suite, "destroy_after_a_failed_wait",
           a_failed_wait_keeps_the_packet_of_a_write_in_flight);
  int failed = clbt_test_run(suite);
  clbt_test_remove_tree(program_cache);
  return failed;
}
