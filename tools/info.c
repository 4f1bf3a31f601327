/*
 * clbt info: the library version, the selected device with the properties
 * that matter to clbt, the settings clbt reads from the environment, the
 * programs a table config needs, and how long it takes to start a table of
 * that config (open the device, prepare the programs, run the first slot
 * mapping); as text, or as JSON with --json.
 */
#include "cli.h"
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GROUPS 16
#define MAX_PROGRAMS 32 /* listed; a config needs at most one per group */
#define TEXT_SIZE 256
#define OPTIONS_SIZE 1024

static const char usage_info[] =
    "usage: clbt info [--block-sizes LIST] [--cp-world-size N] [--cp-rank N]\n"
    "                 [--cp-interleave-size N] [--json]\n"
    "\n"
    "Prints the library version; the selected device (CLBT_DEVICE) with its\n"
    "OpenCL C version, int64 support, maximum work-group size, compute units\n"
    "and unified memory; the settings clbt reads from the environment; the\n"
    "programs a multi-group table config needs; and the start-up of a table of\n"
    "that config, timed: opening the device, preparing the programs (built,\n"
    "or taken from the caches) and the first slot mapping of every group.\n"
    "\n"
    "  --block-sizes LIST      one KV-cache group per item, comma-separated:\n"
    "                          B, or B/K with K the kernel block size\n"
    "                          (default 16)\n"
    "  --cp-world-size N       context-parallel ranks (default 1)\n"
    "  --cp-rank N             this rank (default 0)\n"
    "  --cp-interleave-size N  tokens per rank in turn (default 1)\n"
    "  --json                  print one JSON object instead of text\n";

static const char *const environment_names[] = {
    "CLBT_DEVICE", "CLBT_LOG", "CLBT_BUILD_OPTIONS", "CLBT_CACHE_DIR"};
#define NUM_ENVIRONMENT (sizeof environment_names / sizeof environment_names[0])

typedef struct info_options {
  clbt_group_config groups[MAX_GROUPS];
  clbt_multi_table_config config;
  bool as_json;
} info_options;

/* The device's properties that matter to clbt. */
typedef struct device_facts {
  char selector[64], name[TEXT_SIZE], platform[TEXT_SIZE],
      platform_version[TEXT_SIZE], driver_version[TEXT_SIZE],
      opencl_c_version[TEXT_SIZE], int64_source[64];
  cl_device_type type;
  bool int64;
  size_t max_work_group_size;
  cl_uint compute_units;
  cl_bool unified_memory;
} device_facts;

/* Everything info prints, gathered before it is printed. */
typedef struct info_report {
  const info_options *options;
  device_facts device;
  double open_ms, prepare_ms, first_launch_ms; /* the start-up */
  size_t num_programs;
  char programs[MAX_PROGRAMS][OPTIONS_SIZE]; /* oldest first */
  bool device_known, programs_known, started; /* gathered so far */
  char error[4096];                  /* what failed, or "" */
} info_report;

static double milliseconds_since(const struct timespec *start) {
  struct timespec now;
  timespec_get(&now, TIME_UTC);
  return (double)(now.tv_sec - start->tv_sec) * 1e3 +
         (double)(now.tv_nsec - start->tv_nsec) / 1e6;
}

/* ---- options ------------------------------------------------------------ */

/* Parses "B" or "B/K" (length characters of item) into a group. */
static bool parse_group(const char *item, size_t length,
                        clbt_group_config *group) {
  char text[32];
  uint64_t block_size = 0, kernel_block_size = 0;
  if (length == 0 || length >= sizeof text) return false;
  memcpy(text, item, length);
  text[length] = '\0';
  char *slash = strchr(text, '/');
  if (slash) *slash = '\0';
  if (!clbt_cli_parse_count(text, &block_size) || block_size > UINT32_MAX ||
      (slash && (!clbt_cli_parse_count(slash + 1, &kernel_block_size) ||
                 kernel_block_size > UINT32_MAX)))
    return false;
  *group = (clbt_group_config){.block_size = (uint32_t)block_size,
                               .kernel_block_size = (uint32_t)kernel_block_size,
                               .max_num_blocks = 1};
  return true;
}

