/*
 * What every enqueueing call needs of the device's queue: a wait list
 * checked as clEnqueue* would, the sequence every command goes through,
 * and the watch over the commands that took a caller's wait list.
 */
#include "device/queue.h"

#include "base/status.h"
#include "base/tuning.h"

#include <stdlib.h>

clbt_status clbt__check_wait_list(const clbt_device *device, const char *owner,
                                  cl_uint num_events,
                                  const cl_event *wait_list) {
  if ((num_events == 0) != (wait_list == NULL))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "wait_list is %s with num_events %u",
                      wait_list ? "not NULL" : "NULL", (unsigned)num_events);
  /* One query per event, so only when a list is given: OpenCL requires
     CL_INVALID_CONTEXT for another context's event, and PoCL waits on one
     without a word. */
  for (cl_uint i = 0; i < num_events; ++i) {
    cl_context context = NULL;
    if (!wait_list[i])
      return clbt__fail(CLBT_CL_INVALID_EVENT_WAIT_LIST,
                        "wait_list[%u] is NULL", (unsigned)i);
    cl_int error = clGetEventInfo(wait_list[i], CL_EVENT_CONTEXT,
                                  sizeof context, &context, NULL);
    if (error != CL_SUCCESS) return clbt__cl_fail(error, "clGetEventInfo");
    if (context != device->context)
      return clbt__fail(CLBT_CONTEXT_MISMATCH,
                        "wait_list[%u] is an event of another OpenCL context "
                        "than the %s's device",
                        (unsigned)i, owner);
  }
  return CLBT_SUCCESS;
}

/* ---- the watch ---------------------------------------------------------- */

clbt_status clbt__watch_init(clbt__watch *watch) {
  watch->events = NULL;
  watch->capacity = watch->first = watch->reserved = 0;
  atomic_init(&watch->count, 0);
  atomic_init(&watch->failures, 0);
  if (mtx_init(&watch->lock, mtx_plain) != thrd_success)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "cannot make the device's watch lock");
  return CLBT_SUCCESS;
}

static cl_event *watched(clbt__watch *watch, size_t i) {
  return &watch->events[(watch->first + i) % watch->capacity];
}

/* Room for one more watched event, so that adding one after its command
   is enqueued cannot fail. The caller holds the lock. */
static clbt_status reserve(clbt__watch *watch) {
  size_t count = atomic_load(&watch->count);
  if (count + watch->reserved < watch->capacity) {
    ++watch->reserved;
    return CLBT_SUCCESS;
  }
  size_t capacity = watch->capacity ? 2 * watch->capacity : 8;
  cl_event *events = malloc(capacity * sizeof *events);
  if (!events)
    return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                      "no memory to watch %zu commands", capacity);
  for (size_t i = 0; i < count; ++i) events[i] = *watched(watch, i);
  free(watch->events);
  watch->events = events;
  watch->capacity = capacity;
  watch->first = 0;
  ++watch->reserved;
  return CLBT_SUCCESS;
}

/* Locks the watch, or says why not. */
static clbt_status lock(clbt__watch *watch) {
  if (mtx_lock(&watch->lock) == thrd_success) return CLBT_SUCCESS;
  return clbt__fail(CLBT_CL_OUT_OF_HOST_MEMORY,
                    "mtx_lock failed on the device's watch lock");
}

/*
 * Forgets the oldest watched commands that have ended, counting the failed
 * ones, and stops at the first that has not: the queue is in order, so the
 * rest are behind it. The caller holds the lock.
 */
static clbt_status reap(clbt__watch *watch) {
  while (atomic_load(&watch->count) > 0) {
    cl_event oldest = *watched(watch, 0);
    cl_int execution = CL_QUEUED;
    cl_int error = clGetEventInfo(oldest, CL_EVENT_COMMAND_EXECUTION_STATUS,
                                  sizeof execution, &execution, NULL);
    if (error) return clbt__cl_fail(error, "clGetEventInfo");
    if (execution > CL_COMPLETE) break;
    if (execution < 0) atomic_fetch_add(&watch->failures, 1);
    clReleaseEvent(oldest);
    watch->first = (watch->first + 1) % watch->capacity;
    atomic_fetch_sub(&watch->count, 1);
  }
  /* A deep burst of watched commands leaves no large ring behind it. */
  if (atomic_load(&watch->count) == 0 && watch->capacity > CLBT__KEPT_WATCH &&
      watch->reserved == 0) {
    free(watch->events);
    watch->events = NULL;
    watch->capacity = watch->first = 0;
  }
  return CLBT_SUCCESS;
}

