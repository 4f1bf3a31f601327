/* The host reference (src/api/reference.c) against the hand-worked examples. */
#include "clbt_test.h"
#include "worked_examples.h"

#include <stdlib.h>

/* Every example's slots, padding included; the rest of out untouched. */
START_TEST(worked_examples_on_the_host) {
  size_t count = 0;
  const clbt_worked_example *examples = clbt_worked_examples(&count);
  for (size_t e = 0; e < count; ++e) {
    const clbt_worked_example *example = &examples[e];
    uint32_t max_tokens = example->config.max_num_batched_tokens;
    clbt_table *table = clbt_worked_example_table(example, false);
    int64_t *out = malloc((max_tokens + 1) * sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (uint32_t t = 0; t <= max_tokens; ++t) out[t] = CLBT_TEST_POISON;
    clbt_assert_ok(clbt_table_compute_slot_mapping_host(
        table, example->num_reqs, example->query_start_loc, example->positions,
        example->num_tokens, out));
    for (uint32_t t = 0; t < max_tokens; ++t) {
      int64_t expected = clbt_worked_example_slot(example, t);
      ck_assert_msg(out[t] == expected, "%s: slot[%u] is %lld, expected %lld",
                    example->name, t, (long long)out[t], (long long)expected);
    }
    ck_assert_msg(out[max_tokens] == CLBT_TEST_POISON,
                  "%s: wrote past max_num_batched_tokens", example->name);
    free(out);
    clbt_table_destroy(table);
  }
}
END_TEST

/* A NONE table, like vLLM's Mamba groups, leaves the output alone. */
START_TEST(none_mode_writes_nothing) {
  clbt_table_config config = {.block_size = 16, .max_num_reqs = 2,
                              .max_num_blocks_per_req = 2,
                              .max_num_batched_tokens = 4,
                              .slot_mode = CLBT_SLOT_MODE_NONE};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){3}, 1));
  int64_t out[4] = {7, 7, 7, 7};
  const int32_t qsl[] = {0, 2};
  const int64_t positions[] = {0, 1};
  clbt_assert_ok(
      clbt_table_compute_slot_mapping_host(table, 1, qsl, positions, 2, out));
  for (int t = 0; t < 4; ++t) ck_assert_int_eq(out[t], 7);
  clbt_table_destroy(table);
}
END_TEST

/* The reference reads the host rows as they are now, committed or not. */
START_TEST(reads_host_rows_not_committed_ones) {
  clbt_table_config config = {.block_size = 4, .max_num_reqs = 2,
                              .max_num_blocks_per_req = 2,
                              .max_num_batched_tokens = 2};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  clbt_assert_ok(clbt_table_append_row(table, 0, (const int32_t[]){3}, 1));
  int64_t out[2];
  const int32_t qsl[] = {0, 1};
  const int64_t positions[] = {1};
  clbt_assert_ok(
      clbt_table_compute_slot_mapping_host(table, 1, qsl, positions, 1, out));
  ck_assert_int_eq(out[0], 3 * 4 + 1);
  ck_assert_int_eq(out[1], CLBT_PAD_SLOT_ID);
  clbt_table_destroy(table);
}
END_TEST

START_TEST(bad_arguments) {
  clbt_table_config config = {.block_size = 4, .max_num_reqs = 2,
                              .max_num_blocks_per_req = 2,
                              .max_num_batched_tokens = 4};
  clbt_table *table = NULL;
  clbt_assert_ok(clbt_table_create(clbt_test_device(), &config, &table));
  int64_t out[4] = {7, 7, 7, 7};
  const int32_t qsl[] = {0, 1, 2, 3};
  const int64_t positions[] = {0, 1, 2, 3, 4};
  clbt_assert_fails(clbt_table_compute_slot_mapping_host(NULL, 1, qsl,
                                                         positions, 1, out),
                    CLBT_NULL_ARGUMENT, "table");
  clbt_assert_fails(clbt_table_compute_slot_mapping_host(table, 1, NULL,
                                                         positions, 1, out),
                    CLBT_NULL_ARGUMENT, "query_start_loc");
  clbt_assert_fails(
      clbt_table_compute_slot_mapping_host(table, 1, qsl, NULL, 1, out),
      CLBT_NULL_ARGUMENT, "positions");
  clbt_assert_fails(
      clbt_table_compute_slot_mapping_host(table, 1, qsl, positions, 1, NULL),
      CLBT_NULL_ARGUMENT, "out");
  clbt_assert_fails(
      clbt_table_compute_slot_mapping_host(table, 3, qsl, positions, 3, out),
      CLBT_TOO_MANY_REQUESTS, "max_num_reqs 2");
  clbt_assert_fails(
      clbt_table_compute_slot_mapping_host(table, 1, qsl, positions, 5, out),
      CLBT_TOO_MANY_TOKENS, "max_num_batched_tokens 4");
  for (int t = 0; t < 4; ++t) ck_assert_int_eq(out[t], 7);
  clbt_table_destroy(table);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("reference");
  TCase *tc = tcase_create("reference");
  tcase_add_test(tc, worked_examples_on_the_host);
  tcase_add_test(tc, none_mode_writes_nothing);
  tcase_add_test(tc, reads_host_rows_not_committed_ones);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
