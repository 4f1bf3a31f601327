/*
 * Commits (src/engine/commit.c): every way of committing gives the device what a
 * whole copy would, moves only what changed, survives uploads in flight,
 * and chains with events.
 */
#include "engine/commit.h"
#include "engine/engine_internal.h"
#include "clbt_test.h"
#include "xorshift.h"

#include <stdlib.h>

static const clbt_commit_mode all_modes[] = {CLBT_COMMIT_AUTO, CLBT_COMMIT_WHOLE,
                                             CLBT_COMMIT_SCATTER};
#define NUM_MODES (sizeof all_modes / sizeof all_modes[0])

static clbt_table *create(uint32_t max_num_reqs, uint32_t blocks,
                          clbt_commit_mode mode) {
  clbt_table_config config = {.block_size = 16, .max_num_reqs = max_num_reqs,
                              .max_num_blocks_per_req = blocks,
                              .max_num_batched_tokens = 64};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_set_commit_mode(table, mode));
  return table;
}

static int32_t *read_rows(const clbt_table *table, uint32_t rows) {
  size_t bytes = (size_t)rows * clbt_table_width(table) * sizeof(int32_t);
  int32_t *device = malloc(bytes);
  ck_assert_ptr_nonnull(device);
  clbt_test_read(clbt_table_device_data(table), bytes, device);
  return device;
}

/*
 * The steady decode step: 256 requests of width 8192 (131072
 * tokens in blocks of 16), 1 row in 16 gains a block. A whole copy moves
 * 256 x 8192 x 4 bytes plus 256 lengths; the changes are 16 cells and 16
 * lengths: a scatter packet of 16 rows of a 4-word entry and 1 id, 16 x
 * (4 + 1) words. AUTO scatters too.
 */
START_TEST(steady_decode_moves_what_changed) {
  const uint64_t whole = 256ull * 8192 * 4 + 256 * 4;
  const uint64_t expected[] = {16 * 5 * 4, whole, 16 * 5 * 4};
  const clbt_commit_mode taken[] = {CLBT_COMMIT_SCATTER, CLBT_COMMIT_WHOLE,
                                    CLBT_COMMIT_SCATTER};
  for (size_t m = 0; m < NUM_MODES; ++m) {
    clbt_table *table = create(256, 8192, all_modes[m]);
    for (uint32_t r = 0; r < 256; ++r)
      clbt_assert_ok(clbt_table_append_row(table, r, (const int32_t[]){(int32_t)r}, 1));
    clbt_assert_ok(clbt_table_commit(table, 256));
    for (uint32_t r = 0; r < 256; r += 16)
      clbt_assert_ok(
          clbt_table_append_row(table, r, (const int32_t[]){(int32_t)(1000 + r)}, 1));
    clbt_assert_ok(clbt_table_commit(table, 256));
    clbt_commit_info info;
    clbt_assert_ok(clbt_table_last_commit(table, &info));
    ck_assert_int_eq(info.mode, taken[m]);
    ck_assert_uint_eq(info.rows, all_modes[m] == CLBT_COMMIT_WHOLE ? 256 : 16);
    ck_assert_uint_eq(info.bytes, expected[m]);
    if (all_modes[m] != CLBT_COMMIT_WHOLE)
      ck_assert_msg(info.bytes * 50 <= whole, "%llu bytes is over 2%% of %llu",
                    (unsigned long long)info.bytes, (unsigned long long)whole);
    int32_t *device = read_rows(table, 256);
    ck_assert_int_eq(device[16 * 8192 + 1], 1016);
    ck_assert_int_eq(device[17 * 8192 + 1], 0);
    ck_assert_int_eq(device[17 * 8192], 17);
    free(device);
    clbt_table_destroy(table);
  }
}
END_TEST

/* Rows from num_reqs on keep their changes for a later commit. */
START_TEST(pending_rows_wait_for_their_commit) {
  for (size_t m = 0; m < NUM_MODES; ++m) {
    clbt_table *table = create(8, 4, all_modes[m]);
    clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){11}, 1));
    clbt_assert_ok(clbt_table_append_row(table, 5, (const int32_t[]){55}, 1));
    clbt_assert_ok(clbt_table_commit(table, 3));
    int32_t *device = read_rows(table, 8);
    ck_assert_int_eq(device[1 * 4], 11);
    ck_assert_int_eq(device[5 * 4], 0);
    free(device);
    clbt_assert_ok(clbt_table_commit(table, 6));
    device = read_rows(table, 8);
    ck_assert_int_eq(device[5 * 4], 55);
    free(device);
    clbt_commit_info info;
    clbt_assert_ok(clbt_table_commit(table, 8));
    clbt_assert_ok(clbt_table_last_commit(table, &info));
    ck_assert_uint_eq(info.rows, 0); /* nothing changed since */
    ck_assert_uint_eq(info.bytes, 0);
    ck_assert_int_eq(info.mode, CLBT_COMMIT_AUTO);
    clbt_table_destroy(table);
  }
}
END_TEST

