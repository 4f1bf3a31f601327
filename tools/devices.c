/*
 * clbt devices: every OpenCL platform and device with the CLBT_DEVICE
 * selector that picks it, and the device clbt selects now; as text, or as
 * JSON with --json.
 */
#include "cli.h"
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLATFORMS 64

static const char usage_devices[] =
    "usage: clbt devices [--json]\n"
    "\n"
    "Lists every OpenCL platform and device with the CLBT_DEVICE selector that\n"
    "picks it; '*' marks the device clbt selects now. Exits 1 when no device\n"
    "is selected.\n"
    "\n"
    "  --json   print one JSON object: platforms (index, name, version,\n"
    "           devices: selector, type, name, selected), selected, error\n";

/* Writes the listing as text or as JSON, as it is walked. */
typedef struct listing {
  bool as_json;
  clbt_json json;
} listing;

static void begin_platform(listing *l, cl_uint index, const char *name,
                           const char *version) {
  if (!l->as_json) {
    printf("platform %u: %s\n", (unsigned)index, name);
    return;
  }
  clbt_json_object_begin(&l->json, NULL);
  clbt_json_uint(&l->json, "index", index);
  clbt_json_string(&l->json, "name", name);
  clbt_json_string(&l->json, "version", version);
  clbt_json_array_begin(&l->json, "devices");
}

static void end_platform(listing *l, cl_uint num_devices) {
  if (!l->as_json) {
    if (num_devices == 0) printf("    (no devices)\n");
    return;
  }
  clbt_json_array_end(&l->json);
  clbt_json_object_end(&l->json);
}

static void show_device(listing *l, cl_device_id device, bool selected) {
  char name[256] = "?", selector[64] = "?";
  cl_device_type type = 0;
  clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  if (clbt_device_selector(device, selector, sizeof selector) != CLBT_SUCCESS)
    snprintf(selector, sizeof selector, "?");
  if (!l->as_json) {
    printf("  %c %-24s %-11s %s\n", selected ? '*' : ' ', selector,
           clbt_cli_type_name(type), name);
    return;
  }
  clbt_json_object_begin(&l->json, NULL);
  clbt_json_string(&l->json, "selector", selector);
  clbt_json_string(&l->json, "type", clbt_cli_type_name(type));
  clbt_json_string(&l->json, "name", name);
  clbt_json_bool(&l->json, "selected", selected);
  clbt_json_object_end(&l->json);
}

/* Lists one platform's devices; returns 1 when they cannot be listed. */
static int list_platform(listing *l, cl_platform_id platform, cl_uint index,
                         cl_device_id selected) {
  char name[256] = "?", version[256] = "?";
  cl_uint count = 0;
  clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
  clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof version - 1, version,
                    NULL);
  begin_platform(l, index, name, version);
  /* A platform without devices answers CL_DEVICE_NOT_FOUND. */
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &count) !=
      CL_SUCCESS)
    count = 0;
  cl_device_id *devices = count ? malloc(count * sizeof *devices) : NULL;
  int result = 0;
  if (count && (!devices || clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count,
                                           devices, NULL) != CL_SUCCESS)) {
    fprintf(stderr, "clbt: cannot list the devices of platform %u\n",
            (unsigned)index);
    count = 0;
    result = 1;
  }
  for (cl_uint d = 0; d < count; ++d)
    show_device(l, devices[d], devices[d] == selected);
  free(devices);
  end_platform(l, count);
  return result;
}

static int parse_devices(int argc, char **argv, bool *as_json) {
  for (int i = 0; i < argc; ++i) {
    if (strcmp(argv[i], "--json") != 0)
      return clbt_cli_usage_error(usage_devices, "unknown option", argv[i]);
    *as_json = true;
  }
  return 0;
}

int clbt_command_devices(int argc, char **argv) {
  if (clbt_cli_wants_help(argc, argv)) return printf("%s", usage_devices), 0;
  listing l = {.as_json = false};
  int parsed = parse_devices(argc, argv, &l.as_json);
  if (parsed) return parsed;

  clbt_device *device = NULL;
  clbt_status status = clbt_device_open(NULL, &device);
  cl_device_id selected = clbt_device_id(device);
  char selector[64] = "";
  if (selected) clbt_device_selector(selected, selector, sizeof selector);
  cl_uint num_platforms = 0;
  cl_platform_id platforms[MAX_PLATFORMS];
  if (clGetPlatformIDs(MAX_PLATFORMS, platforms, &num_platforms) != CL_SUCCESS)
    num_platforms = 0;
  if (num_platforms > MAX_PLATFORMS) num_platforms = MAX_PLATFORMS;

  int result = 0;
  if (l.as_json) {
    clbt_json_begin(&l.json, stdout);
    clbt_json_array_begin(&l.json, "platforms");
  } else if (num_platforms == 0) {
    printf("no OpenCL platforms\n");
  }
  for (cl_uint p = 0; p < num_platforms; ++p)
    result |= list_platform(&l, platforms[p], p, selected);
  char error[4096] = "";
  if (status != CLBT_SUCCESS) {
    snprintf(error, sizeof error, "%s: %s", clbt_status_name(status),
             clbt_last_error());
    fprintf(stderr, "clbt: no device selected: %s\n", error);
    result = 1;
  }
  if (l.as_json) {
    clbt_json_array_end(&l.json);
    clbt_json_string(&l.json, "selected", selected ? selector : NULL);
    clbt_json_string(&l.json, "error", error[0] ? error : NULL);
    clbt_json_end(&l.json);
  }
  clbt_device_release(device);
  return result;
}
