/*
 * `clbt bench` (see bench.h). Shapes follow the seed's Triton anchor
 * (shared/anchors/triton_slot_mapping.py): rows as wide as a 131072-token
 * context, every row full of random blocks, each request at a random
 * position of its context.
 */
/* clock_gettime(CLOCK_MONOTONIC) */
#define _POSIX_C_SOURCE 200809L

#include "bench.h"
#include "json.h"
#include "random.h"

#include "clbt/clbt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_MODEL_LEN 131072
#define MAX_GROUPS 4

typedef struct shape {
  const char *name;
  uint32_t requests, tokens_per_request, max_tokens;
  uint32_t block_size, kernel_block_size;
  uint32_t cp_world_size, cp_rank, cp_interleave_size;
} shape;

/* The anchor's shapes, by its names; decode-64 is the padding-heavy case. */
static const shape shapes[] = {
    {"decode-1", 1, 1, 16384, 16, 16, 1, 0, 1},
    {"decode-64", 64, 1, 16384, 16, 16, 1, 0, 1},
    {"decode-256", 256, 1, 16384, 16, 16, 1, 0, 1},
    {"decode-1024", 1024, 1, 16384, 16, 16, 1, 0, 1},
    {"prefill-16x512", 16, 512, 16384, 16, 16, 1, 0, 1},
    {"prefill-4x2048", 4, 2048, 16384, 16, 16, 1, 0, 1},
    {"mixed-256-in-8192", 256, 32, 16384, 16, 16, 1, 0, 1},
    {"tokens-16384", 64, 256, 16384, 16, 16, 1, 0, 1},
    {"block128-decode-256", 256, 1, 16384, 128, 128, 1, 0, 1},
    {"hybrid32over16-mixed", 256, 32, 16384, 32, 16, 1, 0, 1},
    {"cp4-rank1-il16-mixed", 256, 32, 16384, 16, 16, 4, 1, 16},
};
#define NUM_SHAPES (sizeof shapes / sizeof shapes[0])

typedef struct options {
  uint32_t runs;
  const char *json_path, *plot_path, *only, *compare_dir;
} options;

typedef struct bench {
  options options;
  clbt_device *device;      /* as clbt_device_open makes it: calls are timed here */
  clbt_device *profiled;    /* the same context, a profiling queue: device times */
  cl_context context;
  cl_command_queue queue, profiling_queue;
  cl_program empty_program;
  cl_kernel empty;
  uint64_t rng;
  double *samples[4]; /* scratch, runs each */
  FILE *json_file;   /* NULL: no --json */
  clbt_json json;
  /* the figures the issue sets targets for; negative: not measured */
  double decode_call_over_empty, tokens_call_over_host_plus_empty;
  double commit_bytes_over_seed, commit_over_small_write;
  double four_groups_over_one;
} bench;

/* ---- measuring ----------------------------------------------------------- */

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *values, size_t count) {
  qsort(values, count, sizeof *values, compare_doubles);
  return count % 2 ? values[count / 2]
                   : (values[count / 2 - 1] + values[count / 2]) / 2;
}

static uint32_t next_random(bench *b) {
  return (uint32_t)(clbt_random_next(&b->rng) >> 32);
}

static void die(const char *what, clbt_status status) {
  fprintf(stderr, "clbt bench: %s failed: %s: %s\n", what,
          clbt_status_name(status), clbt_last_error());
  exit(1);
}

static void check(clbt_status status, const char *what) {
  if (status != CLBT_SUCCESS) die(what, status);
}

static void check_cl(cl_int error, const char *what) {
  if (error != CL_SUCCESS) die(what, (clbt_status)error);
}

static void finish(const bench *b) { check_cl(clFinish(b->queue), "clFinish"); }

static double time_empty_kernel(const bench *b) {
  size_t one = 1;
  double start = now_us();
  check_cl(clEnqueueNDRangeKernel(b->queue, b->empty, 1, NULL, &one, &one, 0,
                                  NULL, NULL),
           "empty kernel");
  finish(b);
  return now_us() - start;
}

/* A command's time on the device, from its profiling event. */
static double device_time_us(cl_event event) {
  cl_ulong start = 0, end = 0;
  check_cl(clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START,
                                   sizeof start, &start, NULL),
           "profiling");
  check_cl(clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end,
                                   &end, NULL),
           "profiling");
  return (double)(end - start) / 1e3;
}

/* The empty kernel's time on the device, from profiling events. */
static double empty_device_time(const bench *b) {
  size_t one = 1;
  cl_event event = NULL;
  check_cl(clEnqueueNDRangeKernel(b->profiling_queue, b->empty, 1, NULL, &one,
                                  &one, 0, NULL, &event),
           "empty kernel");
  check_cl(clWaitForEvents(1, &event), "clWaitForEvents");
  double time = device_time_us(event);
  clReleaseEvent(event);
  return time;
}

/* ---- JSON ---------------------------------------------------------------- */

/* One figure of a JSON record. */
typedef struct figure {
  const char *key;
  double value;
} figure;

#define FIGURES(...)                     \
  (const figure[]){__VA_ARGS__},         \
      sizeof((const figure[]){__VA_ARGS__}) / sizeof(figure)

/* Each section of the output is an array of records, in the order run. */
static void json_section_begin(bench *b, const char *section) {
  if (b->json_file) clbt_json_array_begin(&b->json, section);
}

static void json_section_end(bench *b) {
  if (b->json_file) clbt_json_array_end(&b->json);
}