static int parse_block_sizes(const char *list, info_options *options) {
  uint32_t count = 0;
  for (const char *item = list;; item += strcspn(item, ",") + 1) {
    if (count == MAX_GROUPS)
      return clbt_cli_usage_error(usage_info, "more than 16 groups in", list);
    if (!parse_group(item, strcspn(item, ","), &options->groups[count++]))
      return clbt_cli_usage_error(usage_info, "not a list of B or B/K sizes:",
                                  list);
    if (item[strcspn(item, ",")] == '\0') break;
  }
  options->config.num_groups = count;
  return 0;
}

/* The config field an option sets, or NULL for an unknown option. */
static uint32_t *count_option(const char *option, info_options *options) {
  if (strcmp(option, "--cp-world-size") == 0)
    return &options->config.cp_world_size;
  if (strcmp(option, "--cp-rank") == 0) return &options->config.cp_rank;
  if (strcmp(option, "--cp-interleave-size") == 0)
    return &options->config.cp_interleave_size;
  return NULL;
}

static int parse_info(int argc, char **argv, info_options *options) {
  for (int i = 0; i < argc; ++i) {
    const char *option = argv[i];
    if (strcmp(option, "--json") == 0) {
      options->as_json = true;
      continue;
    }
    uint32_t *field = count_option(option, options);
    bool is_list = strcmp(option, "--block-sizes") == 0;
    if (!field && !is_list)
      return clbt_cli_usage_error(usage_info, "unknown option", option);
    if (i + 1 >= argc)
      return clbt_cli_usage_error(usage_info, "a value is missing after",
                                  option);
    const char *value = argv[++i];
    uint64_t count = 0;
    if (is_list) {
      int parsed = parse_block_sizes(value, options);
      if (parsed) return parsed;
    } else if (!clbt_cli_parse_count(value, &count) || count > UINT32_MAX) {
      return clbt_cli_usage_error(usage_info, "not a count:", value);
    } else {
      *field = (uint32_t)count;
    }
  }
  return 0;
}

/* ---- gathering ---------------------------------------------------------- */

/* Whether the device has 64-bit integers, and what says so. */
static bool read_int64(cl_device_id id, device_facts *facts) {
  char profile[64] = "";
  size_t size = 0;
  if (clGetDeviceInfo(id, CL_DEVICE_PROFILE, sizeof profile - 1, profile,
                      NULL) != CL_SUCCESS)
    return false;
  /* The full profile requires 64-bit integers; the embedded one does not. */
  facts->int64 = strcmp(profile, "FULL_PROFILE") == 0;
  snprintf(facts->int64_source, sizeof facts->int64_source, "%s", profile);
  if (facts->int64) return true;
  if (clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, 0, NULL, &size) != CL_SUCCESS)
    return false;
  char *extensions = calloc(size + 1, 1);
  bool read = extensions && clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, size,
                                            extensions, NULL) == CL_SUCCESS;
  if (read && strstr(extensions, "cles_khr_int64")) {
    facts->int64 = true;
    snprintf(facts->int64_source, sizeof facts->int64_source,
             "cles_khr_int64");
  }
  free(extensions);
  return read;
}

