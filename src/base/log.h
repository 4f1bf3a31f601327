/* Logging (log.c): the level from CLBT_LOG or the host, and the destination. */
#ifndef CLBT_LOG_H
#define CLBT_LOG_H

#include "base/status.h"

#include <stdbool.h>

/* True when a message of this level would be delivered. */
bool clbt__log_enabled(clbt_log_level level);

/* Formats a message and delivers it when its level is enabled. */
void clbt__log(clbt_log_level level, const char *format, ...)
    CLBT__PRINTF(2, 3);

#endif /* CLBT_LOG_H */
