/* The multi-group table (src/api/multi_table.c), as MultiGroupBlockTable. */
#include "clbt_test.h"

/* Group 0: block 16; group 1: 32 over 16; group 2: Mamba state (NONE). */
static const clbt_group_config three_groups[] = {
    {.block_size = 16, .max_num_blocks = 10},
    {.block_size = 32, .kernel_block_size = 16, .max_num_blocks = 5},
    {.block_size = 64, .max_num_blocks = 3, .slot_mode = CLBT_SLOT_MODE_NONE},
};

static clbt_multi_table *create_three(void) {
  clbt_multi_table_config config = {.max_num_reqs = 2,
                                    .max_num_batched_tokens = 8,
                                    .num_groups = 3, .groups = three_groups};
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  return table;
}

static void append_both_rows(clbt_multi_table *table) {
  const int32_t *row0[] = {(const int32_t[]){4, 2}, (const int32_t[]){1},
                           (const int32_t[]){9}};
  const int32_t *row1[] = {(const int32_t[]){7}, (const int32_t[]){3},
                           (const int32_t[]){5}};
  clbt_assert_ok(clbt_multi_table_append_row(table, 0, row0,
                                             (const size_t[]){2, 1, 1}));
  clbt_assert_ok(clbt_multi_table_append_row(table, 1, row1,
                                             (const size_t[]){1, 1, 1}));
}

/* 128-token alignment for token groups, none for NONE groups. */
START_TEST(group_widths) {
  clbt_multi_table *table = create_three();
  ck_assert_uint_eq(clbt_multi_table_num_groups(table), 3);
  /* 10 blocks of 16 -> 16 (128 tokens = 8 blocks) */
  ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 0)), 16);
  /* 5 blocks of 32 -> 8 (128 tokens = 4 blocks), 2 kernel blocks each */
  ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 1)), 16);
  ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 2)), 3);
  ck_assert_ptr_null(clbt_multi_table_group(table, 3));
  clbt_multi_table_destroy(table);
}
END_TEST

/*
 * One batch through all groups. Requests: 0 at positions 0, 16, 17; 1 at 5.
 * Group 0 (block 16): 4*16 = 64; 2*16 = 32, 33; 7*16 + 5 = 117.
 * Group 1 (KV 1 -> kernel 2, 3; KV 3 -> 6, 7; k = 16): 32; 48, 49; 101.
 * Group 2 maps no tokens and leaves its buffer as it was.
 */
START_TEST(worked_example_with_a_none_group) {
  clbt_multi_table *table = create_three();
  append_both_rows(table);
  clbt_assert_ok(clbt_multi_table_commit(table, 2));
  const int32_t qsl[] = {0, 3, 4};
  const int64_t positions[] = {0, 16, 17, 5};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  for (uint32_t g = 0; g < 3; ++g)
    clbt_test_poison(clbt_table_slot_mapping(clbt_multi_table_group(table, g)), 8);
  clbt_assert_ok(clbt_multi_table_compute_slot_mapping(table, 2, qsl_buffer,
                                                       positions_buffer, 4));
  const int64_t expected[3][8] = {
      {64, 32, 33, 117, -1, -1, -1, -1},
      {32, 48, 49, 101, -1, -1, -1, -1},
      {CLBT_TEST_POISON, CLBT_TEST_POISON, CLBT_TEST_POISON, CLBT_TEST_POISON,
       CLBT_TEST_POISON, CLBT_TEST_POISON, CLBT_TEST_POISON, CLBT_TEST_POISON}};
  for (uint32_t g = 0; g < 3; ++g) {
    clbt_table *group = clbt_multi_table_group(table, g);
    int64_t slots[8], host[8];
    for (int t = 0; t < 8; ++t) host[t] = CLBT_TEST_POISON;
    clbt_test_read(clbt_table_slot_mapping(group), sizeof slots, slots);
    clbt_assert_ok(
        clbt_table_compute_slot_mapping_host(group, 2, qsl, positions, 4, host));
    for (int t = 0; t < 8; ++t) {
      ck_assert_msg(slots[t] == expected[g][t], "group %u slot %d: %lld", g, t,
                    (long long)slots[t]);
      ck_assert_msg(host[t] == expected[g][t], "group %u host slot %d: %lld", g,
                    t, (long long)host[t]);
    }
  }
  /* The NONE group's rows are committed all the same (state indices). */
  int32_t state[3];
  clbt_test_read(clbt_table_device_data(clbt_multi_table_group(table, 2)),
                 sizeof state, state);
  ck_assert_int_eq(state[0], 9);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_multi_table_destroy(table);
}
END_TEST

static clbt_test_snapshot snapshots[3];

static void take_all(clbt_multi_table *table) {
  for (uint32_t g = 0; g < 3; ++g)
    snapshots[g] = clbt_test_snapshot_take(
        clbt_multi_table_group(table, g), 2);
}

static void check_all(clbt_multi_table *table) {
  for (uint32_t g = 0; g < 3; ++g)
    clbt_test_snapshot_check(&snapshots[g], clbt_multi_table_group(table, g));
}

