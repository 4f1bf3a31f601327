/*
 * A device handle's state (struct clbt_device), which the device layer's
 * modules share: the OpenCL objects, what clbt reads of the device once,
 * its programs and settings under one lock, and the watch over commands
 * that took a wait list (queue.c keeps it). handle.c holds the reference
 * count and the lock; device.c opens, wraps and releases handles.
 */
#ifndef CLBT_HANDLE_H
#define CLBT_HANDLE_H

#include "clbt/clbt.h"

#include <stdatomic.h>
#include <threads.h>

typedef struct clbt__program_entry clbt__program_entry;

/* What the library needs to know of a device, read once when it opens. */
typedef struct clbt__device_properties {
  cl_device_type type;
  cl_uint compute_units;
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

/* Takes a reference for a table that uses the device. */
void clbt__device_retain(clbt_device *device);

/*
 * Takes the device's programs_lock: CLBT_SUCCESS, or
 * CLBT_CL_OUT_OF_HOST_MEMORY (logged as an error) when mtx_lock fails,
 * and then the lock is not held.
 */
clbt_status clbt__device_lock(clbt_device *device);

#endif /* CLBT_HANDLE_H */
