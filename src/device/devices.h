/*
 * The device layer: device handles, their programs, the on-disk program
 * cache and what every enqueue needs of the queue (see base.h for the
 * layers).
 */
#ifndef CLBT_DEVICES_H
#define CLBT_DEVICES_H

#include "base.h"
#include "tuning.h"

#include <stdatomic.h>
#include <threads.h>

/* ---- devices (device.c, device_select.c, device_settings.c,
        driver_lock.c), programs (program.c) ------------------------------ */

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

/*
 * The commands enqueued on a device's queue that took a caller's wait
 * list, each kept (retained) until it is seen to end (queue.c). PoCL 3.1
 * aborts the process when a failed wait list reaches a command whose event
 * nobody holds; and a command that fails that way fails every command
 * queued behind it, whichever table it is for, without a word. So clbt
 * keeps these events alone, and counts those that ended in error: a table
 * whose commands were behind one rewrites itself (docs/design.md,
 * "Events").
 */
typedef struct clbt__watch {
  mtx_t lock;              /* guards the ring */
  cl_event *events;        /* a ring, oldest first: [first, first + count) */
  size_t capacity, first;
  size_t reserved;         /* room taken for commands being enqueued */
  atomic_size_t count;     /* read without the lock to skip it when 0 */
  atomic_uint_fast64_t failures; /* watched commands seen to fail */
} clbt__watch;

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
  clbt__watch watch;
};

/*
 * Takes the process-wide driver lock (driver_lock.c), held around listing
 * platforms and devices and around creating and freeing a handle's context
 * and queue: CLBT_SUCCESS, or CLBT_CL_OUT_OF_HOST_MEMORY when mtx_lock
 * fails, and then the lock is not held. Not recursive.
 */
clbt_status clbt__driver_lock(void);
void clbt__driver_unlock(void);

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
 * names where the selector came from, for messages ("CLBT_DEVICE"). The
 * caller holds the driver lock.
 */
clbt_status clbt__select_device(const char *selector, const char *source,
                                cl_platform_id *platform, cl_device_id *device);

/* Frees every cached program of a device (when the device is freed). */
void clbt__programs_release(clbt_device *device);

/* The kernel sources in cl/. */
typedef enum clbt__source {
  CLBT__SOURCE_STEP,    /* cl/contract.h, then the parts CMakeLists.txt lists */
  CLBT__SOURCE_KV_CACHE /* cl/kv_cache.h, kv_cache.cl */
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

/* ---- the caller's buffers a handle has checked (known_buffers.c) -------- */

/*
 * The caller's buffers a handle (a table engine, a KV cache) has checked
 * lately, with their sizes: a steady loop passes the same few every step,
 * and asking the driver about each costs two calls a buffer a step. The
 * handle keeps a reference to each, so that a released buffer's handle
 * cannot come back as another buffer's while it is known.
 */
typedef struct clbt__known_buffer {
  cl_mem buffer;
  size_t size;
} clbt__known_buffer;
typedef struct clbt__known_buffers {
  clbt__known_buffer buffers[CLBT__KNOWN_BUFFERS];
  uint32_t next; /* the oldest, replaced next */
} clbt__known_buffers;

/*
 * A buffer's size, from the known buffers, or else asked of the driver,
 * its context checked against the device's (CLBT_CONTEXT_MISMATCH: "<name>
 * belongs to another OpenCL context than the <owner>'s device"), and
 * recorded in place of the oldest.
 */
clbt_status clbt__known_buffer_size(const clbt_device *device,
                                    clbt__known_buffers *known, cl_mem buffer,
                                    const char *name, const char *owner,
                                    size_t *size);

/* Releases every known buffer. */
void clbt__known_buffers_release(clbt__known_buffers *known);

/* ---- the queue (queue.c) ------------------------------------------------ */

/*
 * Checks an event wait list as clEnqueue* would, before anything runs:
 * num_events and wait_list agree, and every event is one of the device's
 * context (CLBT_CONTEXT_MISMATCH, naming its index).
 */
clbt_status clbt__check_wait_list(const clbt_device *device,
                                  cl_uint num_events,
                                  const cl_event *wait_list);

/* A device's watch, empty (device.c calls these). */
clbt_status clbt__watch_init(clbt__watch *watch);
/* Waits for every watched command, then frees the watch. */
void clbt__watch_free(clbt__watch *watch);

/*
 * *failures: how many watched commands have been seen to end in error,
 * after looking at the oldest ones still watched (without waiting), a count
 * that only grows. A table that saw another count before has had commands
 * behind a failed one. Fails only when a status query does.
 */
clbt_status clbt__watch_failures(clbt_device *device, uint64_t *failures);

/*
 * Commands enqueued in order on a device's queue as one call. Every
 * enqueue of the library goes through one (clbt__sequence_write, _fill,
 * _kernel, _read), which is where the rule for events lives: a command
 * gets an event only when it takes the caller's wait list (the device
 * watches it), when it reads host memory that must outlive it (the caller
 * keeps it), or when the caller of the call asked for the last command's
 * event. The first command waits for the caller's wait list; the queue is
 * in order, so that orders everything after it.
 */
typedef struct clbt__sequence {
  clbt_device *device;
  cl_uint num_events;        /* the caller's wait list, until a command */
  const cl_event *wait_list; /* takes it */
  bool wants_event;          /* the call hands back its last command's */
  cl_event last;             /* that event, owned; NULL when none yet */
  uint32_t commands;         /* enqueued so far */
} clbt__sequence;

/* A sequence for a call with this wait list; with wants_event it keeps the
   last command's event for clbt__sequence_end. */
clbt__sequence clbt__sequence_start(clbt_device *device, cl_uint num_events,
                                    const cl_event *wait_list,
                                    bool wants_event);

/*
 * Enqueues a write of host memory to a buffer. With kept, *kept receives
 * the write's event (the caller releases it): the memory must stay until
 * it ends.
 */
clbt_status clbt__sequence_write(clbt__sequence *sequence, cl_mem buffer,
                                 size_t offset, size_t size, const void *host,
                                 cl_event *kept);
/* Enqueues a fill of [offset, offset + size) of a buffer with a pattern. */
clbt_status clbt__sequence_fill(clbt__sequence *sequence, cl_mem buffer,
                                const void *pattern, size_t pattern_size,
                                size_t offset, size_t size);
/* Enqueues a one-dimensional kernel launch. */
clbt_status clbt__sequence_kernel(clbt__sequence *sequence, cl_kernel kernel,
                                  size_t global_size, size_t local_size);
/* Reads a buffer into host memory, waiting for it: a call's only command,
   with no wait list. */
clbt_status clbt__sequence_read(clbt__sequence *sequence, cl_mem buffer,
                                size_t size, void *host);

/*
 * Ends the sequence of a call that ends in status. On success, hands the
 * caller (when event is not NULL) the last command's event, or a marker
 * after the wait list when nothing was enqueued (a marker too when the
 * wait list was never taken, so that it is watched). Releases what it
 * holds either way, and returns status or the marker's failure.
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