/* The top 32 bits of the next number (support/xorshift.h): a seed replays a run. */
static uint32_t next_random(uint64_t *state) {
  return (uint32_t)(xorshift64_next(state) >> 32);
}

/* One random row operation through the public API (some are refused). */
static void random_operation(clbt_table *table, uint32_t rows, uint64_t *rng) {
  uint32_t a = next_random(rng) % rows, b = next_random(rng) % rows;
  int32_t ids[3] = {(int32_t)(next_random(rng) % 5000),
                    (int32_t)(next_random(rng) % 5000),
                    (int32_t)(next_random(rng) % 5000)};
  size_t n = next_random(rng) % 4;
  switch (next_random(rng) % 6) {
  case 0:
  case 1:
    (void)clbt_table_append_row(table, a, ids, n); /* may overflow: refused */
    break;
  case 2:
    clbt_assert_ok(clbt_table_add_row(table, a, ids, n));
    break;
  case 3:
    clbt_assert_ok(clbt_table_clear_row(table, a));
    break;
  case 4:
    clbt_assert_ok(clbt_table_move_row(table, a, b));
    break;
  default:
    clbt_assert_ok(clbt_table_swap_row(table, a, b));
    break;
  }
}

/*
 * Random operation sequences: after every commit the device holds what a
 * whole copy of rows [0, num_reqs) would give, and rows from num_reqs on
 * hold what was committed before.
 */
START_TEST(every_mode_matches_a_whole_copy) {
  enum { ROWS = 12, BLOCKS = 5, WIDTH = 10, STEPS = 150 };
  uint64_t seed = 20261130;
  for (size_t m = 0; m < NUM_MODES; ++m) {
    clbt_table_config config = {.block_size = 32, .kernel_block_size = 16,
                                .max_num_reqs = ROWS,
                                .max_num_blocks_per_req = BLOCKS,
                                .max_num_batched_tokens = 8};
    clbt_table *table = NULL;
    clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
    clbt_assert_ok(clbt_table_set_commit_mode(table, all_modes[m]));
    int32_t expected[ROWS * WIDTH] = {0};
    uint64_t rng = seed + m;
    for (int step = 0; step < STEPS; ++step) {
      uint32_t operations = next_random(&rng) % 8;
      for (uint32_t i = 0; i < operations; ++i)
        random_operation(table, ROWS, &rng);
      uint32_t num_reqs = next_random(&rng) % (ROWS + 1);
      clbt_assert_ok(clbt_table_commit(table, num_reqs));
      memcpy(expected, clbt_table_host_data(table),
             (size_t)num_reqs * WIDTH * sizeof(int32_t));
      int32_t *device = read_rows(table, ROWS);
      for (int i = 0; i < ROWS * WIDTH; ++i)
        ck_assert_msg(device[i] == expected[i],
                      "mode %d, seed %llu, step %d: cell %d is %d, expected %d",
                      (int)all_modes[m], (unsigned long long)(seed + m), step,
                      i, device[i], expected[i]);
      free(device);
    }
    clbt_table_destroy(table);
  }
}
END_TEST

/*
 * A scatter packet must not be reused while its upload waits: hold the
 * queue with a user event, commit, read the committed rows (queued behind
 * the commit), change the rows and commit again, then let the queue go.
 * The read must see the first commit's rows.
 */