/* When any group would fail, no group changes. */
START_TEST(row_operations_are_all_or_nothing) {
  clbt_multi_table *table = create_three();
  append_both_rows(table);
  clbt_assert_ok(clbt_multi_table_commit(table, 2));
  take_all(table);
  const int32_t many[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const int32_t *ids[] = {many, many, many};
  /* group 1 holds 2 of 16 kernel blocks; 8 more KV blocks need 16 */
  clbt_assert_fails(clbt_multi_table_append_row(table, 0, ids,
                                                (const size_t[]){1, 8, 0}),
                    CLBT_ROW_OVERFLOW, "groups[1]: n = 8 blocks");
  const int32_t *bad[] = {many, many, (const int32_t[]){-3}};
  clbt_assert_fails(clbt_multi_table_add_row(table, 1, bad,
                                             (const size_t[]){1, 1, 1}),
                    CLBT_INVALID_BLOCK_ID, "groups[2]: block_ids[0] = -3");
  clbt_assert_fails(clbt_multi_table_append_row(table, 2, ids,
                                                (const size_t[]){1, 1, 1}),
                    CLBT_ROW_OUT_OF_RANGE, "row 2 is out of range");
  const int32_t *missing[] = {many, NULL, many};
  clbt_assert_fails(clbt_multi_table_append_row(table, 0, missing,
                                                (const size_t[]){1, 1, 1}),
                    CLBT_NULL_ARGUMENT, "groups[1]: block_ids is NULL");
  clbt_assert_fails(clbt_multi_table_append_row(table, 0, NULL,
                                                (const size_t[]){1, 1, 1}),
                    CLBT_NULL_ARGUMENT, "block_ids is NULL");
  clbt_assert_fails(clbt_multi_table_append_row(table, 0, ids, NULL),
                    CLBT_NULL_ARGUMENT, "counts is NULL");
  clbt_assert_fails(clbt_multi_table_clear_row(table, 2), CLBT_ROW_OUT_OF_RANGE,
                    "row 2");
  clbt_assert_fails(clbt_multi_table_move_row(table, 0, 2), CLBT_ROW_OUT_OF_RANGE,
                    "dst 2");
  clbt_assert_fails(clbt_multi_table_swap_row(table, 3, 0), CLBT_ROW_OUT_OF_RANGE,
                    "a 3");
  clbt_assert_fails(clbt_multi_table_commit(table, 3), CLBT_TOO_MANY_REQUESTS,
                    "num_reqs 3");
  /* row 0 holds 2, 1 and 1 blocks: group 2 cannot keep 2 */
  clbt_assert_fails(clbt_multi_table_truncate_row(table, 0,
                                                  (const size_t[]){1, 1, 2}),
                    CLBT_INVALID_ARGUMENT,
                    "groups[2]: num_blocks 2 exceeds the 1 blocks row 0 holds");
  clbt_assert_fails(clbt_multi_table_truncate_row(table, 0, NULL),
                    CLBT_NULL_ARGUMENT, "num_blocks is NULL");
  check_all(table);
  /* a valid truncate changes every group: row 0 keeps block 4 of group 0,
     kernel blocks 2, 3 (block 1) of group 1, nothing of group 2 */
  clbt_assert_ok(clbt_multi_table_truncate_row(table, 0,
                                               (const size_t[]){1, 1, 0}));
  const uint32_t kept[] = {1, 2, 0};
  const int32_t first[] = {4, 2, 0};
  for (uint32_t g = 0; g < 3; ++g) {
    const clbt_table *group = clbt_multi_table_group(table, g);
    ck_assert_uint_eq(clbt_table_row_length(group, 0), kept[g]);
    ck_assert_int_eq(clbt_table_host_data(group)[0], first[g]);
    ck_assert_int_eq(clbt_table_host_data(group)[kept[g]], 0);
  }
  clbt_assert_ok(clbt_multi_table_append_row(table, 0, (const int32_t *[]){
                                                 (const int32_t[]){2}, NULL,
                                                 (const int32_t[]){9}},
                                             (const size_t[]){1, 0, 1}));
  /* NULL where a group has no ids is fine */
  const int32_t *sparse[] = {many, NULL, NULL};
  clbt_assert_ok(clbt_multi_table_append_row(table, 0, sparse,
                                             (const size_t[]){1, 0, 0}));
  ck_assert_uint_eq(clbt_table_row_length(clbt_multi_table_group(table, 0), 0), 3);
  ck_assert_uint_eq(clbt_table_row_length(clbt_multi_table_group(table, 1), 0), 2);
  clbt_multi_table_destroy(table);
}
END_TEST

/*
 * The batch forms in every group: rows {0, 1, 0}; group 0 appends 4 2 | 7 |
 * 3, group 1 the KV blocks 1 | 3 | - (kernel blocks 2 3 and 6 7), group 2
 * 9 | - | 5. Then a batch that group 2 cannot take changes no group.
 */
START_TEST(batch_rows_in_every_group) {
  clbt_multi_table *table = create_three();
  const uint32_t rows[] = {0, 1, 0};
  const uint32_t *counts[] = {(const uint32_t[]){2, 1, 1},
                              (const uint32_t[]){1, 1, 0},
                              (const uint32_t[]){1, 0, 1}};
  const int32_t *ids[] = {(const int32_t[]){4, 2, 7, 3},
                          (const int32_t[]){1, 3}, (const int32_t[]){9, 5}};
  clbt_assert_ok(clbt_multi_table_append_rows(table, 3, rows, counts, ids));
  const int32_t expected[3][2][3] = {{{4, 2, 3}, {7, 0, 0}},
                                     {{2, 3, 0}, {6, 7, 0}},
                                     {{9, 5, 0}, {0, 0, 0}}};
  const uint32_t lengths[3][2] = {{3, 1}, {2, 2}, {2, 0}};
  for (uint32_t g = 0; g < 3; ++g) {
    const clbt_table *group = clbt_multi_table_group(table, g);
    for (uint32_t r = 0; r < 2; ++r) {
      ck_assert_uint_eq(clbt_table_row_length(group, r), lengths[g][r]);
      for (uint32_t c = 0; c < 3; ++c)
        ck_assert_int_eq(
            clbt_table_host_data(group)[r * clbt_table_width(group) + c],
            expected[g][r][c]);
    }
  }
  take_all(table);
  /* group 2's row 0 holds 2 of 3: its second entry for row 0 overflows */
  const uint32_t *too_many[] = {(const uint32_t[]){1, 1},
                                (const uint32_t[]){0, 0},
                                (const uint32_t[]){1, 1}};
  const int32_t *more[] = {(const int32_t[]){1, 1}, NULL,
                           (const int32_t[]){1, 1}};
  clbt_assert_fails(
      clbt_multi_table_append_rows(table, 2, (const uint32_t[]){0, 0},
                                   too_many, more),
      CLBT_ROW_OVERFLOW,
      "groups[2]: entry 1 (row 0, ids from block_ids[1]): n = 1 blocks of 1 "
      "kernel blocks would overflow row 0: it holds 3 of width 3");
  clbt_assert_fails(
      clbt_multi_table_add_rows(table, 1, (const uint32_t[]){2}, too_many,
                                more),
      CLBT_ROW_OUT_OF_RANGE, "groups[0]: entry 0 (row 2, ids from block_ids[0]): row 2");
  clbt_assert_fails(clbt_multi_table_append_rows(table, 1, rows, NULL, ids),
                    CLBT_NULL_ARGUMENT, "counts is NULL");
  clbt_assert_fails(clbt_multi_table_add_rows(table, 1, rows, counts, NULL),
                    CLBT_NULL_ARGUMENT, "block_ids is NULL");
  check_all(table);
  /* add: row 1 becomes 8 | 5 (kernel 10 11) | 6 in the three groups */
  const uint32_t *ones[] = {(const uint32_t[]){1}, (const uint32_t[]){1},
                            (const uint32_t[]){1}};
  const int32_t *replacement[] = {(const int32_t[]){8}, (const int32_t[]){5},
                                  (const int32_t[]){6}};
  clbt_assert_ok(clbt_multi_table_add_rows(table, 1, (const uint32_t[]){1},
                                           ones, replacement));
  const int32_t first[3] = {8, 10, 6};
  const uint32_t added_lengths[3] = {1, 2, 1};
  for (uint32_t g = 0; g < 3; ++g) {
    const clbt_table *group = clbt_multi_table_group(table, g);
    ck_assert_uint_eq(clbt_table_row_length(group, 1), added_lengths[g]);
    ck_assert_int_eq(clbt_table_host_data(group)[clbt_table_width(group)],
                     first[g]);
  }
  clbt_multi_table_destroy(table);
}
END_TEST

/*
 * One row of every group from one flat array: counts {2, 1, 1} take ids
 * 4 2 | 1 | 9, so group 1 gets KV block 1 (kernel blocks 2 3), not the
 * array's first id. A replacement then writes from column 0. Every refusal,
 * the last group's included, changes no group.
 */
START_TEST(update_row_with_flat_ids) {
  clbt_multi_table *table = create_three();
  clbt_assert_ok(clbt_multi_table_update_row(
      table, 0, (const size_t[]){2, 1, 1}, (const int32_t[]){4, 2, 1, 9},
      CLBT_ROW_APPEND));
  clbt_assert_ok(clbt_multi_table_update_row(
      table, 0, (const size_t[]){1, 0, 1}, (const int32_t[]){7, 5},
      CLBT_ROW_APPEND));
  const int32_t appended[3][3] = {{4, 2, 7}, {2, 3, 0}, {9, 5, 0}};
  const uint32_t appended_lengths[3] = {3, 2, 2};
  for (uint32_t g = 0; g < 3; ++g) {
    const clbt_table *group = clbt_multi_table_group(table, g);
    ck_assert_uint_eq(clbt_table_row_length(group, 0), appended_lengths[g]);
    for (uint32_t c = 0; c < 3; ++c)
      ck_assert_int_eq(clbt_table_host_data(group)[c], appended[g][c]);
  }
  take_all(table);
  const size_t ones[] = {1, 1, 1};
  const int32_t ids[] = {1, 2, 3};
  clbt_assert_fails(clbt_multi_table_update_row(table, 0, (const size_t[]){
                                                    0, 0, 2},
                                                ids, CLBT_ROW_APPEND),
                    CLBT_ROW_OVERFLOW, "groups[2] (ids from block_ids[0]): n = 2 "
                                       "blocks of 1 kernel blocks would "
                                       "overflow row 0: it holds 2 of width 3");
  clbt_assert_fails(clbt_multi_table_update_row(
                        table, 1, ones, (const int32_t[]){1, -1, 3},
                        CLBT_ROW_REPLACE),
                    CLBT_INVALID_BLOCK_ID,
                    "groups[1] (ids from block_ids[1]): block_ids[0] = -1");
  clbt_assert_fails(
      clbt_multi_table_update_row(table, 2, ones, ids, CLBT_ROW_APPEND),
      CLBT_ROW_OUT_OF_RANGE, "groups[0] (ids from block_ids[0]): row 2 is out");
  clbt_assert_fails(
      clbt_multi_table_update_row(table, 0, ones, NULL, CLBT_ROW_APPEND),
      CLBT_NULL_ARGUMENT, "block_ids[0]): block_ids is NULL with n = 1");
  clbt_assert_fails(
      clbt_multi_table_update_row(table, 0, NULL, ids, CLBT_ROW_APPEND),
      CLBT_NULL_ARGUMENT, "counts is NULL");
  clbt_assert_fails(clbt_multi_table_update_row(table, 0, ones, ids,
                                                (clbt_row_update)2),
                    CLBT_INVALID_ARGUMENT, "how is 2");
  clbt_assert_fails(
      clbt_multi_table_update_row(NULL, 0, ones, ids, CLBT_ROW_APPEND),
      CLBT_NULL_ARGUMENT, "table is NULL");
  check_all(table);
  /* replace: 8 | nothing | 6; no ids at all is fine with NULL */
  clbt_assert_ok(clbt_multi_table_update_row(
      table, 0, (const size_t[]){1, 0, 1}, (const int32_t[]){8, 6},
      CLBT_ROW_REPLACE));
  const uint32_t replaced_lengths[3] = {1, 0, 1};
  const int32_t replaced_first[3] = {8, 2, 6};
  for (uint32_t g = 0; g < 3; ++g) {
    const clbt_table *group = clbt_multi_table_group(table, g);
    ck_assert_uint_eq(clbt_table_row_length(group, 0), replaced_lengths[g]);
    ck_assert_int_eq(clbt_table_host_data(group)[0], replaced_first[g]);
  }
  clbt_assert_ok(clbt_multi_table_update_row(
      table, 1, (const size_t[]){0, 0, 0}, NULL, CLBT_ROW_APPEND));
  ck_assert_uint_eq(clbt_table_row_length(clbt_multi_table_group(table, 0), 1),
                    0);
  clbt_multi_table_destroy(table);
}
END_TEST

/* move, swap, clear and add act on every group. */
START_TEST(row_operations_reach_every_group) {
  clbt_multi_table *table = create_three();
  append_both_rows(table);
  clbt_assert_ok(clbt_multi_table_swap_row(table, 0, 1));
  ck_assert_int_eq(clbt_table_host_data(clbt_multi_table_group(table, 0))[0], 7);
  ck_assert_int_eq(clbt_table_host_data(clbt_multi_table_group(table, 1))[0], 6);
  ck_assert_int_eq(clbt_table_host_data(clbt_multi_table_group(table, 2))[0], 5);
  clbt_assert_ok(clbt_multi_table_move_row(table, 1, 0));
  for (uint32_t g = 0; g < 3; ++g)
    ck_assert_uint_eq(clbt_table_row_length(clbt_multi_table_group(table, g), 1), 0);
  ck_assert_int_eq(clbt_table_host_data(clbt_multi_table_group(table, 0))[0], 4);
  clbt_assert_ok(clbt_multi_table_clear_row(table, 0));
  for (uint32_t g = 0; g < 3; ++g)
    ck_assert_uint_eq(clbt_table_row_length(clbt_multi_table_group(table, g), 0), 0);
  const int32_t *ids[] = {(const int32_t[]){1}, (const int32_t[]){2},
                          (const int32_t[]){3}};
  clbt_assert_ok(clbt_multi_table_add_row(table, 1, ids, (const size_t[]){1, 1, 1}));
  ck_assert_uint_eq(clbt_table_row_length(clbt_multi_table_group(table, 1), 1), 2);
  clbt_assert_ok(clbt_multi_table_commit(table, 2));
  clbt_assert_ok(clbt_multi_table_clear(table));
  for (uint32_t g = 0; g < 3; ++g)
    ck_assert_uint_eq(clbt_table_row_length(clbt_multi_table_group(table, g), 1), 0);
  clbt_multi_table_destroy(table);
}
END_TEST

/* A replicated group ignores CP sharding; a sharded one follows it.
   Rank 1 of 2, block 4: the sharded group owns odd positions, lo = pos/2. */
START_TEST(cp_replicated_groups) {
  const clbt_group_config groups[] = {
      {.block_size = 4, .max_num_blocks = 2},
      {.block_size = 4, .max_num_blocks = 2, .cp_replicated = 1}};
  clbt_multi_table_config config = {.max_num_reqs = 1,
                                    .max_num_batched_tokens = 4,
                                    .num_groups = 2, .groups = groups,
                                    .cp_world_size = 2, .cp_rank = 1};
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  const int32_t row[] = {5, 8};
  clbt_assert_ok(clbt_multi_table_append_row(
      table, 0, (const int32_t *const[]){row, row}, (const size_t[]){2, 2}));
  clbt_assert_ok(clbt_multi_table_commit(table, 1));
  cl_mem qsl = clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 4});
  cl_mem positions =
      clbt_test_buffer(4 * sizeof(int64_t), (const int64_t[]){0, 1, 2, 3});
  clbt_assert_ok(clbt_multi_table_compute_slot_mapping(table, 1, qsl, positions, 4));
  int64_t sharded[4], replicated[4];
  clbt_test_read(clbt_table_slot_mapping(clbt_multi_table_group(table, 0)),
                 sizeof sharded, sharded);
  clbt_test_read(clbt_table_slot_mapping(clbt_multi_table_group(table, 1)),
                 sizeof replicated, replicated);
  const int64_t expected_sharded[] = {-1, 20, -1, 21};
  const int64_t expected_replicated[] = {20, 21, 22, 23};
  for (int t = 0; t < 4; ++t) {
    ck_assert_int_eq(sharded[t], expected_sharded[t]);
    ck_assert_int_eq(replicated[t], expected_replicated[t]);
  }
  clReleaseMemObject(qsl);
  clReleaseMemObject(positions);
  clbt_multi_table_destroy(table);
}
END_TEST

