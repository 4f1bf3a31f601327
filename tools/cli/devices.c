/*
 * clbt devices: every OpenCL platform and device with the CLBT_DEVICE
 * selector that picks it, and the device clbt selects now; as text, or as
 * JSON with --json.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "report.h"

#define MAX_PLATFORMS 64

static const char description[] =
    "Lists every OpenCL platform (index, name, version) and its devices\n"
    "(selector, type, name, selected) with the CLBT_DEVICE selector that\n"
    "picks each; 'selected' marks the device clbt selects now. Exits 1 when\n"
    "no device is selected.\n";

static void add_device(report *devices, cl_device_id device, bool selected) {
  char name[256] = "?", selector[CLBT_SELECTOR_SIZE] = "?";
  cl_device_type type = 0;
  clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  if (clbt_device_selector(device, selector, sizeof selector) != CLBT_SUCCESS)
    snprintf(selector, sizeof selector, "?");
  report *entry = report_object(devices, NULL);
  report_string(entry, "selector", selector);
  report_string(entry, "type", cli_type_name(type));
  report_string(entry, "name", name);
  report_bool(entry, "selected", selected);
}

/* Adds one platform and its devices; returns 1 when they cannot be listed. */
static int add_platform(report *platforms, cl_platform_id platform,
                        cl_uint index, cl_device_id selected) {
  char name[256] = "?", version[256] = "?";
  cl_uint count = 0;
  clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
  clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof version - 1, version,
                    NULL);
  report *entry = report_object(platforms, NULL);
  report_uint(entry, "index", index);
  report_string(entry, "name", name);
  report_string(entry, "version", version);
  report *devices = report_array(entry, "devices");
  /* A platform without devices answers CL_DEVICE_NOT_FOUND. */
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &count) !=
      CL_SUCCESS)
    count = 0;
  cl_device_id *ids = count ? malloc(count * sizeof *ids) : NULL;
  int result = 0;
  if (count && (!ids || clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids,
                                       NULL) != CL_SUCCESS)) {
    fprintf(stderr, "clbt: cannot list the devices of platform %u\n",
            (unsigned)index);
    count = 0;
    result = 1;
  }
  for (cl_uint d = 0; d < count; ++d)
    add_device(devices, ids[d], ids[d] == selected);
  free(ids);
  return result;
}

int command_devices(int argc, char **argv) {
  bool as_json = false;
  const cli_option options[] = {CLI_JSON_OPTION(&as_json)};
  const cli_command command = {"devices", description, options, 1};
  int parsed = cli_parse(&command, argc, argv);
  if (parsed != CLI_PARSED) return parsed;

  clbt_device *device = NULL;
  clbt_status status = clbt_device_open(NULL, &device);
  cl_device_id selected = clbt_device_id(device);
  char selector[CLBT_SELECTOR_SIZE] = "";
  if (selected) clbt_device_selector(selected, selector, sizeof selector);
  cl_uint num_platforms = 0;
  cl_platform_id platforms[MAX_PLATFORMS];
  if (clGetPlatformIDs(MAX_PLATFORMS, platforms, &num_platforms) != CL_SUCCESS)
    num_platforms = 0;
  if (num_platforms > MAX_PLATFORMS) num_platforms = MAX_PLATFORMS;

  report *root = report_create();
  report *listing = report_array(root, "platforms");
  int result = 0;
  for (cl_uint p = 0; p < num_platforms; ++p)
    result |= add_platform(listing, platforms[p], p, selected);
  char error[4096] = "";
  if (status != CLBT_SUCCESS) {
    snprintf(error, sizeof error, "no device selected: %s: %s",
             clbt_status_name(status), clbt_last_error());
    result = 1;
  }
  report_string(root, "selected", selected ? selector : NULL);
  cli_emit(root, as_json, error);
  clbt_device_release(device);
  return result;
}
