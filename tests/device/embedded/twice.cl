/* Includes part.cl, which root.cl included before. */
#pragma once
#include "part.cl"

static int twice_value(void) { return 2 * part_value(); }
