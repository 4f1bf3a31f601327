/* Row operations (src/engine/table_rows.c), as block_table.py defines them. */
#include "engine/group.h"
#include "engine/table_rows.h"
#include "clbt_test.h"

/* 3 rows of width 4; hybrid tables split each block in two (width 8). */
static clbt_table *create(uint32_t kernel_block_size) {
  clbt_table_config config = {.block_size = 32,
                              .kernel_block_size = kernel_block_size,
                              .max_num_reqs = 3,
                              .max_num_blocks_per_req = 4,
                              .max_num_batched_tokens = 4};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  return table;
}

static void assert_row(const clbt_table *table, uint32_t row,
                       const int32_t *expected, uint32_t width,
                       uint32_t length) {
  const int32_t *data = clbt_table_host_data(table) + (size_t)row * width;
  for (uint32_t i = 0; i < width; ++i)
    ck_assert_msg(data[i] == expected[i], "row %u[%u] is %d, expected %d", row,
                  i, data[i], expected[i]);
  ck_assert_uint_eq(clbt_table_row_length(table, row), length);
}

START_TEST(append_and_add) {
  clbt_table *table = create(0);
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){4, 9}, 2));
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){2}, 1));
  assert_row(table, 1, (const int32_t[]){4, 9, 2, 0}, 4, 3);
  clbt_assert_ok(clbt_table_append_row(table, 1, NULL, 0)); /* no-op */
  assert_row(table, 1, (const int32_t[]){4, 9, 2, 0}, 4, 3);
  /* add_row restarts the row; columns past the new length keep old ids. */
  clbt_assert_ok(clbt_table_add_row(table, 1, (const int32_t[]){7}, 1));
  assert_row(table, 1, (const int32_t[]){7, 9, 2, 0}, 4, 1);
  clbt_assert_ok(clbt_table_add_row(table, 1, NULL, 0));
  ck_assert_uint_eq(clbt_table_row_length(table, 1), 0);
  assert_row(table, 0, (const int32_t[]){0, 0, 0, 0}, 4, 0);
  clbt_table_destroy(table);
}
END_TEST

/* map_to_kernel_blocks: KV block b is kernel blocks 2b, 2b+1 (32 over 16). */
START_TEST(hybrid_expansion) {
  clbt_table *table = create(16);
  ck_assert_uint_eq(clbt_table_width(table), 8);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){0, 1, 2}, 3));
  assert_row(table, 0, (const int32_t[]){0, 1, 2, 3, 4, 5, 0, 0}, 8, 6);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){7}, 1));
  assert_row(table, 0, (const int32_t[]){0, 1, 2, 3, 4, 5, 14, 15}, 8, 8);
  clbt_table_destroy(table);
}
END_TEST

START_TEST(clear_row) {
  clbt_table *table = create(0);
  clbt_assert_ok(clbt_table_append_row(table, 2, (const int32_t[]){5, 6}, 2));
  clbt_assert_ok(clbt_table_clear_row(table, 2));
  assert_row(table, 2, (const int32_t[]){0, 0, 0, 0}, 4, 0);
  clbt_table_destroy(table);
}
END_TEST

/*
 * truncate_row keeps the first blocks and zeroes the rest; with kernel
 * blocks, KV blocks 3 and 5 are kernel blocks 6, 7 and 10, 11. The commit
 * then moves only the zeroed columns and the length, and the device holds
 * the host's rows.
 */