/* Reads every group's slots and rejected count, then poisons and resets. */
static void collect(clbt_multi_table *table, uint32_t max_tokens,
                    int64_t (*slots)[64], uint32_t *rejected) {
  for (uint32_t g = 0; g < clbt_multi_table_num_groups(table); ++g) {
    clbt_table *group = clbt_multi_table_group(table, g);
    clbt_test_read(clbt_table_slot_mapping(group), max_tokens * sizeof(int64_t),
                   slots[g]);
    clbt_assert_ok(clbt_table_read_rejected_tokens(group, &rejected[g]));
    clbt_assert_ok(clbt_table_reset_rejected_tokens(group));
    clbt_test_poison(clbt_table_slot_mapping(group), max_tokens);
  }
}

/*
 * Eleven groups (ten map tokens: two launches of eight and two) give the
 * same slots and counts in one call as group by group, each group with its
 * own kernel.
 */
START_TEST(one_launch_equals_group_by_group) {
  enum { GROUPS = 11, TOKENS = 64 };
  clbt_group_config groups[GROUPS];
  static const uint32_t block_sizes[] = {16, 32, 64, 8, 128};
  for (uint32_t g = 0; g < GROUPS; ++g)
    groups[g] = (clbt_group_config){
        .block_size = block_sizes[g % 5],
        .kernel_block_size = g % 3 == 1 ? block_sizes[g % 5] / 2 : 0,
        .max_num_blocks = 4,
        .slot_mode = g == 6 ? CLBT_SLOT_MODE_NONE : CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT,
        .cp_replicated = g % 4 == 3};
  clbt_multi_table_config config = {.max_num_reqs = 3,
                                    .max_num_batched_tokens = TOKENS,
                                    .num_groups = GROUPS, .groups = groups,
                                    .cp_world_size = 2, .cp_rank = 1,
                                    .cp_interleave_size = 4};
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  int32_t ids[GROUPS][3];
  const int32_t *rows[GROUPS];
  size_t counts[GROUPS];
  for (uint32_t r = 0; r < 3; ++r) {
    for (uint32_t g = 0; g < GROUPS; ++g) {
      for (int i = 0; i < 3; ++i) ids[g][i] = (int32_t)(100 * g + 10 * r + i);
      rows[g] = ids[g];
      counts[g] = r + 1; /* row r holds r + 1 blocks: short rows reject */
    }
    clbt_assert_ok(clbt_multi_table_append_row(table, r, rows, counts));
  }
  clbt_assert_ok(clbt_multi_table_commit(table, 3));
  int32_t qsl[] = {0, 20, 21, 50};
  int64_t positions[50];
  for (int t = 0; t < 50; ++t) positions[t] = t % 20 == 7 ? -3 : 3 * t + 1;
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  int64_t together[GROUPS][64], apart[GROUPS][64];
  uint32_t rejected_together[GROUPS], rejected_apart[GROUPS];
  collect(table, TOKENS, together, rejected_together);
  clbt_assert_ok(clbt_multi_table_compute_slot_mapping(table, 3, qsl_buffer,
                                                       positions_buffer, 50));
  collect(table, TOKENS, together, rejected_together);
  for (uint32_t g = 0; g < GROUPS; ++g)
    clbt_assert_ok(clbt_table_compute_slot_mapping(
        clbt_multi_table_group(table, g), 3, qsl_buffer, positions_buffer, 50));
  collect(table, TOKENS, apart, rejected_apart);
  uint32_t mapped = 0;
  for (uint32_t g = 0; g < GROUPS; ++g) {
    ck_assert_uint_eq(rejected_together[g], rejected_apart[g]);
    for (int t = 0; t < TOKENS; ++t) {
      ck_assert_msg(together[g][t] == apart[g][t],
                    "group %u token %d: %lld in one launch, %lld alone", g, t,
                    (long long)together[g][t], (long long)apart[g][t]);
      mapped += together[g][t] >= 0;
    }
  }
  /* The comparison is not vacuous: slots were mapped and tokens rejected. */
  ck_assert_uint_gt(mapped, 100);
  ck_assert_uint_gt(rejected_together[0], 0);
  ck_assert_int_eq(together[6][0], CLBT_TEST_POISON); /* the NONE group */
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_multi_table_destroy(table);
}
END_TEST

