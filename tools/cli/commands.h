/*
 * The clbt tool's commands. Each takes the arguments after its name and
 * returns the process's exit status: 0, 1 when what it did failed,
 * CLI_EXIT_USAGE for a command line it does not accept.
 */
#ifndef TOOL_COMMANDS_H
#define TOOL_COMMANDS_H

int command_devices(int argc, char **argv);
int command_info(int argc, char **argv);
int command_selftest(int argc, char **argv);
int command_bench(int argc, char **argv);

#endif /* TOOL_COMMANDS_H */
