/*
 * clbt info: the library version, the selected device with the properties
 * that matter to clbt, the settings clbt reads from the environment and the
 * opened device's settings, the programs a table config needs, and how
 * long it takes to start a table of
 * that config (open the device, prepare the programs, run the first slot
 * mapping); as text, or as JSON with --json.
 */
#include "cli/cli.h"
#include "cli/commands.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GROUPS 16
#define MAX_PROGRAMS 32 /* listed; a config needs at most one per group */
#define TEXT_SIZE 256

static const char description[] =
    "Prints the library version; the selected device (CLBT_DEVICE) with its\n"
    "OpenCL C version, int64 support, maximum work-group size, compute units\n"
    "and unified memory; the settings clbt reads from the environment and\n"
    "the device's build options and program cache directory that follow; the\n"
    "programs a multi-group table config needs and the tuning row they were\n"
    "built for (CLBT_TUNING); and the start-up of a table of that config,\n"
    "timed: opening the device, preparing the programs (built,\n"
    "or taken from the caches) and the first slot mapping of every group.\n";

static const char *const environment_names[] = {
    "CLBT_DEVICE", "CLBT_LOG", "CLBT_BUILD_OPTIONS", "CLBT_CACHE_DIR",
    "CLBT_TUNING"};
#define NUM_ENVIRONMENT (sizeof environment_names / sizeof environment_names[0])

typedef struct info_options {
  clbt_group_config groups[MAX_GROUPS];
  clbt_multi_table_config config;
} info_options;

/* The device's properties that matter to clbt. */
typedef struct device_facts {
  char selector[CLBT_SELECTOR_SIZE], name[TEXT_SIZE], platform[TEXT_SIZE],
      platform_version[TEXT_SIZE], driver_version[TEXT_SIZE],
      opencl_c_version[TEXT_SIZE], int64_source[64];
  cl_device_type type;
  bool int64;
  size_t max_work_group_size;
  cl_uint compute_units;
  cl_bool unified_memory;
  char build_options[CLBT_BUILD_OPTIONS_SIZE]; /* the handle's settings */
  char cache_dir[CLBT_CACHE_DIR_SIZE];
} device_facts;

/* Everything info prints, gathered before it is printed. */
typedef struct gathered {
  const info_options *options;
  device_facts device;
  double open_ms, prepare_ms, first_launch_ms; /* the start-up */
  size_t num_programs;
  char programs[MAX_PROGRAMS][CLBT_PROGRAM_OPTIONS_SIZE]; /* oldest first */
  bool device_known, programs_known, started; /* gathered so far */
  char error[4096];                  /* what failed, or "" */
} gathered;

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
  if (!cli_parse_count(text, &block_size) || block_size > UINT32_MAX ||
      (slash && (!cli_parse_count(slash + 1, &kernel_block_size) ||
                 kernel_block_size > UINT32_MAX)))
    return false;
  *group = (clbt_group_config){.block_size = (uint32_t)block_size,
                               .kernel_block_size = (uint32_t)kernel_block_size,
                               .max_num_blocks = 1};
  return true;
}