/*
 * What create_three's rows, committed, give the batch of a_group_is_a_view
 * (query_start_loc {0, 3, 5}, positions {0, 17, 31, 5, 40}), by hand:
 * group 0, blocks of 16, rows {4, 2} and {7}; group 1, blocks of 32 over
 * kernel blocks of 16, rows {1} and {3}, so kernel blocks {2, 3} and
 * {6, 7}. Position 40 is past row 1 in both; the pad entries are -1.
 */
static const int64_t view_slots[2][8] = {
    {4 * 16, 2 * 16 + 1, 2 * 16 + 15, 7 * 16 + 5, -1, -1, -1, -1},
    {2 * 16, 3 * 16 + 1, 3 * 16 + 15, 6 * 16 + 5, -1, -1, -1, -1}};

/* Every group's slots, those in `written` as view_slots says, the others
   still poisoned; then every group's buffer poisoned again. */
static void check_view_slots(clbt_multi_table *table, uint32_t written) {
  for (uint32_t g = 0; g < 3; ++g) {
    int64_t slots[8];
    cl_mem buffer = clbt_table_slot_mapping(clbt_multi_table_group(table, g));
    clbt_test_read(buffer, sizeof slots, slots);
    for (int t = 0; t < 8; ++t) {
      int64_t expected = written >> g & 1u ? view_slots[g][t] : CLBT_TEST_POISON;
      ck_assert_msg(slots[t] == expected, "group %u slot %d is %lld, not %lld",
                    g, t, (long long)slots[t], (long long)expected);
    }
    clbt_test_poison(buffer, 8);
  }
}