START_TEST(truncate_row) {
  clbt_table *table = create(16);
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){3, 5, 9}, 3));
  clbt_assert_ok(clbt_table_commit(table, 3));
  clbt_assert_ok(clbt_table_truncate_row(table, 1, 2));
  assert_row(table, 1, (const int32_t[]){6, 7, 10, 11, 0, 0, 0, 0}, 8, 4);
  clbt_assert_ok(clbt_table_set_commit_mode(table, CLBT_COMMIT_SCATTER));
  clbt_assert_ok(clbt_table_commit(table, 3));
  clbt_commit_info info;
  clbt_assert_ok(clbt_table_last_commit(table, &info));
  ck_assert_uint_eq(info.rows, 1);
  ck_assert_uint_eq(info.bytes, (4 + 2) * 4); /* the row's entry, two ids */
  clbt_test_assert_in_sync(clbt_device_queue(clbt_test_device()), table, 3);
  clbt_assert_ok(clbt_table_truncate_row(table, 1, 2)); /* as many: no-op */
  assert_row(table, 1, (const int32_t[]){6, 7, 10, 11, 0, 0, 0, 0}, 8, 4);
  clbt_assert_ok(clbt_table_truncate_row(table, 1, 0));
  assert_row(table, 1, (const int32_t[]){0, 0, 0, 0, 0, 0, 0, 0}, 8, 0);
  clbt_test_snapshot before = clbt_test_snapshot_take(table, 3);
  clbt_assert_fails(clbt_table_truncate_row(table, 1, 1), CLBT_INVALID_ARGUMENT,
                    "num_blocks 1 exceeds the 0 blocks row 1 holds");
  clbt_assert_fails(clbt_table_truncate_row(table, 3, 0), CLBT_ROW_OUT_OF_RANGE,
                    "row 3 is out of range: max_num_reqs is 3");
  clbt_test_snapshot_check(&before, table);
  clbt_table_destroy(table);
}
END_TEST

/* move_row copies src's blocks over dst and clears src. */
START_TEST(move_row) {
  clbt_table *table = create(0);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){1, 2}, 2));
  clbt_assert_ok(clbt_table_append_row(table, 2, (const int32_t[]){7, 8, 9}, 3));
  clbt_assert_ok(clbt_table_move_row(table, 0, 2));
  assert_row(table, 2, (const int32_t[]){1, 2, 9, 0}, 4, 2);
  assert_row(table, 0, (const int32_t[]){0, 0, 0, 0}, 4, 0);
  /* vLLM would erase a row moved onto itself; clbt leaves it. */
  clbt_assert_ok(clbt_table_move_row(table, 2, 2));
  assert_row(table, 2, (const int32_t[]){1, 2, 9, 0}, 4, 2);
  clbt_table_destroy(table);
}
END_TEST

/* swap_row exchanges whole rows, past their lengths too. */
START_TEST(swap_row) {
  clbt_table *table = create(0);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){1, 2, 3}, 3));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){4}, 1));
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){5, 6}, 2));
  clbt_assert_ok(clbt_table_swap_row(table, 0, 1));
  assert_row(table, 0, (const int32_t[]){5, 6, 0, 0}, 4, 2);
  assert_row(table, 1, (const int32_t[]){4, 2, 3, 0}, 4, 1);
  clbt_assert_ok(clbt_table_swap_row(table, 1, 1));
  assert_row(table, 1, (const int32_t[]){4, 2, 3, 0}, 4, 1);
  clbt_table_destroy(table);
}
END_TEST

/* The longer row second: swap_row(a, b) moves all of b's ids, past a's. */
START_TEST(swap_row_longer_second) {
  clbt_table *table = create(0);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){1}, 1));
  clbt_assert_ok(clbt_table_append_row(table, 2, (const int32_t[]){7, 8, 9}, 3));
  clbt_assert_ok(clbt_table_swap_row(table, 0, 2));
  assert_row(table, 0, (const int32_t[]){7, 8, 9, 0}, 4, 3);
  assert_row(table, 2, (const int32_t[]){1, 0, 0, 0}, 4, 1);
  clbt_table_destroy(table);
}
END_TEST