/* Reads the facts; returns NULL, or the name of the one it cannot read. */
static const char *read_facts(cl_device_id id, device_facts *facts) {
  const struct {
    cl_device_info what;
    size_t size;
    void *into;
    const char *name;
  } queries[] = {
      {CL_DEVICE_NAME, TEXT_SIZE - 1, facts->name, "CL_DEVICE_NAME"},
      {CL_DRIVER_VERSION, TEXT_SIZE - 1, facts->driver_version,
       "CL_DRIVER_VERSION"},
      {CL_DEVICE_OPENCL_C_VERSION, TEXT_SIZE - 1, facts->opencl_c_version,
       "CL_DEVICE_OPENCL_C_VERSION"},
      {CL_DEVICE_TYPE, sizeof facts->type, &facts->type, "CL_DEVICE_TYPE"},
      {CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof facts->max_work_group_size,
       &facts->max_work_group_size, "CL_DEVICE_MAX_WORK_GROUP_SIZE"},
      {CL_DEVICE_MAX_COMPUTE_UNITS, sizeof facts->compute_units,
       &facts->compute_units, "CL_DEVICE_MAX_COMPUTE_UNITS"},
      {CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof facts->unified_memory,
       &facts->unified_memory, "CL_DEVICE_HOST_UNIFIED_MEMORY"}};
  for (size_t i = 0; i < sizeof queries / sizeof queries[0]; ++i)
    if (clGetDeviceInfo(id, queries[i].what, queries[i].size, queries[i].into,
                        NULL) != CL_SUCCESS)
      return queries[i].name;
  cl_platform_id platform;
  if (clGetDeviceInfo(id, CL_DEVICE_PLATFORM, sizeof platform, &platform,
                      NULL) != CL_SUCCESS ||
      clGetPlatformInfo(platform, CL_PLATFORM_NAME, TEXT_SIZE - 1,
                        facts->platform, NULL) != CL_SUCCESS ||
      clGetPlatformInfo(platform, CL_PLATFORM_VERSION, TEXT_SIZE - 1,
                        facts->platform_version, NULL) != CL_SUCCESS)
    return "its platform's name and version";
  if (!read_int64(id, facts)) return "CL_DEVICE_PROFILE or its extensions";
  if (clbt_device_selector(id, facts->selector, sizeof facts->selector) !=
      CLBT_SUCCESS)
    return "its selector";
  return NULL;
}

/* Prepares the config and lists the programs it built, in group order. */
static clbt_status prepare_programs(clbt_device *device, info_report *report) {
  struct timespec start;
  timespec_get(&start, TIME_UTC);
  clbt_status status =
      clbt_multi_table_prepare(device, &report->options->config);
  report->prepare_ms = milliseconds_since(&start);
  size_t count = status ? 0 : clbt_device_program_count(device);
  if (count > MAX_PROGRAMS) count = MAX_PROGRAMS;
  /* The device lists its programs newest first. */
  for (size_t i = 0; i < count && !status; ++i)
    status = clbt_device_program_options(device, i,
                                         report->programs[count - 1 - i],
                                         OPTIONS_SIZE);
  report->num_programs = status ? 0 : count;
  return status;
}

/*
 * Creates a table of the config and times its first slot mapping (an empty
 * batch, which still runs every group's kernel): drivers finish compiling a
 * kernel at its first launch.
 */
static clbt_status time_first_launch(clbt_device *device,
                                     info_report *report) {
  clbt_multi_table *table = NULL;
  clbt_status status =
      clbt_multi_table_create(device, &report->options->config, &table);
  cl_int error = CL_SUCCESS;
  cl_int query_start_loc[1] = {0};
  cl_mem starts = status ? NULL
                         : clCreateBuffer(clbt_device_context(device),
                                          CL_MEM_READ_ONLY |
                                              CL_MEM_COPY_HOST_PTR,
                                          sizeof query_start_loc,
                                          query_start_loc, &error);
  if (!status && error) status = (clbt_status)error;
  struct timespec start;
  timespec_get(&start, TIME_UTC);
  if (!status)
    status = clbt_multi_table_compute_slot_mapping(table, 0, starts, NULL, 0);
  if (!status) status = (clbt_status)clFinish(clbt_device_queue(device));
  report->first_launch_ms = milliseconds_since(&start);
  if (starts) clReleaseMemObject(starts);
  clbt_multi_table_destroy(table);
  return status;
}

