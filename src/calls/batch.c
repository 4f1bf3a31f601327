/*
 * The checks every call shares (batch.h): a batch's sizes against the
 * table's bounds and its buffers' sizes and context, which every
 * slot-mapping and export call, device or host, makes before anything; a
 * step's flags; and a group named alone that holds the wrong kind of rows
 * for its call.
 */
#include "calls/batch.h"

#include "base/status.h"
#include "device/known_buffers.h"
#include "engine/engine.h"
#include "engine/group.h"

#include <string.h>

clbt_status clbt__check_batch(const clbt_table *table, uint32_t num_reqs,
                              uint32_t num_tokens) {
  if (num_reqs > table->layout.max_num_reqs)
    return clbt__fail(CLBT_TOO_MANY_REQUESTS,
                      "num_reqs %u exceeds max_num_reqs %u", (unsigned)num_reqs,
                      (unsigned)table->layout.max_num_reqs);
  if (num_tokens > table->layout.max_num_batched_tokens)
    return clbt__fail(CLBT_TOO_MANY_TOKENS,
                      "num_tokens %u exceeds max_num_batched_tokens %u",
                      (unsigned)num_tokens,
                      (unsigned)table->layout.max_num_batched_tokens);
  return CLBT_SUCCESS;
}

clbt_status clbt__check_buffer(clbt_table *table, cl_mem buffer,
                               const char *name, size_t needed,
                               const char *count_name, uint32_t count) {
  size_t size = 0;
  clbt_status status =
      clbt__known_buffer_size(table->device, &table->engine->known, buffer,
                              name, "table", &size);
  if (!status && size < needed)
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "%s holds %zu bytes; %s %u needs %zu", name, size,
                        count_name, (unsigned)count, needed);
  return status;
}

/* A per-request int32 buffer, when given: num_reqs entries. */
static clbt_status check_per_request(clbt_table *table, cl_mem buffer,
                                     const char *name, uint32_t num_reqs) {
  if (!buffer) return CLBT_SUCCESS;
  return clbt__check_buffer(table, buffer, name,
                            (size_t)num_reqs * sizeof(int32_t), "num_reqs",
                            num_reqs);
}

clbt_status clbt__check_batch_arguments(clbt_table *table,
                                        const clbt__batch *batch) {
  if (!batch->query_start_loc)
    return clbt__fail(CLBT_NULL_ARGUMENT, "query_start_loc is NULL");
  if (!batch->positions && batch->num_tokens > 0)
    return clbt__fail(CLBT_NULL_ARGUMENT, "positions is NULL with num_tokens %u",
                      (unsigned)batch->num_tokens);
  clbt_status status =
      clbt__check_batch(table, batch->num_reqs, batch->num_tokens);
  if (!status)
    status = clbt__check_padding(table, "num_reqs_padded", batch->num_reqs,
                                 batch->num_reqs_padded);
  if (!status)
    status = clbt__check_buffer(table, batch->query_start_loc, "query_start_loc",
                          ((size_t)batch->num_reqs + 1) * sizeof(int32_t),
                          "num_reqs", batch->num_reqs);
  if (!status && batch->positions)
    status = clbt__check_buffer(table, batch->positions, "positions",
                          (size_t)batch->num_tokens * sizeof(int64_t),
                          "num_tokens", batch->num_tokens);
  if (!status)
    status = check_per_request(table, batch->seq_lens, "seq_lens",
                               batch->num_reqs);
  if (!status)
    status = check_per_request(table, batch->idx_mapping, "idx_mapping",
                               batch->num_reqs);
  return status;
}

clbt_status clbt__check_padding(const clbt_table *table, const char *name,
                                uint32_t num_reqs, uint32_t padded) {
  if (padded && padded < num_reqs)
    return clbt__fail(CLBT_INVALID_ARGUMENT, "%s %u is below num_reqs %u",
                      name, (unsigned)padded, (unsigned)num_reqs);
  if (padded > table->layout.max_num_reqs)
    return clbt__fail(CLBT_TOO_MANY_REQUESTS, "%s %u exceeds max_num_reqs %u",
                      name, (unsigned)padded,
                      (unsigned)table->layout.max_num_reqs);
  return CLBT_SUCCESS;
}

clbt_status clbt__check_step_flags(uint32_t flags, bool on_device) {
  const uint32_t known = CLBT_STEP_GATHER | CLBT_STEP_EXPORT;
  if (on_device &&
      (flags & ~(known | CLBT_STEP_DUMMY | CLBT_STEP_STATE_SLOTS)))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->flags 0x%x has bits other than CLBT_STEP_GATHER, "
                      "CLBT_STEP_EXPORT, CLBT_STEP_DUMMY and "
                      "CLBT_STEP_STATE_SLOTS",
                      (unsigned)flags);
  if (!on_device && (flags & ~known))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->flags 0x%x has bits other than CLBT_STEP_GATHER "
                      "and CLBT_STEP_EXPORT",
                      (unsigned)flags);
  return CLBT_SUCCESS;
}

clbt_status clbt__check_alone(const clbt__scope *scope, bool pages,
                              const char *what) {
  if (!scope->alone || clbt__maps_tokens(scope->first) == pages)
    return CLBT_SUCCESS;
  if (pages)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "the table's slot_mode is CLBT_SLOT_MODE_NONE: its rows "
                      "hold states, not pages, and it has no %s",
                      what);
  return clbt__fail(CLBT_INVALID_ARGUMENT,
                    "the table's slot_mode is CLBT_SLOT_MODE_TOKEN_TO_KV_SLOT: "
                    "its rows hold pages, and it has no %s",
                    what);
}