/* A row fills to exactly its width; one block more is refused. */
START_TEST(overflow_at_the_boundary) {
  clbt_table *table = create(16);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){1, 2, 3}, 3));
  clbt_test_snapshot before = clbt_test_snapshot_take(table, 3);
  clbt_assert_fails(clbt_table_append_row(table, 0, (const int32_t[]){4, 5}, 2),
                    CLBT_ROW_OVERFLOW,
                    "n = 2 blocks of 2 kernel blocks would overflow row 0: it "
                    "holds 6 of width 8");
  clbt_test_snapshot_check(&before, table);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){4}, 1));
  ck_assert_uint_eq(clbt_table_row_length(table, 0), 8);
  before = clbt_test_snapshot_take(table, 3);
  clbt_assert_fails(clbt_table_add_row(table, 0, (const int32_t[]){1, 2, 3, 4, 5}, 5),
                    CLBT_ROW_OVERFLOW, "n = 5");
  clbt_assert_fails(clbt_table_append_row(table, 0, (const int32_t[]){1},
                                          SIZE_MAX),
                    CLBT_ROW_OVERFLOW, "would overflow row 0");
  clbt_test_snapshot_check(&before, table);
  clbt_table_destroy(table);
}
END_TEST

/* Ids must be >= 0, and their kernel blocks must fit in int32. */
START_TEST(block_id_bounds) {
  clbt_table *plain = create(0), *hybrid = create(16);
  clbt_test_snapshot before = clbt_test_snapshot_take(plain, 3);
  clbt_assert_fails(clbt_table_append_row(plain, 0, (const int32_t[]){3, -1}, 2),
                    CLBT_INVALID_BLOCK_ID, "block_ids[1] = -1 is outside [0, 2147483647]");
  clbt_test_snapshot_check(&before, plain);
  clbt_assert_ok(clbt_table_append_row(plain, 0, (const int32_t[]){INT32_MAX}, 1));
  /* hybrid: the largest id b has 2b + 1 <= INT32_MAX, b = 1073741823 */
  before = clbt_test_snapshot_take(hybrid, 3);
  clbt_assert_fails(clbt_table_add_row(hybrid, 1, (const int32_t[]){1073741824}, 1),
                    CLBT_INVALID_BLOCK_ID, "outside [0, 1073741823]");
  clbt_test_snapshot_check(&before, hybrid);
  clbt_assert_ok(clbt_table_add_row(hybrid, 1, (const int32_t[]){1073741823}, 1));
  assert_row(hybrid, 1, (const int32_t[]){2147483646, 2147483647, 0, 0, 0, 0, 0, 0},
             8, 2);
  clbt_table_destroy(plain);
  clbt_table_destroy(hybrid);
}
END_TEST

/*
 * With more than 2^31 kernel blocks per id not even id 0's last kernel
 * block, k - 1, fits in int32: every id is refused. No table that large
 * fits in memory, so the check runs on a layout alone (what
 * clbt__table_layout_init derives, and clbt__check_append reads: the
 * row's bound, length, k and the largest id): one row of one block of
 * 2^31 + 1, then 2^31, kernel blocks of 1 token.
 */
START_TEST(no_id_fits_past_two_to_the_31_kernel_blocks) {
  uint32_t length = 0;
  clbt_table huge = {.row_lengths = &length};
  clbt_table_config config = {.block_size = 2147483649u,
                              .kernel_block_size = 1,
                              .max_num_reqs = 1,
                              .max_num_blocks_per_req = 1,
                              .max_num_batched_tokens = 1};
  clbt_assert_ok(clbt__table_layout_init(&config, &huge.layout));
  for (int32_t id = 0; id < 2; ++id)
    clbt_assert_fails(clbt__check_append(&huge, 0, &id, 1, false),
                      CLBT_INVALID_BLOCK_ID,
                      "no block id fits: block_size / kernel_block_size = "
                      "2147483649 kernel blocks per id exceed INT32_MAX + 1");
  /* At exactly 2^31 kernel blocks per id, id 0 (blocks 0 .. 2^31-1) fits
     and id 1 does not. */
  config.block_size = 2147483648u;
  clbt_assert_ok(clbt__table_layout_init(&config, &huge.layout));
  int32_t id = 0;
  clbt_assert_ok(clbt__check_append(&huge, 0, &id, 1, false));
  id = 1;
  clbt_assert_fails(clbt__check_append(&huge, 0, &id, 1, false),
                    CLBT_INVALID_BLOCK_ID, "block_ids[0] = 1 is outside [0, 0]");
}
END_TEST

