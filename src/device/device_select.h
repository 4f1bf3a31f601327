/* CLBT_DEVICE selectors (device_select.c). */
#ifndef CLBT_DEVICE_SELECT_H
#define CLBT_DEVICE_SELECT_H

#include "clbt/clbt.h"

/*
 * Finds the device a selector picks (NULL or "": the default rule). source
 * names where the selector came from, for messages ("CLBT_DEVICE"). The
 * caller holds the driver lock.
 */
clbt_status clbt__select_device(const char *selector, const char *source,
                                cl_platform_id *platform, cl_device_id *device);

#endif /* CLBT_DEVICE_SELECT_H */