static void json_record(bench *b, const char *name, const figure *figures,
                        size_t count) {
  if (!b->json_file) return;
  clbt_json_object_begin(&b->json, NULL);
  clbt_json_string(&b->json, "name", name);
  for (size_t i = 0; i < count; ++i)
    clbt_json_double(&b->json, figures[i].key, figures[i].value);
  clbt_json_object_end(&b->json);
}

/* ---- tables and batches -------------------------------------------------- */

/*
 * A table as the anchor fills it: every row full of random KV blocks, the
 * same blocks for the same seed.
 */
static clbt_table *full_table(bench *b, clbt_device *device,
                              const clbt_table_config *config,
                              uint32_t kv_blocks, uint64_t seed) {
  clbt_table *table = NULL;
  uint64_t kept = b->rng;
  b->rng = seed;
  check(clbt_table_create(device, config, &table), "clbt_table_create");
  int32_t *ids = malloc(kv_blocks * sizeof *ids);
  if (!ids) die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t r = 0; r < config->max_num_reqs; ++r) {
    for (uint32_t i = 0; i < kv_blocks; ++i)
      ids[i] = (int32_t)(next_random(b) % (1u << 20));
    check(clbt_table_add_row(table, r, ids, kv_blocks), "clbt_table_add_row");
  }
  free(ids);
  check(clbt_table_commit(table, config->max_num_reqs), "clbt_table_commit");
  b->rng = kept;
  return table;
}

typedef struct token_batch {
  uint32_t num_reqs, num_tokens;
  int32_t *query_start_loc;
  int64_t *positions;
  cl_mem query_start_loc_buffer, positions_buffer;
} token_batch;

static cl_mem upload(const bench *b, const void *data, size_t bytes) {
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(b->context, CL_MEM_READ_ONLY, bytes ? bytes : 8,
                                 NULL, &error);
  check_cl(error, "clCreateBuffer");
  if (bytes)
    check_cl(clEnqueueWriteBuffer(b->queue, buffer, CL_TRUE, 0, bytes, data, 0,
                                  NULL, NULL),
             "clEnqueueWriteBuffer");
  return buffer;
}

/* requests x tokens_per_request tokens, each request at a random place. */
static token_batch make_batch(bench *b, uint32_t requests, uint32_t per_request) {
  token_batch batch = {requests, requests * per_request, NULL, NULL, NULL, NULL};
  batch.query_start_loc = malloc((requests + 1) * sizeof(int32_t));
  batch.positions = malloc((batch.num_tokens + 1) * sizeof(int64_t));
  if (!batch.query_start_loc || !batch.positions)
    die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t r = 0; r <= requests; ++r)
    batch.query_start_loc[r] = (int32_t)(r * per_request);
  for (uint32_t r = 0; r < requests; ++r) {
    uint32_t start = next_random(b) % (MAX_MODEL_LEN - per_request);
    for (uint32_t t = 0; t < per_request; ++t)
      batch.positions[r * per_request + t] = start + t;
  }
  batch.query_start_loc_buffer = upload(
      b, batch.query_start_loc, (requests + 1) * sizeof(int32_t));
  batch.positions_buffer =
      upload(b, batch.positions, batch.num_tokens * sizeof(int64_t));
  return batch;
}

static void free_batch(token_batch *batch) {
  free(batch->query_start_loc);
  free(batch->positions);
  clReleaseMemObject(batch->query_start_loc_buffer);
  clReleaseMemObject(batch->positions_buffer);
}

static clbt_table_config shape_config(const shape *s, uint32_t *kv_blocks) {
  *kv_blocks = MAX_MODEL_LEN / (s->block_size * s->cp_world_size);
  return (clbt_table_config){
      .block_size = s->block_size,
      .kernel_block_size = s->kernel_block_size,
      .max_num_reqs = s->requests > 1024 ? s->requests : 1024,
      .max_num_blocks_per_req = *kv_blocks,
      .max_num_batched_tokens = s->max_tokens,
      .cp_world_size = s->cp_world_size,
      .cp_rank = s->cp_rank,
      .cp_interleave_size = s->cp_interleave_size};
}

/* ---- slot mapping -------------------------------------------------------- */

typedef struct call_times {
  double call, empty, host, device, empty_device;
} call_times;

/*
 * Slot mapping, the empty kernel and the host loop, interleaved; then the
 * device times of the kernel (on `profiled`, the same table on the
 * profiling queue) and of the empty kernel.
 */
static call_times time_slot_mapping(bench *b, clbt_table *table,
                                    clbt_table *profiled,
                                    const token_batch *batch,
                                    uint32_t max_tokens) {
  uint32_t runs = b->options.runs;
  int64_t *host = malloc(max_tokens * sizeof *host);
  if (!host) die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  call_times times;
  for (uint32_t i = 0; i < runs; ++i) {
    double start = now_us();
    check(clbt_table_compute_slot_mapping(table, batch->num_reqs,
                                          batch->query_start_loc_buffer,
                                          batch->positions_buffer,
                                          batch->num_tokens),
          "clbt_table_compute_slot_mapping");
    finish(b);
    b->samples[0][i] = now_us() - start;
    b->samples[1][i] = time_empty_kernel(b);
    start = now_us();
    check(clbt_table_compute_slot_mapping_host(table, batch->num_reqs,
                                               batch->query_start_loc,
                                               batch->positions,
                                               batch->num_tokens, host),
          "clbt_table_compute_slot_mapping_host");
    b->samples[2][i] = now_us() - start;
  }
  times.call = median(b->samples[0], runs);
  times.empty = median(b->samples[1], runs);
  times.host = median(b->samples[2], runs);
  for (uint32_t i = 0; i < runs; ++i) {
    cl_event event = NULL;
    check(clbt_table_enqueue_slot_mapping(profiled, batch->num_reqs,
                                          batch->query_start_loc_buffer,
                                          batch->positions_buffer,
                                          batch->num_tokens, 0, NULL, &event),
          "clbt_table_enqueue_slot_mapping");
    check_cl(clWaitForEvents(1, &event), "clWaitForEvents");
    b->samples[0][i] = device_time_us(event);
    clReleaseEvent(event);
    b->samples[1][i] = empty_device_time(b);
  }
  times.device = median(b->samples[0], runs);
  times.empty_device = median(b->samples[1], runs);
  free(host);
  return times;
}