/*
 * Ids are checked by their OR first (table_rows.c), then one by one when
 * the OR is past the bound: with 3 kernel blocks per block the largest id
 * is (2^31 - 1 - 2) / 3 = 715827881 (its last kernel block, 2147483645,
 * fits int32; 715827882's, 2147483648, does not). 69 ids of 2^29 and one
 * of 178956970 are each within it, their OR (715827882) is not: taken. A
 * negative id among 70, and 715827882 at the end, are refused by index.
 */
START_TEST(ids_past_the_bound_only_by_their_or_are_taken) {
  clbt_table_config config = {.block_size = 48,
                              .kernel_block_size = 16,
                              .max_num_reqs = 1,
                              .max_num_blocks_per_req = 100,
                              .max_num_batched_tokens = 4};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  int32_t ids[70];
  for (int i = 0; i < 69; ++i) ids[i] = 1 << 29;
  ids[69] = 178956970;
  clbt_assert_ok(clbt_table_add_row(table, 0, ids, 70));
  const int32_t *row = clbt_table_host_data(table);
  ck_assert_int_eq(row[0], 1610612736);      /* 2^29 x 3 */
  ck_assert_int_eq(row[3 * 69 + 2], 536870912); /* 178956970 x 3 + 2 */
  ids[10] = -5;
  clbt_assert_fails(clbt_table_add_row(table, 0, ids, 70),
                    CLBT_INVALID_BLOCK_ID,
                    "block_ids[10] = -5 is outside [0, 715827881]");
  ids[10] = 1 << 29;
  ids[69] = 715827882;
  clbt_assert_fails(clbt_table_add_row(table, 0, ids, 70),
                    CLBT_INVALID_BLOCK_ID,
                    "block_ids[69] = 715827882 is outside [0, 715827881]");
  ck_assert_int_eq(row[3 * 69 + 2], 536870912); /* unchanged */
  clbt_table_destroy(table);
}
END_TEST

START_TEST(bad_rows_and_pointers) {
  clbt_table *table = create(0);
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){8}, 1));
  clbt_assert_ok(clbt_table_commit(table, 3));
  clbt_test_snapshot before = clbt_test_snapshot_take(table, 3);
  const int32_t one[] = {1};
  clbt_assert_fails(clbt_table_append_row(table, 3, one, 1),
                    CLBT_ROW_OUT_OF_RANGE, "row 3 is out of range: max_num_reqs is 3");
  clbt_assert_fails(clbt_table_append_row(table, 3, NULL, 0),
                    CLBT_ROW_OUT_OF_RANGE, "row 3");
  clbt_assert_fails(clbt_table_add_row(table, UINT32_MAX, one, 1),
                    CLBT_ROW_OUT_OF_RANGE, "row 4294967295");
  clbt_assert_fails(clbt_table_clear_row(table, 3), CLBT_ROW_OUT_OF_RANGE, "row 3");
  clbt_assert_fails(clbt_table_move_row(table, 3, 0), CLBT_ROW_OUT_OF_RANGE, "src 3");
  clbt_assert_fails(clbt_table_move_row(table, 1, 3), CLBT_ROW_OUT_OF_RANGE, "dst 3");
  clbt_assert_fails(clbt_table_swap_row(table, 5, 1), CLBT_ROW_OUT_OF_RANGE, "a 5");
  clbt_assert_fails(clbt_table_swap_row(table, 1, 5), CLBT_ROW_OUT_OF_RANGE, "b 5");
  clbt_assert_fails(clbt_table_append_row(table, 0, NULL, 2), CLBT_NULL_ARGUMENT,
                    "block_ids is NULL with n = 2");
  clbt_assert_fails(clbt_table_add_row(table, 1, NULL, 1), CLBT_NULL_ARGUMENT,
                    "block_ids is NULL");
  clbt_test_snapshot_check(&before, table);
  clbt_assert_fails(clbt_table_append_row(NULL, 0, one, 1), CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_table_clear_row(NULL, 0), CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_table_move_row(NULL, 0, 1), CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_table_swap_row(NULL, 0, 1), CLBT_NULL_ARGUMENT, "table");
  ck_assert_uint_eq(clbt_table_row_length(table, 3), 0);
  ck_assert_uint_eq(clbt_table_row_length(NULL, 0), 0);
  clbt_table_destroy(table);
}
END_TEST

