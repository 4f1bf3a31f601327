/* The suites' runner (clbt_test.h), apart from the helpers that need a
   device: test_version links it with libclbt.so instead of libclbt.a. */
#include "clbt_test.h"

#include <stdio.h>
#include <stdlib.h>

static void (*at_end)(void);

void clbt_test_at_end(void (*release)(void)) { at_end = release; }

int clbt_test_run(Suite *suite) {
  SRunner *runner = srunner_create(suite);
  srunner_set_fork_status(runner, CK_NOFORK);
  srunner_run_all(runner, CK_NORMAL);
  int ran = srunner_ntests_run(runner);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  if (at_end) at_end();
  at_end = NULL;
  if (ran == 0) fprintf(stderr, "no test ran (a misspelt CK_RUN_CASE?)\n");
  return ran == 0 || failed != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