static bool selected(const bench *b, const char *name) {
  if (!b->options.only) return true;
  size_t length = strlen(name);
  for (const char *p = b->options.only; (p = strstr(p, name)); p += length)
    if ((p == b->options.only || p[-1] == ',') &&
        (p[length] == ',' || p[length] == '\0'))
      return true;
  return false;
}

static void bench_shapes(bench *b) {
  printf("\nslot mapping: medians of %u runs, microseconds; call = enqueue to "
         "completion (clFinish)\n",
         (unsigned)b->options.runs);
  json_section_begin(b, "slot_mapping");
  printf("%-22s %6s %7s %7s %8s %7s %8s %10s %9s %10s\n", "shape", "tokens",
         "call", "empty", "host", "device", "empty_dv", "call/empty",
         "call/host", "call/(h+e)");
  for (size_t i = 0; i < NUM_SHAPES; ++i) {
    const shape *s = &shapes[i];
    if (!selected(b, s->name)) continue;
    uint32_t kv_blocks;
    clbt_table_config config = shape_config(s, &kv_blocks);
    uint64_t seed = next_random(b);
    clbt_table *table = full_table(b, b->device, &config, kv_blocks, seed);
    clbt_table *profiled = full_table(b, b->profiled, &config, kv_blocks, seed);
    token_batch batch = make_batch(b, s->requests, s->tokens_per_request);
    call_times t = time_slot_mapping(b, table, profiled, &batch, s->max_tokens);
    printf("%-22s %6u %7.1f %7.1f %8.1f %7.2f %8.2f %10.2f %9.2f %10.2f\n",
           s->name, (unsigned)batch.num_tokens, t.call, t.empty, t.host,
           t.device, t.empty_device, t.call / t.empty, t.call / t.host,
           t.call / (t.host + t.empty));
    json_record(b, s->name,
                FIGURES({"tokens", batch.num_tokens}, {"call_us", t.call},
                        {"empty_us", t.empty}, {"host_us", t.host},
                        {"device_us", t.device},
                        {"empty_device_us", t.empty_device},
                        {"call_over_empty", t.call / t.empty},
                        {"call_over_host", t.call / t.host},
                        {"call_over_host_plus_empty",
                         t.call / (t.host + t.empty)}));
    if (strncmp(s->name, "decode-", 7) == 0 &&
        t.call / t.empty > b->decode_call_over_empty)
      b->decode_call_over_empty = t.call / t.empty;
    if (strcmp(s->name, "tokens-16384") == 0)
      b->tokens_call_over_host_plus_empty = t.call / (t.host + t.empty);
    free_batch(&batch);
    clbt_table_destroy(table);
    clbt_table_destroy(profiled);
  }
  json_section_end(b);
}

/* ---- how the host learns of completion ----------------------------------- */

typedef enum wait_method { WAIT_FINISH, WAIT_EVENT, WAIT_POLL } wait_method;

/* Waits for event the given way; WAIT_FINISH ignores it. */
static void wait_for(const bench *b, wait_method method, cl_event event) {
  if (method == WAIT_FINISH) {
    finish(b);
  } else if (method == WAIT_EVENT) {
    check_cl(clWaitForEvents(1, &event), "clWaitForEvents");
  } else {
    cl_int state = CL_QUEUED;
    check_cl(clFlush(b->queue), "clFlush");
    while (state > CL_COMPLETE)
      check_cl(clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS,
                              sizeof state, &state, NULL),
               "clGetEventInfo");
    check_cl(state, "the command");
  }
}

/*
 * decode-256 and the empty kernel, each waited for by clFinish, by
 * clWaitForEvents, and by polling the event's status: what the host pays
 * to learn that the device is done differs by driver.
 */
static void bench_completion(bench *b) {
  if (!selected(b, "completion")) return;
  static const char *const methods[] = {"clFinish", "clWaitForEvents",
                                        "poll event status"};
  uint32_t runs = b->options.runs, kv_blocks;
  clbt_table_config config = shape_config(&shapes[2], &kv_blocks);
  clbt_table *table = full_table(b, b->device, &config, kv_blocks, 1);
  token_batch batch = make_batch(b, 256, 1);
  size_t one = 1;
  printf("\ncompletion, decode-256: medians of %u runs, microseconds from "
         "enqueue to known completion\n", (unsigned)runs);
  printf("%-18s %8s %8s %10s\n", "wait", "call", "empty", "call/empty");
  json_section_begin(b, "completion");
  for (int m = WAIT_FINISH; m <= WAIT_POLL; ++m) {
    for (uint32_t i = 0; i < runs; ++i) {
      cl_event event = NULL;
      double start = now_us();
      check(clbt_table_enqueue_slot_mapping(
                table, batch.num_reqs, batch.query_start_loc_buffer,
                batch.positions_buffer, batch.num_tokens, 0, NULL, &event),
            "slot mapping");
      wait_for(b, (wait_method)m, event);
      b->samples[0][i] = now_us() - start;
      clReleaseEvent(event);
      start = now_us();
      check_cl(clEnqueueNDRangeKernel(b->queue, b->empty, 1, NULL, &one, &one,
                                      0, NULL, &event),
               "empty kernel");
      wait_for(b, (wait_method)m, event);
      b->samples[1][i] = now_us() - start;
      clReleaseEvent(event);
    }
    double call = median(b->samples[0], runs), empty = median(b->samples[1], runs);
    printf("%-18s %8.1f %8.1f %10.2f\n", methods[m], call, empty, call / empty);
    json_record(b, methods[m],
                FIGURES({"call_us", call}, {"empty_us", empty},
                        {"call_over_empty", call / empty}));
  }
  json_section_end(b);
  free_batch(&batch);
  clbt_table_destroy(table);
}

