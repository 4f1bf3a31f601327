/* A base module that includes a layer above it. */
#include "engine/rows.h"