clbt_status clbt__watch_failures(clbt_device *device, uint64_t *failures) {
  clbt__watch *watch = &device->watch;
  clbt_status status = CLBT_SUCCESS;
  if (atomic_load(&watch->count) > 0) {
    status = lock(watch);
    if (!status) {
      status = reap(watch);
      mtx_unlock(&watch->lock);
    }
  }
  *failures = atomic_load(&watch->failures);
  return status;
}

void clbt__watch_free(clbt__watch *watch) {
  size_t count = atomic_load(&watch->count);
  for (size_t i = 0; i < count; ++i) {
    cl_event event = *watched(watch, i);
    cl_int error = clWaitForEvents(1, &event);
    if (error && error != CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
      clbt__cl_fail(error, "clWaitForEvents");
    clReleaseEvent(event);
  }
  free(watch->events);
  mtx_destroy(&watch->lock);
}

/* ---- sequences ---------------------------------------------------------- */

clbt__sequence clbt__sequence_start(clbt_device *device, cl_uint num_events,
                                    const cl_event *wait_list,
                                    bool wants_event) {
  return (clbt__sequence){device, num_events, wait_list, wants_event, NULL,
                          0};
}

/* What the next command takes, and what becomes of its event. */
typedef struct command {
  cl_uint num_events;
  const cl_event *wait_list;
  bool needs_event; /* it gets one */
  bool watched;     /* the watch keeps it until it ends */
  cl_event event;
} command;

/*
 * Readies the next command: the caller's wait list, once, and whether it
 * needs an event (keeps: the caller keeps it). PoCL 3.1 aborts when a
 * failure reaches a command whose event nobody holds and another command
 * follows it, and a failure runs down the queue from command to command:
 * so a command is watched (kept until it ends) when it takes a wait list,
 * or while a watched command before it has not been seen to end. The watch
 * stays locked until enqueued(), so that no other thread's command slips in
 * between the decision and the enqueue; room for the event is made first.
 */
static clbt_status take(clbt__sequence *sequence, bool keeps, command *next) {
  clbt__watch *watch = &sequence->device->watch;
  clbt_status status = lock(watch);
  if (status) return status;
  status = reap(watch);
  if (status) {
    mtx_unlock(&watch->lock);
    return status;
  }
  next->num_events = sequence->num_events;
  next->wait_list = sequence->wait_list;
  next->watched = next->num_events > 0 || atomic_load(&watch->count) > 0;
  next->needs_event = keeps || sequence->wants_event || next->watched;
  next->event = NULL;
  status = next->watched ? reserve(watch) : CLBT_SUCCESS;
  if (status) mtx_unlock(&watch->lock);
  return status;
}

/* The event a command's enqueue hands back, or NULL for none. */
static cl_event *event_of(command *next) {
  return next->needs_event ? &next->event : NULL;
}

/*
 * A reference to a command's event for one more holder: the one its
 * enqueue made (*spare) the first time, a retained one after that.
 */
static cl_int another_reference(cl_event event, bool *spare) {
  if (*spare) {
    *spare = false;
    return CL_SUCCESS;
  }
  return clRetainEvent(event);
}

/*
 * After a command was enqueued (error: its enqueue's result): its event
 * goes to each holder the rule gave it, in the order that matters most
 * should a reference fail: the caller keeping host memory alive (the
 * enqueue's own reference, which cannot fail), the watch (in the room
 * take() made), the call's last event. The watch is unlocked; the wait
 * list is spent.
 */
static clbt_status enqueued(clbt__sequence *sequence, cl_int error,
                            const char *call, command *next, cl_event *kept) {
  clbt__watch *watch = &sequence->device->watch;
  cl_event event = next->event;
  bool spare = event != NULL;
  cl_int held = CL_SUCCESS;
  if (!error && kept) *kept = (another_reference(event, &spare), event);
  if (next->watched) {
    --watch->reserved;
    held = error ? CL_SUCCESS : another_reference(event, &spare);
    if (!error && !held) {
      *watched(watch, atomic_load(&watch->count)) = event;
      atomic_fetch_add(&watch->count, 1);
    }
  }
  mtx_unlock(&watch->lock);
  if (error) return clbt__cl_fail(error, call);
  ++sequence->commands;
  sequence->num_events = 0;
  sequence->wait_list = NULL;
  if (!held && sequence->wants_event) {
    held = another_reference(event, &spare);
    if (!held) {
      if (sequence->last) clReleaseEvent(sequence->last);
      sequence->last = event;
    }
  }
  if (spare) clReleaseEvent(event);
  return held ? clbt__cl_fail(held, "clRetainEvent") : CLBT_SUCCESS;
}

clbt_status clbt__sequence_write(clbt__sequence *sequence, cl_mem buffer,
                                 size_t offset, size_t size, const void *host,
                                 cl_event *kept) {
  command next;
  clbt_status status = take(sequence, kept != NULL, &next);
  if (status) return status;
  cl_int error = clEnqueueWriteBuffer(
      sequence->device->queue, buffer, CL_FALSE, offset, size, host,
      next.num_events, next.wait_list, event_of(&next));
  return enqueued(sequence, error, "clEnqueueWriteBuffer", &next, kept);
}

clbt_status clbt__sequence_fill(clbt__sequence *sequence, cl_mem buffer,
                                const void *pattern, size_t pattern_size,
                                size_t offset, size_t size) {
  command next;
  clbt_status status = take(sequence, false, &next);
  if (status) return status;
  cl_int error = clEnqueueFillBuffer(
      sequence->device->queue, buffer, pattern, pattern_size, offset, size,
      next.num_events, next.wait_list, event_of(&next));
  return enqueued(sequence, error, "clEnqueueFillBuffer", &next, NULL);
}

clbt_status clbt__sequence_kernel(clbt__sequence *sequence, cl_kernel kernel,
                                  size_t global_size, size_t local_size) {
  command next;
  clbt_status status = take(sequence, false, &next);
  if (status) return status;
  cl_int error = clEnqueueNDRangeKernel(
      sequence->device->queue, kernel, 1, NULL, &global_size, &local_size,
      next.num_events, next.wait_list, event_of(&next));
  return enqueued(sequence, error, "clEnqueueNDRangeKernel", &next, NULL);
}

clbt_status clbt__sequence_read(clbt__sequence *sequence, cl_mem buffer,
                                size_t size, void *host) {
  /* PoCL 3.1 hangs in a blocking command whose wait list failed. */
  if (sequence->num_events > 0)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "a blocking read takes no wait list");
  command next;
  clbt_status status = take(sequence, false, &next);
  if (status) return status;
  cl_int error = clEnqueueReadBuffer(sequence->device->queue, buffer, CL_TRUE,
                                     0, size, host, 0, NULL, event_of(&next));
  return enqueued(sequence, error, "clEnqueueReadBuffer", &next, NULL);
}

