/*
 * clbt bench's run: the sections of the table below that --only selects,
 * on the selected device, each adding its records to the report and its
 * figures to the targets, which close the report.
 */
#include "bench/bench.h"

#include <stdlib.h>

/* The sections, each defined in its own file, in the report's order. */
extern const bench_section_entry bench_slot_mapping_section,
    bench_completion_section, bench_commit_section, bench_multi_group_section,
    bench_row_operations_section, bench_export_section, bench_step_section,
    bench_slots_section, bench_arguments_section, bench_kv_cache_section,
    bench_plot_section, bench_triton_section;

static const bench_section_entry *const sections[] = {
    &bench_slot_mapping_section,   &bench_completion_section,
    &bench_commit_section,         &bench_multi_group_section,
    &bench_row_operations_section, &bench_export_section,
    &bench_step_section,           &bench_slots_section,
    &bench_arguments_section,      &bench_kv_cache_section,
    &bench_plot_section,           &bench_triton_section};

report *bench_run(const bench_options *options, size_t *failures) {
  bench b = {.options = *options, .rng = 0x9E3779B97F4A7C15ull};
  for (int i = 0; i < BENCH_MAX_CALLS; ++i) {
    b.samples[i] = malloc(b.options.runs * sizeof(double));
    if (!b.samples[i]) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  }
  b.root = report_create();
  bench_open(&b);
  for (size_t s = 0; s < sizeof sections / sizeof sections[0]; ++s)
    if (!sections[s]->name || bench_selected(&b, sections[s]->name))
      sections[s]->run(&b);
  bench_report_targets(&b);
  bench_close(&b);
  for (int i = 0; i < BENCH_MAX_CALLS; ++i) free(b.samples[i]);
  *failures = b.failures;
  return b.root;
}
