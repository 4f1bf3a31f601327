/* The slot-mapping kernel (cl/slot_mapping.cl) on the test device. */
#include "clbt_test.h"
#include "worked_examples.h"

#include <stdlib.h>

/* Uploads a batch, poisons the output, runs the kernel, reads every slot. */
static void run_kernel(clbt_table *table, uint32_t num_reqs,
                       const int32_t *qsl, const int64_t *positions,
                       uint32_t num_tokens, int64_t *slots,
                       uint32_t max_tokens) {
  cl_mem qsl_buffer = clbt_test_buffer((num_reqs + 1) * sizeof *qsl, qsl);
  cl_mem positions_buffer =
      num_tokens ? clbt_test_buffer(num_tokens * sizeof *positions, positions)
                 : NULL;
  clbt_test_poison(clbt_table_slot_mapping(table), max_tokens);
  clbt_assert_ok(clbt_table_compute_slot_mapping(table, num_reqs, qsl_buffer,
                                                 positions_buffer, num_tokens));
  clbt_test_read(clbt_table_slot_mapping(table), max_tokens * sizeof *slots,
                 slots);
  clReleaseMemObject(qsl_buffer);
  if (positions_buffer) clReleaseMemObject(positions_buffer);
}

/* The worked examples, each on a table of at least min_num_reqs requests
   (the examples' own sizes change no slot). */
static void run_worked_examples(uint32_t min_num_reqs) {
  size_t count = 0;
  const clbt_worked_example *examples = clbt_worked_examples(&count);
  for (size_t e = 0; e < count; ++e) {
    clbt_worked_example example = examples[e];
    if (example.config.max_num_reqs < min_num_reqs)
      example.config.max_num_reqs = min_num_reqs;
    uint32_t max_tokens = example.config.max_num_batched_tokens;
    clbt_table *table = clbt_worked_example_table(&example, true);
    int64_t *slots = malloc(max_tokens * sizeof *slots);
    ck_assert_ptr_nonnull(slots);
    run_kernel(table, example.num_reqs, example.query_start_loc,
               example.positions, example.num_tokens, slots, max_tokens);
    for (uint32_t t = 0; t < max_tokens; ++t) {
      int64_t expected = clbt_worked_example_slot(&example, t);
      ck_assert_msg(slots[t] == expected, "%s: slot[%u] is %lld, expected %lld",
                    example.name, t, (long long)slots[t], (long long)expected);
    }
    uint32_t rejected = 0;
    clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
    ck_assert_msg(rejected == example.rejected, "%s: %u rejected, expected %u",
                  example.name, rejected, example.rejected);
    free(slots);
    clbt_table_destroy(table);
  }
}

START_TEST(worked_examples_on_the_device) { run_worked_examples(0); }
END_TEST

/*
 * A table whose query_start_loc (max_num_reqs + 1 ints) takes more than a
 * quarter of the device's local memory searches it in global memory
 * (docs/design.md): local_mem_size / 16 requests are one int too many.
 */
START_TEST(worked_examples_searching_global_memory) {
  cl_ulong local_mem_size = 0;
  ck_assert_int_eq(clGetDeviceInfo(clbt_device_id(clbt_test_device()),
                                   CL_DEVICE_LOCAL_MEM_SIZE,
                                   sizeof local_mem_size, &local_mem_size,
                                   NULL),
                   CL_SUCCESS);
  run_worked_examples((uint32_t)(local_mem_size / 16));
  /* The kernels ran were built for global memory (the newest program). */
  char options[CLBT_PROGRAM_OPTIONS_SIZE];
  clbt_assert_ok(clbt_device_program_options(clbt_test_device(), 0, options,
                                             sizeof options));
  ck_assert_msg(strstr(options, " -DCLBT_QSL_WORDS=0 "), "%s", options);
}
END_TEST

