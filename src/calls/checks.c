/*
 * The device calls' checks (checks.h). Every call checks all its arguments
 * before it enqueues anything, so a refused call changes nothing. Each
 * call's list is one function, at the end, in the order docs/semantics.md
 * gives, the first failure deciding the status; a check that two calls
 * make is written once, above them. A caller's buffer the engine has
 * checked before costs no driver call (device/known_buffers.c); the wait
 * list is checked as clEnqueue* would check it (device/queue.c).
 */
#include "calls/checks.h"

#include "base/status.h"
#include "device/known_buffers.h"
#include "device/queue.h"
#include "engine/engine.h"
#include "engine/group.h"

#include <stdint.h>
#include <stdio.h>

/* ---- a batch ------------------------------------------------------------ */

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

/*
 * A caller's buffer belongs to the table's context and holds `needed`
 * bytes, which count_name's value count asks for.
 */
static clbt_status check_buffer(const clbt__scope *scope, cl_mem buffer,
                                const char *name, size_t needed,
                                const char *count_name, uint32_t count) {
  size_t size = 0;
  clbt_status status = clbt__known_buffer_size(
      scope->first->device, scope->known, buffer, name, "table", &size);
  if (!status && size < needed)
    status = clbt__fail(CLBT_BUFFER_TOO_SMALL,
                        "%s holds %zu bytes; %s %u needs %zu", name, size,
                        count_name, (unsigned)count, needed);
  return status;
}

/*
 * An output that is not the table's own storage (nor a part of it, as the
 * buffers clbt hands out are): a kernel's write there would change
 * committed rows behind the host's back, and no commit would repair them.
 * The buffer is one check_buffer has just made known.
 */
static clbt_status check_not_storage(const clbt__scope *scope, cl_mem buffer,
                                     const char *name) {
  cl_mem storage = clbt__engine_storage(scope->engine);
  if (buffer == storage ||
      clbt__known_buffer_parent(scope->known, buffer) == storage)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "%s is part of the table's own storage (a buffer "
                      "clbt hands out); pass a buffer of your own",
                      name);
  return CLBT_SUCCESS;
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

/* A per-request int32 buffer, when given: num_reqs entries. */
static clbt_status check_per_request(const clbt__scope *scope, cl_mem buffer,
                                     const char *name, uint32_t num_reqs) {
  if (!buffer) return CLBT_SUCCESS;
  return check_buffer(scope, buffer, name, (size_t)num_reqs * sizeof(int32_t),
                      "num_reqs", num_reqs);
}

/* A batch's arguments, in the slot mapping's order (checks.h). */
static clbt_status check_batch_arguments(const clbt__scope *scope,
                                         const clbt__batch *batch) {
  const clbt_table *table = scope->first;
  if (!batch->query_start_loc)
    return clbt__fail(CLBT_NULL_ARGUMENT, "query_start_loc is NULL");
  if (!batch->positions && batch->num_tokens > 0)
    return clbt__fail(CLBT_NULL_ARGUMENT,
                      "positions is NULL with num_tokens %u",
                      (unsigned)batch->num_tokens);
  clbt_status status =
      clbt__check_batch(table, batch->num_reqs, batch->num_tokens);
  if (!status)
    status = clbt__check_padding(table, "num_reqs_padded", batch->num_reqs,
                                 batch->num_reqs_padded);
  if (!status)
    status = check_buffer(scope, batch->query_start_loc, "query_start_loc",
                          ((size_t)batch->num_reqs + 1) * sizeof(int32_t),
                          "num_reqs", batch->num_reqs);
  if (!status && batch->positions)
    status = check_buffer(scope, batch->positions, "positions",
                          (size_t)batch->num_tokens * sizeof(int64_t),
                          "num_tokens", batch->num_tokens);
  if (!status)
    status =
        check_per_request(scope, batch->seq_lens, "seq_lens", batch->num_reqs);
  if (!status)
    status = check_per_request(scope, batch->idx_mapping, "idx_mapping",
                               batch->num_reqs);
  return status;
}

/*
 * One table (a clbt_table call, on a table of its own or on a group of a
 * multi-group table) must hold the rows the call reads: pages, a
 * token-mapping group's, for an export or token slots (pages true), or
 * states, a NONE group's, for state slots. `what` names what the call
 * writes ("export"). A scope of every group of a multi-group table takes
 * the groups that hold them.
 */
