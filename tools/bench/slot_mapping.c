/*
 * The slot-mapping section of `clbt bench`: each shape's call against the
 * empty kernel on the same queue and against the host loop, with device
 * times from the profiling queue; and the plot data, the same figures for
 * decode batches of 1 to 1024 requests.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"

typedef struct call_times {
  double call, empty, host, device, empty_device;
} call_times;

/* What the calls below need: the table (or its twin on the profiling
   queue), the batch, and the host loop's output. */
typedef struct slot_mapping_call {
  clbt_table *table, *profiled;
  const bench_batch *batch;
  int64_t *host;
} slot_mapping_call;

static void run_slot_mapping(bench *b, void *context, cl_event *event) {
  (void)b;
  const slot_mapping_call *c = context;
  bench_check(clbt_table_enqueue_slot_mapping(
                  event ? c->profiled : c->table, c->batch->num_reqs,
                  c->batch->query_start_loc_buffer,
                  c->batch->positions_buffer, c->batch->num_tokens, 0, NULL,
                  event),
              "clbt_table_enqueue_slot_mapping");
}

static void run_host_loop(bench *b, void *context, cl_event *event) {
  (void)b, (void)event;
  const slot_mapping_call *c = context;
  bench_check(clbt_table_compute_slot_mapping_host(
                  c->table, c->batch->num_reqs, c->batch->query_start_loc,
                  c->batch->positions, c->batch->num_tokens, c->host),
              "clbt_table_compute_slot_mapping_host");
}

/*
 * Slot mapping, the empty kernel and the host loop, interleaved; then the
 * device times of the kernel (on `profiled`, the same table on the
 * profiling queue) and of the empty kernel.
 */
static call_times time_slot_mapping(bench *b, clbt_table *table,
                                    clbt_table *profiled,
                                    const bench_batch *batch,
                                    uint32_t max_tokens) {
  slot_mapping_call c = {table, profiled, batch,
                         malloc(max_tokens * sizeof(int64_t))};
  if (!c.host) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  const bench_call calls[] = {
      {run_slot_mapping, &c, BENCH_TO_COMPLETION},
      {bench_run_empty, NULL, BENCH_TO_COMPLETION},
      {run_host_loop, &c, BENCH_HOST},
      {run_slot_mapping, &c, BENCH_DEVICE},
      {bench_run_empty, NULL, BENCH_DEVICE}};
  double medians[5];
  bench_time(b, 3, calls, medians);
  bench_time(b, 2, calls + 3, medians + 3);
  free(c.host);
  return (call_times){.call = medians[0],
                      .empty = medians[1],
                      .host = medians[2],
                      .device = medians[3],
                      .empty_device = medians[4]};
}

static void bench_slot_mapping(bench *b) {
  char caption[160];
  snprintf(caption, sizeof caption,
           "medians of %u runs, microseconds; call = enqueue to completion "
           "(clFinish)",
           (unsigned)b->options.runs);
  report *section = bench_section(b, "slot_mapping", caption);
  for (size_t i = 0; i < bench_num_shapes; ++i) {
    const bench_shape *s = &bench_shapes[i];
    if (!bench_shape_selected(b, s)) continue;
    uint32_t kv_blocks;
    clbt_table_config config = bench_shape_config(s, &kv_blocks);
    uint64_t seed = bench_random(b);
    clbt_table *table =
        bench_full_table(b, b->device, &config, kv_blocks, seed);
    clbt_table *profiled =
        bench_full_table(b, b->profiled, &config, kv_blocks, seed);
    bench_batch batch = bench_make_batch(b, s->requests, s->tokens_per_request);
    call_times t = time_slot_mapping(b, table, profiled, &batch, s->max_tokens);
    report *record = bench_record(section, s->name);
    report_uint(record, "tokens", batch.num_tokens);
    report_number(record, "call_us", t.call, 1);
    report_number(record, "empty_us", t.empty, 1);
    report_number(record, "host_us", t.host, 1);
    report_number(record, "device_us", t.device, 2);
    report_number(record, "empty_device_us", t.empty_device, 2);
    report_number(record, "call_over_empty", t.call / t.empty, 2);
    report_number(record, "call_over_host", t.call / t.host, 2);
    report_number(record, "call_over_host_plus_empty",
                  t.call / (t.host + t.empty), 2);
    if (strncmp(s->name, "decode-", 7) == 0)
      bench_target(b, "slot mapping / empty kernel, worst decode shape",
                   t.call / t.empty, 2.0);
    if (strcmp(s->name, "tokens-16384") == 0)
      bench_target(b,
                   "slot mapping / (host loop + empty kernel), tokens-16384",
                   t.call / (t.host + t.empty), 1.5);
    bench_free_batch(&batch);
    clbt_table_destroy(table);
    clbt_table_destroy(profiled);
  }
}

/* ---- plot data: time per call against batch size --------------------------
 */

static void bench_plot(bench *b) {
  if (!b->options.plot_path) return;
  FILE *plot = fopen(b->options.plot_path, "w");
  if (!plot) {
    fprintf(stderr, "clbt bench: cannot write %s: %s\n", b->options.plot_path,
            strerror(errno));
    exit(1);
  }
  fprintf(stderr, "clbt bench: plot\n");
  fprintf(plot,
          "# requests  slot_mapping_us  empty_kernel_us  host_loop_us"
          "  (decode, block 16, 16384-token buffer)\n");
  bench_shape s = {"plot", 1, 1, 16384, 16, 16, 1, 0, 1};
  uint32_t kv_blocks;
  clbt_table_config config = bench_shape_config(&s, &kv_blocks);
  clbt_table *table = bench_full_table(b, b->device, &config, kv_blocks, 2);
  clbt_table *profiled =
      bench_full_table(b, b->profiled, &config, kv_blocks, 2);
  for (uint32_t requests = 1; requests <= 1024; requests *= 2) {
    bench_batch batch = bench_make_batch(b, requests, 1);
    call_times t = time_slot_mapping(b, table, profiled, &batch, s.max_tokens);
    fprintf(plot, "%u %.2f %.2f %.2f\n", (unsigned)requests, t.call, t.empty,
            t.host);
    bench_free_batch(&batch);
  }
  clbt_table_destroy(table);
  clbt_table_destroy(profiled);
  if (fclose(plot) != 0) {
    fprintf(stderr, "clbt bench: cannot write %s: %s\n", b->options.plot_path,
            strerror(errno));
    exit(1);
  }
  report_string(b->root, "plot", b->options.plot_path);
}

/* Its records are the shapes --only names (every one by its name); the
   plot runs with --plot. */
const bench_section_entry bench_slot_mapping_section = {BENCH_SHAPES_NAME,
                                                        bench_slot_mapping};
const bench_section_entry bench_plot_section = {NULL, bench_plot};
