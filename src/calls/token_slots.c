/*
 * Token slots: an index matrix of request-local token indices translated
 * into the KV-cache slots the slot mapping gave those tokens, one section
 * of the caller's output per token-mapping group. It is work of the step
 * kernel (cl/token_slots.cl) in a call of its own: the indices it
 * translates (a sparse-attention indexer's top-k) are made by the model's
 * forward, after the step that wrote the slot mapping. What is here is
 * its call (its checks are in checks.c).
 */
#include "calls/token_slots.h"

#include "calls/checks.h"
#include "calls/run.h"

clbt_status clbt__enqueue_token_slots(const clbt__scope *scope,
                                      const clbt_token_slots_request *request,
                                      cl_uint num_events,
                                      const cl_event *wait_list,
                                      cl_event *event) {
  clbt_status status =
      clbt__check_token_slots(scope, request, num_events, wait_list);
  if (status) return status;
  const clbt__call call = {
      .work = CLBT_WORK_TOKEN_SLOTS,
      .batch = {.num_reqs = request->num_reqs,
                .query_start_loc = request->query_start_loc,
                .num_tokens = request->num_rows,
                .idx_mapping = request->idx_mapping,
                .indices_per_row = request->indices_per_row,
                .token_indices = request->token_indices,
                .token_slots = request->token_slots}};
  return clbt__run(scope, &call, num_events, wait_list, event);
}
