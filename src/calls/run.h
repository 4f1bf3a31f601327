/*
 * The call runner (run.c): every device call of the engine (a commit, a
 * slot mapping, an export, a step, token slots) is a call (clbt__call) on
 * a scope, planned to a list of commands, which is then enqueued as it
 * stands. The call builders
 * (commit_call.c, slot_mapping.c, export.c, step.c, token_slots.c) check
 * their arguments (checks.c) and make the call.
 */
#ifndef CLBT_RUN_H
#define CLBT_RUN_H

#include "engine/engine.h"

/*
 * A call's batch as the caller gave it: a slot mapping's, an export's, a
 * step's (which does both) or token slots'. The fields after num_tokens
 * are 0 or NULL where a call has no such argument.
 */
typedef struct clbt__batch {
  uint32_t num_reqs;
  cl_mem query_start_loc;   /* int32[num_reqs + 1] */
  cl_mem positions;         /* int64[num_tokens]; NULL when num_tokens is 0 */
  uint32_t num_tokens;
  uint32_t num_reqs_padded; /* 0: num_reqs */
  cl_mem seq_lens;          /* int32[num_reqs], or NULL */
  cl_mem idx_mapping;       /* int32[num_reqs], or NULL: the identity */
  uint32_t export_flags;    /* CLBT_EXPORT_* of an export */
  uint32_t dense_row_pitch; /* with CLBT_EXPORT_DENSE; 0: each width */
  uint32_t num_state_slots; /* a step's state slots: ids per request */
  int32_t state_null_block; /* and the id of none */
  uint32_t indices_per_row; /* token slots: num_tokens rows of these */
  cl_mem token_indices;     /* int32[num_tokens][indices_per_row] */
  cl_mem token_slots;       /* int32[sections][num_tokens][indices_per_row] */
} clbt__batch;

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
 * Runs a checked call on a scope: plans it to its list of commands (every
 * kernel built, every staging slot taken and every packet placed; nothing
 * enqueued when that fails), then enqueues the commands as one sequence
 * after the wait list, handing back the last command's event when event
 * is not NULL, then settles what it committed. A commit that fails once
 * something is enqueued leaves the scope's groups stale.
 */
clbt_status clbt__run(const clbt__scope *scope, const clbt__call *call,
                      cl_uint num_events, const cl_event *wait_list,
                      cl_event *event);

#endif /* CLBT_RUN_H */