/* ---- commit -------------------------------------------------------------- */

/*
 * The steady decode step: 256 requests, width 8192, 1 row in 16
 * gains a block per step; against the whole copy the seed makes every step
 * and against one small write.
 */
static void bench_commit(bench *b) {
  if (!selected(b, "commit")) return;
  enum { REQUESTS = 256, KV_BLOCKS = 8192, START = 100 };
  uint32_t runs = b->options.runs;
  static const clbt_commit_mode modes[] = {CLBT_COMMIT_AUTO, CLBT_COMMIT_WHOLE};
  static const char *const names[] = {"auto", "whole"};
  clbt_table_config config = {.block_size = 16, .max_num_reqs = REQUESTS,
                              .max_num_blocks_per_req = KV_BLOCKS,
                              .max_num_batched_tokens = 16};
  size_t whole_bytes = (size_t)REQUESTS * KV_BLOCKS * sizeof(int32_t);
  int32_t *seed_rows = calloc(whole_bytes, 1);
  cl_int error = CL_SUCCESS;
  cl_mem seed_buffer = clCreateBuffer(b->context, CL_MEM_READ_WRITE,
                                      whole_bytes, NULL, &error);
  check_cl(error, "clCreateBuffer");
  if (!seed_rows) die("calloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  printf("\ncommit of a steady decode step (%d requests, width %d, 1 row in 16 "
         "gains a block): medians of %u steps, commit + clFinish\n",
         REQUESTS, KV_BLOCKS, (unsigned)runs);
  printf("%-8s %10s %11s %9s %10s %9s %14s\n", "mode", "bytes", "bytes/seed",
         "us", "seed_us", "us/seed", "us/small_write");
  json_section_begin(b, "commit");
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; ++m) {
    clbt_table *table = NULL;
    check(clbt_table_create(b->device, &config, &table), "clbt_table_create");
    check(clbt_table_set_commit_mode(table, modes[m]), "set_commit_mode");
    int32_t ids[START];
    for (uint32_t r = 0; r < REQUESTS; ++r) {
      for (int i = 0; i < START; ++i) ids[i] = (int32_t)(next_random(b) % 100000);
      check(clbt_table_append_row(table, r, ids, START), "append_row");
    }
    check(clbt_table_commit(table, REQUESTS), "commit");
    finish(b);
    clbt_commit_info info = {0};
    for (uint32_t i = 0; i < runs; ++i) {
      /* One row in 16 gains a block; rows restart before they fill. */
      for (uint32_t r = i % 16; r < REQUESTS; r += 16) {
        int32_t id = (int32_t)(next_random(b) % 100000);
        if (clbt_table_row_length(table, r) == KV_BLOCKS)
          check(clbt_table_add_row(table, r, &id, 1), "add_row");
        else
          check(clbt_table_append_row(table, r, &id, 1), "append_row");
      }
      double start = now_us();
      check(clbt_table_commit(table, REQUESTS), "commit");
      finish(b);
      b->samples[0][i] = now_us() - start;
      check(clbt_table_last_commit(table, &info), "last_commit");
      start = now_us();
      check_cl(clEnqueueWriteBuffer(b->queue, seed_buffer, CL_TRUE, 0,
                                    whole_bytes, seed_rows, 0, NULL, NULL),
               "seed copy");
      b->samples[1][i] = now_us() - start;
      start = now_us();
      check_cl(clEnqueueWriteBuffer(b->queue, seed_buffer, CL_TRUE, 0, 64,
                                    seed_rows, 0, NULL, NULL),
               "small write");
      b->samples[2][i] = now_us() - start;
    }
    double us = median(b->samples[0], runs), seed_us = median(b->samples[1], runs);
    double small_us = median(b->samples[2], runs);
    printf("%-8s %10llu %11.5f %9.1f %10.1f %9.4f %14.2f\n", names[m],
           (unsigned long long)info.bytes, (double)info.bytes / whole_bytes, us,
           seed_us, us / seed_us, us / small_us);
    json_record(b, names[m],
                FIGURES({"bytes", (double)info.bytes},
                        {"seed_bytes", (double)whole_bytes}, {"us", us},
                        {"seed_us", seed_us}, {"small_write_us", small_us},
                        {"bytes_over_seed", (double)info.bytes / whole_bytes},
                        {"us_over_seed", us / seed_us},
                        {"us_over_small_write", us / small_us}));
    if (modes[m] == CLBT_COMMIT_AUTO) {
      b->commit_bytes_over_seed = (double)info.bytes / whole_bytes;
      b->commit_over_small_write = us / small_us;
    }
    clbt_table_destroy(table);
  }
  json_section_end(b);
  clReleaseMemObject(seed_buffer);
  free(seed_rows);
}