/*
 * A group is a view of its multi-group table (clbt.h,
 * clbt_multi_table_group): a device call on one group runs in the table's
 * own launch, so no call builds a program (the device's count stays as
 * the table's creation left it), and each writes its group's outputs as
 * the table's call does, leaving every other group's as they were.
 */
START_TEST(a_group_is_a_view) {
  clbt_device *device = clbt_test_device();
  clbt_multi_table *table = create_three();
  append_both_rows(table);
  const size_t programs = clbt_device_program_count(device);
  int32_t qsl[] = {0, 3, 5};
  int64_t positions[] = {0, 17, 31, 5, 40};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  for (uint32_t g = 0; g < 3; ++g) {
    clbt_assert_ok(clbt_table_commit(clbt_multi_table_group(table, g), 2));
    clbt_test_poison(clbt_table_slot_mapping(clbt_multi_table_group(table, g)),
                     8);
  }
  ck_assert_uint_eq(clbt_device_program_count(device), programs);
  clbt_assert_ok(clbt_multi_table_compute_slot_mapping(table, 2, qsl_buffer,
                                                       positions_buffer, 5));
  check_view_slots(table, 0x3);
  clbt_step step = CLBT_STEP_INIT;
  step.num_reqs = 2;
  step.query_start_loc = qsl_buffer;
  step.positions = positions_buffer;
  step.num_tokens = 5;
  step.flags = CLBT_STEP_GATHER;
  for (uint32_t g = 0; g < 2; ++g) {
    clbt_table *group = clbt_multi_table_group(table, g);
    clbt_assert_ok(clbt_table_compute_slot_mapping(group, 2, qsl_buffer,
                                                   positions_buffer, 5));
    check_view_slots(table, 1u << g);
    clbt_assert_ok(clbt_table_enqueue_step(group, &step, 0, NULL, NULL));
    check_view_slots(table, 1u << g);
    ck_assert_uint_eq(clbt_device_program_count(device), programs);
  }
  /* The NONE group's state slots: each request's length is its last
     position + 1 (32 and 41), its column (L - 1) / 64 = 0, so the first
     id of rows {9} and {5}; past the two requests nothing is written. */
  clbt_table *states = clbt_multi_table_group(table, 2);
  clbt_test_poison32(clbt_table_state_slots(states));
  step.flags = CLBT_STEP_STATE_SLOTS;
  clbt_assert_ok(clbt_table_enqueue_step(states, &step, 0, NULL, NULL));
  check_view_slots(table, 0);
  int32_t ids[3];
  clbt_test_read(clbt_table_state_slots(states), sizeof ids, ids);
  ck_assert_int_eq(ids[0], 9);
  ck_assert_int_eq(ids[1], 5);
  ck_assert_int_eq(ids[2], CLBT_TEST_POISON32);
  ck_assert_uint_eq(clbt_device_program_count(device), programs);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_multi_table_destroy(table);
}
END_TEST

