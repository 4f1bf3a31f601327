/*
 * `clbt bench`: the timing harness its sections share. Every figure is a
 * median over many runs, and every ratio is taken from measurements
 * interleaved in one process (a shared, noisy machine moves both sides of
 * a ratio alike). Each section (bench_*.c) adds one array of records to
 * the report; bench.c runs them, sets the targets and renders the report.
 * Any failure ends the process with a message: a benchmark with a failed
 * call has nothing to report.
 */
#ifndef TOOL_BENCH_H
#define TOOL_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clbt/clbt.h"
#include "report.h"

/* Rows as wide as a context of this many tokens. */
#define BENCH_MAX_MODEL_LEN 131072
/* Calls one bench_time interleaves at most. */
#define BENCH_MAX_CALLS 8

/* A batch shape, named as vLLM's Triton slot-mapping kernel's benchmark
   (tools/gpu_bench.sh) names it, so that figures compare by name. */
typedef struct bench_shape {
  const char *name;
  uint32_t requests, tokens_per_request, max_tokens;
  uint32_t block_size, kernel_block_size;
  uint32_t cp_world_size, cp_rank, cp_interleave_size;
} bench_shape;

extern const bench_shape bench_shapes[];
extern const size_t bench_num_shapes;

typedef struct bench_options {
  uint64_t runs;
  const char *json_path, *plot_path, *only, *compare_dir;
} bench_options;

typedef struct bench {
  bench_options options;
  clbt_device *device; /* as clbt_device_open makes it: calls are timed here */
  clbt_device *profiled; /* the same context, a profiling queue: device times */
  cl_context context;
  cl_command_queue queue, profiling_queue;
  cl_program empty_program;
  cl_kernel empty;
  uint64_t rng;
  double clock_start; /* of the call being timed */
  double clock_stop;  /* where bench_stop_clock ended it; negative: not */
  double *samples[BENCH_MAX_CALLS]; /* scratch, runs each */
  report *root;       /* the result */
  /* the figures the targets are set for; negative: not measured */
  double decode_call_over_empty, tokens_call_over_host_plus_empty;
  double commit_bytes_over_seed, commit_over_small_write;
  double four_groups_over_one, steady_step_over_empty;
  double export_step_over_empty, still_step_over_empty;
  double churn_step_over_limit, step_enqueue_over_limit;
  double step_updates_over_limit, steady_step_calls;
  double step_calls_over_budget, step_set_kernel_arg;
} bench;

/* ---- the harness (bench_harness.c) ----------------------------------------
 */

/* Opens the selected device twice over one context (see bench) and builds
   the empty kernel; adds "device" to the report. */
void bench_open(bench *b);
void bench_close(bench *b);

double bench_now_us(void);
/* Sorts values. */
double bench_median(double *values, size_t count);
uint32_t bench_random(bench *b);
/* malloc that ends the process when memory runs out (never NULL). */
void *bench_allocate(size_t bytes);
/* Whether --only names this shape or section (no --only: all of them). */
bool bench_selected(const bench *b, const char *name);

/* Ends the process: "clbt bench: <what> failed: <status>: <message>". */
void bench_die(const char *what, clbt_status status);
void bench_check(clbt_status status, const char *what);
void bench_check_cl(cl_int error, const char *what);
void bench_finish(const bench *b);

/* A command's time on the device: waits for it, reads its profiling
   event, and releases the event. */
double bench_device_time_us(cl_event event);

/* What bench_time measures of a call, in microseconds. */
typedef enum bench_measure {
  BENCH_TO_COMPLETION, /* the call and clFinish of the timed queue */
  BENCH_ENQUEUE_ONLY,  /* the call alone; clFinish follows, untimed */
  BENCH_HOST,          /* the call alone, which enqueues nothing */
  BENCH_DEVICE         /* the device time of the command whose profiling
                          event the call sets */
} bench_measure;

/* One call bench_time runs: run(b, context, event) enqueues it; event is
   NULL unless measure is BENCH_DEVICE, where run must set it. A run that
   measures only its end calls bench_restart_clock. */
typedef struct bench_call {
  void (*run)(bench *b, void *context, cl_event *event);
  void *context;
  bench_measure measure;
} bench_call;

/* Leaves what the running call did so far out of its time, once the queue
   has finished it: for a call whose setup (a step's row updates) must not
   count. */
void bench_restart_clock(bench *b);
/* Ends the running call's time here: what it does after (the step that
   commits row updates timed alone) is left out. */
void bench_stop_clock(bench *b);

/* Runs the calls in turn, options.runs times (interleaved: a noisy machine
   moves them alike); medians[i] gets call i's median. */
