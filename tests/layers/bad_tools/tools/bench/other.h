/* On a circle with list.h. */
#include "bench/list.h"
void other_run(void);