/* Commit and slot mapping chain through events. */
START_TEST(events_chain) {
  clbt_multi_table *table = create_three();
  append_both_rows(table);
  cl_event committed = NULL, mapped = NULL;
  clbt_assert_ok(clbt_multi_table_enqueue_commit(table, 2, 0, NULL, &committed));
  const int32_t qsl[] = {0, 3, 4};
  const int64_t positions[] = {0, 16, 17, 5};
  cl_mem qsl_buffer = clbt_test_buffer(sizeof qsl, qsl);
  cl_mem positions_buffer = clbt_test_buffer(sizeof positions, positions);
  clbt_assert_ok(clbt_multi_table_enqueue_slot_mapping(
      table, 2, qsl_buffer, positions_buffer, 4, 1, &committed, &mapped));
  ck_assert_int_eq(clWaitForEvents(1, &mapped), CL_SUCCESS);
  int64_t slots[4];
  clbt_test_read(clbt_table_slot_mapping(clbt_multi_table_group(table, 1)),
                 sizeof slots, slots);
  ck_assert_int_eq(slots[3], 101); /* as in the worked example */
  clbt_assert_fails(clbt_multi_table_enqueue_slot_mapping(
                        table, 2, qsl_buffer, positions_buffer, 4, 1, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "wait_list is NULL");
  clbt_assert_fails(clbt_multi_table_enqueue_commit(table, 2, 1, NULL, NULL),
                    CLBT_INVALID_ARGUMENT, "wait_list is NULL");
  clReleaseEvent(committed);
  clReleaseEvent(mapped);
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
  clbt_multi_table_destroy(table);
}
END_TEST

START_TEST(config_errors) {
  clbt_multi_table *table = NULL;
  clbt_multi_table_config config = {.max_num_reqs = 2,
                                    .max_num_batched_tokens = 8,
                                    .num_groups = 0, .groups = three_groups};
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, &table),
                    CLBT_INVALID_CONFIG, "num_groups is 0");
  config.num_groups = 3;
  config.groups = NULL;
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, &table),
                    CLBT_NULL_ARGUMENT, "config->groups is NULL");
  clbt_group_config broken[] = {three_groups[0], three_groups[1]};
  broken[1].max_num_blocks = 0;
  config.groups = broken;
  config.num_groups = 2;
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, &table),
                    CLBT_INVALID_CONFIG, "groups[1]: max_num_blocks is 0");
  broken[1] = three_groups[1];
  broken[1].kernel_block_size = 20;
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, &table),
                    CLBT_INVALID_CONFIG,
                    "groups[1]: kernel_block_size 20 does not divide block_size 32");
  clbt_assert_fails(clbt_multi_table_prepare(clbt_test_device(), &config),
                    CLBT_INVALID_CONFIG, "groups[1]");
  /* The interleave must divide every sharded group's block size... */
  broken[1] = three_groups[1];
  config.cp_world_size = 2;
  config.cp_interleave_size = 32;
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, &table),
                    CLBT_INVALID_CONFIG,
                    "groups[0]: config->cp_interleave_size 32 does not divide "
                    "block_size 16");
  /* ...but not a replicated or NONE group's. */
  broken[0].cp_replicated = 1;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  clbt_multi_table_destroy(table);
  table = NULL;
  config.cp_rank = 2;
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, &table),
                    CLBT_INVALID_CONFIG, "cp_rank 2 is not below cp_world_size 2");
  clbt_assert_fails(clbt_multi_table_create(NULL, &config, &table),
                    CLBT_NULL_ARGUMENT, "device");
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), NULL, &table),
                    CLBT_NULL_ARGUMENT, "config");
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, NULL),
                    CLBT_NULL_ARGUMENT, "out");
  ck_assert_ptr_null(table);
}
END_TEST

/*
 * cp_rank must be below cp_world_size even when no group is sharded: the
 * rank is the table's, and a bad one is a caller's bug whatever the groups.
 */
START_TEST(cp_rank_is_checked_without_sharded_groups) {
  clbt_group_config unsharded[] = {three_groups[0], three_groups[1]};
  unsharded[0].cp_replicated = 1;
  unsharded[1].slot_mode = CLBT_SLOT_MODE_NONE;
  clbt_multi_table_config config = {.max_num_reqs = 2,
                                    .max_num_batched_tokens = 8,
                                    .num_groups = 2, .groups = unsharded,
                                    .cp_world_size = 2, .cp_rank = 2};
  clbt_multi_table *table = NULL;
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, &table),
                    CLBT_INVALID_CONFIG, "cp_rank 2 is not below cp_world_size 2");
  ck_assert_ptr_null(table);
  clbt_assert_fails(clbt_multi_table_prepare(clbt_test_device(), &config),
                    CLBT_INVALID_CONFIG, "cp_rank 2 is not below cp_world_size 2");
  config.cp_world_size = 0; /* no context parallelism: rank 0 only */
  config.cp_rank = 1;
  clbt_assert_fails(clbt_multi_table_create(clbt_test_device(), &config, &table),
                    CLBT_INVALID_CONFIG, "cp_rank 1 is not below cp_world_size 1");
  config.cp_rank = 0;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  clbt_multi_table_destroy(table);
}
END_TEST

/*
 * The multi-group host step against a model of its own: each group's
 * KV-manager block ids as the test appended them, and vLLM's slot rule
 * (a virtual block of block_size x cp_world_size tokens dealt round-robin
 * to ranks interleave tokens at a time) written out here, apart from
 * src/api/reference.c. Groups: 0 sharded (block 16), 1 replicated (32 over
 * kernel blocks of 16), 2 Mamba state (NONE, block 64); CP rank 1 of 2.
 */