/* ---- multi-group --------------------------------------------------------- */

/* A multi-group table on device with every row of every group full. */
static clbt_multi_table *full_multi_table(bench *b, clbt_device *device,
                                          const clbt_multi_table_config *config) {
  clbt_multi_table *table = NULL;
  check(clbt_multi_table_create(device, config, &table), "multi create");
  for (uint32_t g = 0; g < config->num_groups; ++g) {
    clbt_table *group = clbt_multi_table_group(table, g);
    uint32_t kv_blocks = config->groups[g].max_num_blocks;
    int32_t *ids = malloc(kv_blocks * sizeof *ids);
    if (!ids) die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
    for (uint32_t r = 0; r < config->max_num_reqs; ++r) {
      for (uint32_t i = 0; i < kv_blocks; ++i)
        ids[i] = (int32_t)(next_random(b) % 100000);
      check(clbt_table_add_row(group, r, ids, kv_blocks), "add_row");
    }
    free(ids);
  }
  check(clbt_multi_table_commit(table, config->max_num_reqs), "multi commit");
  return table;
}

/* The median device time of one multi-group launch (profiling queue). */
static double multi_device_time(bench *b, clbt_multi_table *table,
                                const token_batch *batch) {
  for (uint32_t i = 0; i < b->options.runs; ++i) {
    cl_event event = NULL;
    check(clbt_multi_table_enqueue_slot_mapping(
              table, batch->num_reqs, batch->query_start_loc_buffer,
              batch->positions_buffer, batch->num_tokens, 0, NULL, &event),
          "multi slot mapping");
    check_cl(clWaitForEvents(1, &event), "clWaitForEvents");
    b->samples[0][i] = device_time_us(event);
    clReleaseEvent(event);
  }
  return median(b->samples[0], b->options.runs);
}

/*
 * 1, 2 and 4 groups (16, hybrid 32 over 16, 64, 128), one launch against
 * group by group, on a decode and a mixed batch of 256 requests: per-group
 * work is small in the first and large in the second.
 */
static void bench_multi_group(bench *b) {
  if (!selected(b, "multi-group")) return;
  static const clbt_group_config group_menu[MAX_GROUPS] = {
      {.block_size = 16, .max_num_blocks = MAX_MODEL_LEN / 16},
      {.block_size = 32, .kernel_block_size = 16, .max_num_blocks = MAX_MODEL_LEN / 32},
      {.block_size = 64, .max_num_blocks = MAX_MODEL_LEN / 64},
      {.block_size = 128, .max_num_blocks = MAX_MODEL_LEN / 128}};
  static const uint32_t counts[] = {1, 2, 4};
  static const struct {
    const char *name;
    uint32_t tokens_per_request;
  } batches[] = {{"decode-256", 1}, {"mixed-256-in-8192", 32}};
  uint32_t runs = b->options.runs;
  printf("\nmulti-group slot mapping: medians of %u runs, microseconds, enqueue "
         "to completion; device: one launch on the profiling queue\n",
         (unsigned)runs);
  printf("%-18s %-7s %11s %15s %7s %13s %7s\n", "batch", "groups", "one_launch",
         "group_by_group", "ratio", "vs_one_group", "device");
  json_section_begin(b, "multi_group");
  for (size_t k = 0; k < sizeof batches / sizeof batches[0]; ++k) {
    token_batch batch = make_batch(b, 256, batches[k].tokens_per_request);
    double one_group_us = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
      clbt_multi_table_config config = {.max_num_reqs = 256,
                                        .max_num_batched_tokens = 16384,
                                        .num_groups = counts[c],
                                        .groups = group_menu};
      clbt_multi_table *table = full_multi_table(b, b->device, &config);
      for (uint32_t i = 0; i < runs; ++i) {
        double start = now_us();
        check(clbt_multi_table_compute_slot_mapping(
                  table, 256, batch.query_start_loc_buffer,
                  batch.positions_buffer, batch.num_tokens),
              "multi slot mapping");
        finish(b);
        b->samples[0][i] = now_us() - start;
        start = now_us();
        for (uint32_t g = 0; g < counts[c]; ++g)
          check(clbt_table_compute_slot_mapping(
                    clbt_multi_table_group(table, g), 256,
                    batch.query_start_loc_buffer, batch.positions_buffer,
                    batch.num_tokens),
                "group slot mapping");
        finish(b);
        b->samples[1][i] = now_us() - start;
      }
      double together = median(b->samples[0], runs);
      double apart = median(b->samples[1], runs);
      clbt_multi_table_destroy(table);
      table = full_multi_table(b, b->profiled, &config);
      double device = multi_device_time(b, table, &batch);
      clbt_multi_table_destroy(table);
      if (counts[c] == 1) one_group_us = together;
      printf("%-18s %-7u %11.1f %15.1f %7.2f %13.2f %7.2f\n", batches[k].name,
             (unsigned)counts[c], together, apart, together / apart,
             together / one_group_us, device);
      char name[64];
      snprintf(name, sizeof name, "%s-groups-%u", batches[k].name,
               (unsigned)counts[c]);
      json_record(b, name,
                  FIGURES({"one_launch_us", together},
                          {"group_by_group_us", apart},
                          {"one_launch_over_group_by_group", together / apart},
                          {"one_launch_over_one_group", together / one_group_us},
                          {"one_launch_device_us", device}));
      if (counts[c] == 4 && together / one_group_us > b->four_groups_over_one)
        b->four_groups_over_one = together / one_group_us;
    }
    free_batch(&batch);
  }
  json_section_end(b);
}

