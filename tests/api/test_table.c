/* One table (src/api/table.c): config rules, buffers, commit, clear, launch. */
#include "clbt_test.h"

#include <stdint.h>
#include <stdlib.h>

static clbt_table_config small_config(void) {
  return (clbt_table_config){.block_size = 16, .max_num_reqs = 4,
                             .max_num_blocks_per_req = 3,
                             .max_num_batched_tokens = 8};
}

static clbt_table *create(clbt_table_config config) {
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  return table;
}

/* Each broken rule: its status, a message naming the field, no table. */
START_TEST(config_rules) {
  static const struct {
    const char *field;
    clbt_table_config config;
    clbt_status status;
    const char *words;
  } cases[] = {
      {"block_size", {.max_num_reqs = 1, .max_num_blocks_per_req = 1,
                      .max_num_batched_tokens = 1},
       CLBT_INVALID_CONFIG, "block_size is 0"},
      {"max_num_reqs", {.block_size = 16, .max_num_blocks_per_req = 1,
                        .max_num_batched_tokens = 1},
       CLBT_INVALID_CONFIG, "max_num_reqs is 0"},
      {"max_num_blocks_per_req", {.block_size = 16, .max_num_reqs = 1,
                                  .max_num_batched_tokens = 1},
       CLBT_INVALID_CONFIG, "max_num_blocks_per_req is 0"},
      {"max_num_batched_tokens", {.block_size = 16, .max_num_reqs = 1,
                                  .max_num_blocks_per_req = 1},
       CLBT_INVALID_CONFIG, "max_num_batched_tokens is 0"},
      {"kernel_block_size", {.block_size = 32, .kernel_block_size = 24,
                             .max_num_reqs = 1, .max_num_blocks_per_req = 1,
                             .max_num_batched_tokens = 1},
       CLBT_INVALID_CONFIG, "kernel_block_size 24 does not divide block_size 32"},
      {"kernel_block_size above", {.block_size = 16, .kernel_block_size = 32,
                                   .max_num_reqs = 1,
                                   .max_num_blocks_per_req = 1,
                                   .max_num_batched_tokens = 1},
       CLBT_INVALID_CONFIG, "kernel_block_size 32 does not divide"},
      {"cp_rank", {.block_size = 16, .max_num_reqs = 1,
                   .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1,
                   .cp_world_size = 4, .cp_rank = 4},
       CLBT_INVALID_CONFIG, "cp_rank 4 is not below cp_world_size 4"},
      {"cp_rank without cp", {.block_size = 16, .max_num_reqs = 1,
                              .max_num_blocks_per_req = 1,
                              .max_num_batched_tokens = 1, .cp_rank = 1},
       CLBT_INVALID_CONFIG, "cp_rank 1 is not below cp_world_size 1"},
      {"cp_interleave_size", {.block_size = 16, .max_num_reqs = 1,
                              .max_num_blocks_per_req = 1,
                              .max_num_batched_tokens = 1, .cp_world_size = 2,
                              .cp_interleave_size = 3},
       CLBT_INVALID_CONFIG, "cp_interleave_size 3 does not divide block_size 16"},
      {"slot_mode", {.block_size = 16, .max_num_reqs = 1,
                     .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1,
                     .slot_mode = (clbt_slot_mode)7},
       CLBT_INVALID_CONFIG, "slot_mode 7"},
      {"max_num_batched_tokens above INT32_MAX",
       {.block_size = 16, .max_num_reqs = 1, .max_num_blocks_per_req = 1,
        .max_num_batched_tokens = (uint32_t)INT32_MAX + 1},
       CLBT_INVALID_CONFIG, "max_num_batched_tokens 2147483648 exceeds INT32_MAX"},
      {"max_num_reqs above INT32_MAX",
       {.block_size = 16, .max_num_reqs = UINT32_MAX,
        .max_num_blocks_per_req = 1, .max_num_batched_tokens = 1},
       CLBT_INVALID_CONFIG, "max_num_reqs 4294967295 exceeds INT32_MAX"},
      {"width", {.block_size = 64, .kernel_block_size = 1, .max_num_reqs = 1,
                 .max_num_blocks_per_req = UINT32_MAX / 32,
                 .max_num_batched_tokens = 1},
       CLBT_SIZE_OVERFLOW, "exceeds UINT32_MAX"},
  };
  /* a value create must not overwrite when it fails */
  clbt_table *const untouched = (clbt_table *)(uintptr_t)0x1;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    clbt_table *table = untouched;
    clbt_status status =
        clbt_table_create(clbt_test_device(), &cases[i].config, &table);
    ck_assert_msg(status == cases[i].status, "%s: %s (%s)", cases[i].field,
                  clbt_status_name(status), clbt_last_error());
    ck_assert_msg(strstr(clbt_last_error(), cases[i].words), "%s: '%s'",
                  cases[i].field, clbt_last_error());
    ck_assert_msg(table == untouched, "%s: *out was written",
                  cases[i].field);
    ck_assert_int_eq(clbt_table_prepare(clbt_test_device(), &cases[i].config),
                     cases[i].status);
  }
}
END_TEST

