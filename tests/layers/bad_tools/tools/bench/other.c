#include "bench/other.h"
void other_run(void) {}
