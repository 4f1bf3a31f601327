/*
 * The drivers known to fail on clbt's kernels, each with the driver
 * versions seen to fail and why (docs/reliability.md, "Mesa's rusticl",
 * has the smallest reproducer of each). A version after the last one seen
 * to fail is let through: nothing is known of it.
 */
#include "device/known_drivers.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const struct {
  const char *platform_name; /* the platform's name, exactly */
  const char *device_prefix; /* how its device's name starts */
  int last_major, last_minor; /* the last driver version seen to fail */
  const char *fault;
} faulty_drivers[] = {
    {"rusticl", "llvmpipe", 22, 3,
     "Mesa 22.3's rusticl on llvmpipe crashes (SIGSEGV in LLVM, compiling "
     "the kernel at its first launch) on a kernel that indexes an array in a "
     "by-value argument with a run-time index, as clbt's step kernel reads "
     "its launch record and layout (a later Mesa is untested)"},
};

const char *clbt__known_driver_fault(const char *platform_name,
                                     const char *device_name,
                                     const char *driver_version) {
  int major = 0, minor = 0;
  if (sscanf(driver_version, "%d.%d", &major, &minor) != 2) return NULL;
  for (size_t i = 0; i < sizeof faulty_drivers / sizeof faulty_drivers[0];
       ++i) {
    const char *prefix = faulty_drivers[i].device_prefix;
    bool version_fails =
        major < faulty_drivers[i].last_major ||
        (major == faulty_drivers[i].last_major &&
         minor <= faulty_drivers[i].last_minor);
    if (strcmp(platform_name, faulty_drivers[i].platform_name) == 0 &&
        strncmp(device_name, prefix, strlen(prefix)) == 0 && version_fails)
      return faulty_drivers[i].fault;
  }
  return NULL;
}