/* ---- host row operations ------------------------------------------------- */

static void bench_row_operations(bench *b) {
  if (!selected(b, "row-operations")) return;
  enum { ROWS = 1024, KV_BLOCKS = 8192, OPERATIONS = 200000 };
  clbt_table_config config = {.block_size = 16, .max_num_reqs = ROWS,
                              .max_num_blocks_per_req = KV_BLOCKS,
                              .max_num_batched_tokens = 16};
  clbt_table *table = NULL;
  check(clbt_table_create(b->device, &config, &table), "clbt_table_create");
  int32_t ids[32];
  for (int i = 0; i < 32; ++i) ids[i] = 1000 + i;
  /* A decode step's mix: mostly one-block appends, some new requests of 32
     blocks, finished ones cleared, the batch condensed by moves and swaps. */
  double start = now_us();
  for (uint32_t i = 0; i < OPERATIONS; ++i) {
    uint32_t row = next_random(b) % ROWS, other = next_random(b) % ROWS;
    uint32_t kind = next_random(b) % 100;
    clbt_status status;
    if (kind < 80)
      status = clbt_table_row_length(table, row) < KV_BLOCKS
                   ? clbt_table_append_row(table, row, ids, 1)
                   : clbt_table_clear_row(table, row);
    else if (kind < 88)
      status = clbt_table_add_row(table, row, ids, 32);
    else if (kind < 94)
      status = clbt_table_clear_row(table, row);
    else if (kind < 97)
      status = clbt_table_move_row(table, row, other);
    else
      status = clbt_table_swap_row(table, row, other);
    check(status, "row operation");
  }
  double seconds = (now_us() - start) / 1e6;
  printf("\nhost row operations: %.2f million per second (%d of a decode mix: "
         "80%% append 1, 8%% add 32, 6%% clear, 3%% move, 3%% swap)\n",
         OPERATIONS / seconds / 1e6, OPERATIONS);
  json_section_begin(b, "row_operations");
  json_record(b, "decode-mix",
              FIGURES({"operations_per_second", OPERATIONS / seconds}));
  json_section_end(b);
  clbt_table_destroy(table);
}

/* ---- plot data: time per call against batch size -------------------------- */

static void bench_plot(bench *b) {
  if (!b->options.plot_path) return;
  FILE *plot = fopen(b->options.plot_path, "w");
  if (!plot) {
    fprintf(stderr, "clbt bench: cannot write %s: %s\n", b->options.plot_path,
            strerror(errno));
    exit(1);
  }
  fprintf(plot, "# requests  slot_mapping_us  empty_kernel_us  host_loop_us"
                "  (decode, block 16, 16384-token buffer)\n");
  shape s = {"plot", 1, 1, 16384, 16, 16, 1, 0, 1};
  uint32_t kv_blocks;
  clbt_table_config config = shape_config(&s, &kv_blocks);
  clbt_table *table = full_table(b, b->device, &config, kv_blocks, 2);
  clbt_table *profiled = full_table(b, b->profiled, &config, kv_blocks, 2);
  for (uint32_t requests = 1; requests <= 1024; requests *= 2) {
    token_batch batch = make_batch(b, requests, 1);
    call_times t = time_slot_mapping(b, table, profiled, &batch, s.max_tokens);
    fprintf(plot, "%u %.2f %.2f %.2f\n", (unsigned)requests, t.call, t.empty,
            t.host);
    free_batch(&batch);
  }
  clbt_table_destroy(table);
  clbt_table_destroy(profiled);
  fclose(plot);
  printf("\nplot data written to %s\n", b->options.plot_path);
}

/* ---- bit-exact comparison with the Triton anchor's outputs ---------------- */

static void *read_whole_file(const char *dir, const char *name,
                             const char *file, size_t *bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/%s", dir, name, file);
  FILE *in = fopen(path, "rb");
  if (!in) return NULL;
  char *data = NULL;
  if (fseek(in, 0, SEEK_END) == 0) {
    long size = ftell(in);
    rewind(in);
    data = size >= 0 ? malloc((size_t)size + 1) : NULL;
    if (data && fread(data, 1, (size_t)size, in) == (size_t)size) {
      data[size] = '\0';
      *bytes = (size_t)size;
    } else {
      free(data);
      data = NULL;
    }
  }
  fclose(in);
  return data;
}

/* The integer after "key": in the anchor's meta.json. */
static uint32_t meta_field(const char *meta, const char *key) {
  char quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\":", key);
  const char *at = strstr(meta, quoted);
  if (!at) {
    fprintf(stderr, "clbt bench: meta.json has no %s\n", key);
    exit(1);
  }
  return (uint32_t)strtoul(at + strlen(quoted), NULL, 10);
}

/* Loads the anchor's rows, which hold kernel blocks: KV block b's k kernel
   blocks are b*k .. b*k+k-1, so every k-th one divided by k is b. */
