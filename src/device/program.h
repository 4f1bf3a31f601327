/*
 * Programs (program.c): each kernel source built once per device and
 * options, and kept in the device handle.
 */
#ifndef CLBT_PROGRAM_H
#define CLBT_PROGRAM_H

#include "clbt/clbt.h"

#include <stdbool.h>
#include <stddef.h>

/* The kernel sources in cl/, each a root part and the parts it includes. */
typedef enum clbt__source {
  CLBT__SOURCE_STEP,      /* cl/step.cl */
  CLBT__SOURCE_KV_CACHE,  /* cl/kv_cache.cl */
  CLBT__SOURCE_ATTENTION  /* cl/attention.cl */
} clbt__source;

/*
 * The bytes a source's specific options take at most, with their NUL:
 * what clbt's common options and the device's build options leave of
 * CLBT_PROGRAM_OPTIONS_SIZE (program.c checks). Each source's options
 * check that their longest form fits (launch.c).
 */
#define CLBT__SPECIFIC_OPTIONS_SIZE 754

/*
 * Returns the program of a source built with clbt's common options,
 * specific_options and the device's build options, building and caching it
 * on the first request; the cache keeps the reference. specific_options
 * are clbt's defines for the source, "-DNAME=VALUE" words separated by
 * spaces (shorter than CLBT__SPECIFIC_OPTIONS_SIZE), which the compiler
 * gets as #define lines in front of the source that no build option can
 * change (program.c). Thread-safe.
 */
clbt_status clbt__program_get(clbt_device *device, clbt__source source,
                              const char *specific_options,
                              cl_program *program);

/*
 * Whether the code of a kernel source (its comments and strings aside)
 * uses the identifier of `length` characters at name: a build option that
 * defined or undefined it could change what a kernel computes.
 */
bool clbt__kernels_use(const char *name, size_t length);

/* Frees every cached program of a device (when the device is freed). */
void clbt__programs_release(clbt_device *device);

#endif /* CLBT_PROGRAM_H */
