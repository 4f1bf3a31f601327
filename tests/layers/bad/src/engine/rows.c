#include "engine/rows.h"