static clbt_table *anchor_table(bench *b, const char *meta,
                                const int32_t *rows) {
  uint32_t per_block =
      meta_field(meta, "kv_block_size") / meta_field(meta, "kernel_block_size");
  uint32_t width = meta_field(meta, "width");
  clbt_table_config config = {
      .block_size = meta_field(meta, "kv_block_size"),
      .kernel_block_size = meta_field(meta, "kernel_block_size"),
      .max_num_reqs = meta_field(meta, "max_num_reqs"),
      .max_num_blocks_per_req = width / per_block,
      .max_num_batched_tokens = meta_field(meta, "max_num_batched_tokens"),
      .cp_world_size = meta_field(meta, "cp_world_size"),
      .cp_rank = meta_field(meta, "cp_rank"),
      .cp_interleave_size = meta_field(meta, "cp_interleave_size")};
  clbt_table *table = NULL;
  check(clbt_table_create(b->device, &config, &table), "clbt_table_create");
  int32_t *ids = malloc(config.max_num_blocks_per_req * sizeof *ids);
  if (!ids) die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t r = 0; r < config.max_num_reqs; ++r) {
    for (uint32_t i = 0; i < config.max_num_blocks_per_req; ++i)
      ids[i] = rows[(size_t)r * width + (size_t)i * per_block] / (int32_t)per_block;
    check(clbt_table_add_row(table, r, ids, config.max_num_blocks_per_req),
          "add_row");
  }
  free(ids);
  check(clbt_table_commit(table, config.max_num_reqs), "commit");
  return table;
}

/* Returns the number of slots that differ from the Triton kernel's. */
static size_t compare_shape(bench *b, const char *name) {
  size_t meta_bytes = 0, bytes[4] = {0};
  char *meta = read_whole_file(b->options.compare_dir, name, "meta.json", &meta_bytes);
  int32_t *qsl = read_whole_file(b->options.compare_dir, name, "query_start_loc.i32", &bytes[0]);
  int64_t *positions = read_whole_file(b->options.compare_dir, name, "positions.i64", &bytes[1]);
  int32_t *rows = read_whole_file(b->options.compare_dir, name, "block_table.i32", &bytes[2]);
  int64_t *triton = read_whole_file(b->options.compare_dir, name, "slot_mapping.i64", &bytes[3]);
  if (!meta || !qsl || !positions || !rows || !triton) {
    fprintf(stderr, "clbt bench: %s/%s is incomplete\n", b->options.compare_dir,
            name);
    exit(1);
  }
  clbt_table *table = anchor_table(b, meta, rows);
  uint32_t num_reqs = meta_field(meta, "num_reqs");
  uint32_t num_tokens = meta_field(meta, "num_tokens");
  uint32_t max_tokens = meta_field(meta, "max_num_batched_tokens");
  cl_mem qsl_buffer = upload(b, qsl, bytes[0]);
  cl_mem positions_buffer = upload(b, positions, bytes[1]);
  check(clbt_table_compute_slot_mapping(table, num_reqs, qsl_buffer,
                                        positions_buffer, num_tokens),
        "slot mapping");
  int64_t *ours = malloc(max_tokens * sizeof *ours);
  if (!ours) die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  check_cl(clEnqueueReadBuffer(b->queue, clbt_table_slot_mapping(table), CL_TRUE,
                               0, max_tokens * sizeof *ours, ours, 0, NULL, NULL),
           "read slots");
  size_t mismatches = 0, local = 0;
  for (uint32_t t = 0; t < max_tokens; ++t) {
    mismatches += ours[t] != triton[t];
    local += ours[t] != CLBT_PAD_SLOT_ID;
  }
  printf("%-22s %8u %8zu %10zu\n", name, (unsigned)max_tokens, local, mismatches);
  json_record(b, name,
              FIGURES({"slots", max_tokens}, {"mapped", (double)local},
                      {"mismatches", (double)mismatches}));
  free(ours);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_table_destroy(table);
  free(meta);
  free(qsl);
  free(positions);
  free(rows);
  free(triton);
  return mismatches;
}

static size_t bench_compare(bench *b) {
  if (!b->options.compare_dir) return 0;
  printf("\nslot ids against the Triton kernel's (%s)\n", b->options.compare_dir);
  printf("%-22s %8s %8s %10s\n", "shape", "slots", "mapped", "mismatches");
  size_t mismatches = 0;
  json_section_begin(b, "triton_comparison");
  for (size_t i = 0; i < NUM_SHAPES; ++i)
    if (selected(b, shapes[i].name)) mismatches += compare_shape(b, shapes[i].name);
  json_section_end(b);
  return mismatches;
}

/* ---- targets ------------------------------------------------------------- */

static void target(bench *b, const char *what, double value, double limit) {
  if (value < 0) return;
  printf("  %-58s %9.4f  (target <= %g)  %s\n", what, value, limit,
         value <= limit ? "met" : "MISSED");
  json_record(b, what,
              FIGURES({"value", value}, {"limit", limit},
                      {"met", value <= limit}));
}

static void print_targets(bench *b) {
  printf("\ntargets (the PoCL ones; on a GPU the same ratios, for reading)\n");
  json_section_begin(b, "targets");
  target(b, "slot mapping / empty kernel, worst decode shape",
         b->decode_call_over_empty, 2.0);
  target(b, "slot mapping / (host loop + empty kernel), tokens-16384",
         b->tokens_call_over_host_plus_empty, 1.5);
  target(b, "steady decode commit bytes / seed's whole copy",
         b->commit_bytes_over_seed, 0.02);
  target(b, "steady decode commit time / one small write",
         b->commit_over_small_write, 2.0);
  target(b, "4 groups in one launch / one group's call, worse batch",
         b->four_groups_over_one, 1.3);
  json_section_end(b);
}

/* ---- setup and main ------------------------------------------------------ */

/*
 * The selected device as clbt_device_open gives it (an in-order queue
 * without profiling, where calls are timed), and a second handle on the
 * same context with a profiling queue, for device times.
 */
