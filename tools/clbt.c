/*
 * The clbt command-line tool: dispatches to its commands (devices.c,
 * info.c, bench.c) and runs the randomised self-test on the selected
 * device.
 */
#include "bench.h"
#include "cli.h"
#include "selftest.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage_main[] =
    "usage: clbt <command> [options]\n"
    "\n"
    "commands:\n"
    "  devices    list OpenCL devices, the selector of each, and the one\n"
    "             selected now (CLBT_DEVICE, else the first GPU, else the\n"
    "             first device)\n"
    "  info       the library version, the selected device's properties, the\n"
    "             settings clbt reads from the environment, and the programs\n"
    "             a table config needs\n"
    "  selftest   check random row operations and slot mappings on the\n"
    "             selected device against the host reference\n"
    "  bench      time slot mapping, commits, multi-group launches and row\n"
    "             operations on the selected device\n"
    "\n"
    "Run 'clbt <command> --help' for a command's options.\n";

static const char usage_selftest[] =
    "usage: clbt selftest [--seed N] [--rounds N] [--steps N]\n"
    "\n"
    "Runs randomised row operations, commits and slot mappings (single and\n"
    "multi-group tables, hybrid blocks, context parallelism, NONE groups,\n"
    "ragged and malformed batches) on the selected device and compares each\n"
    "result with the host reference. Ends with 'selftest: N passed, M failed';\n"
    "exits 0 only when nothing failed.\n"
    "\n"
    "  --seed N    seed of the random inputs (default: from the clock;\n"
    "              printed, so that a failure can be replayed)\n"
    "  --rounds N  table configurations to try (default 12)\n"
    "  --steps N   commit steps per configuration (default 8)\n";

static int parse_selftest(int argc, char **argv, clbt_selftest_options *options) {
  for (int i = 0; i < argc; ++i) {
    uint64_t value = 0;
    const char *option = argv[i];
    bool is_seed = strcmp(option, "--seed") == 0;
    bool known = is_seed || strcmp(option, "--rounds") == 0 ||
                 strcmp(option, "--steps") == 0;
    if (!known) return clbt_cli_usage_error(usage_selftest, "unknown option", option);
    if (i + 1 >= argc)
      return clbt_cli_usage_error(usage_selftest, "a value is missing after", option);
    if (!clbt_cli_parse_count(argv[++i], &value) || (!is_seed && value > UINT32_MAX))
      return clbt_cli_usage_error(usage_selftest, "not a count:", argv[i]);
    if (is_seed) options->seed = value;
    if (strcmp(option, "--rounds") == 0) options->rounds = (uint32_t)value;
    if (strcmp(option, "--steps") == 0) options->steps_per_round = (uint32_t)value;
  }
  return 0;
}

static int command_selftest(int argc, char **argv) {
  if (clbt_cli_wants_help(argc, argv)) return printf("%s", usage_selftest), 0;
  clbt_selftest_options options = {.seed = (uint64_t)time(NULL),
                                   .rounds = 12,
                                   .steps_per_round = 8,
                                   .log = stderr};
  int parsed = parse_selftest(argc, argv, &options);
  if (parsed) return parsed;

  clbt_device *device = NULL;
  clbt_status status = clbt_device_open(NULL, &device);
  if (status != CLBT_SUCCESS) {
    fprintf(stderr, "clbt: cannot open a device: %s: %s\n",
            clbt_status_name(status), clbt_last_error());
    printf("selftest: 0 passed, 1 failed\n");
    return 1;
  }
  char selector[64] = "?", name[256] = "?";
  clbt_device_selector(clbt_device_id(device), selector, sizeof selector);
  clGetDeviceInfo(clbt_device_id(device), CL_DEVICE_NAME, sizeof name - 1, name,
                  NULL);
  printf("selftest on %s (%s), seed %" PRIu64 ", %" PRIu32 " rounds of %" PRIu32
         " steps\n",
         selector, name, options.seed, options.rounds, options.steps_per_round);
  fflush(stdout);

  clbt_selftest_result result = {0};
  status = clbt_selftest_run(device, &options, &result);
  clbt_device_release(device);
  printf("%" PRIu64 " row operations, %" PRIu64 " commits, %" PRIu64
         " slot mappings checked\n",
         result.row_operations, result.commits, result.slot_mappings);
  printf("selftest: %" PRIu64 " passed, %" PRIu64 " failed\n", result.passed,
         result.failed);
  return result.failed == 0 && status == CLBT_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 2) return clbt_cli_usage_error(usage_main, "no command given", NULL);
  const char *command = argv[1];
  if (strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0 ||
      strcmp(command, "help") == 0)
    return printf("%s", usage_main), 0;
  if (strcmp(command, "devices") == 0)
    return clbt_command_devices(argc - 2, argv + 2);
  if (strcmp(command, "info") == 0) return clbt_command_info(argc - 2, argv + 2);
  if (strcmp(command, "selftest") == 0)
    return command_selftest(argc - 2, argv + 2);
  if (strcmp(command, "bench") == 0) return clbt_bench_main(argc - 2, argv + 2);
  return clbt_cli_usage_error(usage_main, "unknown command", command);
}
