/*
 * The clbt tool's one argument parser. A command describes its options in
 * a table (name, value, help, where the value goes); the parser reads the
 * command line against it, answers --help with a usage generated from the
 * same table, and reports a bad command line the same way for every
 * command.
 */
#ifndef TOOL_CLI_H
#define TOOL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "clbt/clbt.h"
#include "report.h"

/* The exit status of a command line the tool does not accept. */
#define CLI_EXIT_USAGE 2
/* What cli_parse returns when the command should run. */
#define CLI_PARSED (-1)

typedef enum cli_kind {
  CLI_FLAG,  /* no value; sets a bool */
  CLI_COUNT, /* a whole decimal number in [min, max]; sets a uint64_t */
  CLI_TEXT   /* any value; sets a const char * to it */
} cli_kind;

typedef struct cli_option {
  const char *name;  /* "--runs" */
  const char *value; /* the value's name in the usage ("N"); NULL: a flag */
  const char *help;  /* what it does; '\n' starts another line */
  cli_kind kind;
  void *into;
  uint64_t min, max; /* CLI_COUNT only */
} cli_option;

/* The --json flag of every command that prints a report. */
#define CLI_JSON_OPTION(into)                                                  \
  {                                                                            \
    "--json", NULL, "print one JSON object instead of text", CLI_FLAG, (into), \
        0, 0                                                                   \
  }

typedef struct cli_command {
  const char *name;        /* "bench" */
  const char *description; /* the usage's paragraph, lines ending in '\n' */
  const cli_option *options;
  size_t num_options;
} cli_command;

/*
 * Reads argv (the arguments after the command's name) into the options.
 * Returns CLI_PARSED; or 0 after printing the usage to stdout when an
 * argument is --help or -h; or CLI_EXIT_USAGE after a usage error.
 */
int cli_parse(const cli_command *command, int argc, char **argv);

/* Prints text and a newline, starting each further line with indent
   spaces, so that it lines up under its first line. */
void cli_print_indented(const char *text, int indent, FILE *out);

/* The usage: synopsis, description, one entry per option. */
void cli_print_usage(const cli_command *command, FILE *out);

/*
 * Prints "clbt: <problem> '<what>'" (or "clbt: <problem>" when what is
 * NULL) and a blank line to stderr.
 */
void cli_print_problem(const char *problem, const char *what);

/* The problem and the usage, to stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_command *command, const char *problem,
                    const char *what);

/*
 * A command's last step: adds "error" (error, or null when it is NULL or
 * "") to root, writes root to stdout as JSON or text, frees it, and
 * repeats a non-empty error on stderr as "clbt: <error>".
 */
void cli_emit(report *root, bool as_json, const char *error);

/* Parses a whole decimal number without a sign. */
bool cli_parse_count(const char *text, uint64_t *value);

/* "gpu", "cpu", "accelerator" or "other". */
const char *cli_type_name(cl_device_type type);

#endif /* TOOL_CLI_H */