static clbt_status check_one_table(const clbt__scope *scope, bool pages,
                                   const char *what) {
  if (!scope->one_table || clbt__maps_tokens(scope->first) == pages)
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

/* ---- a step's flags, an export, state slots, token slots --------------- */

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

/*
 * A group's worst-case page count must fit the int32 indptr, and the dense
 * page table's rows of the batch its region (max_num_reqs x width). The
 * first is the export's bound, not the table's: a table that never exports
 * may be larger, so it is checked here rather than at creation.
 */
static clbt_status check_pages(const clbt_table *group,
                               const clbt__batch *batch) {
  const clbt__table_layout *layout = &group->layout;
  uint64_t capacity = (uint64_t)layout->max_num_reqs * layout->width;
  if (capacity > INT32_MAX)
    return clbt__fail(CLBT_SIZE_OVERFLOW,
                      "max_num_reqs %u x width %u pages exceed INT32_MAX, "
                      "the int32 indptr's bound",
                      (unsigned)layout->max_num_reqs, (unsigned)layout->width);
  if (!(batch->export_flags & CLBT_EXPORT_DENSE)) return CLBT_SUCCESS;
  uint32_t pitch =
      batch->dense_row_pitch ? batch->dense_row_pitch : layout->width;
  uint32_t rows =
      batch->num_reqs_padded ? batch->num_reqs_padded : batch->num_reqs;
  if ((uint64_t)pitch * rows > capacity)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "dense_row_pitch %u x num_reqs_padded %u entries exceed "
                      "the page table's max_num_reqs %u x width %u",
                      (unsigned)pitch, (unsigned)rows,
                      (unsigned)layout->max_num_reqs, (unsigned)layout->width);
  return CLBT_SUCCESS;
}

/* Every exported group's pages (check_pages). */
static clbt_status check_export_groups(const clbt__scope *scope,
                                       const clbt__batch *batch) {
  clbt_status status = CLBT_SUCCESS;
  for (uint32_t g = scope->begin; !status && g < scope->end; ++g)
    if (clbt__maps_tokens(scope->groups[g])) {
      status = check_pages(scope->groups[g], batch);
      if (status && !scope->one_table)
        clbt__prefix_error(status, "groups[%u]", (unsigned)g);
    }
  return status;
}

/* The batch's export flags, which the messages call flags_name, are
   CLBT_EXPORT_* flags, and dense_row_pitch comes with CLBT_EXPORT_DENSE. */
static clbt_status check_export_flags(const clbt__batch *batch,
                                      const char *flags_name) {
  const uint32_t known = CLBT_EXPORT_CONTEXT | CLBT_EXPORT_DENSE;
  if (batch->export_flags & ~known)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "%s 0x%x has bits other than CLBT_EXPORT_CONTEXT and "
                      "CLBT_EXPORT_DENSE",
                      flags_name, (unsigned)batch->export_flags);
  if (batch->dense_row_pitch && !(batch->export_flags & CLBT_EXPORT_DENSE))
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "dense_row_pitch %u is set without CLBT_EXPORT_DENSE "
                      "in %s",
                      (unsigned)batch->dense_row_pitch, flags_name);
  return CLBT_SUCCESS;
}

/* A step's state slots: one table maps no tokens, and `count`
   ids a request fit every NONE group's width. */
static clbt_status check_state_slots(const clbt__scope *scope,
                                     uint32_t count) {
  clbt_status status = check_one_table(scope, false, "state slots");
  if (status) return status;
  for (uint32_t index = scope->begin; index < scope->end; ++index) {
    const clbt_table *group = scope->groups[index];
    /* The region holds a row's worth a request. */
    if (!clbt__maps_tokens(group) && count > group->layout.width)
      return scope->one_table
                 ? clbt__fail(CLBT_INVALID_ARGUMENT,
                              "step->num_state_slots %u exceeds the table's "
                              "width %u, its state slots' room a request",
                              (unsigned)count, (unsigned)group->layout.width)
                 : clbt__fail(CLBT_INVALID_ARGUMENT,
                              "step->num_state_slots %u exceeds groups[%u]'s "
                              "width %u, its state slots' room a request",
                              (unsigned)count, (unsigned)index,
                              (unsigned)group->layout.width);
  }
  return CLBT_SUCCESS;
}

/* A token-slots request's counts against the table's bounds and the
   kernel's. */
static clbt_status check_token_counts(const clbt__scope *scope,
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

/* A token-slots request's buffers: their sizes and context. */
static clbt_status check_token_buffers(
    const clbt__scope *scope, const clbt_token_slots_request *request) {
  uint32_t entries = request->num_rows * request->indices_per_row;
  uint32_t sections = clbt__scope_token_sections(scope);
  clbt_status status =
      check_buffer(scope, request->query_start_loc, "query_start_loc",
                   ((size_t)request->num_reqs + 1) * sizeof(int32_t),
                   "num_reqs", request->num_reqs);
  if (!status && request->idx_mapping)
    status = check_buffer(scope, request->idx_mapping, "idx_mapping",
                          (size_t)request->num_reqs * sizeof(int32_t),
                          "num_reqs", request->num_reqs);
  if (status || entries == 0) return status;
  status = check_buffer(scope, request->token_indices, "token_indices",
                        (size_t)entries * sizeof(int32_t),
                        "num_rows x indices_per_row", entries);
  char sections_of[64];
  snprintf(sections_of, sizeof sections_of,
           "%u section%s of num_rows x indices_per_row", (unsigned)sections,
           sections == 1 ? "" : "s");
  if (!status && sections)
    status = check_buffer(scope, request->token_slots, "token_slots",
                          (size_t)sections * entries * sizeof(int32_t),
                          sections_of, entries);
  if (!status && sections)
    status = check_not_storage(scope, request->token_slots, "token_slots");
  if (!status && sections)
    status =
        clbt__check_writable(scope->known, request->token_slots, "token_slots");
  return status;
}

/* ---- each call's list --------------------------------------------------- */

clbt_status clbt__check_commit(const clbt__scope *scope, uint32_t num_reqs,
                               cl_uint num_events, const cl_event *wait_list) {
  clbt_status status = clbt__check_batch(scope->first, num_reqs, 0);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, "table", num_events,
                                   wait_list);
  return status;
}

