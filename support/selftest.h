/*
 * The randomised self-test: row operations, commits, slot mappings and
 * serving steps on a device, each checked against a plain model of the
 * rows and against the host reference, and the export's round trip (tokens
 * written through the slot mapping, read back through the exported page
 * tables). Used by `clbt selftest` and by
 * tests/reliability/test_differential.c.
 */
#ifndef SUPPORT_SELFTEST_H
#define SUPPORT_SELFTEST_H

#include "clbt/clbt.h"

#include <stdio.h>

typedef struct selftest_options {
  uint64_t seed;             /* every round's inputs follow from it */
  uint32_t rounds;           /* one random table configuration each */
  uint32_t steps_per_round;  /* bursts of row operations, each committed */
  FILE *log;                 /* failures are described here; NULL: quiet */
} selftest_options;

typedef struct selftest_result {
  uint64_t passed;           /* checks that held */
  uint64_t failed;           /* checks that did not */
  uint64_t row_operations;   /* valid and invalid, each checked */
  uint64_t commits;
  uint64_t slot_mappings;    /* device calls compared with the reference */
  uint64_t steps;            /* serving steps (idx_mapping, gather) likewise */
  uint64_t exports;          /* batches exported through idx_mapping and
                                read back through both layouts */
} selftest_result;

/*
 * Runs the rounds on device and adds what was checked to *result (which the
 * caller zeroes). Returns CLBT_SUCCESS when every check could be made, even
 * if some failed; another status when a clbt call failed unexpectedly,
 * which also counts as a failed check.
 */
clbt_status selftest_run(clbt_device *device, const selftest_options *options,
                         selftest_result *result);

#endif /* SUPPORT_SELFTEST_H */