/* Fills the report; on failure says what failed in report->error. */
static void gather(info_report *report) {
  struct timespec start;
  timespec_get(&start, TIME_UTC);
  clbt_device *device = NULL;
  clbt_status status = clbt_device_open(NULL, &device);
  report->open_ms = milliseconds_since(&start);
  const char *unread = NULL;
  if (status != CLBT_SUCCESS)
    snprintf(report->error, sizeof report->error,
             "cannot open a device: %s: %s", clbt_status_name(status),
             clbt_last_error());
  else if ((unread = read_facts(clbt_device_id(device), &report->device)))
    snprintf(report->error, sizeof report->error,
             "cannot read %s of the device", unread);
  else if ((report->device_known = true) &&
           (status = prepare_programs(device, report)) != CLBT_SUCCESS)
    snprintf(report->error, sizeof report->error,
             "cannot prepare the config: %s: %s", clbt_status_name(status),
             clbt_last_error());
  else if ((report->programs_known = true) &&
           (status = time_first_launch(device, report)) != CLBT_SUCCESS)
    snprintf(report->error, sizeof report->error,
             "cannot run the first slot mapping: %s: %s",
             clbt_status_name(status), clbt_last_error());
  else
    report->started = true;
  clbt_device_release(device);
}

/* ---- printing ----------------------------------------------------------- */

static uint32_t or_one(uint32_t value) { return value ? value : 1; }

static void print_device_text(const info_report *report) {
  const device_facts *d = &report->device;
  printf("device %s\n", d->selector);
  printf("  %-20s %s\n", "name", d->name);
  printf("  %-20s %s\n", "type", clbt_cli_type_name(d->type));
  printf("  %-20s %s (%s)\n", "platform", d->platform, d->platform_version);
  printf("  %-20s %s\n", "driver version", d->driver_version);
  printf("  %-20s %s\n", "OpenCL C", d->opencl_c_version);
  printf("  %-20s %s (%s)\n", "int64", d->int64 ? "yes" : "no",
         d->int64_source);
  printf("  %-20s %zu\n", "max work-group size", d->max_work_group_size);
  printf("  %-20s %u\n", "compute units", (unsigned)d->compute_units);
  printf("  %-20s %s\n", "unified memory", d->unified_memory ? "yes" : "no");
}

static void print_programs_text(const info_report *report) {
  const clbt_multi_table_config *config = &report->options->config;
  printf("programs for block sizes ");
  for (uint32_t g = 0; g < config->num_groups; ++g) {
    const clbt_group_config *group = &config->groups[g];
    printf(group->kernel_block_size ? "%s%u/%u" : "%s%u", g ? "," : "",
           (unsigned)group->block_size, (unsigned)group->kernel_block_size);
  }
  printf(", cp world size %u, rank %u, interleave size %u\n",
         (unsigned)or_one(config->cp_world_size), (unsigned)config->cp_rank,
         (unsigned)or_one(config->cp_interleave_size));
  for (size_t i = 0; i < report->num_programs; ++i)
    printf("  %s\n", report->programs[i]);
}

static void print_startup_text(const info_report *report) {
  printf("start-up\n");
  printf("  %-20s %.1f ms\n", "open the device", report->open_ms);
  printf("  %-20s %.1f ms (%zu program%s)\n", "prepare programs",
         report->prepare_ms, report->num_programs,
         report->num_programs == 1 ? "" : "s");
  printf("  %-20s %.1f ms\n", "first slot mapping", report->first_launch_ms);
}

static void print_text(const info_report *report) {
  printf("clbt %s\n", clbt_version_string());
  if (report->device_known) print_device_text(report);
  printf("environment\n");
  for (size_t i = 0; i < NUM_ENVIRONMENT; ++i) {
    const char *value = getenv(environment_names[i]);
    printf("  %-20s %s\n", environment_names[i], value ? value : "(unset)");
  }
  printf("  %-20s %s\n", "log level",
         clbt_log_level_name(clbt_log_get_level()));
  if (report->programs_known) print_programs_text(report);
  if (report->started) print_startup_text(report);
}

