/*
 * The attention's bad-input suite's fixture and cases' types
 * (bad_attention.c), apart from its table of cases
 * (test_bad_attention.c).
 */
#ifndef CLBT_TEST_BAD_ATTENTION_H
#define CLBT_TEST_BAD_ATTENTION_H

#include "clbt/clbt.h"

#include <stdbool.h>
#include <stddef.h>

#define POISON 0x5a

typedef struct attention_fixture {
  clbt_attention *bf16, *fp8;
  clbt_kv_cache *cache, *fp8_cache, *wide_cache, *foreign_cache;
  clbt_table *table, *state_table, *split_table, *wide_shard_table,
      *foreign_table;
  clbt_device *foreign_device;
  cl_context other;
  cl_mem cache_buffer, fp8_buffer, wide_buffer, foreign_buffer, small;
  cl_mem query, output, lse, cu, seqused, blocks, sinks, descales;
  cl_mem read_only; /* 192 bytes the device may only read */
  cl_event events[2]; /* the device's, another context's */
} attention_fixture;

typedef enum function {
  CREATE, ENQUEUE, READ_REJECTED, RESET_REJECTED, DESCRIBE, NUM_FUNCTIONS
} function;

/* What a case swaps. */
typedef enum swap {
  NONE,
  NULL_HANDLE,
  NULL_STRUCT,
  NULL_OUT,
  NULL_CACHE,
  LATER_FIELD,
  FP8,
  WIDE_CACHE,
  FOREIGN_CACHE,
  TABLE,
  BOTH_SOURCES,
  NO_SOURCE,
  STATE_TABLE,
  SPLIT_TABLE,
  WIDE_SHARD_TABLE,
  FOREIGN_TABLE,
  NULL_QUERY,
  NULL_OUTPUT,
  NULL_CU,
  NULL_SEQUSED,
  SMALL_SINKS,
  SMALL_DESCALES,
  FOREIGN_QUERY,
  NULL_EVENTS,
  FOREIGN_EVENT,
  UNKNOWN_TUNING,
  READ_ONLY_OUTPUT
} swap;

typedef struct bad {
  function function;
  const char *argument;
  clbt_status status;
  const char *words;
  swap swap;
  size_t at, size; /* a field of the config or batch, set to value */
  uint64_t value;  /* (a float's as its bits) */
  uint32_t num_events;
} bad;

attention_fixture fixture_create(void);
void fixture_destroy(attention_fixture *a);

/* Runs a case's call; the outputs are the test's sentinels. */
clbt_status run_case(const bad *c, attention_fixture *a, clbt_attention **out,
                     cl_event *event, uint32_t *rejected,
                     clbt_kv_pages *pages);

/* The output and lse still hold their poison, the counters say 0. */
void check_unchanged(const attention_fixture *a, const char *context);

#endif /* CLBT_TEST_BAD_ATTENTION_H */
