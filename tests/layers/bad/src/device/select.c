#include "queue.h"
