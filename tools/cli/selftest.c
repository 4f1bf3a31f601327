/*
 * clbt selftest: the randomised self-test (support/selftest.c) on the
 * selected device, with its tallies as text or JSON.
 */
#include <stdlib.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "report.h"
#include "selftest.h"

static const char description[] =
    "Runs randomised row operations, commits, slot mappings and serving\n"
    "steps (single and multi-group tables, hybrid blocks, context\n"
    "parallelism, NONE groups, ragged and malformed batches, idx_mapping\n"
    "with negative, repeated and out-of-range entries, the gather) on the\n"
    "selected device and compares each result with the host reference,\n"
    "then writes tokens through the slot mapping and reads them back\n"
    "through the exported page tables (rows in request slots, read through\n"
    "idx_mapping); failures are described on stderr.\n"
    "Exits 0 only when nothing failed.\n";

/* The device as the report shows it; NULL when none could be opened. */
static clbt_device *open_device(report *root, char *error, size_t size) {
  clbt_device *device = NULL;
  clbt_status status = clbt_device_open(NULL, &device);
  if (status != CLBT_SUCCESS) {
    snprintf(error, size, "cannot open a device: %s: %s",
             clbt_status_name(status), clbt_last_error());
    return NULL;
  }
  char selector[CLBT_SELECTOR_SIZE] = "?", name[256] = "?";
  clbt_device_selector(clbt_device_id(device), selector, sizeof selector);
  clGetDeviceInfo(clbt_device_id(device), CL_DEVICE_NAME, sizeof name - 1, name,
                  NULL);
  report *facts = report_object(root, "device");
  report_string(facts, "selector", selector);
  report_string(facts, "name", name);
  return device;
}

int command_selftest(int argc, char **argv) {
  uint64_t seed = (uint64_t)time(NULL), rounds = 12, steps = 8;
  bool as_json = false;
  const cli_option options[] = {
      {"--seed", "N",
       "seed of the random inputs (default: from the clock;\n"
       "reported, so that a failure can be replayed)",
       CLI_COUNT, &seed, 0, UINT64_MAX},
      {"--rounds", "N", "table configurations to try (default 12)", CLI_COUNT,
       &rounds, 0, UINT32_MAX},
      {"--steps", "N", "commit steps per configuration (default 8)", CLI_COUNT,
       &steps, 0, UINT32_MAX},
      CLI_JSON_OPTION(&as_json)};
  const cli_command command = {"selftest", description, options,
                               sizeof options / sizeof options[0]};
  int parsed = cli_parse(&command, argc, argv);
  if (parsed != CLI_PARSED) return parsed;

  report *root = report_create();
  char error[4096] = "";
  selftest_options run = {.seed = seed,
                          .rounds = (uint32_t)rounds,
                          .steps_per_round = (uint32_t)steps,
                          .log = stderr};
  selftest_result result = {0};
  report_uint(root, "seed", seed);
  report_uint(root, "rounds", run.rounds);
  report_uint(root, "steps_per_round", run.steps_per_round);
  clbt_device *device = open_device(root, error, sizeof error);
  /* Before the run, in case it never ends: the seed replays it. */
  fprintf(stderr, "clbt selftest: seed %llu\n", (unsigned long long)seed);
  clbt_status status =
      device ? selftest_run(device, &run, &result) : CLBT_SUCCESS;
  clbt_device_release(device);
  if (status != CLBT_SUCCESS && !error[0])
    snprintf(error, sizeof error, "a clbt call failed: %s: %s",
             clbt_status_name(status), clbt_last_error());
  /* Not opening a device is a failed check too: nothing was shown to work. */
  uint64_t failed = result.failed + (device ? 0 : 1);
  report_uint(root, "row_operations", result.row_operations);
  report_uint(root, "commits", result.commits);
  report_uint(root, "slot_mappings", result.slot_mappings);
  report_uint(root, "steps", result.steps);
  report_uint(root, "exports", result.exports);
  report_uint(root, "passed", result.passed);
  report_uint(root, "failed", failed);
  cli_emit(root, as_json, error);
  return failed == 0 && !error[0] ? 0 : 1;
}
