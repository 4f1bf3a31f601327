/* A device handle's reference count and its programs' lock (handle.h). */
#include "device/handle.h"

#include "base/status.h"

void clbt__device_retain(clbt_device *device) {
  atomic_fetch_add(&device->references, 1);
}

clbt_status clbt__device_lock(clbt_device *device) {
  if (mtx_lock(&device->programs_lock) != thrd_success)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "mtx_lock failed on the device's programs lock");
  return CLBT_SUCCESS;
}
