/* The bench floor reaching up to the commands. */
#include "cli/cli.h"