/* Spot values of the long request, worked out by hand. */
START_TEST(request_over_1024_tokens_spot_values) {
  size_t count = 0;
  const clbt_worked_example *examples = clbt_worked_examples(&count);
  const clbt_worked_example *example = NULL;
  for (size_t e = 0; e < count; ++e)
    if (strcmp(examples[e].name, "request over 1024 tokens") == 0)
      example = &examples[e];
  ck_assert_ptr_nonnull(example);
  clbt_table *table = clbt_worked_example_table(example, true);
  int64_t *slots = malloc(2048 * sizeof *slots);
  ck_assert_ptr_nonnull(slots);
  run_kernel(table, 1, example->query_start_loc, example->positions, 1500,
             slots, 2048);
  /* t = 1023: block 63 = id 1189, offset 15; t = 1024: block 64 = id 1192;
     t = 1499: block 93 = id 1279, offset 11 */
  ck_assert_int_eq(slots[0], 16000);
  ck_assert_int_eq(slots[1023], 19039);
  ck_assert_int_eq(slots[1024], 19072);
  ck_assert_int_eq(slots[1499], 20475);
  ck_assert_int_eq(slots[1500], CLBT_PAD_SLOT_ID);
  free(slots);
  clbt_table_destroy(table);
}
END_TEST

/* The kernel reads committed rows: never-committed rows and later host
   edits do not reach it. */
START_TEST(uses_committed_rows_only) {
  clbt_table_config config = {.block_size = 4, .max_num_reqs = 3,
                              .max_num_blocks_per_req = 2,
                              .max_num_batched_tokens = 4};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){5}, 1));
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){6}, 1));
  clbt_assert_ok(clbt_table_commit(table, 1));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){9}, 1));
  int64_t slots[4];
  run_kernel(table, 2, (const int32_t[]){0, 1, 2}, (const int64_t[]){1, 1}, 2,
             slots, 4);
  ck_assert_int_eq(slots[0], 5 * 4 + 1); /* the committed id, not 9 */
  ck_assert_int_eq(slots[1], CLBT_PAD_SLOT_ID); /* row 1: never committed */
  ck_assert_int_eq(slots[2], CLBT_PAD_SLOT_ID);
  ck_assert_int_eq(slots[3], CLBT_PAD_SLOT_ID);
  uint32_t rejected = 0;
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
  ck_assert_uint_eq(rejected, 1);
  clbt_table_destroy(table);
}
END_TEST

/*
 * A hybrid table (block_size 32 in kernel blocks of 16) whose row holds one
 * KV block, 3: kernel blocks 6 and 7, length 2. Positions 5 and 17 are in
 * them (6 x 16 + 5, 7 x 16 + 1); 32 and 48 are in the KV block the row
 * does not hold, whose kernel blocks would be columns 2 and 3: both pad
 * and counted, 32 too although its KV block index (1) is below the row's
 * length in kernel blocks (2).
 */
START_TEST(hybrid_row_ends_at_its_kernel_blocks) {
  clbt_table_config config = {.block_size = 32, .kernel_block_size = 16,
                              .max_num_reqs = 1, .max_num_blocks_per_req = 2,
                              .max_num_batched_tokens = 4};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){3}, 1));
  clbt_assert_ok(clbt_table_commit(table, 1));
  int64_t slots[4];
  run_kernel(table, 1, (const int32_t[]){0, 4},
             (const int64_t[]){5, 17, 32, 48}, 4, slots, 4);
  ck_assert_int_eq(slots[0], 6 * 16 + 5);
  ck_assert_int_eq(slots[1], 7 * 16 + 1);
  ck_assert_int_eq(slots[2], CLBT_PAD_SLOT_ID);
  ck_assert_int_eq(slots[3], CLBT_PAD_SLOT_ID);
  uint32_t rejected = 0;
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
  ck_assert_uint_eq(rejected, 2);
  clbt_table_destroy(table);
}
END_TEST

/*
 * A negative position is the pad id and counted on every rank of a CP
 * group (2 ranks, interleave 1, blocks of 4), -1 as well as -2: read as
 * an unsigned position, -1's bits would fall in rank 1's share and look
 * like rank 0's not to count.
 */
START_TEST(negative_positions_are_counted_on_every_rank) {
  for (uint32_t rank = 0; rank < 2; ++rank) {
    clbt_table_config config = {.block_size = 4, .max_num_reqs = 1,
                                .max_num_blocks_per_req = 2,
                                .max_num_batched_tokens = 2,
                                .cp_world_size = 2, .cp_rank = rank,
                                .cp_interleave_size = 1};
    clbt_table *table = NULL;
    clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
    clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){3}, 1));
    clbt_assert_ok(clbt_table_commit(table, 1));
    int64_t slots[2];
    run_kernel(table, 1, (const int32_t[]){0, 2}, (const int64_t[]){-1, -2},
               2, slots, 2);
    ck_assert_int_eq(slots[0], CLBT_PAD_SLOT_ID);
    ck_assert_int_eq(slots[1], CLBT_PAD_SLOT_ID);
    uint32_t rejected = 0;
    clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
    ck_assert_msg(rejected == 2, "rank %u counted %u", rank, rejected);
    clbt_table_destroy(table);
  }
}
END_TEST

