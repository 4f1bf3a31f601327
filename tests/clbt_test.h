/*
 * Helpers shared by the Check suites: the runner, the device under test
 * (CLBT_DEVICE, which CTest sets to the PoCL device), OpenCL buffers, and
 * snapshots that prove a failed call changed nothing.
 */
#ifndef CLBT_TEST_H
#define CLBT_TEST_H

#include "clbt/clbt.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/*
 * Runs a suite without forking (Check's fork mode hangs once OpenCL has
 * been used; CTest isolates the suites and enforces timeouts). Returns the
 * process exit status: nonzero when a test failed or none ran.
 */
int clbt_test_run(Suite *suite);

/*
 * Has clbt_test_run call `release` once the suite has run. The device
 * under test is released there rather than in an atexit handler: Oclgrind
 * 21.10 aborts ("corrupted double-linked list") when a program is released
 * from one, its own state already gone (docs/reliability.md).
 */
void clbt_test_at_end(void (*release)(void));

/* The device the suite tests, opened once per process from CLBT_DEVICE. */
clbt_device *clbt_test_device(void);

/* A device buffer of `bytes` bytes holding `data` (NULL: uninitialised). */
cl_mem clbt_test_buffer(size_t bytes, const void *data);
/* The same, CL_MEM_READ_ONLY: kernels may only read it. */
cl_mem clbt_test_read_only_buffer(size_t bytes, const void *data);

/* Blocking reads and writes on the test device's queue. */
void clbt_test_read(cl_mem buffer, size_t bytes, void *out);
void clbt_test_write(cl_mem buffer, size_t bytes, const void *data);

/*
 * The random numbers of a suite that draws its cases: clbt_test_seed seeds
 * them from CLBT_TEST_SEED, or else from the clock, prints the seed (so
 * that CLBT_TEST_SEED=<seed> replays a failing run) and returns it.
 */
uint64_t clbt_test_seed(const char *suite);
uint64_t clbt_test_random(void);         /* 64 random bits */
uint32_t clbt_test_below(uint32_t n);    /* in [0, n); 0 when n is 0 */
bool clbt_test_chance(uint32_t percent); /* true percent times in 100 */

/* A multi-group config's batch limits and CP layout, with no groups yet. */
clbt_multi_table_config clbt_test_shape(uint32_t max_num_reqs,
                                        uint32_t max_num_batched_tokens,
                                        uint32_t cp_world_size,
                                        uint32_t cp_rank,
                                        uint32_t cp_interleave_size);

/*
 * The tables of a suite's scenario: with num_groups > 0, a multi-group
 * table of those groups (*multi), each group's table in groups[g]; with
 * num_groups 0, one clbt_table of groups[0]'s settings (*single, also
 * groups[0]). Both with the batch limits and CP layout of `shape`, whose
 * groups and num_groups are ignored. Returns how many tables groups holds.
 */
uint32_t clbt_test_create_tables(const clbt_multi_table_config *shape,
                                 const clbt_group_config *group_configs,
                                 uint32_t num_groups, clbt_multi_table **multi,
                                 clbt_table **single, clbt_table **groups);

/* Fills a slot-mapping buffer with a value no call writes. */
#define CLBT_TEST_POISON ((int64_t)0x5A5A5A5A5A5A5A5A)
void clbt_test_poison(cl_mem buffer, size_t count);

/* Fills a whole int32 buffer with CLBT_TEST_POISON32. */
#define CLBT_TEST_POISON32 0x5A5A5A5A
void clbt_test_poison32(cl_mem buffer);

/* Asserts that a call named `context` returned `expected_status` and that
   clbt_last_error() contains `words`. */
#define clbt_assert_refused(context, status, expected_status, words)           \
  do {                                                                         \
    ck_assert_msg((status) == (expected_status),                               \
                  "%s returned %s, expected %s (%s)", (context),               \
                  clbt_status_name(status), clbt_status_name(expected_status), \
                  clbt_last_error());                                          \
    ck_assert_msg(strstr(clbt_last_error(), (words)) != NULL,                  \
                  "%s: message '%s' does not mention '%s'", (context),         \
                  clbt_last_error(), (words));                                 \
  } while (0)

/* The same for a call written out, which names itself. */
#define clbt_assert_fails(call, expected_status, words)                    \
  do {                                                                     \
    clbt_status clbt_test_status_ = (call);                                \
    clbt_assert_refused(#call, clbt_test_status_, expected_status, words); \
  } while (0)

#define clbt_assert_ok(call)                                               \
  do {                                                                     \
    clbt_status clbt_test_status_ = (call);                                \
    ck_assert_msg(clbt_test_status_ == CLBT_SUCCESS, "%s returned %s: %s", \
                  #call, clbt_status_name(clbt_test_status_),              \
                  clbt_last_error());                                      \
  } while (0)

/* Everything observable of a table: host rows, lengths, committed rows. */
typedef struct clbt_test_snapshot {
  uint32_t rows, width;
  int32_t *host;
  uint32_t *lengths;
  int32_t *device;
} clbt_test_snapshot;

clbt_test_snapshot clbt_test_snapshot_take(const clbt_table *table,
                                           uint32_t max_num_reqs);
/* Asserts the table still matches the snapshot, then frees the snapshot. */
void clbt_test_snapshot_check(clbt_test_snapshot *snapshot,
                              const clbt_table *table);

/*
 * Asserts that a table's committed rows and lengths, read on queue, equal
 * its host rows and lengths, for rows [0, max_num_reqs).
 */
void clbt_test_assert_in_sync(cl_command_queue queue, const clbt_table *table,
                              uint32_t max_num_reqs);

/*
 * Program cache directories: the files in one, not counting hidden ones
 * (the first one's path goes to first_path when it is not NULL), and
 * removing one with everything under it.
 */
int clbt_test_count_files(const char *path, char *first_path, size_t size);
void clbt_test_remove_tree(const char *path);

#endif /* CLBT_TEST_H */
