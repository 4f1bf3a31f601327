/* An engine header that reaches a call's machinery. */
#include "engine/commit.h"
