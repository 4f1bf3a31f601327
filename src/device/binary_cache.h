/* The on-disk program cache (binary_cache.c). */
#ifndef CLBT_BINARY_CACHE_H
#define CLBT_BINARY_CACHE_H

#include "clbt/clbt.h"

#include <stdbool.h>

/* A cache directory, then "/<16 hex digits>.clbin" (binary_cache.c checks). */
#define CLBT__CACHE_PATH_SIZE (CLBT_CACHE_DIR_SIZE + 24)

/* Where the program cache keeps one program, and the key that names it. */
typedef struct clbt__cache_entry {
  char path[CLBT__CACHE_PATH_SIZE];
  uint64_t key;
} clbt__cache_entry;

/*
 * Finds the entry for a program built from source with options on device,
 * in the device's cache directory; the caller holds programs_lock. Returns
 * false when the device's cache is off or the entry cannot be named
 * (logged as a warning).
 */
bool clbt__binary_cache_locate(const clbt_device *device, const char *source,
                               size_t length, const char *options,
                               clbt__cache_entry *entry);

/*
 * Returns the entry's program, created from its binary and built with
 * options, or NULL when there is no entry or it is unusable: damaged,
 * another key's, or refused by the driver; an unusable entry is deleted
 * and logged as a warning. Never fails otherwise: NULL means "build from
 * source".
 */
cl_program clbt__binary_cache_load(const clbt_device *device,
                                   const clbt__cache_entry *entry,
                                   const char *options);

/*
 * Writes a built program's binary to the entry through a temporary file
 * and a rename, creating missing directories. A failure is logged as a
 * warning and otherwise ignored.
 */
void clbt__binary_cache_store(cl_program program,
                              const clbt__cache_entry *entry);

#endif /* CLBT_BINARY_CACHE_H */
