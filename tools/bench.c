/*
 * clbt bench: runs the sections (bench_*.c) on the selected device, sets
 * the targets against their figures, and renders the report: text on
 * stdout, JSON into --json FILE.
 */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char description[] =
    "Times the slot-mapping call (enqueue to completion) on the selected "
    "device\n"
    "against an empty kernel on the same queue and against the host loop, for\n"
    "the batch shapes of vLLM's slot-mapping benchmark; commits of a steady\n"
    "decode step against vLLM's whole copy of the rows; one launch for 1, 2\n"
    "and 4 groups against group by group; host row operations per second;\n"
    "the attention export; and a whole serving step in the v1 and the\n"
    "persistent model, with the gather, against an empty kernel, with the\n"
    "library's OpenCL calls in each step counted by function; what\n"
    "a launch's arguments cost, on kernels that do nothing; and the\n"
    "KV-cache write against a copy of its bytes and an empty kernel.\n"
    "Medians of N runs, ratios from interleaved runs; each ratio the project\n"
    "sets a target for is checked at the end.\n";

static void target(report *section, const char *what, double value,
                   double limit) {
  if (value < 0) return;
  report *record = bench_record(section, what);
  report_number(record, "value", value, 4);
  report_number(record, "limit", limit, 2);
  report_bool(record, "met", value <= limit);
}

static void add_targets(bench *b) {
  report *section = report_array(b->root, "targets");
  report_caption(section,
                 "the PoCL ones; on a GPU the same ratios, for reading");
  target(section, "slot mapping / empty kernel, worst decode shape",
         b->decode_call_over_empty, 2.0);
  target(section, "slot mapping / (host loop + empty kernel), tokens-16384",
         b->tokens_call_over_host_plus_empty, 1.5);
  target(section, "steady decode commit bytes / vLLM's whole copy",
         b->commit_bytes_over_seed, 0.02);
  target(section, "steady decode commit time / one small write",
         b->commit_over_small_write, 2.0);
  target(section, "4 groups in one launch / one group's call, worse batch",
         b->four_groups_over_one, 1.3);
  target(section, "steady v1 or persistent step / empty kernel, worst",
         b->steady_step_over_empty, 1.3);
  target(section, "steady step with the export / empty kernel, worst",
         b->export_step_over_empty, 1.5);
  target(section, "step with no row change / empty kernel, worst",
         b->still_step_over_empty, 1.25);
  target(section, "churning step / (1.3x empty kernel + a write of its ids)",
         b->churn_step_over_limit, 1.0);
  target(section, "enqueue_step's host time / its limit, worst",
         b->step_enqueue_over_limit, 1.0);
  target(section, "churning step's row updates / (2 us + 1 us per 10 KiB)",
         b->step_updates_over_limit, 1.0);
  target(section, "a steady step's OpenCL calls besides the launch, worst",
         b->steady_step_calls, 1);
  target(section, "a churning step's calls past issue 18's budget, worst",
         b->step_calls_over_budget, 0);
  target(section, "a churning step's clSetKernelArg calls, worst",
         b->step_set_kernel_arg, 2);
}

/* Writes the report as JSON to path; false (with a message) if it cannot. */
static bool write_json(const report *root, const char *path) {
  FILE *out = fopen(path, "w");
  if (out) report_write_json(root, out);
  if (!out || fclose(out) != 0) {
    fprintf(stderr, "clbt bench: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  return true;
}

int command_bench(int argc, char **argv) {
  bench b = {.options = {.runs = 300},
             .rng = 0x9E3779B97F4A7C15ull,
             .decode_call_over_empty = -1,
             .tokens_call_over_host_plus_empty = -1,
             .commit_bytes_over_seed = -1,
             .commit_over_small_write = -1,
             .four_groups_over_one = -1,
             .steady_step_over_empty = -1,
             .export_step_over_empty = -1,
             .still_step_over_empty = -1,
             .churn_step_over_limit = -1,
             .step_enqueue_over_limit = -1,
             .step_updates_over_limit = -1,
             .steady_step_calls = -1,
             .step_calls_over_budget = -1,
             .step_set_kernel_arg = -1};
  const cli_option options[] = {
      {"--runs", "N", "runs per figure, of which the median (default 300)",
       CLI_COUNT, &b.options.runs, 1, 1000000},
      {"--only", "NAMES",
       "comma-separated shape names, or completion, commit,\n"
       "multi-group, row-operations, export, step, slots,\n"
       "arguments, kv_cache",
       CLI_TEXT, &b.options.only, 0, 0},
      {"--json", "FILE", "also write every figure as JSON", CLI_TEXT,
       &b.options.json_path, 0, 0},
      {"--plot", "FILE",
       "also write time per call against batch size\n(gnuplot data)", CLI_TEXT,
       &b.options.plot_path, 0, 0},
      {"--compare", "DIR",
       "compare slot ids with those of vLLM's Triton kernel,\n"
       "as tools/gpu_bench.sh writes them into DIR",
       CLI_TEXT, &b.options.compare_dir, 0, 0}};
  const cli_command command = {"bench", description, options,
                               sizeof options / sizeof options[0]};
  int parsed = cli_parse(&command, argc, argv);
  if (parsed != CLI_PARSED) return parsed;

  for (int i = 0; i < BENCH_MAX_CALLS; ++i) {
    b.samples[i] = malloc(b.options.runs * sizeof(double));
    if (!b.samples[i]) bench_die("malloc", CLBT_CL_OUT_OF_HOST_MEMORY);
  }
  b.root = report_create();
  bench_open(&b);
  bench_slot_mapping(&b);
  bench_completion(&b);
  bench_commit(&b);
  bench_multi_group(&b);
  bench_row_operations(&b);
  bench_export(&b);
  bench_step(&b);
  bench_slots(&b);
  bench_arguments(&b);
  bench_kv_cache(&b);
  bench_plot(&b);
  size_t mismatches = bench_triton_compare(&b);
  add_targets(&b);
  bench_close(&b);
  report_write_text(b.root, stdout);
  bool written =
      !b.options.json_path || write_json(b.root, b.options.json_path);
  report_free(b.root);
  for (int i = 0; i < BENCH_MAX_CALLS; ++i) free(b.samples[i]);
  return mismatches || !written ? 1 : 0;
}
