/*
 * Worked examples of the slot mapping, one per feature, with slot ids
 * derived by hand from block_table.py's kernel (the derivations are in
 * worked_examples.c). api/test_reference.c holds the host reference to
 * them and calls/test_slot_mapping.c the device kernel.
 */
#ifndef CLBT_WORKED_EXAMPLES_H
#define CLBT_WORKED_EXAMPLES_H

#include "clbt/clbt.h"

#include <stdbool.h>

#define CLBT_EXAMPLE_MAX_ROWS 4

typedef struct clbt_worked_example {
  const char *name;
  clbt_table_config config;
  /* KV-manager block ids appended to rows 0.. before the commit */
  const int32_t *rows[CLBT_EXAMPLE_MAX_ROWS];
  size_t row_counts[CLBT_EXAMPLE_MAX_ROWS];
  uint32_t committed;          /* rows committed to the device */
  uint32_t num_reqs;
  const int32_t *query_start_loc;
  const int64_t *positions;
  uint32_t num_tokens;
  /* slots [0, expected_count); every later slot must be CLBT_PAD_SLOT_ID */
  const int64_t *expected;
  uint32_t expected_count;
  uint32_t rejected;           /* tokens the kernel must count as rejected */
} clbt_worked_example;

/* The slot token t must get: its worked value, or the pad id past them. */
int64_t clbt_worked_example_slot(const clbt_worked_example *example,
                                 uint32_t t);

/* The examples; *count receives how many. */
const clbt_worked_example *clbt_worked_examples(size_t *count);

/*
 * Creates a table for an example on the test device and fills its rows;
 * commits them when `commit` is set.
 */
clbt_table *clbt_worked_example_table(const clbt_worked_example *example,
                                      bool commit);

#endif /* CLBT_WORKED_EXAMPLES_H */