START_TEST(null_arguments) {
  clbt_table_config config = small_config();
  clbt_table *table = NULL;
  clbt_assert_fails(clbt_table_create(NULL, &config, &table),
                    CLBT_NULL_ARGUMENT, "device");
  clbt_assert_fails(clbt_table_create(clbt_test_device(), NULL, &table),
                    CLBT_NULL_ARGUMENT, "config");
  clbt_assert_fails(clbt_table_create(clbt_test_device(), &config, NULL),
                    CLBT_NULL_ARGUMENT, "out");
  clbt_assert_fails(clbt_table_prepare(NULL, &config), CLBT_NULL_ARGUMENT,
                    "device");
  clbt_assert_fails(clbt_table_commit(NULL, 1), CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_table_clear(NULL), CLBT_NULL_ARGUMENT, "table");
  clbt_table_destroy(NULL);
  ck_assert_uint_eq(clbt_table_width(NULL), 0);
  ck_assert_ptr_null(clbt_table_host_data(NULL));
  ck_assert_ptr_null(clbt_table_device_data(NULL));
  ck_assert_ptr_null(clbt_table_slot_mapping(NULL));
  ck_assert_ptr_null(clbt_table_rejected_tokens(NULL));
}
END_TEST

/* A new table: zero rows on both sides, a pad-filled output, the width. */
START_TEST(initial_state) {
  clbt_table_config config = small_config();
  config.kernel_block_size = 4; /* width 3 * 16/4 = 12 */
  clbt_table *table = create(config);
  ck_assert_uint_eq(clbt_table_width(table), 12);
  int32_t device[4 * 12];
  clbt_test_read(clbt_table_device_data(table), sizeof device, device);
  for (int i = 0; i < 4 * 12; ++i) {
    ck_assert_int_eq(clbt_table_host_data(table)[i], 0);
    ck_assert_int_eq(device[i], 0);
  }
  int64_t slots[8];
  clbt_test_read(clbt_table_slot_mapping(table), sizeof slots, slots);
  for (int t = 0; t < 8; ++t) ck_assert_int_eq(slots[t], CLBT_PAD_SLOT_ID);
  size_t bytes = 0;
  ck_assert_int_eq(clGetMemObjectInfo(clbt_table_slot_mapping(table),
                                      CL_MEM_SIZE, sizeof bytes, &bytes, NULL),
                   CL_SUCCESS);
  ck_assert_uint_eq(bytes, 8 * sizeof(int64_t));
  for (uint32_t r = 0; r < 4; ++r) ck_assert_uint_eq(clbt_table_row_length(table, r), 0);
  clbt_table_destroy(table);
}
END_TEST

