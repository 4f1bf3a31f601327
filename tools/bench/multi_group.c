/*
 * The multi-group section of `clbt bench`: 1, 2 and 4 groups mapped in one
 * launch against group by group.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness.h"

/* A multi-group table on device with every row of every group full. */
static clbt_multi_table *full_multi_table(
    bench *b, clbt_device *device, const clbt_multi_table_config *config) {
  clbt_multi_table *table = NULL;
  bench_check(clbt_multi_table_create(device, config, &table), "multi create");
  for (uint32_t g = 0; g < config->num_groups; ++g) {
    clbt_table *group = clbt_multi_table_group(table, g);
    uint32_t kv_blocks = config->groups[g].max_num_blocks;
    int32_t *ids = malloc(kv_blocks * sizeof *ids);
    if (!ids) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
    for (uint32_t r = 0; r < config->max_num_reqs; ++r) {
      for (uint32_t i = 0; i < kv_blocks; ++i)
        ids[i] = (int32_t)(bench_random(b) % 100000);
      bench_check(clbt_table_add_row(group, r, ids, kv_blocks), "add_row");
    }
    free(ids);
  }
  bench_check(clbt_multi_table_commit(table, config->max_num_reqs),
              "multi commit");
  return table;
}

/* What the calls below need: the table, its group count, the batch. */
typedef struct multi_group_call {
  clbt_multi_table *table;
  uint32_t num_groups;
  const bench_batch *batch;
} multi_group_call;

/* Every group's slot mapping in one launch. */
static void run_one_launch(bench *b, void *context, cl_event *event) {
  (void)b;
  const multi_group_call *c = context;
  bench_check(clbt_multi_table_enqueue_slot_mapping(
                  c->table, c->batch->num_reqs,
                  c->batch->query_start_loc_buffer,
                  c->batch->positions_buffer, c->batch->num_tokens, 0, NULL,
                  event),
              "multi slot mapping");
}

/* The same, group by group. */
static void run_group_by_group(bench *b, void *context, cl_event *event) {
  (void)b, (void)event;
  const multi_group_call *c = context;
  for (uint32_t g = 0; g < c->num_groups; ++g)
    bench_check(clbt_table_compute_slot_mapping(
                    clbt_multi_table_group(c->table, g), c->batch->num_reqs,
                    c->batch->query_start_loc_buffer,
                    c->batch->positions_buffer, c->batch->num_tokens),
                "group slot mapping");
}

/*
 * 1, 2 and 4 groups (16, hybrid 32 over 16, 64, 128), one launch against
 * group by group, on a decode and a mixed batch of 256 requests: per-group
 * work is small in the first and large in the second.
 */
static void bench_multi_group(bench *b) {
  static const clbt_group_config group_menu[4] = {
      {.block_size = 16, .max_num_blocks = BENCH_MAX_MODEL_LEN / 16},
      {.block_size = 32,
       .kernel_block_size = 16,
       .max_num_blocks = BENCH_MAX_MODEL_LEN / 32},
      {.block_size = 64, .max_num_blocks = BENCH_MAX_MODEL_LEN / 64},
      {.block_size = 128, .max_num_blocks = BENCH_MAX_MODEL_LEN / 128}};
  static const uint32_t counts[] = {1, 2, 4};
  static const struct {
    const char *name;
    uint32_t tokens_per_request;
  } batches[] = {{"decode-256", 1}, {"mixed-256-in-8192", 32}};
  char caption[200];
  snprintf(caption, sizeof caption,
           "medians of %u runs, microseconds, enqueue to completion; device: "
           "one launch on the profiling queue",
           (unsigned)b->options.runs);
  report *section = bench_section(b, "multi_group", caption);
  for (size_t k = 0; k < sizeof batches / sizeof batches[0]; ++k) {
    bench_batch batch = bench_make_batch(b, 256, batches[k].tokens_per_request);
    double one_group_us = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
      clbt_multi_table_config config = {.max_num_reqs = 256,
                                        .max_num_batched_tokens = 16384,
                                        .num_groups = counts[c],
                                        .groups = group_menu};
      multi_group_call call = {full_multi_table(b, b->device, &config),
                               counts[c], &batch};
      const bench_call calls[] = {
          {run_one_launch, &call, BENCH_TO_COMPLETION},
          {run_group_by_group, &call, BENCH_TO_COMPLETION},
          {run_one_launch, &call, BENCH_DEVICE}};
      double medians[3];
      bench_time(b, 2, calls, medians);
      clbt_multi_table_destroy(call.table);
      call.table = full_multi_table(b, b->profiled, &config);
      bench_time(b, 1, calls + 2, medians + 2);
      clbt_multi_table_destroy(call.table);
      double together = medians[0], apart = medians[1], device = medians[2];
      if (counts[c] == 1) one_group_us = together;
      char name[64];
      snprintf(name, sizeof name, "%s-groups-%u", batches[k].name,
               (unsigned)counts[c]);
      report *record = bench_record(section, name);
      report_number(record, "one_launch_us", together, 1);
      report_number(record, "group_by_group_us", apart, 1);
      report_number(record, "one_launch_over_group_by_group", together / apart,
                    2);
      report_number(record, "one_launch_over_one_group",
                    together / one_group_us, 2);
      report_number(record, "one_launch_device_us", device, 2);
      if (counts[c] == 4)
        bench_target(b,
                     "4 groups in one launch / one group's call, worse batch",
                     together / one_group_us, 1.3);
    }
    bench_free_batch(&batch);
  }
}

const bench_section_entry bench_multi_group_section = {"multi_group",
                                                       bench_multi_group};
