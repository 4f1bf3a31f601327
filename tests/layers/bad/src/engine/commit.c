#include "base/errors.h"
#include "engine/commit.h"
