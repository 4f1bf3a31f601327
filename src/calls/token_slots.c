/*
 * Token slots: an index matrix of request-local token indices translated
 * into the KV-cache slots the slot mapping gave those tokens, one section
 * of the caller's output per token-mapping group. It is work of the step
 * kernel (cl/token_slots.cl) in a call of its own: the indices it
 * translates (a sparse-attention indexer's top-k) are made by the model's
 * forward, after the step that wrote the slot mapping. What is here are
 * its checks and its call.
 */
#include "calls/token_slots.h"

#include "base/status.h"
#include "calls/batch.h"
#include "calls/run.h"
#include "device/queue.h"
#include "engine/group.h"

#include <stdio.h>

/* The request's counts against the table's bounds and the kernel's. */
static clbt_status check_counts(const clbt__scope *scope,
                                const clbt_token_slots_request *request) {
  const clbt_table *first = scope->first;
  uint64_t entries = (uint64_t)request->num_rows * request->indices_per_row;
  clbt_status status = clbt__check_batch(first, request->num_reqs, 0);
  if (status) return status;
  if (request->num_rows > first->layout.max_num_batched_tokens)
    return clbt__fail(CLBT_TOO_MANY_TOKENS,
                      "request->num_rows %u exceeds max_num_batched_tokens %u",
                      (unsigned)request->num_rows,
                      (unsigned)first->layout.max_num_batched_tokens);
  /* The kernel counts entries in 32 bits. */
  if (entries > UINT32_MAX)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "request->num_rows %u x indices_per_row %u exceeds "
                      "UINT32_MAX entries",
                      (unsigned)request->num_rows,
                      (unsigned)request->indices_per_row);
  if (entries && (!request->token_indices || !request->token_slots))
    return clbt__fail(CLBT_NULL_ARGUMENT,
                      "request->%s is NULL with num_rows %u x "
                      "indices_per_row %u entries",
                      !request->token_indices ? "token_indices"
                                              : "token_slots",
                      (unsigned)request->num_rows,
                      (unsigned)request->indices_per_row);
  return CLBT_SUCCESS;
}

/* The request's buffers: their sizes and context. */
static clbt_status check_buffers(const clbt__scope *scope,
                                 const clbt_token_slots_request *request) {
  clbt_table *first = scope->first;
  uint32_t entries = request->num_rows * request->indices_per_row;
  uint32_t sections =
      clbt__token_sections_before(scope, clbt__scope_end_launch(scope));
  clbt_status status = clbt__check_buffer(
      first, request->query_start_loc, "query_start_loc",
      ((size_t)request->num_reqs + 1) * sizeof(int32_t), "num_reqs",
      request->num_reqs);
  if (!status && request->idx_mapping)
    status = clbt__check_buffer(first, request->idx_mapping, "idx_mapping",
                                (size_t)request->num_reqs * sizeof(int32_t),
                                "num_reqs", request->num_reqs);
  if (status || entries == 0) return status;
  status = clbt__check_buffer(first, request->token_indices, "token_indices",
                              (size_t)entries * sizeof(int32_t),
                              "num_rows x indices_per_row", entries);
  char sections_of[64];
  snprintf(sections_of, sizeof sections_of,
           "%u section%s of num_rows x indices_per_row", (unsigned)sections,
           sections == 1 ? "" : "s");
  if (!status && sections)
    status = clbt__check_buffer(first, request->token_slots, "token_slots",
                                (size_t)sections * entries * sizeof(int32_t),
                                sections_of, entries);
  return status;
}

clbt_status clbt__enqueue_token_slots(const clbt__scope *scope,
                                      const clbt_token_slots_request *request,
                                      cl_uint num_events,
                                      const cl_event *wait_list,
                                      cl_event *event) {
  clbt_status status = clbt__check_alone(scope, true, "token slots");
  if (status) return status;
  if (!request->query_start_loc)
    return clbt__fail(CLBT_NULL_ARGUMENT, "request->query_start_loc is NULL");
  status = check_counts(scope, request);
  if (!status) status = check_buffers(scope, request);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, num_events,
                                   wait_list);
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