/* The count adds up over calls until reset. */
START_TEST(rejected_count_accumulates_and_resets) {
  clbt_table_config config = {.block_size = 4, .max_num_reqs = 1,
                              .max_num_blocks_per_req = 1,
                              .max_num_batched_tokens = 3};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  int64_t slots[3];
  for (int call = 0; call < 3; ++call)
    run_kernel(table, 1, (const int32_t[]){0, 3}, (const int64_t[]){-5, 7, 0},
               3, slots, 3);
  uint32_t rejected = 0;
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
  ck_assert_uint_eq(rejected, 9); /* the row is empty: 3 tokens, 3 calls */
  clbt_assert_ok(clbt_table_reset_rejected_tokens(table));
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, &rejected));
  ck_assert_uint_eq(rejected, 0);
  clbt_assert_fails(clbt_table_read_rejected_tokens(table, NULL),
                    CLBT_NULL_ARGUMENT, "count");
  clbt_assert_fails(clbt_table_reset_rejected_tokens(NULL), CLBT_NULL_ARGUMENT,
                    "table");
  clbt_table_destroy(table);
}
END_TEST

/* Over all ranks of a CP group every token is local to exactly one rank,
   and each rank's local tokens fill its blocks densely from slot 0. */
START_TEST(cp_partition) {
  static const uint32_t shapes[][2] = {{2, 1}, {2, 4}, {3, 2},
                                       {4, 1}, {4, 16}, {8, 1}};
  enum { TOKENS = 200, BLOCK = 16 };
  int64_t positions[TOKENS];
  for (int t = 0; t < TOKENS; ++t) positions[t] = t;
  const int32_t blocks[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
    uint32_t world = shapes[s][0], interleave = shapes[s][1];
    int owners[TOKENS] = {0};
    for (uint32_t rank = 0; rank < world; ++rank) {
      clbt_table_config config = {
          .block_size = BLOCK, .max_num_reqs = 1, .max_num_blocks_per_req = 14,
          .max_num_batched_tokens = TOKENS, .cp_world_size = world,
          .cp_rank = rank, .cp_interleave_size = interleave};
      clbt_table *table = NULL;
      clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
      clbt_assert_ok(clbt_table_append_row(table, 0, blocks, 14));
      clbt_assert_ok(clbt_table_commit(table, 1));
      int64_t slots[TOKENS];
      run_kernel(table, 1, (const int32_t[]){0, TOKENS}, positions, TOKENS,
                 slots, TOKENS);
      /* Each virtual block gives every rank BLOCK tokens, so with blocks
         0, 1, 2, ... a rank's k-th local token has slot k. */
      int64_t next_slot = 0;
      for (int t = 0; t < TOKENS; ++t) {
        if (slots[t] == CLBT_PAD_SLOT_ID) continue;
        ++owners[t];
        ck_assert_msg(slots[t] == next_slot++,
                      "world %u interleave %u rank %u: token %d has slot %lld",
                      world, interleave, rank, t, (long long)slots[t]);
      }
      clbt_table_destroy(table);
    }
    for (int t = 0; t < TOKENS; ++t)
      ck_assert_msg(owners[t] == 1, "world %u interleave %u: token %d on %d ranks",
                    world, interleave, t, owners[t]);
  }
}
END_TEST

int main(void) {
  Suite *suite = suite_create("slot_mapping");
  TCase *tc = tcase_create("slot_mapping");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, worked_examples_on_the_device);
  tcase_add_test(tc, request_over_1024_tokens_spot_values);
  tcase_add_test(tc, uses_committed_rows_only);
  tcase_add_test(tc, hybrid_row_ends_at_its_kernel_blocks);
  tcase_add_test(tc, rejected_count_accumulates_and_resets);
  tcase_add_test(tc, negative_positions_are_counted_on_every_rank);
  tcase_add_test(tc, cp_partition);
  suite_add_tcase(suite, tc);
  tcase_add_test(tc, worked_examples_searching_global_memory);
  return clbt_test_run(suite);
}