static void open_device(bench *b) {
  check(clbt_device_open(NULL, &b->device), "clbt_device_open");
  cl_device_id id = clbt_device_id(b->device);
  cl_int error = CL_SUCCESS;
  b->context = clbt_device_context(b->device);
  b->queue = clbt_device_queue(b->device);
  b->profiling_queue = clCreateCommandQueue(b->context, id,
                                            CL_QUEUE_PROFILING_ENABLE, &error);
  check_cl(error, "clCreateCommandQueue");
  check(clbt_device_wrap(b->context, id, b->profiling_queue, &b->profiled),
        "clbt_device_wrap");
  const char *source = "__kernel void clbt_bench_empty(void) {}";
  b->empty_program = clCreateProgramWithSource(b->context, 1, &source, NULL, &error);
  check_cl(error, "clCreateProgramWithSource");
  check_cl(clBuildProgram(b->empty_program, 1, &id, "", NULL, NULL), "clBuildProgram");
  b->empty = clCreateKernel(b->empty_program, "clbt_bench_empty", &error);
  check_cl(error, "clCreateKernel");
  char selector[64] = "?", name[256] = "?", driver[128] = "?";
  clbt_device_selector(id, selector, sizeof selector);
  clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  clGetDeviceInfo(id, CL_DRIVER_VERSION, sizeof driver - 1, driver, NULL);
  printf("clbt bench on %s: %s, driver %s\n", selector, name, driver);
  if (b->json_file) {
    clbt_json_object_begin(&b->json, "device");
    clbt_json_string(&b->json, "name", name);
    clbt_json_string(&b->json, "selector", selector);
    clbt_json_string(&b->json, "driver", driver);
    clbt_json_uint(&b->json, "runs", b->options.runs);
    clbt_json_object_end(&b->json);
  }
}

static void close_device(bench *b) {
  clReleaseKernel(b->empty);
  clReleaseProgram(b->empty_program);
  clbt_device_release(b->profiled);
  clReleaseCommandQueue(b->profiling_queue);
  clbt_device_release(b->device);
}

static const char usage[] =
    "usage: clbt bench [--runs N] [--only NAMES] [--json FILE] [--plot FILE]\n"
    "                  [--compare DIR]\n"
    "\n"
    "Times the slot-mapping call (enqueue to completion) on the selected device\n"
    "against an empty kernel on the same queue and against the host loop, for\n"
    "the shapes of the seed's Triton anchor; commits of a steady decode step\n"
    "against the seed's whole copy; one launch for 1, 2 and 4 groups against\n"
    "group by group; and host row operations per second. Medians of N runs\n"
    "(default 300), ratios from interleaved runs.\n"
    "\n"
    "  --only NAMES   comma-separated shape names, or completion, commit,\n"
    "                 multi-group, row-operations\n"
    "  --json FILE    also write every figure as JSON\n"
    "  --plot FILE    also write time per call against batch size (gnuplot data)\n"
    "  --compare DIR  compare slot ids with the Triton anchor's --out DIR\n";

static int parse(int argc, char **argv, options *o) {
  for (int i = 0; i < argc; ++i) {
    const char *option = argv[i];
    if (strcmp(option, "--help") == 0 || strcmp(option, "-h") == 0)
      return printf("%s", usage), -1;
    if (i + 1 >= argc) {
      fprintf(stderr, "clbt: unknown option or missing value '%s'\n\n%s", option, usage);
      return 2;
    }
    const char *value = argv[++i];
    char *end = NULL;
    if (strcmp(option, "--runs") == 0) {
      unsigned long runs = strtoul(value, &end, 10);
      if (*end || runs == 0 || runs > 1000000) {
        fprintf(stderr, "clbt: not a count: '%s'\n\n%s", value, usage);
        return 2;
      }
      o->runs = (uint32_t)runs;
    } else if (strcmp(option, "--only") == 0) {
      o->only = value;
    } else if (strcmp(option, "--json") == 0) {
      o->json_path = value;
    } else if (strcmp(option, "--plot") == 0) {
      o->plot_path = value;
    } else if (strcmp(option, "--compare") == 0) {
      o->compare_dir = value;
    } else {
      fprintf(stderr, "clbt: unknown option '%s'\n\n%s", option, usage);
      return 2;
    }
  }
  return 0;
}

int clbt_bench_main(int argc, char **argv) {
  bench b = {.options = {.runs = 300}, .rng = 0x9E3779B97F4A7C15ull,
             .decode_call_over_empty = -1,
             .tokens_call_over_host_plus_empty = -1,
             .commit_bytes_over_seed = -1, .commit_over_small_write = -1,
             .four_groups_over_one = -1};
  int parsed = parse(argc, argv, &b.options);
  if (parsed) return parsed < 0 ? 0 : parsed;
  for (int i = 0; i < 4; ++i) {
    b.samples[i] = malloc(b.options.runs * sizeof(double));
    if (!b.samples[i]) die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  }
  if (b.options.json_path &&
      !(b.json_file = fopen(b.options.json_path, "w"))) {
    fprintf(stderr, "clbt bench: cannot write %s: %s\n", b.options.json_path,
            strerror(errno));
    return 1;
  }
  if (b.json_file) clbt_json_begin(&b.json, b.json_file);
  open_device(&b);
  bench_shapes(&b);
  bench_completion(&b);
  bench_commit(&b);
  bench_multi_group(&b);
  bench_row_operations(&b);
  bench_plot(&b);
  size_t mismatches = bench_compare(&b);
  print_targets(&b);
  if (b.json_file) {
    clbt_json_end(&b.json);
    fclose(b.json_file);
  }
  close_device(&b);
  for (int i = 0; i < 4; ++i) free(b.samples[i]);
  return mismatches ? 1 : 0;
}
