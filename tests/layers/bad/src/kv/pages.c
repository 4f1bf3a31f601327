/* A fault: the KV module, beside the engine, includes one of its headers. */
#include "engine/rows.h"
