/*
 * The device calls' checks (checks.c): each call's whole list, in the
 * order docs/semantics.md gives, the first failure deciding the status;
 * and the checks the host's step shares with them. A call builder checks
 * its arguments with one of these before it makes its call.
 */
#ifndef CLBT_CHECKS_H
#define CLBT_CHECKS_H

#include "calls/run.h"
#include "engine/engine.h"

/* A commit's: num_reqs against max_num_reqs, then the wait list. */
clbt_status clbt__check_commit(const clbt__scope *scope, uint32_t num_reqs,
                               cl_uint num_events, const cl_event *wait_list);

/*
 * A slot mapping's: the batch's arguments against the table's bounds and
 * context (query_start_loc and positions given, num_reqs and num_tokens,
 * num_reqs_padded, then each buffer's context and size: query_start_loc,
 * positions, seq_lens, idx_mapping), then the wait list.
 */
clbt_status clbt__check_slot_mapping(const clbt__scope *scope,
                                     const clbt__batch *batch,
                                     cl_uint num_events,
                                     const cl_event *wait_list);

/*
 * An export's: one table (a clbt_table call) maps tokens, the batch's
 * arguments (as a slot mapping's), the wait list, the export flags
 * (request->flags), every exported group's pages.
 */
clbt_status clbt__check_export(const clbt__scope *scope,
                               const clbt__batch *batch, cl_uint num_events,
                               const cl_event *wait_list);

/*
 * A step's, its batch made from it: its flags; the export's flags and
 * pitch (or, without CLBT_STEP_EXPORT, that they are unset); the state
 * slots (one table maps no tokens, and the count fits every NONE group's
 * width; without CLBT_STEP_STATE_SLOTS, that count and null block are
 * unset); that one table maps tokens, when the step exports; the batch (a
 * dummy run's counts and padding, or the slot mapping's arguments); the
 * wait list; every exported group's pages.
 */
clbt_status clbt__check_step(const clbt__scope *scope, const clbt_step *step,
                             const clbt__batch *batch, cl_uint num_events,
                             const cl_event *wait_list);

/*
 * A token-slots request's (already read): one table maps tokens;
 * query_start_loc given; num_reqs, num_rows and the entries
 * against the bounds, then the index and slot matrices given; each
 * buffer's context and size (query_start_loc, idx_mapping, token_indices,
 * token_slots); token_slots not the table's storage, and writable by
 * kernels; the wait list.
 */
clbt_status clbt__check_token_slots(const clbt__scope *scope,
                                    const clbt_token_slots_request *request,
                                    cl_uint num_events,
                                    const cl_event *wait_list);

/* Checks a batch's sizes against a table's bounds: CLBT_TOO_MANY_REQUESTS,
   CLBT_TOO_MANY_TOKENS. */
clbt_status clbt__check_batch(const clbt_table *table, uint32_t num_reqs,
                              uint32_t num_tokens);

/*
 * Checks a padded request count, named `name`, against num_reqs (0 means
 * num_reqs) and the table's max_num_reqs.
 */
clbt_status clbt__check_padding(const clbt_table *table, const char *name,
                                uint32_t num_reqs, uint32_t padded);

/* Checks that a step's flags are CLBT_STEP_* flags: a host step's are
   CLBT_STEP_GATHER and CLBT_STEP_EXPORT, a device step may be a dummy run
   and ask for state slots. */
clbt_status clbt__check_step_flags(uint32_t flags, bool on_device);

#endif /* CLBT_CHECKS_H */
