/*
 * The timing harness of `clbt bench` (see harness.h): the clock, medians,
 * the device with its profiling twin and the empty kernel every call is
 * measured against, tables and batches shaped as vLLM's, and the
 * report's sections and targets.
 */
/* clock_gettime(CLOCK_MONOTONIC) */
#define _POSIX_C_SOURCE 200809L

#include "bench/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xorshift.h"

/* vLLM's benchmark shapes, by its names; decode-64 is the padding-heavy
   case. Rows are as wide as a 131072-token context, every row full of
   random blocks, each request at a random position of its context. */
const bench_shape bench_shapes[] = {
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
const size_t bench_num_shapes = sizeof bench_shapes / sizeof bench_shapes[0];

double bench_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(double *values, size_t count) {
  qsort(values, count, sizeof *values, compare_doubles);
  return count % 2 ? values[count / 2]
                   : (values[count / 2 - 1] + values[count / 2]) / 2;
}

uint32_t bench_random(bench *b) {
  return (uint32_t)(xorshift64_next(&b->rng) >> 32);
}

void *bench_allocate(size_t bytes) {
  void *memory = malloc(bytes ? bytes : 1);
  if (!memory) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  return memory;
}

void bench_die(const char *what, clbt_status status) {
  fprintf(stderr, "clbt bench: %s failed: %s: %s\n", what,
          clbt_status_name(status), clbt_last_error());
  exit(1);
}

void bench_check(clbt_status status, const char *what) {
  if (status != CLBT_SUCCESS) bench_die(what, status);
}

void bench_check_cl(cl_int error, const char *what) {
  if (error != CL_SUCCESS) bench_die(what, (clbt_status)error);
}

void bench_finish(const bench *b) {
  bench_check_cl(clFinish(b->queue), "clFinish");
}

double bench_device_time_us(cl_event event) {
  cl_ulong start = 0, end = 0;
  bench_check_cl(clWaitForEvents(1, &event), "clWaitForEvents");
  bench_check_cl(clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START,
                                         sizeof start, &start, NULL),
                 "profiling");
  bench_check_cl(clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END,
                                         sizeof end, &end, NULL),
                 "profiling");
  clReleaseEvent(event);
  return (double)(end - start) / 1e3;
}

void bench_run_empty(bench *b, void *context, cl_event *event) {
  (void)context;
  size_t one = 1;
  bench_check_cl(clEnqueueNDRangeKernel(event ? b->profiling_queue : b->queue,
                                        b->empty, 1, NULL, &one, &one, 0, NULL,
                                        event),
                 "empty kernel");
}

void bench_restart_clock(bench *b) {
  bench_finish(b);
  b->clock_start = bench_now_us();
}

void bench_stop_clock(bench *b) { b->clock_stop = bench_now_us(); }

/* One sample of call: its time in microseconds, as its measure says. */
static double time_call(bench *b, const bench_call *call) {
  if (call->measure == BENCH_DEVICE) {
    cl_event event = NULL;
    call->run(b, call->context, &event);
    return bench_device_time_us(event);
  }
  b->clock_stop = -1;
  b->clock_start = bench_now_us();
  call->run(b, call->context, NULL);
  if (call->measure == BENCH_TO_COMPLETION) bench_finish(b);
  double end = b->clock_stop >= 0 ? b->clock_stop : bench_now_us();
  double us = end - b->clock_start;
  if (call->measure == BENCH_ENQUEUE_ONLY) bench_finish(b);
  return us;
}

void bench_time(bench *b, size_t count, const bench_call *calls,
                double *medians) {
  if (count > BENCH_MAX_CALLS) {
    fprintf(stderr, "clbt bench: %zu calls to interleave, at most %d\n", count,
            BENCH_MAX_CALLS);
    exit(1);
  }
  for (uint64_t i = 0; i < b->options.runs; ++i)
    for (size_t c = 0; c < count; ++c)
      b->samples[c][i] = time_call(b, &calls[c]);
  for (size_t c = 0; c < count; ++c)
    medians[c] = bench_median(b->samples[c], b->options.runs);
}

/* ---- tables and batches -------------------------------------------------- */