/* commit copies rows [0, num_reqs) whole and leaves the others. */
START_TEST(commit_copies_leading_rows) {
  clbt_table *table = create(small_config());
  for (uint32_t r = 0; r < 4; ++r)
    clbt_assert_ok(clbt_table_append_row(
        table, r, (const int32_t[]){(int32_t)(10 * r + 1), (int32_t)(10 * r + 2)}, 2));
  clbt_assert_ok(clbt_table_commit(table, 2));
  int32_t device[4 * 3];
  clbt_test_read(clbt_table_device_data(table), sizeof device, device);
  const int32_t expected[4 * 3] = {1, 2, 0, 11, 12, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 12; ++i) ck_assert_int_eq(device[i], expected[i]);
  clbt_assert_ok(clbt_table_commit(table, 0));
  clbt_assert_fails(clbt_table_commit(table, 5), CLBT_TOO_MANY_REQUESTS,
                    "num_reqs 5 exceeds max_num_reqs 4");
  clbt_table_destroy(table);
}
END_TEST

/* Host rows may change as soon as commit returns. */
START_TEST(commit_is_isolated_from_later_edits) {
  clbt_table *table = create(small_config());
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){7, 8}, 2));
  clbt_assert_ok(clbt_table_commit(table, 1));
  clbt_assert_ok(clbt_table_add_row(table, 0, (const int32_t[]){9}, 1));
  clbt_assert_ok(clbt_table_clear_row(table, 0));
  int32_t device[3];
  clbt_test_read(clbt_table_device_data(table), sizeof device, device);
  ck_assert_int_eq(device[0], 7);
  ck_assert_int_eq(device[1], 8);
  ck_assert_int_eq(device[2], 0);
  clbt_table_destroy(table);
}
END_TEST

/* clear zeroes rows and lengths on both sides (vLLM keeps the lengths). */
START_TEST(clear_resets_everything) {
  clbt_table *table = create(small_config());
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){4, 5}, 2));
  clbt_assert_ok(clbt_table_commit(table, 2));
  clbt_assert_ok(clbt_table_clear(table));
  int32_t device[4 * 3];
  clbt_test_read(clbt_table_device_data(table), sizeof device, device);
  for (int i = 0; i < 12; ++i) {
    ck_assert_int_eq(device[i], 0);
    ck_assert_int_eq(clbt_table_host_data(table)[i], 0);
  }
  ck_assert_uint_eq(clbt_table_row_length(table, 1), 0);
  /* The next append starts at column 0 again. */
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){6}, 1));
  ck_assert_int_eq(clbt_table_host_data(table)[3], 6);
  /* The device lengths were reset too: the old row no longer maps. */
  cl_mem qsl = clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 1});
  cl_mem positions = clbt_test_buffer(sizeof(int64_t), (const int64_t[]){0});
  clbt_assert_ok(clbt_table_clear(table));
  clbt_test_poison(clbt_table_slot_mapping(table), 8);
  clbt_assert_ok(clbt_table_compute_slot_mapping(table, 1, qsl, positions, 1));
  int64_t slot;
  clbt_test_read(clbt_table_slot_mapping(table), sizeof slot, &slot);
  ck_assert_int_eq(slot, CLBT_PAD_SLOT_ID);
  clReleaseMemObject(qsl);
  clReleaseMemObject(positions);
  clbt_table_destroy(table);
}
END_TEST

