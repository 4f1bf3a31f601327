/*
 * What every enqueueing call needs of the device's queue: a launch
 * geometry for the device, a wait list checked as clEnqueue* would, and a
 * marker for a call that has nothing to enqueue.
 */
#include "devices.h"
#include "../cl/contract.h"

/* Work a CPU work-group takes before another compute unit joins. */
#define CLBT__CPU_ITEMS_PER_GROUP 32768

/* PoCL pays a large fixed cost per work-group and runs each group's
   work-items as a loop: work-groups of one work-item, walking long runs
   with unit-stride loops that vectorise, are cheapest; a second one pays
   only with tens of thousands of items (docs/benchmarks.md). */
static bool is_cpu(const clbt_device *device) {
  return device->properties.type & CL_DEVICE_TYPE_CPU;
}

size_t clbt__local_size(const clbt_device *device, size_t kernel_max_group) {
  size_t limit = kernel_max_group < CLBT_MAX_WORK_GROUP_SIZE
                     ? kernel_max_group
                     : CLBT_MAX_WORK_GROUP_SIZE;
  size_t local = 1;
  while (!is_cpu(device) && local * 2 <= limit) local *= 2;
  return local;
}

void clbt__geometry(const clbt_device *device, size_t kernel_max_group,
                    size_t items, size_t *global_size, size_t *local_size) {
  size_t local = clbt__local_size(device, kernel_max_group);
  size_t groups = (items + local - 1) / local;
  if (is_cpu(device)) {
    size_t units = device->properties.compute_units;
    groups = items / CLBT__CPU_ITEMS_PER_GROUP;
    groups = groups < 1 ? 1 : groups > units ? units : groups;
  }
  *local_size = local;
  *global_size = (groups ? groups : 1) * local;
}

clbt_status clbt__check_wait_list(const clbt_device *device,
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
                        "than the table's device",
                        (unsigned)i);
  }
  return CLBT_SUCCESS;
}

clbt_status clbt__enqueue_marker(cl_command_queue queue, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event) {
  clbt_status status = CLBT_SUCCESS;
  if (event || num_events)
    CLBT__CL_TRY(clEnqueueMarkerWithWaitList(queue, num_events, wait_list,
                                             event),
                 status, done);
done:
  return status;
}

void clbt__sequence_next(clbt__sequence *sequence, cl_uint *num_events,
                         const cl_event **wait_list) {
  *num_events = sequence->num_events;
  *wait_list = sequence->wait_list;
  sequence->num_events = 0;
  sequence->wait_list = NULL;
}

clbt_status clbt__sequence_done(clbt__sequence *sequence, cl_event event,
                                bool shared) {
  clbt_status status = CLBT_SUCCESS;
  if (shared) CLBT__CL_TRY(clRetainEvent(event), status, done);
  if (sequence->last) clReleaseEvent(sequence->last);
  sequence->last = event;
done:
  return status;
}

clbt_status clbt__sequence_end(clbt__sequence *sequence, clbt_status status,
                               cl_event *event) {
  cl_event last = sequence->last;
  sequence->last = NULL;
  if (status) {
    if (last) clReleaseEvent(last);
    return status;
  }
  if (!last)
    return clbt__enqueue_marker(sequence->queue, sequence->num_events,
                                sequence->wait_list, event);
  if (event)
    *event = last;
  else
    clReleaseEvent(last);
  return CLBT_SUCCESS;
}