clbt_table *bench_full_table(bench *b, clbt_device *device,
                             const clbt_table_config *config,
                             uint32_t kv_blocks, uint64_t seed) {
  clbt_table *table = NULL;
  uint64_t kept = b->rng;
  b->rng = seed;
  bench_check(clbt_table_create(device, config, &table), "clbt_table_create");
  int32_t *ids = malloc(kv_blocks * sizeof *ids);
  if (!ids) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t r = 0; r < config->max_num_reqs; ++r) {
    for (uint32_t i = 0; i < kv_blocks; ++i)
      ids[i] = (int32_t)(bench_random(b) % (1u << 20));
    bench_check(clbt_table_add_row(table, r, ids, kv_blocks),
                "clbt_table_add_row");
  }
  free(ids);
  bench_check(clbt_table_commit(table, config->max_num_reqs),
              "clbt_table_commit");
  b->rng = kept;
  return table;
}

cl_mem bench_upload(const bench *b, const void *data, size_t bytes) {
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(b->context, CL_MEM_READ_ONLY,
                                 bytes ? bytes : 8, NULL, &error);
  bench_check_cl(error, "clCreateBuffer");
  if (bytes)
    bench_check_cl(clEnqueueWriteBuffer(b->queue, buffer, CL_TRUE, 0, bytes,
                                        data, 0, NULL, NULL),
                   "clEnqueueWriteBuffer");
  return buffer;
}

/* A fill's largest piece. NVIDIA's OpenCL on an H100 (driver 580) failed
   the 8 GiB fill of the attention's decode-64x32k cache in one command:
   the next call returned CL_OUT_OF_RESOURCES (docs/benchmarks.md, "Paged
   attention"). A multiple of every pattern size OpenCL allows. */
#define FILL_PIECE ((size_t)1 << 30)

cl_mem bench_filled_buffer(const bench *b, size_t bytes, const void *pattern,
                           size_t pattern_size) {
  cl_int error = CL_SUCCESS;
  cl_mem buffer =
      clCreateBuffer(b->context, CL_MEM_READ_WRITE, bytes, NULL, &error);
  bench_check_cl(error, "clCreateBuffer");
  for (size_t at = 0; at < bytes; at += FILL_PIECE) {
    size_t piece = bytes - at < FILL_PIECE ? bytes - at : FILL_PIECE;
    bench_check_cl(clEnqueueFillBuffer(b->queue, buffer, pattern, pattern_size,
                                       at, piece, 0, NULL, NULL),
                   "clEnqueueFillBuffer");
  }
  return buffer;
}

bench_batch bench_make_batch(bench *b, uint32_t requests,
                             uint32_t per_request) {
  bench_batch batch = {requests, requests * per_request, NULL, NULL, NULL,
                       NULL};
  batch.query_start_loc = malloc((requests + 1) * sizeof(int32_t));
  batch.positions = malloc((batch.num_tokens + 1) * sizeof(int64_t));
  if (!batch.query_start_loc || !batch.positions)
    bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  for (uint32_t r = 0; r <= requests; ++r)
    batch.query_start_loc[r] = (int32_t)(r * per_request);
  for (uint32_t r = 0; r < requests; ++r) {
    uint32_t start = bench_random(b) % (BENCH_MAX_MODEL_LEN - per_request);
    for (uint32_t t = 0; t < per_request; ++t)
      batch.positions[r * per_request + t] = start + t;
  }
  batch.query_start_loc_buffer =
      bench_upload(b, batch.query_start_loc, (requests + 1) * sizeof(int32_t));
  batch.positions_buffer =
      bench_upload(b, batch.positions, batch.num_tokens * sizeof(int64_t));
  return batch;
}

void bench_free_batch(bench_batch *batch) {
  free(batch->query_start_loc);
  free(batch->positions);
  clReleaseMemObject(batch->query_start_loc_buffer);
  clReleaseMemObject(batch->positions_buffer);
}

