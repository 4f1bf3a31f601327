/* The clbt tool's argument parser (see cli.h). */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Where the usage wraps. */
#define USAGE_WIDTH 79

static bool wants_help(int argc, char **argv) {
  for (int i = 0; i < argc; ++i)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      return true;
  return false;
}

static const cli_option *find(const cli_command *command, const char *name) {
  for (size_t i = 0; i < command->num_options; ++i)
    if (strcmp(command->options[i].name, name) == 0)
      return &command->options[i];
  return NULL;
}

static int set_count(const cli_command *command, const cli_option *option,
                     const char *text) {
  uint64_t value = 0;
  if (!cli_parse_count(text, &value) || value < option->min ||
      value > option->max) {
    char problem[128];
    snprintf(problem, sizeof problem, "%s takes a count from %llu to %llu, not",
             option->name, (unsigned long long)option->min,
             (unsigned long long)option->max);
    return cli_usage_error(command, problem, text);
  }
  *(uint64_t *)option->into = value;
  return CLI_PARSED;
}

int cli_parse(const cli_command *command, int argc, char **argv) {
  if (wants_help(argc, argv)) return cli_print_usage(command, stdout), 0;
  for (int i = 0; i < argc; ++i) {
    const cli_option *option = find(command, argv[i]);
    if (!option) return cli_usage_error(command, "unknown option", argv[i]);
    if (option->kind == CLI_FLAG) {
      *(bool *)option->into = true;
      continue;
    }
    if (i + 1 >= argc)
      return cli_usage_error(command, "a value is missing after", argv[i]);
    const char *value = argv[++i];
    if (option->kind == CLI_TEXT) {
      *(const char **)option->into = value;
    } else {
      int counted = set_count(command, option, value);
      if (counted != CLI_PARSED) return counted;
    }
  }
  return CLI_PARSED;
}

/* "--runs N" or "--json". */
static void option_synopsis(const cli_option *option, char *out, size_t size) {
  snprintf(out, size, "%s%s%s", option->name, option->value ? " " : "",
           option->value ? option->value : "");
}

void cli_print_usage(const cli_command *command, FILE *out) {
  int indent = fprintf(out, "usage: clbt %s", command->name);
  int column = indent, width = 0;
  char synopsis[128];
  for (size_t i = 0; i < command->num_options; ++i) {
    option_synopsis(&command->options[i], synopsis, sizeof synopsis);
    int length = (int)strlen(synopsis) + 3;
    if (column + length > USAGE_WIDTH) {
      fprintf(out, "\n%*s", indent, "");
      column = indent;
    }
    column += fprintf(out, " [%s]", synopsis);
    if (length - 3 > width) width = length - 3;
  }
  fprintf(out, "\n\n%s", command->description);
  if (command->num_options) fputc('\n', out);
  for (size_t i = 0; i < command->num_options; ++i) {
    option_synopsis(&command->options[i], synopsis, sizeof synopsis);
    fprintf(out, "  %-*s  ", width, synopsis);
    cli_print_indented(command->options[i].help, width + 4, out);
  }
}

void cli_print_indented(const char *text, int indent, FILE *out) {
  for (;;) {
    size_t length = strcspn(text, "\n");
    fprintf(out, "%.*s\n", (int)length, text);
    if (!text[length]) return;
    text += length + 1;
    fprintf(out, "%*s", indent, "");
  }
}

void cli_print_problem(const char *problem, const char *what) {
  if (what)
    fprintf(stderr, "clbt: %s '%s'\n\n", problem, what);
  else
    fprintf(stderr, "clbt: %s\n\n", problem);
}

int cli_usage_error(const cli_command *command, const char *problem,
                    const char *what) {
  cli_print_problem(problem, what);
  cli_print_usage(command, stderr);
  return CLI_EXIT_USAGE;
}

void cli_emit(report *root, bool as_json, const char *error) {
  bool failed = error && error[0];
  report_string(root, "error", failed ? error : NULL);
  (as_json ? report_write_json : report_write_text)(root, stdout);
  report_free(root);
  if (failed) fprintf(stderr, "clbt: %s\n", error);
}

bool cli_parse_count(const char *text, uint64_t *value) {
  char *end = NULL;
  errno = 0;
  unsigned long long parsed = strtoull(text, &end, 10);
  if (errno || end == text || *end != '\0' || text[0] == '-') return false;
  *value = parsed;
  return true;
}

const char *cli_type_name(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}
