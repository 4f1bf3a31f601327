/* Helpers the clbt tool's commands share (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool clbt_cli_wants_help(int argc, char **argv) {
  for (int i = 0; i < argc; ++i)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      return true;
  return false;
}

int clbt_cli_usage_error(const char *usage, const char *problem,
                         const char *what) {
  if (what)
    fprintf(stderr, "clbt: %s '%s'\n\n%s", problem, what, usage);
  else
    fprintf(stderr, "clbt: %s\n\n%s", problem, usage);
  return CLBT_EXIT_USAGE;
}

bool clbt_cli_parse_count(const char *text, uint64_t *value) {
  char *end = NULL;
  errno = 0;
  unsigned long long parsed = strtoull(text, &end, 10);
  if (errno || end == text || *end != '\0' || text[0] == '-') return false;
  *value = parsed;
  return true;
}

const char *clbt_cli_type_name(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}
