/*
 * The commit section of `clbt bench`: a steady decode step's commit, in
 * clbt's automatic mode and as a whole copy, against the whole copy vLLM
 * makes every step ("seed") and against one small write.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

/*
 * The steady decode step: 256 requests, width 8192, 1 row in 16
 * gains a block per step; against the whole copy the seed makes every step
 * and against one small write.
 */
void bench_commit(bench *b) {
  if (!bench_selected(b, "commit")) return;
  enum { REQUESTS = 256, KV_BLOCKS = 8192, START = 100 };
  uint32_t runs = b->options.runs;
  static const clbt_commit_mode modes[] = {CLBT_COMMIT_AUTO, CLBT_COMMIT_WHOLE};
  static const char *const names[] = {"auto", "whole"};
  clbt_table_config config = {.block_size = 16,
                              .max_num_reqs = REQUESTS,
                              .max_num_blocks_per_req = KV_BLOCKS,
                              .max_num_batched_tokens = 16};
  size_t whole_bytes = (size_t)REQUESTS * KV_BLOCKS * sizeof(int32_t);
  int32_t *seed_rows = calloc(whole_bytes, 1);
  cl_int error = CL_SUCCESS;
  cl_mem seed_buffer =
      clCreateBuffer(b->context, CL_MEM_READ_WRITE, whole_bytes, NULL, &error);
  bench_check_cl(error, "clCreateBuffer");
  if (!seed_rows) bench_die("calloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  char caption[200];
  snprintf(
      caption, sizeof caption,
      "a steady decode step (%d requests, width %d, 1 row in 16 gains a "
      "block), medians of %u steps, commit + clFinish, microseconds; seed: "
      "the whole copy vLLM makes every step",
      REQUESTS, KV_BLOCKS, (unsigned)runs);
  report *section = bench_section(b, "commit", caption);
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; ++m) {
    clbt_table *table = NULL;
    bench_check(clbt_table_create(b->device, &config, &table),
                "clbt_table_create");
    bench_check(clbt_table_set_commit_mode(table, modes[m]), "set_commit_mode");
    int32_t ids[START];
    for (uint32_t r = 0; r < REQUESTS; ++r) {
      for (int i = 0; i < START; ++i)
        ids[i] = (int32_t)(bench_random(b) % 100000);
      bench_check(clbt_table_append_row(table, r, ids, START), "append_row");
    }
    bench_check(clbt_table_commit(table, REQUESTS), "commit");
    bench_finish(b);
    clbt_commit_info info = {0};
    for (uint32_t i = 0; i < runs; ++i) {
      /* One row in 16 gains a block; rows restart before they fill. */
      for (uint32_t r = i % 16; r < REQUESTS; r += 16) {
        int32_t id = (int32_t)(bench_random(b) % 100000);
        if (clbt_table_row_length(table, r) == KV_BLOCKS)
          bench_check(clbt_table_add_row(table, r, &id, 1), "add_row");
        else
          bench_check(clbt_table_append_row(table, r, &id, 1), "append_row");
      }
      double start = bench_now_us();
      bench_check(clbt_table_commit(table, REQUESTS), "commit");
      bench_finish(b);
      b->samples[0][i] = bench_now_us() - start;
      bench_check(clbt_table_last_commit(table, &info), "last_commit");
      start = bench_now_us();
      bench_check_cl(
          clEnqueueWriteBuffer(b->queue, seed_buffer, CL_TRUE, 0, whole_bytes,
                               seed_rows, 0, NULL, NULL),
          "seed copy");
      b->samples[1][i] = bench_now_us() - start;
      start = bench_now_us();
      bench_check_cl(clEnqueueWriteBuffer(b->queue, seed_buffer, CL_TRUE, 0, 64,
                                          seed_rows, 0, NULL, NULL),
                     "small write");
      b->samples[2][i] = bench_now_us() - start;
    }
    double us = bench_median(b->samples[0], runs),
           seed_us = bench_median(b->samples[1], runs);
    double small_us = bench_median(b->samples[2], runs);
    report *record = bench_record(section, names[m]);
    report_uint(record, "bytes", info.bytes);
    report_uint(record, "seed_bytes", whole_bytes);
    report_number(record, "us", us, 1);
    report_number(record, "seed_us", seed_us, 1);
    report_number(record, "small_write_us", small_us, 2);
    report_number(record, "bytes_over_seed", (double)info.bytes / whole_bytes,
                  5);
    report_number(record, "us_over_seed", us / seed_us, 4);
    report_number(record, "us_over_small_write", us / small_us, 2);
    if (modes[m] == CLBT_COMMIT_AUTO) {
      b->commit_bytes_over_seed = (double)info.bytes / whole_bytes;
      b->commit_over_small_write = us / small_us;
    }
    clbt_table_destroy(table);
  }
  clReleaseMemObject(seed_buffer);
  free(seed_rows);
}
