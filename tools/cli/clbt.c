/* The clbt command-line tool: finds the command and runs it. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"

static const struct {
  const char *name, *summary;
  int (*run)(int argc, char **argv);
} commands[] = {
    {"devices",
     "list OpenCL devices, the selector of each, and the one\n"
     "selected now (CLBT_DEVICE, else the first GPU, else the\n"
     "first device)",
     command_devices},
    {"info",
     "the library version, the selected device's properties, the\n"
     "settings clbt reads from the environment, and the programs\n"
     "a table config needs",
     command_info},
    {"selftest",
     "check random row operations and slot mappings on the\n"
     "selected device against the host reference",
     command_selftest},
    {"bench",
     "time slot mapping, commits, multi-group launches and row\n"
     "operations on the selected device",
     command_bench},
};
#define NUM_COMMANDS (sizeof commands / sizeof commands[0])

static void print_usage(FILE *out) {
  fputs("usage: clbt <command> [options]\n\ncommands:\n", out);
  for (size_t i = 0; i < NUM_COMMANDS; ++i) {
    fprintf(out, "  %-9s  ", commands[i].name);
    cli_print_indented(commands[i].summary, 13, out);
  }
  fputs("\nRun 'clbt <command> --help' for a command's options.\n", out);
}

static int usage_error(const char *problem, const char *what) {
  cli_print_problem(problem, what);
  print_usage(stderr);
  return CLI_EXIT_USAGE;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage_error("no command given", NULL);
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
      strcmp(name, "help") == 0)
    return print_usage(stdout), 0;
  for (size_t i = 0; i < NUM_COMMANDS; ++i)
    if (strcmp(name, commands[i].name) == 0)
      return commands[i].run(argc - 2, argv + 2);
  return usage_error("unknown command", name);
}