static void write_device_json(clbt_json *json, const info_report *report) {
  const device_facts *d = &report->device;
  clbt_json_object_begin(json, "device");
  clbt_json_string(json, "selector", d->selector);
  clbt_json_string(json, "name", d->name);
  clbt_json_string(json, "type", clbt_cli_type_name(d->type));
  clbt_json_string(json, "platform", d->platform);
  clbt_json_string(json, "platform_version", d->platform_version);
  clbt_json_string(json, "driver_version", d->driver_version);
  clbt_json_string(json, "opencl_c_version", d->opencl_c_version);
  clbt_json_bool(json, "int64", d->int64);
  clbt_json_uint(json, "max_work_group_size", d->max_work_group_size);
  clbt_json_uint(json, "compute_units", d->compute_units);
  clbt_json_bool(json, "unified_memory", d->unified_memory);
  clbt_json_object_end(json);
}

static void write_config_json(clbt_json *json, const info_report *report) {
  const clbt_multi_table_config *config = &report->options->config;
  clbt_json_object_begin(json, "config");
  clbt_json_array_begin(json, "groups");
  for (uint32_t g = 0; g < config->num_groups; ++g) {
    const clbt_group_config *group = &config->groups[g];
    clbt_json_object_begin(json, NULL);
    clbt_json_uint(json, "block_size", group->block_size);
    clbt_json_uint(json, "kernel_block_size",
                   group->kernel_block_size ? group->kernel_block_size
                                            : group->block_size);
    clbt_json_object_end(json);
  }
  clbt_json_array_end(json);
  clbt_json_uint(json, "cp_world_size", or_one(config->cp_world_size));
  clbt_json_uint(json, "cp_rank", config->cp_rank);
  clbt_json_uint(json, "cp_interleave_size",
                 or_one(config->cp_interleave_size));
  clbt_json_object_end(json);
}

static void write_programs_json(clbt_json *json, const info_report *report) {
  clbt_json_array_begin(json, "programs");
  for (size_t i = 0; i < report->num_programs; ++i)
    clbt_json_string(json, NULL, report->programs[i]);
  clbt_json_array_end(json);
}

static void write_startup_json(clbt_json *json, const info_report *report) {
  clbt_json_object_begin(json, "startup");
  clbt_json_double(json, "open_ms", report->open_ms);
  clbt_json_double(json, "prepare_ms", report->prepare_ms);
  clbt_json_double(json, "first_slot_mapping_ms", report->first_launch_ms);
  clbt_json_object_end(json);
}

static void print_json(const info_report *report) {
  clbt_json json;
  clbt_json_begin(&json, stdout);
  clbt_json_string(&json, "version", clbt_version_string());
  if (report->device_known)
    write_device_json(&json, report);
  else
    clbt_json_string(&json, "device", NULL);
  clbt_json_object_begin(&json, "environment");
  for (size_t i = 0; i < NUM_ENVIRONMENT; ++i)
    clbt_json_string(&json, environment_names[i],
                     getenv(environment_names[i]));
  clbt_json_object_end(&json);
  clbt_json_string(&json, "log_level",
                   clbt_log_level_name(clbt_log_get_level()));
  write_config_json(&json, report);
  if (report->programs_known)
    write_programs_json(&json, report);
  else
    clbt_json_string(&json, "programs", NULL);
  if (report->started)
    write_startup_json(&json, report);
  else
    clbt_json_string(&json, "startup", NULL);
  clbt_json_string(&json, "error", report->error[0] ? report->error : NULL);
  clbt_json_end(&json);
}

int clbt_command_info(int argc, char **argv) {
  if (clbt_cli_wants_help(argc, argv)) return printf("%s", usage_info), 0;
  static info_options options;
  static info_report report;
  options.groups[0] = (clbt_group_config){.block_size = 16,
                                          .max_num_blocks = 1};
  options.config = (clbt_multi_table_config){.max_num_reqs = 1,
                                             .max_num_batched_tokens = 1,
                                             .num_groups = 1,
                                             .groups = options.groups};
  int parsed = parse_info(argc, argv, &options);
  if (parsed) return parsed;
  report.options = &options;
  gather(&report);
  if (options.as_json)
    print_json(&report);
  else
    print_text(&report);
  if (report.error[0]) fprintf(stderr, "clbt: %s\n", report.error);
  return report.error[0] ? 1 : 0;
}
