/*
 * The call runner (run.c): every device call of the engine (a commit, a
 * slot mapping, an export, a step, token slots) is a call (clbt__call) on
 * a scope, planned once and enqueued once. The call builders
 * (commit_call.c, slot_mapping.c, export.c, step.c, token_slots.c) check
 * their arguments and make the call.
 */
#ifndef CLBT_RUN_H
#define CLBT_RUN_H

#include "calls/batch.h"
#include "engine/engine.h"

/*
 * A device call: an optional commit of rows [0, commit_rows), then the step
 * kernel's work (CLBT_WORK_MAP, _GATHER, _EXPORT with its parts,
 * _STATE_SLOTS, or _TOKEN_SLOTS alone; 0: none) on a batch.
 */
typedef struct clbt__call {
  bool commits;
  uint32_t commit_rows;
  uint32_t work;
  clbt__batch batch;        /* checked; unused when work is 0 */
} clbt__call;

/*
 * Runs a checked call on a scope: plans it (every kernel built, every
 * packet placed, nothing enqueued when that fails), then enqueues the plan
 * as one sequence after the wait list, handing back the last command's
 * event when event is not NULL. A commit that fails once something is
 * enqueued leaves the scope's groups stale.
 */
clbt_status clbt__run(const clbt__scope *scope, const clbt__call *call,
                      cl_uint num_events, const cl_event *wait_list,
                      cl_event *event);

#endif /* CLBT_RUN_H */