/* Bad slot-mapping arguments: a status, a message, and nothing written. */
START_TEST(slot_mapping_arguments) {
  clbt_table *table = create(small_config());
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){3}, 1));
  clbt_assert_ok(clbt_table_commit(table, 1));
  cl_mem qsl = clbt_test_buffer(3 * sizeof(int32_t), (const int32_t[]){0, 1, 2});
  cl_mem positions = clbt_test_buffer(2 * sizeof(int64_t), (const int64_t[]){0, 1});
  clbt_test_snapshot before = clbt_test_snapshot_take(table, 4);
  clbt_test_poison(clbt_table_slot_mapping(table), 8);

  clbt_assert_fails(clbt_table_compute_slot_mapping(NULL, 1, qsl, positions, 1),
                    CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 1, NULL, positions, 1),
                    CLBT_NULL_ARGUMENT, "query_start_loc");
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 1, qsl, NULL, 1),
                    CLBT_NULL_ARGUMENT, "positions is NULL with num_tokens 1");
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 5, qsl, positions, 1),
                    CLBT_TOO_MANY_REQUESTS, "num_reqs 5 exceeds max_num_reqs 4");
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 1, qsl, positions, 9),
                    CLBT_TOO_MANY_TOKENS,
                    "num_tokens 9 exceeds max_num_batched_tokens 8");
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 3, qsl, positions, 2),
                    CLBT_BUFFER_TOO_SMALL,
                    "query_start_loc holds 12 bytes; num_reqs 3 needs 16");
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 1, qsl, positions, 3),
                    CLBT_BUFFER_TOO_SMALL,
                    "positions holds 16 bytes; num_tokens 3 needs 24");

  /* A buffer of another context. */
  cl_device_id id = clbt_device_id(clbt_test_device());
  cl_int error = CL_SUCCESS;
  cl_context other = clCreateContext(NULL, 1, &id, NULL, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, 64, NULL, &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 1, foreign, positions, 1),
                    CLBT_CONTEXT_MISMATCH, "query_start_loc belongs to another");
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 1, qsl, foreign, 1),
                    CLBT_CONTEXT_MISMATCH, "positions belongs to another");

  int64_t slots[8];
  clbt_test_read(clbt_table_slot_mapping(table), sizeof slots, slots);
  for (int t = 0; t < 8; ++t) ck_assert_int_eq(slots[t], CLBT_TEST_POISON);
  clbt_test_snapshot_check(&before, table);
  clReleaseMemObject(foreign);
  clReleaseContext(other);
  clReleaseMemObject(qsl);
  clReleaseMemObject(positions);
  clbt_table_destroy(table);
}
END_TEST

/* A sub-buffer is checked by its own size and read from its own origin. */
START_TEST(sub_buffer_inputs) {
  clbt_table *table = create(small_config());
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){3}, 1));
  clbt_assert_ok(clbt_table_commit(table, 1));
  cl_uint align_bits = 0;
  ck_assert_int_eq(clGetDeviceInfo(clbt_device_id(clbt_test_device()),
                                   CL_DEVICE_MEM_BASE_ADDR_ALIGN,
                                   sizeof align_bits, &align_bits, NULL),
                   CL_SUCCESS);
  /* The sub-buffer starts at the first aligned offset; before it, a
     position the row does not hold. */
  size_t origin = align_bits / 8;
  size_t count = origin / sizeof(int64_t) + 1;
  int64_t *host = malloc(count * sizeof *host);
  ck_assert_ptr_nonnull(host);
  for (size_t i = 0; i < count; ++i) host[i] = 1000;
  host[count - 1] = 5;
  cl_mem whole = clbt_test_buffer(count * sizeof *host, host);
  cl_buffer_region region = {origin, sizeof(int64_t)};
  cl_int error = CL_SUCCESS;
  cl_mem positions = clCreateSubBuffer(whole, CL_MEM_READ_WRITE,
                                       CL_BUFFER_CREATE_TYPE_REGION, &region,
                                       &error);
  ck_assert_int_eq(error, CL_SUCCESS);
  cl_mem qsl = clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 1});
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 1, qsl, positions, 2),
                    CLBT_BUFFER_TOO_SMALL, "positions holds 8 bytes");
  clbt_assert_ok(clbt_table_compute_slot_mapping(table, 1, qsl, positions, 1));
  int64_t slot;
  clbt_test_read(clbt_table_slot_mapping(table), sizeof slot, &slot);
  ck_assert_int_eq(slot, 3 * 16 + 5);
  free(host);
  clReleaseMemObject(positions);
  clReleaseMemObject(whole);
  clReleaseMemObject(qsl);
  clbt_table_destroy(table);
}
END_TEST