START_TEST(packets_survive_an_upload_in_flight) {
  clbt_table *table = create(4, 4, CLBT_COMMIT_SCATTER);
  cl_context context = clbt_device_context(clbt_test_device());
  cl_command_queue queue = clbt_device_queue(clbt_test_device());
  cl_int error = CL_SUCCESS;
  cl_event hold = clCreateUserEvent(context, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){7, 8}, 2));
  clbt_assert_ok(clbt_table_enqueue_commit(table, 1, 1, &hold, NULL));
  int32_t seen[4] = {-1, -1, -1, -1};
  ck_assert_int_eq(clEnqueueReadBuffer(queue, clbt_table_device_data(table),
                                       CL_FALSE, 0, sizeof seen, seen, 0, NULL,
                                       NULL),
                   CL_SUCCESS);
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){9, 9, 9}, 3));
  clbt_assert_ok(clbt_table_commit(table, 1));
  ck_assert_int_eq(clSetUserEventStatus(hold, CL_COMPLETE), CL_SUCCESS);
  ck_assert_int_eq(clFinish(queue), CL_SUCCESS);
  ck_assert_int_eq(seen[0], 7);
  ck_assert_int_eq(seen[1], 8);
  ck_assert_int_eq(seen[2], 0);
  int32_t *device = read_rows(table, 1);
  ck_assert_int_eq(device[0], 9);
  ck_assert_int_eq(device[2], 9);
  free(device);
  clReleaseEvent(hold);
  clbt_table_destroy(table);
}
END_TEST

/* Commit and slot mapping chain through events, without a finish. */
START_TEST(events_chain_commit_and_slot_mapping) {
  for (size_t m = 0; m < NUM_MODES; ++m) {
    clbt_table *table = create(2, 2, all_modes[m]);
    cl_mem qsl = clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 2});
    cl_mem positions =
        clbt_test_buffer(2 * sizeof(int64_t), (const int64_t[]){0, 17});
    clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){3, 4}, 2));
    cl_event committed = NULL, mapped = NULL;
    clbt_assert_ok(clbt_table_enqueue_commit(table, 1, 0, NULL, &committed));
    ck_assert_ptr_nonnull(committed);
    clbt_assert_ok(clbt_table_enqueue_slot_mapping(table, 1, qsl, positions, 2,
                                                   1, &committed, &mapped));
    ck_assert_ptr_nonnull(mapped);
    ck_assert_int_eq(clWaitForEvents(1, &mapped), CL_SUCCESS);
    int64_t slots[2];
    clbt_test_read(clbt_table_slot_mapping(table), sizeof slots, slots);
    ck_assert_int_eq(slots[0], 3 * 16);
    ck_assert_int_eq(slots[1], 4 * 16 + 1);
    /* nothing to move still hands back an event */
    cl_event nothing = NULL;
    clbt_assert_ok(clbt_table_enqueue_commit(table, 1, 1, &mapped, &nothing));
    ck_assert_ptr_nonnull(nothing);
    ck_assert_int_eq(clWaitForEvents(1, &nothing), CL_SUCCESS);
    clReleaseEvent(committed);
    clReleaseEvent(mapped);
    clReleaseEvent(nothing);
    clReleaseMemObject(qsl);
    clReleaseMemObject(positions);
    clbt_table_destroy(table);
  }
}
END_TEST

/* A held wait list holds the kernel back. */
START_TEST(slot_mapping_waits_for_its_wait_list) {
  clbt_table *table = create(1, 1, CLBT_COMMIT_AUTO);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){2}, 1));
  clbt_assert_ok(clbt_table_commit(table, 1));
  cl_int error = CL_SUCCESS;
  cl_event hold = clCreateUserEvent(clbt_device_context(clbt_test_device()), &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  cl_mem qsl = clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 1});
  cl_mem positions = clbt_test_buffer(sizeof(int64_t), (const int64_t[]){5});
  cl_event mapped = NULL;
  clbt_assert_ok(clbt_table_enqueue_slot_mapping(table, 1, qsl, positions, 1, 1,
                                                 &hold, &mapped));
  ck_assert_int_eq(clFlush(clbt_device_queue(clbt_test_device())), CL_SUCCESS);
  cl_int state = CL_COMPLETE;
  ck_assert_int_eq(clGetEventInfo(mapped, CL_EVENT_COMMAND_EXECUTION_STATUS,
                                  sizeof state, &state, NULL),
                   CL_SUCCESS);
  ck_assert_int_ne(state, CL_COMPLETE);
  ck_assert_int_eq(clSetUserEventStatus(hold, CL_COMPLETE), CL_SUCCESS);
  ck_assert_int_eq(clWaitForEvents(1, &mapped), CL_SUCCESS);
  int64_t slot;
  clbt_test_read(clbt_table_slot_mapping(table), sizeof slot, &slot);
  ck_assert_int_eq(slot, 2 * 16 + 5);
  clReleaseEvent(mapped);
  clReleaseEvent(hold);
  clReleaseMemObject(qsl);
  clReleaseMemObject(positions);
  clbt_table_destroy(table);
}
END_TEST