void bench_time(bench *b, size_t count, const bench_call *calls,
                double *medians);

/* Kernel name of source, built on the bench's device; *program gets its
   program (the caller releases both). */
cl_kernel bench_kernel(const bench *b, const char *source, const char *name,
                       cl_program *program);

/* A bench_call's run: the empty kernel, on the timed queue, or on the
   profiling queue when event is not NULL. */
void bench_run_empty(bench *b, void *context, cl_event *event);

/* Every row full of random KV blocks, the same blocks for the same seed. */
clbt_table *bench_full_table(bench *b, clbt_device *device,
                             const clbt_table_config *config,
                             uint32_t kv_blocks, uint64_t seed);
/* A table config for a shape, and its blocks per row. */
clbt_table_config bench_shape_config(const bench_shape *s, uint32_t *kv_blocks);
/* A read-only device buffer holding bytes of data (a blocking write). */
cl_mem bench_upload(const bench *b, const void *data, size_t bytes);

typedef struct bench_batch {
  uint32_t num_reqs, num_tokens;
  int32_t *query_start_loc;
  int64_t *positions;
  cl_mem query_start_loc_buffer, positions_buffer;
} bench_batch;

/* requests x per_request tokens, each request at a random place. */
bench_batch bench_make_batch(bench *b, uint32_t requests, uint32_t per_request);
void bench_free_batch(bench_batch *batch);

/* A section of the report: an array under key, with a caption for text;
   says on stderr that it starts (a section can take minutes). */
report *bench_section(bench *b, const char *key, const char *caption);
/* A record of a section, named. */
report *bench_record(report *section, const char *name);

/* ---- OpenCL calls per step (bench_calls.c) ---------------------------------
 */

/* The library's OpenCL calls in each step of a series, counted by the call
   counter (call_counter.h) around the step's parts. A step is counted in
   three marks: bench_calls_updates before its row updates,
   bench_calls_step before clbt_multi_table_enqueue_step, bench_calls_done
   after it, with the writes the bench itself made of the step's batch and
   the block ids its row updates wrote. Each mark costs tens of
   nanoseconds. Steps past capacity are not counted. */
typedef struct bench_calls bench_calls;

bench_calls *bench_calls_create(uint64_t capacity);
void bench_calls_free(bench_calls *calls); /* NULL is fine */
void bench_calls_updates(bench_calls *calls);
void bench_calls_step(bench_calls *calls);
void bench_calls_done(bench_calls *calls, uint32_t batch_writes,
                      uint32_t changed_ids);

/* Says in text which calls the series' steps made: per function, the
   middle step's count; or that the build does not count. */
void bench_calls_describe(const bench_calls *calls, char *text, size_t size);

/* The series of a section, a row each, written when all have run (their
   columns are every OpenCL function some row's steps called). */
typedef struct bench_calls_table bench_calls_table;

bench_calls_table *bench_calls_table_create(void);
void bench_calls_table_free(bench_calls_table *table); /* NULL is fine */
/* Summarises a series as the next row, named, and judges each of its
   steps: a steady one against issue 42's budget (the launch and one more
   call, clSetKernelArg counted), any other against issue 18's; exports:
   its steps had CLBT_STEP_EXPORT. Adds nothing where the build does not
   count. */
void bench_calls_table_add(bench_calls_table *table, const bench_calls *calls,
                           const char *name, bool exports, bool steady);
/* Whether the series' middle step uploaded (a write or a map); false
   where the build does not count. */
bool bench_calls_uploads(const bench_calls *calls);
/* Adds each row's counts to section (per function, the middle step's) and
   its verdict to targets; sets b's worst figures. */
void bench_calls_table_write(bench *b, const bench_calls_table *table,
                             report *section, report *targets);

/* ---- the sections -----------------------------------------------------------
 */

void bench_slot_mapping(bench *b);   /* bench_slot_mapping.c */
void bench_plot(bench *b);           /* bench_slot_mapping.c */
void bench_completion(bench *b);     /* bench_completion.c */
void bench_commit(bench *b);         /* bench_commit.c */
void bench_multi_group(bench *b);    /* bench_multi_group.c */
void bench_row_operations(bench *b); /* bench_row_operations.c */
void bench_export(bench *b);         /* bench_export.c */
void bench_step(bench *b);           /* bench_step.c */
void bench_slots(bench *b);          /* bench_slots.c */
void bench_arguments(bench *b);      /* bench_arguments.c */
void bench_kv_cache(bench *b);       /* bench_kv_cache.c */
/* Returns the number of slots that differ from the Triton kernel's. */
size_t bench_triton_compare(bench *b); /* bench_triton.c */

#endif /* TOOL_BENCH_H */
