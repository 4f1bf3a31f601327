/* The device layer may not read the kernel contract. */
#include "device/queue.h"

#include "cl/contract.h"