START_TEST(bad_arguments) {
  clbt_table *table = create(2, 2, CLBT_COMMIT_AUTO);
  cl_event event = NULL;
  clbt_assert_fails(clbt_table_enqueue_commit(table, 1, 1, NULL, &event),
                    CLBT_INVALID_ARGUMENT, "wait_list is NULL with num_events 1");
  clbt_assert_fails(clbt_table_enqueue_commit(table, 1, 0, &event, NULL),
                    CLBT_INVALID_ARGUMENT, "wait_list is not NULL with num_events 0");
  clbt_assert_fails(clbt_table_enqueue_commit(table, 3, 0, NULL, NULL),
                    CLBT_TOO_MANY_REQUESTS, "num_reqs 3 exceeds max_num_reqs 2");
  clbt_assert_fails(clbt_table_enqueue_commit(NULL, 1, 0, NULL, NULL),
                    CLBT_NULL_ARGUMENT, "table");
  ck_assert_ptr_null(event);
  clbt_assert_fails(clbt_table_set_commit_mode(table, (clbt_commit_mode)3),
                    CLBT_INVALID_ARGUMENT, "mode 3 is not a clbt_commit_mode");
  clbt_assert_fails(clbt_table_set_commit_mode(NULL, CLBT_COMMIT_AUTO),
                    CLBT_NULL_ARGUMENT, "table");
  clbt_commit_info info;
  clbt_assert_fails(clbt_table_last_commit(table, NULL), CLBT_NULL_ARGUMENT, "info");
  clbt_assert_fails(clbt_table_last_commit(NULL, &info), CLBT_NULL_ARGUMENT, "table");
  clbt_table_destroy(table);
}
END_TEST

/* clear resets both sides, so nothing is left to commit. */
/*
 * The scatter kernel counts cells in 32 bits. A forced SCATTER commit of
 * more cells is refused (no table that large fits in memory here, so the
 * choice is checked alone); AUTO sends such a commit whole.
 */
START_TEST(scatter_refuses_what_it_cannot_count) {
  const uint64_t too_many = (uint64_t)UINT32_MAX + 1;
  clbt_commit_mode chosen = CLBT_COMMIT_AUTO;
  clbt_assert_fails(clbt__commit_choose(CLBT_COMMIT_SCATTER, 1u << 20, 1u << 13,
                                        1, too_many, &chosen),
                    CLBT_SIZE_OVERFLOW,
                    "a SCATTER commit of 4294967296 changed cells in 1 rows "
                    "exceeds the scatter kernel's count of 4294967295");
  ck_assert_int_eq(chosen, CLBT_COMMIT_AUTO); /* untouched */
  clbt_assert_ok(clbt__commit_choose(CLBT_COMMIT_SCATTER, 1u << 20, 1u << 13,
                                     1, UINT32_MAX, &chosen));
  ck_assert_int_eq(chosen, CLBT_COMMIT_SCATTER);
  /* The rows are counted in 32 bits too. */
  clbt_assert_fails(clbt__commit_choose(CLBT_COMMIT_SCATTER, UINT32_MAX,
                                        1u << 13, too_many, 0, &chosen),
                    CLBT_SIZE_OVERFLOW, "in 4294967296 rows");
  /* AUTO: 2^20 rows of 2^13 + 1 words is about 2^33 words whole; 2^32
     cells would be a 3 x 2^32-word packet, and cannot be counted. */
  clbt_assert_ok(clbt__commit_choose(CLBT_COMMIT_AUTO, 1u << 20, 1u << 13, 1,
                                     too_many, &chosen));
  ck_assert_int_eq(chosen, CLBT_COMMIT_WHOLE);
  /* 16 cells in 16 rows of 256 x 8192: 80 words against 2 million. */
  clbt_assert_ok(clbt__commit_choose(CLBT_COMMIT_AUTO, 256, 8192, 16, 16,
                                     &chosen));
  ck_assert_int_eq(chosen, CLBT_COMMIT_SCATTER);
}
END_TEST