/* A NONE table checks its arguments but writes nothing. */
START_TEST(none_mode) {
  clbt_table_config config = small_config();
  config.slot_mode = CLBT_SLOT_MODE_NONE;
  clbt_table *table = create(config);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){3}, 1));
  clbt_assert_ok(clbt_table_commit(table, 1));
  int32_t device[3];
  clbt_test_read(clbt_table_device_data(table), sizeof device, device);
  ck_assert_int_eq(device[0], 3); /* its rows are state indices, committed */
  cl_mem qsl = clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 1});
  cl_mem positions = clbt_test_buffer(sizeof(int64_t), (const int64_t[]){0});
  clbt_test_poison(clbt_table_slot_mapping(table), 8);
  clbt_assert_ok(clbt_table_compute_slot_mapping(table, 1, qsl, positions, 1));
  clbt_assert_fails(clbt_table_compute_slot_mapping(table, 1, qsl, positions, 9),
                    CLBT_TOO_MANY_TOKENS, "num_tokens 9");
  int64_t slots[8];
  clbt_test_read(clbt_table_slot_mapping(table), sizeof slots, slots);
  for (int t = 0; t < 8; ++t) ck_assert_int_eq(slots[t], CLBT_TEST_POISON);
  clReleaseMemObject(qsl);
  clReleaseMemObject(positions);
  clbt_table_destroy(table);
}
END_TEST

/*
 * An edit after clear reaches the device with the next commit, also in a
 * row that had changes no commit had moved yet when clear forgot them.
 */
START_TEST(an_edit_after_clear_is_committed) {
  clbt_table *table = create(small_config());
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){4, 5}, 2));
  clbt_assert_ok(clbt_table_append_row(table, 2, (const int32_t[]){7}, 1));
  clbt_assert_ok(clbt_table_commit(table, 3));
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){9}, 1));
  clbt_assert_ok(clbt_table_clear(table));
  clbt_assert_ok(clbt_table_append_row(table, 1, (const int32_t[]){6}, 1));
  clbt_assert_ok(clbt_table_commit(table, 3));
  int32_t device[4 * 3];
  clbt_test_read(clbt_table_device_data(table), sizeof device, device);
  const int32_t expected[4 * 3] = {0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 12; ++i) ck_assert_int_eq(device[i], expected[i]);
  clbt_test_assert_in_sync(clbt_device_queue(clbt_test_device()), table, 4);
  clbt_table_destroy(table);
}
END_TEST

/*
 * zero_gathered_tails is a flag: any nonzero value zeroes a gathered row
 * past its length (clbt_table_config). Row 0 holds [3] of width 3; the
 * caller's array before the gather is poison.
 */
START_TEST(any_nonzero_zero_gathered_tails_zeroes_the_tails) {
  clbt_table_config config = small_config();
  config.struct_size = sizeof config; /* the field is 0.3's */
  config.zero_gathered_tails = 2;
  clbt_table *table = create(config);
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){3}, 1));
  int32_t gathered[4 * 3];
  for (int i = 0; i < 12; ++i) gathered[i] = CLBT_TEST_POISON32;
  const int32_t qsl[] = {0, 0};
  clbt_host_step step = CLBT_HOST_STEP_INIT;
  step.flags = CLBT_STEP_GATHER;
  step.num_reqs = 1;
  step.query_start_loc = qsl;
  step.gathered_rows = gathered;
  clbt_assert_ok(clbt_table_compute_step_host(table, &step));
  ck_assert_int_eq(gathered[0], 3);
  ck_assert_int_eq(gathered[1], 0);
  ck_assert_int_eq(gathered[2], 0);
  for (int i = 3; i < 12; ++i) ck_assert_int_eq(gathered[i], CLBT_TEST_POISON32);
  clbt_table_destroy(table);
}
END_TEST

/* The messages logged while a test listens. */
static char logged[512];

static void keep_message(clbt_log_level level, const char *message,
                         void *user) {
  (void)user;
  if (level == CLBT_LOG_ERROR)
    snprintf(logged, sizeof logged, "%s", message);
}

