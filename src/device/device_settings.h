/* A device handle's settings (device_settings.c): build options, the cache
   directory. */
#ifndef CLBT_DEVICE_SETTINGS_H
#define CLBT_DEVICE_SETTINGS_H

#include "clbt/clbt.h"

/*
 * Gives a new handle the environment's settings (CLBT_BUILD_OPTIONS,
 * CLBT_CACHE_DIR); CLBT_INVALID_ARGUMENT for a value too long to keep.
 */
clbt_status clbt__device_settings_init(clbt_device *device);

#endif /* CLBT_DEVICE_SETTINGS_H */