enum { MODEL_REQS = 4, MODEL_TOKENS = 16, MODEL_GROUPS = 3, MODEL_WIDTH = 16 };

typedef struct model_group {
  uint32_t block_size, kernel_block_size, world, rank, width;
  bool maps_tokens;
  int32_t ids[MODEL_REQS][4]; /* KV-manager ids of each row */
  uint32_t count[MODEL_REQS];
} model_group;

static int64_t model_slot(const model_group *m, uint32_t row, int64_t position) {
  uint64_t virtual_size = (uint64_t)m->block_size * m->world;
  uint64_t index = (uint64_t)position / virtual_size;
  uint64_t offset = (uint64_t)position % virtual_size;
  if (position < 0 || offset % m->world != m->rank || index >= m->count[row])
    return CLBT_PAD_SLOT_ID;
  uint64_t local = offset / m->world; /* interleave 1 */
  uint64_t per_kv = m->block_size / m->kernel_block_size;
  uint64_t kernel_id = (uint64_t)m->ids[row][index] * per_kv +
                       local / m->kernel_block_size;
  return (int64_t)(kernel_id * m->kernel_block_size +
                   local % m->kernel_block_size);
}

/* Row `row` of group m in kernel blocks: each KV id b as b*k .. b*k+k-1. */
static uint32_t model_kernel_row(const model_group *m, uint32_t row,
                                 int32_t *out) {
  uint32_t per_kv = m->block_size / m->kernel_block_size, n = 0;
  for (uint32_t i = 0; i < m->count[row]; ++i)
    for (uint32_t k = 0; k < per_kv; ++k)
      out[n++] = m->ids[row][i] * (int32_t)per_kv + (int32_t)k;
  return n;
}

START_TEST(host_step_of_every_group_matches_a_model) {
  const clbt_group_config groups[MODEL_GROUPS] = {
      {.block_size = 16, .max_num_blocks = 4},
      {.block_size = 32, .kernel_block_size = 16, .max_num_blocks = 4,
       .cp_replicated = 1},
      {.block_size = 64, .max_num_blocks = 4,
       .slot_mode = CLBT_SLOT_MODE_NONE}};
  clbt_multi_table_config config = {
      .struct_size = sizeof config, .max_num_reqs = MODEL_REQS,
      .max_num_batched_tokens = MODEL_TOKENS, .cp_world_size = 2,
      .cp_rank = 1, .num_groups = MODEL_GROUPS, .groups = groups,
      .exact_widths = 1};
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  model_group model[MODEL_GROUPS] = {
      {.block_size = 16, .kernel_block_size = 16, .world = 2, .rank = 1,
       .width = 4, .maps_tokens = true},
      {.block_size = 32, .kernel_block_size = 16, .world = 1, .rank = 0,
       .width = 8, .maps_tokens = true},
      {.block_size = 64, .kernel_block_size = 64, .world = 1, .rank = 0,
       .width = 4, .maps_tokens = false}};
  /* Rows 0..2 in every group; row 3 stays empty. */
  static const int32_t ids[MODEL_GROUPS][3][3] = {
      {{4, 2, 9}, {5}, {11, 12}}, {{1, 3}, {6}, {13, 14}}, {{7}, {8}, {15}}};
  static const size_t counts[MODEL_GROUPS][3] = {
      {3, 1, 2}, {2, 1, 2}, {1, 1, 1}};
  for (uint32_t row = 0; row < 3; ++row) {
    const int32_t *row_ids[MODEL_GROUPS];
    size_t row_counts[MODEL_GROUPS];
    for (uint32_t g = 0; g < MODEL_GROUPS; ++g) {
      row_ids[g] = ids[g][row];
      row_counts[g] = counts[g][row];
      model[g].count[row] = (uint32_t)counts[g][row];
      memcpy(model[g].ids[row], ids[g][row], counts[g][row] * sizeof(int32_t));
    }
    clbt_assert_ok(clbt_multi_table_append_row(table, row, row_ids, row_counts));
  }
  for (uint32_t g = 0; g < MODEL_GROUPS; ++g)
    ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, g)),
                      model[g].width);

  /* Request 0 reads row 2, request 1 is padding, request 2 reads row 0;
     gathered to 4 positions. Position 95 is past group 1's 64 tokens. */
  const int32_t qsl[] = {0, 3, 4, 8}, idx_mapping[] = {2, -1, 0};
  const int64_t positions[] = {0, 17, 40, 3, 1, 33, 62, 95};
  const uint32_t request_of[] = {0, 0, 0, 1, 2, 2, 2, 2};
  int64_t slots[MODEL_GROUPS][MODEL_TOKENS + 1];
  int32_t gathered[MODEL_GROUPS][(MODEL_REQS + 1) * MODEL_WIDTH];
  for (uint32_t g = 0; g < MODEL_GROUPS; ++g) {
    for (uint32_t t = 0; t <= MODEL_TOKENS; ++t) slots[g][t] = CLBT_TEST_POISON;
    for (uint32_t e = 0; e < (MODEL_REQS + 1) * MODEL_WIDTH; ++e)
      gathered[g][e] = (int32_t)CLBT_TEST_POISON;
  }
  int64_t *const slot_outputs[] = {slots[0], slots[1], slots[2]};
  int32_t *const gathered_outputs[] = {gathered[0], gathered[1], gathered[2]};
  clbt_multi_host_step step = CLBT_MULTI_HOST_STEP_INIT;
  step.flags = CLBT_STEP_GATHER;
  step.num_reqs = 3;
  step.num_reqs_padded = 4;
  step.num_tokens = 8;
  step.query_start_loc = qsl;
  step.positions = positions;
  step.idx_mapping = idx_mapping;
  step.slot_mappings = slot_outputs;
  step.gathered_rows = gathered_outputs;

  /* Refused before anything is written: too many requests. */
  step.num_reqs = MODEL_REQS + 1;
  clbt_assert_fails(clbt_multi_table_compute_step_host(table, &step),
                    CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4");
  for (uint32_t g = 0; g < MODEL_GROUPS; ++g)
    ck_assert_int_eq(slots[g][0], CLBT_TEST_POISON);
  step.num_reqs = 3;
  clbt_assert_ok(clbt_multi_table_compute_step_host(table, &step));

  for (uint32_t g = 0; g < MODEL_GROUPS; ++g) {
    const model_group *m = &model[g];
    for (uint32_t t = 0; t <= MODEL_TOKENS; ++t) {
      int64_t expected = CLBT_TEST_POISON; /* NONE groups and past the end */
      if (m->maps_tokens && t < MODEL_TOKENS) expected = CLBT_PAD_SLOT_ID;
      if (m->maps_tokens && t < 8 && idx_mapping[request_of[t]] >= 0)
        expected = model_slot(m, (uint32_t)idx_mapping[request_of[t]],
                              positions[t]);
      ck_assert_msg(slots[g][t] == expected,
                    "group %u slot[%u] is %lld, expected %lld", g, t,
                    (long long)slots[g][t], (long long)expected);
    }
    for (uint32_t b = 0; b <= MODEL_REQS; ++b) {
      int32_t row[MODEL_WIDTH];
      uint32_t length = 0;
      if (b < 3 && idx_mapping[b] >= 0)
        length = model_kernel_row(m, (uint32_t)idx_mapping[b], row);
      for (uint32_t e = 0; e < m->width; ++e) {
        /* Past a live row's length the caller's entries stay (tails are
           not zeroed); padding requests and rows 3 are zero; row 4 is past
           num_reqs_padded, untouched. */
        int32_t expected = e < length ? row[e] : 0;
        if ((b < 3 && idx_mapping[b] >= 0 && e >= length) || b == MODEL_REQS)
          expected = (int32_t)CLBT_TEST_POISON;
        int32_t got = gathered[g][b * m->width + e];
        ck_assert_msg(got == expected, "group %u gathered[%u][%u] is %d, "
                      "expected %d", g, b, e, got, expected);
      }
    }
  }
  clbt_multi_table_destroy(table);
}
END_TEST