START_TEST(clear_leaves_nothing_to_commit) {
  clbt_table *table = create(2, 2, CLBT_COMMIT_AUTO);
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){4}, 1));
  clbt_assert_ok(clbt_table_clear(table));
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_commit_info info;
  clbt_assert_ok(clbt_table_last_commit(table, &info));
  ck_assert_uint_eq(info.rows, 0);
  int32_t *device = read_rows(table, 2);
  for (int i = 0; i < 4; ++i) ck_assert_int_eq(device[i], 0);
  free(device);
  clbt_table_destroy(table);
}
END_TEST

/*
 * A gathered position is trusted while its row's version is the one it
 * copied. Versions come from the engine's counter, which every commit
 * advances: the test hook below starts it just short of 2^32, where a
 * 32-bit version wrapped, then moves it on as 2^32 - 1 empty commits would,
 * so that row 0's next version is exactly 2^32 after the one its gathered
 * copy holds. The second gather must still copy row 0's new blocks.
 */
static void gather_row_zero(clbt_table *table, cl_mem qsl, int32_t *out) {
  clbt_step step = CLBT_STEP_INIT;
  step.flags = CLBT_STEP_GATHER;
  step.num_reqs = 1;
  step.query_start_loc = qsl;
  clbt_assert_ok(clbt_table_enqueue_step(table, &step, 0, NULL, NULL));
  clbt_test_read(clbt_table_gathered_rows(table),
                 3 * sizeof(int32_t), out);
}

START_TEST(versions_do_not_come_round) {
  clbt_table *table = create(2, 3, CLBT_COMMIT_AUTO);
  cl_mem qsl = clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 0});
  int32_t gathered[3];
  table->engine->version = UINT32_MAX - 1;
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){1, 2, 3}, 3));
  gather_row_zero(table, qsl, gathered);
  ck_assert_int_eq(gathered[0], 1);
  ck_assert_int_eq(gathered[2], 3);
  table->engine->version += ((uint64_t)1 << 32) - 1;
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){7, 8, 9}, 3));
  gather_row_zero(table, qsl, gathered);
  ck_assert_int_eq(gathered[0], 7);
  ck_assert_int_eq(gathered[1], 8);
  ck_assert_int_eq(gathered[2], 9);
  clReleaseMemObject(qsl);
  clbt_table_destroy(table);
}
END_TEST

/*
 * AUTO goes WHOLE once the packet would be half the whole copy or more
 * (clbt.h): a row of one changed cell is a 5-word packet (a 4-word entry
 * and its id); 2 rows of width 4 are 2 x (4 + 1) = 10 words whole, exactly
 * twice it, and 1 row of width 10 is 11 words, just over twice.
 */
START_TEST(auto_goes_whole_at_half) {
  clbt_commit_mode chosen = CLBT_COMMIT_SCATTER;
  clbt_assert_ok(clbt__commit_choose(CLBT_COMMIT_AUTO, 2, 4, 1, 1, &chosen));
  ck_assert_int_eq(chosen, CLBT_COMMIT_WHOLE);
  clbt_assert_ok(clbt__commit_choose(CLBT_COMMIT_AUTO, 1, 10, 1, 1, &chosen));
  ck_assert_int_eq(chosen, CLBT_COMMIT_SCATTER);
}
END_TEST

/*
 * A group whose device copy is unknown (device_stale: what reaping a lost
 * upload leaves; set here directly, with the device rows and lengths
 * overwritten by junk as the lost packet may leave them) is rewritten
 * whole at its next commit, every row to max_num_reqs whatever num_reqs:
 * row 5 was committed before and is unknown too. After that commit the
 * group is in sync again, and the next one scatters only what changed.
 */
START_TEST(stale_group_is_rewritten_whole) {
  clbt_table *table = create(8, 4, CLBT_COMMIT_SCATTER);
  clbt_assert_ok(clbt_table_append_row(table, 5, (const int32_t[]){55}, 1));
  clbt_assert_ok(clbt_table_commit(table, 8));
  int32_t junk[8 * 4];
  for (int i = 0; i < 8 * 4; ++i) junk[i] = -7;
  clbt_test_write(clbt_table_device_data(table), sizeof junk, junk);
  clbt_test_write(clbt_table_device_row_lengths(table), 8 * sizeof(int32_t),
                  junk);
  table->device_stale = true;
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_commit_info info;
  clbt_assert_ok(clbt_table_last_commit(table, &info));
  ck_assert_int_eq(info.mode, CLBT_COMMIT_WHOLE);
  ck_assert_uint_eq(info.rows, 8);
  ck_assert_uint_eq(info.bytes, 8 * (4 + 1) * 4);
  int32_t *device = read_rows(table, 8);
  for (int i = 0; i < 8 * 4; ++i)
    ck_assert_msg(device[i] == (i == 5 * 4 ? 55 : 0), "cell %d is %d", i,
                  device[i]);
  free(device);
  uint32_t lengths[8];
  clbt_test_read(clbt_table_device_row_lengths(table), sizeof lengths,
                 lengths);
  for (int r = 0; r < 8; ++r)
    ck_assert_msg(lengths[r] == (r == 5 ? 1u : 0u), "length %d is %u", r,
                  lengths[r]);
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){11}, 1));
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_assert_ok(clbt_table_last_commit(table, &info));
  ck_assert_int_eq(info.mode, CLBT_COMMIT_SCATTER);
  ck_assert_uint_eq(info.rows, 1);
  ck_assert_uint_eq(info.bytes, (4 + 1) * 4);
  clbt_table_destroy(table);
}
END_TEST