/* A marker after the wait list, for a call that enqueued nothing. */
static clbt_status enqueue_marker(clbt__sequence *sequence) {
  command next;
  clbt_status status = take(sequence, false, &next);
  if (status) return status;
  next.needs_event = true;
  cl_int error = clEnqueueMarkerWithWaitList(
      sequence->device->queue, next.num_events, next.wait_list, &next.event);
  return enqueued(sequence, error, "clEnqueueMarkerWithWaitList", &next,
                  NULL);
}

clbt_status clbt__sequence_end(clbt__sequence *sequence, clbt_status status,
                               cl_event *event) {
  /* Nothing took the wait list, or nothing was enqueued to hand back. */
  if (!status && (sequence->num_events > 0 || (event && !sequence->last)))
    status = enqueue_marker(sequence);
  cl_event last = sequence->last;
  sequence->last = NULL;
  if (status || !event) {
    if (last) clReleaseEvent(last);
    return status;
  }
  *event = last;
  return CLBT_SUCCESS;
}

clbt_status clbt__read_counter(clbt_device *device, cl_mem buffer,
                               uint32_t *count) {
  cl_uint value = 0;
  clbt__sequence sequence = clbt__sequence_start(device, 0, NULL, false);
  clbt_status status = clbt__sequence_end(
      &sequence, clbt__sequence_read(&sequence, buffer, sizeof value, &value),
      NULL);
  if (!status) *count = value;
  return status;
}

clbt_status clbt__reset_counter(clbt_device *device, cl_mem buffer) {
  const cl_uint zero = 0;
  clbt__sequence sequence = clbt__sequence_start(device, 0, NULL, false);
  return clbt__sequence_end(
      &sequence,
      clbt__sequence_fill(&sequence, buffer, &zero, sizeof zero, 0,
                          sizeof zero),
      NULL);
}

clbt_status clbt__create_counter(clbt_device *device, cl_mem *counter) {
  cl_int error = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(device->context, CL_MEM_READ_WRITE,
                                 sizeof(cl_uint), NULL, &error);
  if (error) return clbt__cl_fail(error, "clCreateBuffer");
  clbt_status status = clbt__reset_counter(device, buffer);
  if (status) {
    clReleaseMemObject(buffer);
    return status;
  }
  *counter = buffer;
  return CLBT_SUCCESS;
}
