/* Faults: above the engine, a call's machinery reached through an engine
   header, and the engine's fields read. */
#include "engine/lens.h"

static int stored(struct table *table) { return table->engine->storage; }
