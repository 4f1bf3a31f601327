/*
 * The randomised differential test: thousands of row operations and
 * hundreds of slot-mapping calls and serving steps on the device, checked
 * against a model of the rows and the host reference (support/selftest.c).
 * The seed is printed; CLBT_TEST_SEED=<seed> replays a run.
 * CLBT_TEST_ROUNDS=<n> runs n rounds instead of 40 (a sanitizer build,
 * several times slower, runs fewer: tests/CMakeLists.txt).
 */
#include "clbt_test.h"
#include "selftest.h"

#include <inttypes.h>
#include <stdlib.h>

START_TEST(device_agrees_with_the_reference) {
  uint64_t seed = clbt_test_seed("differential");
  const char *rounds = getenv("CLBT_TEST_ROUNDS");
  selftest_options options = {
      .seed = seed, .rounds = rounds ? (uint32_t)strtoul(rounds, NULL, 10) : 40,
      .steps_per_round = 10, .log = stderr};
  ck_assert_uint_ge(options.rounds, 1);
  selftest_result result = {0};
  clbt_assert_ok(selftest_run(clbt_test_device(), &options, &result));
  printf("differential: %" PRIu64 " row operations, %" PRIu64 " commits, %"
         PRIu64 " slot mappings, %" PRIu64 " steps, %" PRIu64 " exports, %"
         PRIu64 " checks passed, %" PRIu64 " failed\n",
         result.row_operations, result.commits, result.slot_mappings,
         result.steps, result.exports, result.passed, result.failed);
  ck_assert_msg(result.failed == 0, "seed %" PRIu64 ": %" PRIu64 " checks failed",
                seed, result.failed);
  /* What 40 rounds reach at least, per round. */
  ck_assert_uint_ge(result.row_operations, 125 * options.rounds);
  ck_assert_uint_ge(result.slot_mappings, 7 * options.rounds);
  ck_assert_uint_ge(result.steps, 10 * options.rounds);
  ck_assert_uint_eq(result.exports, 3 * options.rounds);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("differential");
  TCase *tc = tcase_create("differential");
  tcase_set_timeout(tc, 0);
  tcase_add_test(tc, device_agrees_with_the_reference);
  suite_add_tcase(suite, tc);
  return clbt_test_run(suite);
}