/*
 * clbt_table_destroy on a group of a multi-group table leaves it as it is
 * and says so (clbt.h): the multi-group table and its groups still work,
 * and clbt_multi_table_destroy frees them.
 */
START_TEST(destroying_a_group_leaves_it_to_its_table) {
  const clbt_group_config groups[2] = {{.block_size = 16, .max_num_blocks = 8},
                                       {.block_size = 32, .max_num_blocks = 4}};
  const clbt_multi_table_config config = {.max_num_reqs = 2,
                                          .max_num_batched_tokens = 4,
                                          .num_groups = 2, .groups = groups};
  clbt_multi_table *multi = NULL;
  clbt_assert_ok(clbt_multi_table_create(clbt_test_device(), &config, &multi));
  logged[0] = '\0';
  clbt_log_set_callback(keep_message, NULL);
  clbt_table_destroy(clbt_multi_table_group(multi, 0));
  clbt_log_set_callback(NULL, NULL);
  ck_assert_msg(strstr(logged, "goes with clbt_multi_table_destroy"),
                "logged '%s'", logged);
  clbt_table *first = clbt_multi_table_group(multi, 0);
  ck_assert_uint_eq(clbt_table_width(first), 8); /* 128 tokens of 16 */
  clbt_assert_ok(clbt_table_append_row(first, 1, (const int32_t[]){5}, 1));
  clbt_assert_ok(clbt_multi_table_commit(multi, 2));
  clbt_test_assert_in_sync(clbt_device_queue(clbt_test_device()), first, 2);
  clbt_multi_table_destroy(multi);
}
END_TEST

static cl_uint references(cl_mem buffer) {
  cl_uint count = 0;
  ck_assert_int_eq(clGetMemObjectInfo(buffer, CL_MEM_REFERENCE_COUNT,
                                      sizeof count, &count, NULL),
                   CL_SUCCESS);
  return count;
}

/*
 * The table remembers the last few batch buffers it checked, holding a
 * reference to each, and lets go of one when it forgets it: after more
 * distinct buffers than it remembers, and after destroy, every buffer is
 * the caller's alone again.
 */
START_TEST(forgotten_batch_buffers_are_let_go) {
  enum { BUFFERS = 20 }; /* more than any table remembers */
  clbt_table *table = create(small_config());
  cl_mem positions = clbt_test_buffer(sizeof(int64_t), (const int64_t[]){0});
  cl_mem qsl[BUFFERS];
  for (int b = 0; b < BUFFERS; ++b) {
    qsl[b] = clbt_test_buffer(2 * sizeof(int32_t), (const int32_t[]){0, 1});
    clbt_assert_ok(clbt_table_compute_slot_mapping(table, 1, qsl[b],
                                                   positions, 1));
  }
  ck_assert_int_eq(clFinish(clbt_device_queue(clbt_test_device())),
                   CL_SUCCESS);
  ck_assert_uint_eq(references(qsl[0]), 1);
  clbt_table_destroy(table);
  for (int b = 0; b < BUFFERS; ++b) {
    ck_assert_uint_eq(references(qsl[b]), 1);
    clReleaseMemObject(qsl[b]);
  }
  ck_assert_uint_eq(references(positions), 1);
  clReleaseMemObject(positions);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("table");
  TCase *tc = tcase_create("table");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, config_rules);
  tcase_add_test(tc, null_arguments);
  tcase_add_test(tc, initial_state);
  tcase_add_test(tc, commit_copies_leading_rows);
  tcase_add_test(tc, commit_is_isolated_from_later_edits);
  tcase_add_test(tc, clear_resets_everything);
  tcase_add_test(tc, slot_mapping_arguments);
  tcase_add_test(tc, sub_buffer_inputs);
  tcase_add_test(tc, none_mode);
  tcase_add_test(tc, an_edit_after_clear_is_committed);
  tcase_add_test(tc, any_nonzero_zero_gathered_tails_zeroes_the_tails);
  tcase_add_test(tc, destroying_a_group_leaves_it_to_its_table);
  tcase_add_test(tc, forgotten_batch_buffers_are_let_go);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