START_TEST(null_table) {
  clbt_multi_table_destroy(NULL);
  ck_assert_uint_eq(clbt_multi_table_num_groups(NULL), 0);
  ck_assert_ptr_null(clbt_multi_table_group(NULL, 0));
  clbt_assert_fails(clbt_multi_table_clear_row(NULL, 0), CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_multi_table_move_row(NULL, 0, 1), CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_multi_table_swap_row(NULL, 0, 1), CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_multi_table_commit(NULL, 0), CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_multi_table_clear(NULL), CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_multi_table_compute_slot_mapping(NULL, 0, NULL, NULL, 0),
                    CLBT_NULL_ARGUMENT, "table");
  clbt_multi_host_step step = CLBT_MULTI_HOST_STEP_INIT;
  clbt_assert_fails(clbt_multi_table_compute_step_host(NULL, &step),
                    CLBT_NULL_ARGUMENT, "table");
}
END_TEST

/*
 * Groups that map no tokens are not sharded (vLLM shards only the KV
 * groups): the CP layout's interleave need not divide a NONE group's
 * block. Interleave 16 divides group 0's block of 16, not group 1's 24.
 */
START_TEST(none_groups_ignore_the_cp_layout) {
  const clbt_group_config groups[] = {
      {.block_size = 16, .max_num_blocks = 8},
      {.block_size = 24, .max_num_blocks = 3,
       .slot_mode = CLBT_SLOT_MODE_NONE}};
  clbt_multi_table_config config = {.max_num_reqs = 2,
                                    .max_num_batched_tokens = 4,
                                    .num_groups = 2, .groups = groups,
                                    .cp_world_size = 2, .cp_rank = 1,
                                    .cp_interleave_size = 16};
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  ck_assert_uint_eq(clbt_table_width(clbt_multi_table_group(table, 1)), 3);
  clbt_multi_table_destroy(table);
  clbt_assert_ok(clbt_multi_table_prepare(clbt_test_device(), &config));
}
END_TEST

/*
 * config->commit_mode is every group's mode from creation (clbt.h): with
 * WHOLE, a commit of one new block copies each group whole.
 */
START_TEST(the_configs_commit_mode_is_every_groups) {
  /* commit_mode is 0.3's: struct_size must cover it */
  clbt_multi_table_config config = {.struct_size = sizeof config,
                                    .max_num_reqs = 2,
                                    .max_num_batched_tokens = 8,
                                    .num_groups = 3, .groups = three_groups,
                                    .commit_mode = CLBT_COMMIT_WHOLE};
  clbt_multi_table *table = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &table));
  append_both_rows(table);
  clbt_assert_ok(clbt_multi_table_commit(table, 2));
  for (uint32_t g = 0; g < 3; ++g) {
    clbt_commit_info info = {.mode = CLBT_COMMIT_AUTO};
    clbt_assert_ok(
        clbt_table_last_commit(clbt_multi_table_group(table, g), &info));
    ck_assert_int_eq(info.mode, CLBT_COMMIT_WHOLE);
  }
  clbt_multi_table_destroy(table);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("multi_table");
  TCase *tc = tcase_create("multi_table");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, group_widths);
  tcase_add_test(tc, worked_example_with_a_none_group);
  tcase_add_test(tc, row_operations_are_all_or_nothing);
  tcase_add_test(tc, row_operations_reach_every_group);
  tcase_add_test(tc, batch_rows_in_every_group);
  tcase_add_test(tc, update_row_with_flat_ids);
  tcase_add_test(tc, cp_replicated_groups);
  tcase_add_test(tc, one_launch_equals_group_by_group);
  tcase_add_test(tc, a_group_is_a_view);
  tcase_add_test(tc, events_chain);
  tcase_add_test(tc, config_errors);
  tcase_add_test(tc, cp_rank_is_checked_without_sharded_groups);
  tcase_add_test(tc, null_table);
  tcase_add_test(tc, host_step_of_every_group_matches_a_model);
  tcase_add_test(tc, none_groups_ignore_the_cp_layout);
  tcase_add_test(tc, the_configs_commit_mode_is_every_groups);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
