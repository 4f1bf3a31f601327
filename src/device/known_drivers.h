/* OpenCL drivers known to fail on clbt's kernels (known_drivers.c). */
#ifndef CLBT_KNOWN_DRIVERS_H
#define CLBT_KNOWN_DRIVERS_H

/*
 * Why a device of this platform name, device name and CL_DRIVER_VERSION
 * cannot run clbt's kernels, as a sentence for a message, or NULL when no
 * fault of its driver is known. clbt refuses such a device when it opens
 * or wraps it (CLBT_UNSUPPORTED_DEVICE), rather than let the driver crash
 * at the first launch.
 */
const char *clbt__known_driver_fault(const char *platform_name,
                                     const char *device_name,
                                     const char *driver_version);

#endif /* CLBT_KNOWN_DRIVERS_H */