clbt_table_config bench_shape_config(const bench_shape *s,
                                     uint32_t *kv_blocks) {
  *kv_blocks = BENCH_MAX_MODEL_LEN / (s->block_size * s->cp_world_size);
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

/* Whether the first length characters of text are name, with '-' and '_'
   taken as one character. */
static bool same_name(const char *text, size_t length, const char *name) {
  if (strlen(name) != length) return false;
  for (size_t i = 0; i < length; ++i) {
    char a = text[i] == '-' ? '_' : text[i];
    char b = name[i] == '-' ? '_' : name[i];
    if (a != b) return false;
  }
  return true;
}

bool bench_name_listed(const char *list, const char *name) {
  for (const char *p = list;; ++p) {
    size_t length = strcspn(p, ",");
    if (same_name(p, length, name)) return true;
    p += length;
    if (!*p) return false;
  }
}

bool bench_selected(const bench *b, const char *name) {
  const char *only = b->options.only;
  if (!only || bench_name_listed(only, name)) return true;
  if (strcmp(name, BENCH_SHAPES_NAME) != 0) return false;
  for (size_t i = 0; i < bench_num_shapes; ++i)
    if (bench_name_listed(only, bench_shapes[i].name)) return true;
  return false;
}

bool bench_shape_selected(const bench *b, const bench_shape *shape) {
  const char *only = b->options.only;
  return !only || bench_name_listed(only, BENCH_SHAPES_NAME) ||
         bench_name_listed(only, shape->name);
}

/* ---- the device -----------------------------------------------------------
 */

cl_kernel bench_kernel(const bench *b, const char *source, const char *name,
                       cl_program *program) {
  cl_int error = CL_SUCCESS;
  cl_device_id id = clbt_device_id(b->device);
  *program = clCreateProgramWithSource(b->context, 1, &source, NULL, &error);
  bench_check_cl(error, "clCreateProgramWithSource");
  bench_check_cl(clBuildProgram(*program, 1, &id, "", NULL, NULL),
                 "clBuildProgram");
  cl_kernel kernel = clCreateKernel(*program, name, &error);
  bench_check_cl(error, "clCreateKernel");
  return kernel;
}

/*
 * The selected device as clbt_device_open gives it (an in-order queue
 * without profiling, where calls are timed), and a second handle on the
 * same context with a profiling queue, for device times.
 */
void bench_open(bench *b) {
  bench_check(clbt_device_open(NULL, &b->device), "clbt_device_open");
  cl_device_id id = clbt_device_id(b->device);
  cl_int error = CL_SUCCESS;
  b->context = clbt_device_context(b->device);
  b->queue = clbt_device_queue(b->device);
  b->profiling_queue =
      clCreateCommandQueue(b->context, id, CL_QUEUE_PROFILING_ENABLE, &error);
  bench_check_cl(error, "clCreateCommandQueue");
  bench_check(
      clbt_device_wrap(b->context, id, b->profiling_queue, &b->profiled),
      "clbt_device_wrap");
  b->empty = bench_kernel(b, "__kernel void bench_empty(void) {}",
                          "bench_empty", &b->empty_program);
  char selector[CLBT_SELECTOR_SIZE] = "?", name[256] = "?", driver[128] = "?";
  clbt_device_selector(id, selector, sizeof selector);
  clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  clGetDeviceInfo(id, CL_DRIVER_VERSION, sizeof driver - 1, driver, NULL);
  report *device = report_object(b->root, "device");
  report_string(device, "name", name);
  report_string(device, "selector", selector);
  report_string(device, "driver", driver);
  report_uint(device, "runs", b->options.runs);
}

void bench_close(bench *b) {
  clReleaseKernel(b->empty);
  clReleaseProgram(b->empty_program);
  clbt_device_release(b->profiled);
  clReleaseCommandQueue(b->profiling_queue);
  clbt_device_release(b->device);
}

/* ---- the report ---------------------------------------------------------- */

report *bench_section(bench *b, const char *key, const char *caption) {
  fprintf(stderr, "clbt bench: %s\n", key);
  report *section = report_array(b->root, key);
  report_caption(section, "%s", caption);
  return section;
}

report *bench_record(report *section, const char *name) {
  report *record = report_object(section, NULL);
  report_string(record, "name", name);
  return record;
}

void bench_target(bench *b, const char *what, double value, double limit) {
  if (value < 0) return;
  size_t t = 0;
  while (t < b->num_targets && strcmp(b->targets[t].what, what) != 0) ++t;
  if (t == b->num_targets) {
    if (t == BENCH_MAX_TARGETS) {
      fprintf(stderr, "clbt bench: more than %d targets\n", BENCH_MAX_TARGETS);
      exit(1);
    }
    b->targets[b->num_targets++] = (bench_target_figure){what, value, limit};
  } else if (value > b->targets[t].value) {
    b->targets[t].value = value;
  }
}

void bench_report_targets(bench *b) {
  report *section = report_array(b->root, "targets");
  report_caption(section,
                 "the PoCL ones; on a GPU the same ratios, for reading");
  for (size_t t = 0; t < b->num_targets; ++t) {
    const bench_target_figure *target = &b->targets[t];
    report *record = bench_record(section, target->what);
    report_number(record, "value", target->value, 4);
    report_number(record, "limit", target->limit, 2);
    report_bool(record, "met", target->value <= target->limit);
  }
}
