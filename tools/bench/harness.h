/*
 * `clbt bench`: the timing harness its sections share, which knows no
 * section. Every figure is a median over many runs, and every ratio is
 * taken from measurements interleaved in one process (a shared, noisy
 * machine moves both sides of a ratio alike). A section (a file of
 * tools/bench/, an entry of bench.c's table) adds its arrays of records to
 * the report and its figures to the targets. Any failure ends the
 * process with a message: a benchmark with a failed call has nothing to
 * report.
 */
#ifndef TOOL_BENCH_HARNESS_H
#define TOOL_BENCH_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clbt/clbt.h"
#include "report.h"

/* Rows as wide as a context of this many tokens. */
#define BENCH_MAX_MODEL_LEN 131072
/* Calls one bench_time interleaves at most. */
#define BENCH_MAX_CALLS 8
/* Targets a report holds at most. */
#define BENCH_MAX_TARGETS 16

/* A batch shape, named as vLLM's Triton slot-mapping kernel's benchmark
   (tools/gpu/bench.sh) names it, so that figures compare by name. */
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
  const char *only;        /* --only's names, or NULL: every section */
  const char *plot_path;   /* --plot's file, or NULL */
  const char *compare_dir; /* --compare's directory, or NULL */
} bench_options;

/* A ratio the project sets a target for: met when value <= limit. */
typedef struct bench_target_figure {
  const char *what; /* a string that outlives the bench */
  double value, limit;
} bench_target_figure;

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
  bench_target_figure targets[BENCH_MAX_TARGETS]; /* each one's worst */
  size_t num_targets;
  size_t failures; /* what sections found wrong: the exit status is 1 */
} bench;

/* A section of the bench, an entry of bench.c's table: run adds its
   records to the report. --only names it by name, the report's name for
   it (bench_selected); NULL: a section that an option asks for instead
   (the plot, the Triton comparison). */
typedef struct bench_section_entry {
  const char *name;
  void (*run)(bench *b);
} bench_section_entry;

/* ---- the harness (harness.c) --------------------------------------------- */

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
/* The name --only gives every shape at once: the name of the section
   whose records are the shapes (the slot mapping's). */
#define BENCH_SHAPES_NAME "slot_mapping"
/* Whether a comma-separated list names name, '-' and '_' alike (so
   row-operations names row_operations). */
bool bench_name_listed(const char *list, const char *name);
/* Whether --only names this section (no --only: every one); the shapes'
   section is also selected by a shape's name. */
bool bench_selected(const bench *b, const char *name);
/* Whether --only names this shape, or every shape (BENCH_SHAPES_NAME). */
bool bench_shape_selected(const bench *b, const bench_shape *shape);

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
/* A read-write device buffer of bytes, each pattern_size bytes of it the
   pattern (a fill enqueued on the bench's queue, not waited for). */
cl_mem bench_filled_buffer(const bench *b, size_t bytes, const void *pattern,
                           size_t pattern_size);

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

/* A figure for a target; the report's "targets" keep each target's
   worst (its largest value), in the order the targets first came. A
   negative value is no measurement and adds nothing. */
void bench_target(bench *b, const char *what, double value, double limit);
/* Adds the targets to the report: what, value, limit and whether met. */
void bench_report_targets(bench *b);

#endif /* TOOL_BENCH_HARNESS_H */
