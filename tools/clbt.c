/*
 * The clbt command-line tool: lists devices with their selectors and runs
 * the randomised self-test on the selected device.
 */
#include "clbt/clbt.h"
#include "bench.h"
#include "selftest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXIT_USAGE 2

static const char usage_main[] =
    "usage: clbt <command> [options]\n"
    "\n"
    "commands:\n"
    "  devices    list OpenCL devices, the selector of each, and the one\n"
    "             selected now (CLBT_DEVICE, else the first GPU, else the\n"
    "             first device)\n"
    "  selftest   check random row operations and slot mappings on the\n"
    "             selected device against the host reference\n"
    "  bench      time slot mapping, commits, multi-group launches and row\n"
    "             operations on the selected device\n"
    "\n"
    "Run 'clbt <command> --help' for a command's options.\n";

static const char usage_devices[] =
    "usage: clbt devices\n"
    "\n"
    "Lists every OpenCL platform and device with the CLBT_DEVICE selector that\n"
    "picks it; '*' marks the device clbt selects now.\n";

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

static bool wants_help(int argc, char **argv) {
  for (int i = 0; i < argc; ++i)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      return true;
  return false;
}

/* Prints "clbt: <problem> '<what>'" and the usage; returns EXIT_USAGE. */
static int usage_error(const char *usage, const char *problem,
                       const char *what) {
  if (what)
    fprintf(stderr, "clbt: %s '%s'\n\n%s", problem, what, usage);
  else
    fprintf(stderr, "clbt: %s\n\n%s", problem, usage);
  return EXIT_USAGE;
}

static bool parse_count(const char *text, uint64_t *value) {
  char *end = NULL;
  errno = 0;
  unsigned long long parsed = strtoull(text, &end, 10);
  if (errno || end == text || *end != '\0' || text[0] == '-') return false;
  *value = parsed;
  return true;
}

static const char *type_name(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

static void print_device(cl_device_id device, cl_device_id selected) {
  char name[256] = "?", selector[64] = "?";
  cl_device_type type = 0;
  clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  if (clbt_device_selector(device, selector, sizeof selector) != CLBT_SUCCESS)
    snprintf(selector, sizeof selector, "?");
  printf("  %c %-24s %-11s %s\n", device == selected ? '*' : ' ', selector,
         type_name(type), name);
}

static int list_platform(cl_platform_id platform, cl_uint index,
                         cl_device_id selected) {
  char name[256] = "?";
  cl_uint count = 0;
  clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
  printf("platform %u: %s\n", (unsigned)index, name);
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &count) !=
          CL_SUCCESS ||
      count == 0) {
    printf("    (no devices)\n");
    return 0;
  }
  cl_device_id *devices = malloc(count * sizeof *devices);
  if (!devices ||
      clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, devices, NULL) !=
          CL_SUCCESS) {
    free(devices);
    fprintf(stderr, "clbt: cannot list the devices of platform %u\n",
            (unsigned)index);
    return 1;
  }
  for (cl_uint d = 0; d < count; ++d) print_device(devices[d], selected);
  free(devices);
  return 0;
}

static int command_devices(int argc, char **argv) {
  if (wants_help(argc, argv)) return printf("%s", usage_devices), 0;
  if (argc > 0) return usage_error(usage_devices, "unexpected argument", argv[0]);
  clbt_device *device = NULL;
  clbt_status status = clbt_device_open(NULL, &device);
  cl_device_id selected = clbt_device_id(device);
  cl_uint num_platforms = 0;
  cl_platform_id platforms[64];
  int result = 0;
  if (clGetPlatformIDs(64, platforms, &num_platforms) != CL_SUCCESS)
    num_platforms = 0;
  if (num_platforms > 64) num_platforms = 64;
  if (num_platforms == 0) printf("no OpenCL platforms\n");
  for (cl_uint p = 0; p < num_platforms; ++p)
    result |= list_platform(platforms[p], p, selected);
  if (status != CLBT_SUCCESS) {
    fprintf(stderr, "clbt: no device selected: %s: %s\n",
            clbt_status_name(status), clbt_last_error());
    result = 1;
  }
  clbt_device_release(device);
  return result;
}

static int parse_selftest(int argc, char **argv, clbt_selftest_options *options) {
  for (int i = 0; i < argc; ++i) {
    uint64_t value = 0;
    const char *option = argv[i];
    bool is_seed = strcmp(option, "--seed") == 0;
    bool known = is_seed || strcmp(option, "--rounds") == 0 ||
                 strcmp(option, "--steps") == 0;
    if (!known) return usage_error(usage_selftest, "unknown option", option);
    if (i + 1 >= argc)
      return usage_error(usage_selftest, "a value is missing after", option);
    if (!parse_count(argv[++i], &value) || (!is_seed && value > UINT32_MAX))
      return usage_error(usage_selftest, "not a count:", argv[i]);
    if (is_seed) options->seed = value;
    if (strcmp(option, "--rounds") == 0) options->rounds = (uint32_t)value;
    if (strcmp(option, "--steps") == 0) options->steps_per_round = (uint32_t)value;
  }
  return 0;
}

static int command_selftest(int argc, char **argv) {
  if (wants_help(argc, argv)) return printf("%s", usage_selftest), 0;
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
  if (argc < 2) return usage_error(usage_main, "no command given", NULL);
  const char *command = argv[1];
  if (strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0 ||
      strcmp(command, "help") == 0)
    return printf("%s", usage_main), 0;
  if (strcmp(command, "devices") == 0)
    return command_devices(argc - 2, argv + 2);
  if (strcmp(command, "selftest") == 0)
    return command_selftest(argc - 2, argv + 2);
  if (strcmp(command, "bench") == 0) return clbt_bench_main(argc - 2, argv + 2);
  return usage_error(usage_main, "unknown command", command);
}
