/* Declares a function of another file, as the old bench.h did. */
#include "bench/other.h"
void list_run(void);
void other_run(void);
