#include "bench/other.h"
#include "bench/list.h" /* not first */
void list_run(void) {}
