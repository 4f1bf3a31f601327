/*
 * Bounds of size: the largest tables a user may ask for compute the right
 * slots, slot ids beyond 32 bits come out exact, and a table that cannot
 * be allocated, on the host or on the device, fails with a status and a
 * message that says what did not fit. Expected slots are computed here
 * from the rule block_id * kernel_block_size + offset.
 */
#include "clbt_test.h"

#include <stdint.h>
#include <stdlib.h>

static cl_mem upload(const void *data, size_t bytes) {
  return clbt_test_buffer(bytes, data);
}

/* Runs one batch and reads the slots and the rejected count back. */
static void map(clbt_table *table, uint32_t num_reqs, const int32_t *qsl,
                const int64_t *positions, uint32_t num_tokens, int64_t *slots,
                uint32_t max_tokens, uint32_t *rejected) {
  cl_mem qsl_buffer = upload(qsl, (num_reqs + 1) * sizeof *qsl);
  cl_mem positions_buffer = upload(positions, num_tokens * sizeof *positions);
  clbt_test_poison(clbt_table_slot_mapping(table), max_tokens);
  clbt_assert_ok(clbt_table_reset_rejected_tokens(table));
  clbt_assert_ok(clbt_table_compute_slot_mapping(table, num_reqs, qsl_buffer,
                                                 positions_buffer, num_tokens));
  clbt_test_read(clbt_table_slot_mapping(table), max_tokens * sizeof *slots,
                 slots);
  clbt_assert_ok(clbt_table_read_rejected_tokens(table, rejected));
  clReleaseMemObject(qsl_buffer);
  clReleaseMemObject(positions_buffer);
}

enum { BIG_REQS = 1024, BIG_BLOCKS = 32768, BIG_BLOCK_SIZE = 16 };
enum { TOKENS_PER_REQ = 4, BIG_TOKENS = BIG_REQS * TOKENS_PER_REQ };

/* Block c of request r holds id r * 32768 + c: every id distinct. */
static int32_t big_id(uint32_t r, uint32_t c) {
  return (int32_t)(r * BIG_BLOCKS + c);
}

/* 1024 full rows of 32768 blocks (128 MiB on each side); each request's
   first token, a middle one, its very last, and one past its end. */
START_TEST(largest_table_maps_every_row_end_to_end) {
  const clbt_table_config config = {.block_size = BIG_BLOCK_SIZE,
                                    .max_num_reqs = BIG_REQS,
                                    .max_num_blocks_per_req = BIG_BLOCKS,
                                    .max_num_batched_tokens = BIG_TOKENS};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  int32_t *ids = malloc(BIG_BLOCKS * sizeof *ids);
  int32_t *qsl = malloc((BIG_REQS + 1) * sizeof *qsl);
  int64_t *positions = malloc(BIG_TOKENS * sizeof *positions);
  int64_t *slots = malloc(BIG_TOKENS * sizeof *slots);
  ck_assert(ids && qsl && positions && slots);
  const int64_t row_tokens = (int64_t)BIG_BLOCKS * BIG_BLOCK_SIZE;
  const int64_t probes[TOKENS_PER_REQ] = {0, row_tokens / 2 + 7,
                                          row_tokens - 1, row_tokens};
  for (uint32_t r = 0; r < BIG_REQS; ++r) {
    for (uint32_t c = 0; c < BIG_BLOCKS; ++c) ids[c] = big_id(r, c);
    clbt_assert_ok(clbt_table_append_row(table, r, ids, BIG_BLOCKS));
    qsl[r] = (int32_t)(r * TOKENS_PER_REQ);
    for (uint32_t i = 0; i < TOKENS_PER_REQ; ++i)
      positions[r * TOKENS_PER_REQ + i] = probes[i];
  }
  qsl[BIG_REQS] = BIG_TOKENS;
  clbt_assert_ok(clbt_table_commit(table, BIG_REQS));
  uint32_t rejected = 0;
  map(table, BIG_REQS, qsl, positions, BIG_TOKENS, slots, BIG_TOKENS,
      &rejected);
  for (uint32_t r = 0; r < BIG_REQS; ++r) {
    const int64_t *got = slots + r * TOKENS_PER_REQ;
    ck_assert_int_eq(got[0], (int64_t)big_id(r, 0) * BIG_BLOCK_SIZE);
    ck_assert_int_eq(got[1], (int64_t)big_id(r, BIG_BLOCKS / 2) *
                                 BIG_BLOCK_SIZE + 7);
    ck_assert_int_eq(got[2], (int64_t)big_id(r, BIG_BLOCKS - 1) *
                                 BIG_BLOCK_SIZE + BIG_BLOCK_SIZE - 1);
    ck_assert_int_eq(got[3], CLBT_PAD_SLOT_ID);
  }
  ck_assert_uint_eq(rejected, BIG_REQS); /* each request's token past its row */
  free(ids);
  free(qsl);
  free(positions);
  free(slots);
  clbt_table_destroy(table);
}
END_TEST

