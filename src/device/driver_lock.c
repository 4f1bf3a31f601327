/*
 * The process-wide lock around the driver calls that are not safe against
 * each other on every driver (docs/threading.md, "What clbt assumes of the
 * driver"): listing platforms and devices, and creating and freeing a
 * device handle's context and queue. PoCL 3.1 crashes, or lists no
 * platform from then on, when threads list platforms while another frees
 * a context; every other driver call clbt makes may run in any thread.
 */
#include "device/driver_lock.h"

#include "base/status.h"

#include <stdbool.h>
#include <threads.h>

static once_flag setup_once = ONCE_FLAG_INIT;
static bool lock_ready;
static mtx_t driver_lock;

static void setup(void) {
  lock_ready = mtx_init(&driver_lock, mtx_plain) == thrd_success;
}

clbt_status clbt__driver_lock(void) {
  call_once(&setup_once, setup);
  if (!lock_ready || mtx_lock(&driver_lock) != thrd_success)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "mtx_lock failed on the driver lock (the lock around "
                      "listing devices and freeing contexts)");
  return CLBT_SUCCESS;
}

void clbt__driver_unlock(void) { mtx_unlock(&driver_lock); }
