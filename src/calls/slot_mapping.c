/*
 * The slot-mapping call: each scheduled token's KV-cache slot in every
 * token-mapping group of the scope, work of the step kernel
 * (cl/slot_mapping.cl) without a commit.
 */
#include "calls/slot_mapping.h"

#include "calls/checks.h"
#include "calls/run.h"

clbt_status clbt__enqueue_slot_mapping(const clbt__scope *scope,
                                       const clbt__batch *batch,
                                       cl_uint num_events,
                                       const cl_event *wait_list,
                                       cl_event *event) {
  clbt_status status =
      clbt__check_slot_mapping(scope, batch, num_events, wait_list);
  if (status) return status;
  const clbt__call call = {.work = CLBT_WORK_MAP, .batch = *batch};
  return clbt__run(scope, &call, num_events, wait_list, event);
}