/* Parses "B,B/K,..." into the config's groups; false if it is not one. */
static bool parse_block_sizes(const char *list, info_options *options) {
  uint32_t count = 0;
  for (const char *item = list;; item += strcspn(item, ",") + 1) {
    if (count == MAX_GROUPS ||
        !parse_group(item, strcspn(item, ","), &options->groups[count++]))
      return false;
    if (item[strcspn(item, ",")] == '\0') break;
  }
  options->config.num_groups = count;
  return true;
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
static const char *read_facts(clbt_device *device, device_facts *facts) {
  cl_device_id id = clbt_device_id(device);
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
  if (clbt_device_build_options(device, facts->build_options,
                                sizeof facts->build_options) != CLBT_SUCCESS ||
      clbt_device_cache_dir(device, facts->cache_dir,
                            sizeof facts->cache_dir) != CLBT_SUCCESS)
    return "the handle's settings";
  return NULL;
}

/* Prepares the config and lists the programs it built, in group order. */
static clbt_status prepare_programs(clbt_device *device, gathered *info) {
  struct timespec start;
  timespec_get(&start, TIME_UTC);
  clbt_status status =
      clbt_multi_table_prepare(device, &info->options->config);
  info->prepare_ms = milliseconds_since(&start);
  size_t count = status ? 0 : clbt_device_program_count(device);
  if (count > MAX_PROGRAMS) count = MAX_PROGRAMS;
  /* The device lists its programs newest first. */
  for (size_t i = 0; i < count && !status; ++i)
    status = clbt_device_program_options(device, i,
                                         info->programs[count - 1 - i],
                                         CLBT_PROGRAM_OPTIONS_SIZE);
  info->num_programs = status ? 0 : count;
  return status;
}

/*
 * Creates a table of the config and times its first slot mapping (an empty
 * batch, which still runs every group's kernel): drivers finish compiling a
 * kernel at its first launch.
 */
static clbt_status time_first_launch(clbt_device *device,
                                     gathered *info) {
  clbt_multi_table *table = NULL;
  clbt_status status =
      clbt_multi_table_create(device, &info->options->config, &table);
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
  info->first_launch_ms = milliseconds_since(&start);
  if (starts) clReleaseMemObject(starts);
  clbt_multi_table_destroy(table);
  return status;
}

/* Fills the report; on failure says what failed in info->error. */
static void gather(gathered *info) {
  struct timespec start;
  timespec_get(&start, TIME_UTC);
  clbt_device *device = NULL;
  clbt_status status = clbt_device_open(NULL, &device);
  info->open_ms = milliseconds_since(&start);
  const char *unread = NULL;
  if (status != CLBT_SUCCESS)
    snprintf(info->error, sizeof info->error,
             "cannot open a device: %s: %s", clbt_status_name(status),
             clbt_last_error());
  else if ((unread = read_facts(device, &info->device)))
    snprintf(info->error, sizeof info->error,
             "cannot read %s of the device", unread);
  else if ((info->device_known = true) &&
           (status = prepare_programs(device, info)) != CLBT_SUCCESS)
    snprintf(info->error, sizeof info->error,
             "cannot prepare the config: %s: %s", clbt_status_name(status),
             clbt_last_error());
  else if ((info->programs_known = true) &&
           (status = time_first_launch(device, info)) != CLBT_SUCCESS)
    snprintf(info->error, sizeof info->error,
             "cannot run the first slot mapping: %s: %s",
             clbt_status_name(status), clbt_last_error());
  else
    info->started = true;
  clbt_device_release(device);
}

/* ---- the report --------------------------------------------------------- */

static uint32_t or_one(uint32_t value) { return value ? value : 1; }

static void add_device(report *root, const device_facts *d) {
  report *device = report_object(root, "device");
  report_string(device, "selector", d->selector);
  report_string(device, "name", d->name);
  report_string(device, "type", cli_type_name(d->type));
  report_string(device, "platform", d->platform);
  report_string(device, "platform_version", d->platform_version);
  report_string(device, "driver_version", d->driver_version);
  report_string(device, "opencl_c_version", d->opencl_c_version);
  report_bool(device, "int64", d->int64);
  report_string(device, "int64_source", d->int64_source);
  report_uint(device, "max_work_group_size", d->max_work_group_size);
  report_uint(device, "compute_units", d->compute_units);
  report_bool(device, "unified_memory", d->unified_memory);
  report *settings = report_object(device, "settings");
  report_string(settings, "build_options",
                d->build_options[0] ? d->build_options : NULL);
  report_string(settings, "cache_dir", d->cache_dir[0] ? d->cache_dir : NULL);
}

static void add_config(report *root, const clbt_multi_table_config *config) {
  report *entry = report_object(root, "config");
  report *groups = report_array(entry, "groups");
  for (uint32_t g = 0; g < config->num_groups; ++g) {
    const clbt_group_config *group = &config->groups[g];
    report *item = report_object(groups, NULL);
    report_uint(item, "block_size", group->block_size);
    report_uint(item, "kernel_block_size", group->kernel_block_size
                                               ? group->kernel_block_size
                                               : group->block_size);
  }
  report_uint(entry, "cp_world_size", or_one(config->cp_world_size));
  report_uint(entry, "cp_rank", config->cp_rank);
  report_uint(entry, "cp_interleave_size", or_one(config->cp_interleave_size));
}

static void add_programs(report *root, const gathered *r) {
  report *programs = report_array(root, "programs");
  for (size_t i = 0; i < r->num_programs; ++i)
    report_string(programs, NULL, r->programs[i]);
}

/*
 * The tuning row the programs were built for (src/base/tuning.c), as the
 * library put it in their options: the GPU's row shapes the kernel's code
 * for a GPU (-DCLBT_GPU=1), the CPU's does not. NULL when none says.
 */
static const char *tuning_row(const gathered *r) {
  for (size_t i = 0; i < r->num_programs; ++i) {
    if (strstr(r->programs[i], " -DCLBT_GPU=1")) return "gpu";
    if (strstr(r->programs[i], " -DCLBT_GPU=0")) return "cpu";
  }
  return NULL;
}

static void add_startup(report *root, const gathered *r) {
  report *startup = report_object(root, "startup");
  report_number(startup, "open_ms", r->open_ms, 1);
  report_number(startup, "prepare_ms", r->prepare_ms, 1);
  report_number(startup, "first_slot_mapping_ms", r->first_launch_ms, 1);
}

/* Everything gathered, in one report; what is unknown is null. */
static report *build_report(const gathered *r) {
  report *root = report_create();
  report_string(root, "version", clbt_version_string());
  if (r->device_known)
    add_device(root, &r->device);
  else
    report_string(root, "device", NULL);
  report *environment = report_object(root, "environment");
  for (size_t i = 0; i < NUM_ENVIRONMENT; ++i)
    report_string(environment, environment_names[i],
                  getenv(environment_names[i]));
  report_string(root, "log_level", clbt_log_level_name(clbt_log_get_level()));
  add_config(root, &r->options->config);
  if (r->programs_known)
    add_programs(root, r);
  else
    report_string(root, "programs", NULL);
  report_string(root, "tuning", r->programs_known ? tuning_row(r) : NULL);
  if (r->started)
    add_startup(root, r);
  else
    report_string(root, "startup", NULL);
  return root;
}

int command_info(int argc, char **argv) {
  static info_options options;
  static gathered info;
  uint64_t cp_world_size = 0, cp_rank = 0, cp_interleave_size = 0; /* 0: 1 */
  const char *block_sizes = "16";
  bool as_json = false;
  const cli_option option_table[] = {
      {"--block-sizes", "LIST",
       "one KV-cache group per item, comma-separated:\n"
       "B, or B/K with K the kernel block size\n(default 16)",
       CLI_TEXT, &block_sizes, 0, 0},
      {"--cp-world-size", "N", "context-parallel ranks (default 1)",
       CLI_COUNT, &cp_world_size, 0, UINT32_MAX},
      {"--cp-rank", "N", "this rank (default 0)", CLI_COUNT, &cp_rank, 0,
       UINT32_MAX},
      {"--cp-interleave-size", "N", "tokens per rank in turn (default 1)",
       CLI_COUNT, &cp_interleave_size, 0, UINT32_MAX},
      CLI_JSON_OPTION(&as_json)};
  const cli_command command = {"info", description, option_table,
                               sizeof option_table / sizeof option_table[0]};
  int parsed = cli_parse(&command, argc, argv);
  if (parsed != CLI_PARSED) return parsed;
  if (!parse_block_sizes(block_sizes, &options))
    return cli_usage_error(&command, "not a list of up to 16 B or B/K sizes:",
                           block_sizes);
  options.config = (clbt_multi_table_config){
      .max_num_reqs = 1, .max_num_batched_tokens = 1,
      .num_groups = options.config.num_groups, .groups = options.groups,
      .cp_world_size = (uint32_t)cp_world_size, .cp_rank = (uint32_t)cp_rank,
      .cp_interleave_size = (uint32_t)cp_interleave_size};
  info.options = &options;
  gather(&info);
  cli_emit(build_report(&info), as_json, info.error);
  return info.error[0] ? 1 : 0;
}
