/*
 * The OpenCL calls of the step section's steps (calls.c): the library's
 * calls in each step of a series, counted by the call counter
 * (bench/call_counter.h) around the step's parts, summarised per series
 * and set against a budget for one step: issue 42's for a steady step,
 * issue 18's for the others.
 */
#ifndef TOOL_BENCH_CALLS_H
#define TOOL_BENCH_CALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/harness.h"

/* The library's OpenCL calls in each step of a series. A step is counted
   in three marks: bench_calls_updates before its row updates,
   bench_calls_step before clbt_multi_table_enqueue_step, bench_calls_done
   after it, with the writes the bench itself made of the step's batch and
   the block ids its row updates wrote. Each mark costs tens of
   nanoseconds. Steps past capacity are not counted. */
typedef struct bench_calls bench_calls;

bench_calls *bench_calls_create(uint64_t capacity);
void bench_calls_free(bench_calls *calls); /* NULL is fine */
void bench_calls_updates(bench_calls *calls);
void bench_calls_step(bench_calls *calls);
void bench_calls_done(bench_calls *calls, uint32_t batch_writes,
                      uint32_t changed_ids);

/* Says in text which calls the series' steps made: per function, the
   middle step's count; or that the build does not count. */
void bench_calls_describe(const bench_calls *calls, char *text, size_t size);

/* The series of a section, a row each, written when all have run (their
   columns are every OpenCL function some row's steps called). */
typedef struct bench_calls_table bench_calls_table;

bench_calls_table *bench_calls_table_create(void);
void bench_calls_table_free(bench_calls_table *table); /* NULL is fine */
/* Summarises a series as the next row, named, and judges each of its
   steps: a steady one against issue 42's budget (the launch and one more
   call, clSetKernelArg counted), any other against issue 18's; exports:
   its steps had CLBT_STEP_EXPORT. Adds nothing where the build does not
   count. */
void bench_calls_table_add(bench_calls_table *table, const bench_calls *calls,
                           const char *name, bool exports, bool steady);
/* Whether the series' middle step uploaded (a write or a map); false
   where the build does not count. */
bool bench_calls_uploads(const bench_calls *calls);
/* Adds each row's counts to section (per function, the middle step's) and
   its verdict to targets, and to b's targets a steady row's calls besides
   the launch, another row's calls past the budget and its clSetKernelArg
   calls. */
void bench_calls_table_write(bench *b, const bench_calls_table *table,
                             report *section, report *targets);

#endif /* TOOL_BENCH_CALLS_H */
