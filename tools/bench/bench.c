/*
 * clbt bench's run: the sections of the table below that --only selects,
 * on the selected device, each adding its records to the report and its
 * figures to the targets, which close the report.
 */
#include "bench/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sections, each defined in its own file, in the report's order; a
   section's name is the one the report gives it. */
extern const bench_section_entry bench_slot_mapping_section,
    bench_completion_section, bench_commit_section, bench_multi_group_section,
    bench_row_operations_section, bench_export_section, bench_step_section,
    bench_slots_section, bench_arguments_section, bench_kv_cache_section,
    bench_attention_decode_section, bench_attention_short_section,
    bench_attention_prefill_section, bench_plot_section, bench_triton_section;

static const bench_section_entry *const sections[] = {
    &bench_slot_mapping_section,   &bench_completion_section,
    &bench_commit_section,         &bench_multi_group_section,
    &bench_row_operations_section, &bench_export_section,
    &bench_step_section,           &bench_slots_section,
    &bench_arguments_section,      &bench_kv_cache_section,
    &bench_attention_decode_section, &bench_attention_short_section,
    &bench_attention_prefill_section, &bench_plot_section,
    &bench_triton_section};

#define NUM_SECTIONS (sizeof sections / sizeof sections[0])

/* Whether a name, '-' and '_' alike, is a section's or a shape's. */
static bool known_name(const char *name) {
  for (size_t s = 0; s < NUM_SECTIONS; ++s)
    if (sections[s]->name && bench_name_listed(name, sections[s]->name))
      return true;
  for (size_t i = 0; i < bench_num_shapes; ++i)
    if (bench_name_listed(name, bench_shapes[i].name)) return true;
  return false;
}

bool bench_unknown_name(const char *names, char *unknown, size_t size) {
  for (const char *p = names;; ++p) {
    size_t length = strcspn(p, ",");
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)length, p);
    if (length >= sizeof name || !known_name(name)) {
      snprintf(unknown, size, "%.*s", (int)length, p);
      return true;
    }
    p += length;
    if (!*p) return false;
  }
}

/* Appends name to the help in out, after `before`, wrapping at 54
   characters; false when out is full. */
static bool add_help_name(char *out, size_t size, size_t *used, size_t *line,
                          const char *before, const char *name,
                          const char *after) {
  size_t length = strlen(before) + 1 + strlen(name) + strlen(after);
  bool wrap = *line + length > 54;
  int written = snprintf(out + *used, size - *used, "%s%s%s%s", before,
                         wrap ? "\n" : " ", name, after);
  if (written < 0 || (size_t)written >= size - *used) return false;
  *used += (size_t)written;
  *line = wrap ? length - strlen(before) - 1 : *line + length;
  return true;
}

void bench_only_help(char *out, size_t size) {
  size_t used =
      (size_t)snprintf(out, size, "comma-separated names of sections:");
  size_t line = used;
  const char *before = "";
  for (size_t s = 0; s < NUM_SECTIONS; ++s) {
    const char *name = sections[s]->name;
    if (!name) continue;
    bool shapes = strcmp(name, BENCH_SHAPES_NAME) == 0;
    if (!add_help_name(out, size, &used, &line, before, name,
                       shapes ? " (every shape)" : ""))
      return;
    before = ",";
  }
  before = "; or of batch shapes";
  for (size_t i = 0; i < bench_num_shapes; ++i, before = ",")
    if (!add_help_name(out, size, &used, &line, before, bench_shapes[i].name,
                       ""))
      return;
}

report *bench_run(const bench_options *options, size_t *failures) {
  bench b = {.options = *options, .rng = 0x9E3779B97F4A7C15ull};
  for (int i = 0; i < BENCH_MAX_CALLS; ++i) {
    b.samples[i] = malloc(b.options.runs * sizeof(double));
    if (!b.samples[i]) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  }
  b.root = report_create();
  bench_open(&b);
  for (size_t s = 0; s < NUM_SECTIONS; ++s)
    if (!sections[s]->name || bench_selected(&b, sections[s]->name))
      sections[s]->run(&b);
  bench_report_targets(&b);
  bench_close(&b);
  for (int i = 0; i < BENCH_MAX_CALLS; ++i) free(b.samples[i]);
  *failures = b.failures;
  return b.root;
}