/* Ids at the int32 limit, times 256 tokens, need 40 bits; split into
   kernel blocks of 16, the largest KV id's last kernel block is INT32_MAX. */
START_TEST(slot_ids_beyond_32_bits_are_exact) {
  static const struct {
    uint32_t kernel_block_size;
    int32_t id;            /* the KV block id appended */
    int64_t last_slot;     /* of the block's last token, by hand */
  } cases[] = {
      /* 2147483647 * 256 + 255 */
      {256, INT32_MAX, 549755813887},
      /* KV id 134217727 = (INT32_MAX - 15) / 16 splits into kernel blocks
         2147483632 .. 2147483647; the last token is 2147483647 * 16 + 15 */
      {16, 134217727, 34359738367},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const clbt_table_config config = {
        .block_size = 256, .kernel_block_size = cases[i].kernel_block_size,
        .max_num_reqs = 1, .max_num_blocks_per_req = 2,
        .max_num_batched_tokens = 2};
    clbt_table *table = NULL;
    clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
    clbt_assert_ok(clbt_table_append_row(
        table, 0, (const int32_t[]){0, cases[i].id}, 2));
    clbt_assert_ok(clbt_table_commit(table, 1));
    /* Position 256 is the second block's first token, 511 its last. */
    const int32_t qsl[] = {0, 2};
    const int64_t positions[] = {256, 511};
    int64_t slots[2];
    uint32_t rejected = 1;
    map(table, 1, qsl, positions, 2, slots, 2, &rejected);
    ck_assert_int_eq(slots[1], cases[i].last_slot);
    ck_assert_int_eq(slots[0], cases[i].last_slot - 255);
    ck_assert_uint_eq(rejected, 0);
    clbt_table_destroy(table);
  }
}
END_TEST

/* Host rows of 2^63 - 2^32 bytes pass every size check and cannot be
   allocated; a slot-mapping buffer above the device's largest allocation
   is refused by the device. Both fail cleanly and name what did not fit. */
START_TEST(tables_too_large_to_allocate_fail_clearly) {
  clbt_table *table = NULL;
  const clbt_table_config host_too_large = {
      .block_size = 16, .max_num_reqs = INT32_MAX,
      .max_num_blocks_per_req = 1u << 30, .max_num_batched_tokens = 1};
  clbt_assert_fails(
      clbt_table_create(clbt_test_device(), &host_too_large, &table),
      CLBT_CL_OUT_OF_HOST_MEMORY,
      "no memory for 2147483647 rows of width 1073741824");
  ck_assert_ptr_null(table);

  cl_ulong max_allocation = 0;
  ck_assert_int_eq(clGetDeviceInfo(clbt_device_id(clbt_test_device()),
                                   CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                                   sizeof max_allocation, &max_allocation,
                                   NULL),
                   CL_SUCCESS);
  /* One token more than the largest allocation holds; this needs a device
     that allocates less than 16 GiB at once, as PoCL's CPU device does. */
  uint64_t tokens = max_allocation / sizeof(int64_t) + 1;
  ck_assert_msg(tokens <= INT32_MAX, "the device allocates %llu bytes at once",
                (unsigned long long)max_allocation);
  const clbt_table_config device_too_large = {
      .block_size = 16, .max_num_reqs = 1, .max_num_blocks_per_req = 1,
      .max_num_batched_tokens = (uint32_t)tokens};
  char words[128];
  snprintf(words, sizeof words,
           "slot mapping %llu): clCreateBuffer failed",
           (unsigned long long)(tokens * sizeof(int64_t)));
  clbt_status status =
      clbt_table_create(clbt_test_device(), &device_too_large, &table);
  ck_assert_msg(status == CLBT_CL_INVALID_BUFFER_SIZE ||
                    status == CLBT_CL_MEM_OBJECT_ALLOCATION_FAILURE,
                "%s: %s", clbt_status_name(status), clbt_last_error());
  ck_assert_msg(strstr(clbt_last_error(), words), "'%s' does not say '%s'",
                clbt_last_error(), words);
  ck_assert_ptr_null(table);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("sizes");
  TCase *tc = tcase_create("sizes");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, largest_table_maps_every_row_end_to_end);
  tcase_add_test(tc, slot_ids_beyond_32_bits_are_exact);
  tcase_add_test(tc, tables_too_large_to_allocate_fail_clearly);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
