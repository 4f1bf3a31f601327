/*
 * `clbt bench`'s run (bench.c): the sections of its table, on the selected
 * device, into one report.
 */
#ifndef TOOL_BENCH_BENCH_H
#define TOOL_BENCH_BENCH_H

#include <stddef.h>

#include "bench/harness.h"
#include "report.h"

/*
 * Runs every section of the table that options->only selects, in order,
 * and returns the report, the targets last (the caller frees it);
 * *failures gets how many things the sections found wrong (slot ids
 * unlike the Triton kernel's). A failed call ends the process with a
 * message (bench_die).
 */
report *bench_run(const bench_options *options, size_t *failures);

#endif /* TOOL_BENCH_BENCH_H */