/*
 * The batch forms: entry i's counts[i] ids follow entry i-1's in one flat
 * array; a row named twice behaves as two calls. Width 4 (hybrid: 8).
 */
START_TEST(batch_append_and_add) {
  clbt_table *table = create(0);
  /* row 1 gains 4, 9 then 7; row 0 gains 5 */
  clbt_assert_ok(clbt_table_append_rows(table, 3, (const uint32_t[]){1, 0, 1},
                                        (const uint32_t[]){2, 1, 1},
                                        (const int32_t[]){4, 9, 5, 7}));
  assert_row(table, 1, (const int32_t[]){4, 9, 7, 0}, 4, 3);
  assert_row(table, 0, (const int32_t[]){5, 0, 0, 0}, 4, 1);
  /* add: row 2 becomes 1, 2, 3, then 6 alone; columns 1-2 keep 2, 3 */
  clbt_assert_ok(clbt_table_add_rows(table, 2, (const uint32_t[]){2, 2},
                                     (const uint32_t[]){3, 1},
                                     (const int32_t[]){1, 2, 3, 6}));
  assert_row(table, 2, (const int32_t[]){6, 2, 3, 0}, 4, 1);
  /* an entry of no ids changes nothing; no entries, nothing at all */
  clbt_assert_ok(clbt_table_append_rows(table, 1, (const uint32_t[]){0},
                                        (const uint32_t[]){0}, NULL));
  clbt_assert_ok(clbt_table_append_rows(table, 0, NULL, NULL, NULL));
  clbt_assert_ok(clbt_table_add_rows(table, 0, NULL, NULL, NULL));
  assert_row(table, 0, (const int32_t[]){5, 0, 0, 0}, 4, 1);
  const uint32_t *lengths = clbt_table_row_lengths(table);
  ck_assert_uint_eq(lengths[0], 1);
  ck_assert_uint_eq(lengths[1], 3);
  ck_assert_uint_eq(lengths[2], 1);
  /* the committed rows are what the batches left */
  clbt_assert_ok(clbt_table_commit(table, 3));
  int32_t device[12];
  clbt_test_read(clbt_table_device_data(table), sizeof device, device);
  const int32_t expected[12] = {5, 0, 0, 0, 4, 9, 7, 0, 6, 2, 3, 0};
  for (int i = 0; i < 12; ++i)
    ck_assert_msg(device[i] == expected[i], "device[%d] is %d, expected %d", i,
                  device[i], expected[i]);
  clbt_table_destroy(table);

  /* hybrid: KV block b is kernel blocks 2b, 2b+1 */
  table = create(16);
  clbt_assert_ok(clbt_table_append_rows(table, 2, (const uint32_t[]){0, 2},
                                        (const uint32_t[]){1, 2},
                                        (const int32_t[]){3, 0, 1}));
  assert_row(table, 0, (const int32_t[]){6, 7, 0, 0, 0, 0, 0, 0}, 8, 2);
  assert_row(table, 2, (const int32_t[]){0, 1, 2, 3, 0, 0, 0, 0}, 8, 4);
  clbt_table_destroy(table);
}
END_TEST

/* A batch is checked whole before any row changes; a row named twice is
   checked against its length after the earlier entry. */
