/* The library's version, compiled in from the header it was built with. */
#include "clbt/clbt.h"

unsigned clbt_version_number(void) { return CLBT_VERSION_NUMBER; }

const char *clbt_version_string(void) { return CLBT_VERSION_STRING; }
