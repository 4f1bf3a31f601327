/*
 * What the clbt tool's commands share: the command entry points, usage
 * errors and option parsing, and the facts about a device they print.
 */
#ifndef CLBT_TOOL_CLI_H
#define CLBT_TOOL_CLI_H

#include "clbt/clbt.h"

#include <stdbool.h>
#include <stdint.h>

/* The exit status of a command line the tool does not accept. */
#define CLBT_EXIT_USAGE 2

/* Each command takes the arguments after its name; returns the exit status. */
int clbt_command_devices(int argc, char **argv);
int clbt_command_info(int argc, char **argv);

/* True when an argument is --help or -h. */
bool clbt_cli_wants_help(int argc, char **argv);

/*
 * Prints "clbt: <problem> '<what>'" (or "clbt: <problem>" when what is
 * NULL) and the usage to stderr; returns CLBT_EXIT_USAGE.
 */
int clbt_cli_usage_error(const char *usage, const char *problem,
                         const char *what);

/* Parses a whole decimal number without a sign. */
bool clbt_cli_parse_count(const char *text, uint64_t *value);

/* "gpu", "cpu", "accelerator" or "other". */
const char *clbt_cli_type_name(cl_device_type type);

#endif /* CLBT_TOOL_CLI_H */