START_TEST(batch_all_or_nothing) {
  clbt_table *table = create(0);
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){4, 9, 2}, 3));
  clbt_test_snapshot before = clbt_test_snapshot_take(table, 3);
  /* row 1 holds 3 of 4: the first entry fits, the second would not */
  clbt_assert_fails(
      clbt_table_append_rows(table, 2, (const uint32_t[]){1, 1},
                             (const uint32_t[]){1, 1}, (const int32_t[]){8, 8}),
      CLBT_ROW_OVERFLOW,
      "entry 1 (row 1, ids from block_ids[1]): n = 1 blocks of 1 kernel "
      "blocks would overflow row 1: it holds 4 of width 4");
  clbt_assert_fails(
      clbt_table_append_rows(table, 2, (const uint32_t[]){0, 1},
                             (const uint32_t[]){1, 2},
                             (const int32_t[]){1, 2, -3}),
      CLBT_ROW_OVERFLOW, "entry 1 (row 1, ids from block_ids[1])");
  clbt_assert_fails(
      clbt_table_append_rows(table, 2, (const uint32_t[]){0, 2},
                             (const uint32_t[]){1, 2},
                             (const int32_t[]){1, 2, -3}),
      CLBT_INVALID_BLOCK_ID,
      "entry 1 (row 2, ids from block_ids[1]): block_ids[1] = -3 is outside "
      "[0, 2147483647]");
  clbt_assert_fails(
      clbt_table_add_rows(table, 3, (const uint32_t[]){0, 2, 3},
                          (const uint32_t[]){1, 1, 1},
                          (const int32_t[]){1, 2, 3}),
      CLBT_ROW_OUT_OF_RANGE,
      "entry 2 (row 3, ids from block_ids[2]): row 3 is out of range: "
      "max_num_reqs is 3");
  clbt_assert_fails(
      clbt_table_add_rows(table, 1, (const uint32_t[]){0},
                          (const uint32_t[]){5}, (const int32_t[]){1, 2, 3, 4, 5}),
      CLBT_ROW_OVERFLOW, "entry 0 (row 0, ids from block_ids[0]): n = 5");
  clbt_assert_fails(clbt_table_append_rows(table, 1, (const uint32_t[]){0},
                                           (const uint32_t[]){1}, NULL),
                    CLBT_NULL_ARGUMENT, "entry 0 (row 0, ids from "
                    "block_ids[0]): block_ids is NULL with n = 1");
  clbt_assert_fails(clbt_table_append_rows(table, 1, NULL, (const uint32_t[]){1},
                                           (const int32_t[]){1}),
                    CLBT_NULL_ARGUMENT, "rows is NULL with num_rows = 1");
  clbt_assert_fails(clbt_table_add_rows(table, 2, (const uint32_t[]){0, 1}, NULL,
                                        (const int32_t[]){1}),
                    CLBT_NULL_ARGUMENT, "counts is NULL with num_rows = 2");
  clbt_assert_fails(clbt_table_append_rows(NULL, 0, NULL, NULL, NULL),
                    CLBT_NULL_ARGUMENT, "table is NULL");
  clbt_test_snapshot_check(&before, table);
  /* the refused duplicate left row 1's length as it was: one block fits */
  clbt_assert_ok(clbt_table_append_rows(table, 1, (const uint32_t[]){1},
                                        (const uint32_t[]){1},
                                        (const int32_t[]){8}));
  assert_row(table, 1, (const int32_t[]){4, 9, 2, 8}, 4, 4);
  clbt_table_destroy(table);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("table_rows");
  TCase *tc = tcase_create("table_rows");
  tcase_add_test(tc, append_and_add);
  tcase_add_test(tc, ids_past_the_bound_only_by_their_or_are_taken);
  tcase_add_test(tc, hybrid_expansion);
  tcase_add_test(tc, clear_row);
  tcase_add_test(tc, truncate_row);
  tcase_add_test(tc, move_row);
  tcase_add_test(tc, swap_row);
  tcase_add_test(tc, swap_row_longer_second);
  tcase_add_test(tc, overflow_at_the_boundary);
  tcase_add_test(tc, block_id_bounds);
  tcase_add_test(tc, no_id_fits_past_two_to_the_31_kernel_blocks);
  tcase_add_test(tc, bad_rows_and_pointers);
  tcase_add_test(tc, batch_append_and_add);
  tcase_add_test(tc, batch_all_or_nothing);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
