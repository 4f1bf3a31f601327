/* A fault: above the engine, an engine's internal header included. */
#include "engine/lens_internal.h"
