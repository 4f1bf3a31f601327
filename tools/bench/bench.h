/*
 * `clbt bench`'s run (bench.c): the sections of its table, on the selected
 * device, into one report.
 */
#ifndef TOOL_BENCH_BENCH_H
#define TOOL_BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "bench/harness.h"
#include "report.h"

/* Whether a comma-separated list of names holds one that names no section
   or shape ('-' and '_' alike; an empty one too); if so, it is copied into
   unknown. */
bool bench_unknown_name(const char *names, char *unknown, size_t size);

/* --only's help: the sections' names and the shapes', in lines of up to
   54 characters. */
void bench_only_help(char *out, size_t size);

/*
 * Runs every section of the table that options->only selects, in order,
 * and returns the report, the targets last (the caller frees it);
 * *failures gets how many things the sections found wrong (slot ids
 * unlike the Triton kernel's). A failed call ends the process with a
 * message (bench_die).
 */
report *bench_run(const bench_options *options, size_t *failures);

#endif /* TOOL_BENCH_BENCH_H */
