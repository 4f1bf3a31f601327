/*
 * What every enqueue needs of a device's queue (queue.c): the wait-list
 * check, the watch and the sequence every command goes through.
 */
#ifndef CLBT_QUEUE_H
#define CLBT_QUEUE_H

#include "device/handle.h"

#include <stdbool.h>

/*
 * Checks an event wait list as clEnqueue* would, before anything runs:
 * num_events and wait_list agree, and every event is one of the device's
 * context (CLBT_CONTEXT_MISMATCH, naming its index: "... than the
 * <owner>'s device", the owner a "table", a "KV cache" or an
 * "attention").
 */
clbt_status clbt__check_wait_list(const clbt_device *device, const char *owner,
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
 * A counter of the device's (a table's or a KV cache's rejected tokens):
 * one 32-bit word of `buffer`, read waiting for the queue, or set to 0,
 * each a call of its own with no wait list.
 */
clbt_status clbt__read_counter(clbt_device *device, cl_mem buffer,
                               uint32_t *count);
clbt_status clbt__reset_counter(clbt_device *device, cl_mem buffer);

/*
 * Makes such a counter in the device's context, set to 0 by a fill on the
 * in-order queue, so that every kernel enqueued after it counts from 0
 * without waiting for it. *counter is set only on success; fails as
 * clCreateBuffer or clbt__reset_counter does.
 */
clbt_status clbt__create_counter(clbt_device *device, cl_mem *counter);

/*
 * Ends the sequence of a call that ends in status. On success, hands the
 * caller (when event is not NULL) the last command's event, or a marker
 * after the wait list when nothing was enqueued (a marker too when the
 * wait list was never taken, so that it is watched). Releases what it
 * holds either way, and returns status or the marker's failure.
 */
clbt_status clbt__sequence_end(clbt__sequence *sequence, clbt_status status,
                               cl_event *event);

#endif /* CLBT_QUEUE_H */
