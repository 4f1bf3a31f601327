/*
 * The commit section of `clbt bench`: a steady decode step's commit, in
 * clbt's automatic mode and as a whole copy, against the whole copy vLLM
 * makes every step ("seed") and against one small write.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/harness.h"

enum { REQUESTS = 256, KV_BLOCKS = 8192, START = 100 };

/* The seed's side: its whole table on the host, and the buffer it copies
   the table to. */
typedef struct seed_copy {
  int32_t *rows;
  cl_mem buffer;
  size_t bytes;
} seed_copy;

/* A table in `mode` whose every row holds START random ids, committed. */
static clbt_table *filled_table(bench *b, clbt_commit_mode mode) {
  clbt_table_config config = {.block_size = 16,
                              .max_num_reqs = REQUESTS,
                              .max_num_blocks_per_req = KV_BLOCKS,
                              .max_num_batched_tokens = 16};
  clbt_table *table = NULL;
  bench_check(clbt_table_create(b->device, &config, &table),
              "clbt_table_create");
  bench_check(clbt_table_set_commit_mode(table, mode), "set_commit_mode");
  int32_t ids[START];
  for (uint32_t r = 0; r < REQUESTS; ++r) {
    for (int i = 0; i < START; ++i)
      ids[i] = (int32_t)(bench_random(b) % 100000);
    bench_check(clbt_table_append_row(table, r, ids, START), "append_row");
  }
  bench_check(clbt_table_commit(table, REQUESTS), "commit");
  bench_finish(b);
  return table;
}

/* Step i's changes: one row in 16 gains a block; rows restart before they
   fill. */
static void grow_rows(bench *b, clbt_table *table, uint32_t i) {
  for (uint32_t r = i % 16; r < REQUESTS; r += 16) {
    int32_t id = (int32_t)(bench_random(b) % 100000);
    if (clbt_table_row_length(table, r) == KV_BLOCKS)
      bench_check(clbt_table_add_row(table, r, &id, 1), "add_row");
    else
      bench_check(clbt_table_append_row(table, r, &id, 1), "append_row");
  }
}

/* Samples 0, 1 and 2 of each step: its commit, the seed's whole copy and
   one small write, each to completion; returns what the last commit
   moved. */
static clbt_commit_info time_commits(bench *b, clbt_table *table,
                                     const seed_copy *seed) {
  clbt_commit_info info = {0};
  for (uint32_t i = 0; i < b->options.runs; ++i) {
    grow_rows(b, table, i);
    double start = bench_now_us();
    bench_check(clbt_table_commit(table, REQUESTS), "commit");
    bench_finish(b);
    b->samples[0][i] = bench_now_us() - start;
    bench_check(clbt_table_last_commit(table, &info), "last_commit");
    start = bench_now_us();
    bench_check_cl(clEnqueueWriteBuffer(b->queue, seed->buffer, CL_TRUE, 0,
                                        seed->bytes, seed->rows, 0, NULL,
                                        NULL),
                   "seed copy");
    b->samples[1][i] = bench_now_us() - start;
    start = bench_now_us();
    bench_check_cl(clEnqueueWriteBuffer(b->queue, seed->buffer, CL_TRUE, 0, 64,
                                        seed->rows, 0, NULL, NULL),
                   "small write");
    b->samples[2][i] = bench_now_us() - start;
  }
  return info;
}

/* One mode's record from time_commits' samples; AUTO's ratios are also
   the targets'. */
static void report_mode(bench *b, report *section, const char *name,
                        clbt_commit_mode mode, clbt_commit_info info,
                        size_t seed_bytes) {
  uint32_t runs = b->options.runs;
  double us = bench_median(b->samples[0], runs),
         seed_us = bench_median(b->samples[1], runs);
  double small_us = bench_median(b->samples[2], runs);
  report *record = bench_record(section, name);
  report_uint(record, "bytes", info.bytes);
  report_uint(record, "seed_bytes", seed_bytes);
  report_number(record, "us", us, 1);
  report_number(record, "seed_us", seed_us, 1);
  report_number(record, "small_write_us", small_us, 2);
  report_number(record, "bytes_over_seed", (double)info.bytes / seed_bytes,
                5);
  report_number(record, "us_over_seed", us / seed_us, 4);
  report_number(record, "us_over_small_write", us / small_us, 2);
  if (mode == CLBT_COMMIT_AUTO) {
    bench_target(b, "steady decode commit bytes / vLLM's whole copy",
                 (double)info.bytes / seed_bytes, 0.02);
    bench_target(b, "steady decode commit time / one small write",
                 us / small_us, 2.0);
  }
}

/*
 * The steady decode step: 256 requests, width 8192, 1 row in 16
 * gains a block per step; against the whole copy the seed makes every step
 * and against one small write.
 */
static void bench_commit(bench *b) {
  static const clbt_commit_mode modes[] = {CLBT_COMMIT_AUTO, CLBT_COMMIT_WHOLE};
  static const char *const names[] = {"auto", "whole"};
  seed_copy seed = {NULL, NULL,
                    (size_t)REQUESTS * KV_BLOCKS * sizeof(int32_t)};
  seed.rows = calloc(seed.bytes, 1);
  cl_int error = CL_SUCCESS;
  seed.buffer =
      clCreateBuffer(b->context, CL_MEM_READ_WRITE, seed.bytes, NULL, &error);
  bench_check_cl(error, "clCreateBuffer");
  if (!seed.rows) bench_die("calloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  char caption[200];
  snprintf(
      caption, sizeof caption,
      "a steady decode step (%d requests, width %d, 1 row in 16 gains a "
      "block), medians of %u steps, commit + clFinish, microseconds; seed: "
      "the whole copy vLLM makes every step",
      REQUESTS, KV_BLOCKS, (unsigned)b->options.runs);
  report *section = bench_section(b, "commit", caption);
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; ++m) {
    clbt_table *table = filled_table(b, modes[m]);
    clbt_commit_info info = time_commits(b, table, &seed);
    report_mode(b, section, names[m], modes[m], info, seed.bytes);
    clbt_table_destroy(table);
  }
  clReleaseMemObject(seed.buffer);
  free(seed.rows);
}

const bench_section_entry bench_commit_section = {"commit", bench_commit};
