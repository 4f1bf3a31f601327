/*
 * The device layer: device handles, their programs, the on-disk program
 * cache and what every enqueue needs of the queue (see base.h for the
 * layers).
 */
#ifndef CLBT_DEVICES_H
#define CLBT_DEVICES_H

#include "base.h"

#include <stdatomic.h>
#include <threads.h>

/* ---- devices (device.c, device_select.c, device_settings.c), programs
        (program.c) ------------------------------------------------------- */

typedef struct clbt__program_entry clbt__program_entry;

/* What the library needs to know of a device, read once when it opens. */
typedef struct clbt__device_properties {
  cl_device_type type;
  cl_uint compute_units;
  size_t max_work_group_size;
  cl_ulong local_mem_size;
  size_t base_address_alignment;  /* bytes; where sub-buffers may start */
  size_t max_parameter_size;      /* bytes all of a kernel's arguments take */
} clbt__device_properties;

struct clbt_device {
  atomic_uint references; /* the caller's one, plus one per table */
  cl_context context;
  cl_device_id id;
  cl_command_queue queue;
  clbt__device_properties properties;
  mtx_t programs_lock;            /* guards programs and the settings */
  clbt__program_entry *programs;  /* built programs, keyed by options */
  /* The settings (device_settings.c); "": none. */
  char build_options[CLBT_BUILD_OPTIONS_SIZE]; /* appended to every build's */
  char cache_dir[CLBT_CACHE_DIR_SIZE];         /* the on-disk program cache */
};

/* Takes a reference for a table that uses the device. */
void clbt__device_retain(clbt_device *device);

/*
 * Takes the device's programs_lock: CLBT_SUCCESS, or
 * CLBT_CL_OUT_OF_HOST_MEMORY (logged as an error) when mtx_lock fails,
 * and then the lock is not held.
 */
clbt_status clbt__device_lock(clbt_device *device);

/*
 * Gives a new handle the environment's settings (CLBT_BUILD_OPTIONS,
 * CLBT_CACHE_DIR); CLBT_INVALID_ARGUMENT for a value too long to keep.
 */
clbt_status clbt__device_settings_init(clbt_device *device);

/*
 * Finds the device a selector picks (NULL or "": the default rule). source
 * names where the selector came from, for messages ("CLBT_DEVICE").
 */
clbt_status clbt__select_device(const char *selector, const char *source,
                                cl_platform_id *platform, cl_device_id *device);

/* Frees every cached program of a device (when the device is freed). */
void clbt__programs_release(clbt_device *device);

/* The kernel sources in cl/. */
typedef enum clbt__source {
  CLBT__SOURCE_SLOT_MAPPING,
  CLBT__SOURCE_EXPORT
} clbt__source;

/*
 * The bytes a source's specific options take at most, with their NUL: eight
 * groups of five numbers of at most ten digits and two flags, and the rest,
 * take about 660.
 * With clbt's common options and the device's build options they fit in
 * CLBT_PROGRAM_OPTIONS_SIZE (program.c checks).
 */
#define CLBT__SPECIFIC_OPTIONS_SIZE 704

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

/* One kernel argument: its index, size and value, as clSetKernelArg takes
   them (a NULL value for a __local argument). */
typedef struct clbt__kernel_arg {
  cl_uint index;
  size_t size;
  const void *value;
} clbt__kernel_arg;

/* Sets count arguments of a kernel, stopping at the first that fails. */
clbt_status clbt__set_kernel_args(cl_kernel kernel,
                                  const clbt__kernel_arg *args, size_t count);

/* ---- the queue (queue.c) ------------------------------------------------ */

/*
 * The launch geometry for `items` work-items of a kernel whose own limit is
 * kernel_max_group: one item per work-item on a GPU, one work-group on a
 * CPU (docs/design.md says why).
 */
void clbt__geometry(const clbt_device *device, size_t kernel_max_group,
                    size_t items, size_t *global_size, size_t *local_size);

/* clbt__geometry's work-group size, for a kernel that picks its own
   number of work-groups. */
size_t clbt__local_size(const clbt_device *device, size_t kernel_max_group);

/*
 * Checks an event wait list as clEnqueue* would, before anything runs:
 * num_events and wait_list agree, and every event is one of the device's
 * context (CLBT_CONTEXT_MISMATCH, naming its index).
 */
clbt_status clbt__check_wait_list(const clbt_device *device,
                                  cl_uint num_events,
                                  const cl_event *wait_list);

/*
 * For a call with no work to enqueue: a marker that honours the wait list
 * and hands back the event asked for; nothing when neither is given.
 */
clbt_status clbt__enqueue_marker(cl_command_queue queue, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event);

/*
 * Commands enqueued in order on one queue as one call: the first waits
 * for the caller's wait list, and the last one's event is what the call
 * hands back.
 */
typedef struct clbt__sequence {
  cl_command_queue queue;
  cl_uint num_events;        /* the caller's wait list, until a command */
  const cl_event *wait_list; /* takes it */
  cl_event last;             /* the last command's event, owned; or NULL */
} clbt__sequence;

/* Takes the wait list for the next command: the caller's, once. */
void clbt__sequence_next(clbt__sequence *sequence, cl_uint *num_events,
                         const cl_event **wait_list);
/*
 * Records the event of the command just enqueued; the sequence takes the
 * reference, or with shared a reference of its own.
 */
clbt_status clbt__sequence_done(clbt__sequence *sequence, cl_event event,
                                bool shared);
/*
 * Ends the sequence of a call that ends in status. On success, hands the
 * caller (when event is not NULL) the last command's event, or a marker
 * after the wait list when nothing was enqueued. Releases what it holds
 * either way, and returns status or the marker's failure.
 */
clbt_status clbt__sequence_end(clbt__sequence *sequence, clbt_status status,
                               cl_event *event);

/* ---- the on-disk program cache (binary_cache.c) ------------------------- */

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

#endif /* CLBT_DEVICES_H */
