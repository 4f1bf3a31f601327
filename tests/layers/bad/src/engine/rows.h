#include "engine/commit.h"
