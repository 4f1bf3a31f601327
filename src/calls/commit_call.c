/*
 * The commit call: the changes of the scope's rows below num_reqs (every
 * row of a stale group) moved to the device, as the call's plan says
 * (calls/run.c, engine/commit.c).
 */
#include "calls/commit_call.h"

#include "calls/checks.h"
#include "calls/run.h"

clbt_status clbt__enqueue_commit(const clbt__scope *scope, uint32_t num_reqs,
                                 cl_uint num_events, const cl_event *wait_list,
                                 cl_event *event) {
  clbt_status status =
      clbt__check_commit(scope, num_reqs, num_events, wait_list);
  if (status) return status;
  const clbt__call call = {.commits = true, .commit_rows = num_reqs};
  return clbt__run(scope, &call, num_events, wait_list, event);
}