/*
 * A truncated row is zero past what it keeps, so a later swap moves only
 * the columns either row may hold nonzero: row 0 of 3 ids truncated to 1,
 * swapped with row 1 of 1 id, changes 1 cell of each, a packet of 2 rows
 * of a 4-word entry and 1 id: 2 x (4 + 1) words.
 */
START_TEST(swap_after_truncate_moves_only_live_columns) {
  clbt_table *table = create(2, 4, CLBT_COMMIT_SCATTER);
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){1, 2, 3}, 3));
  clbt_assert_ok(clbt_table_add_row(table, 1, (const int32_t[]){5}, 1));
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_assert_ok(clbt_table_truncate_row(table, 0, 1));
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_assert_ok(clbt_table_swap_row(table, 0, 1));
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_commit_info info;
  clbt_assert_ok(clbt_table_last_commit(table, &info));
  ck_assert_int_eq(info.mode, CLBT_COMMIT_SCATTER);
  ck_assert_uint_eq(info.rows, 2);
  ck_assert_uint_eq(info.bytes, 2 * (4 + 1) * 4);
  int32_t *device = read_rows(table, 2);
  const int32_t expected[8] = {5, 0, 0, 0, 1, 0, 0, 0};
  for (int i = 0; i < 8; ++i) ck_assert_int_eq(device[i], expected[i]);
  free(device);
  clbt_table_destroy(table);
}
END_TEST

/*
 * A change of length alone moves no cell: row 0 of [1, 2, 3] gains 4, then
 * is replaced by no blocks (add_row of 0, which sets the length to 0 and,
 * as vLLM's, leaves the ids). The commit moves row 0's one new cell and
 * its length: a packet of 1 row of a 4-word entry and 1 id, (4 + 1) words,
 * as a commit of the append alone would.
 */
START_TEST(a_length_change_moves_no_cells) {
  clbt_table *table = create(2, 4, CLBT_COMMIT_SCATTER);
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){1, 2, 3}, 3));
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){4}, 1));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){0}, 0));
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_commit_info info;
  clbt_assert_ok(clbt_table_last_commit(table, &info));
  ck_assert_int_eq(info.mode, CLBT_COMMIT_SCATTER);
  ck_assert_uint_eq(info.rows, 1);
  ck_assert_uint_eq(info.bytes, (4 + 1) * 4);
  ck_assert_uint_eq(clbt_table_row_length(table, 0), 0);
  clbt_test_assert_in_sync(clbt_device_queue(clbt_test_device()), table, 2);
  clbt_table_destroy(table);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("commit");
  TCase *tc = tcase_create("commit");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, steady_decode_moves_what_changed);
  tcase_add_test(tc, pending_rows_wait_for_their_commit);
  tcase_add_test(tc, every_mode_matches_a_whole_copy);
  tcase_add_test(tc, packets_survive_an_upload_in_flight);
  tcase_add_test(tc, events_chain_commit_and_slot_mapping);
  tcase_add_test(tc, slot_mapping_waits_for_its_wait_list);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, scatter_refuses_what_it_cannot_count);
  tcase_add_test(tc, clear_leaves_nothing_to_commit);
  tcase_add_test(tc, versions_do_not_come_round);
  tcase_add_test(tc, auto_goes_whole_at_half);
  tcase_add_test(tc, stale_group_is_rewritten_whole);
  tcase_add_test(tc, swap_after_truncate_moves_only_live_columns);
  tcase_add_test(tc, a_length_change_moves_no_cells);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
