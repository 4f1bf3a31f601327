/* The process-wide driver lock (driver_lock.c). */
#ifndef CLBT_DRIVER_LOCK_H
#define CLBT_DRIVER_LOCK_H

#include "clbt/clbt.h"

/*
 * Takes the process-wide driver lock, held around listing
 * platforms and devices and around creating and freeing a handle's context
 * and queue: CLBT_SUCCESS, or CLBT_CL_OUT_OF_HOST_MEMORY when mtx_lock
 * fails, and then the lock is not held. Not recursive.
 */
clbt_status clbt__driver_lock(void);
void clbt__driver_unlock(void);

#endif /* CLBT_DRIVER_LOCK_H */