clbt_status clbt__check_slot_mapping(const clbt__scope *scope,
                                     const clbt__batch *batch,
                                     cl_uint num_events,
                                     const cl_event *wait_list) {
  clbt_status status = check_batch_arguments(scope, batch);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, "table", num_events,
                                   wait_list);
  return status;
}

clbt_status clbt__check_export(const clbt__scope *scope,
                               const clbt__batch *batch, cl_uint num_events,
                               const cl_event *wait_list) {
  clbt_status status = check_one_table(scope, true, "export");
  if (!status) status = check_batch_arguments(scope, batch);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, "table", num_events,
                                   wait_list);
  if (!status) status = check_export_flags(batch, "request->flags");
  if (!status) status = check_export_groups(scope, batch);
  return status;
}

/* The export's flags and pitch ask for parts of an export. */
static clbt_status check_step_export(const clbt_step *step,
                                     const clbt__batch *batch) {
  if (step->flags & CLBT_STEP_EXPORT)
    return check_export_flags(batch, "step->export_flags");
  if (step->export_flags || step->dense_row_pitch)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->export_flags 0x%x and dense_row_pitch %u are set "
                      "without CLBT_STEP_EXPORT",
                      (unsigned)step->export_flags,
                      (unsigned)step->dense_row_pitch);
  return CLBT_SUCCESS;
}

/* The state slots' count and null block ask for state slots. */
static clbt_status check_step_state_slots(const clbt__scope *scope,
                                          const clbt_step *step,
                                          const clbt__batch *batch) {
  if (step->flags & CLBT_STEP_STATE_SLOTS)
    return check_state_slots(scope, batch->num_state_slots);
  if (step->num_state_slots || step->state_null_block)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "step->num_state_slots %u and state_null_block %d are "
                      "set without CLBT_STEP_STATE_SLOTS",
                      (unsigned)step->num_state_slots,
                      (int)step->state_null_block);
  return CLBT_SUCCESS;
}

/* A dummy run has no requests and no tokens, only padding. */
static clbt_status check_dummy(const clbt__scope *scope,
                               const clbt__batch *batch) {
  if (batch->num_reqs || batch->num_tokens)
    return clbt__fail(CLBT_INVALID_ARGUMENT,
                      "a CLBT_STEP_DUMMY step has num_reqs %u and num_tokens "
                      "%u; both must be 0",
                      (unsigned)batch->num_reqs, (unsigned)batch->num_tokens);
  return clbt__check_padding(scope->first, "num_reqs_padded", 0,
                             batch->num_reqs_padded);
}

clbt_status clbt__check_step(const clbt__scope *scope, const clbt_step *step,
                             const clbt__batch *batch, cl_uint num_events,
                             const cl_event *wait_list) {
  bool exports = step->flags & CLBT_STEP_EXPORT;
  clbt_status status = clbt__check_step_flags(step->flags, true);
  if (!status) status = check_step_export(step, batch);
  if (!status) status = check_step_state_slots(scope, step, batch);
  if (!status && exports) status = check_one_table(scope, true, "export");
  if (!status)
    status = step->flags & CLBT_STEP_DUMMY
                 ? check_dummy(scope, batch)
                 : check_batch_arguments(scope, batch);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, "table", num_events,
                                   wait_list);
  if (!status && exports) status = check_export_groups(scope, batch);
  return status;
}

clbt_status clbt__check_token_slots(const clbt__scope *scope,
                                    const clbt_token_slots_request *request,
                                    cl_uint num_events,
                                    const cl_event *wait_list) {
  clbt_status status = check_one_table(scope, true, "token slots");
  if (status) return status;
  if (!request->query_start_loc)
    return clbt__fail(CLBT_NULL_ARGUMENT, "request->query_start_loc is NULL");
  status = check_token_counts(scope, request);
  if (!status) status = check_token_buffers(scope, request);
  if (!status)
    status = clbt__check_wait_list(scope->first->device, "table", num_events,
                                   wait_list);
  return status;
}
