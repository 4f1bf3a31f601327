/*
 * The row-operation section of `clbt bench`: host row operations per
 * second in a decode step's mix.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness.h"

static void bench_row_operations(bench *b) {
  enum { ROWS = 1024, KV_BLOCKS = 8192, OPERATIONS = 200000 };
  clbt_table_config config = {.block_size = 16,
                              .max_num_reqs = ROWS,
                              .max_num_blocks_per_req = KV_BLOCKS,
                              .max_num_batched_tokens = 16};
  clbt_table *table = NULL;
  bench_check(clbt_table_create(b->device, &config, &table),
              "clbt_table_create");
  int32_t ids[32];
  for (int i = 0; i < 32; ++i) ids[i] = 1000 + i;
  /* A decode step's mix: mostly one-block appends, some new requests of 32
     blocks, finished ones cleared, the batch condensed by moves and swaps. */
  double start = bench_now_us();
  for (uint32_t i = 0; i < OPERATIONS; ++i) {
    uint32_t row = bench_random(b) % ROWS, other = bench_random(b) % ROWS;
    uint32_t kind = bench_random(b) % 100;
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
    bench_check(status, "row operation");
  }
  double seconds = (bench_now_us() - start) / 1e6;
  char caption[200];
  snprintf(caption, sizeof caption,
           "%d of a decode mix: 80%% append 1, 8%% add 32, 6%% clear, 3%% "
           "move, 3%% swap",
           OPERATIONS);
  report *section = bench_section(b, "row_operations", caption);
  report_number(bench_record(section, "decode-mix"), "operations_per_second",
                OPERATIONS / seconds, 0);
  clbt_table_destroy(table);
}

const bench_section_entry bench_row_operations_section = {"row_operations",
                                                          bench_row_operations};
