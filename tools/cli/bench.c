/*
 * clbt bench: reads its options, runs the bench (tools/bench/) and renders
 * the report: text on stdout, JSON into --json FILE.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/cli.h"
#include "cli/commands.h"

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
    "a launch's arguments cost, on kernels that do nothing; the\n"
    "KV-cache write against a copy of its bytes and an empty kernel; and\n"
    "paged attention against a copy of the K/V bytes it reads and an empty\n"
    "kernel.\n"
    "Medians of N runs, ratios from interleaved runs; each ratio the project\n"
    "sets a target for is checked at the end.\n";

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
  bench_options chosen = {.runs = 300};
  const char *json_path = NULL;
  char only_help[1024];
  bench_only_help(only_help, sizeof only_help);
  const cli_option options[] = {
      {"--runs", "N", "runs per figure, of which the median (default 300)",
       CLI_COUNT, &chosen.runs, 1, 1000000},
      {"--only", "NAMES", only_help, CLI_TEXT, &chosen.only, 0, 0},
      {"--json", "FILE", "also write every figure as JSON", CLI_TEXT,
       &json_path, 0, 0},
      {"--plot", "FILE",
       "also write time per call against batch size\n(gnuplot data)", CLI_TEXT,
       &chosen.plot_path, 0, 0},
      {"--compare", "DIR",
       "compare slot ids with those of vLLM's Triton kernel,\n"
       "as tools/gpu/bench.sh writes them into DIR",
       CLI_TEXT, &chosen.compare_dir, 0, 0}};
  const cli_command command = {"bench", description, options,
                               sizeof options / sizeof options[0]};
  int parsed = cli_parse(&command, argc, argv);
  if (parsed != CLI_PARSED) return parsed;
  char unknown[64];
  if (chosen.only && bench_unknown_name(chosen.only, unknown, sizeof unknown))
    return cli_usage_error(&command, "--only names no section or shape",
                           unknown);

  size_t failures = 0;
  report *root = bench_run(&chosen, &failures);
  report_write_text(root, stdout);
  bool written = !json_path || write_json(root, json_path);
  report_free(root);
  return failures || !written ? 1 : 0;
}
