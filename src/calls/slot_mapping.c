/*
 * The slot-mapping call: each scheduled token's KV-cache slot in every
 * token-mapping group of the scope, work of the step kernel
 * (cl/slot_mapping.cl) without a commit.
 */
#include "calls/slot_mapping.h"

#include "calls/run.h"
#include "device/queue.h"

clbt_status clbt__enqueue_slot_mapping(const clbt__scope *scope,
                                       const clbt__batch *batch,
                                       cl_uint num_events,
                                       const cl_event *wait_list,
                                       cl_event *event) {
  clbt_status status = clbt__check_batch_arguments(scope->first, batch);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, num_events,
                                   wait_list);
  if (status) return status;
  const clbt__call call = {.work = CLBT_WORK_MAP, .batch = *batch};
  return clbt__run(scope, &call, num_events, wait_list, event);
}
