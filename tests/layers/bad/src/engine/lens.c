#include "engine/lens.h"
#include "engine/lens_internal.h"
